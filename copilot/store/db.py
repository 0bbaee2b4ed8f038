"""SQLite application database: one connection per thread, WAL mode, named migrations applied once."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from copilot.store.migrations import MIGRATIONS


class Database:
    """Small accessor over copilot.db. Writes commit before returning, so a caller can confirm them."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self.migrate()

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE … COMMIT); rolled back on error. Opened inside another one on
        the same thread, it joins it: the stores' writes then commit or roll back together with the caller's."""
        conn = self._connection()
        if getattr(self._local, "in_transaction", False):
            yield conn
            return
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            self._local.in_transaction = True
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                self._local.in_transaction = False

    def execute(self, sql: str, params: tuple | dict = ()) -> int:
        """Run one write statement in its own transaction; returns lastrowid."""
        with self.transaction() as conn:
            return conn.execute(sql, params).lastrowid or 0

    def query(self, sql: str, params: tuple | dict = ()) -> list[dict[str, Any]]:
        return [dict(row) for row in self._connection().execute(sql, params).fetchall()]

    def query_one(self, sql: str, params: tuple | dict = ()) -> dict[str, Any] | None:
        row = self._connection().execute(sql, params).fetchone()
        return dict(row) if row else None

    def migrate(self) -> list[str]:
        """Apply migrations not yet recorded; returns the names applied now."""
        conn = self._connection()
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        applied = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
        done = []
        for name, statements in MIGRATIONS:
            if name in applied:
                continue
            with self.transaction() as tx:
                # re-checked under the write lock: another process (app and CLI starting together) may have
                # applied it since we looked
                if tx.execute("SELECT 1 FROM schema_migrations WHERE name=?", (name,)).fetchone():
                    continue
                for statement in statements:
                    tx.execute(statement)
                tx.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
            done.append(name)
        return done

    def tables(self) -> set[str]:
        return {row["name"] for row in self.query("SELECT name FROM sqlite_master WHERE type='table'")}

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
