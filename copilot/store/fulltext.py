"""Papers' full texts (issue #48): the one owner of body text, its sentences and their vectors, and of each paper's
last reading status.

A body is derived from arXiv (its HTML page or PDF, or a file a researcher imported), so it lives in its own file,
`fulltext.sqlite3`, outside what a backup uploads (store.backup copies `copilot.db` and the vector store only), and
is read again on demand. One row per paper: a new version replaces the old, body, sentences and vectors in one
transaction, so a reader never sees half of one.

Being derived, the file fails soft, by the same mechanism as the sentence vectors' file (store.derived_file, issue
#58 item 9): WAL, so a write never waits behind a long read nor a read behind a write; a connection per thread; a
read that fails finds nothing (the answer quotes abstracts), a write that fails keeps nothing and says so (False);
each kind of failure logged once and recorded (`FAILURE_KIND`), a corrupt file made anew, any other failure resting
that kind of access for `RETRY_AFTER_S` (a reading whose body could not be stored keeps it in memory to store
later: features.fulltext).
A paper's body is parsed from its row once and kept (`CACHE_BODIES` of them, by when they were stored), so a turn
that quotes it does not parse the whole body again (1.3 s for a large page, issue #58 item 3).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from copilot.body import Body
from copilot.store.derived_file import RETRY_AFTER_S, DerivedFile

log = logging.getLogger(__name__)
FILE_NAME = "fulltext.sqlite3"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS bodies (paper_id TEXT PRIMARY KEY, version TEXT NOT NULL, source TEXT NOT NULL,"
    " stored_at REAL NOT NULL, body TEXT NOT NULL, sentences TEXT NOT NULL, terms TEXT NOT NULL,"
    " model TEXT NOT NULL, vectors BLOB NOT NULL, dim INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS readings (paper_id TEXT PRIMARY KEY, status TEXT NOT NULL, source TEXT NOT NULL,"
    " message TEXT NOT NULL, tried_at REAL NOT NULL);")
_CHUNK = 400
FAILURE_KIND = "fulltext"     # this file's failures in the app's failure log (`status`)
READ_BUSY_S = 0.5             # WAL: only a checkpoint or a schema change makes a read wait at all
WRITE_BUSY_S = 30.0           # the background reader may wait this long for another writer
CACHE_BODIES = 32             # parsed bodies kept in memory, at most
CACHE_BYTES = 256 * 2 ** 20   # and at most this much of their vectors and text (a long paper's: ~5 MB)
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


def _size(stored: StoredBody) -> int:
    return int(stored.vectors.nbytes) + 4 * len(stored.body.text)


def _stored_body(body_json: str, sentences_json: str, terms_json: str, model: str, blob: bytes,
                 dim: int) -> StoredBody:
    body = Body.from_json(body_json)
    sentences = tuple(tuple(s) for s in json.loads(sentences_json))
    vectors = np.frombuffer(blob, dtype=np.float16).reshape(-1, dim).astype(np.float32) \
        if dim else np.zeros((0, 0), dtype=np.float32)
    vectors.flags.writeable = False               # shared by every turn that quotes this body
    terms = tuple(frozenset(t) for t in json.loads(terms_json))
    return StoredBody(body, sentences, model, vectors, terms)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Reading:
    paper_id: str
    status: str               # "ok" or why there is no body (copilot.body.Parsed, the fetch's statuses)
    source: str               # "html", "pdf", "file" or ""
    message: str
    tried_at: float


class FulltextStore:
    """Bodies and readings. Readers and one writer at a time, across threads and processes (WAL). No method raises
    for the file's sake: reads then find nothing, writes return False (store.derived_file: each failure logged once
    and handed to `on_failure`, a corrupt file made anew, that kind of access resting `rest_s` after another)."""

    def __init__(self, path: Path, write_busy_s: float = WRITE_BUSY_S,
                 on_failure: Callable[[str, str], object] | None = None, rest_s: float = RETRY_AFTER_S) -> None:
        self.write_busy_s = write_busy_s
        self.file = DerivedFile(path, _SCHEMA, READ_BUSY_S, "answers quote abstracts, readings keep nothing",
                                on_failure, rest_s, logger=log)
        self.path = self.file.path
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], tuple[float, StoredBody]] = OrderedDict()

    @property
    def last_failure(self) -> str | None:
        return self.file.last_failure

    def _write(self, work: Callable[[sqlite3.Connection], object]) -> bool:
        """`work` in one transaction; False when the file could not take it (logged: derived data)."""
        return self.file.write(work, busy_s=self.write_busy_s)

    def put(self, body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]], model: str,
            vectors: np.ndarray, source: str, terms: Sequence[Iterable[str]] = ()) -> bool:
        """Keep a paper's body (replacing any earlier version) and mark its reading ok, in one transaction; False
        when the file could not take it (nothing of it is kept then)."""
        matrix = np.asarray(vectors, dtype=np.float16)
        if len(matrix) != len(sentences) or (terms and len(terms) != len(sentences)):
            raise ValueError("one vector (and one list of terms) per sentence")
        now = time.time()
        row = (body.paper_id, body.version, body.source, now, body.to_json(), json.dumps([list(s) for s in sentences]),
               json.dumps([sorted(set(t)) for t in terms]), model, matrix.tobytes(),
               int(matrix.shape[1]) if matrix.ndim == 2 else 0)

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO bodies VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            conn.execute("INSERT OR REPLACE INTO readings VALUES (?, 'ok', ?, '', ?)", (body.paper_id, source, now))

        return self._write(work)

    def note(self, paper_id: str, status: str, source: str, message: str) -> bool:
        """Record a reading that gave no body; a body already stored stays (an older version still answers)."""
        return self._write(lambda conn: conn.execute("INSERT OR REPLACE INTO readings VALUES (?, ?, ?, ?, ?)",
                                                     (paper_id, status, source, message[:500], time.time())))

    def delete(self, paper_id: str) -> bool:
        """Forget a paper's body and reading (an evaluation reads it again cold)."""
        if not self.path.exists():
            return True

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM bodies WHERE paper_id = ?", (paper_id,))
            conn.execute("DELETE FROM readings WHERE paper_id = ?", (paper_id,))

        return self._write(work)

    def _read(self, work: Callable[[sqlite3.Connection], T], empty: T) -> T:
        """`work` over a connection; `empty` when the file is missing or any read fails (logged: derived data)."""
        if not self.path.exists():
            return empty

        try:
            return self.file.guarded("read", work, empty)
        except (ValueError, KeyError, TypeError) as error:     # one paper's row; the file is not to blame
            self.file.report("undecodable", f"read: {type(error).__name__}: {error}")
            return empty

    @staticmethod
    def _chunks(conn: sqlite3.Connection, sql: str, ids: list[str], *first: object) -> Iterator[tuple]:
        """The rows of `sql` (its ids as the last `IN ({})`) over `ids` a chunk at a time."""
        for n in range(0, len(ids), _CHUNK):
            chunk = ids[n:n + _CHUNK]
            yield from conn.execute(sql.format(",".join("?" * len(chunk))), (*first, *chunk))

    def get(self, paper_ids: Iterable[str], model: str) -> dict[str, StoredBody]:
        """The stored bodies of these papers whose vectors come from `model`; nothing on any failure. A body parsed
        before and stored since is given from memory (read-only: its vectors cannot be written to)."""
        ids = list(dict.fromkeys(paper_ids))

        def work(conn: sqlite3.Connection) -> dict[str, StoredBody]:
            found: dict[str, StoredBody] = {}
            stamps = dict(self._chunks(conn, "SELECT paper_id, stored_at FROM bodies WHERE model = ? AND paper_id IN "
                                             "({})", ids, model))
            with self._lock:
                for pid, stored_at in stamps.items():
                    kept = self._cache.get((pid, model))
                    if kept is not None and kept[0] == stored_at:
                        self._cache.move_to_end((pid, model))
                        found[pid] = kept[1]
            load = [pid for pid in stamps if pid not in found]
            sql = ("SELECT body, sentences, terms, model, vectors, dim, stored_at FROM bodies WHERE model = ? "
                   "AND paper_id IN ({})")
            for *row, stored_at in self._chunks(conn, sql, load, model):
                stored = _stored_body(*row)
                found[stored.body.paper_id] = stored
                self._remember(stored, stored_at)
            return found

        return self._read(work, {}) if ids else {}

    def _remember(self, stored: StoredBody, stored_at: float) -> None:
        with self._lock:
            self._cache[(stored.body.paper_id, stored.model)] = (stored_at, stored)
            self._cache.move_to_end((stored.body.paper_id, stored.model))
            while len(self._cache) > CACHE_BODIES or (
                    len(self._cache) > 1 and sum(_size(kept) for _, kept in self._cache.values()) > CACHE_BYTES):
                self._cache.popitem(last=False)

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
