"""Profile use cases: a researcher's saved research profile (versioned, per user), and papers by pasted id.

Shared interface (Trends and Chat import it): `Profile`, `load_profile`, `save_profile`. Looking up an author's
papers is `profile_lookup.py`; drafting a profile from papers is `profile_draft.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from copilot.errors import UserError, failure_sentence
from copilot.features.library import ingestor
from copilot.records import Paper, parse_arxiv_id, parse_id_list, storable_text
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSourceError
from copilot.store.profiles import (  # noqa: F401 - Trends, Chat and the Profile tab import them here
    BrokenProfile,
    Profile,
)

log = logging.getLogger(__name__)

MAX_KEYWORDS = 10
MAX_PROFILE_CHARS = 20000
DEFAULT_USER = "local"        # the single local user; equals copilot.ui.common.LOCAL_USER
PROFILE_UNREADABLE = "profile_unreadable"                  # failure kinds counted in `status --json`
PROFILE_PAPERS_NOT_STORED = "profile_papers_not_stored"
NOT_FOUND_HINT = "You can also paste arXiv ids or links, or paste a text about your research."


class ProfileError(UserError, ValueError):
    """Bad input or a fault the user can act on; the message says what to do."""


def _check_user(user: str) -> str:
    user = (user or "").strip()
    if not user:
        raise ProfileError("no user given")
    return user


def load_profile(services: Services, user: str) -> Profile | None:
    """The latest saved version of `user`'s profile, None if they never saved one (BrokenProfile: unreadable)."""
    return services.profiles.latest(_check_user(user))


def profile_for_personalizing(services: Services, user: str) -> tuple[Profile | None, str]:
    """(profile, notice) for adapting answers to `user`. A profile that cannot be read is not used: the notice
    says so, and the failure is logged and counted (`status --json`)."""
    try:
        return load_profile(services, user), ""
    except Exception as error:
        reason = f"{type(error).__name__}: {error}"
        log.warning("profile of %s not read, so not used: %s", user, reason)
        services.failures.record(PROFILE_UNREADABLE, f"user {user}: {reason}")
        return None, "Your saved profile could not be read, so this is not personalized. Save your profile again."


def reader_text(services: Services, user: str, max_chars: int = 600) -> tuple[str, str]:
    """(the profile text a chat answer is adapted to, notice)."""
    profile, notice = profile_for_personalizing(services, user)
    return (" ".join(profile.text.split())[:max_chars] if profile else ""), notice


def saved_papers(services: Services, profile: Profile) -> list[Paper]:
    """The stored papers of a saved profile (those not in the library are left out)."""
    return services.store.get_papers(profile.paper_ids)


def _clean_keywords(keywords: Sequence[str] | str) -> list[str]:
    if isinstance(keywords, str):
        keywords = keywords.replace("\n", ",").split(",")
    seen: dict[str, str] = {}
    for word in keywords:
        word = " ".join(storable_text(str(word)).split()).strip(" .;:-*\"'")
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


def upsert_selected(services: Services, user: str, ids: Sequence[str], given: dict[str, Paper] | None = None) -> int:
    """Put the selected papers into the paper store (those not already there) through the ingestion pipeline
    (its lock and its run record); returns how many were added.

    Papers given as objects are used as they are; missing ids are fetched from arXiv (ArxivSourceError
    propagates; IngestBusy when another ingestion is running). Stored papers are left alone: the scheduled
    ingestion keeps them current.
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
    if not papers:
        return 0
    return ingestor(services).run(f"profile:{user}", papers).added


def save_profile(services: Services, user: str, text: str, keywords: Sequence[str] | str,
                 paper_ids: Sequence[str | Paper]) -> Profile:
    """Save a new version of `user`'s profile and upsert the selected papers into the paper store. Papers that
    cannot be stored now do not stop the save: the returned profile's `notice` says so, and the failure is
    logged and counted (`status --json`)."""
    user = _check_user(user)
    text = storable_text(text).strip()
    if not text:
        raise ProfileError("the profile text is empty; write or generate it first")
    if len(text) > MAX_PROFILE_CHARS:
        raise ProfileError(f"the profile text is too long ({len(text)} characters; at most {MAX_PROFILE_CHARS})")
    ids, given = _paper_ids(paper_ids)
    words = _clean_keywords(keywords)
    notice = ""
    if ids:
        try:
            upsert_selected(services, user, ids, given)
        except Exception as error:  # the profile is still worth saving; the papers can come later
            reason = f"{type(error).__name__}: {error}"
            log.warning("selected papers of %s not stored: %s", user, reason)
            services.failures.record(PROFILE_PAPERS_NOT_STORED, f"user {user}: {reason}"[:500])
            notice = failure_sentence("Saved, but your papers could not be added to the library now", error,
                                      "They stay listed in your profile; save again later to add them.")
    profile = services.profiles.save(user, text, words, ids)
    if ids and not notice:
        from copilot.features.fulltext import AHEAD, read_soon

        read_soon(services, ids, AHEAD)          # their own papers: what they ask about first
    return replace(profile, notice=notice)


# --- papers by id ---------------------------------------------------------------------------------------------
def papers_from_ids(services: Services, text: str, limit: int | None = None) -> tuple[list[Paper], str]:
    """The papers for pasted ids/links (from the paper store, else arXiv), and a message about what is missing."""
    wanted, bad = parse_id_list(text)
    limit = limit or services.settings.profile_max_papers
    if not wanted:
        raise ProfileError("no arXiv id or link found; paste ids like 2401.01234 or https://arxiv.org/abs/2401.01234")
    notes = [f"not arXiv ids, ignored: {', '.join(bad[:5])}"] if bad else []
    if len(wanted) > limit:
        notes.append(f"only the first {limit} ids are used")
        wanted = wanted[:limit]
    base = {token: parsed[0] for token in wanted if (parsed := parse_arxiv_id(token))}
    found = {p.id: p for p in services.store.get_papers(list(base.values()))}
    missing = [token for token in wanted if base[token] not in found]
    if missing:
        try:
            found.update({p.id: p for p in services.arxiv.by_ids(missing)})
        except ArxivSourceError as error:
            raise ProfileError(failure_sentence("arXiv could not be reached to fetch these papers", error,
                                                "Your saved profile is unchanged; papers already in the library "
                                                "can still be pasted.")) from None
    not_found = [token for token in wanted if base[token] not in found]
    if not_found:
        notes.append(f"not found on arXiv: {', '.join(not_found[:5])}")
    papers = [found[base[token]] for token in wanted if base[token] in found]
    if not papers:
        raise ProfileError("none of these ids was found on arXiv; check them, or look up your name or paste a text")
    return papers, "; ".join(notes)
