"""Ingestion: an idempotent, restartable upsert of papers into the vector store, recorded in `ingest_runs`.

Re-importing the same papers changes nothing; a newer version of a paper replaces the stored one. Each
batch is embedded and upserted as one unit keyed by arXiv id, so a run killed mid-way and run again ends
with the same store as one clean run.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from copilot.embed import Embedder
from copilot.errors import readable_failure
from copilot.records import Paper, date_number
from copilot.sources.limits import limit_problem
from copilot.sources.snapshot import BadLine
from copilot.store.db import Database
from copilot.store.lexical import LexicalIndex
from copilot.store.runs import RunCounts, RunLog
from copilot.store.vectors import VectorStore

log = logging.getLogger(__name__)

Progress = Callable[["IngestCounts"], None]


class IngestBusy(RuntimeError):
    """Another ingestion is running; runs never overlap."""


@dataclass
class IngestCounts:
    seen: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)     # lines of a file, and papers over the limits

    def refused_note(self) -> str | None:
        """The papers (not lines) left out for what they hold, as the run's note in the history, or None."""
        refused = [bad.sentence for bad in self.bad_lines if bad.paper_id]
        if not refused:
            return None
        return (f"{len(refused)} paper{'s' if len(refused) > 1 else ''} not stored: " + "; ".join(refused))[:500]

    def as_dict(self) -> dict[str, int]:
        return {"seen": self.seen, "added": self.added, "updated": self.updated, "unchanged": self.unchanged,
                "skipped": self.skipped}

    def totals(self) -> RunCounts:
        return RunCounts(self.seen, self.added, self.updated, self.unchanged, self.skipped)


def _is_newer(paper: Paper, stored: tuple[int, int, str]) -> bool | None:
    """True: replace; False: keep stored (it is newer); None: identical, nothing to do."""
    version, updated, document = stored
    if (paper.version, date_number(paper.updated or paper.published)) > (version, updated):
        return True
    if paper.version == version and paper.document != document and \
            date_number(paper.updated or paper.published) >= updated:
        return True
    return None if paper.document == document else False


class Ingestor:
    # One lock per process: the scheduler, the Library button and the CLI all take it.
    _running = threading.Lock()

    def __init__(self, db: Database, store: VectorStore, embedder: Embedder, batch_size: int = 64,
                 lexical: LexicalIndex | None = None, after_write: Callable[[], object] | None = None) -> None:
        """`after_write` is called after a run that added or changed papers (the app starts its sentence filler)."""
        self.runs = RunLog(db)
        self.store = store
        self.embedder = embedder
        self.batch_size = batch_size
        self.lexical = lexical
        self.after_write = after_write

    @classmethod
    def busy(cls) -> bool:
        return cls._running.locked()

    @classmethod
    @contextmanager
    def paused(cls, timeout: float) -> Iterator[None]:
        """No ingestion in this process writes while the block runs (a backup copies the stores); raises IngestBusy
        when a running one does not finish within `timeout` seconds."""
        if not cls._running.acquire(timeout=timeout):
            raise IngestBusy(f"an ingestion kept running for {timeout:g} s")
        try:
            yield
        finally:
            cls._running.release()

    def run(self, source: str, items: Iterable[Paper | BadLine], progress: Progress | None = None) -> IngestCounts:
        """Ingest everything `items` yields; raises IngestBusy if another run is going on."""
        if not self._running.acquire(blocking=False):
            raise IngestBusy("an ingestion is already running; wait for it to finish")
        counts: IngestCounts | None = None
        try:
            run_id = self._start_run(source)
            counts = IngestCounts()
            try:
                self._ingest(items, counts, run_id, progress)
            except BaseException as error:
                log.warning("ingestion run %s (%s) failed: %s: %s", run_id, source, type(error).__name__, error)
                self._finish(run_id, counts, "failed", readable_failure(error)[:500])
                raise
            self._finish(run_id, counts, "ok", counts.refused_note())
            return counts
        finally:
            self._update_lexical(counts)
            self._running.release()
            if self.after_write and counts and (counts.added or counts.updated):
                self.after_write()

    def _update_lexical(self, counts: IngestCounts | None) -> None:
        """Keep the lexical index in step with what this run wrote. A failure here loses nothing: the next
        lexical search finds the index behind and rebuilds it."""
        if self.lexical is None or counts is None or not (counts.added or counts.updated):
            return
        try:
            self.lexical.rebuild()
        except Exception as error:       # noqa: BLE001 - the papers are stored; only the index lags
            log.warning("lexical index not rebuilt after ingestion: %s", error)

    def _ingest(self, items, counts: IngestCounts, run_id: int, progress: Progress | None) -> None:
        batch: dict[str, Paper] = {}
        for item in items:
            if isinstance(item, BadLine):
                counts.skipped += 1
                counts.bad_lines.append(item)
                log.warning("line %d skipped: %s", item.line_no, item.reason)
                continue
            problem = limit_problem(item)    # the one check every source's papers pass (a file's rows are checked
            if problem:                      # when read, so that their line is named)
                counts.skipped += 1
                counts.bad_lines.append(BadLine(0, problem, paper_id=item.id))
                log.warning("paper %s not stored: %s", item.id, problem)
                continue
            counts.seen += 1
            previous = batch.get(item.id)
            if previous is None or (item.version, item.updated or item.published) >= \
                    (previous.version, previous.updated or previous.published):
                batch[item.id] = item
            if len(batch) >= self.batch_size:
                self._flush(list(batch.values()), counts, run_id, progress)
                batch = {}
        self._flush(list(batch.values()), counts, run_id, progress)

    def _flush(self, papers: list[Paper], counts: IngestCounts, run_id: int, progress: Progress | None) -> None:
        if not papers:
            return
        stored = self.store.paper_versions([p.id for p in papers])
        to_write, added = [], 0
        for paper in papers:
            if paper.id not in stored:
                to_write.append(paper)
                added += 1
            elif _is_newer(paper, stored[paper.id]):
                to_write.append(paper)
            else:
                counts.unchanged += 1
        if to_write:
            self.store.upsert_papers(to_write, self.embedder.embed([p.document for p in to_write]))
        counts.added += added
        counts.updated += len(to_write) - added
        self.runs.update_counts(run_id, counts.totals())
        if progress:
            progress(counts)

    def _finish(self, run_id: int, counts: IngestCounts, status: str, error: str | None) -> None:
        self.runs.finish(run_id, status, counts.totals(), error)

    @classmethod
    def reconcile(cls, runs) -> None:
        """Mark interrupted every 'running' row no run is behind: of a dead process, or of this one when no run is
        going on in it (issue #34: a killed upload's row stayed 'running' until the next ingestion)."""
        try:
            for run in runs.running():
                mine = run.pid == os.getpid()
                if (mine and not cls.busy()) or (not mine and not (run.pid and _alive(run.pid))):
                    runs.mark_interrupted(run.id)
        except Exception:                 # a status page must not fail over this
            log.exception("could not reconcile ingestion runs")

    def _start_run(self, source: str) -> int:
        """Record a new run. A 'running' row of a dead process was killed mid-way: mark it interrupted.
        A 'running' row of another live process means a run is going on elsewhere: refuse."""
        with self.runs.db.transaction():
            for run in self.runs.running():
                if run.pid and run.pid != os.getpid() and _alive(run.pid):
                    raise IngestBusy(f"an ingestion is already running in process {run.pid}")
                self.runs.mark_interrupted(run.id)
            return self.runs.start(source, os.getpid())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
