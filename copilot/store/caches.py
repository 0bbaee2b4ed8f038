"""Caches of LLM work, in SQLite: PRISM's aspect descriptions of a paper and whole Trends reports."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from copilot.store.db import Database


class AspectCache:
    """Aspect descriptions keyed by (paper content hash, model, variant, aspect)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, content_hash: str, model: str, variant: str) -> dict[str, str]:
        """{aspect: description} of what is cached for this paper, model and prompt variant."""
        rows = self.db.query("SELECT aspect, text FROM related_aspect_cache WHERE content_hash = ? AND model = ?"
                             " AND variant = ?", (content_hash, model, variant))
        return {row["aspect"]: row["text"] for row in rows}

    def put(self, content_hash: str, model: str, variant: str, descriptions: Mapping[str, str]) -> None:
        with self.db.transaction() as tx:
            for aspect, text in descriptions.items():
                tx.execute("INSERT OR REPLACE INTO related_aspect_cache (content_hash, model, variant, aspect, text,"
                           " created_at) VALUES (?,?,?,?,?,?)",
                           (content_hash, model, variant, aspect, text, time.time()))


@dataclass(frozen=True)
class CachedReport:
    key: str
    user: str
    profile_version: int | None
    start: str                     # ISO dates of the period
    end: str
    categories: str                # comma-separated
    corpus_version: str
    report: str                    # the report as the Trends feature serialized it


class TrendsCache:
    """Trends reports keyed by everything that decides them (the feature builds the key)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, key: str) -> str | None:
        """The serialized report stored under `key`."""
        row = self.db.query_one("SELECT report FROM trends_cache WHERE key = ?", (key,))
        return row["report"] if row else None

    def put(self, entry: CachedReport) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO trends_cache (key, user, profile_version, start, end, categories, corpus_version,"
            " created_at, report) VALUES (?,?,?,?,?,?,?,?,?)",
            (entry.key, entry.user, entry.profile_version, entry.start, entry.end, entry.categories,
             entry.corpus_version, time.time(), entry.report))
