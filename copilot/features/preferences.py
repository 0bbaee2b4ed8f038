"""Preference data out: every voted comparison as one JSON line, ready for a DPO trainer.

A decisive vote (one answer better) is a pair: `prompt` (the question), `chosen` and `rejected` (the two answers as
revealed after the vote, source labels turned back into ids) — the columns TRL's DPO trainer reads — with the arm
of each (`thoughts` = papers + thoughts, `raw` = papers only) and its sources. The two sides were given different
sources, so each answer also carries what it was given (`context`: its sources' stored texts, labelled by id, as
stored now; the answer saw them cut to the turn's budget) and the policy that produced it (`extractive`: quotes the
embedder chose, no model wrote a word; else `model:<name>`), and the row says whether its vote was cast blind
(README "Preference data" says which rows suit which trainer). A tie or "both bad" is a row with its
label and no pair (`chosen`/`rejected` null). Every row also has both answers as shown (`answers`, side A first),
the model, backend and embedder, the user as a salted hash (the salt is made once and kept in the app's database,
never exported), the turn id and the times. Rows share one set of keys, so `datasets` reads the file as one table.

The file is written under a temporary name and renamed. With COPILOT_HUB_PREFERENCES and HF_TOKEN set it can be
pushed to a Hugging Face dataset with the client the backups use, within COPILOT_HUB_TIMEOUT for the whole call; a
push that fails says why and leaves the local file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import tempfile
from datetime import date, datetime, timezone
from pathlib import Path

from copilot.errors import UserError
from copilot.features.backup import _reason, _within_deadline, hub_api
from copilot.features.chat_view import shown_sources
from copilot.methods.thought_retriever import labels_to_ids
from copilot.records import Evidence
from copilot.services import Services
from copilot.store.app_keys import EXPORT_SALT, AppKeys
from copilot.store.chat_log import RAW, THOUGHTS, ChatLog, StoredTurn, Vote

log = logging.getLogger(__name__)
LABELS = {THOUGHTS: "pair", RAW: "pair", "tie": "tie", "bad": "both_bad"}
EXPORT_FOLDER = "exports"                 # under the data dir
SINGLE_USER = "local"                     # the one user of an app without sign-in (ui.common.LOCAL_USER)
FULL_PATH_IN_REPO = "data/preferences.jsonl"


def parse_day(day: str | None) -> float | None:
    """The UTC midnight starting `day` (YYYY-MM-DD) as a timestamp; None for None."""
    if day is None:
        return None
    try:
        parsed = date.fromisoformat(day.strip())
    except ValueError:
        raise UserError(f"--since takes a day as YYYY-MM-DD, e.g. 2026-11-01, not {day[:40]!r}") from None
    return datetime(parsed.year, parsed.month, parsed.day, tzinfo=timezone.utc).timestamp()


def user_hash(salt: str, user: str) -> str:
    """A stable pseudonym of `user`: HMAC-SHA256 under the app's salt, 16 hex digits."""
    return hmac.new(salt.encode(), user.encode(), hashlib.sha256).hexdigest()[:16]


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


def policy_of(written: bool, model: str) -> str:
    """`model:<name>` for an answer whose words a model wrote (as recorded with the turn), else `extractive` (the
    evidence table alone: no model wrote it)."""
    return f"model:{model}" if written else "extractive"


def _context(stored, texts: dict[str, str]) -> str:
    """What an answer was given: each source's stored text under its id (a deleted thought's text is not kept)."""
    return "\n\n".join(f"[{s.id}] {texts.get(s.id, '(no longer stored)')}" for s in stored.sources)


def _answer(turn: StoredTurn, kind: str, side: str, texts: dict[str, str]) -> dict:
    stored = turn.answer(kind)
    # the answer's labels count its table's rows first, then its other sources (chat_view.shown_sources)
    evidence = [Evidence(id=s.id, kind=s.kind, title=s.title, text="", score=s.score)
                for s in shown_sources(stored.table, stored.sources)]
    sources = [{"id": s.id, "kind": s.kind, "title": s.title if s.kind == "paper" else ""} for s in stored.sources]
    return {"side": side, "arm": kind, "text": labels_to_ids(stored.text or "", evidence), "sources": sources,
            "context": _context(stored, texts), "policy": policy_of(stored.words is not None, turn.model)}


def source_texts(services: Services, turns: list[StoredTurn]) -> dict[str, str]:
    """The stored text of every source of `turns`: a paper's title and abstract, a thought's text (unless deleted)."""
    sources = {s.id: s.kind for turn in turns for kind in (RAW, THOUGHTS) for s in turn.answer(kind).sources}
    papers = [i for i, kind in sources.items() if kind == "paper"]
    texts = {p.id: f"{p.title}\n{p.abstract}" for p in services.store.get_papers(papers)} if papers else {}
    for thought_id in (i for i, kind in sources.items() if kind == "thought"):
        row = services.thoughts.get(thought_id, include_hidden=True)
        if row is not None and row.deleted_at is None:
            texts[thought_id] = row.text
    return texts


def preference_row(turn: StoredTurn, vote: Vote, salt: str, texts: dict[str, str] | None = None) -> dict:
    """One exported line for a voted comparison; `texts`: the sources' stored texts (source_texts)."""
    other = {THOUGHTS: RAW, RAW: THOUGHTS}
    side_b = other[turn.side_a]
    texts = texts or {}
    answers = {turn.side_a: _answer(turn, turn.side_a, "A", texts), side_b: _answer(turn, side_b, "B", texts)}
    pair = vote.choice in (THOUGHTS, RAW)
    chosen, rejected = (answers[vote.choice], answers[other[vote.choice]]) if pair else ({}, {})
    return {
        "prompt": turn.question,
        "chosen": chosen["text"] if pair else None,
        "rejected": rejected["text"] if pair else None,
        "label": LABELS[vote.choice],
        "chosen_arm": chosen["arm"] if pair else None,
        "rejected_arm": rejected["arm"] if pair else None,
        "chosen_sources": chosen["sources"] if pair else None,
        "rejected_sources": rejected["sources"] if pair else None,
        "chosen_side": chosen["side"] if pair else None,
        "chosen_context": chosen["context"] if pair else None,
        "rejected_context": rejected["context"] if pair else None,
        "chosen_policy": chosen["policy"] if pair else None,
        "rejected_policy": rejected["policy"] if pair else None,
        "answers": [answers[turn.side_a], answers[side_b]],
        "model": turn.model,
        "backend": turn.backend,
        "embedder": turn.embedder,
        "personalized": turn.personalized,
        "user": user_hash(salt, turn.user),
        "turn_id": turn.id,
        "asked_at": _iso(turn.created_at),
        "voted_at": _iso(vote.voted_at),
        "vote_changes": vote.changes,
        # the comparison's first vote and whether it was cast blind: only a blind first vote enters the statistics;
        # `chosen`/`rejected` follow the current vote, which may be a change made after the sides were shown
        "first_choice": vote.first_choice or vote.choice,
        "blind": vote.blind,
        "changed_after_reveal": vote.changes > 0,
        "counted_in_stats": vote.counted,
    }


def _write_atomically(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in lines)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def export_preferences(services: Services, since: str | None = None, out: str | Path | None = None) -> dict:
    """Write every voted comparison (voted on or after `since`, a UTC day) as JSON lines to `out` (default: a new
    file under the data dir's exports/). Returns {"path", "count", "pairs", "ties", "both_bad", "since", "message"}.
    With no votes the file is written empty and the message says so."""
    start = parse_day(since)
    salt = AppKeys(services.db).get_or_make(EXPORT_SALT)
    voted = ChatLog(services.db).voted_comparisons(start)
    texts = source_texts(services, [turn for turn, _ in voted])
    rows = [preference_row(turn, vote, salt, texts) for turn, vote in voted]
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = Path(out) if out else Path(services.settings.data_dir) / EXPORT_FOLDER / f"preferences-{stamp}.jsonl"
    if path.is_dir():
        raise UserError(f"{path} is a folder; give a file name for the export")
    _write_atomically(path, [json.dumps(row, ensure_ascii=False) for row in rows])
    counts = {label: sum(row["label"] == label for row in rows) for label in ("pair", "tie", "both_bad")}
    scope = f" since {since.strip()}" if since else ""
    message = (f"Wrote {len(rows)} voted comparisons{scope} ({counts['pair']} preference pairs, {counts['tie']} "
               f"ties, {counts['both_bad']} both bad) to {path}." if rows else
               f"No votes on finished comparisons{scope} yet: wrote an empty file, {path}.")
    return {"path": str(path), "count": len(rows), "pairs": counts["pair"], "ties": counts["tie"],
            "both_bad": counts["both_bad"], "since": since.strip() if since else None, "message": message}


def push_preferences(services: Services, export: dict, api=None) -> dict:
    """Push an export (the result of `export_preferences`) to the dataset COPILOT_HUB_PREFERENCES, within
    COPILOT_HUB_TIMEOUT for the whole call. Never raises: returns {"status": "ok" | "failed" | "skipped", ...} with
    the reason; the local file stays either way. A full export replaces data/preferences.jsonl in the repository; one
    limited by a day goes beside it, to partial/, so it never replaces the full one."""
    settings = services.settings
    repository = settings.hub_preferences
    if not repository:
        return {"status": "skipped", "reason": "COPILOT_HUB_PREFERENCES is not set", "repository": None}
    if export["count"] == 0:
        return {"status": "skipped", "reason": "nothing to push: the export is empty", "repository": repository}
    if settings.hub_token is None and api is None:
        return {"status": "failed", "error": "no HF_TOKEN set: the push needs a token with write access to "
                f"{repository}; the export stays at {export['path']}", "repository": repository}
    path_in_repo = (f"partial/preferences-since-{export['since']}.jsonl" if export.get("since") else FULL_PATH_IN_REPO)
    try:
        client = api or hub_api(settings)
        _within_deadline(settings, lambda: _upload(client, repository, Path(export["path"]), path_in_repo))
    except Exception as error:      # noqa: BLE001 - reported with the reason; the local file stays
        reason = _reason(settings, error)
        log.warning("push of preference data to %s failed: %s", repository, reason)
        return {"status": "failed", "error": f"{reason}; the export stays at {export['path']}",
                "repository": repository}
    return {"status": "ok", "repository": repository, "path_in_repo": path_in_repo, "count": export["count"]}


def _upload(api, repository: str, path: Path, path_in_repo: str) -> None:
    from huggingface_hub import CommitOperationAdd

    api.create_repo(repository, repo_type="dataset", private=True, exist_ok=True)
    api.create_commit(repository, operations=[CommitOperationAdd(path_in_repo=path_in_repo,
                                                                 path_or_fileobj=str(path))],
                      repo_type="dataset", commit_message=f"Research Copilot preference data ({path_in_repo})")


def export_and_push(services: Services, since: str | None = None, out: str | Path | None = None, api=None) -> dict:
    """The export, then the push when a dataset is set: {"export": …, "push": …}."""
    export = export_preferences(services, since, out)
    return {"export": export, "push": push_preferences(services, export, api)}


def may_export(services: Services, user: str) -> bool:
    """Who may download every user's voted comparisons: an admin (COPILOT_ADMINS), or the one local user of an app
    without sign-in (nobody else's questions are in it)."""
    return user in services.settings.admins or (user == SINGLE_USER and not services.settings.auth)


def export_for(services: Services, user: str, since: str | None = None) -> dict:
    """The export (and push, where a dataset is set) for the Stats tab's download; refused for other users, whose
    download would hold other people's questions."""
    if not may_export(services, user):
        raise UserError("Only an admin (COPILOT_ADMINS) may download the preference data: it holds every user's "
                        "questions and answers.")
    return export_and_push(services, since)
