"""Chat use cases: a turn answers one question twice (papers only vs papers ∪ thoughts), blind and side by side;
the user votes; a thought is made in the background from the preferred answer.

Sides are random per turn and stored. Votes: features.chat_votes; the thought a turn leaves: features.chat_thoughts.
The UI and the CLI call the same functions here.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Generator, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace

from copilot.features import fulltext, scope
from copilot.features.answers import (
    answer_tables,
    question_ranking,
    stream_reply,
    table_text,
    with_body_sentences,
    with_table,
)
from copilot.features.chat_thoughts import SWEEP_AFTER_S, THOUGHT_FROM  # noqa: F401  (re-exported)
from copilot.features.chat_view import (
    ONE_ANSWER,
    AnswerView,
    TurnView,
    VoteView,
    answer_is_thought_side,
    same_answer,
    shown_sources,
)
from copilot.features.chat_votes import CHOICES, VOTE_CHOICES, ChatError, TurnVotes  # noqa: F401  (re-exported)
from copilot.features.named_papers import named_papers
from copilot.features.profile import reader_text
from copilot.features.scope import scoped_retrievals
from copilot.features.signin import Writer
from copilot.grounding import ids_to_labels
from copilot.llm import LLMError, Usage
from copilot.methods import filters
from copilot.methods.followup import PreviousTurn, standalone_question
from copilot.methods.thought_retriever import (
    check_answer,
    labels_to_ids,
    retrieve_both,
    with_first,
)
from copilot.prompts import CANNOT_ANSWER
from copilot.records import Evidence, Paper, is_document, storable_text
from copilot.services import Services
from copilot.store.chat_log import RAW, THOUGHTS, AnswerOutcome, NewTurn, SourceRecord
from copilot.table import EvidenceTable

log = logging.getLogger(__name__)

FILTER_PAPERS = 12               # a filtering follow-up is asked of the previous answer's papers, at most these
TABLE_POOL_FACTOR = 1.5          # the evidence table's pool: 1.5 × top_k papers, of which the floor keeps ≤ 6

_sides = random.SystemRandom()


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
    table: EvidenceTable | None = None               # built once per side per turn (`answers.answer_tables`)
    words: str | None = None                         # a model's checked words above the table (None: no model's)

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
    ranking: list[tuple[str, float]] = field(default_factory=list)   # Search's fused ranking, made once per turn
    writes: bool = False           # the model profile's policy, chosen once per turn: a model writes (else: the table)
    writer: Writer | None = field(default=None, repr=False)   # a signed-in visitor's model, this turn only (#50)
    scope: tuple[str, ...] = ()    # the papers the question is about (features.scope); () asks the library
    replaced: bool = False         # the page asked again before its answers were done: forgotten, nothing made of it

    @property
    def done(self) -> bool:
        return all(a.done for a in self.answers)

    def alike(self) -> bool:
        """Two quoted answers, both done, that say the same: nothing to compare, shown as one (`Chat._finish`)."""
        if self.writes or len(self.answers) != 2 or not self.done or any(a.error for a in self.answers):
            return False
        first, second = self.answers
        return same_answer(first.text, second.text, first.table, second.table)

    def view(self) -> TurnView:
        """The same view as `Chat.view` for a turn still being answered. Two quoted answers alike are shown as the
        one they will be stored as while their papers are read (blind until the turn is finished)."""
        shown = self.answers
        if self.comparison == "pending" and self.alike():
            shown = [replace(next(a for a in self.answers if a.kind == RAW), label="A")]
        answers = tuple(AnswerView(label=a.label, kind=a.kind, text=a.text, error=a.error, done=a.done,
                                   seconds=a.seconds, thought_augmented=a.thought_augmented, notes=tuple(a.notes),
                                   sources=shown_sources(a.table, tuple(SourceRecord.of(e) for e in a.sources)),
                                   table=a.table) for a in shown)
        return TurnView(turn_id=self.id, user=self.user, question=self.question, comparison=self.comparison,
                        answers=answers, retrieval_s=self.retrieval_s, notice=self.notice, asked=self.asked,
                        created_at=self.created_at, models=self.writer.info if self.writer else {}, scope=self.scope)


def clean_question(question: str | None, max_chars: int) -> tuple[str, str]:
    """(question, notice): an empty question is refused; a long one is cut to `max_chars` with a notice."""
    text = storable_text(question).strip()
    if not text:
        raise ChatError("Type a question first.")
    if len(text) > max_chars:
        return text[:max_chars], (f"Your question had {len(text):,} characters; only the first {max_chars:,} "
                                  "were used.")
    return text, ""


class Chat(TurnVotes):
    """The chat use cases over one Services: turns here, their votes (features.chat_votes) and thoughts
    (features.chat_thoughts); its thought jobs run on the Services' background pool (one thread)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.settings = services.settings
        self.log = services.chat_log
        self.jobs = services.thought_jobs

    # --- a turn
    def prepare(self, question: str | None, user: str, personalize: bool = False,
                previous_turn: str | None = None, writer: Writer | None = None,
                papers: Sequence[str] | None = None) -> Turn:
        """Validate, retrieve both ways, assign sides at random, record the turn. No LLM call yet.
        With `previous_turn` (the same chat's last turn), a follow-up is rewritten into a standalone question.
        `writer`: a signed-in visitor's model (features.signin) writes this turn's answers. `papers`: arXiv ids or
        links of the papers the question is about (features.scope): answered from them only, as one answer."""
        text, notice = clean_question(question, self.settings.max_input_chars)
        chosen, scope_note = scope.scope_papers(self.services, scope.scope_ids(papers), user) if papers else ([], "")
        asked = ""
        earlier = self.view(previous_turn, user) if previous_turn else None
        wanted = filters.filter_of(text)
        titled = True       # the scope's notice names its papers, unless the filtering follow-up's has
        if not chosen and wanted and (earlier_papers := _shown_papers(earlier)):
            # "And which of them …": asked of the previous answer's papers (#59 item 8), as typed
            chosen, scope_note = scope.scope_papers(self.services, earlier_papers, user)
            scope_note = " ".join(n for n in (scope_note, scope.filter_notice(wanted, chosen)) if n)
            titled = False
        elif not chosen:      # a scoped question is asked of its papers as typed: its "it", "they" are those papers
            rewrite = standalone_question(text, _previous(earlier))
            if rewrite.rewritten:
                asked, text = text, rewrite.question
        if self.services.store.count("paper") == 0:
            raise ChatError("The library is empty: import papers first (Library tab, or `python -m copilot import`).")
        _ = self.services.embedder.dimension   # loads the model once per process, outside the retrieval timing
        started = time.perf_counter()
        embedding = self.services.embedder.embed_cached([text])[0]    # retrieval and the table embed it once
        writes = writer is not None or self.services.model_profile.writes
        if chosen:
            found = self._retrieve(text, embedding, user, [], writes, scope=chosen)
            ranking = scope.scoped_ranking(found.raw)
            notice = " ".join(n for n in (notice, scope_note, scope.scope_notice(chosen, titled)) if n)
        else:
            ranking = question_ranking(self.services, text, embedding,
                                       round(TABLE_POOL_FACTOR * self.settings.top_k))
            found = self._retrieve(text, embedding, user, ranking, writes, writer.plan if writer else None)
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
        named_notice = named_papers(self.services, text).notice      # a name that fits several papers: said
        turn = Turn(id=uuid.uuid4().hex[:12], user=user, question=text,
                    notice=" ".join(n for n in (notice, named_notice, profile_notice) if n), comparison=comparison,
                    answers=answers, retrieval_s=retrieval_s, reader=reader, asked=asked, ranking=ranking,
                    writes=writes, writer=writer, scope=tuple(p.id for p in chosen))
        info = writer.info if writer else self.services.llm_info()
        self.log.add_turn(NewTurn(
            id=turn.id, user=user, created_at=turn.created_at, question=text, question_chars=len(question or ""),
            comparison=comparison, side_a=side_a, backend=info["backend"], model=info["model"],
            embedder=self.services.embedder.name, personalized=bool(turn.reader), retrieval_s=retrieval_s,
            raw_sources=tuple(SourceRecord.of(e) for e in found.raw),
            thoughts_sources=tuple(SourceRecord.of(e) for e in found.augmented), asked=asked, scope=turn.scope))
        return turn

    def _retrieve(self, question: str, embedding, user: str, ranking: list[tuple[str, float]], writes: bool = False,
                  plan=None, scope: Sequence[Paper] = ()):
        """Both retrievals. The tiny profile answers with the evidence table: a deeper pool of papers, the first of
        `ranking` (Search's fused order: meaning and words, the filters the question implies); the table reads each
        paper's whole abstract from the store, so no token budget cuts the pool. `scope`: the papers the question is
        about, the only items, the same on both sides (one answer: memory adds no paper to them)."""
        if scope:
            return scoped_retrievals(self.services, scope, embedding, user)
        plan = plan or self.services.generation
        where = self.memory.visible_where(user)
        if writes:      # the papers the question names head both sides (the table's pool has them first too)
            found = retrieve_both(self.services.store, embedding, self.settings.top_k, plan.source_budget, where,
                                  item_tokens=plan.source_cap)
            return with_first(found, self._named(question, embedding), plan.source_cap)
        pool = round(TABLE_POOL_FACTOR * self.settings.top_k)
        hits = ranking[:pool]
        return retrieve_both(self.services.store, embedding, pool, pool * (plan.source_cap or 90), where,
                             item_tokens=plan.source_cap, paper_hits=hits)

    def _named(self, question: str, embedding) -> list[Evidence]:
        """The papers the question names (features.named_papers), as items with their cosine to the question."""
        ids = list(named_papers(self.services, question).ids)
        if not ids:
            return []
        vectors = self.services.store.paper_embeddings(ids)
        return self.services.store.fetch("paper", [(pid, float(vectors[pid] @ embedding)) for pid in ids
                                                   if pid in vectors])

    def stream(self, turn: Turn) -> Generator[Turn, None, None]:
        """Generate the answers one after the other (the local model runs one call at a time), yielding the turn
        after every piece. One side failing does not stop the other."""
        try:
            started = time.perf_counter()
            tables = answer_tables(self.services, turn.question, [a.sources for a in turn.answers], turn.ranking)
            table_s = (time.perf_counter() - started) / len(turn.answers)    # an even share of it to each answer
            papers = list(dict.fromkeys(row.paper_id for table in tables for row in table.rows
                                         if not is_document(row.paper_id)))     # an upload is read already
            reading = fulltext.read_soon(self.services, papers, question=turn.question)
            asked_notice = turn.notice
            turn.notice = " ".join(part for part in (
                asked_notice, fulltext.reading_line(self.services, len(reading), papers)) if part)
            for answer, table in zip(turn.answers, tables):
                started = time.perf_counter() - table_s
                answer.table = table
                yield turn
                answer.usage = Usage()
                try:
                    for piece in stream_reply(self.services, turn.question, answer.sources, table, turn.reader,
                                              usage=answer.usage, writes=turn.writes, writer=turn.writer):
                        answer.text += piece
                        yield turn
                except LLMError as error:
                    answer.error = str(error)
                    if turn.writer is not None:       # the router failed: its sentence, and the table instead
                        answer.text = table_text(table, answer.sources)
                self._check(answer, turn.writes and not (turn.writer and answer.error),
                            turn.writer.plan.answer_tokens if turn.writer else None)
                answer.seconds = time.perf_counter() - started
                answer.done = True
                yield turn
            if reading and not turn.writes:
                yield from self._with_full_text(turn, reading, asked_notice)
        finally:
            self._finish(turn)
        yield turn

    def replaced(self, turn: Turn, stream: Generator[Turn, None, None]) -> None:
        """The page asked another question: this turn's stream stops. A turn whose answers were not all done (a
        double click, a question replaced at once, B still being written) is not kept, as nobody saw it answered: no
        thought job, no sweep, no row (issue #58); one whose answers were shown stays in the history as it stands (its
        papers are still read)."""
        shown = all(answer.done for answer in turn.answers)
        turn.replaced = not shown     # before closing: closing finishes the turn (`_finish`), which then makes nothing
        stream.close()
        if not shown:
            self.log.forget_turn(turn.id)

    def _with_full_text(self, turn: Turn, reading: list[str], asked_notice: str) -> Iterator[Turn]:
        """The quoted answers again as each paper being read is, and at each paper's first look (waiting at most
        fulltext.WAIT_S in all): both sides' tables are made anew, so a row whose body answers better quotes it, the
        same way on both sides, from the first paper looked at on, not after the slowest. A model's words are never
        redone (they cite the rows they were written over)."""
        reader = fulltext.reader_for(self.services)
        deadline = time.monotonic() + fulltext.WAIT_S
        outcomes: dict[str, fulltext.Outcome] = {}
        looked: set[str] = set()
        progress = 0              # a point per first look (the sentences it would quote), two per paper read
        while progress < 2 * len(reading) and (left := deadline - time.monotonic()) > 0:
            now = reader.wait_progress(reading, left, beyond=progress)
            if now == progress:                    # the deadline passed with no paper further
                break
            progress = now
            ended = reader.wait(reading, 0.0)
            looks = reader.looks(reading)
            # anew at a first look, a paper read, and a first-looked paper that could not be stored (back to its
            # abstract)
            if set(looks) - looked or any(ended[pid].status == "ok" or pid in looked
                                          for pid in ended if pid not in outcomes):
                tables = answer_tables(self.services, turn.question, [a.sources for a in turn.answers],
                                       turn.ranking, looks=looks)
                for answer, table in zip(turn.answers, tables):
                    if not answer.error:
                        answer.table = table
                        answer.text = "".join(stream_reply(self.services, turn.question, answer.sources, table,
                                                           turn.reader, writes=False))
            outcomes, looked = ended, looked | set(looks)
            turn.notice = self._reading_notice(asked_notice, outcomes, len(reading), waiting=True)
            yield turn
        turn.notice = self._reading_notice(asked_notice, outcomes, len(reading),
                                           looked=len(set(reader.looks(reading)) - set(outcomes)))

    @staticmethod
    def _reading_notice(asked_notice: str, outcomes: dict, asked: int, waiting: bool = False, looked: int = 0) -> str:
        return " ".join(part for part in (asked_notice, fulltext.read_line(outcomes, asked, waiting, looked)) if part)

    def _check(self, answer: AnswerState, writes: bool, answer_tokens: int | None = None) -> None:
        """Run the output checks on a writing profile's finished words (a table's quotes are slices of their papers,
        checked where they are made, and never edited), put its table under them, and its labels in the order the
        page counts its sources (`shown_sources`); what the checks removed becomes a note under it."""
        if not writes or not answer.text.strip():
            return
        checked = check_answer(answer.text, with_body_sentences(answer.sources, answer.table))
        answer.notes += (answer.usage.notices if answer.usage else []) + checked.notes
        shown = shown_sources(answer.table, tuple(SourceRecord.of(e) for e in answer.sources))
        words = ids_to_labels(labels_to_ids(checked.text, answer.sources), [s.id for s in shown])
        answer.words = words or None
        answer.text = with_table(words, answer.table) if answer.table is not None else words
        if not answer.text:
            answer.text = CANNOT_ANSWER
            answer.notes.append("Nothing was left of the answer after the checks.")
        elif (answer.usage and answer.usage.completion_tokens and not answer.error
              and answer.usage.completion_tokens >= (answer_tokens or self.services.generation.answer_tokens)):
            answer.notes.append("The answer reached its length limit and may stop mid-sentence.")

    def _finish(self, turn: Turn) -> None:
        for answer in turn.answers:
            answer.text = answer.text.strip()
            if not answer.done:
                answer.error = answer.error or "interrupted before the answer was complete"
                answer.done = True
        if turn.comparison == "pending":  # a same-items turn stays one (its single answer shows any error)
            turn.comparison = "failed" if any(a.error for a in turn.answers) else (
                "same_answer" if turn.alike() else "yes")
        outcomes = {a.kind: AnswerOutcome(a.text, a.error, a.seconds, a.table, a.words) for a in turn.answers}
        self.log.finish_turn(turn.id, turn.comparison, raw=outcomes.get(RAW), thoughts=outcomes.get(THOUGHTS))
        if turn.replaced:         # nobody saw it answered and it is forgotten (`replaced`): no thought job, no sweep
            return
        if turn.scope:            # a question about chosen papers is one answer from them: memory makes nothing of it
            self.sweep_unvoted(turn.user, keep=turn.id, writer=turn.writer)
            return
        if turn.comparison != "yes":
            # nothing to vote on: the thought comes from the answer we have (the thought-augmented one if any), when
            # its table clears the unvoted floor (features.chat_thoughts.UNVOTED_FLOOR)
            usable = [a for a in turn.answers if not a.error and a.text]
            if usable:
                best = next((a for a in usable if a.kind == THOUGHTS), usable[0])
                self.request_thought(turn.id, best.kind, "no_comparison", writer=turn.writer)
        if turn.comparison == "same_answer":      # both are kept in the log; the page shows one
            turn.answers = [replace(next(a for a in turn.answers if a.kind == RAW), label="A")]
        # after this turn's answers, not before: a thought job uses the one local model, and one started when the
        # question was asked made the first answer wait for it (about 1 s of a 2 s first token, docs/performance.md)
        self.sweep_unvoted(turn.user, keep=turn.id, writer=turn.writer)

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
                                      sources=shown_sources(stored.table, tuple(stored.sources)),
                                      table=stored.table))
        vote = self.log.vote(turn.id)
        return TurnView(turn_id=turn.id, user=turn.user, question=turn.question, comparison=turn.comparison,
                        answers=tuple(answers), retrieval_s=turn.retrieval_s, created_at=turn.created_at,
                        asked=turn.asked, scope=turn.scope,
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
            vote: str | None = None, previous_turn: str | None = None, reveal: bool = False,
            writer: Writer | None = None, papers: Sequence[str] | None = None) -> dict:
        """The whole turn without a UI. A comparison gets no thought here: `vote` (for scripts) decides it as a
        user's would; without, it waits for a vote or its grace period (`sweep_unvoted`). One answer gets its thought
        at once; `wait` blocks until the thought job is done. An unvoted comparison's record is blind (the answers'
        words only) unless `reveal`, which shows its sides and records that: a later vote is not blind, not counted.
        `papers`: the papers the question is about (see `prepare`); the record's `scope` lists them."""
        turn = self.prepare(question, user, personalize, previous_turn=previous_turn, writer=writer, papers=papers)
        for _ in self.stream(turn):
            pass
        voted = None
        if vote is not None:
            try:
                voted = self.vote(turn.id, vote, user, writer=writer)
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
        if turn.scope:
            record["scope"] = list(turn.scope)
        return record


def _previous(view: TurnView | None) -> PreviousTurn | None:
    """The turn a follow-up refers to: its question and the answer shown first (the voted one if any)."""
    chosen = view.shown_answer() if view else None
    if view is None or chosen is None:
        return None
    return PreviousTurn(view.question, chosen.text, [s.title or s.preview for s in chosen.sources])


def _shown_papers(view: TurnView | None) -> list[str]:
    """The papers of the answer a follow-up refers to, in the order shown: its table's rows (all of them; a table
    holds a few), else its paper sources."""
    chosen = view.shown_answer() if view else None
    if chosen is None:
        return []
    ids = chosen.table.paper_ids if chosen.table else [s.id for s in chosen.sources if s.kind == "paper"]
    return list(dict.fromkeys(ids))[:FILTER_PAPERS]


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
