"""Where full-text reading stops for a while after a failure to reach arXiv (issue #59 item 2): only the host and the
route (HTML pages or PDFs) that could not be reached, and only for readings as urgent as the failed one or less, so a
PDF host that is down leaves the HTML pages read, and a read-ahead failure never stops a question's reading.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

ROUTE_NAMES = {"html": "HTML pages", "pdf": "PDFs"}


@dataclass(frozen=True)
class Pause:
    host: str
    route: str            # "html" or "pdf"
    until: float          # time.monotonic()
    priority: int         # the failed reading's priority: readings this urgent or less wait

    def said(self) -> str:
        return f"{self.host} ({ROUTE_NAMES.get(self.route, self.route)})"


class Pauses:
    def __init__(self, html_url: str, pdf_url: str, seconds: float) -> None:
        self.hosts = {"html": urlsplit(html_url).netloc, "pdf": urlsplit(pdf_url).netloc}
        self.seconds = seconds
        self._lock = threading.Lock()
        self._pauses: dict[str, Pause] = {}

    def add(self, route: str, priority: int) -> Pause:
        """Pause `route` for readings of `priority` or less urgent (a lower number is more urgent); a pause already
        holding more urgent readings keeps holding them."""
        with self._lock:
            now = time.monotonic()
            held = self._pauses.get(route)
            if held is not None and held.until > now:
                priority = min(priority, held.priority)
            pause = self._pauses[route] = Pause(self.hosts.get(route, ""), route, now + self.seconds, priority)
            return pause

    def holding(self, priority: int) -> list[Pause]:
        """The pauses that hold a reading of `priority` now."""
        with self._lock:
            now = time.monotonic()
            return [p for p in self._pauses.values() if p.until > now and p.priority <= priority]

    def routes(self, priority: int) -> frozenset[str]:
        return frozenset(p.route for p in self.holding(priority))

    def clear(self) -> None:
        with self._lock:
            self._pauses.clear()
