"""Thought-Retriever (Algorithm 1 of the paper), UI-free.

retrieve (papers only = "raw", papers ∪ thoughts = "thought-augmented") → answer → thought + confidence →
merge test → memory update with lineage. Stores and models come in as arguments.

The thought memory lives in two places: the Chroma `thoughts` collection (text + embedding, what retrieval
searches) and SQLite (`thoughts` registry and `thought_edges` lineage). A deleted thought leaves Chroma (so
it is never retrieved again) but keeps its SQLite row and edges, so the lineage of thoughts built on it
still resolves to root papers.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from copilot import prompts
from copilot.embed import Embedder
from copilot.llm import LLM
from copilot.prompts import CANNOT_ANSWER, RenderedPrompt, source_block, strip_quoting_tags
from copilot.records import Evidence
from copilot.store.db import Database
from copilot.store.vectors import VectorStore

log = logging.getLogger(__name__)

PAPER = "paper"
THOUGHT = "thought"
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


def merge_check(store: VectorStore, embedding: np.ndarray, threshold: float) -> MergeCheck:
    """s = 1 when cos(T, x) ≥ ε for any stored paper or thought x (the paper's thought-merge step)."""
    best = MergeCheck(False, None, None, -1.0)
    for kind in (PAPER, THOUGHT):
        for hit in store.search(kind, embedding, 1):
            if hit.score > best.similarity:
                best = MergeCheck(False, hit.id, kind, hit.score)
    best.redundant = best.similarity >= threshold
    return best


# --- the memory --------------------------------------------------------------------------------------------
class ThoughtMemory:
    """Thoughts with lineage. Shared by Chat and Trends: `add` is the one way a thought enters memory."""

    def __init__(self, db: Database, store: VectorStore, embedder: Embedder, merge_threshold: float = 0.85,
                 private: bool = False) -> None:
        self.private = private      # new thoughts are seen only by their user (COPILOT_PRIVATE_THOUGHTS)
        self.db = db
        self.store = store
        self.embedder = embedder
        self.merge_threshold = merge_threshold
        self.last_merge: MergeCheck | None = None  # the merge test of the latest `add`, for logs and tests

    # writing
    def add(self, text: str, sources: Sequence[tuple[str, str]], *, origin: str, question: str = "",
            user: str = "local", check_redundant: bool = True, embedding: np.ndarray | None = None) -> str | None:
        """Store a thought and its lineage edges; None when the merge test finds it redundant (or it is empty).

        sources: [(item_id, "paper"|"thought")], the items the thought was made from (its direct sources).
        """
        text = (text or "").strip()
        if not text:
            return None
        sources = _dedupe_sources(sources)
        vector = np.asarray(embedding if embedding is not None else self.embedder.embed_one(text), dtype=np.float32)
        self.last_merge = merge_check(self.store, vector, self.merge_threshold) if check_redundant else None
        if self.last_merge is not None and self.last_merge.redundant:
            return None
        thought_id = new_thought_id()
        created = time.time()
        level = 1.0 + (float(np.mean([self._level(sid, kind, {}) for sid, kind in sources])) if sources else 0.0)
        with self.db.transaction() as tx:
            tx.execute("INSERT INTO thoughts (id, text, origin, question, user, level, created_at, private)"
                       " VALUES (?,?,?,?,?,?,?,?)",
                       (thought_id, text, origin, question, user, level, created, int(self.private)))
            tx.executemany("INSERT INTO thought_edges (thought_id, source_id, source_kind, position) VALUES (?,?,?,?)",
                           [(thought_id, sid, kind, pos) for pos, (sid, kind) in enumerate(sources)])
        try:
            self.store.thoughts.upsert(
                ids=[thought_id], embeddings=vector[None, :], documents=[text],
                metadatas=[{"created": created, "origin": origin, "question": question[:1000], "level": level,
                            "user": user, "private": self.private,
                            "sources": " ".join(sid for sid, _ in sources)[:2000]}])
        except Exception:
            # keep SQLite and Chroma in step: a thought that cannot be retrieved must not exist
            with self.db.transaction() as tx:
                tx.execute("DELETE FROM thought_edges WHERE thought_id = ?", (thought_id,))
                tx.execute("DELETE FROM thoughts WHERE id = ?", (thought_id,))
            raise
        return thought_id

    def delete(self, thought_id: str, user: str | None = None) -> bool:
        """Remove a thought from retrieval; its row and edges stay so dependent lineage still resolves.
        With `user`, only a thought that user can see (shared, or their own private one)."""
        row = self.db.query_one("SELECT deleted_at, private, user FROM thoughts WHERE id = ?", (thought_id,))
        if row is None or row["deleted_at"] is not None or not _visible(row, user):
            return False
        self.store.thoughts.delete(ids=[thought_id])
        self.db.execute("UPDATE thoughts SET deleted_at = ? WHERE id = ?", (time.time(), thought_id))
        return True

    # lineage
    def kind_of(self, item_id: str) -> str:
        row = self.db.query_one("SELECT 1 AS x FROM thoughts WHERE id = ?", (item_id,))
        return THOUGHT if row else PAPER

    def direct_sources(self, thought_id: str) -> list[tuple[str, str]]:
        rows = self.db.query("SELECT source_id, source_kind FROM thought_edges WHERE thought_id = ? ORDER BY position",
                             (thought_id,))
        return [(r["source_id"], r["source_kind"]) for r in rows]

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
            row = self.db.query_one("SELECT level FROM thoughts WHERE id = ?", (item_id,))
            if row is not None:
                memo[item_id] = float(row["level"])  # stored at creation; sources never change afterwards
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
    def get(self, thought_id: str, user: str | None = None) -> dict | None:
        row = self.db.query_one("SELECT * FROM thoughts WHERE id = ? AND deleted_at IS NULL", (thought_id,))
        return self._describe(row) if row and _visible(row, user) else None

    def _describe(self, row: dict) -> dict:
        return {"id": row["id"], "text": row["text"], "origin": row["origin"], "question": row["question"],
                "user": row["user"], "level": row["level"], "created_at": row["created_at"],
                "sources": [{"id": s, "kind": k} for s, k in self.direct_sources(row["id"])],
                "root_sources": self.root_sources(row["id"])}

    def list(self, limit: int = 50, offset: int = 0, contains: str = "", user: str | None = None) -> list[dict]:
        """Newest first; `contains` filters by a case-insensitive substring of text or question."""
        sql = "SELECT * FROM thoughts WHERE deleted_at IS NULL"
        params: list = []
        if user is not None:
            sql += " AND (private = 0 OR user = ?)"
            params.append(user)
        if contains.strip():
            sql += " AND (text LIKE ? ESCAPE '\\' OR question LIKE ? ESCAPE '\\')"
            pattern = "%" + contains.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            params += [pattern, pattern]
        sql += " ORDER BY created_at DESC LIMIT ? OFFSET ?"
        return [self._describe(r) for r in self.db.query(sql, (*params, limit, offset))]

    def search(self, query: str, k: int = 20, user: str | None = None) -> list[dict]:
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
        row = self.db.query_one("SELECT COUNT(*) AS n FROM thoughts WHERE deleted_at IS NULL")
        return int(row["n"]) if row else 0


def _visible(row: dict, user: str | None) -> bool:
    return user is None or not row.get("private") or row.get("user") == user


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
    return replace(item, text=item.text[: item_tokens * 4].rstrip() + " …", metadata={**item.metadata, "truncated": True})


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
    augmented: list[Evidence]      # papers ∪ thoughts; always as many items as `raw`
    seconds: float

    @property
    def same_items(self) -> bool:
        """True when the thought memory changed nothing (no thought among the items both answers get)."""
        return [e.id for e in self.raw] == [e.id for e in self.augmented]


def retrieve_both(store: VectorStore, query_embedding: np.ndarray, k: int, budget_tokens: int,
                  thought_where: dict | None = None, item_tokens: int | None = None) -> Retrievals:
    """Top-K papers ("raw") and top-K of papers ∪ thoughts ("thought-augmented"), each within the token budget,
    then both cut to the shorter list's length: the two answers of a blind comparison always cite the same
    number of sources, so the count cannot tell which side used thoughts.
    `thought_where` limits the thoughts searched (ThoughtMemory.visible_where: private thoughts of others)."""
    started = time.perf_counter()
    papers = store.search(PAPER, query_embedding, k)
    thoughts = store.search(THOUGHT, query_embedding, k, where=thought_where)
    union = sorted(papers + thoughts, key=lambda e: e.score, reverse=True)[:k]
    raw = fit_budget(papers, budget_tokens, item_tokens=item_tokens)
    augmented = fit_budget(union, budget_tokens, item_tokens=item_tokens)
    count = min(len(raw), len(augmented))
    return Retrievals(raw=raw[:count], augmented=augmented[:count], seconds=time.perf_counter() - started)


# --- answer ------------------------------------------------------------------------------------------------
def answer_prompt(question: str, items: Sequence[Evidence], reader: str = "") -> RenderedPrompt:
    blocks = "\n".join(source_block(item.id, item.text) for item in items) or "(no sources found)"
    reader_line = f"The reader's research profile (adapt depth and focus to it): {reader}\n\n" if reader else ""
    return prompts.CHAT_ANSWER.render(sources=blocks, question=question, reader=reader_line)


def stream_answer(llm: LLM, question: str, items: Sequence[Evidence], max_tokens: int,
                  reader: str = "") -> Iterator[str]:
    """Answer from the retrieved items only; the model says CANNOT_ANSWER when they are not enough."""
    if not items:
        yield CANNOT_ANSWER
        return
    yield from llm.stream(answer_prompt(question, items, reader), max_tokens=max_tokens, temperature=0.1)


def is_cannot_answer(answer: str) -> bool:
    text = " ".join((answer or "").split()).lower()
    sentinel = CANNOT_ANSWER.lower().rstrip(".")
    return not text or text.startswith(sentinel) or (sentinel in text and len(text) < len(sentinel) + 40)


# --- thought + confidence ----------------------------------------------------------------------------------
@dataclass
class ThoughtDraft:
    confidence: int                # 1: a real answer, summarised into `text`; 0: no thought
    text: str
    raw_output: str
    llm_called: bool


_STEP_LABEL = re.compile(r"^\s*(?:step\s*[12]\s*[:.)-]?|thought\s*:|knowledge(?: point)?\s*:|passage\s*:|summary\s*:)\s*",
                         re.I)
_LEADING_ONE = re.compile(r"^\s*[\"'`*]*1[\"'`*]*\s*(?:[\n.:)\-–—]|$)\s*")
_ZERO_ONLY = re.compile(r"^\s*[\"'`*]*0[\"'`*]*\s*[.!]?\s*$")
_LEADING_ZERO = re.compile(r"^\s*[\"'`*]*0[\"'`*]*\s*(?:[\n.:)\-–—]|$)")


def parse_thought(output: str, min_chars: int = 20) -> tuple[int, str]:
    """Read the thought prompt's output defensively: '0' (alone or leading) means no thought; a leading '1'
    and step labels are stripped; what remains is the thought if it is long enough."""
    text = strip_quoting_tags(output)
    if _ZERO_ONLY.match(text) or _LEADING_ZERO.match(text):
        return 0, ""
    for _ in range(3):
        text = _LEADING_ONE.sub("", text, count=1)
        text = _STEP_LABEL.sub("", text, count=1)
    text = " ".join(text.split())
    if len(text) < min_chars or is_cannot_answer(text):
        return 0, ""
    return 1, text


def draft_thought(llm: LLM, question: str, answer: str, max_tokens: int = 160) -> ThoughtDraft:
    """(T, c) = LLM(Q, A). An answer that is the cannot-answer sentinel gets c = 0 without an LLM call."""
    if is_cannot_answer(answer):
        return ThoughtDraft(0, "", "", llm_called=False)
    rendered = prompts.CHAT_THOUGHT.render(question=question, answer=source_block("answer", answer))
    output = llm.complete(rendered, max_tokens=max_tokens, temperature=0.1)
    confidence, text = parse_thought(output)
    return ThoughtDraft(confidence, text, output, llm_called=True)


@dataclass
class ThoughtOutcome:
    status: str                    # "stored" | "not_an_answer" | "redundant"
    thought_id: str | None
    draft: ThoughtDraft
    similarity: float | None = None
    nearest_id: str | None = None


def think(llm: LLM, memory: ThoughtMemory, question: str, answer: str, sources: Sequence[Evidence], *,
          origin: str = "chat", user: str = "local", max_tokens: int = 160) -> ThoughtOutcome:
    """Steps 3-5 of Algorithm 1: draft (T, c), merge test, store only when c = 1 and s = 0."""
    draft = draft_thought(llm, question, answer, max_tokens)
    if draft.confidence == 0:
        return ThoughtOutcome("not_an_answer", None, draft)
    thought_id = memory.add(draft.text, [(e.id, e.kind) for e in sources], origin=origin, question=question,
                            user=user)
    merge = memory.last_merge
    similarity = merge.similarity if merge else None
    nearest = merge.nearest_id if merge else None
    return ThoughtOutcome("stored" if thought_id else "redundant", thought_id, draft, similarity, nearest)
