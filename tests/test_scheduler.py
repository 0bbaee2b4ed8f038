"""The daily ingestion job: fired by APScheduler or the button, recorded in ingest_runs, never overlapping."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

import pytest

from copilot.features import library
from copilot.ingest import IngestBusy
from copilot.scheduler import JOB_ID, IngestScheduler
from copilot.services import Services
from tests.conftest import make_settings
from tests.fake_arxiv import fake_arxiv  # noqa: F401 (fixture)


def wait_idle(scheduler: IngestScheduler, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while scheduler.running:
        if time.monotonic() > deadline:
            raise AssertionError("the ingestion job did not finish")
        time.sleep(0.05)


@pytest.fixture
def arxiv_services(fake_arxiv, tmp_path):
    return Services(make_settings(tmp_path / "data", arxiv_api_url=fake_arxiv.url, categories="cs.CL,cs.IR",
                                  arxiv_retries=1))


def test_trigger_runs_the_ingestion_and_records_it(arxiv_services, fake_arxiv):
    scheduler = IngestScheduler(lambda trigger: library.ingest_from_arxiv(arxiv_services, trigger=trigger),
                                "0 6 * * *")
    assert scheduler.trigger_now() is True
    wait_idle(scheduler)
    [run] = library.ingest_history(arxiv_services)
    assert (run["status"], run["source"], run["error"]) == ("ok", "arxiv:cs.CL,cs.IR (manual)", None)
    assert scheduler.last_trigger == "manual"
    assert run["finished"] is not None
    [query] = fake_arxiv.queries  # the fake has nothing for this window: one empty page
    assert "cat:cs.CL OR cat:cs.IR" in query["search_query"] and "submittedDate:[" in query["search_query"]
    assert scheduler.last_error is None


def test_apscheduler_fires_the_job(arxiv_services):
    fired = threading.Event()
    scheduler = IngestScheduler(lambda trigger: (library.ingest_from_arxiv(arxiv_services, trigger=trigger),
                                                 fired.set()), "0 6 * * *")
    scheduler.start()
    try:
        next_run = scheduler.next_run()
        assert next_run is not None and (next_run.hour, next_run.minute) == (6, 0)
        assert next_run > datetime.now(timezone.utc)
        scheduler.scheduler.modify_job(JOB_ID, next_run_time=datetime.now(timezone.utc))  # "it is 06:00 now"
        assert fired.wait(30), "APScheduler did not run the job"
        wait_idle(scheduler)
    finally:
        scheduler.shutdown()
    assert [(r["status"], r["source"]) for r in library.ingest_history(arxiv_services)] == \
        [("ok", "arxiv:cs.CL,cs.IR (scheduled)")]
    assert scheduler.last_trigger == "scheduled"


def test_overlapping_trigger_is_refused(services):
    release = threading.Event()
    started = threading.Event()
    calls = []

    def slow_papers():
        started.set()
        release.wait(30)
        return
        yield

    def job(trigger):
        calls.append(1)
        library.ingestor(services).run("test:slow", slow_papers())

    scheduler = IngestScheduler(job, "0 6 * * *")
    try:
        assert scheduler.trigger_now() is True
        assert started.wait(30)
        assert scheduler.running
        assert scheduler.trigger_now() is False          # the button while a run is going on
        scheduler._run_guarded()                         # the cron firing meanwhile: skipped
        with pytest.raises(IngestBusy):                  # another caller in this process (CLI, Library import)
            library.ingestor(services).run("test:other", [])
        assert library.status(services)["ingest_running"] is True
    finally:
        release.set()
    wait_idle(scheduler)
    assert calls == [1]
    assert [r["source"] for r in library.ingest_history(services)] == ["test:slow"]
    assert scheduler.trigger_now() is True                # free again afterwards
    wait_idle(scheduler)
    assert len(calls) == 2


def test_concurrent_triggers_start_one_run(services):
    release = threading.Event()
    calls = []
    scheduler = IngestScheduler(lambda trigger: (calls.append(1), release.wait(30)), "0 6 * * *")
    answers: list[bool] = []
    threads = [threading.Thread(target=lambda: answers.append(scheduler.trigger_now())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    release.set()
    wait_idle(scheduler)
    assert sorted(answers) == [False] * 7 + [True]
    assert calls == [1]


def test_failing_job_is_recorded_as_failed(arxiv_services, fake_arxiv):
    fake_arxiv.fail_next(10, status=503)
    scheduler = IngestScheduler(lambda trigger: library.ingest_from_arxiv(arxiv_services, trigger=trigger),
                                "0 6 * * *")
    assert scheduler.trigger_now()
    wait_idle(scheduler)
    [run] = library.ingest_history(arxiv_services)
    assert run["status"] == "failed" and "HTTP 503" in run["error"]
    assert "HTTP 503" in scheduler.last_error
    assert library.status(arxiv_services)["last_ingest"]["status"] == "failed"
    # the next run succeeds and is recorded separately
    fake_arxiv.reset()
    assert scheduler.trigger_now()
    wait_idle(scheduler)
    assert [r["status"] for r in library.ingest_history(arxiv_services)] == ["ok", "failed"]
    assert scheduler.last_error is None
