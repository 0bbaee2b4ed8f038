"""Chat turns, votes, the vote log and the thought jobs of turns, in SQLite.

A turn has two answers stored in named columns: `raw_*` (papers only) and `thoughts_*` (papers ∪ thoughts). Every
write commits before it returns; opened inside a caller's transaction (`Database.transaction`), it joins it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from copilot.records import Evidence
from copilot.store.db import Database
from copilot.table import EvidenceTable

THOUGHTS, RAW = "thoughts", "raw"       # the two answers of a turn
PREVIEW_CHARS = 200


@dataclass(frozen=True)
class SourceRecord:
    """One retrieved item as a turn stores it."""
    id: str
    kind: str
    title: str
    preview: str
    score: float

    @classmethod
    def of(cls, item: Evidence) -> SourceRecord:
        preview = " ".join(item.text.split())[:PREVIEW_CHARS]
        title = item.title if item.kind == "paper" else preview[:120]
        return cls(id=item.id, kind=item.kind, title=title, preview=preview, score=round(item.score, 4))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StoredAnswer:
    text: str | None
    error: str | None
    seconds: float | None
    sources: tuple[SourceRecord, ...]
    table: EvidenceTable | None = None     # the evidence table the answer shows (None: none, or an older turn)
    words: str | None = None               # a model's own words above the table (None: the table alone, no model)


@dataclass(frozen=True)
class NewTurn:
    id: str
    user: str
    created_at: float
    question: str
    question_chars: int            # of the question as typed, before any cut
    comparison: str
    side_a: str                    # THOUGHTS | RAW: the answer shown as A
    backend: str
    model: str
    embedder: str
    personalized: bool
    retrieval_s: float
    raw_sources: tuple[SourceRecord, ...]
    thoughts_sources: tuple[SourceRecord, ...]
    asked: str = ""                # the user's own words when `question` is their follow-up made standalone
    scope: tuple[str, ...] = ()    # the papers the question was asked of (features.scope); () the library


@dataclass(frozen=True)
class AnswerOutcome:
    text: str
    error: str | None
    seconds: float | None
    table: EvidenceTable | None = None
    words: str | None = None       # a model's checked words (None: no model wrote this answer)


@dataclass(frozen=True)
class StoredTurn:
    id: str
    user: str
    created_at: float
    finished_at: float | None
    question: str
    comparison: str                # "pending" → "yes" | "same_items" | "same_answer" | "failed"
    side_a: str
    backend: str
    model: str
    embedder: str
    personalized: bool
    retrieval_s: float | None
    raw: StoredAnswer
    thoughts: StoredAnswer
    revealed_at: float | None = None   # when the sides were first shown (the vote, or a command printing them)
    asked: str = ""                # the user's own words when `question` is their follow-up made standalone
    scope: tuple[str, ...] = ()    # the papers the question was asked of (features.scope); () the library

    def answer(self, kind: str) -> StoredAnswer:
        if kind == RAW:
            return self.raw
        if kind == THOUGHTS:
            return self.thoughts
        raise ValueError(f"an answer is {RAW!r} or {THOUGHTS!r}, not {kind!r}")


@dataclass(frozen=True)
class Vote:
    turn_id: str
    user: str
    choice: str                    # THOUGHTS | RAW | "tie" | "bad"
    label: str                     # "A" | "B" | "tie" | "bad": as the user saw it
    voted_at: float                # of the first vote
    changes: int
    first_choice: str | None = None   # the comparison's first vote: the one the experiment counts
    blind: bool | None = None      # the first vote was cast before the sides were shown (None: not recorded)

    @property
    def counted(self) -> bool:
        """Whether the experiment's statistics count this comparison (its first vote, cast blind)."""
        return self.blind is not False


@dataclass(frozen=True)
class ComparisonVote:
    """The first vote on a finished comparison, with the side the thought-augmented answer was shown on (for stats)."""
    choice: str
    voted_at: float
    user: str
    side_a: str
    # the turn's model and whether it wrote the papers-only answer's words: the policy of the pair (not part of the
    # vote's identity)
    model: str = field(default="", compare=False)
    written: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class TurnSummary:
    id: str
    created_at: float
    question: str
    comparison: str
    side_a: str
    choice: str | None
    label: str | None
    changes: int | None
    thought: str | None            # status of the turn's current thought job
    scope: str = ""                # the papers the question was asked of, space-separated ("": the library)


@dataclass(frozen=True)
class ThoughtJob:
    """One attempt at the turn's one thought; the current one has `superseded_at` None."""
    id: int
    turn_id: str
    answer: str                    # THOUGHTS | RAW: the answer the thought is made from
    trigger: str
    status: str
    thought_id: str | None
    similarity: float | None
    error: str | None
    reason: str | None
    queued_at: float
    started_at: float | None
    finished_at: float | None
    planned_thought_id: str | None
    runner: str | None
    superseded_at: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class JobOutcome:
    status: str
    thought_id: str | None
    similarity: float | None
    error: str | None
    reason: str | None


_JOB_COLUMNS = ("id, turn_id, answer, trigger, status, thought_id, similarity, error, reason, queued_at, started_at,"
                " finished_at, planned_thought_id, runner, superseded_at")


def _sources(text: str) -> tuple[SourceRecord, ...]:
    return tuple(SourceRecord(id=s["id"], kind=s["kind"], title=s["title"], preview=s.get("preview", ""),
                              score=s.get("score", 0.0)) for s in json.loads(text))


def _sources_json(sources: tuple[SourceRecord, ...]) -> str:
    return json.dumps([s.as_dict() for s in sources])


def _turn(row) -> StoredTurn:
    return StoredTurn(
        id=row["id"], user=row["user"], created_at=row["created_at"], finished_at=row["finished_at"],
        question=row["question"], comparison=row["comparison"], side_a=row["side_a"], backend=row["backend"],
        model=row["model"], embedder=row["embedder"], personalized=bool(row["personalized"]),
        retrieval_s=row["retrieval_s"],
        raw=StoredAnswer(row["raw_answer"], row["raw_error"], row["raw_s"], _sources(row["raw_sources"]),
                         EvidenceTable.from_json(row["raw_table"]), row["raw_words"]),
        thoughts=StoredAnswer(row["thoughts_answer"], row["thoughts_error"], row["thoughts_s"],
                              _sources(row["thoughts_sources"]), EvidenceTable.from_json(row["thoughts_table"]),
                              row["thoughts_words"]),
        revealed_at=row["revealed_at"], asked=row["asked"] or "",
        scope=tuple((row["scope"] or "").split()))


_VOTE_COLUMNS = "turn_id, user, choice, label, voted_at, changes, first_choice, blind"


def _vote(row, prefix: str = "") -> Vote:
    fields = {name: row[prefix + name] for name in _VOTE_COLUMNS.split(", ")}
    fields["blind"] = None if fields["blind"] is None else bool(fields["blind"])
    return Vote(**fields)


def _job(row) -> ThoughtJob:
    return ThoughtJob(**{name: row[name] for name in ThoughtJob.__dataclass_fields__})


class ChatLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    # --- turns
    def add_turn(self, turn: NewTurn) -> None:
        self.db.execute(
            "INSERT INTO chat_turns (id, user, created_at, question, question_chars, comparison, side_a, backend,"
            " model, embedder, personalized, retrieval_s, raw_sources, thoughts_sources, asked, scope)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (turn.id, turn.user, turn.created_at, turn.question, turn.question_chars, turn.comparison, turn.side_a,
             turn.backend, turn.model, turn.embedder, int(turn.personalized), turn.retrieval_s,
             _sources_json(turn.raw_sources), _sources_json(turn.thoughts_sources), turn.asked,
             " ".join(turn.scope)))

    def finish_turn(self, turn_id: str, comparison: str, raw: AnswerOutcome | None,
                    thoughts: AnswerOutcome | None, at: float | None = None) -> None:
        """Record how a turn ended; an answer the turn did not have (None) leaves its columns alone."""
        with self.db.transaction() as tx:
            tx.execute("UPDATE chat_turns SET comparison = ?, finished_at = ? WHERE id = ?",
                       (comparison, at or time.time(), turn_id))
            for kind, outcome in ((RAW, raw), (THOUGHTS, thoughts)):
                if outcome is not None:
                    table = outcome.table.to_json() if outcome.table is not None else None
                    tx.execute(f"UPDATE chat_turns SET {kind}_answer = ?, {kind}_error = ?, {kind}_s = ?,"
                               f" {kind}_table = ?, {kind}_words = ? WHERE id = ?",
                               (outcome.text, outcome.error, outcome.seconds, table, outcome.words or None, turn_id))

    def forget_turn(self, turn_id: str) -> bool:
        """Delete a turn nobody saw answered (its page asked again before its answers were done): only one with no
        vote and no thought job."""
        with self.db.transaction() as tx:
            cursor = tx.execute(
                "DELETE FROM chat_turns WHERE id = ? AND NOT EXISTS (SELECT 1 FROM chat_votes WHERE turn_id = ?)"
                " AND NOT EXISTS (SELECT 1 FROM chat_vote_log WHERE turn_id = ?)"
                " AND NOT EXISTS (SELECT 1 FROM chat_thought_jobs WHERE turn_id = ?)"
                " AND NOT EXISTS (SELECT 1 FROM chat_judgements WHERE turn_id = ?)",
                (turn_id, turn_id, turn_id, turn_id, turn_id))
            return cursor.rowcount > 0

    def turn(self, turn_id: str) -> StoredTurn | None:
        row = self.db.query_one("SELECT * FROM chat_turns WHERE id = ?", (turn_id,))
        return _turn(row) if row else None

    def recent_turns(self, user: str, limit: int = 10) -> list[TurnSummary]:
        rows = self.db.query(
            "SELECT t.id, t.created_at, t.question, t.comparison, t.side_a, v.choice, v.label, v.changes, t.scope,"
            " (SELECT j.status FROM chat_thought_jobs j WHERE j.turn_id = t.id AND j.superseded_at IS NULL) AS thought"
            " FROM chat_turns t LEFT JOIN chat_votes v ON v.turn_id = t.id WHERE t.user = ?"
            " ORDER BY t.created_at DESC LIMIT ?", (user, limit))
        return [TurnSummary(**row) for row in rows]

    def unvoted_comparisons(self, user: str | None, created_before: float) -> list[tuple[str, str]]:
        """(turn id, its user) of the comparison turns with no vote and no thought job that are `user`'s or older
        than `created_before`."""
        rows = self.db.query(
            "SELECT t.id, t.user FROM chat_turns t WHERE t.comparison = 'yes'"
            " AND NOT EXISTS (SELECT 1 FROM chat_votes v WHERE v.turn_id = t.id)"
            " AND NOT EXISTS (SELECT 1 FROM chat_thought_jobs j WHERE j.turn_id = t.id)"
            " AND (t.user = ? OR t.created_at < ?)", (user, created_before))
        return [(row["id"], row["user"]) for row in rows]

    def record_judgement(self, turn_id: str, user: str, choice: str, at: float | None = None) -> str | None:
        """Set a one-answer turn's judgement ('keep' | 'dismiss'); returns the one it replaced, if any. Call inside the
        caller's transaction when the judgement decides the turn's thought with it."""
        row = self.db.query_one("SELECT choice FROM chat_judgements WHERE turn_id = ?", (turn_id,))
        self.db.execute("INSERT INTO chat_judgements (turn_id, user, choice, judged_at) VALUES (?,?,?,?)"
                        " ON CONFLICT(turn_id) DO UPDATE SET choice = excluded.choice, judged_at = excluded.judged_at",
                        (turn_id, user, choice, at or time.time()))
        return row["choice"] if row else None

    def judgement(self, turn_id: str) -> str | None:
        row = self.db.query_one("SELECT choice FROM chat_judgements WHERE turn_id = ?", (turn_id,))
        return row["choice"] if row else None

    def turn_counts(self) -> dict[str, int]:
        """Turns per comparison state."""
        rows = self.db.query("SELECT comparison, COUNT(*) AS n FROM chat_turns GROUP BY comparison")
        return {row["comparison"]: int(row["n"]) for row in rows}

    def reveal(self, turn_id: str, at: float | None = None) -> None:
        """Record that the turn's sides were shown (the first time only): a first vote after this is not blind."""
        self.db.execute("UPDATE chat_turns SET revealed_at = COALESCE(revealed_at, ?) WHERE id = ?",
                        (at or time.time(), turn_id))

    # --- votes
    def record_vote(self, turn_id: str, user: str, choice: str, label: str, at: float | None = None) -> str | None:
        """Set the turn's vote (a change counts in `changes`; the first choice stays) and log it; the vote reveals
        the sides. A first vote is blind when the sides had not been shown before it. Returns the previous choice."""
        now = at or time.time()
        with self.db.transaction() as tx:
            existing = tx.execute("SELECT choice FROM chat_votes WHERE turn_id = ?", (turn_id,)).fetchone()
            previous = existing[0] if existing else None
            shown = tx.execute("SELECT revealed_at FROM chat_turns WHERE id = ?", (turn_id,)).fetchone()
            blind = existing is None and shown is not None and shown[0] is None
            if existing is None:
                tx.execute("INSERT INTO chat_votes (turn_id, user, choice, label, voted_at, first_choice, first_label,"
                           " blind) VALUES (?,?,?,?,?,?,?,?)", (turn_id, user, choice, label, now, choice, label,
                                                                 int(blind)))
            elif previous != choice:
                tx.execute("UPDATE chat_votes SET choice = ?, label = ?, changed_at = ?, changes = changes + 1"
                           " WHERE turn_id = ?", (choice, label, now, turn_id))
            tx.execute("INSERT INTO chat_vote_log (turn_id, user, choice, previous, at, blind) VALUES (?,?,?,?,?,?)",
                       (turn_id, user, choice, previous, now, int(blind)))
            tx.execute("UPDATE chat_turns SET revealed_at = COALESCE(revealed_at, ?) WHERE id = ?", (now, turn_id))
        return previous

    def vote(self, turn_id: str) -> Vote | None:
        row = self.db.query_one(f"SELECT {_VOTE_COLUMNS} FROM chat_votes v WHERE turn_id = ?", (turn_id,))
        return _vote(row) if row else None

    def comparison_votes(self) -> list[ComparisonVote]:
        """The first vote of each finished comparison, oldest first, unless it was cast after the sides were shown
        (a later change, or a vote after a reveal, never enters the experiment)."""
        rows = self.db.query("SELECT COALESCE(v.first_choice, v.choice) AS choice, v.voted_at, v.user, t.side_a,"
                             " t.model, t.raw_words IS NOT NULL AS written"
                             " FROM chat_votes v JOIN chat_turns t ON t.id = v.turn_id"
                             " WHERE t.comparison = 'yes' AND v.blind IS NOT 0 ORDER BY v.voted_at")
        return [ComparisonVote(**(dict(row) | {"written": bool(row["written"])})) for row in rows]

    def vote_counts(self) -> dict[str, int]:
        """Votes on finished comparisons: all, first votes cast after the sides were shown (left out), votes whose
        blindness was not recorded (cast before issue #41; counted), and votes changed after their first."""
        row = self.db.query_one(
            "SELECT COUNT(*) AS votes, COALESCE(SUM(v.blind = 0), 0) AS unblinded,"
            " COALESCE(SUM(v.blind IS NULL), 0) AS blindness_unknown, COALESCE(SUM(v.changes > 0), 0) AS changed"
            " FROM chat_votes v JOIN chat_turns t ON t.id = v.turn_id WHERE t.comparison = 'yes'")
        return {key: int(row[key]) if row else 0 for key in ("votes", "unblinded", "blindness_unknown", "changed")}

    def voted_comparisons(self, since: float | None = None) -> list[tuple[StoredTurn, Vote]]:
        """Finished comparisons with their vote, first voted at or after `since` (None: all), oldest vote first."""
        columns = ", ".join(f"v.{c} AS vote_{c}" for c in _VOTE_COLUMNS.split(", "))
        rows = self.db.query(
            f"SELECT t.*, {columns} FROM chat_votes v JOIN chat_turns t ON t.id = v.turn_id"
            " WHERE t.comparison = 'yes' AND v.voted_at >= ? ORDER BY v.voted_at, t.id",
            (since if since is not None else float("-inf"),))
        return [(_turn(row), _vote(row, "vote_")) for row in rows]

    # --- thought jobs
    def current_job(self, turn_id: str) -> ThoughtJob | None:
        row = self.db.query_one(f"SELECT {_JOB_COLUMNS} FROM chat_thought_jobs"
                                " WHERE turn_id = ? AND superseded_at IS NULL", (turn_id,))
        return _job(row) if row else None

    def job(self, job_id: int) -> ThoughtJob | None:
        row = self.db.query_one(f"SELECT {_JOB_COLUMNS} FROM chat_thought_jobs WHERE id = ?", (job_id,))
        return _job(row) if row else None

    def jobs_of(self, turn_id: str) -> list[ThoughtJob]:
        """Every job of the turn, oldest first."""
        rows = self.db.query(f"SELECT {_JOB_COLUMNS} FROM chat_thought_jobs WHERE turn_id = ? ORDER BY id",
                             (turn_id,))
        return [_job(row) for row in rows]

    def open_jobs(self) -> list[ThoughtJob]:
        """Jobs queued or running, in any process."""
        rows = self.db.query(f"SELECT {_JOB_COLUMNS} FROM chat_thought_jobs WHERE status IN ('queued', 'running')"
                             " ORDER BY id")
        return [_job(row) for row in rows]

    def queue_job(self, turn_id: str, answer: str, trigger: str, planned_thought_id: str, runner: str,
                  at: float | None = None) -> int:
        with self.db.transaction() as tx:
            job_id = tx.execute("INSERT INTO chat_thought_jobs (turn_id, answer, trigger, queued_at,"
                                " planned_thought_id, runner) VALUES (?,?,?,?,?,?)",
                                (turn_id, answer, trigger, at or time.time(), planned_thought_id, runner)).lastrowid
            assert job_id is not None        # an INSERT into a rowid table always has one
            return job_id

    def supersede_job(self, job_id: int, status: str, at: float | None = None) -> None:
        self.db.execute("UPDATE chat_thought_jobs SET superseded_at = ?, status = ? WHERE id = ?",
                        (at or time.time(), status, job_id))

    def start_job(self, job_id: int, runner: str, planned_thought_id: str) -> ThoughtJob:
        """Mark the job running under `runner`; a job without a planned thought id gets `planned_thought_id`."""
        with self.db.transaction() as tx:
            tx.execute("UPDATE chat_thought_jobs SET status = 'running', started_at = ?, runner = ?,"
                       " planned_thought_id = COALESCE(planned_thought_id, ?) WHERE id = ?",
                       (time.time(), runner, planned_thought_id, job_id))
            return _job(tx.execute(f"SELECT {_JOB_COLUMNS} FROM chat_thought_jobs WHERE id = ?", (job_id,)).fetchone())

    def finish_job(self, job_id: int, outcome: JobOutcome, at: float | None = None) -> None:
        self.db.execute("UPDATE chat_thought_jobs SET status = ?, thought_id = ?, similarity = ?, error = ?,"
                        " reason = ?, finished_at = ? WHERE id = ?",
                        (outcome.status, outcome.thought_id, outcome.similarity, outcome.error, outcome.reason,
                         at or time.time(), job_id))
