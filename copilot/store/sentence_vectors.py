"""The embeddings of abstracts' sentences, kept on disk so an answer looks them up instead of embedding them.

An evidence table scores every candidate sentence of ~12 abstracts against the question; embedding them costs about
a second of CPU per answer, which on 2 cores made 20 users asking at once wait half a minute (issue #41 item 7).
The vectors are derived data: keyed by (embedder name, hash of the sentence's text), so a changed abstract or another
embedder simply misses; kept in their own file (`sentence-vectors.sqlite3`) outside what a backup uploads, and
rebuilt by use or by `python -m copilot sentences`.

Being derived, the file never fails an answer (issue #47 item 6): a corrupt, locked or unwritable file or a full
disk makes a read find nothing and a write keep nothing, so the caller embeds on the fly. Each kind of failure is
logged once per store and handed to `on_failure` (the app records it for `status`); a corrupt file is moved aside
and made anew; after any other failure that kind of access (reads or writes) is skipped for `RETRY_AFTER_S`, so a
broken disk costs no answer a wait. An answer's store waits at most `ANSWER_BUSY_S` for another process's write lock.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

log = logging.getLogger(__name__)
FILE_NAME = "sentence-vectors.sqlite3"
_CHUNK = 500                  # keys per SELECT (SQLite's variable limit is 32,766; smaller keeps each query quick)
ANSWER_BUSY_S = 0.2           # an answer embeds on the fly rather than wait for the filler's write
FILLER_BUSY_S = 30.0          # the background filler may wait for an answer's write
RETRY_AFTER_S = 60.0          # after a failure other than corruption, the file is tried again this much later
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
# SQLite's primary result codes, by what the store does about them
_CORRUPT = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
_KINDS = {"SQLITE_BUSY": "locked", "SQLITE_LOCKED": "locked", "SQLITE_READONLY": "unwritable",
          "SQLITE_CANTOPEN": "unwritable", "SQLITE_PERM": "unwritable", "SQLITE_FULL": "disk full",
          "SQLITE_IOERR": "disk error"}
T = TypeVar("T")


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def failure_kind(error: BaseException) -> str:
    """'corrupt', 'locked', 'unwritable', 'disk full', 'disk error' or 'other'."""
    if isinstance(error, sqlite3.Error):
        name = (getattr(error, "sqlite_errorname", None) or "").split("_")[:2]
        primary = "_".join(name)
        if primary in _CORRUPT:
            return "corrupt"
        if primary in _KINDS:
            return _KINDS[primary]
        text = str(error).lower()      # errors raised before a statement ran carry no code
        if "not a database" in text or "malformed" in text:
            return "corrupt"
        if "locked" in text:
            return "locked"
        if "readonly" in text or "unable to open" in text:
            return "unwritable"
        if "full" in text:
            return "disk full"
    if isinstance(error, OSError):
        return "disk full" if error.errno == 28 else "unwritable"
    return "other"


class SentenceVectors:
    """Vectors by (model, sentence text). Readers and one writer at a time, across threads and processes (WAL).
    No method raises for the file's sake: reads then find nothing, writes return False."""

    def __init__(self, path: Path, busy_timeout: float = ANSWER_BUSY_S,
                 on_failure: Callable[[str, str], object] | None = None) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.on_failure = on_failure        # (kind, reason), once per kind per store
        self._local = threading.local()
        self._lock = threading.Lock()
        self._generation = 0                # raised when the file is made anew: every thread reopens it
        self._resting_until = {"read": 0.0, "write": 0.0}
        self._reported: set[str] = set()
        self.last_failure: str | None = None

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.generation == self._generation:
            return conn
        if conn is not None:
            conn.close()
            self._local.conn = None
        generation = self._generation
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local.inode = _inode(self.path)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._local.conn, self._local.generation = conn, generation
        return conn

    def _guarded(self, what: str, work: Callable[[sqlite3.Connection], T], fallback: T, now: bool = False) -> T:
        """`work(connection)`, or `fallback` when the file fails it (a corrupt file is made anew and tried once
        more). `now`: try it even while that kind of access rests after a failure."""
        for attempt in range(2):
            if not now and time.monotonic() < self._resting_until[what]:
                return fallback
            try:
                done = work(self._connection())
                self._resting_until[what] = 0.0
                if what == "write" and self._reported:     # mended: a later failure is logged and recorded again
                    with self._lock:
                        self._reported.clear()
                return done
            except (sqlite3.Error, OSError) as error:
                kind = failure_kind(error)
                self._drop_connection()
                self._failed(kind, f"{what}: {type(error).__name__}: {error}")
                if kind != "corrupt" or attempt or not self._set_aside(getattr(self._local, "inode", None)):
                    self._resting_until[what] = time.monotonic() + RETRY_AFTER_S
                    return fallback
        return fallback

    def close(self) -> None:
        """Close this thread's connection (the next use opens it again)."""
        self._drop_connection()

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def _failed(self, kind: str, reason: str) -> None:
        self.last_failure = f"{kind}: {reason}"
        with self._lock:
            if kind in self._reported:
                return
            self._reported.add(kind)
        log.warning("sentence vectors at %s %s (answers embed on the fly): %s", self.path, kind, reason)
        if self.on_failure is not None:
            try:
                self.on_failure(kind, f"{self.path.name} {kind}: {reason}")
            except Exception as error:      # noqa: BLE001 - the record is on the same broken disk, perhaps
                log.warning("could not record the sentence-vector failure: %s", error)

    def _set_aside(self, inode: int | None) -> bool:
        """Move the corrupt file (and its WAL) aside, replacing an earlier corrupt copy; True when the path is free
        for a new file. When the path no longer holds the file that failed (another process made it anew), that
        new file is used."""
        with self._lock:
            self._generation += 1
            if _inode(self.path) != inode:
                return True
            try:
                for suffix in ("-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                os.replace(self.path, self.path.with_name(self.path.name + ".corrupt"))
            except OSError as error:
                log.warning("could not move the corrupt %s aside: %s", self.path, error)
                return False
        log.info("moved the corrupt %s aside to %s.corrupt; it is made anew", self.path, self.path.name)
        return True

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

        def write(conn: sqlite3.Connection) -> bool:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(sql, rows)
            return True

        return self._guarded("write", write, False)

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
        def write(conn: sqlite3.Connection) -> bool:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(_FILLS)
                conn.execute("INSERT OR REPLACE INTO fills (model, at) VALUES (?, ?)", (model, at or time.time()))
            return True

        return self._guarded("write", write, False)

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
