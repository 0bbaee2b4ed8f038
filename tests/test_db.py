"""The SQLite app database: migrations applied once and recorded, WAL mode, transactions."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from copilot.store import db as db_module
from copilot.store.db import Database
from copilot.store.migrations import MIGRATIONS


def recorded(path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY rowid")]


def test_blank_database_gets_every_migration_in_order(tmp_path):
    db = Database(tmp_path / "sub" / "copilot.db")
    assert recorded(db.path) == [name for name, _ in MIGRATIONS]
    assert {"llm_calls", "ingest_runs", "schema_migrations"} <= db.tables()
    names = [name for name, _ in MIGRATIONS]
    assert len(names) == len(set(names)), "migration names must be unique"


def test_wal_mode_is_persistent(tmp_path):
    db = Database(tmp_path / "copilot.db")
    assert db.query_one("PRAGMA journal_mode")["journal_mode"] == "wal"
    with sqlite3.connect(db.path) as other:  # a plain connection sees the file's mode
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrations_are_recorded_once(tmp_path):
    path = tmp_path / "copilot.db"
    Database(path)
    again = Database(path)
    assert again.migrate() == []
    assert Database(path).migrate() == []
    assert recorded(path) == [name for name, _ in MIGRATIONS]


def test_migration_applied_meanwhile_by_another_process_is_not_applied_again(tmp_path):
    """App and CLI starting together: B reads the applied list, then waits for the write lock while A
    applies everything. B must not re-run A's CREATE TABLEs."""
    path = tmp_path / "copilot.db"
    a = sqlite3.connect(path, isolation_level=None)
    a.execute("PRAGMA journal_mode=WAL")
    a.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    a.execute("BEGIN IMMEDIATE")
    errors: list[BaseException] = []

    def open_b() -> None:
        try:
            Database(path)
        except BaseException as error:  # reported below
            errors.append(error)

    b = threading.Thread(target=open_b)
    b.start()
    time.sleep(0.5)  # B has read the (empty) list and now waits for the lock A holds
    for name, statements in MIGRATIONS:
        for statement in statements:
            a.execute(statement)
        a.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, time.time()))
    a.execute("COMMIT")
    b.join(timeout=60)
    assert errors == []
    assert recorded(path) == [name for name, _ in MIGRATIONS]


def test_failed_migration_is_rolled_back_and_not_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS + [
        ("test_0001_broken", ["CREATE TABLE half_done (x INTEGER)", "THIS IS NOT SQL"])])
    with pytest.raises(sqlite3.OperationalError):
        Database(tmp_path / "copilot.db")
    assert "test_0001_broken" not in recorded(tmp_path / "copilot.db")
    with sqlite3.connect(tmp_path / "copilot.db") as conn:
        assert conn.execute("SELECT name FROM sqlite_master WHERE name='half_done'").fetchone() is None


def test_execute_commits_and_transaction_rolls_back(tmp_path):
    db = Database(tmp_path / "copilot.db")
    row_id = db.execute("INSERT INTO ingest_runs (started_at, source) VALUES (?, ?)", (1.0, "a"))
    assert row_id == 1
    with sqlite3.connect(db.path) as other:  # committed: visible to another connection
        assert other.execute("SELECT source FROM ingest_runs").fetchall() == [("a",)]
    with pytest.raises(RuntimeError):
        with db.transaction() as conn:
            conn.execute("INSERT INTO ingest_runs (started_at, source) VALUES (?, ?)", (2.0, "b"))
            raise RuntimeError("boom")
    assert [r["source"] for r in db.query("SELECT source FROM ingest_runs")] == ["a"]


def test_writes_from_many_threads(tmp_path):
    db = Database(tmp_path / "copilot.db")

    def write(n: int) -> None:
        for i in range(20):
            db.execute("INSERT INTO ingest_runs (started_at, source) VALUES (?, ?)", (float(i), f"t{n}"))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.query_one("SELECT COUNT(*) AS n FROM ingest_runs")["n"] == 80
