"""A sliding-window rate limiter: at most `actions` starts per `window_s` seconds per key, thread-safe, with a bounded
number of keys so a flood of sessions cannot grow memory without end. `Services.rate_limiter` holds the process's
one; copilot.features.limits applies it to LLM-backed actions."""

from __future__ import annotations

import hmac
import math
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from copilot.errors import UserError

MAX_KEYS = 10_000


class RateLimited(UserError):
    """Too many LLM-backed actions in this session; `retry_after` is the wait in seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimiter:
    """At most `actions` calls of `check(key)` per `window_s` seconds per key; `actions=0` turns it off."""

    def __init__(self, actions: int, window_s: float, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = MAX_KEYS) -> None:
        self.actions = actions
        self.window_s = window_s
        self.clock = clock
        self.max_keys = max_keys
        self._starts: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, key: str, action: str = "this action") -> None:
        """Count one start for `key`, or raise RateLimited (nothing counted) when the window is full."""
        if self.actions <= 0:
            return
        now = self.clock()
        with self._lock:
            starts = self._starts.pop(key, None) or deque()
            while starts and now - starts[0] >= self.window_s:
                starts.popleft()
            self._starts[key] = starts  # most recently used last
            if len(starts) >= self.actions:
                wait = self.window_s - (now - starts[0])
                raise RateLimited(
                    f"Too many requests: {action} is limited to {self.actions} per {_seconds(self.window_s)} for "
                    f"each user. Try again in {math.ceil(wait)} s.", retry_after=wait)
            starts.append(now)
            while len(self._starts) > self.max_keys:
                self._starts.popitem(last=False)

    def remaining(self, key: str) -> int:
        """Starts still allowed for `key` in the current window (for display)."""
        if self.actions <= 0:
            return sys.maxsize
        now = self.clock()
        with self._lock:
            starts = self._starts.get(key) or ()
            return max(0, self.actions - sum(1 for t in starts if now - t < self.window_s))


LOGIN_ATTEMPTS = 5            # failed password tries per account in LOGIN_WINDOW_S before the account is locked
LOGIN_ATTEMPTS_ALL = 30       # …and over all accounts together, so a guesser cannot spread tries across names
LOGIN_WINDOW_S = 60.0


class PasswordGate:
    """The password login (COPILOT_AUTH): compares in constant time, and after LOGIN_ATTEMPTS failed tries on one
    account (or LOGIN_ATTEMPTS_ALL on all) within LOGIN_WINDOW_S refuses every try, right password included,
    until the window has passed. A lock-out can be caused by someone else; that is the price of slowing a
    guesser from hundreds of tries a second to five a minute."""

    def __init__(self, pairs: list[tuple[str, str]], clock: Callable[[], float] = time.monotonic) -> None:
        self._passwords = {user: password.encode() for user, password in pairs}
        self._per_account = RateLimiter(LOGIN_ATTEMPTS, LOGIN_WINDOW_S, clock)
        self._all = RateLimiter(LOGIN_ATTEMPTS_ALL, LOGIN_WINDOW_S, clock)

    def __call__(self, username: str, password: str) -> bool:
        if self._per_account.remaining(username) == 0 or self._all.remaining("") == 0:
            return False
        expected = self._passwords.get(username)
        given = (password or "").encode("utf-8", "replace")
        if expected is not None and hmac.compare_digest(expected, given):
            return True
        for limiter, key in ((self._per_account, username), (self._all, "")):
            try:
                limiter.check(key)
            except RateLimited:
                pass
        return False


def _seconds(value: float) -> str:
    return f"{value:g} s" if value != 60 else "minute"
