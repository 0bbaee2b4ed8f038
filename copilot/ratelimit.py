"""A sliding-window rate limiter: at most `actions` starts per `window_s` seconds per key, thread-safe, with a bounded
number of keys so a flood of sessions cannot grow memory without end. `Services.rate_limiter` holds the process's
one; copilot.features.limits applies it to LLM-backed actions."""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_KEYS = 10_000


class RateLimited(RuntimeError):
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
                    f"Too many requests: {action} is limited to {self.actions} per {_seconds(self.window_s)} in "
                    f"one session. Try again in {math.ceil(wait)} s.", retry_after=wait)
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


def _seconds(value: float) -> str:
    return f"{value:g} s" if value != 60 else "minute"
