"""The embeddings of abstracts' sentences, kept on disk so an answer looks them up instead of embedding them.

An evidence table scores every candidate sentence of ~12 abstracts against the question; embedding them costs about
a second of CPU per answer, which on 2 cores made 20 users asking at once wait half a minute (issue #41 item 7).
The vectors are derived data: keyed by (embedder name, hash of the sentence's text), so a changed abstract or another
embedder simply misses; kept in their own file (`sentence-vectors.sqlite3`) outside what a backup uploads, and
rebuilt by use or by `python -m copilot sentences`.

Being derived, the file never fails an answer (issue #47 item 6): it fails as store.derived_file says (shared with
the full-text store, issue #58 item 9): a corrupt, locked or unwritable file or a full disk makes a read find nothing
and a write keep nothing, so the caller embeds on the fly; each kind of failure logged once and handed to
`on_failure`; a corrupt file made anew; any other failure rests that kind of access for `RETRY_AFTER_S`, so a
broken disk costs no answer a wait. An answer's store waits at most `ANSWER_BUSY_S` for another process's write lock.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from copilot.store.derived_file import RETRY_AFTER_S, DerivedFile, failure_kind

__all__ = ["ANSWER_BUSY_S", "FILLER_BUSY_S", "FAILURE_KIND", "FILE_NAME", "RETRY_AFTER_S", "SentenceVectors",
           "failure_kind", "text_key"]
log = logging.getLogger(__name__)
FILE_NAME = "sentence-vectors.sqlite3"
_CHUNK = 500                  # keys per SELECT (SQLite's variable limit is 32,766; smaller keeps each query quick)
ANSWER_BUSY_S = 0.2           # an answer embeds on the fly rather than wait for the filler's write
FILLER_BUSY_S = 30.0          # the background filler may wait for an answer's write
FAILURE_KIND = "sentence_vectors"
_SCHEMA = (
    # a rowid table: a 1.5 KB vector fits in its page (WITHOUT ROWID spilled each to an overflow page, 3x)
    "CREATE TABLE IF NOT EXISTS sentence_vectors (model TEXT NOT NULL, key BLOB NOT NULL, vector BLOB NOT NULL,"
    " PRIMARY KEY (model, key));"
    "CREATE TABLE IF NOT EXISTS papers_done (model TEXT NOT NULL, paper_id TEXT NOT NULL,"
    " content_key BLOB NOT NULL, PRIMARY KEY (model, paper_id)) WITHOUT ROWID;")
# when a fill last ended with every paper of the library done (the Library's status: a failure before it is mended);
# made by the first such fill, so a file of an older version on a read-only disk still opens
_FILLS = "CREATE TABLE IF NOT EXISTS fills (model TEXT PRIMARY KEY, at REAL NOT NULL)"
T = TypeVar("T")


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class SentenceVectors:
    """Vectors by (model, sentence text). Readers and one writer at a time, across threads and processes (WAL).
    No method raises for the file's sake: reads then find nothing, writes return False."""

    def __init__(self, path: Path, busy_timeout: float = ANSWER_BUSY_S,
                 on_failure: Callable[[str, str], object] | None = None) -> None:
        self.busy_timeout = busy_timeout
        self.file = DerivedFile(path, _SCHEMA, busy_timeout, "answers embed on the fly", on_failure, logger=log)
        self.path = self.file.path

    @property
    def last_failure(self) -> str | None:
        return self.file.last_failure

    def _guarded(self, what: str, work: Callable[[sqlite3.Connection], T], fallback: T, now: bool = False) -> T:
        return self.file.guarded(what, work, fallback, now)

    def close(self) -> None:
        """Close this thread's connection (the next use opens it again)."""
        self.file.close()

    def get(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those `texts` that have one."""
        by_key = {text_key(t): t for t in texts}

        def read(conn: sqlite3.Connection) -> dict[str, np.ndarray]:
            found: dict[str, np.ndarray] = {}
            keys = list(by_key)
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start:start + _CHUNK]
                rows = conn.execute(f"SELECT key, vector FROM sentence_vectors WHERE model = ? AND key IN"
                                    f" ({','.join('?' * len(chunk))})", (model, *chunk))
                for key, blob in rows:
                    found[by_key[key]] = np.frombuffer(blob, dtype=np.float32)
            return found

        return self._guarded("read", read, {})

    def put(self, model: str, texts: Sequence[str], vectors: np.ndarray) -> bool:
        """Keep these vectors; False when the file could not take them."""
        rows = [(model, text_key(t), np.asarray(v, dtype=np.float32).tobytes()) for t, v in zip(texts, vectors)]
        return self._write("INSERT OR REPLACE INTO sentence_vectors (model, key, vector) VALUES (?,?,?)",
                           rows)

    def _write(self, sql: str, rows: list[tuple]) -> bool:
        if not rows:
            return True

        return self.file.write(lambda conn: conn.executemany(sql, rows))

    def papers_done(self, model: str, papers: Iterable[tuple[str, str]]) -> set[str]:
        """Of (paper id, content) pairs, the ids whose sentences were all stored for this very content (the caller
        decides what content means: the sentences it embeds)."""
        wanted = {pid: text_key(content) for pid, content in papers}

        def read(conn: sqlite3.Connection) -> set[str]:
            ids = list(wanted)
            done: set[str] = set()
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start:start + _CHUNK]
                rows = conn.execute(f"SELECT paper_id, content_key FROM papers_done WHERE model = ? AND paper_id IN"
                                    f" ({','.join('?' * len(chunk))})", (model, *chunk))
                done.update(pid for pid, key in rows if wanted.get(pid) == key)
            return done

        return self._guarded("read", read, set())

    def mark_done(self, model: str, papers: Iterable[tuple[str, str]]) -> bool:
        rows = [(model, pid, text_key(content)) for pid, content in papers]
        return self._write("INSERT OR REPLACE INTO papers_done (model, paper_id, content_key) VALUES (?,?,?)",
                           rows)

    def mark_filled(self, model: str, at: float | None = None) -> bool:
        """Note that every paper of the library is done now (a complete fill)."""
        def write(conn: sqlite3.Connection) -> None:
            conn.execute(_FILLS)
            conn.execute("INSERT OR REPLACE INTO fills (model, at) VALUES (?, ?)", (model, at or time.time()))

        return self.file.write(write)

    def filled_at(self, model: str) -> float | None:
        """When a fill last ended complete (time.time()), None if never (or the file cannot be read now: tried even
        while reads rest, as the Library's status asks whether the file works again)."""
        def read(conn: sqlite3.Connection) -> float | None:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fills'").fetchone():
                return None
            row = conn.execute("SELECT at FROM fills WHERE model = ?", (model,)).fetchone()
            return float(row[0]) if row else None

        return self._guarded("read", read, None, now=True)

    def count(self, model: str) -> int:
        return self._guarded("read", lambda conn: int(conn.execute(
            "SELECT COUNT(*) FROM sentence_vectors WHERE model = ?", (model,)).fetchone()[0]), 0)
