"""Per-session rate limit for LLM-backed actions (ask, generate a profile, trends summaries, related search).

A sliding window per key: at most `actions` starts per `window_s` seconds. The UI calls `check` before it starts
an LLM-backed action, with the key of the session (`session_key(user, session_hash)`); a refused action raises
`RateLimited`, whose message says how long to wait. One limiter per Services (`Services.rate_limiter`, see
copilot/ratelimit.py).
"""

from __future__ import annotations

from copilot.ratelimit import RateLimited, RateLimiter
from copilot.services import Services

__all__ = ["RateLimited", "RateLimiter", "check_rate", "limiter_for", "session_key"]


def session_key(user: str, session_hash: str | None) -> str:
    """The rate-limit key: the browser session (Gradio's session hash) of a user; the user alone without one."""
    return f"{user}|{session_hash}" if session_hash else f"{user}|-"


def limiter_for(services: Services) -> RateLimiter:
    """The one limiter of this Services (the web app has one Services, so one limiter per process)."""
    return services.rate_limiter


def check_rate(services: Services, user: str, session_hash: str | None, action: str = "this action") -> None:
    """What a UI callback calls before an LLM-backed action; raises RateLimited with a user-facing message."""
    limiter_for(services).check(session_key(user, session_hash), action)
