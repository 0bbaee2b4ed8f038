"""Chat use cases: a turn answers one question twice (papers only vs papers ∪ thoughts), blind and side by side;
the user votes; a thought is made in the background from the preferred answer.

Sides are random per turn and stored. A vote is committed to SQLite before `vote` returns; every vote and
change of vote is logged. The UI and the CLI call the same functions here.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from copilot.llm import LLMError
from copilot.methods.thought_retriever import ThoughtMemory, retrieve_both, stream_answer, think
from copilot.records import Evidence, storable_text
from copilot.services import Services

log = logging.getLogger(__name__)

THOUGHTS, RAW = "thoughts", "raw"
CHOICES = (THOUGHTS, RAW, "tie", "bad")
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

    @property
    def done(self) -> bool:
        return all(a.done for a in self.answers)

    def view(self) -> dict:
        """The same shape as `Chat.view` for a turn still being answered."""
        return {"turn_id": self.id, "comparison": self.comparison, "question": self.question, "user": self.user,
                "notice": self.notice, "vote": None, "retrieval_s": self.retrieval_s, "thought_jobs": [],
                "answers": [{"label": a.label, "kind": a.kind, "text": a.text, "error": a.error, "done": a.done,
                             "seconds": a.seconds, "thought_augmented": a.thought_augmented,
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
    _futures: dict[tuple[str, str], Future] = {}

    def __init__(self, services: Services) -> None:
        self.services = services
        self.settings = services.settings
        self.memory = ThoughtMemory(services.db, services.store, services.embedder, services.settings.merge_threshold,
                                    private=services.settings.private_thoughts)

    @property
    def db(self):
        return self.services.db

    # --- a turn
    def prepare(self, question: str | None, user: str, personalize: bool = False) -> Turn:
        """Validate, retrieve both ways, assign sides at random, record the turn. No LLM call yet."""
        text, notice = clean_question(question, self.settings.max_input_chars)
        if self.services.store.count("paper") == 0:
            raise ChatError("The library is empty: import papers first (Library tab, or `python -m copilot import`).")
        self.sweep_unvoted(user)
        _ = self.services.embedder.dimension   # loads the model once per process, outside the retrieval timing
        started = time.perf_counter()
        embedding = self.services.embedder.embed_one(text)
        found = retrieve_both(self.services.store, embedding, self.settings.top_k, self.settings.context_tokens,
                              self.memory.visible_where(user))
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
                    answers=answers, retrieval_s=retrieval_s, reader=self._reader(user) if personalize else "")
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
                try:
                    for piece in stream_answer(self.services.llm, turn.question, answer.sources,
                                               self.settings.answer_max_tokens, turn.reader):
                        answer.text += piece
                        yield turn
                except LLMError as error:
                    answer.error = str(error)
                answer.seconds = time.perf_counter() - started
                answer.done = True
                yield turn
        finally:
            self._finish(turn)
        yield turn

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
        """Record (or change) the user's vote; committed before returning. Then queue the thought job."""
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
            if previous != choice:
                if existing:
                    tx.execute("UPDATE chat_votes SET choice = ?, label = ?, changed_at = ?, changes = changes + 1"
                               " WHERE turn_id = ?", (choice, label, now, turn_id))
                else:
                    tx.execute("INSERT INTO chat_votes (turn_id, user, choice, label, voted_at) VALUES (?,?,?,?,?)",
                               (turn_id, user, choice, label, now))
                tx.execute("INSERT INTO chat_vote_log (turn_id, user, choice, previous, at) VALUES (?,?,?,?,?)",
                           (turn_id, user, choice, previous, now))
        preferred = {THOUGHTS: THOUGHTS, "tie": THOUGHTS, RAW: RAW}.get(choice)
        if preferred:
            self.request_thought(turn_id, preferred, "vote")
        return {"turn_id": turn_id, "choice": choice, "label": label, "previous": previous,
                "changed": previous is not None and previous != choice, "recorded": True}

    # --- thought jobs
    @classmethod
    def _pool(cls) -> ThreadPoolExecutor:
        with cls._executor_lock:
            if cls._executor is None:
                cls._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thought-job")
            return cls._executor

    def request_thought(self, turn_id: str, answer: str, trigger: str) -> Future | None:
        """Queue the thought job for one answer of a turn (at most one per answer); never waits for it."""
        with self.db.transaction() as tx:
            cursor = tx.execute("INSERT OR IGNORE INTO chat_thought_jobs (turn_id, answer, trigger, queued_at)"
                                " VALUES (?,?,?,?)", (turn_id, answer, trigger, time.time()))
            if cursor.rowcount == 0:
                return self._futures.get((turn_id, answer))
            job_id = cursor.lastrowid
        for key in [key for key, done in self._futures.items() if done.done()]:
            self._futures.pop(key, None)
        future = self._pool().submit(self._run_thought_job, job_id, turn_id, answer)
        self._futures[(turn_id, answer)] = future
        return future

    def _run_thought_job(self, job_id: int, turn_id: str, answer: str) -> str:
        self.db.execute("UPDATE chat_thought_jobs SET status = 'running', started_at = ? WHERE id = ?",
                        (time.time(), job_id))
        values: dict = {"status": "failed", "thought_id": None, "similarity": None, "error": None}
        try:
            turn = self.db.query_one("SELECT * FROM chat_turns WHERE id = ?", (turn_id,))
            sources = [Evidence(id=s["id"], kind=s["kind"], title=s["title"], text="", score=s.get("score", 0.0))
                       for s in json.loads(turn[f"{answer}_sources"])]
            outcome = think(self.services.llm, self.memory, turn["question"], turn[f"{answer}_answer"] or "",
                            sources, origin="chat", user=turn["user"], max_tokens=self.settings.answer_max_tokens)
            values.update(status=outcome.status, thought_id=outcome.thought_id, similarity=outcome.similarity)
        except Exception as error:  # the job fails alone: logged, the turn and its vote stay
            log.exception("thought job %s for turn %s failed", job_id, turn_id)
            values["error"] = f"{type(error).__name__}: {error}"[:500]
        self.db.execute("UPDATE chat_thought_jobs SET status = ?, thought_id = ?, similarity = ?, error = ?,"
                        " finished_at = ? WHERE id = ?", (*values.values(), time.time(), job_id))
        return values["status"]

    def wait_for_thoughts(self, turn_id: str, timeout: float | None = None) -> list[dict]:
        """Block until this turn's queued thought jobs are done (the CLI does; the UI never does)."""
        for (tid, _), future in list(self._futures.items()):
            if tid == turn_id:
                try:
                    future.result(timeout=timeout)
                except FutureTimeout:
                    log.warning("thought job of turn %s still running after %s s", turn_id, timeout)
        return self.thought_jobs(turn_id)

    def thought_jobs(self, turn_id: str) -> list[dict]:
        return self.db.query("SELECT * FROM chat_thought_jobs WHERE turn_id = ? ORDER BY id", (turn_id,))

    def sweep_unvoted(self, user: str) -> int:
        """Unvoted comparison turns get their thought from the thought-augmented answer: this user's earlier
        turns now, anyone's after SWEEP_AFTER_S."""
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
            "thought_jobs": [{k: j[k] for k in ("answer", "trigger", "status", "thought_id", "error")}
                             for j in view["thought_jobs"]],
            "models": view["models"],
        }

    def recent_turns(self, user: str, limit: int = 10) -> list[dict]:
        return self.db.query(
            "SELECT t.id, t.created_at, t.question, t.comparison, t.side_a, v.choice, v.label, v.changes,"
            " (SELECT group_concat(j.status, ', ') FROM chat_thought_jobs j WHERE j.turn_id = t.id) AS thought"
            " FROM chat_turns t LEFT JOIN chat_votes v ON v.turn_id = t.id WHERE t.user = ?"
            " ORDER BY t.created_at DESC LIMIT ?", (user, limit))

    def ask(self, question: str, user: str, personalize: bool = False, wait: bool = True) -> dict:
        """The whole turn without a UI: answers, then (no vote yet) the thought job; waits for it when `wait`."""
        turn = self.prepare(question, user, personalize)
        for _ in self.stream(turn):
            pass
        if turn.comparison == "yes":
            self.request_thought(turn.id, THOUGHTS, "no_vote")
        if wait:
            self.wait_for_thoughts(turn.id)
        record = self.turn_record(turn.id) or {}
        if turn.notice:
            record["notice"] = turn.notice
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
        record = chat_for(services()).ask(args.question, args.user, personalize=args.personalize)
    except ChatError as error:
        raise UserError(str(error)) from None
    if args.json:
        print_json(record)
        return 0
    if record.get("notice"):
        print(record["notice"], file=sys.stderr)
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
    result["thought_jobs"] = [{k: job[k] for k in ("answer", "trigger", "status", "thought_id", "error")}
                              for job in chat.wait_for_thoughts(args.turn_id)]
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
            if key != "over_time":
                print(f"{key}: {value}")
    return 0


def add_chat_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="answer a question twice (papers only vs papers + thoughts)")
    p.add_argument("question", help="the question")
    p.add_argument("--user", default="local", help="user id the turn belongs to (default: local)")
    p.add_argument("--personalize", action="store_true", help="adapt the answers to the user's saved profile")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("vote", help="vote on a turn: which answer was better")
    p.add_argument("turn_id", help="turn id printed by `ask`")
    p.add_argument("choice", choices=CHOICES, help="thoughts = the thought-augmented answer was better")
    p.add_argument("--user", default="local", help="user id the turn belongs to (default: local)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_vote)

    p = sub.add_parser("stats", help="thought-augmented win rate with a Wilson 95%% interval")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_stats)
