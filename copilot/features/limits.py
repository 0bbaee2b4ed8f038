"""Per-user rate limit for LLM-backed actions (ask, generate a profile, trends summaries, related search).

A sliding window per key: at most `actions` starts per `window_s` seconds. The UI calls `check` before it starts
an LLM-backed action, with the key `session_key(user, scope)`: the user alone when signed in (every session of
theirs shares one budget), the local user and the client's address otherwise (ui.common.rate_scope); a refused
action raises `RateLimited`, whose message says how long to wait. One limiter per Services (`Services.rate_limiter`, see
copilot/ratelimit.py).
"""

from __future__ import annotations

from copilot.ratelimit import RateLimited, RateLimiter
from copilot.services import Services

__all__ = ["RateLimited", "RateLimiter", "check_rate", "limiter_for", "session_key"]


def session_key(user: str, scope: str | None) -> str:
    """The rate-limit key: a user, within `scope` when one is given (the client of the account-less local user)."""
    return f"{user}|{scope}" if scope else f"{user}|-"


def limiter_for(services: Services) -> RateLimiter:
    """The one limiter of this Services (the web app has one Services, so one limiter per process)."""
    return services.rate_limiter


def check_rate(services: Services, user: str, scope: str | None, action: str = "this action") -> None:
    """What a UI callback calls before an LLM-backed action; raises RateLimited with a user-facing message."""
    limiter_for(services).check(session_key(user, scope), action)
