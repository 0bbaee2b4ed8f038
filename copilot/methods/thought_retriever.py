"""Thought-Retriever (Algorithm 1 of the paper), UI-free.

retrieve (papers only = "raw", papers ∪ thoughts = "thought-augmented") → answer → thought + confidence →
merge test → memory update with lineage. Stores and models come in as arguments.

The thought memory lives in two places: the Chroma `thoughts` collection (text + embedding, what retrieval
searches) and SQLite (`thoughts` registry and `thought_edges` lineage). A deleted or retracted thought leaves
Chroma (so it is never retrieved again) but keeps its SQLite row and edges, so the lineage of thoughts built on it
still resolves to root papers.
"""

from __future__ import annotations

import builtins
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from copilot import grounding, prompts
from copilot.embed import Embedder
from copilot.grounding import Checked, check
from copilot.llm import LLM, Usage
from copilot.methods import quotes
from copilot.methods.thought_drafts import (  # noqa: F401
    ECHO_NGRAM,
    LOOP_NGRAM,
    MIN_THOUGHT_WORDS,
    THOUGHT_QUOTE_FLOOR,
    ThoughtDraft,
    describes_itself,
    draft_thought,
    instruction_text,
    is_cannot_answer,
    judge_thought,
    parse_thought,
    passage_problem,
    quoted_thought,
    table_thought,
    vector_text,
)
from copilot.prompts import CANNOT_ANSWER, RenderedPrompt, source_block
from copilot.records import Evidence
from copilot.store.db import Database
from copilot.store.thoughts import PAPER, THOUGHT, ThoughtRow, ThoughtStore
from copilot.store.vectors import VectorStore
from copilot.table import EvidenceTable

log = logging.getLogger(__name__)

THOUGHT_ID_PREFIX = "T"


def new_thought_id() -> str:
    return THOUGHT_ID_PREFIX + uuid.uuid4().hex[:10]


# --- merge test ------------------------------------------------------------------------------------------
@dataclass
class MergeCheck:
    redundant: bool
    nearest_id: str | None
    nearest_kind: str | None
    similarity: float


def merge_check(store: VectorStore, embedding: np.ndarray, threshold: float,
                thought_where: dict | None = None) -> MergeCheck:
    """s = 1 when cos(T, x) ≥ ε for any stored paper or thought x (the thought-merge step); `thought_where`: only the
    thoughts the writing user may retrieve (ThoughtMemory.visible_where), never another user's private ones."""
    best = MergeCheck(False, None, None, -1.0)
    for kind in (PAPER, THOUGHT):
        for hit in store.search(kind, embedding, 1, where=thought_where if kind == THOUGHT else None):
            if hit.score > best.similarity:
                best = MergeCheck(False, hit.id, kind, hit.score)
    best.redundant = best.similarity >= threshold
    return best


# --- the memory --------------------------------------------------------------------------------------------
@dataclass
class MemoryCheck:
    """Where SQLite (the registry) and Chroma (what retrieval searches) disagree about thoughts."""
    rows: int
    live: int
    hidden: int                    # deleted by a user or retracted by a vote
    vectors: int
    orphan_vectors: list[str]      # in Chroma, no row: a crash between the two writes of `add`
    hidden_with_vector: list[str]  # row deleted/retracted, vector still searchable: a crash inside delete/retract
    missing_vectors: list[str]     # live row, no vector: listed in Memory but never retrieved

    @property
    def mismatches(self) -> int:
        return len(self.orphan_vectors) + len(self.hidden_with_vector) + len(self.missing_vectors)

    def as_dict(self) -> dict:
        return {"rows": self.rows, "live": self.live, "hidden": self.hidden, "vectors": self.vectors,
                "orphan_vectors": self.orphan_vectors, "hidden_with_vector": self.hidden_with_vector,
                "missing_vectors": self.missing_vectors, "mismatches": self.mismatches}


class ThoughtMemory:
    """Thoughts with lineage. Shared by Chat and Trends: `add` is the one way a thought enters memory.

    The records and their crash-safe write order belong to `ThoughtStore`; this class makes the decisions: the
    merge test, the abstraction level, what a user may see, and how a repair makes Chroma agree with SQLite."""

    def __init__(self, db: Database, store: VectorStore, embedder: Embedder, merge_threshold: float = 0.85,
                 private: bool = False) -> None:
        self.private = private      # new thoughts are seen only by their user (COPILOT_PRIVATE_THOUGHTS)
        self.thoughts = ThoughtStore(db, store)
        self.store = store
        self.embedder = embedder
        self.merge_threshold = merge_threshold

    # writing
    def add(self, text: str, sources: Sequence[tuple[str, str]], *, origin: str, question: str = "",
            user: str = "local", check_redundant: bool = True, embedding: np.ndarray | None = None,
            thought_id: str | None = None) -> str | None:
        """Store a thought and its lineage edges; None when the merge test finds it redundant (or it is empty)."""
        return self.add_checked(text, sources, origin=origin, question=question, user=user,
                                check_redundant=check_redundant, embedding=embedding, thought_id=thought_id)[0]

    def add_checked(self, text: str, sources: Sequence[tuple[str, str]], *, origin: str, question: str = "",
                    user: str = "local", check_redundant: bool = True, embedding: np.ndarray | None = None,
                    thought_id: str | None = None) -> tuple[str | None, MergeCheck | None]:
        """`add`, also returning its merge test.

        sources: [(item_id, "paper"|"thought")], the items the thought was made from (its direct sources).
        thought_id: the id to store under (a job that may run twice after a crash passes the same id each time;
        a thought already stored under it is returned as it is)."""
        text = (text or "").strip()
        if not text:
            return None, None
        sources = _dedupe_sources(sources)
        if thought_id and self.thoughts.exists(thought_id):
            return thought_id, None
        if embedding is None:
            embedding = self.embedder.embed_one(vector_text(question, text))
        vector = np.asarray(embedding, dtype=np.float32)
        with self.thoughts.locked(exclusive=False):
            if thought_id:  # a vector under this id without a row is left from a crashed attempt: not a neighbour
                self.thoughts.drop_vectors([thought_id])
            where = self.visible_where(user)
            merge = merge_check(self.store, vector, self.merge_threshold, where) if check_redundant else None
            if merge is not None and merge.redundant:
                return None, merge
            level = 1.0 + (float(np.mean([self._level(sid, kind, {}) for sid, kind in sources])) if sources else 0.0)
            thought = ThoughtRow(id=thought_id or new_thought_id(), text=text, origin=origin, question=question,
                                 user=user, level=level, created_at=time.time(), private=self.private)
            self.thoughts.add(thought, sources, vector)
        return thought.id, merge

    def delete(self, thought_id: str, user: str | None = None) -> bool:
        """Remove a thought from retrieval; its row and edges stay so dependent lineage still resolves.
        With `user`, only a thought made from that user's own question (None: any, as an admin or the CLI)."""
        row = self.thoughts.get(thought_id)
        if row is None or (user is not None and row.user != user) or not self.thoughts.mark_deleted(thought_id):
            return False
        self.thoughts.drop_vectors([thought_id])
        return True

    def retract(self, thought_ids: Sequence[str]) -> list[str]:
        """Take thoughts out of retrieval and the Memory list because the vote that made them changed."""
        retracted = self.thoughts.mark_retracted(thought_ids)
        self.drop_vectors(retracted)
        return retracted

    def drop_vectors(self, thought_ids: Sequence[str]) -> None:
        self.thoughts.drop_vectors(thought_ids)

    # consistency between the two stores
    def check(self) -> MemoryCheck:
        vectors = self.thoughts.vector_ids()   # read before the rows: see ThoughtStore.add's order
        rows = self.thoughts.liveness()
        live, hidden = set(rows.live), set(rows.hidden)
        return MemoryCheck(rows=len(live) + len(hidden), live=len(live), hidden=len(hidden), vectors=len(vectors),
                           orphan_vectors=sorted(vectors - live - hidden),
                           hidden_with_vector=sorted(vectors & hidden),
                           missing_vectors=sorted(live - vectors))

    def repair(self) -> MemoryCheck:
        """Make Chroma agree with SQLite, the record of what exists: drop vectors without a live row, re-add the
        vector of a live row that lacks one. Returns what was found before the repair."""
        with self.thoughts.locked(exclusive=True):
            found = self.check()
            self.drop_vectors(found.orphan_vectors + found.hidden_with_vector)
            for thought_id in found.missing_vectors:
                self._restore_vector(thought_id)
        if found.mismatches:
            log.warning("thought memory repaired: %s", found.as_dict())
        return found

    def _restore_vector(self, thought_id: str) -> None:
        row = self.thoughts.get(thought_id)
        if row is None:
            return
        vector = np.asarray(self.embedder.embed_one(vector_text(row.question, row.text)), dtype=np.float32)
        self.thoughts.put_vector(row, self.direct_sources(thought_id), vector)

    # lineage
    def kind_of(self, item_id: str) -> str:
        return THOUGHT if self.thoughts.exists(item_id) else PAPER

    def direct_sources(self, thought_id: str) -> list[tuple[str, str]]:
        return self.thoughts.sources(thought_id)

    def root_sources(self, thought_id: str) -> list[str]:
        """Papers reached by expanding thoughts recursively (first-seen order, no duplicates)."""
        roots: list[str] = []
        seen: set[str] = set()
        stack = [(thought_id, THOUGHT)]
        while stack:
            item_id, kind = stack.pop()
            if item_id in seen:
                continue
            seen.add(item_id)
            if kind == PAPER:
                roots.append(item_id)
            else:
                stack.extend(reversed(self.direct_sources(item_id)))
        return roots

    def level(self, item_id: str) -> float:
        """Abstraction level: a paper is 1; a thought is 1 + mean level of its direct sources."""
        return self._level(item_id, self.kind_of(item_id), {})

    def _level(self, item_id: str, kind: str, memo: dict[str, float]) -> float:
        if kind == PAPER:
            return 1.0
        if item_id not in memo:
            stored = self.thoughts.level(item_id)   # stored at creation; sources never change afterwards
            if stored is not None:
                memo[item_id] = stored
            else:
                sources = self.direct_sources(item_id)
                memo[item_id] = 1.0 + (float(np.mean([self._level(s, k, memo) for s, k in sources]))
                                       if sources else 0.0)
        return memo[item_id]

    # visibility: shared thoughts are seen by everyone, private ones by their user; user=None sees all (CLI)
    @staticmethod
    def visible_where(user: str | None) -> dict | None:
        """The Chroma filter for thoughts `user` may retrieve."""
        return None if user is None else {"$or": [{"private": {"$ne": True}}, {"user": user}]}

    # reading
    def get(self, thought_id: str, user: str | None = None, include_hidden: bool = False) -> dict | None:
        """A thought `user` may see; with `include_hidden` also a deleted or retracted one (for lineage)."""
        row = self.thoughts.get(thought_id, include_hidden=include_hidden)
        return self._describe(row) if row and row.visible_to(user) else None

    def _describe(self, row: ThoughtRow) -> dict:
        return {"id": row.id, "text": row.text, "origin": row.origin, "question": row.question,
                "user": row.user, "level": row.level, "created_at": row.created_at, "state": row.state,
                "sources": [{"id": s, "kind": k} for s, k in self.direct_sources(row.id)],
                "root_sources": self.root_sources(row.id)}

    def list(self, limit: int = 50, offset: int = 0, contains: str = "",
             user: str | None = None) -> builtins.list[dict]:
        """Newest first; `contains` filters by a case-insensitive substring of text or question."""
        return [self._describe(row) for row in self.thoughts.list_live(limit, offset, contains, user)]

    def search(self, query: str, k: int = 20, user: str | None = None) -> builtins.list[dict]:
        """Thoughts nearest in meaning to `query`, each with its similarity."""
        if not query.strip():
            return self.list(limit=k, user=user)
        hits = self.store.search(THOUGHT, self.embedder.embed_one(query), k, where=self.visible_where(user))
        found = []
        for hit in hits:
            described = self.get(hit.id, user)
            if described:
                described["similarity"] = hit.score
                found.append(described)
        return found

    def count(self) -> int:
        return self.thoughts.count_live()


def _dedupe_sources(sources: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[str] = set()
    out = []
    for item_id, kind in sources:
        if kind not in (PAPER, THOUGHT):
            raise ValueError(f"source kind must be 'paper' or 'thought', not {kind!r}")
        if item_id not in seen:
            seen.add(item_id)
            out.append((item_id, kind))
    return out


# --- retrieval ---------------------------------------------------------------------------------------------
def approx_tokens(text: str) -> int:
    """Token estimate without a tokenizer: about four characters per token for English text."""
    return (len(text) + 3) // 4


def cap_item(item: Evidence, item_tokens: int | None) -> Evidence:
    """The item cut to its first `item_tokens` tokens (title and opening sentences), marked truncated."""
    if not item_tokens or approx_tokens(item.text) <= item_tokens:
        return item
    return replace(item, text=item.text[: item_tokens * 4].rstrip() + " …",
                   metadata={**item.metadata, "truncated": True})


def fit_budget(items: Sequence[Evidence], budget_tokens: int, min_tail_tokens: int = 40,
               item_tokens: int | None = None) -> list[Evidence]:
    """Keep items in rank order while they fit the budget; the first that does not fit is cut to the room left
    (when at least `min_tail_tokens` remain), and retrieval stops there. With `item_tokens`, every item is first
    cut to that many tokens, so a small budget still holds several items."""
    kept: list[Evidence] = []
    used = 0
    for item in (cap_item(i, item_tokens) for i in items):
        cost = approx_tokens(item.text)
        if used + cost <= budget_tokens:
            kept.append(item)
            used += cost
            continue
        room = budget_tokens - used
        if room >= min_tail_tokens:
            kept.append(replace(item, text=item.text[: room * 4].rstrip() + " …",
                                metadata={**item.metadata, "truncated": True}))
        break
    return kept


@dataclass
class Retrievals:
    raw: list[Evidence]            # papers only
    augmented: list[Evidence]      # papers ∪ thoughts: as many items as `raw`, or (the table's pool) `raw` + thoughts
    seconds: float

    @property
    def same_items(self) -> bool:
        """True when the thought memory changed nothing (no thought among the items both answers get)."""
        return [e.id for e in self.raw] == [e.id for e in self.augmented]


# Thoughts that join the evidence table's pool at most: each brings up to a table's rows of papers, whose sentences
# are embedded like the pool's own (about 10 ms a sentence on 2 busy cores).
MAX_JOINED_THOUGHTS = 3


def retrieve_both(store: VectorStore, query_embedding: np.ndarray, k: int, budget_tokens: int,
                  thought_where: dict | None = None, item_tokens: int | None = None,
                  paper_hits: Sequence[tuple[str, float]] | None = None) -> Retrievals:
    """Top-K papers ("raw") and top-K of papers ∪ thoughts ("thought-augmented"), each within the token budget,
    then both cut to the shorter list's length: the two answers of a blind comparison always cite the same
    number of sources, so the count cannot tell which side used thoughts.
    `thought_where` limits the thoughts searched (ThoughtMemory.visible_where: private thoughts of others).
    `paper_hits`: (id, cosine) of the papers in the order another ranking chose (the evidence table's pool). Then
    the thoughts that rank in the union's top K (at most MAX_JOINED_THOUGHTS) *join* the pool, every paper stays:
    the table ranks each paper, its own or one a thought rests on, by its relevance, under one row budget
    (features.chat), so the thought side differs only where memory brings a paper the pool lacks (issue #40)."""
    started = time.perf_counter()
    paper_hits_given = paper_hits is not None
    paper_hits = list(paper_hits) if paper_hits is not None else store.nearest(PAPER, query_embedding, k)
    thought_hits = store.nearest(THOUGHT, query_embedding, k, where=thought_where)
    ranked = sorted([(PAPER, hit) for hit in paper_hits] + [(THOUGHT, hit) for hit in thought_hits],
                    key=lambda tagged: tagged[1][1], reverse=True)[:k]
    kept_thoughts = [hit for kind, hit in ranked if kind == THOUGHT]
    if paper_hits_given:
        kept_thoughts = kept_thoughts[:MAX_JOINED_THOUGHTS]
    # documents of the kept items only (one read per collection): the k papers, and the thoughts in the union's top k
    papers = store.fetch(PAPER, paper_hits)
    thoughts = store.fetch(THOUGHT, kept_thoughts)
    raw = fit_budget(papers, budget_tokens, item_tokens=item_tokens)
    if paper_hits_given:      # the papers keep the given order; a thought goes before the first paper it beats
        augmented = list(raw)
        for thought in sorted(thoughts, key=lambda e: e.score, reverse=True):
            at = next((n for n, item in enumerate(augmented) if item.kind == PAPER and item.score < thought.score),
                      len(augmented))
            augmented.insert(at, cap_item(thought, item_tokens))
        return Retrievals(raw=raw, augmented=augmented, seconds=time.perf_counter() - started)
    union = sorted(papers + thoughts, key=lambda e: e.score, reverse=True)[:k]
    augmented = fit_budget(union, budget_tokens, item_tokens=item_tokens)
    count = min(len(raw), len(augmented))
    return Retrievals(raw=raw[:count], augmented=augmented[:count], seconds=time.perf_counter() - started)


def with_first(found: Retrievals, first: Sequence[Evidence], item_tokens: int | None = None) -> Retrievals:
    """Both sides with `first` (the papers a question names: looked up, not ranked) at their head, each once, and
    as many items as before on each side (the last ones give way), so the two answers still cite the same number
    of sources."""
    if not first:
        return found
    head = [cap_item(item, item_tokens) for item in first]
    ids = {item.id for item in head}

    def headed(items: list[Evidence]) -> list[Evidence]:
        rest = [item for item in items if item.id not in ids]
        return (head + rest)[:max(len(items), len(head))]

    return Retrievals(raw=headed(found.raw), augmented=headed(found.augmented), seconds=found.seconds)


# --- answer ------------------------------------------------------------------------------------------------
def answer_prompt(question: str, items: Sequence[Evidence], reader: str = "") -> RenderedPrompt:
    """Items are quoted under neutral labels 1..n (their position), never under their ids."""
    blocks = "\n".join(source_block(str(n), item.text) for n, item in enumerate(items, 1)) or "(no sources found)"
    reader_line = f"The reader's research profile (adapt depth and focus to it): {reader}\n\n" if reader else ""
    return prompts.CHAT_ANSWER.render(sources=blocks, question=question, reader=reader_line)


# Below this cosine between the question and its closest item, a grammar-held (small) model is not asked: the
# sources cannot answer. Measured with the packaged MiniLM on 300 real abstracts: 19 of 20 research questions
# had a closest paper at 0.37-0.70 (the 20th, 0.20, asked about a topic none of them covers), 10 off-topic
# questions at 0.09-0.30.
MIN_ANSWERABLE_SCORE = 0.33


def stream_answer(llm: LLM, question: str, items: Sequence[Evidence], max_tokens: int,
                  reader: str = "", usage: Usage | None = None) -> Iterator[str]:
    """Answer from the retrieved items only, citing them as [1]..[n]. A capable model says CANNOT_ANSWER itself
    when they are not enough; a grammar-obeying model (the small local one) is held to the answer grammar and
    is not asked at all when no item is close to the question."""
    if not items or (llm.obeys_grammar and max(item.score for item in items) < MIN_ANSWERABLE_SCORE):
        yield CANNOT_ANSWER
        return
    if not llm.obeys_grammar:
        yield from llm.stream(answer_prompt(question, items, reader), max_tokens=max_tokens, temperature=0.1,
                              usage=usage)
        return
    text = ""
    for piece in llm.stream(answer_prompt(question, items, reader), max_tokens=max_tokens, temperature=0.1,
                            grammar=prompts.answer_grammar(len(items)), usage=usage):
        text += piece
        yield piece
        if grounding.repeats_a_statement(text):   # the small model copies its first statement: stop it there
            return


def check_answer(text: str, items: Sequence[Evidence], quoted: bool = False) -> Checked:
    """The output checks for a chat answer: only labels 1..n, no invented links, no loop, no echoed rules.
    An id of a retrieved item (copied from a thought's text, say) becomes that item's label first. Statements of
    answer_grammar's shape: an unfinished last one goes (stopped as a copy, or at the token limit) and one that
    the length cap cut inside a word ends at its last clause. `quoted`: the caller made the text of quotes (an
    evidence table), so each label is its quote's source by construction; a model's words, however they look, are
    attributed (#58)."""
    if text.startswith("Source ["):
        text = grounding.close_cut_statements(grounding.drop_unfinished_statement(text),
                                              prompts.ANSWER_STATEMENT_CHARS)
    # a quote's label is its source by construction (and the quote may come from beyond an item's cut text)
    return check(grounding.ids_to_labels(text, [item.id for item in items]),
                 allowed=[str(n) for n in range(1, len(items) + 1)], source_texts=[i.text for i in items],
                 instructions=[prompts.CHAT_ANSWER.system], attribute=not quoted, loops=not quoted)


def labels_to_ids(text: str, items: Sequence[Evidence]) -> str:
    """[n] labels replaced by the ids of the items they stand for (for thoughts and the command line)."""
    return grounding.labels_to_ids(text, [item.id for item in items])


@dataclass
class ThoughtOutcome:
    status: str                    # "stored" | "not_an_answer" | "redundant"
    thought_id: str | None
    draft: ThoughtDraft
    similarity: float | None = None
    nearest_id: str | None = None


def think(llm: LLM, memory: ThoughtMemory, question: str, answer: str, sources: Sequence[Evidence], *,
          origin: str = "chat", user: str = "local", max_tokens: int = 160,
          thought_id: str | None = None, table: EvidenceTable | None = None, quoted: bool = False) -> ThoughtOutcome:
    """Steps 3-5 of Algorithm 1: draft (T, c), merge test, store only when c = 1 and s = 0. An evidence table (the
    tiny profile) becomes a thought of its rows (`table_thought`), other answers made of quotes one of their relevant
    quotes (`quoted_thought`), both without a model and with the items quoted as direct sources. `thought_id`: store
    under this id (see ThoughtMemory.add_checked); `table`: the answer is that evidence table alone; `quoted`: the
    caller knows the answer is made of quotes (a turn stored before tables were); a model's words, however they look,
    are drafted by the model (#58)."""
    lineage = [(e.id, e.kind) for e in sources]
    if table is not None and table.rows:    # the tiny profile's table: the thought is its rows
        draft, lineage = table_thought(table, answer, sources, memory.embedder.embed, question)
    elif quotes.is_no_answer(answer):
        draft = ThoughtDraft(0, "", answer, llm_called=False, reason="the answer says no source answers")
    elif quoted:                              # quotes under labels: the thought is the answer's relevant quotes
        draft, lineage = quoted_thought(memory.embedder.embed, question, answer, sources)
    else:
        draft = draft_thought(llm, question, answer, max_tokens)
    draft.text = quotes.drop_ids(draft.text)      # no raw [n], arXiv or thought ids in memory
    if draft.confidence == 0 or not draft.text:
        return ThoughtOutcome("not_an_answer", None, draft)
    stored, merge = memory.add_checked(draft.text, lineage, origin=origin,
                                       question=question, user=user, thought_id=thought_id)
    similarity = merge.similarity if merge else None
    nearest = merge.nearest_id if merge else None
    return ThoughtOutcome("stored" if stored else "redundant", stored, draft, similarity, nearest)
