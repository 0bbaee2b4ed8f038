"""Chroma collections `papers` and `thoughts`, embedded under the data dir or on a Chroma server.

We pass our own embeddings (no Chroma embedding function), cosine space, so distance = 1 - cosine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from copilot.config import Settings
from copilot.records import Evidence, Paper

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

PAPERS = "papers"
THOUGHTS = "thoughts"
HNSW: dict[str, str | int] = {"space": "cosine", "ef_construction": 200, "ef_search": 100, "max_neighbors": 32}


class VectorStoreError(RuntimeError):
    pass


def chroma_client(settings: Settings):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if settings.chroma_host:
        try:
            return chromadb.HttpClient(host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings)
        except Exception as error:
            raise VectorStoreError(f"cannot reach the Chroma server at {settings.chroma_host}:{settings.chroma_port}"
                                   f" ({error}); start it or unset COPILOT_CHROMA_HOST") from None
    settings.chroma_path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(settings.chroma_path), settings=chroma_settings)


def reopened_client(settings: Settings):
    """A new embedded client that reads the collections as they are on disk now. An embedded client keeps its
    search index in memory, so papers another process added are counted but not found until it is reopened."""
    from chromadb.api.client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    return chroma_client(settings)


class VectorStore:
    def __init__(self, client, reopen: Callable[[], ClientAPI] | None = None,
                 others_version: Callable[[], object] | None = None) -> None:
        """`others_version` tells what other processes have written (it changes when they add papers); when it
        changed since the last search, `reopen` gives a client that sees their papers."""
        self.client = client
        self.papers = self._collection(PAPERS)
        self.thoughts = self._collection(THOUGHTS)
        self._reopen = reopen
        self._others_version = others_version
        self._seen_version = others_version() if others_version else None
        self._lock = threading.Lock()

    def _see_other_writers(self, force: bool = False) -> None:
        if self._others_version is None or self._reopen is None:
            return
        version = self._others_version()
        if version == self._seen_version and not force:
            return
        with self._lock:
            if version != self._seen_version or force:
                client = self._reopen()
                self.papers, self.thoughts = (client.get_collection(PAPERS), client.get_collection(THOUGHTS))
                self.client, self._seen_version = client, version

    def _read(self, read: Callable[[], object]):
        """Every read first looks for other writers. An embedded client whose in-memory index lags the files (another
        process wrote between our check and the read) raises "Error finding id": reopen once and read again (issue
        #20: Trends broke after a CLI import until a restart)."""
        self._see_other_writers()
        try:
            return read()
        except Exception as error:          # noqa: BLE001 - Chroma raises a bare InternalError here
            if self._reopen is None or "finding id" not in str(error):
                raise
            self._see_other_writers(force=True)
            return read()

    def _collection(self, name: str):
        return self.client.get_or_create_collection(name=name, embedding_function=None,
                                                    configuration={"hnsw": dict(HNSW)})

    def collection(self, kind: str):
        return {"paper": self.papers, "thought": self.thoughts}[kind]

    # --- papers
    def paper_versions(self, ids: Sequence[str]) -> dict[str, tuple[int, int, str]]:
        """Existing (version, updated date number, document) per stored id."""
        if not ids:
            return {}
        found = self._read(lambda: self.papers.get(ids=list(ids), include=["metadatas", "documents"]))
        return {pid: (int(meta.get("version", 1)), int(meta.get("updated", 0)), doc)
                for pid, meta, doc in zip(found["ids"], found["metadatas"], found["documents"])}

    def upsert_papers(self, papers: Sequence[Paper], embeddings: np.ndarray) -> None:
        if not papers:
            return
        now = int(time.time())       # when this version arrived here: the "For you" feed lists what is new
        self.papers.upsert(ids=[p.id for p in papers], embeddings=np.asarray(embeddings, dtype=np.float32),
                           documents=[p.document for p in papers],
                           metadatas=[{**p.metadata(), "ingested": now} for p in papers])

    def get_papers(self, ids: Sequence[str]) -> list[Paper]:
        if not ids:
            return []
        found = self._read(lambda: self.papers.get(ids=list(ids), include=["metadatas", "documents"]))
        by_id = {pid: Paper.from_store(pid, doc, meta)
                 for pid, doc, meta in zip(found["ids"], found["documents"], found["metadatas"])}
        return [by_id[pid] for pid in ids if pid in by_id]

    def existing_papers(self, ids: Sequence[str], chunk: int = 500) -> set[str]:
        """Those of `ids` that are stored (looked up `chunk` at a time)."""
        present: set[str] = set()
        for start in range(0, len(ids), chunk):
            part = list(ids[start:start + chunk])
            present |= set(self._read(lambda: self.papers.get(ids=part, include=[]))["ids"])  # noqa: B023 - called here
        return present

    def paper_embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        found = self._read(lambda: self.papers.get(ids=list(ids), include=["embeddings"]))
        return {pid: np.asarray(vec, dtype=np.float32) for pid, vec in zip(found["ids"], found["embeddings"])}

    def papers_between(self, start: int, end: int, categories: Sequence[str] | None = None,
                       limit: int | None = None) -> list[Paper]:
        """Papers whose date number lies in [start, end], optionally of the given primary categories."""
        where: dict = {"$and": [{"date": {"$gte": start}}, {"date": {"$lte": end}}]}
        if categories:
            where["$and"].append({"primary_category": {"$in": list(categories)}})
        found = self._read(lambda: self.papers.get(where=where, include=["metadatas", "documents"], limit=limit))
        return [Paper.from_store(pid, doc, meta)
                for pid, doc, meta in zip(found["ids"], found["documents"], found["metadatas"])]

    def paper_metadata_page(self, offset: int, limit: int) -> list[tuple[str, dict]]:
        """(id, metadata) of up to `limit` stored papers from `offset`, in the store's order (for full scans)."""
        found = self._read(lambda: self.papers.get(include=["metadatas"], limit=limit, offset=offset))
        return [(pid, meta or {}) for pid, meta in zip(found["ids"], found["metadatas"])]

    # --- both collections
    def search(self, kind: str, embedding: np.ndarray, k: int, where: dict | None = None,
               ids: Sequence[str] | None = None) -> list[Evidence]:
        """The `k` nearest items, optionally only among `ids`."""
        def query():
            count = k if ids is None else min(k, len(ids))   # Chroma returns fewer when fewer are stored
            if count <= 0:
                return None
            return self.collection(kind).query(
                query_embeddings=[np.asarray(embedding, dtype=np.float32)], n_results=count, where=where,
                ids=list(ids) if ids is not None else None, include=["documents", "metadatas", "distances"])

        result = self._read(query)
        if result is None:
            return []
        return [_evidence(kind, item_id, doc, meta, 1.0 - float(dist)) for item_id, doc, meta, dist
                in zip(result["ids"][0], result["documents"][0], result["metadatas"][0], result["distances"][0])]

    def nearest(self, kind: str, embedding: np.ndarray, k: int, where: dict | None = None) -> list[tuple[str, float]]:
        """(id, cosine) of the `k` nearest items, best first, without their documents: a merge of several
        collections then fetches only the items it keeps (`fetch`)."""
        if k <= 0:
            return []
        result = self._read(lambda: self.collection(kind).query(
            query_embeddings=[np.asarray(embedding, dtype=np.float32)], n_results=k, where=where,
            include=["distances"]))
        return [(item_id, 1.0 - float(dist)) for item_id, dist in zip(result["ids"][0], result["distances"][0])]

    def fetch(self, kind: str, hits: Sequence[tuple[str, float]]) -> list[Evidence]:
        """The items of `hits` (from `nearest`) with their documents and metadata, in the order given; one read.
        An item deleted in between is left out."""
        if not hits:
            return []
        found = self._read(lambda: self.collection(kind).get(ids=[item_id for item_id, _ in hits],
                                                             include=["documents", "metadatas"]))
        stored = {item_id: (doc, meta) for item_id, doc, meta in zip(found["ids"], found["documents"],
                                                                      found["metadatas"])}
        return [_evidence(kind, item_id, *stored[item_id], score) for item_id, score in hits if item_id in stored]

    def count(self, kind: str = "paper") -> int:
        return self._read(lambda: self.collection(kind).count())

    def date_range(self) -> tuple[int, int] | None:
        """Smallest and largest paper date number, or None when the store is empty (scans metadata)."""
        found = self._read(lambda: self.papers.get(include=["metadatas"]))
        dates = [int(m["date"]) for m in found["metadatas"] if m and "date" in m]
        return (min(dates), max(dates)) if dates else None


def _evidence(kind: str, item_id: str, doc: str | None, meta: dict | None, score: float) -> Evidence:
    """A thought has no title: the question it was made for is its author's alone (the Memory tab shows it to them
    only), so it is neither its title nor in its metadata here — whoever retrieves the thought sees its text."""
    meta = dict(meta or {})
    if kind != "paper":
        meta.pop("question", None)
    title = str(meta.get("title", "")) if kind == "paper" else ""
    return Evidence(id=item_id, kind=kind, title=title, text=doc or "", score=score, metadata=meta)
