"""Thoughts: their rows and lineage edges in SQLite, their vectors in the Chroma `thoughts` collection.

SQLite is the record of what exists; Chroma is what retrieval searches. Write order, so that a crash at any point
leaves at worst a stray vector (which `ThoughtMemory.repair` removes) and never a thought that is listed but cannot
be retrieved: `add` writes the vector, then the row; `mark_deleted` and `mark_retracted` change the row, and the
caller removes the vector afterwards (`drop_vectors`). A deleted or retracted thought keeps its row and edges, so
the lineage of thoughts built on it still resolves to root papers.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from copilot.store.db import Database
from copilot.store.vectors import VectorStore

PAPER = "paper"
THOUGHT = "thought"
Source = tuple[str, str]           # (item id, PAPER | THOUGHT): one lineage edge

_COLUMNS = "id, text, origin, question, user, level, created_at, private, deleted_at, retracted_at"
_LIVE = "deleted_at IS NULL AND retracted_at IS NULL"


@dataclass(frozen=True)
class ThoughtRow:
    id: str
    text: str
    origin: str                    # "chat" | "trends" | …: what made it
    question: str
    user: str
    level: float                   # abstraction level, fixed at creation
    created_at: float
    private: bool                  # seen only by `user`
    deleted_at: float | None = None
    retracted_at: float | None = None

    @property
    def state(self) -> str:
        return "deleted" if self.deleted_at else "retracted" if self.retracted_at else "live"

    def visible_to(self, user: str | None) -> bool:
        """Shared thoughts are seen by everyone, private ones by their user; None sees all (the CLI)."""
        return user is None or not self.private or self.user == user


@dataclass(frozen=True)
class Liveness:
    live: frozenset[str]           # rows retrieval may find
    hidden: frozenset[str]         # rows deleted by a user or retracted by a vote


def _row(row) -> ThoughtRow:
    return ThoughtRow(id=row["id"], text=row["text"], origin=row["origin"], question=row["question"],
                      user=row["user"], level=float(row["level"]), created_at=float(row["created_at"]),
                      private=bool(row["private"]), deleted_at=row["deleted_at"], retracted_at=row["retracted_at"])


def _like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class ThoughtStore:
    def __init__(self, db: Database, vectors: VectorStore) -> None:
        self.db = db
        self.vectors = vectors
        self.lock_path = db.path.parent / "thought-memory.lock"

    @contextmanager
    def locked(self, exclusive: bool) -> Iterator[None]:
        """A file lock every `add` holds shared and a repair holds exclusive, so a repair never mistakes an add in
        progress (in any process) for a crashed one."""
        with open(self.lock_path, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- writing
    def add(self, thought: ThoughtRow, sources: Sequence[Source], vector: np.ndarray) -> None:
        """The vector first, then the row and its edges in one transaction; if the row fails, the vector goes."""
        self.put_vector(thought, sources, vector)
        try:
            with self.db.transaction() as tx:
                tx.execute("INSERT INTO thoughts (id, text, origin, question, user, level, created_at, private)"
                           " VALUES (?,?,?,?,?,?,?,?)",
                           (thought.id, thought.text, thought.origin, thought.question, thought.user, thought.level,
                            thought.created_at, int(thought.private)))
                tx.executemany("INSERT INTO thought_edges (thought_id, source_id, source_kind, position)"
                               " VALUES (?,?,?,?)",
                               [(thought.id, sid, kind, pos) for pos, (sid, kind) in enumerate(sources)])
        except Exception:
            self.drop_vectors([thought.id])
            raise

    def put_vector(self, thought: ThoughtRow, sources: Sequence[Source], vector: np.ndarray) -> None:
        """Write (or re-write, in a repair) the searchable side of a thought."""
        metadata = {"created": thought.created_at, "origin": thought.origin, "question": thought.question[:1000],
                    "level": thought.level, "user": thought.user, "private": thought.private,
                    "sources": " ".join(sid for sid, _ in sources)[:2000]}
        self.vectors.thoughts.upsert(ids=[thought.id], embeddings=np.asarray(vector, dtype=np.float32)[None, :],
                                     documents=[thought.text], metadatas=[metadata])

    def drop_vectors(self, thought_ids: Sequence[str]) -> None:
        if thought_ids:
            self.vectors.thoughts.delete(ids=list(thought_ids))

    def mark_deleted(self, thought_id: str, at: float | None = None) -> bool:
        """Mark a live thought deleted (row and lineage kept); the caller then drops its vector."""
        with self.db.transaction() as tx:
            cursor = tx.execute(f"UPDATE thoughts SET deleted_at = ? WHERE id = ? AND {_LIVE}",
                                (at or time.time(), thought_id))
            return cursor.rowcount > 0

    def mark_retracted(self, thought_ids: Sequence[str], at: float | None = None) -> list[str]:
        """Mark live thoughts retracted (row and lineage kept); returns those marked now. Joins the caller's
        transaction if there is one; the caller drops their vectors after the commit."""
        marked = []
        with self.db.transaction() as tx:
            for thought_id in thought_ids:
                cursor = tx.execute("UPDATE thoughts SET retracted_at = ? WHERE id = ? AND retracted_at IS NULL",
                                    (at or time.time(), thought_id))
                if cursor.rowcount:
                    marked.append(thought_id)
        return marked

    # --- reading
    def exists(self, thought_id: str) -> bool:
        """A row under this id, in any state."""
        return self.db.query_one("SELECT 1 AS x FROM thoughts WHERE id = ?", (thought_id,)) is not None

    def get(self, thought_id: str, include_hidden: bool = False) -> ThoughtRow | None:
        where = "" if include_hidden else f" AND {_LIVE}"
        row = self.db.query_one(f"SELECT {_COLUMNS} FROM thoughts WHERE id = ?{where}", (thought_id,))
        return _row(row) if row else None

    def level(self, thought_id: str) -> float | None:
        row = self.db.query_one("SELECT level FROM thoughts WHERE id = ?", (thought_id,))
        return float(row["level"]) if row else None

    def sources(self, thought_id: str) -> list[Source]:
        """The thought's direct sources in the order it was made from them."""
        rows = self.db.query("SELECT source_id, source_kind FROM thought_edges WHERE thought_id = ? ORDER BY position",
                             (thought_id,))
        return [(r["source_id"], r["source_kind"]) for r in rows]

    def list_live(self, limit: int = 50, offset: int = 0, contains: str = "",
                  user: str | None = None) -> list[ThoughtRow]:
        """Newest first; `contains`: a case-insensitive substring of text or question; `user`: what they see."""
        sql = f"SELECT {_COLUMNS} FROM thoughts WHERE {_LIVE}"
        params: list = []
        if user is not None:
            sql += " AND (private = 0 OR user = ?)"
            params.append(user)
        if contains.strip():
            sql += " AND (text LIKE ? ESCAPE '\\' OR question LIKE ? ESCAPE '\\')"
            params += [_like_pattern(contains.strip())] * 2
        sql += " ORDER BY created_at DESC LIMIT ? OFFSET ?"
        return [_row(r) for r in self.db.query(sql, (*params, limit, offset))]

    def count_live(self) -> int:
        row = self.db.query_one(f"SELECT COUNT(*) AS n FROM thoughts WHERE {_LIVE}")
        return int(row["n"]) if row else 0

    def liveness(self) -> Liveness:
        rows = self.db.query(f"SELECT id, {_LIVE} AS live FROM thoughts")
        return Liveness(live=frozenset(r["id"] for r in rows if r["live"]),
                        hidden=frozenset(r["id"] for r in rows if not r["live"]))

    def vector_ids(self) -> set[str]:
        return set(self.vectors.thoughts.get(include=[])["ids"])

    def live_touching(self, item_ids: Sequence[str], user: str | None = None, rounds: int = 3
                      ) -> list[tuple[ThoughtRow, list[Source]]]:
        """Live thoughts (visible to `user`) made from any of `item_ids`, then from those thoughts, up to `rounds`
        levels: each with its direct sources, in order of creation."""
        found: dict[str, ThoughtRow] = {}
        frontier = list(dict.fromkeys(item_ids))
        for _ in range(rounds):
            if not frontier:
                break
            new: list[str] = []
            for start in range(0, len(frontier), 500):
                chunk = frontier[start:start + 500]
                marks = ",".join("?" * len(chunk))
                sql = (f"SELECT DISTINCT {', '.join('t.' + c.strip() for c in _COLUMNS.split(','))} FROM thoughts t"
                       f" JOIN thought_edges e ON e.thought_id = t.id WHERE e.source_id IN ({marks})"
                       f" AND t.deleted_at IS NULL AND t.retracted_at IS NULL")
                params: list = list(chunk)
                if user is not None:
                    sql += " AND (t.private = 0 OR t.user = ?)"
                    params.append(user)
                for row in self.db.query(sql, tuple(params)):
                    if row["id"] not in found:
                        found[row["id"]] = _row(row)
                        new.append(row["id"])
            frontier = new
        ordered = sorted(found.values(), key=lambda r: (r.created_at, r.id))
        return [(row, self.sources(row.id)) for row in ordered]

    def vectors_of(self, thought_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored (searchable) vectors of these thoughts."""
        if not thought_ids:
            return {}
        found = self.vectors.thoughts.get(ids=list(thought_ids), include=["embeddings"])
        return {tid: np.asarray(vec, dtype=np.float32) for tid, vec in zip(found["ids"], found["embeddings"])}

    def source_papers(self) -> list[str]:
        """Every paper some thought (in any state) was made from, sorted."""
        rows = self.db.query("SELECT DISTINCT source_id FROM thought_edges WHERE source_kind = 'paper'"
                             " ORDER BY source_id")
        return [r["source_id"] for r in rows]
