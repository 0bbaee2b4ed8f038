"""Chat use cases: a turn answers one question twice (papers only vs papers ∪ thoughts), blind and side by side;
the user votes; a thought is made in the background from the preferred answer.

Sides are random per turn and stored. A vote is committed to SQLite before `vote` returns; every vote and
change of vote is logged. The UI and the CLI call the same functions here.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace

from copilot.errors import UserError
from copilot.features.answers import side_tables, stream_reply
from copilot.features.chat_view import ONE_ANSWER, AnswerView, TurnView, VoteView, answer_is_thought_side, same_answer
from copilot.features.evidence_search import table_paper_hits
from copilot.features.job_runner import runner as _runner
from copilot.features.job_runner import runner_alive as _runner_alive
from copilot.features.limits import check_rate
from copilot.features.profile import reader_text
from copilot.llm import LLMError, Usage
from copilot.methods.evidence_text import split_table
from copilot.methods.followup import PreviousTurn, standalone_question
from copilot.methods.thought_retriever import (
    check_answer,
    labels_to_ids,
    new_thought_id,
    retrieve_both,
    think,
)
from copilot.prompts import CANNOT_ANSWER
from copilot.records import Evidence, storable_text
from copilot.services import Services
from copilot.store.chat_log import RAW, THOUGHTS, AnswerOutcome, JobOutcome, NewTurn, SourceRecord, ThoughtJob

log = logging.getLogger(__name__)

CHOICES = (THOUGHTS, RAW, "tie", "bad")
VOTE_CHOICES = (*CHOICES, "A", "B")     # A/B: the side as shown
# the answer a vote makes the turn's thought from: the preferred; a tie, the thought side (Algorithm 1's); "bad": none
THOUGHT_FROM = {THOUGHTS: THOUGHTS, "tie": THOUGHTS, RAW: RAW, "bad": None}
SWEEP_AFTER_S = 15 * 60          # unvoted turns older than this get their (no-vote) thought job
TABLE_POOL_FACTOR = 1.5          # the evidence table's pool: 1.5 × top_k papers, of which the floor keeps ≤ 6

_sides = random.SystemRandom()


class ChatError(UserError, ValueError):
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
    comparison: str                # "pending" → "yes" | "same_items" | "same_answer" | "failed"
    answers: list[AnswerState]
    retrieval_s: float
    reader: str = ""
    created_at: float = field(default_factory=time.time)
    asked: str = ""                # the user's own words when `question` is their follow-up made standalone

    @property
    def done(self) -> bool:
        return all(a.done for a in self.answers)

    def view(self) -> TurnView:
        """The same view as `Chat.view` for a turn still being answered."""
        answers = tuple(AnswerView(label=a.label, kind=a.kind, text=a.text, error=a.error, done=a.done,
                                   seconds=a.seconds, thought_augmented=a.thought_augmented, notes=tuple(a.notes),
                                   sources=tuple(SourceRecord.of(e) for e in a.sources)) for a in self.answers)
        return TurnView(turn_id=self.id, user=self.user, question=self.question, comparison=self.comparison,
                        answers=answers, retrieval_s=self.retrieval_s, notice=self.notice, asked=self.asked,
                        created_at=self.created_at)


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
    """The chat use cases over one Services; its thought jobs run on the Services' background pool (one thread)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.settings = services.settings
        self.log = services.chat_log
        self.jobs = services.thought_jobs
        self.memory = services.thought_memory

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
        _ = self.services.embedder.dimension   # loads the model once per process, outside the retrieval timing
        started = time.perf_counter()
        embedding = self.services.embedder.embed_cached([text])[0]    # retrieval and the table embed it once
        found = self._retrieve(text, embedding, user)
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
        reader, profile_notice = reader_text(self.services, user) if personalize else ("", "")
        turn = Turn(id=uuid.uuid4().hex[:12], user=user, question=text,
                    notice=" ".join(n for n in (notice, profile_notice) if n), comparison=comparison,
                    answers=answers, retrieval_s=retrieval_s, reader=reader, asked=asked)
        info = self.services.llm_info()
        self.log.add_turn(NewTurn(
            id=turn.id, user=user, created_at=turn.created_at, question=text, question_chars=len(question or ""),
            comparison=comparison, side_a=side_a, backend=info["backend"], model=info["model"],
            embedder=self.services.embedder.name, personalized=bool(turn.reader), retrieval_s=retrieval_s,
            raw_sources=tuple(SourceRecord.of(e) for e in found.raw),
            thoughts_sources=tuple(SourceRecord.of(e) for e in found.augmented)))
        return turn

    def _retrieve(self, question: str, embedding, user: str):
        """Both retrievals. The tiny profile answers with the evidence table: a deeper pool of papers, ranked as
        Search ranks them (meaning and words, the filters the question implies); the table reads each paper's whole
        abstract from the store, so no token budget cuts the pool."""
        plan = self.services.generation
        where = self.memory.visible_where(user)
        if self.services.model_profile.writes:
            return retrieve_both(self.services.store, embedding, self.settings.top_k, plan.source_budget, where,
                                 item_tokens=plan.source_cap)
        pool = round(TABLE_POOL_FACTOR * self.settings.top_k)
        hits = table_paper_hits(self.services, question, embedding, pool)
        return retrieve_both(self.services.store, embedding, pool, pool * (plan.source_cap or 90), where,
                             item_tokens=plan.source_cap, paper_hits=hits)

    def _previous(self, turn_id: str | None, user: str) -> PreviousTurn | None:
        """The turn a follow-up refers to: its question and the answer shown first (the voted one if any)."""
        view = self.view(turn_id, user) if turn_id else None
        chosen = view.shown_answer() if view else None
        if chosen is None:
            return None
        return PreviousTurn(view.question, chosen.text, [s.title or s.preview for s in chosen.sources])

    def stream(self, turn: Turn) -> Iterator[Turn]:
        """Generate the answers one after the other (the local model runs one call at a time), yielding the turn
        after every piece. One side failing does not stop the other."""
        try:
            started = time.perf_counter()
            tables = side_tables(self.services, turn.question, [a.sources for a in turn.answers])   # built once
            table_s = (time.perf_counter() - started) / len(turn.answers)    # an even share of it to each answer
            for answer, rows in zip(turn.answers, tables or [None] * len(turn.answers)):
                started = time.perf_counter() - table_s
                yield turn
                answer.usage = Usage()
                try:
                    for piece in stream_reply(self.services, turn.question, answer.sources, turn.reader,
                                              usage=answer.usage, rows=rows):
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
        words, table = split_table(answer.text)      # a writing profile's words over the table: the checks are theirs
        checked = check_answer(words or table, answer.sources)
        answer.notes += (answer.usage.notices if answer.usage else []) + checked.notes
        answer.text = f"{checked.text}\n\n{table}" if words and table and checked.text else checked.text or table
        if not answer.text:
            answer.text = CANNOT_ANSWER
            answer.notes.append("Nothing was left of the answer after the checks.")
        elif (answer.usage and answer.usage.completion_tokens and not answer.error
              and answer.usage.completion_tokens >= self.services.generation.answer_tokens):
            answer.notes.append("The answer reached its length limit and may stop mid-sentence.")

    def _finish(self, turn: Turn) -> None:
        for answer in turn.answers:
            answer.text = answer.text.strip()
            if not answer.done:
                answer.error = answer.error or "interrupted before the answer was complete"
                answer.done = True
        if turn.comparison == "pending":  # a same-items turn stays one (its single answer shows any error)
            quoted = not self.services.model_profile.writes     # two quoted answers alike: nothing to compare
            turn.comparison = "failed" if any(a.error for a in turn.answers) else (
                "same_answer" if quoted and same_answer(*(a.text for a in turn.answers)) else "yes")
        outcomes = {a.kind: AnswerOutcome(a.text, a.error, a.seconds) for a in turn.answers}
        self.log.finish_turn(turn.id, turn.comparison, raw=outcomes.get(RAW), thoughts=outcomes.get(THOUGHTS))
        if turn.comparison != "yes":
            # nothing to vote on: the thought comes from the answer we have (the thought-augmented one if any)
            usable = [a for a in turn.answers if not a.error and a.text]
            if usable:
                best = next((a for a in usable if a.kind == THOUGHTS), usable[0])
                self.request_thought(turn.id, best.kind, "no_comparison")
        if turn.comparison == "same_answer":      # both are kept in the log; the page shows one
            turn.answers = [replace(next(a for a in turn.answers if a.kind == RAW), label="A")]
        # after this turn's answers, not before: a thought job uses the one local model, and one started when the
        # question was asked made the first answer wait for it (about 1 s of a 2 s first token, docs/performance.md)
        self.sweep_unvoted(turn.user, keep=turn.id)

    # --- votes
    def vote(self, turn_id: str, choice: str, user: str) -> dict:
        """Record (or change) the user's vote; committed before returning, and every vote logged (two tabs voting
        at once leave one final vote and two log rows). In the same transaction the vote decides the turn's one
        thought (`_choose_thought`); the thought job runs in the background."""
        turn_id = storable_text(turn_id).strip()
        turn = self.log.turn(turn_id)
        if turn is None:
            raise ChatError(f"no turn with id {turn_id[:40]!r}")
        if turn.user != user:
            raise ChatError("this turn belongs to another user")
        choice = _normalise_choice(choice, turn.side_a)
        if turn.comparison != "yes":
            reason = {"same_items": "both retrievals found the same items, so there was one answer",
                      "same_answer": "both answers were the same (memory added nothing), so there was one answer",
                      "failed": "one of the answers failed", "pending": "the answers are not finished"}
            raise ChatError(f"this turn cannot be voted on: {reason.get(turn.comparison, turn.comparison)}")
        label = choice if choice not in (THOUGHTS, RAW) else ("A" if choice == turn.side_a else "B")
        current = self.log.vote(turn_id)
        counted = current is None and turn.revealed_at is None   # the first vote, cast before the sides were shown
        if current is not None and THOUGHT_FROM[current.choice] != THOUGHT_FROM[choice]:
            # a change that remakes the turn's thought is an LLM call on the one thought thread: it counts
            check_rate(self.services, user, None, "changing a vote")
        now = time.time()
        with self.db.transaction():   # the vote, its log row and the turn's thought commit together
            previous = self.log.record_vote(turn_id, user, choice, label, now)
            job_id, retracted = self._choose_thought(turn_id, THOUGHT_FROM[choice], "vote")
        self._after_choice(job_id, retracted)
        return {"turn_id": turn_id, "choice": choice, "label": label, "previous": previous,
                "changed": previous is not None and previous != choice, "recorded": True,
                "counted": counted and previous is None}

    # --- the one thought of a turn
    def request_thought(self, turn_id: str, answer: str | None, trigger: str) -> Future | None:
        """Make `answer` the source of the turn's one thought (None: no thought); never waits for the job."""
        with self.db.transaction():
            job_id, retracted = self._choose_thought(turn_id, answer, trigger)
        return self._after_choice(job_id, retracted)

    def _choose_thought(self, turn_id: str, answer: str | None, trigger: str) -> tuple[int | None, list[str]]:
        """Inside the caller's transaction: make `answer` (THOUGHTS, RAW, or None) the source of the turn's one
        thought. A current job that already makes it is kept (unless it failed: then it is tried again). Otherwise
        the current job is superseded: its thought retracted, or, queued, cancelled, or, running, left to retract
        what it makes (`_settle`). Returns (the new job's id, thought ids whose vectors must go)."""
        current = self.log.current_job(turn_id)
        if current is not None and current.answer == answer and current.status != "failed":
            return None, []
        now = time.time()
        retracted: list[str] = []
        if current is not None:
            status = current.status
            if current.thought_id:
                retracted = self.memory.thoughts.mark_retracted([current.thought_id], now)
                status = "retracted"
            elif status == "queued":
                status = "cancelled"
            self.log.supersede_job(current.id, status, now)
        if answer is None:
            return None, retracted
        return self.log.queue_job(turn_id, answer, trigger, new_thought_id(), _runner(), now), retracted

    def _after_choice(self, job_id: int | None, retracted: list[str]) -> Future | None:
        self.memory.drop_vectors(retracted)   # after the commit: a crash before this is fixed by memory.repair
        return self._submit(job_id) if job_id else None

    def _submit(self, job_id: int) -> Future:
        return self.jobs.submit(job_id, self._run_thought_job, job_id)

    def _claim(self, job_id: int) -> ThoughtJob | None:
        """Take a job to run: a queued one of this process, or one whose process has stopped."""
        with self.db.transaction():
            job = self.log.job(job_id)
            if job is None or job.status not in ("queued", "running"):
                return None
            if job.runner != _runner() or job.status == "running":
                if _runner_alive(job.runner):
                    return None
            return self.log.start_job(job_id, _runner(), new_thought_id())

    def _run_thought_job(self, job_id: int) -> str:
        try:
            job = self._claim(job_id)
        except Exception:  # e.g. the database stayed locked: the job stays queued, resumable later
            log.exception("thought job %s could not be claimed", job_id)
            raise
        if job is None:
            return "skipped"
        planned = job.planned_thought_id
        outcome = JobOutcome(status="failed", thought_id=None, similarity=None, error=None, reason=None)
        try:
            if self.memory.thoughts.exists(planned):
                outcome = replace(outcome, status="stored", thought_id=planned)   # stored before a crash: not twice
            elif job.superseded_at is not None:
                outcome = replace(outcome, status="cancelled")                     # its vote changed while it was down
            else:
                outcome = self._make_thought(job)
        except Exception as error:  # the job fails alone: logged, the turn and its vote stay
            log.exception("thought job %s for turn %s failed", job_id, job.turn_id)
            outcome = replace(outcome, error=f"{type(error).__name__}: {error}"[:500])
        if outcome.thought_id is None:
            self.memory.drop_vectors([planned])   # an attempt killed between its two writes may have left one
        return self._settle(job_id, outcome)

    def _make_thought(self, job: ThoughtJob) -> JobOutcome:
        turn = self.log.turn(job.turn_id)
        answer = turn.answer(job.answer)
        sources = [Evidence(id=s.id, kind=s.kind, title=s.title, text="", score=s.score) for s in answer.sources]
        # the answer cites [n] labels of its sources; a thought outlives the turn, so it keeps real ids
        text = labels_to_ids(split_table(answer.text or "")[0] or answer.text or "", sources)
        made = think(self.services.llm, self.memory, turn.question, text, sources, origin="chat", user=turn.user,
                     max_tokens=self.services.generation.answer_tokens, thought_id=job.planned_thought_id)
        return JobOutcome(status=made.status, thought_id=made.thought_id, similarity=made.similarity, error=None,
                          reason=made.draft.reason or None)

    def _settle(self, job_id: int, outcome: JobOutcome) -> str:
        """Record the job's outcome; if a vote superseded it meanwhile, retract what it stored."""
        retracted: list[str] = []
        with self.db.transaction():
            if self.log.job(job_id).superseded_at is not None and outcome.thought_id:
                retracted = self.memory.thoughts.mark_retracted([outcome.thought_id]) or [outcome.thought_id]
                outcome = replace(outcome, status="retracted")
            self.log.finish_job(job_id, outcome)
        self.memory.drop_vectors(retracted)
        return outcome.status

    def stale_jobs(self) -> list[int]:
        """Thought jobs left queued or running by a process that has stopped (a crash or a restart)."""
        return [job.id for job in self.log.open_jobs() if not _runner_alive(job.runner)]

    def resume_jobs(self) -> list[int]:
        """Run the stale jobs again in this process."""
        stale = self.stale_jobs()
        for job_id in stale:
            self._submit(job_id)
        return stale

    def wait_for_thoughts(self, turn_id: str, timeout: float | None = None) -> list[dict]:
        """Block until this turn's thought jobs started in this process are done (the CLI does; the UI never does)."""
        job_ids = [job.id for job in self.log.jobs_of(turn_id)]
        for job_id in self.jobs.wait(job_ids, timeout):
            log.warning("thought job %s of turn %s still running after %s s", job_id, turn_id, timeout)
        return self.thought_jobs(turn_id)

    def wait_for_all(self, timeout: float | None = None) -> None:
        """Block until every thought job started by this process's Services is done (tests, `doctor --repair`)."""
        self.jobs.wait_all(timeout)

    def thought_jobs(self, turn_id: str) -> list[dict]:
        """Every job of the turn, oldest first; the current one has `superseded_at` None."""
        return [job.as_dict() for job in self.log.jobs_of(turn_id)]

    def sweep_unvoted(self, user: str | None, keep: str | None = None) -> int:
        """Unvoted comparison turns get their thought from the thought-augmented answer (Algorithm 1's own) once
        their grace period is over: SWEEP_AFTER_S for anyone's turn; for `user`'s own turns, when the answers to
        their next question are done (`keep`, that question's turn, still waits for its vote). A later vote still
        decides: it replaces or retracts that thought."""
        turn_ids = [turn_id for turn_id in self.log.unvoted_comparisons(user, time.time() - SWEEP_AFTER_S)
                    if turn_id != keep]
        for turn_id in turn_ids:
            self.request_thought(turn_id, THOUGHTS, "no_vote")
        return len(turn_ids)

    # --- reading
    def view(self, turn_id: str | None, user: str | None = None) -> TurnView | None:
        """A stored turn for display: answers in A/B order with their sources, the vote, thought jobs. With `user`,
        None unless the turn is theirs (a page only ever shows its user's own turns)."""
        turn = self.log.turn(storable_text(turn_id).strip()) if isinstance(turn_id, str) and turn_id else None
        if turn is None or (user is not None and turn.user != user):
            return None
        if turn.comparison in ONE_ANSWER or turn.thoughts.sources == turn.raw.sources:
            kinds = [RAW]
        else:
            kinds = [THOUGHTS, RAW] if turn.side_a == THOUGHTS else [RAW, THOUGHTS]
        answers = []
        for label, kind in zip("AB", kinds):
            stored = turn.answer(kind)
            answers.append(AnswerView(label=label, kind=kind, text=stored.text or "", error=stored.error,
                                      seconds=stored.seconds, done=turn.finished_at is not None,
                                      thought_augmented=answer_is_thought_side(kind, turn.comparison),
                                      sources=tuple(stored.sources)))
        vote = self.log.vote(turn.id)
        return TurnView(turn_id=turn.id, user=turn.user, question=turn.question, comparison=turn.comparison,
                        answers=tuple(answers), retrieval_s=turn.retrieval_s, created_at=turn.created_at,
                        vote=VoteView(vote.choice, vote.label, vote.changes) if vote else None,
                        thought_jobs=tuple(self.thought_jobs(turn.id)),
                        models={"backend": turn.backend, "model": turn.model, "embedder": turn.embedder})

    def turn_record(self, turn_id: str, hide_sides: bool = False) -> dict | None:
        """A stored turn in the CLI's JSON shape; with `hide_sides`, an unvoted comparison shows only what the page
        shows before the vote (the answers' words)."""
        view = self.view(turn_id)
        return None if view is None else view.record(hide_sides=hide_sides and not view.revealed)

    def recent_turns(self, user: str, limit: int = 10) -> list[dict]:
        return [asdict(summary) for summary in self.log.recent_turns(user, limit)]

    def ask(self, question: str, user: str, personalize: bool = False, wait: bool = True,
            vote: str | None = None, previous_turn: str | None = None, reveal: bool = False) -> dict:
        """The whole turn without a UI. A comparison gets no thought here: `vote` (for scripts) decides it as a
        user's would; without, it waits for a vote or its grace period (`sweep_unvoted`). One answer gets its thought
        at once; `wait` blocks until the thought job is done. An unvoted comparison's record is blind (the answers'
        words only) unless `reveal`, which shows its sides and records that: a later vote is not blind, not counted."""
        turn = self.prepare(question, user, personalize, previous_turn=previous_turn)
        for _ in self.stream(turn):
            pass
        voted = None
        if vote is not None:
            try:
                voted = self.vote(turn.id, vote, user)
            except ChatError as error:   # e.g. one answer only: the answers stand, the vote is refused
                voted = {"recorded": False, "error": str(error)}
        if reveal and turn.comparison == "yes":
            self.log.reveal(turn.id)
        if wait:
            self.wait_for_thoughts(turn.id)
        record = self.turn_record(turn.id, hide_sides=not reveal) or {}
        if voted is not None:
            record["vote"] = voted
        if turn.notice:
            record["notice"] = turn.notice
        if turn.asked:
            record["asked"], record["question"] = turn.asked, turn.question
        return record


def _normalise_choice(choice: str, side_a: str) -> str:
    value = (choice or "").strip().lower()
    if value in ("a", "b"):
        return side_a if value == "a" else (RAW if side_a == THOUGHTS else THOUGHTS)
    if value not in CHOICES:
        raise ChatError(f"choice must be one of {', '.join(CHOICES)} (or A/B), not {str(choice)[:40]!r}")
    return value


def chat_for(services: Services) -> Chat:
    """The chat use cases over `services` (cheap: the state lives in Services)."""
    return Chat(services)


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
