"""How a file of derived data fails (issues #47 item 6, #58 item 9): the sentence vectors' file
(store.sentence_vectors) and the papers' full texts (store.fulltext) are rebuilt by use, so neither ever fails an
answer or a reading.

One `DerivedFile` per store: SQLite in WAL mode (a write never waits behind a long read, nor a read behind a write),
one connection per thread, each access in `guarded`: a corrupt, locked or unwritable file or a full disk makes a read
find nothing and a write keep nothing (the caller's fallback), never an exception. Each kind of failure is logged
once per store (again after the file has been mended) and handed to `on_failure` (the app records it for `status`);
a corrupt file is moved aside and made anew; after any other failure that kind of access (reads or writes) rests
for `rest_s`, so a broken disk costs no caller a wait.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)
RETRY_AFTER_S = 60.0          # after a failure other than corruption, that access is tried again this much later
# SQLite's primary result codes, by what the store does about them
_CORRUPT = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
_KINDS = {"SQLITE_BUSY": "locked", "SQLITE_LOCKED": "locked", "SQLITE_READONLY": "unwritable",
          "SQLITE_CANTOPEN": "unwritable", "SQLITE_PERM": "unwritable", "SQLITE_FULL": "disk full",
          "SQLITE_IOERR": "disk error"}
T = TypeVar("T")


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


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


class DerivedFile:
    """A derived-data SQLite file: `schema` made on each new connection; `busy_s` the lock wait unless an access
    names its own; `what_then`: what a failure means for the user, said in the log ("answers embed on the fly");
    `logger`: the store's own (its failures are logged under its name)."""

    def __init__(self, path: Path, schema: str, busy_s: float, what_then: str,
                 on_failure: Callable[[str, str], object] | None = None, rest_s: float = RETRY_AFTER_S,
                 logger: logging.Logger = log) -> None:
        self.log = logger
        self.path = Path(path)
        self.schema = schema
        self.busy_s = busy_s
        self.what_then = what_then
        self.on_failure = on_failure        # (kind, reason), once per kind per store
        self.rest_s = rest_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._generation = 0                # raised when the file is made anew: every thread reopens it
        self._resting_until = {"read": 0.0, "write": 0.0}
        self._reported: set[str] = set()
        self.last_failure: str | None = None

    def _connection(self, busy_s: float) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.generation != self._generation:
            conn = self._open()
        if self._local.busy_s != busy_s:
            conn.execute(f"PRAGMA busy_timeout={int(busy_s * 1000)}")
            self._local.busy_s = busy_s
        return conn

    def _open(self) -> sqlite3.Connection:
        self._drop_connection()
        generation = self._generation
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local.inode = _inode(self.path)
        conn = sqlite3.connect(self.path, timeout=self.busy_s, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_s * 1000)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(self.schema)
        except BaseException:
            conn.close()
            raise
        self._local.conn, self._local.generation, self._local.busy_s = conn, generation, self.busy_s
        return conn

    def guarded(self, what: str, work: Callable[[sqlite3.Connection], T], fallback: T, now: bool = False,
                busy_s: float | None = None) -> T:
        """`work(connection)`, or `fallback` when the file fails it (a corrupt file is made anew and tried once
        more). `what`: "read" or "write"; `now`: try it even while that kind of access rests after a failure;
        `busy_s`: how long this access waits for a lock (default: the file's)."""
        for attempt in range(2):
            if not now and time.monotonic() < self._resting_until[what]:
                return fallback
            try:
                done = work(self._connection(self.busy_s if busy_s is None else busy_s))
                self._resting_until[what] = 0.0
                if what == "write" and self._reported:     # mended: a later failure is logged and recorded again
                    with self._lock:
                        self._reported.clear()
                return done
            except (sqlite3.Error, OSError) as error:
                kind = failure_kind(error)
                self._drop_connection()
                self.report(kind, f"{what}: {type(error).__name__}: {error}")
                if kind != "corrupt" or attempt or not self._set_aside(getattr(self._local, "inode", None)):
                    self._resting_until[what] = time.monotonic() + self.rest_s
                    return fallback
        return fallback

    def write(self, work: Callable[[sqlite3.Connection], object], busy_s: float | None = None) -> bool:
        """`work` in one write transaction (all or nothing); False when the file could not take it."""
        def transaction(conn: sqlite3.Connection) -> bool:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                work(conn)
            return True

        return self.guarded("write", transaction, False, busy_s=busy_s)

    def resting(self, what: str) -> bool:
        """Whether that kind of access rests now after a failure."""
        return time.monotonic() < self._resting_until[what]

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

    def report(self, kind: str, reason: str) -> None:
        """Log a failure of this kind (a warning the first time per store, until mended) and hand it to
        `on_failure`."""
        self.last_failure = f"{kind}: {reason}"
        with self._lock:
            if kind in self._reported:
                self.log.debug("%s %s: %s", self.path, kind, reason)
                return
            self._reported.add(kind)
        self.log.warning("%s %s (%s): %s", self.path, kind, self.what_then, reason)
        if self.on_failure is not None:
            try:
                self.on_failure(kind, f"{self.path.name} {kind}: {reason}")
            except Exception as error:      # noqa: BLE001 - the record is on the same broken disk, perhaps
                self.log.warning("could not record the failure of %s: %s", self.path.name, error)

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
                self.log.warning("could not move the corrupt %s aside: %s", self.path, error)
                return False
        self.log.info("moved the corrupt %s aside to %s.corrupt; it is made anew", self.path, self.path.name)
        return True
