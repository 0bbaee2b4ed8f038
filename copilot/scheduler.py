"""The daily ingestion job, run by APScheduler inside the app process. Runs never overlap. The job is told how it
was started ("scheduled" by the cron, "manual" from the Library tab's button) so its run is labelled as such."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from copilot.errors import readable_failure
from copilot.ingest import Ingestor

log = logging.getLogger(__name__)

JOB_ID = "daily-ingest"


class IngestScheduler:
    def __init__(self, job: Callable[[str], object], cron: str) -> None:
        self._job = job
        self.cron = cron
        self.scheduler = BackgroundScheduler(timezone="UTC")
        self.last_error: str | None = None
        self.last_trigger: str | None = None     # "scheduled" | "manual": how the last run was started
        self._guard = threading.Lock()

    def start(self) -> None:
        self.scheduler.add_job(self._run_guarded, CronTrigger.from_crontab(self.cron, timezone="UTC"), id=JOB_ID,
                               max_instances=1, coalesce=True, misfire_grace_time=3600, replace_existing=True)
        self.scheduler.start()

    def every(self, minutes: int, job: Callable[[], object], job_id: str) -> None:
        """Another job on the same scheduler, every `minutes` (e.g. the Hub backup); runs of it never overlap."""
        from apscheduler.triggers.interval import IntervalTrigger

        self.scheduler.add_job(job, IntervalTrigger(minutes=minutes), id=job_id, max_instances=1, coalesce=True,
                               replace_existing=True)

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def next_run(self) -> datetime | None:
        job = self.scheduler.get_job(JOB_ID) if self.scheduler.running else None
        return job.next_run_time if job else None

    @property
    def running(self) -> bool:
        return self._guard.locked() or Ingestor.busy()

    def trigger_now(self) -> bool:
        """Start a run in the background now; False (and nothing started) when one is already running."""
        if Ingestor.busy() or not self._guard.acquire(blocking=False):
            return False
        # the guard is taken here, not in the thread, so two quick clicks cannot both say "started"
        thread = threading.Thread(target=self._run_locked, args=("manual",), name="ingest-now", daemon=True)
        thread.start()
        return True

    def _run_guarded(self) -> None:
        if not self._guard.acquire(blocking=False):
            log.info("ingestion already running; this trigger is skipped")
            return
        self._run_locked("scheduled")

    def _run_locked(self, trigger: str) -> None:
        """Run the job; the caller holds the guard, released here."""
        try:
            self.last_error = None
            self.last_trigger = trigger
            self._job(trigger)
        except Exception as error:  # recorded in ingest_runs by the job; kept here for the status line
            self.last_error = readable_failure(error)
            log.exception("%s ingestion failed", trigger)
        finally:
            self._guard.release()
