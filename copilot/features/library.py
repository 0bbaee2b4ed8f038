"""Library use cases: corpus status, snapshot import, arXiv ingestion."""

from __future__ import annotations

import itertools
import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from copilot.errors import UserError, failure_sentence
from copilot.ingest import IngestBusy, IngestCounts, Ingestor, Progress
from copilot.records import parse_arxiv_id, parse_id_list
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSourceError
from copilot.sources.snapshot import read_snapshot
from copilot.store.llm_calls import LLMCallLog
from copilot.store.runs import IngestRun
from copilot.store.sentence_vectors import FAILURE_KIND as SENTENCE_FAILURE
from copilot.store.sentence_vectors import FILE_NAME as SENTENCE_FILE

log = logging.getLogger(__name__)

MAX_PASTED_IDS = 200        # arXiv answers an id list in pages of 100; more belongs in a snapshot file


def check_may_change(services: Services, user: str | None) -> None:
    """Who may change the shared library (issue #34: any signed-in user's upload replaced a paper for everyone):
    when COPILOT_ADMINS names admins, only they may upload, fetch or start an ingestion from the page; without admins
    (a single-user or trusted install) everyone may. The CLI (user None) is the operator and always may."""
    admins = services.settings.admins
    if user is not None and admins and user not in admins:
        raise UserError("only an admin (COPILOT_ADMINS) may change the shared library; ask one to import these papers")


def ingestor(services: Services) -> Ingestor:
    return Ingestor(services.db, services.store, services.embedder, batch_size=services.settings.embed_batch_size,
                    lexical=services.lexical, after_write=services.after_papers_written)


def import_snapshot(services: Services, path: Path, limit: int | None = None,
                    progress: Progress | None = None) -> IngestCounts:
    return ingestor(services).run(f"snapshot:{Path(path).name}", read_snapshot(path, limit=limit), progress)


def _check_snapshot(path: Path) -> None:
    """A file that is not JSON lines at all is refused before anything is written."""
    first = _first_line(path)
    if first is None:
        raise UserError("the file is empty: upload a JSON-lines snapshot, one paper per line")
    if not first.lstrip().startswith("{"):
        raise UserError("this is not a JSON-lines snapshot: its first line is not a JSON object. Each line must be "
                        "one paper, e.g. {\"id\": \"2401.01234\", \"title\": …, \"summary\": …}")


def import_upload(services: Services, path: Path, progress: Progress | None = None,
                  name: str | None = None) -> IngestCounts:
    """A snapshot uploaded on the Library tab: the same idempotent, resumable path as `python -m copilot import`.
    A file that is not JSON lines at all is refused before anything is written; within a JSON-lines file each bad
    line is skipped and reported by number (the rows of either schema may be mixed)."""
    path = Path(path)
    _check_snapshot(path)
    try:
        return ingestor(services).run(f"upload:{(name or path.name)[:80]}", read_snapshot(path), progress)
    except IngestBusy as error:
        raise UserError(f"{error}; your file was not imported — try again when it is done") from None


def import_ids(services: Services, text: str, progress: Progress | None = None) -> tuple[IngestCounts, list[str]]:
    """Papers by pasted arXiv ids or links, fetched from arXiv and stored like any ingestion. Returns the counts and
    notes on what was left out (tokens that are not arXiv ids, ids arXiv does not know)."""
    wanted, bad = parse_id_list(text)
    if not wanted:
        raise UserError("no arXiv id or link found; paste ids like 2401.01234 or https://arxiv.org/abs/2401.01234")
    if len(wanted) > MAX_PASTED_IDS:
        raise UserError(f"{len(wanted)} ids pasted; at most {MAX_PASTED_IDS} at a time (use a snapshot file and "
                        "`python -m copilot import` for more)")
    try:
        papers = services.arxiv.by_ids(wanted)
        counts = ingestor(services).run("arxiv:ids (manual)", papers, progress)
    except ArxivSourceError as error:
        raise UserError(failure_sentence("arXiv could not be reached, so nothing was fetched", error,
                                         "The papers already in the library still work on every tab; try again "
                                         "later, or upload a snapshot file.")) from None
    except IngestBusy as error:
        raise UserError(f"{error}; nothing was imported — try again when it is done") from None
    found = {paper.id for paper in papers}
    missing = [token for token in wanted if (parsed := parse_arxiv_id(token)) is None or parsed[0] not in found]
    notes = [f"not arXiv ids, ignored: {', '.join(bad[:5])}"] if bad else []
    if missing:
        notes.append(f"not found on arXiv: {', '.join(missing[:10])}")
    return counts, notes


_UPLOAD_NUMBERS = itertools.count(1)


@dataclass
class UploadImport:
    """An uploaded snapshot imported in the background; the page reads it on every tick."""
    name: str
    lines: int
    counts: IngestCounts | None = None
    error: str | None = None
    done: bool = False
    number: int = field(default_factory=lambda: next(_UPLOAD_NUMBERS))    # which upload a page is following


_UPLOADS: dict[str, UploadImport] = {}       # each user's latest upload, while the process lives


def start_upload(services: Services, path: Path, user: str) -> UploadImport:
    """Check an uploaded file, keep a copy under the data dir (the server's temporary copy may be cleaned up while
    the import runs), and import it on a background thread: a large snapshot takes minutes to embed, and the page
    must not wait on one request for that."""
    path = Path(path)
    _check_snapshot(path)
    if Ingestor.busy():
        raise UserError("an ingestion is already running; your file was not imported — try again when it is done")
    kept = services.settings.data_dir / "uploads" / f"{time.strftime('%Y%m%d-%H%M%S')}-{path.name[-80:]}"
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, kept)
    with kept.open("rb") as handle:
        job = UploadImport(path.name, sum(1 for line in handle if line.strip()))
    _UPLOADS[user] = job
    threading.Thread(target=_run_upload, args=(services, kept, job), name="upload-import", daemon=True).start()
    return job


def _run_upload(services: Services, path: Path, job: UploadImport) -> None:
    def seen(counts: IngestCounts) -> None:
        job.counts = counts
    try:
        job.counts = import_upload(services, path, seen, name=job.name)    # the history names the user's file
    except UserError as error:
        job.error = str(error)
    except Exception as error:       # noqa: BLE001 - told on the page; the details go to the log
        log.exception("import of an uploaded file failed")
        job.error = failure_sentence("The import stopped on an unexpected error", error,
                                     "The papers stored before it are kept; the app's log has the details.")
    finally:
        job.done = True
        path.unlink(missing_ok=True)


def paper_count(services: Services) -> int:
    return services.store.count("paper")


def latest_upload(user: str) -> UploadImport | None:
    return _UPLOADS.get(user)


def _first_line(path: Path) -> str | None:
    with path.open("r", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.strip():
                return line
    return None


def ingest_from_arxiv(services: Services, days: int | None = None, categories: list[str] | None = None,
                      progress: Progress | None = None, trigger: str = "command line") -> IngestCounts:
    """The newest papers of the categories from arXiv. `trigger` (scheduled, manual, command line) labels the run in
    the history, so a failed button press is not reported as a failed daily run."""
    s = services.settings
    cats = categories or s.categories
    papers = services.arxiv.by_categories(cats, days or s.ingest_days, s.ingest_max_papers)
    return ingestor(services).run(f"arxiv:{','.join(cats)} ({trigger})", papers, progress)


def _iso(timestamp: float | None) -> str | None:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds") if timestamp else None


def run_summary(run: IngestRun) -> dict:
    return {"id": run.id, "source": run.source, "status": run.status, "started": _iso(run.started_at),
            "finished": _iso(run.finished_at), "seen": run.seen, "added": run.added, "updated": run.updated,
            "unchanged": run.unchanged, "skipped": run.skipped, "error": run.error}


def ingest_history(services: Services, limit: int = 20) -> list[dict]:
    Ingestor.reconcile(services.runs)
    return [run_summary(run) for run in services.runs.recent(limit)]


def next_scheduled(services: Services) -> datetime | None:
    """When the daily job fires next, from the same cron the app's scheduler uses."""
    if not services.settings.scheduler:
        return None
    from apscheduler.triggers.cron import CronTrigger

    trigger = CronTrigger.from_crontab(services.settings.ingest_cron, timezone="UTC")
    return trigger.get_next_fire_time(None, datetime.now(timezone.utc))


def status(services: Services, next_ingest: datetime | None = None) -> dict:
    Ingestor.reconcile(services.runs)
    runs = services.runs.recent(1)
    next_ingest = next_ingest or next_scheduled(services)
    return {
        "papers": services.store.count("paper"),
        "thoughts": services.store.count("thought"),
        "last_ingest": run_summary(runs[0]) if runs else None,
        "next_ingest": next_ingest.isoformat(timespec="seconds") if next_ingest else None,
        "ingest_running": Ingestor.busy(),
        "llm": services.llm_info(),
        "model": model_status(services),
        "cpu_kernels": services.cpu_kernels(),
        "embedder": services.embedder.name,
        "categories": services.settings.categories,
        "failures": failure_counts(services),
        "full_text": services.fulltext.counts(),
        "sentence_vectors": sentence_vector_problem(services),
    }


def sentence_vector_problem(services: Services) -> dict | None:
    """The sentence-vector file's latest failure (recorded by any process: the app's answers or the filler) that no
    complete fill has mended since: {"kind": corrupt | locked | unwritable | disk full | disk error | other,
    "at": ISO time, "reason"}; None when it is fine. Reading the file here is the check: a failure now is recorded."""
    filled = services.sentence_vectors.filled_at(services.embedder.name)
    latest = next((f for f in services.failures.counts() if f.kind == SENTENCE_FAILURE), None)
    if latest is None or (filled is not None and filled >= latest.last_at):
        return None
    kind = latest.last_reason.removeprefix(f"{SENTENCE_FILE} ").split(":", 1)[0]
    return {"kind": kind, "at": _iso(latest.last_at), "reason": latest.last_reason}


def model_status(services: Services) -> dict:
    """The language model in use: for the local backend its file, size, source and the llama.cpp build (and why
    it is not the model asked for, if it is not); for an endpoint its address and model name. Both with the
    speed measured over its last logged calls (None before any) and the model profile."""
    settings = services.settings
    info = services.llm_info()
    measured = LLMCallLog(services.db).speed(info["backend"], info["model"])
    common = {"measured_speed": measured.as_dict() if measured else None, "profile": services.model_profile.as_dict()}
    if settings.llm_backend == "openai":
        return {"endpoint": settings.openai_base_url or "https://api.openai.com/v1", "model": settings.llm_model,
                **common}
    from copilot.llm import cached_choice, llama_cpp_build

    choice = cached_choice(settings)
    if choice is None:
        return {"requested": settings.local_model, "note": "not fetched yet: it is fetched when the model is first "
                "loaded (or at start of the web app)", "llama_cpp": llama_cpp_build(), **common}
    return {"file": str(choice.path), "source": choice.source, "size_bytes": choice.size_bytes,
            "size": f"{choice.size_bytes / 1e6:,.0f} MB", "llama_cpp": llama_cpp_build(), "note": choice.note,
            "requested": settings.local_model, **common}


def failure_counts(services: Services) -> dict:
    """Failures the product worked around (logged where they happened), by kind: how many, the latest and why."""
    return {f.kind: {"count": f.count, "last": _iso(f.last_at), "last_reason": f.last_reason}
            for f in services.failures.counts()}


def backup_line(services: Services) -> str | None:
    """The Hub backup's state in one line for the Library tab (None when no backup repository is set)."""
    from copilot.features.backup import backup_status

    status = backup_status(services)
    if status is None:
        return None
    parts = [f"{status['repository']}, every {status['every_minutes']} min"]
    if status["last_ok"]:
        parts.append(f"last snapshot {status['last_ok']['at']} ({status['last_ok']['snapshot']})")
    else:
        parts.append("no snapshot yet")
    last = status["last"]
    if last and last["status"] == "failed":
        parts.append(f"last attempt {last['at']} failed: {last['error']}")
    if status["paused"]:
        parts.append(status["paused"])
    restored = status["restored"]
    if restored:
        parts.append(f"restored at start {restored['at']}: {restored['status']}"
                     + (f" ({restored['error']})" if restored["error"] else ""))
    return " · ".join(parts)
