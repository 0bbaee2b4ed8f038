"""The one thought of a Chat turn: made in the background from the answer a vote preferred (or, unvoted, from the
thought-augmented answer once the user moves on, when its table clears UNVOTED_FLOOR), on the Services' one
background thread; a later vote replaces or retracts it. Jobs are rows in SQLite, so a restarted process resumes
them."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import replace

import numpy as np

from copilot.features.chat_view import shown_sources
from copilot.features.job_runner import runner as _runner
from copilot.features.job_runner import runner_alive as _runner_alive
from copilot.features.signin import Writer
from copilot.methods.thought_retriever import labels_to_ids, new_thought_id, think
from copilot.records import Evidence, is_document
from copilot.services import BackgroundJobs, Services
from copilot.store.chat_log import RAW, THOUGHTS, ChatLog, JobOutcome, ThoughtJob
from copilot.table import EvidenceTable

log = logging.getLogger(__name__)

# the answer a vote makes the turn's thought from: the preferred; a tie, the thought side (Algorithm 1's); "bad": none
THOUGHT_FROM = {THOUGHTS: THOUGHTS, "tie": THOUGHTS, RAW: RAW, "bad": None}
SWEEP_AFTER_S = 15 * 60          # unvoted turns older than this get their (no-vote) thought job
# Thought-Retriever stores a thought only when its confidence step says the answer is a real one. A vote is that
# judgement; an answer nobody voted for (a one-answer turn, an unvoted comparison swept later) must earn it from its
# table: the mean cosine to the question of its QUALITY_ROWS closest quotes reaches UNVOTED_FLOOR. Measured on the
# dev questions and their paraphrases (eval/thoughts_floor_eval.py, docs/thoughts-eval.md, issue #49): the tables it
# keeps hold 80% relevant thought rows, those it drops 46%.
UNVOTED = ("no_comparison", "no_vote")
UNVOTED_FLOOR = 0.55
QUALITY_ROWS = 3


def table_quality(embed, question: str, table: EvidenceTable | None) -> float:
    """The mean cosine to the question of a table's QUALITY_ROWS closest rows (their quotes as shown); 0 for no
    table or no rows."""
    if not table or not (question or "").strip():
        return 0.0
    texts = [" ".join(quote.shown for quote in row.quotes) for row in table.rows]
    vectors = np.asarray(embed([question] + texts), dtype=np.float32)
    return float(np.mean(np.sort(vectors[1:] @ vectors[0])[-QUALITY_ROWS:]))


def unvoted_shortfall(embed, question: str, table: EvidenceTable | None) -> str | None:
    """Why an unvoted answer makes no thought (its table is under the floor), or None when it may."""
    quality = table_quality(embed, question, table)
    if quality >= UNVOTED_FLOOR:
        return None
    return (f"nobody preferred it and its closest quotes are {quality:.3f} close to the question, under the "
            f"{UNVOTED_FLOOR:.2f} an unvoted answer needs")


class TurnThoughts:
    """The thought jobs of turns (part of features.chat.Chat, which sets these up)."""

    services: Services
    log: ChatLog
    jobs: BackgroundJobs

    @property
    def memory(self):
        return self.services.thought_memory

    @property
    def db(self):
        return self.services.db

    def request_thought(self, turn_id: str, answer: str | None, trigger: str,
                        writer: Writer | None = None) -> Future | None:
        """Make `answer` the source of the turn's one thought (None: no thought); never waits for the job. `writer`:
        the signed-in visitor's model, which drafts a thought from a written answer (held by the job in memory only;
        a job resumed after a restart has none, features.signin). A turn that quotes an uploaded document makes no
        thought: a document is its owner's alone, and thought memory serves every visitor (issue #57 item 3)."""
        if answer is not None and self._quotes_document(turn_id):
            return None
        with self.db.transaction():
            job_id, retracted = self._choose_thought(turn_id, answer, trigger)
        return self._after_choice(job_id, retracted, writer)

    def _quotes_document(self, turn_id: str) -> bool:
        turn = self.log.turn(turn_id)
        return turn is not None and any(is_document(source.id) for answer in (turn.raw, turn.thoughts)
                                        for source in answer.sources)

    def _choose_thought(self, turn_id: str, answer: str | None, trigger: str) -> tuple[int | None, list[str]]:
        """Inside the caller's transaction: make `answer` (THOUGHTS, RAW, or None) the source of the turn's one
        thought. A current job that already makes it is kept (unless it failed: then it is tried again). Otherwise
        the current job is superseded: its thought retracted, or, queued, cancelled, or, running, left to retract
        what it makes (`_settle`). A user's decision (a vote, a judgement) on the answer an unvoted job uses (queued,
        running or refused by the unvoted floor) supersedes it, unless it stored its thought: the decision needs no
        floor. Returns (the new job's id, thought ids whose vectors must go)."""
        current = self.log.current_job(turn_id)
        decided_anew = (trigger not in UNVOTED and current is not None and current.trigger in UNVOTED
                        and current.status != "stored")
        if current is not None and current.answer == answer and current.status != "failed" and not decided_anew:
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

    def _after_choice(self, job_id: int | None, retracted: list[str], writer: Writer | None = None) -> Future | None:
        self.memory.drop_vectors(retracted)   # after the commit: a crash before this is fixed by memory.repair
        if not job_id:
            return None
        return self._submit(job_id, writer) if writer is not None else self._submit(job_id)

    def _submit(self, job_id: int, writer: Writer | None = None) -> Future:
        return self.jobs.submit(job_id, self._run_thought_job, job_id, writer)

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

    def _run_thought_job(self, job_id: int, writer: Writer | None = None) -> str:
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
                outcome = self._make_thought(job, writer)
        except Exception as error:  # the job fails alone: logged, the turn and its vote stay
            log.exception("thought job %s for turn %s failed", job_id, job.turn_id)
            outcome = replace(outcome, error=f"{type(error).__name__}: {error}"[:500])
        if outcome.thought_id is None:
            self.memory.drop_vectors([planned])   # an attempt killed between its two writes may have left one
        return self._settle(job_id, outcome)

    def _make_thought(self, job: ThoughtJob, writer: Writer | None = None) -> JobOutcome:
        turn = self.log.turn(job.turn_id)
        if turn is None:
            raise LookupError(f"turn {job.turn_id} is no longer stored")
        answer = turn.answer(job.answer)
        if job.trigger in UNVOTED and (weak := unvoted_shortfall(self.services.embedder.embed, turn.question,
                                                                 answer.table)):
            # not "not_an_answer": its rows may well answer the question (the history said "no real answer", #59)
            return JobOutcome(status="under_floor", thought_id=None, similarity=None, error=None, reason=weak)
        sources = [Evidence(id=s.id, kind=s.kind, title=s.title, text="", score=s.score) for s in answer.sources]
        words = answer.words or ""     # recorded with the turn, never read back from its text (#58)
        usable = writer if writer is not None and writer.failure is None else None
        # a table alone, or written words no model here may draft from (a signed-in visitor's, without their sign-in):
        # the thought is the table's rows
        drafts = usable is not None or self.services.model_profile.writes
        table = answer.table if answer.table and (not words or not drafts) else None
        text = (answer.text or "")[len(words):].strip() if table is not None else words or answer.text or ""
        # the words cite [n] labels of the answer's sources; a thought outlives the turn, so it keeps real ids
        shown = [Evidence(id=s.id, kind=s.kind, title=s.title, text="", score=s.score)
                 for s in shown_sources(answer.table, answer.sources)]
        llm, plan = (usable.llm, usable.plan) if usable and table is None else (self.services.llm,
                                                                                  self.services.generation)
        origin = f"chat, written by {usable.model}" if usable and table is None else "chat"
        made = think(llm, self.memory, turn.question, labels_to_ids(text, shown), sources,
                     origin=origin, user=turn.user, max_tokens=plan.answer_tokens,
                     thought_id=job.planned_thought_id, table=table,
                     quoted=table is None and answer.words is None)
        return JobOutcome(status=made.status, thought_id=made.thought_id, similarity=made.similarity, error=None,
                          reason=made.draft.reason or None)

    def _settle(self, job_id: int, outcome: JobOutcome) -> str:
        """Record the job's outcome; if a vote superseded it meanwhile, retract what it stored."""
        retracted: list[str] = []
        with self.db.transaction():
            current = self.log.job(job_id)
            if current is not None and current.superseded_at is not None and outcome.thought_id:
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

    def sweep_unvoted(self, user: str | None, keep: str | None = None, writer: Writer | None = None) -> int:
        """Unvoted comparison turns get their thought from the thought-augmented answer (Algorithm 1's own) once
        their grace period is over: SWEEP_AFTER_S for anyone's turn; for `user`'s own turns, when the answers to
        their next question are done (`keep`, that question's turn, still waits for its vote). A later vote still
        decides: it replaces or retracts that thought. `writer` is `user`'s (a signed-in visitor's token): it drafts
        only their own turns' thoughts; another visitor's swept turn makes its thought without it (from its table),
        never billed to this visitor nor written by their model (#58)."""
        due = self.log.unvoted_comparisons(user, time.time() - SWEEP_AFTER_S)
        swept = [(turn_id, owner) for turn_id, owner in due if turn_id != keep]
        for turn_id, owner in swept:
            self.request_thought(turn_id, THOUGHTS, "no_vote", writer=writer if user is not None and owner == user
                                 else None)
        return len(swept)
