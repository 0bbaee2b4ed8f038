"""Entry point (also for Hugging Face Spaces): build the UI, start the daily ingestion, serve."""

from __future__ import annotations

import logging
import sys
import threading

from copilot.config import SettingsError, load_settings


def resume_thought_jobs(services) -> None:
    """Repair the thought memory and resume the thought jobs a stopped process left (in the background: the
    page must not wait for the stores or the model)."""
    from copilot.features.chat import resume_jobs

    try:
        logging.getLogger(__name__).info("thought memory at start-up: %s", resume_jobs(services))
    except Exception:
        logging.getLogger(__name__).exception("resuming thought jobs failed; `python -m copilot doctor --repair`")


def warm_up(services) -> None:
    """The first question's loading (the embedding model, the store), done while the page is being built."""
    import time

    from copilot.features.search import warm_up

    started = time.monotonic()
    try:
        warm_up(services)
        logging.getLogger(__name__).info("warmed up for the first question in %.1f s", time.monotonic() - started)
    except Exception:
        logging.getLogger(__name__).exception("warming up at start failed; the first question loads what it needs")


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings()
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    from copilot.features import backup, library, sentence_prefill
    from copilot.scheduler import IngestScheduler
    from copilot.services import Services
    from copilot.ui.main import build_ui, launch_options

    backup.restore_at_start(settings)        # a free Space starts with an empty disk: its last snapshot, if any
    if settings.llm_backend == "local" and settings.local_model:
        from copilot.llm import choose_local_model

        choose_local_model(settings)         # a Hub reference is fetched now (progress on stderr), or falls back
    services = Services(settings)
    threading.Thread(target=warm_up, args=(services,), name="warm-up", daemon=True).start()
    services.after_papers_written = lambda: sentence_prefill.start_in_background(services)
    sentence_prefill.start_in_background(services)      # papers imported by the CLI or before this version
    threading.Thread(target=resume_thought_jobs, args=(services,), name="resume-thought-jobs", daemon=True).start()
    scheduler = None
    if settings.scheduler:
        def daily(trigger: str) -> None:
            try:
                library.ingest_from_arxiv(services, trigger=trigger)
            finally:
                if settings.hub_backup:
                    backup.scheduled_backup(services)

        scheduler = IngestScheduler(daily, settings.ingest_cron)
        if settings.hub_backup:
            scheduler.every(settings.hub_backup_minutes, lambda: backup.scheduled_backup(services), "hub-backup")
        scheduler.start()
    page = build_ui(services, scheduler)
    # api_open=False: a queued event cannot be run directly (`run/<api>` skipped the queue and its concurrency groups)
    page.queue(default_concurrency_limit=settings.concurrency, max_size=settings.queue_size, api_open=False)
    try:
        page.launch(**launch_options(services))
    finally:
        if scheduler:
            scheduler.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
