"""Ingestion runs: one row per run of the ingestion pipeline, with its counts as batches land, in SQLite."""

from __future__ import annotations

import time
from dataclasses import dataclass

from copilot.store.db import Database

_COLUMNS = "id, started_at, finished_at, source, pid, status, seen, added, updated, unchanged, skipped, error"


@dataclass(frozen=True)
class RunCounts:
    seen: int
    added: int
    updated: int
    unchanged: int
    skipped: int


@dataclass(frozen=True)
class IngestRun:
    id: int
    started_at: float
    finished_at: float | None
    source: str                    # e.g. "arxiv:cs.CL", "snapshot:papers.jsonl", "profile:ann"
    pid: int | None                # the process that runs (ran) it
    status: str                    # "running" | "ok" | "failed" | "interrupted"
    seen: int
    added: int
    updated: int
    unchanged: int
    skipped: int
    error: str | None


class RunLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def start(self, source: str, pid: int) -> int:
        return self.db.execute("INSERT INTO ingest_runs (started_at, source, pid) VALUES (?, ?, ?)",
                               (time.time(), source, pid))

    def running(self) -> list[IngestRun]:
        """Runs recorded as running (some may belong to a process that has died)."""
        rows = self.db.query(f"SELECT {_COLUMNS} FROM ingest_runs WHERE status = 'running' ORDER BY id")
        return [IngestRun(**row) for row in rows]

    def mark_interrupted(self, run_id: int) -> None:
        self.db.execute("UPDATE ingest_runs SET status = 'interrupted', finished_at = ?,"
                        " error = 'the process stopped before the run finished' WHERE id = ?", (time.time(), run_id))

    def update_counts(self, run_id: int, counts: RunCounts) -> None:
        self.db.execute("UPDATE ingest_runs SET seen = ?, added = ?, updated = ?, unchanged = ?, skipped = ?"
                        " WHERE id = ?",
                        (counts.seen, counts.added, counts.updated, counts.unchanged, counts.skipped, run_id))

    def finish(self, run_id: int, status: str, counts: RunCounts, error: str | None) -> None:
        self.db.execute(
            "UPDATE ingest_runs SET finished_at = ?, status = ?, seen = ?, added = ?, updated = ?, unchanged = ?,"
            " skipped = ?, error = ? WHERE id = ?",
            (time.time(), status, counts.seen, counts.added, counts.updated, counts.unchanged, counts.skipped, error,
             run_id))

    def recent(self, limit: int = 20) -> list[IngestRun]:
        """Newest first."""
        rows = self.db.query(f"SELECT {_COLUMNS} FROM ingest_runs ORDER BY id DESC LIMIT ?", (limit,))
        return [IngestRun(**row) for row in rows]

    def latest_id(self) -> int:
        """The id of the newest run, 0 before the first: changes whenever the corpus may have."""
        row = self.db.query_one("SELECT COALESCE(MAX(id), 0) AS run FROM ingest_runs")
        return int(row["run"]) if row else 0

    def latest_progress(self) -> tuple:
        """The newest run's id, status and counts: changes whenever any process may have written papers."""
        row = self.db.query_one("SELECT id, status, added, updated FROM ingest_runs ORDER BY id DESC LIMIT 1")
        return tuple(row.values()) if row else ()

    def others_progress(self, pid: int) -> tuple:
        """What ingestion runs of processes other than `pid` have written so far (a changing value while they add
        papers): the newest such run's id, status and counts."""
        row = self.db.query_one(
            "SELECT id, status, added, updated FROM ingest_runs WHERE pid IS NOT ? ORDER BY id DESC LIMIT 1", (pid,))
        return tuple(row.values()) if row else ()
