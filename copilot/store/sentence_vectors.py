"""The embeddings of abstracts' sentences, kept on disk so an answer looks them up instead of embedding them.

An evidence table scores every candidate sentence of ~12 abstracts against the question; embedding them costs about
a second of CPU per answer, which on 2 cores made 20 users asking at once wait half a minute (issue #41 item 7).
The vectors are derived data: keyed by (embedder name, hash of the sentence's text), so a changed abstract or another
embedder simply misses; kept in their own file (`sentence-vectors.sqlite3`) outside what a backup uploads, and
rebuilt by use or by `python -m copilot sentences`.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

FILE_NAME = "sentence-vectors.sqlite3"
_CHUNK = 500                  # keys per SELECT (SQLite's variable limit is 32,766; smaller keeps each query quick)


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class SentenceVectors:
    """Vectors by (model, sentence text). Readers and one writer at a time, across threads and processes (WAL)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connection().executescript(
            # a rowid table: a 1.5 KB vector fits in its page (WITHOUT ROWID spilled each to an overflow page, 3x)
            "CREATE TABLE IF NOT EXISTS sentence_vectors (model TEXT NOT NULL, key BLOB NOT NULL, vector BLOB NOT NULL,"
            " PRIMARY KEY (model, key));"
            "CREATE TABLE IF NOT EXISTS papers_done (model TEXT NOT NULL, paper_id TEXT NOT NULL,"
            " content_key BLOB NOT NULL, PRIMARY KEY (model, paper_id)) WITHOUT ROWID;")

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    def get(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those `texts` that have one."""
        by_key = {text_key(t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        keys = list(by_key)
        conn = self._connection()
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start:start + _CHUNK]
            rows = conn.execute(f"SELECT key, vector FROM sentence_vectors WHERE model = ? AND key IN"
                                f" ({','.join('?' * len(chunk))})", (model, *chunk))
            for key, blob in rows:
                found[by_key[key]] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, model: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [(model, text_key(t), np.asarray(v, dtype=np.float32).tobytes()) for t, v in zip(texts, vectors)]
        if rows:
            conn = self._connection()
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT OR REPLACE INTO sentence_vectors (model, key, vector) VALUES (?,?,?)", rows)

    def papers_done(self, model: str, papers: Iterable[tuple[str, str]]) -> set[str]:
        """Of (paper id, content) pairs, the ids whose sentences were all stored for this very content (the caller
        decides what content means: the sentences it embeds)."""
        wanted = {pid: text_key(content) for pid, content in papers}
        ids = list(wanted)
        done: set[str] = set()
        conn = self._connection()
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            rows = conn.execute(f"SELECT paper_id, content_key FROM papers_done WHERE model = ? AND paper_id IN"
                                f" ({','.join('?' * len(chunk))})", (model, *chunk))
            done.update(pid for pid, key in rows if wanted.get(pid) == key)
        return done

    def mark_done(self, model: str, papers: Iterable[tuple[str, str]]) -> None:
        rows = [(model, pid, text_key(content)) for pid, content in papers]
        if rows:
            conn = self._connection()
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT OR REPLACE INTO papers_done (model, paper_id, content_key) VALUES (?,?,?)",
                                 rows)

    def count(self, model: str) -> int:
        return int(self._connection().execute("SELECT COUNT(*) FROM sentence_vectors WHERE model = ?",
                                              (model,)).fetchone()[0])
