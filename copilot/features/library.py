"""Library use cases: corpus status, snapshot import, arXiv ingestion."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from copilot.ingest import IngestCounts, Ingestor, Progress
from copilot.services import Services
from copilot.sources.snapshot import read_snapshot
from copilot.store.runs import IngestRun


def ingestor(services: Services) -> Ingestor:
    return Ingestor(services.db, services.store, services.embedder, batch_size=services.settings.embed_batch_size,
                    lexical=services.lexical)


def import_snapshot(services: Services, path: Path, limit: int | None = None,
                    progress: Progress | None = None) -> IngestCounts:
    return ingestor(services).run(f"snapshot:{Path(path).name}", read_snapshot(path, limit=limit), progress)


def ingest_from_arxiv(services: Services, days: int | None = None, categories: list[str] | None = None,
                      progress: Progress | None = None) -> IngestCounts:
    s = services.settings
    cats = categories or s.categories
    papers = services.arxiv.by_categories(cats, days or s.ingest_days, s.ingest_max_papers)
    return ingestor(services).run(f"arxiv:{','.join(cats)}", papers, progress)


def _iso(timestamp: float | None) -> str | None:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds") if timestamp else None


def run_summary(run: IngestRun) -> dict:
    return {"id": run.id, "source": run.source, "status": run.status, "started": _iso(run.started_at),
            "finished": _iso(run.finished_at), "seen": run.seen, "added": run.added, "updated": run.updated,
            "unchanged": run.unchanged, "skipped": run.skipped, "error": run.error}


def ingest_history(services: Services, limit: int = 20) -> list[dict]:
    return [run_summary(run) for run in services.runs.recent(limit)]


def next_scheduled(services: Services) -> datetime | None:
    """When the daily job fires next, from the same cron the app's scheduler uses."""
    if not services.settings.scheduler:
        return None
    from apscheduler.triggers.cron import CronTrigger

    trigger = CronTrigger.from_crontab(services.settings.ingest_cron, timezone="UTC")
    return trigger.get_next_fire_time(None, datetime.now(timezone.utc))


def status(services: Services, next_ingest: datetime | None = None) -> dict:
    runs = services.runs.recent(1)
    next_ingest = next_ingest or next_scheduled(services)
    return {
        "papers": services.store.count("paper"),
        "thoughts": services.store.count("thought"),
        "last_ingest": run_summary(runs[0]) if runs else None,
        "next_ingest": next_ingest.isoformat(timespec="seconds") if next_ingest else None,
        "ingest_running": Ingestor.busy(),
        "llm": services.llm_info(),
        "embedder": services.embedder.name,
        "categories": services.settings.categories,
        "failures": failure_counts(services),
    }


def failure_counts(services: Services) -> dict:
    """Failures the product worked around (logged where they happened), by kind: how many, the latest and why."""
    return {f.kind: {"count": f.count, "last": _iso(f.last_at), "last_reason": f.last_reason}
            for f in services.failures.counts()}
