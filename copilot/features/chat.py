"""Chat use cases: a turn answers one question twice (papers only vs papers ∪ thoughts), blind and side by side;
the user votes; a thought is made in the background from the preferred answer.

Sides are random per turn and stored. A vote is committed to SQLite before `vote` returns; every vote and
change of vote is logged. The UI and the CLI call the same functions here.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import random
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from copilot.llm import LLMError, Usage
from copilot.methods.followup import PreviousTurn, standalone_question
from copilot.methods.thought_retriever import (ThoughtMemory, check_answer, labels_to_ids, mark_retracted,
                                               new_thought_id, retrieve_both, stream_answer, think)
from copilot.prompts import CANNOT_ANSWER
from copilot.records import Evidence, storable_text
from copilot.services import Services

log = logging.getLogger(__name__)

THOUGHTS, RAW = "thoughts", "raw"
CHOICES = (THOUGHTS, RAW, "tie", "bad")
VOTE_CHOICES = (*CHOICES, "A", "B")     # A/B: the side as shown
# The answer a vote makes the turn's thought from: the preferred one; a tie prefers the thought-augmented answer
# (Algorithm 1's own); "both bad" makes none.
THOUGHT_FROM = {THOUGHTS: THOUGHTS, "tie": THOUGHTS, RAW: RAW, "bad": None}
SWEEP_AFTER_S = 15 * 60          # unvoted turns older than this get their (no-vote) thought job
PREVIEW_CHARS = 200

_sides = random.SystemRandom()


class ChatError(ValueError):
    """Bad input, or an action the turn does not allow; the message says what to do."""


@dataclass
class AnswerState:
    label: str                     # "A" | "B" as shown
    kind: str                      # THOUGHTS | RAW
    sources: list[Evidence]
    text: str = ""
    error: str | None = None
    done: bool = False
    seconds: float | None = None
    notes: list[str] = field(default_factory=list)   # what the output checks removed, trimmed prompts, cut answers
    usage: Usage | None = None

    @property
    def thought_augmented(self) -> bool:
        return self.kind == THOUGHTS and any(s.kind == "thought" for s in self.sources)


@dataclass
class Turn:
    id: str
    user: str
    question: str
    notice: str                    # e.g. the truncation notice; "" when none
    comparison: str                # "pending" → "yes" | "same_items" | "failed"
    answers: list[AnswerState]
    retrieval_s: float
    reader: str = ""
    created_at: float = field(default_factory=time.time)
    asked: str = ""                # the user's own words when `question` is their follow-up made standalone

    @property
    def done(self) -> bool:
        return all(a.done for a in self.answers)

    def view(self) -> dict:
        """The same shape as `Chat.view` for a turn still being answered."""
        return {"turn_id": self.id, "comparison": self.comparison, "question": self.question, "user": self.user,
                "notice": self.notice, "vote": None, "retrieval_s": self.retrieval_s, "thought_jobs": [],
                "asked": self.asked,
                "answers": [{"label": a.label, "kind": a.kind, "text": a.text, "error": a.error, "done": a.done,
                             "seconds": a.seconds, "thought_augmented": a.thought_augmented, "notes": a.notes,
                             "sources": [source_record(e) for e in a.sources]} for a in self.answers]}


def source_record(item: Evidence) -> dict:
    preview = " ".join(item.text.split())[:PREVIEW_CHARS]
    title = item.title if item.kind == "paper" else preview[:120]
    return {"id": item.id, "kind": item.kind, "title": title, "preview": preview, "score": round(item.score, 4)}


def clean_question(question: str | None, max_chars: int) -> tuple[str, str]:
    """(question, notice): an empty question is refused; a long one is cut to `max_chars` with a notice."""
    text = storable_text(question).strip()
    if not text:
        raise ChatError("Type a question first.")
    if len(text) > max_chars:
        return text[:max_chars], (f"Your question had {len(text):,} characters; only the first {max_chars:,} "
                                  "were used.")
    return text, ""


class Chat:
    """One per Services (see `chat_for`). Thought jobs run on one background thread per process."""

    _executor: ThreadPoolExecutor | None = None
    _executor_lock = threading.Lock()
    _futures: dict[int, Future] = {}              # job id → its run in this process; guarded by _futures_lock
    _futures_lock = threading.Lock()

    def __init__(self, services: Services) -> None:
        self.services = services
        self.settings = services.settings
        self.memory = ThoughtMemory(services.db, services.store, services.embedder, services.settings.merge_threshold,
                                    private=services.settings.private_thoughts)

    @property
    def db(self):
        return self.services.db

    # --- a turn
    def prepare(self, question: str | None, user: str, personalize: bool = False,
                previous_turn: str | None = None) -> Turn:
        """Validate, retrieve both ways, assign sides at random, record the turn. No LLM call yet.
        With `previous_turn` (the same chat's last turn), a follow-up is rewritten into a standalone question."""
        text, notice = clean_question(question, self.settings.max_input_chars)
        asked = ""
        rewrite = standalone_question(text, self._previous(previous_turn, user))
        if rewrite.rewritten:
            asked, text = text, rewrite.question
        if self.services.store.count("paper") == 0:
            raise ChatError("The library is empty: import papers first (Library tab, or `python -m copilot import`).")
        self.sweep_unvoted(user)
        _ = self.services.embedder.dimension   # loads the model once per process, outside the retrieval timing
        started = time.perf_counter()
        embedding = self.services.embedder.embed_one(text)
        found = retrieve_both(self.services.store, embedding, self.settings.top_k, self.settings.answer_budget_tokens,
                              self.memory.visible_where(user), item_tokens=self.settings.source_cap_tokens)
        retrieval_s = time.perf_counter() - started
        side_a = _sides.choice((THOUGHTS, RAW))
        if found.same_items:
            answers = [AnswerState("A", RAW, found.raw)]
            comparison = "same_items"
        else:
            by_kind = {THOUGHTS: found.augmented, RAW: found.raw}
            side_b = RAW if side_a == THOUGHTS else THOUGHTS
            answers = [AnswerState("A", side_a, by_kind[side_a]), AnswerState("B", side_b, by_kind[side_b])]
            comparison = "pending"
        turn = Turn(id=uuid.uuid4().hex[:12], user=user, question=text, notice=notice, comparison=comparison,
                    answers=answers, retrieval_s=retrieval_s, reader=self._reader(user) if personalize else "",
                    asked=asked)
        info = self.services.llm_info()
        self.db.execute(
            "INSERT INTO chat_turns (id, user, created_at, question, question_chars, comparison, side_a, backend,"
            " model, embedder, personalized, retrieval_s, raw_sources, thoughts_sources)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (turn.id, user, turn.created_at, text, len(question or ""), comparison, side_a, info["backend"],
             info["model"], self.services.embedder.name, int(bool(turn.reader)), retrieval_s,
             json.dumps([source_record(e) for e in found.raw]),
             json.dumps([source_record(e) for e in found.augmented])))
        return turn

    def _previous(self, turn_id: str | None, user: str) -> PreviousTurn | None:
        """The turn a follow-up refers to: its question and the answer shown first (the voted one if any)."""
        if not turn_id:
            return None
        view = self.view(storable_text(turn_id).strip())
        if view is None or view["user"] != user or not view["answers"]:
            return None
        chosen = view["answers"][0]
        if view.get("vote") and view["vote"].get("label") in ("A", "B"):
            chosen = next((a for a in view["answers"] if a["label"] == view["vote"]["label"]), chosen)
        titles = [s.get("title") or s.get("preview") or "" for s in chosen["sources"]]
        return PreviousTurn(view["question"], chosen["text"] or "", titles)

    def _reader(self, user: str) -> str:
        from copilot.features.profile import load_profile

        try:
            profile = load_profile(self.services, user)
        except Exception:
            log.exception("could not load the profile of %s", user)
            return ""
        return " ".join(profile.text.split())[:600] if profile else ""

    def stream(self, turn: Turn) -> Iterator[Turn]:
        """Generate the answers one after the other (the local model runs one call at a time), yielding the turn
        after every piece. One side failing does not stop the other."""
        try:
            for answer in turn.answers:
                started = time.perf_counter()
                yield turn
                answer.usage = Usage()
                try:
                    for piece in stream_answer(self.services.llm, turn.question, answer.sources,
                                               self.settings.answer_tokens, turn.reader, usage=answer.usage):
                        answer.text += piece
                        yield turn
                except LLMError as error:
                    answer.error = str(error)
                self._check(answer)
                answer.seconds = time.perf_counter() - started
                answer.done = True
                yield turn
        finally:
            self._finish(turn)
        yield turn

    def _check(self, answer: AnswerState) -> None:
        """Run the output checks on a finished answer; what they removed becomes a note under it."""
        if not answer.text.strip():
            return
        checked = check_answer(answer.text, answer.sources)
        answer.notes += (answer.usage.notices if answer.usage else []) + checked.notes
        answer.text = checked.text
        if not answer.text:
            answer.text = CANNOT_ANSWER
            answer.notes.append("Nothing was left of the answer after the checks.")
        elif (answer.usage and answer.usage.completion_tokens and not answer.error
              and answer.usage.completion_tokens >= self.settings.answer_tokens):
            answer.notes.append("The answer reached its length limit and may stop mid-sentence.")

    def _finish(self, turn: Turn) -> None:
        for answer in turn.answers:
            answer.text = answer.text.strip()
            if not answer.done:
                answer.error = answer.error or "interrupted before the answer was complete"
                answer.done = True
        if turn.comparison == "pending":  # a same-items turn stays one (its single answer shows any error)
            turn.comparison = "failed" if any(a.error for a in turn.answers) else "yes"
        values: dict = {"comparison": turn.comparison, "finished_at": time.time()}
        for answer in turn.answers:
            values.update({f"{answer.kind}_answer": answer.text, f"{answer.kind}_error": answer.error,
                           f"{answer.kind}_s": answer.seconds})
        columns = ", ".join(f"{name} = ?" for name in values)
        self.db.execute(f"UPDATE chat_turns SET {columns} WHERE id = ?", (*values.values(), turn.id))
        if turn.comparison != "yes":
            # nothing to vote on: the thought comes from the answer we have (the thought-augmented one if any)
            usable = [a for a in turn.answers if not a.error and a.text]
            if usable:
                best = next((a for a in usable if a.kind == THOUGHTS), usable[0])
                self.request_thought(turn.id, best.kind, "no_comparison")

    # --- votes
    def vote(self, turn_id: str, choice: str, user: str) -> dict:
        """Record (or change) the user's vote; committed before returning, and every vote logged (two tabs voting
        at once leave one final vote and two log rows). In the same transaction the vote decides the turn's one
        thought (`_choose_thought`); the thought job runs in the background."""
        turn_id = storable_text(turn_id).strip()
        row = self.db.query_one("SELECT id, user, comparison, side_a FROM chat_turns WHERE id = ?", (turn_id,))
        if row is None:
            raise ChatError(f"no turn with id {turn_id[:40]!r}")
        if row["user"] != user:
            raise ChatError("this turn belongs to another user")
        choice = _normalise_choice(choice, row["side_a"])
        if row["comparison"] != "yes":
            reason = {"same_items": "both retrievals found the same items, so there was one answer",
                      "failed": "one of the answers failed", "pending": "the answers are not finished"}
            raise ChatError(f"this turn cannot be voted on: {reason.get(row['comparison'], row['comparison'])}")
        label = _label(choice, row["side_a"])
        now = time.time()
        with self.db.transaction() as tx:
            existing = tx.execute("SELECT choice FROM chat_votes WHERE turn_id = ?", (turn_id,)).fetchone()
            previous = existing[0] if existing else None
            if existing is None:
                tx.execute("INSERT INTO chat_votes (turn_id, user, choice, label, voted_at) VALUES (?,?,?,?,?)",
                           (turn_id, user, choice, label, now))
            elif previous != choice:
                tx.execute("UPDATE chat_votes SET choice = ?, label = ?, changed_at = ?, changes = changes + 1"
                           " WHERE turn_id = ?", (choice, label, now, turn_id))
            tx.execute("INSERT INTO chat_vote_log (turn_id, user, choice, previous, at) VALUES (?,?,?,?,?)",
                       (turn_id, user, choice, previous, now))
            job_id, retracted = self._choose_thought(tx, turn_id, THOUGHT_FROM[choice], "vote")
        self._after_choice(job_id, retracted)
        return {"turn_id": turn_id, "choice": choice, "label": label, "previous": previous,
                "changed": previous is not None and previous != choice, "recorded": True}

    # --- the one thought of a turn
    @classmethod
    def _pool(cls) -> ThreadPoolExecutor:
        with cls._executor_lock:
            if cls._executor is None:
                cls._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thought-job")
            return cls._executor

    def request_thought(self, turn_id: str, answer: str | None, trigger: str) -> Future | None:
        """Make `answer` the source of the turn's one thought (None: no thought); never waits for the job."""
        with self.db.transaction() as tx:
            job_id, retracted = self._choose_thought(tx, turn_id, answer, trigger)
        return self._after_choice(job_id, retracted)

    def _choose_thought(self, tx, turn_id: str, answer: str | None, trigger: str) -> tuple[int | None, list[str]]:
        """Inside the caller's transaction: make `answer` (THOUGHTS, RAW, or None) the source of the turn's one
        thought. A current job that already makes it is kept (unless it failed: then it is tried again). Otherwise
        the current job is superseded: its thought retracted, or, queued, cancelled, or, running, left to retract
        what it makes (`_settle`). Returns (the new job's id, thought ids whose vectors must go)."""
        current = tx.execute("SELECT id, answer, status, thought_id FROM chat_thought_jobs"
                             " WHERE turn_id = ? AND superseded_at IS NULL", (turn_id,)).fetchone()
        if current is not None and current["answer"] == answer and current["status"] != "failed":
            return None, []
        now = time.time()
        retracted: list[str] = []
        if current is not None:
            status = current["status"]
            if current["thought_id"]:
                retracted = mark_retracted(tx, [current["thought_id"]], now)
                status = "retracted"
            elif status == "queued":
                status = "cancelled"
            tx.execute("UPDATE chat_thought_jobs SET superseded_at = ?, status = ? WHERE id = ?",
                       (now, status, current["id"]))
        if answer is None:
            return None, retracted
        cursor = tx.execute("INSERT INTO chat_thought_jobs (turn_id, answer, trigger, queued_at, planned_thought_id,"
                            " runner) VALUES (?,?,?,?,?,?)",
                            (turn_id, answer, trigger, now, new_thought_id(), _runner()))
        return cursor.lastrowid, retracted

    def _after_choice(self, job_id: int | None, retracted: list[str]) -> Future | None:
        self.memory.drop_vectors(retracted)   # after the commit: a crash before this is fixed by memory.repair
        return self._submit(job_id) if job_id else None

    def _submit(self, job_id: int) -> Future:
        future = self._pool().submit(self._run_thought_job, job_id)
        with self._futures_lock:
            for finished in [key for key, done in self._futures.items() if done.done()]:
                del self._futures[finished]
            self._futures[job_id] = future
        return future

    def _claim(self, job_id: int) -> dict | None:
        """Take a job to run: a queued one of this process, or one whose process has stopped."""
        with self.db.transaction() as tx:
            job = tx.execute("SELECT * FROM chat_thought_jobs WHERE id = ?", (job_id,)).fetchone()
            if job is None or job["status"] not in ("queued", "running"):
                return None
            if job["runner"] != _runner() or job["status"] == "running":
                if _runner_alive(job["runner"]):
                    return None
            tx.execute("UPDATE chat_thought_jobs SET status = 'running', started_at = ?, runner = ?,"
                       " planned_thought_id = COALESCE(planned_thought_id, ?) WHERE id = ?",
                       (time.time(), _runner(), new_thought_id(), job_id))
            return dict(tx.execute("SELECT * FROM chat_thought_jobs WHERE id = ?", (job_id,)).fetchone())

    def _run_thought_job(self, job_id: int) -> str:
        try:
            job = self._claim(job_id)
        except Exception:  # e.g. the database stayed locked: the job stays queued, resumable later
            log.exception("thought job %s could not be claimed", job_id)
            raise
        if job is None:
            return "skipped"
        planned = job["planned_thought_id"]
        values: dict = {"status": "failed", "thought_id": None, "similarity": None, "error": None, "reason": None}
        try:
            if self.db.query_one("SELECT 1 AS x FROM thoughts WHERE id = ?", (planned,)):
                values.update(status="stored", thought_id=planned)    # stored before a crash: not made twice
            elif job["superseded_at"] is not None:
                values["status"] = "cancelled"                        # its vote changed while it was down
            else:
                turn = self.db.query_one("SELECT * FROM chat_turns WHERE id = ?", (job["turn_id"],))
                answer = job["answer"]
                sources = [Evidence(id=s["id"], kind=s["kind"], title=s["title"], text="", score=s.get("score", 0.0))
                           for s in json.loads(turn[f"{answer}_sources"])]
                # the answer cites [n] labels of its sources; a thought outlives the turn, so it keeps real ids
                text = labels_to_ids(turn[f"{answer}_answer"] or "", sources)
                outcome = think(self.services.llm, self.memory, turn["question"], text, sources, origin="chat",
                                user=turn["user"], max_tokens=self.settings.answer_tokens, thought_id=planned)
                values.update(status=outcome.status, thought_id=outcome.thought_id, similarity=outcome.similarity,
                              reason=outcome.draft.reason or None)
        except Exception as error:  # the job fails alone: logged, the turn and its vote stay
            log.exception("thought job %s for turn %s failed", job_id, job["turn_id"])
            values["error"] = f"{type(error).__name__}: {error}"[:500]
        if values["thought_id"] is None:
            self.memory.drop_vectors([planned])   # an attempt killed between its two writes may have left one
        return self._settle(job_id, values)

    def _settle(self, job_id: int, values: dict) -> str:
        """Record the job's outcome; if a vote superseded it meanwhile, retract what it stored."""
        with self.db.transaction() as tx:
            superseded = tx.execute("SELECT superseded_at FROM chat_thought_jobs WHERE id = ?", (job_id,)).fetchone()[0]
            retracted: list[str] = []
            if superseded is not None and values["thought_id"]:
                retracted = mark_retracted(tx, [values["thought_id"]]) or [values["thought_id"]]
                values["status"] = "retracted"
            tx.execute("UPDATE chat_thought_jobs SET status = ?, thought_id = ?, similarity = ?, error = ?, reason = ?,"
                       " finished_at = ? WHERE id = ?", (*values.values(), time.time(), job_id))
        self.memory.drop_vectors(retracted)
        return values["status"]

    def stale_jobs(self) -> list[int]:
        """Thought jobs left queued or running by a process that has stopped (a crash or a restart)."""
        rows = self.db.query("SELECT id, runner FROM chat_thought_jobs WHERE status IN ('queued', 'running')")
        return [row["id"] for row in rows if not _runner_alive(row["runner"])]

    def resume_jobs(self) -> list[int]:
        """Run the stale jobs again in this process."""
        stale = self.stale_jobs()
        for job_id in stale:
            self._submit(job_id)
        return stale

    def wait_for_thoughts(self, turn_id: str, timeout: float | None = None) -> list[dict]:
        """Block until this turn's thought jobs started in this process are done (the CLI does; the UI never does)."""
        job_ids = {row["id"] for row in self.thought_jobs(turn_id)}
        with self._futures_lock:
            futures = [future for job_id, future in self._futures.items() if job_id in job_ids]
        for future in futures:
            try:
                future.result(timeout=timeout)
            except FutureTimeout:
                log.warning("thought job of turn %s still running after %s s", turn_id, timeout)
        return self.thought_jobs(turn_id)

    @classmethod
    def wait_for_all(cls, timeout: float | None = None) -> None:
        """Block until every thought job started in this process is done (tests, `doctor --repair`)."""
        with cls._futures_lock:
            futures = list(cls._futures.values())
        for future in futures:
            future.result(timeout=timeout)

    def thought_jobs(self, turn_id: str) -> list[dict]:
        """Every job of the turn, oldest first; the current one has `superseded_at` NULL."""
        return self.db.query("SELECT * FROM chat_thought_jobs WHERE turn_id = ? ORDER BY id", (turn_id,))

    def sweep_unvoted(self, user: str | None) -> int:
        """Unvoted comparison turns get their thought from the thought-augmented answer (Algorithm 1's own) once
        their grace period is over: SWEEP_AFTER_S for anyone's turn; for `user`'s own turns, when they ask the
        next question. A later vote still decides: it replaces or retracts that thought."""
        rows = self.db.query(
            "SELECT t.id FROM chat_turns t WHERE t.comparison = 'yes'"
            " AND NOT EXISTS (SELECT 1 FROM chat_votes v WHERE v.turn_id = t.id)"
            " AND NOT EXISTS (SELECT 1 FROM chat_thought_jobs j WHERE j.turn_id = t.id)"
            " AND (t.user = ? OR t.created_at < ?)", (user, time.time() - SWEEP_AFTER_S))
        for row in rows:
            self.request_thought(row["id"], THOUGHTS, "no_vote")
        return len(rows)

    # --- reading
    def view(self, turn_id: str) -> dict | None:
        """A stored turn for display: answers in A/B order with full source records, the vote, thought jobs."""
        row = self.db.query_one("SELECT * FROM chat_turns WHERE id = ?", (turn_id,))
        if row is None:
            return None
        kinds = [RAW] if row["comparison"] == "same_items" or row["thoughts_sources"] == row["raw_sources"] else (
            [THOUGHTS, RAW] if row["side_a"] == THOUGHTS else [RAW, THOUGHTS])
        answers = [{"label": label, "kind": kind, "text": row[f"{kind}_answer"] or "", "error": row[f"{kind}_error"],
                    "seconds": row[f"{kind}_s"], "done": row["finished_at"] is not None,
                    "thought_augmented": kind == THOUGHTS and row["comparison"] != "same_items",
                    "sources": json.loads(row[f"{kind}_sources"])} for label, kind in zip("AB", kinds)]
        vote = self.db.query_one("SELECT choice, label, changes FROM chat_votes WHERE turn_id = ?", (turn_id,))
        return {"turn_id": turn_id, "comparison": row["comparison"], "question": row["question"],
                "user": row["user"], "answers": answers, "vote": vote, "retrieval_s": row["retrieval_s"],
                "thought_jobs": self.thought_jobs(turn_id), "created_at": row["created_at"],
                "models": {"backend": row["backend"], "model": row["model"], "embedder": row["embedder"]}}

    def turn_record(self, turn_id: str) -> dict | None:
        """A stored turn in the CLI's JSON shape."""
        view = self.view(turn_id)
        if view is None:
            return None
        timings = {"retrieval_s": _round(view["retrieval_s"])}
        for answer in view["answers"]:
            timings[f"answer_{answer['label']}_s"] = _round(answer["seconds"])
        finished = [j for j in view["thought_jobs"] if j["finished_at"] and j["started_at"]]
        timings["thought_job_s"] = _round(sum(j["finished_at"] - j["started_at"] for j in finished)) if finished else None
        return {
            "turn_id": turn_id, "comparison": view["comparison"] == "yes", "comparison_state": view["comparison"],
            "answers": [{"label": a["label"], "thought_augmented": a["thought_augmented"], "text": a["text"],
                         "error": a["error"],
                         "sources": [{"id": s["id"], "kind": s["kind"], "title": s["title"]} for s in a["sources"]]}
                        for a in view["answers"]],
            "timings": timings,
            "thought_jobs": [job_record(j) for j in view["thought_jobs"]],
            "models": view["models"],
        }

    def recent_turns(self, user: str, limit: int = 10) -> list[dict]:
        return self.db.query(
            "SELECT t.id, t.created_at, t.question, t.comparison, t.side_a, v.choice, v.label, v.changes,"
            " (SELECT j.status FROM chat_thought_jobs j WHERE j.turn_id = t.id AND j.superseded_at IS NULL) AS thought"
            " FROM chat_turns t LEFT JOIN chat_votes v ON v.turn_id = t.id WHERE t.user = ?"
            " ORDER BY t.created_at DESC LIMIT ?", (user, limit))

    def ask(self, question: str, user: str, personalize: bool = False, wait: bool = True,
            vote: str | None = None, previous_turn: str | None = None) -> dict:
        """The whole turn without a UI. A comparison gets no thought here: with `vote` (for scripts) the vote
        decides it, as a user's would; without, the turn waits for a vote or its grace period (`sweep_unvoted`).
        A turn with one answer gets its thought at once. With `wait`, blocks until the thought job is done."""
        turn = self.prepare(question, user, personalize, previous_turn=previous_turn)
        for _ in self.stream(turn):
            pass
        voted = None
        if vote is not None:
            try:
                voted = self.vote(turn.id, vote, user)
            except ChatError as error:   # e.g. one answer only: the answers stand, the vote is refused
                voted = {"recorded": False, "error": str(error)}
        if wait:
            self.wait_for_thoughts(turn.id)
        record = self.turn_record(turn.id) or {}
        if voted is not None:
            record["vote"] = voted
        if turn.notice:
            record["notice"] = turn.notice
        if turn.asked:
            record["asked"], record["question"] = turn.asked, turn.question
        return record


def job_record(job: dict) -> dict:
    """A thought job in the CLI's JSON shape; `current` is false for a job a later vote superseded."""
    record = {k: job[k] for k in ("answer", "trigger", "status", "thought_id", "error", "reason")}
    record["current"] = job["superseded_at"] is None
    return record


def _normalise_choice(choice: str, side_a: str) -> str:
    value = (choice or "").strip().lower()
    if value in ("a", "b"):
        return side_a if value == "a" else (RAW if side_a == THOUGHTS else THOUGHTS)
    if value not in CHOICES:
        raise ChatError(f"choice must be one of {', '.join(CHOICES)} (or A/B), not {str(choice)[:40]!r}")
    return value


def _label(choice: str, side_a: str) -> str:
    if choice in (THOUGHTS, RAW):
        return "A" if choice == side_a else "B"
    return choice


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


@functools.cache
def _process_token() -> str:
    return uuid.uuid4().hex[:8]


def _runner() -> str:
    """Who runs a thought job: this process (the pid alone could be a reused one after a restart)."""
    return f"{os.getpid()}:{_process_token()}"


def _runner_alive(runner: str | None) -> bool:
    if not runner:
        return False
    if runner == _runner():
        return True
    pid = int(runner.split(":", 1)[0])
    if pid == os.getpid():      # our pid, another token: an earlier process with the same pid
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # alive, owned by another user
        return True
    return True


_chats: dict[int, Chat] = {}
_chats_lock = threading.Lock()


def chat_for(services: Services) -> Chat:
    with _chats_lock:
        if id(services) not in _chats:
            _chats[id(services)] = Chat(services)
        return _chats[id(services)]


# --- CLI -----------------------------------------------------------------------------------------------------
def cmd_ask(args: argparse.Namespace) -> int:
    from copilot.cli import UserError, print_json, services

    try:
        record = chat_for(services()).ask(args.question, args.user, personalize=args.personalize, vote=args.vote,
                                          previous_turn=args.after)
    except ChatError as error:
        raise UserError(str(error)) from None
    if args.json:
        print_json(record)
        return 0
    if record.get("notice"):
        print(record["notice"], file=sys.stderr)
    if record.get("vote") and not record["vote"]["recorded"]:
        print(f"vote not recorded: {record['vote']['error']}", file=sys.stderr)
    print(f"turn {record['turn_id']}" + ("" if record["comparison"] else " (no comparison)"))
    for answer in record["answers"]:
        print(f"\n--- Answer {answer['label']}\n{answer['error'] or answer['text']}")
        for source in answer["sources"]:
            print(f"  [{source['id']}] {source['title']}")
    return 0


def cmd_vote(args: argparse.Namespace) -> int:
    from copilot.cli import UserError, print_json, services

    chat = chat_for(services())
    try:
        result = chat.vote(args.turn_id, args.choice, args.user)
    except ChatError as error:
        raise UserError(str(error)) from None
    result["thought_jobs"] = [job_record(job) for job in chat.wait_for_thoughts(args.turn_id)]
    print_json(result) if args.json else print(f"vote recorded: {result['choice']} (answer {result['label']})")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from copilot.cli import print_json, services
    from copilot.features.stats import chat_stats

    result = chat_stats(services().db)
    if args.json:
        print_json(result)
    else:
        for key, value in result.items():
            if not isinstance(value, (list, dict)):
                print(f"{key}: {value}")
    return 0


def add_chat_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="answer a question twice (papers only vs papers + thoughts)")
    p.add_argument("question", help="the question")
    p.add_argument("--user", default="local", help="user id the turn belongs to (default: local)")
    p.add_argument("--personalize", action="store_true", help="adapt the answers to the user's saved profile")
    p.add_argument("--vote", choices=VOTE_CHOICES, default=None,
                   help="for scripts: vote once the answers are done, then wait for the thought job (thoughts = the "
                   "thought-augmented answer was better; A/B = the side as shown). Without it a comparison makes "
                   "no thought until it is voted on or its grace period ends")
    p.add_argument("--after", default=None, metavar="TURN_ID",
                   help="the previous turn of this chat: a follow-up question is read in its context")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("vote", help="vote on a turn: which answer was better")
    p.add_argument("turn_id", help="turn id printed by `ask`")
    p.add_argument("choice", choices=VOTE_CHOICES, help="thoughts = the thought-augmented answer was better; "
                   "A/B = the side as shown; bad = both bad (no thought)")
    p.add_argument("--user", default="local", help="user id the turn belongs to (default: local)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_vote)

    p = sub.add_parser("stats", help="thought-augmented win rate with a Wilson 95%% interval, by position, user "
                       "and day")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_stats)


def resume_jobs(services: Services, repair: bool = True) -> dict:
    """At start-up (app.py) and by `doctor --repair`: make Chroma agree with SQLite (ThoughtMemory.repair), run
    again the thought jobs a stopped process left queued or running, and give unvoted comparisons whose grace
    period is over their thought. Does not wait for the jobs."""
    chat = chat_for(services)
    found = chat.memory.repair() if repair else None
    resumed = chat.resume_jobs()
    swept = chat.sweep_unvoted(None)
    return {"memory_before_repair": found.as_dict() if found else None, "jobs_resumed": resumed,
            "unvoted_turns_swept": swept}
