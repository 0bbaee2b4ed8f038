"""Profile use cases: a researcher's saved research profile (versioned, per user).

Shared interface (Trends and Chat import it): `Profile`, `load_profile`, `save_profile`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from copilot.records import Paper, parse_arxiv_id
from copilot.services import Services

log = logging.getLogger(__name__)

MAX_KEYWORDS = 10
MAX_PROFILE_CHARS = 20000


class ProfileError(ValueError):
    """Bad input or a fault the user can act on; the message says what to do."""


@dataclass
class Profile:
    user: str
    text: str
    keywords: list[str]
    paper_ids: list[str]
    version: int
    saved_at: float

    def as_dict(self) -> dict:
        return {"user": self.user, "text": self.text, "keywords": list(self.keywords),
                "paper_ids": list(self.paper_ids), "version": self.version, "saved_at": self.saved_at}


def _check_user(user: str) -> str:
    user = (user or "").strip()
    if not user:
        raise ProfileError("no user given")
    return user


def load_profile(services: Services, user: str) -> Profile | None:
    """The latest saved version of `user`'s profile, None if they never saved one."""
    row = services.db.query_one(
        "SELECT user, version, text, keywords, paper_ids, saved_at FROM profiles WHERE user = ? "
        "ORDER BY version DESC LIMIT 1", (_check_user(user),))
    if row is None:
        return None
    return Profile(user=row["user"], text=row["text"], keywords=json.loads(row["keywords"]),
                   paper_ids=json.loads(row["paper_ids"]), version=int(row["version"]),
                   saved_at=float(row["saved_at"]))


def _clean_keywords(keywords: Sequence[str] | str) -> list[str]:
    if isinstance(keywords, str):
        keywords = keywords.replace("\n", ",").split(",")
    seen: dict[str, str] = {}
    for word in keywords:
        word = " ".join(str(word).split()).strip(" .;:-*\"'")
        if word and word.lower() not in seen and len(word) <= 80:
            seen[word.lower()] = word
    return list(seen.values())[:MAX_KEYWORDS]


def _paper_ids(papers: Sequence[str | Paper]) -> tuple[list[str], dict[str, Paper]]:
    ids, given = [], {}
    for item in papers:
        if isinstance(item, Paper):
            pid = item.id
            given[pid] = item
        else:
            parsed = parse_arxiv_id(str(item))
            if not parsed:
                raise ProfileError(f"not an arXiv id: {str(item)[:60]!r}")
            pid = parsed[0]
        if pid not in ids:
            ids.append(pid)
    return ids, given


def upsert_selected(services: Services, ids: Sequence[str], given: dict[str, Paper] | None = None) -> int:
    """Put the selected papers into the paper store (those not already there); returns how many were added.

    Papers given as objects are used as they are; missing ids are fetched from arXiv (ArxivSourceError
    propagates). Stored papers are left alone: the scheduled ingestion keeps them current.
    """
    given = given or {}
    stored = services.store.paper_versions(list(ids))
    missing = [pid for pid in ids if pid not in stored]
    if not missing:
        return 0
    papers = [given[pid] for pid in missing if pid in given]
    to_fetch = [pid for pid in missing if pid not in given]
    if to_fetch:
        papers += services.arxiv.by_ids(to_fetch)
    if papers:
        services.store.upsert_papers(papers, services.embedder.embed([p.document for p in papers]))
    return len(papers)


def save_profile(services: Services, user: str, text: str, keywords: Sequence[str] | str,
                 paper_ids: Sequence[str | Paper]) -> Profile:
    """Save a new version of `user`'s profile and upsert the selected papers into the paper store."""
    user = _check_user(user)
    text = (text or "").strip()
    if not text:
        raise ProfileError("the profile text is empty; write or generate it first")
    if len(text) > MAX_PROFILE_CHARS:
        raise ProfileError(f"the profile text is too long ({len(text)} characters; at most {MAX_PROFILE_CHARS})")
    ids, given = _paper_ids(paper_ids)
    words = _clean_keywords(keywords)
    if ids:
        try:
            upsert_selected(services, ids, given)
        except Exception as error:  # the profile is still worth saving; the papers come later
            log.warning("selected papers not upserted: %s", error)
    now = time.time()
    with services.db.transaction() as conn:
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM profiles WHERE user = ?", (user,)).fetchone()
        version = int(row[0]) + 1
        conn.execute("INSERT INTO profiles (user, version, text, keywords, paper_ids, saved_at) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     (user, version, text, json.dumps(words), json.dumps(ids), now))
    return Profile(user=user, text=text, keywords=words, paper_ids=ids, version=version, saved_at=now)
