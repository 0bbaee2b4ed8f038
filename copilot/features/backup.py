"""Nothing lost on a free Space: the app's state backed up to a Hugging Face dataset and restored from it.

With COPILOT_HUB_BACKUP=<user>/<dataset> and a write token (HF_TOKEN), the app snapshots its state every
COPILOT_HUB_BACKUP_MINUTES and after each ingestion, and restores the newest snapshot at start when its data dir is
empty. What can be lost is what changed after the last snapshot: at most the interval (15 minutes by default). The
Hub being down or the token wrong never stops the app: the failure is logged and shown on the Library tab. Every
backup and restore has a deadline for the whole call (COPILOT_HUB_TIMEOUT), upload or download included.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as DeadlineExceeded
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from copilot.config import Settings, hub_requests_allowed
from copilot.errors import UserError
from copilot.ingest import Ingestor
from copilot.secrets import mask_secret
from copilot.services import Services
from copilot.store.backup import (
    VECTORS_FILE,
    BackupError,
    BackupLog,
    HubSnapshots,
    data_dir_is_empty,
    extract_snapshot,
    read_vector_rows,
    write_snapshot,
)
from copilot.store.db import Database
from copilot.store.vectors import PAPERS, THOUGHTS, VectorStore, reopened_client

log = logging.getLogger(__name__)
_one_at_a_time = threading.Lock()
# Set when the start-up restore failed: this process began empty although the repository may hold snapshots, so its
# scheduled backups would make an empty state the newest snapshot. They wait until someone restores or backs up by
# hand (`python -m copilot restore --force` / `backup`).
_scheduled_paused: list[str] = []
PAUSE_INGESTION_S = 120.0       # how long a backup waits for a running ingestion before copying the stores
RESTORE_PENDING = "restore-pending"     # in the data dir while a restore has not finished


def hub_api(settings: Settings):
    from huggingface_hub import HfApi

    token = settings.hub_token.get_secret_value() if settings.hub_token else None
    return HfApi(endpoint=settings.hub_endpoint or None, token=token)


def _configured(settings: Settings) -> str:
    """The backup repository; UserError when none is set."""
    if not settings.hub_backup:
        raise UserError("no backup repository: set COPILOT_HUB_BACKUP=<user>/<dataset> and a write token in HF_TOKEN")
    return settings.hub_backup


def _with_hub_requests(work):
    with hub_requests_allowed():     # a backup or push the user configured: sent despite the offline default
        return work()


def _within_deadline(settings: Settings, work, after_late=None):
    """Run `work()` with a deadline for the whole of it; the worker is left to finish in the background, and
    `after_late()` runs when it does (a late download still writes its files: they are removed then)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-transfer")
    future = pool.submit(_with_hub_requests, work)
    pool.shutdown(wait=False)
    try:
        return future.result(timeout=settings.hub_timeout)
    except DeadlineExceeded:
        if after_late is not None:
            future.add_done_callback(lambda _: after_late())
        raise BackupError(f"the Hub did not finish within {settings.hub_timeout:g} s") from None


def _reason(settings: Settings, error: BaseException) -> str:
    token = settings.hub_token.get_secret_value() if settings.hub_token else None
    return mask_secret(f"{type(error).__name__}: {error}", token)[:500]


def backup_now(services: Services, api=None) -> dict:
    """One snapshot to the Hub, recorded in the backup log. Raises UserError when not configured or when another
    backup is running; a Hub failure is recorded and returned, not raised."""
    settings = services.settings
    repository = _configured(settings)
    if not _one_at_a_time.acquire(blocking=False):
        raise UserError("a backup is already running")
    run_id = services.backups.start("backup")
    try:
        name = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + ".tar.gz"
        with tempfile.TemporaryDirectory(prefix="copilot-backup-") as tmp:
            archive = Path(tmp) / name
            with Ingestor.paused(PAUSE_INGESTION_S):
                collections = None if settings.chroma_host else {
                    name: services.store.collection(kind) for name, kind in ((PAPERS, "paper"), (THOUGHTS, "thought"))}
                write_snapshot(settings.data_dir, archive, collections)
            size = archive.stat().st_size
            snapshots = HubSnapshots(api or hub_api(settings), repository)
            _within_deadline(settings, lambda: snapshots.upload(archive, name))
        services.backups.finish(run_id, "ok", snapshot=name, size=size)
        (settings.data_dir / RESTORE_PENDING).unlink(missing_ok=True)     # this state is the one to keep now
        return {"status": "ok", "snapshot": name, "size": size, "repository": settings.hub_backup}
    except Exception as error:      # noqa: BLE001 - the app keeps serving; the Library tab shows the error
        reason = _reason(settings, error)
        log.warning("backup to the Hub failed: %s", reason)
        services.backups.finish(run_id, "failed", error=reason)
        return {"status": "failed", "error": reason, "repository": settings.hub_backup}
    finally:
        _one_at_a_time.release()


def restore(settings: Settings, force: bool = False, api=None) -> dict:
    """The newest snapshot into the data dir, which must be empty unless `force` (then it is moved aside first).
    Recorded in the backup log of the restored database."""
    repository = _configured(settings)
    data_dir = Path(settings.data_dir)
    if not data_dir_is_empty(data_dir):
        if not (force or restore_pending(data_dir)):
            raise UserError(f"{data_dir} already holds data; restore refuses to overwrite it (use --force to move it "
                            "aside first)")
        aside = data_dir.with_name(f"{data_dir.name}.before-restore-{datetime.now():%Y%m%d%H%M%S}")
        data_dir.rename(aside)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / RESTORE_PENDING).write_text("a restore began and has not finished; the next start tries it again\n",
                                            encoding="utf-8")
    snapshots = HubSnapshots(api or hub_api(settings), repository)
    tmp = Path(tempfile.mkdtemp(prefix="copilot-restore-"))
    result: dict[str, Any]
    try:
        found = _within_deadline(settings, lambda: snapshots.download_latest(tmp),
                                 after_late=lambda: shutil.rmtree(tmp, ignore_errors=True))
        if found is None:
            result = {"status": "empty", "repository": settings.hub_backup,
                      "message": "the repository holds no snapshot yet"}
        else:
            archive, name = found
            extract_snapshot(archive, data_dir)
            rebuilt = rebuild_vectors(settings)
            result = {"status": "ok", "snapshot": name, "repository": settings.hub_backup, **rebuilt}
    except Exception as error:      # noqa: BLE001 - reported; at start-up the app then starts empty
        result = {"status": "failed", "error": _reason(settings, error), "repository": settings.hub_backup}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if result["status"] != "failed":
        (data_dir / RESTORE_PENDING).unlink(missing_ok=True)
    log_run = BackupLog(Database(settings.db_path))
    run_id = log_run.start("restore")
    log_run.finish(run_id, result["status"] if result["status"] != "empty" else "ok",
                   snapshot=result.get("snapshot"), error=result.get("error") or result.get("message"))
    return result


def restore_pending(data_dir: Path) -> bool:
    """Whether a restore into `data_dir` began and did not finish (a half-unpacked snapshot, the Hub gone midway):
    the next start restores again, instead of taking what is there for the app's own data."""
    return (Path(data_dir) / RESTORE_PENDING).exists()


def rebuild_vectors(settings: Settings) -> dict:
    """After a snapshot is unpacked: the Chroma collections made anew from its rows (the file then goes). A snapshot
    from before rows were kept carries the Chroma folder itself, and this does nothing."""
    rows = Path(settings.data_dir) / VECTORS_FILE
    if not rows.is_file():
        return {}
    store = VectorStore(reopened_client(settings))     # not a client of a data dir moved aside in this process
    counts = {}
    for name, kind in ((PAPERS, "paper"), (THOUGHTS, "thought")):
        counts[name] = 0
        for batch in read_vector_rows(rows, name):
            store.collection(kind).upsert(ids=[r[0] for r in batch], documents=[r[1] for r in batch],
                                          metadatas=[r[2] for r in batch], embeddings=np.stack([r[3] for r in batch]))
            counts[name] += len(batch)
    rows.unlink()
    return {"rebuilt": counts}


def restore_at_start(settings: Settings, api=None) -> dict | None:
    """At start-up: the newest snapshot when a backup repository is set and the data dir is empty or an earlier
    restore did not finish (what it left, and what the app wrote since, is moved aside), else None."""
    data_dir = Path(settings.data_dir)
    if not settings.hub_backup or not (data_dir_is_empty(data_dir) or restore_pending(data_dir)):
        return None
    result = restore(settings, api=api)
    log.warning("restore from %s at start: %s", settings.hub_backup, result)
    if result["status"] == "failed":
        _scheduled_paused[:] = [f"the restore at start failed ({result['error']}); scheduled backups are paused so "
                                "they do not replace your snapshots with this empty start — run `python -m copilot "
                                "restore --force` (or `backup`, to keep this state) by hand"]
    return result


def backup_status(services: Services) -> dict | None:
    """For the Library tab: the backup repository, the last backup and the last successful one (None: not set)."""
    settings = services.settings
    if not settings.hub_backup:
        return None
    last, last_ok, restored = (services.backups.latest("backup"), services.backups.latest_ok(),
                               services.backups.latest("restore"))

    def when(run):
        return datetime.fromtimestamp(run.finished_at or run.started_at, timezone.utc).isoformat(timespec="seconds")

    return {"repository": settings.hub_backup, "every_minutes": settings.hub_backup_minutes,
            "paused": _scheduled_paused[0] if _scheduled_paused else None,
            "last": {"at": when(last), "status": last.status, "error": last.error} if last else None,
            "last_ok": {"at": when(last_ok), "snapshot": last_ok.snapshot, "size": last_ok.size} if last_ok else None,
            "restored": {"at": when(restored), "status": restored.status, "snapshot": restored.snapshot,
                         "error": restored.error} if restored else None}


def scheduled_backup(services: Services) -> None:
    """The periodic job: a backup unless one is running or the start-up restore failed (its outcome is in the log
    the Library tab shows)."""
    if _scheduled_paused:
        log.warning("scheduled backup skipped: %s", _scheduled_paused[0])
        return
    try:
        backup_now(services)
    except UserError as error:
        log.info("scheduled backup skipped: %s", error)
