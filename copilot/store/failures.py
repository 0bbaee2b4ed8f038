"""Failures the product works around instead of stopping (an unreadable profile, papers not stored with a profile):
each is logged where it happens and recorded here, so `python -m copilot status --json` can count them."""

from __future__ import annotations

import time
from dataclasses import dataclass

from copilot.store.db import Database

MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class FailureCount:
    kind: str
    count: int
    last_at: float
    last_reason: str


class FailureLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, kind: str, reason: str) -> None:
        self.db.execute("INSERT INTO failures (kind, reason, at) VALUES (?, ?, ?)",
                        (kind, reason[:MAX_REASON_CHARS], time.time()))

    def counts(self) -> list[FailureCount]:
        """One entry per kind that happened, with its latest reason; by kind."""
        rows = self.db.query(
            "SELECT f.kind, COUNT(*) AS count, MAX(f.at) AS last_at,"
            " (SELECT g.reason FROM failures g WHERE g.kind = f.kind ORDER BY g.at DESC, g.id DESC LIMIT 1)"
            " AS last_reason FROM failures f GROUP BY f.kind ORDER BY f.kind")
        return [FailureCount(**row) for row in rows]
