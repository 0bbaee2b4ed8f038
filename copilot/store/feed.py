"""Per-user state of the "For you" feed, in SQLite: "more like this" / "not interested" feedback on papers, the
user's visits (the feed lists what arrived since the previous one) and the secret token of their Atom feed URL."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from copilot.store.db import Database

MORE, NOT_INTERESTED = "more", "not"
# A new visit starts when the feed is opened this long after the last one; opening it again sooner (a reload, another
# tab) keeps listing what arrived since the visit before, instead of an empty list.
VISIT_GAP_S = 3600.0


@dataclass(frozen=True)
class Visits:
    last: float | None          # when the feed was last opened
    previous: float | None      # the visit before that: the feed lists what arrived since


class FeedStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # --- feedback
    def set_feedback(self, user: str, paper_id: str, verdict: str) -> None:
        if verdict not in (MORE, NOT_INTERESTED):
            raise ValueError(f"unknown verdict {verdict!r}")
        self.db.execute("INSERT INTO feed_feedback (user, paper_id, verdict, at) VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (user, paper_id) DO UPDATE SET verdict = excluded.verdict, at = excluded.at",
                        (user, paper_id, verdict, time.time()))

    def clear_feedback(self, user: str, paper_id: str) -> None:
        self.db.execute("DELETE FROM feed_feedback WHERE user = ? AND paper_id = ?", (user, paper_id))

    def feedback(self, user: str) -> dict[str, str]:
        """paper id → verdict, oldest first."""
        rows = self.db.query("SELECT paper_id, verdict FROM feed_feedback WHERE user = ? ORDER BY at", (user,))
        return {row["paper_id"]: row["verdict"] for row in rows}

    # --- visits
    def visits(self, user: str) -> Visits:
        row = self.db.query_one("SELECT last_visit, previous_visit FROM feed_users WHERE user = ?", (user,))
        return Visits(row["last_visit"], row["previous_visit"]) if row else Visits(None, None)

    def record_visit(self, user: str, now: float | None = None) -> Visits:
        """Note that the user opened the feed now; returns the visits as they are after it."""
        now = time.time() if now is None else now
        with self.db.transaction() as tx:
            row = tx.execute("SELECT last_visit, previous_visit FROM feed_users WHERE user = ?", (user,)).fetchone()
            if row is None:
                tx.execute("INSERT INTO feed_users (user, last_visit) VALUES (?, ?)", (user, now))
                return Visits(now, None)
            last, previous = row[0], row[1]
            if last is None or now - last >= VISIT_GAP_S:
                previous = last
            tx.execute("UPDATE feed_users SET last_visit = ?, previous_visit = ? WHERE user = ?",
                       (now, previous, user))
            return Visits(now, previous)

    # --- the Atom feed's secret
    def token(self, user: str, renew: bool = False) -> str:
        """The user's feed token, made on first use; `renew` replaces it (the old URL stops working)."""
        with self.db.transaction() as tx:
            row = tx.execute("SELECT token FROM feed_users WHERE user = ?", (user,)).fetchone()
            if row and row[0] and not renew:
                return row[0]
            token = secrets.token_urlsafe(24)
            tx.execute("INSERT INTO feed_users (user, token) VALUES (?, ?)"
                       " ON CONFLICT (user) DO UPDATE SET token = excluded.token", (user, token))
            return token

    def user_of_token(self, token: str) -> str | None:
        if not token or len(token) > 100:
            return None
        row = self.db.query_one("SELECT user FROM feed_users WHERE token = ?", (token,))
        return row["user"] if row else None
