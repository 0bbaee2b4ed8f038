"""Papers' full texts (issue #48): the one owner of body text, its sentences and their vectors, and of each paper's
last reading status.

A body is derived from arXiv (its HTML page or PDF, or a file a researcher imported), so it lives in its own file,
`fulltext.sqlite3`, outside what a backup uploads (store.backup copies `copilot.db` and the vector store only), and
is read again on demand. One row per paper: a new version replaces the old, body, sentences and vectors in one
transaction, so a reader never sees half of one. Being derived, the file never fails an answer: a read that fails
finds nothing (the answer quotes abstracts) and is logged.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from copilot.body import Body

log = logging.getLogger(__name__)
FILE_NAME = "fulltext.sqlite3"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS bodies (paper_id TEXT PRIMARY KEY, version TEXT NOT NULL, source TEXT NOT NULL,"
    " stored_at REAL NOT NULL, body TEXT NOT NULL, sentences TEXT NOT NULL, terms TEXT NOT NULL,"
    " model TEXT NOT NULL, vectors BLOB NOT NULL, dim INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS readings (paper_id TEXT PRIMARY KEY, status TEXT NOT NULL, source TEXT NOT NULL,"
    " message TEXT NOT NULL, tried_at REAL NOT NULL);")
_CHUNK = 400
T = TypeVar("T")


@dataclass(frozen=True)
class StoredBody:
    body: Body
    sentences: tuple[tuple[int, int, int, bool, bool], ...]   # (start, end, passage, cut_before, cut_after)
    model: str                                                # the embedder the vectors come from
    vectors: np.ndarray                                       # one unit row per sentence, float32
    terms: tuple[frozenset[str], ...] = ()                    # each sentence's word stems (store.lexical.tokenize)
    # None: every sentence has its vector; a body still being read (features.fulltext.first_look): which have one
    embedded: np.ndarray | None = None


@dataclass(frozen=True)
class Reading:
    paper_id: str
    status: str               # "ok" or why there is no body (copilot.body.Parsed, the fetch's statuses)
    source: str               # "html", "pdf", "file" or ""
    message: str
    tried_at: float


class FulltextStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=5.0)
        if not self._ready:
            with self._lock:
                conn.executescript(_SCHEMA)
                self._ready = True
        return conn

    def put(self, body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]], model: str,
            vectors: np.ndarray, source: str, terms: Sequence[Iterable[str]] = ()) -> None:
        """Keep a paper's body (replacing any earlier version) and mark its reading ok, in one transaction."""
        matrix = np.asarray(vectors, dtype=np.float16)
        if len(matrix) != len(sentences) or (terms and len(terms) != len(sentences)):
            raise ValueError("one vector (and one list of terms) per sentence")
        now = time.time()
        conn = self._connect()
        try:
            with conn:
                conn.execute("INSERT OR REPLACE INTO bodies VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (body.paper_id, body.version, body.source, now, body.to_json(),
                              json.dumps([list(s) for s in sentences]), json.dumps([sorted(set(t)) for t in terms]),
                              model, matrix.tobytes(),
                              int(matrix.shape[1]) if matrix.ndim == 2 else 0))
                conn.execute("INSERT OR REPLACE INTO readings VALUES (?, 'ok', ?, '', ?)",
                             (body.paper_id, source, now))
        finally:
            conn.close()

    def note(self, paper_id: str, status: str, source: str, message: str) -> None:
        """Record a reading that gave no body; a body already stored stays (an older version still answers)."""
        try:
            conn = self._connect()
            try:
                with conn:
                    conn.execute("INSERT OR REPLACE INTO readings VALUES (?, ?, ?, ?, ?)",
                                 (paper_id, status, source, message[:500], time.time()))
            finally:
                conn.close()
        except sqlite3.Error as error:
            log.warning("full-text store: reading of %s not recorded: %s", paper_id, error)

    def delete(self, paper_id: str) -> None:
        """Forget a paper's body and reading (an evaluation reads it again cold)."""
        if not self.path.exists():
            return
        conn = self._connect()
        try:
            with conn:
                conn.execute("DELETE FROM bodies WHERE paper_id = ?", (paper_id,))
                conn.execute("DELETE FROM readings WHERE paper_id = ?", (paper_id,))
        finally:
            conn.close()

    def _read(self, work: Callable[[sqlite3.Connection], T], empty: T) -> T:
        """`work` over a connection; `empty` when the file is missing or any read fails (logged: derived data)."""
        if not self.path.exists():
            return empty
        try:
            conn = self._connect()
            try:
                return work(conn)
            finally:
                conn.close()
        except (sqlite3.Error, ValueError, KeyError, TypeError) as error:
            log.warning("full-text store unreadable, answering from abstracts: %s", error)
            return empty

    @staticmethod
    def _chunks(conn: sqlite3.Connection, sql: str, ids: list[str], *first: object) -> Iterator[tuple]:
        """The rows of `sql` (its ids as the last `IN ({})`) over `ids` a chunk at a time."""
        for n in range(0, len(ids), _CHUNK):
            chunk = ids[n:n + _CHUNK]
            yield from conn.execute(sql.format(",".join("?" * len(chunk))), (*first, *chunk))

    def get(self, paper_ids: Iterable[str], model: str) -> dict[str, StoredBody]:
        """The stored bodies of these papers whose vectors come from `model`; nothing on any failure."""
        ids = list(dict.fromkeys(paper_ids))

        def work(conn: sqlite3.Connection) -> dict[str, StoredBody]:
            found: dict[str, StoredBody] = {}
            sql = ("SELECT body, sentences, terms, model, vectors, dim FROM bodies WHERE model = ? "
                   "AND paper_id IN ({})")
            for body_json, sentences_json, terms_json, row_model, blob, dim in self._chunks(conn, sql, ids, model):
                body = Body.from_json(body_json)
                sentences = tuple(tuple(s) for s in json.loads(sentences_json))
                vectors = np.frombuffer(blob, dtype=np.float16).reshape(-1, dim).astype(np.float32) \
                    if dim else np.zeros((0, 0), dtype=np.float32)
                terms = tuple(frozenset(t) for t in json.loads(terms_json))
                found[body.paper_id] = StoredBody(body, sentences, row_model, vectors, terms)  # type: ignore[arg-type]
            return found

        return self._read(work, {}) if ids else {}

    def with_text(self, paper_ids: Iterable[str]) -> set[str]:
        """Which of these papers have a stored body."""
        ids = list(dict.fromkeys(paper_ids))
        sql = "SELECT paper_id FROM bodies WHERE paper_id IN ({})"
        return self._read(lambda conn: {r[0] for r in self._chunks(conn, sql, ids)}, set()) if ids else set()

    def readings(self, paper_ids: Iterable[str]) -> dict[str, Reading]:
        ids = list(dict.fromkeys(paper_ids))
        sql = "SELECT * FROM readings WHERE paper_id IN ({})"
        return self._read(lambda conn: {r[0]: Reading(*r) for r in self._chunks(conn, sql, ids)}, {}) if ids else {}

    def counts(self) -> dict[str, int]:
        """How many papers have a body ("ok"), and of the papers without one, how many readings ended in each other
        status."""
        def work(conn: sqlite3.Connection) -> dict[str, int]:
            found = {"ok": conn.execute("SELECT COUNT(*) FROM bodies").fetchone()[0]}
            found.update(conn.execute("SELECT status, COUNT(*) FROM readings WHERE status != 'ok' AND paper_id "
                                      "NOT IN (SELECT paper_id FROM bodies) GROUP BY status").fetchall())
            return found

        return self._read(work, {})
