"""Snapshots of the app's state in a Hugging Face dataset repository, and their log.

What leaves the machine is defined here and nothing else: a snapshot is one .tar.gz of exactly two files,
- `copilot.db`, copied through SQLite's online backup API (a consistent copy while the app writes, never a file
  copy of a live database), emptied of the visitors' uploaded documents (store.documents: private, never backed
  up), then vacuumed so no free page carries deleted rows;
- `vectors.sqlite3`, made fresh from the rows of the Chroma collections read through Chroma's API: per item its
  collection, id, document, metadata (JSON) and embedding (float32).
No index binary goes: Chroma's HNSW files are written from a `malloc`'d block at its whole capacity with only the
slots in use set, so their free capacity can carry whatever the process's heap held (a key, another user's text).
A restore rebuilds the collections from the rows, so the index is made anew on the restoring machine. No model goes
either (`models/` holds multi-GB GGUF and ONNX copies, fetched or made again where they are needed), nor the BM25
index (rebuilt from the papers on first use). Snapshots from before this (with `chroma/` and `models/`) still restore.
The repository holds `snapshots/<time>.tar.gz` (the newest KEEP) and `LATEST` naming the newest, both written in
one commit.
"""

from __future__ import annotations

import io
import json
import sqlite3
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from copilot.store.db import Database
from copilot.store.documents import empty_private_tables

KEEP = 3
LATEST = "LATEST"
FOLDER = "snapshots"
DB_FILE = "copilot.db"
CHROMA_DIR = "chroma"
MODELS_DIR = "models"          # accepted from older snapshots on restore; never written
VECTORS_FILE = "vectors.sqlite3"
ROWS_PER_READ = 500


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
            run_id = tx.execute("INSERT INTO hub_backups (kind, started_at, status) VALUES (?, ?, 'running')",
                                (kind, time.time())).lastrowid
            assert run_id is not None        # an INSERT into a rowid table always has one
            return run_id

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


def _rows(collection) -> Iterator[tuple[str, str | None, dict | None, np.ndarray]]:
    """Every item of a Chroma collection through its API: (id, document, metadata, embedding)."""
    offset = 0
    while True:
        page = collection.get(include=["documents", "metadatas", "embeddings"], limit=ROWS_PER_READ, offset=offset)
        if not page["ids"]:
            return
        yield from zip(page["ids"], page["documents"], page["metadatas"], page["embeddings"])
        offset += len(page["ids"])


def write_vector_rows(collections: dict[str, object], target: Path) -> int:
    """The collections' rows into a new SQLite file; returns how many."""
    out = sqlite3.connect(target)
    written = 0
    try:
        out.execute("CREATE TABLE rows (collection TEXT NOT NULL, id TEXT NOT NULL, document TEXT, metadata TEXT,"
                    " embedding BLOB NOT NULL, PRIMARY KEY (collection, id))")
        for name, collection in collections.items():
            for item_id, document, metadata, embedding in _rows(collection):
                out.execute("INSERT INTO rows VALUES (?,?,?,?,?)",
                            (name, item_id, document, json.dumps(metadata) if metadata else None,
                             np.asarray(embedding, dtype=np.float32).tobytes()))
                written += 1
        out.commit()
    finally:
        out.close()
    return written


def read_vector_rows(source: Path, collection: str) -> Iterator[list[tuple[str, str | None, dict | None, np.ndarray]]]:
    """A collection's rows from a snapshot's vectors file, ROWS_PER_READ at a time."""
    db = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        cursor = db.execute("SELECT id, document, metadata, embedding FROM rows WHERE collection = ? ORDER BY id",
                            (collection,))
        while batch := cursor.fetchmany(ROWS_PER_READ):
            yield [(row[0], row[1], json.loads(row[2]) if row[2] else None, np.frombuffer(row[3], dtype=np.float32))
                   for row in batch]
    finally:
        db.close()


def write_snapshot(data_dir: Path, archive: Path, collections: dict[str, object] | None = None) -> Path:
    """The data dir's state as a .tar.gz at `archive`: the app database and, given `collections` (name → Chroma
    collection; None with a Chroma server, which keeps its own data), their rows. Nothing else."""
    data_dir = Path(data_dir)
    with tempfile.TemporaryDirectory(prefix="copilot-snapshot-") as tmp:
        staging = Path(tmp)
        if not (data_dir / DB_FILE).is_file():
            raise BackupError(f"no {DB_FILE} in {data_dir}: nothing to back up")
        _copy_sqlite(data_dir / DB_FILE, staging / DB_FILE)
        vacuum = sqlite3.connect(staging / DB_FILE)
        try:
            vacuum.execute("PRAGMA journal_mode = DELETE")
            empty_private_tables(vacuum)        # a visitor's uploaded documents never leave the machine
            vacuum.execute("VACUUM")
        finally:
            vacuum.close()
        if collections:
            write_vector_rows(collections, staging / VECTORS_FILE)
        with tarfile.open(archive, "w:gz") as tar:
            for name in (DB_FILE, VECTORS_FILE):
                if (staging / name).is_file():
                    tar.add(staging / name, arcname=name)
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
            if member.name.split("/")[0] not in (DB_FILE, VECTORS_FILE, CHROMA_DIR, MODELS_DIR):
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
        operations: list[CommitOperationAdd | CommitOperationDelete] = [
            CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(archive)),
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
