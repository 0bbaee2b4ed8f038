"""Snapshots of the app's state in a Hugging Face dataset repository, and their log.

A snapshot is one .tar.gz: `copilot.db` copied through SQLite's online backup API (a consistent copy while the app
writes, never a file copy of a live database), the embedded Chroma directory — its `chroma.sqlite3` through the same
API, the index files beside it as they are on disk (Chroma replays what its SQLite log holds beyond them when it
opens) — and a distilled embedder under `models/` if there is one. The BM25 index is left out: it is rebuilt from
the papers on first use. The repository holds `snapshots/<time>.tar.gz` (the newest KEEP) and `LATEST` naming the
newest, both written in one commit.
"""

from __future__ import annotations

import io
import shutil
import sqlite3
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from copilot.store.db import Database

KEEP = 3
LATEST = "LATEST"
FOLDER = "snapshots"
DB_FILE = "copilot.db"
CHROMA_DIR = "chroma"
MODELS_DIR = "models"


class BackupError(RuntimeError):
    pass


@dataclass(frozen=True)
class BackupRun:
    id: int
    kind: str                  # "backup" | "restore"
    started_at: float
    finished_at: float | None
    status: str                # "running" | "ok" | "failed"
    snapshot: str | None
    size: int | None
    error: str | None


class BackupLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def start(self, kind: str) -> int:
        with self.db.transaction() as tx:
            return tx.execute("INSERT INTO hub_backups (kind, started_at, status) VALUES (?, ?, 'running')",
                              (kind, time.time())).lastrowid

    def finish(self, run_id: int, status: str, snapshot: str | None = None, size: int | None = None,
               error: str | None = None) -> None:
        self.db.execute("UPDATE hub_backups SET finished_at = ?, status = ?, snapshot = ?, size = ?, error = ?"
                        " WHERE id = ?", (time.time(), status, snapshot, size, error, run_id))

    def latest(self, kind: str | None = None) -> BackupRun | None:
        where, params = ("WHERE kind = ?", (kind,)) if kind else ("", ())
        row = self.db.query_one(f"SELECT id, kind, started_at, finished_at, status, snapshot, size, error"
                                f" FROM hub_backups {where} ORDER BY id DESC LIMIT 1", params)
        return BackupRun(**row) if row else None

    def latest_ok(self) -> BackupRun | None:
        row = self.db.query_one("SELECT id, kind, started_at, finished_at, status, snapshot, size, error"
                                " FROM hub_backups WHERE kind = 'backup' AND status = 'ok' ORDER BY id DESC LIMIT 1")
        return BackupRun(**row) if row else None


# --- the archive --------------------------------------------------------------------------------------------------
def _copy_sqlite(source: Path, target: Path) -> None:
    """A consistent copy of a live SQLite database (its online backup API)."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def write_snapshot(data_dir: Path, archive: Path, with_chroma: bool = True) -> Path:
    """The data dir's state as a .tar.gz at `archive`."""
    data_dir = Path(data_dir)
    with tempfile.TemporaryDirectory(prefix="copilot-snapshot-") as tmp:
        staging = Path(tmp)
        if not (data_dir / DB_FILE).is_file():
            raise BackupError(f"no {DB_FILE} in {data_dir}: nothing to back up")
        _copy_sqlite(data_dir / DB_FILE, staging / DB_FILE)
        chroma = data_dir / CHROMA_DIR
        if with_chroma and chroma.is_dir():
            for path in sorted(chroma.rglob("*")):
                target = staging / CHROMA_DIR / path.relative_to(chroma)
                if path.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                elif path.suffix == ".sqlite3":
                    target.parent.mkdir(parents=True, exist_ok=True)
                    _copy_sqlite(path, target)
                elif path.is_file() and not path.name.endswith(("-wal", "-shm", "-journal")):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target)
        if (data_dir / MODELS_DIR).is_dir():
            shutil.copytree(data_dir / MODELS_DIR, staging / MODELS_DIR)
        with tarfile.open(archive, "w:gz") as tar:
            for child in sorted(staging.iterdir()):
                tar.add(child, arcname=child.name)
    return archive


def extract_snapshot(archive: Path, data_dir: Path) -> None:
    """Unpack a snapshot into an empty data dir. Only regular files and folders under the dir are accepted."""
    data_dir = Path(data_dir)
    root = data_dir.resolve()
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        for member in members:
            target = (data_dir / member.name).resolve()
            if not (member.isfile() or member.isdir()) or not target.is_relative_to(root):
                raise BackupError(f"the snapshot holds an entry that is not allowed: {member.name[:100]!r}")
            if member.name.split("/")[0] not in (DB_FILE, CHROMA_DIR, MODELS_DIR):
                raise BackupError(f"the snapshot holds an unknown entry: {member.name[:100]!r}")
        data_dir.mkdir(parents=True, exist_ok=True)
        tar.extractall(data_dir, members=members, filter="data")


def data_dir_is_empty(data_dir: Path) -> bool:
    """A fresh start: no database and no Chroma directory yet."""
    data_dir = Path(data_dir)
    return not (data_dir / DB_FILE).exists() and not (data_dir / CHROMA_DIR).exists()


# --- the Hub repository ------------------------------------------------------------------------------------------
class HubSnapshots:
    """The snapshots of one dataset repository, through a `huggingface_hub.HfApi`-like client."""

    def __init__(self, api, repo_id: str) -> None:
        self.api = api
        self.repo_id = repo_id

    def upload(self, archive: Path, name: str) -> None:
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        self.api.create_repo(self.repo_id, repo_type="dataset", private=True, exist_ok=True)
        existing = sorted(f for f in self.api.list_repo_files(self.repo_id, repo_type="dataset")
                          if f.startswith(f"{FOLDER}/") and f.endswith(".tar.gz"))
        path = f"{FOLDER}/{name}"
        operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(archive)),
                      CommitOperationAdd(path_in_repo=LATEST, path_or_fileobj=io.BytesIO(path.encode()))]
        keep = [f for f in existing if f != path][-(KEEP - 1):] if KEEP > 1 else []
        operations += [CommitOperationDelete(path_in_repo=f) for f in existing if f != path and f not in keep]
        self.api.create_commit(self.repo_id, operations=operations, repo_type="dataset",
                               commit_message=f"Research Copilot snapshot {name}")

    def download_latest(self, folder: Path) -> tuple[Path, str] | None:
        """(the newest snapshot downloaded into `folder`, its name), or None when the repository has none."""
        files = self.api.list_repo_files(self.repo_id, repo_type="dataset")
        if LATEST not in files:
            return None
        pointer = Path(self.api.hf_hub_download(self.repo_id, LATEST, repo_type="dataset", local_dir=folder))
        name = pointer.read_text(encoding="utf-8").strip()
        if not name.startswith(f"{FOLDER}/") or name not in files:
            raise BackupError(f"the repository's {LATEST} names {name[:100]!r}, which it does not hold")
        return Path(self.api.hf_hub_download(self.repo_id, name, repo_type="dataset", local_dir=folder)), name
