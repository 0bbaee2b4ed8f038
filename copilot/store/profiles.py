"""Research profiles: every saved version of every user's profile, in SQLite."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from copilot.store.db import Database


class BrokenProfile(ValueError):
    """A stored profile version that cannot be read back."""


@dataclass(frozen=True)
class Profile:
    user: str
    text: str
    keywords: list[str]
    paper_ids: list[str]
    version: int
    saved_at: float
    notice: str = field(default="", compare=False)   # what went wrong around saving it (not stored)

    def as_dict(self) -> dict:
        return {"user": self.user, "text": self.text, "keywords": list(self.keywords),
                "paper_ids": list(self.paper_ids), "version": self.version, "saved_at": self.saved_at}


def _string_list(text: str, column: str) -> list[str]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as error:
        raise BrokenProfile(f"its {column} are not valid JSON ({error})") from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BrokenProfile(f"its {column} are not a list of strings")
    return value


class ProfileStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def latest(self, user: str) -> Profile | None:
        """The newest saved version of `user`'s profile; BrokenProfile when it cannot be read."""
        row = self.db.query_one("SELECT user, version, text, keywords, paper_ids, saved_at FROM profiles"
                                " WHERE user = ? ORDER BY version DESC LIMIT 1", (user,))
        if row is None:
            return None
        return Profile(user=row["user"], text=row["text"], keywords=_string_list(row["keywords"], "keywords"),
                       paper_ids=_string_list(row["paper_ids"], "paper ids"), version=int(row["version"]),
                       saved_at=float(row["saved_at"]))

    def save(self, user: str, text: str, keywords: Sequence[str], paper_ids: Sequence[str]) -> Profile:
        """Store the next version of `user`'s profile."""
        now = time.time()
        with self.db.transaction() as tx:
            row = tx.execute("SELECT COALESCE(MAX(version), 0) FROM profiles WHERE user = ?", (user,)).fetchone()
            version = int(row[0]) + 1
            tx.execute("INSERT INTO profiles (user, version, text, keywords, paper_ids, saved_at)"
                       " VALUES (?, ?, ?, ?, ?, ?)",
                       (user, version, text, json.dumps(list(keywords)), json.dumps(list(paper_ids)), now))
        return Profile(user=user, text=text, keywords=list(keywords), paper_ids=list(paper_ids), version=version,
                       saved_at=now)
