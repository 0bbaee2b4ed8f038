"""The lexical (BM25) index of the papers: the one owner of the files under `<data dir>/lexical/`.

Built from the paper store (title + abstract, English stop words out, Snowball-stemmed) by `bm25s`, saved to a
directory of its own, and named current by a small pointer file that is replaced atomically, so a reader in
another process never sees a half-written index. The ingestion rebuilds it after every write; a search that finds
the index behind the store (another paper count) rebuilds it first, and a search that finds the pointer moved (a
rebuild by another process) reloads it. `check` compares it paper by paper with the store (`doctor`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from copilot.store.vectors import VectorStore

log = logging.getLogger(__name__)

POINTER = "current"
IDS_FILE = "ids.json"
STOP_WORDS = "en"
READ_CHUNK = 5000


def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Lower-cased word tokens without English stop words, stemmed: what the index and its queries are made of."""
    import bm25s

    return bm25s.tokenize(list(texts), stopwords=STOP_WORDS, stemmer=_stemmer(), return_ids=False,
                          show_progress=False)


class Bm25:
    """BM25 over a fixed set of documents, in memory."""

    def __init__(self, ids: Sequence[str], documents: Sequence[str] | None = None, retriever=None) -> None:
        import bm25s

        self.ids = list(ids)
        self._position = {item: i for i, item in enumerate(self.ids)}
        if retriever is None and self.ids:
            retriever = bm25s.BM25()
            retriever.index(tokenize(documents or []), show_progress=False)
        self.retriever = retriever

    def scores(self, text: str) -> np.ndarray:
        """The BM25 score of every document for `text`, in `ids` order (all 0 when no word of it is indexed)."""
        tokens = tokenize([text])[0] if text.strip() else []
        if self.retriever is None or not tokens:
            return np.zeros(len(self.ids))
        return np.asarray(self.retriever.get_scores(tokens), dtype=np.float64)

    def scores_of(self, text: str, candidates: Sequence[str]) -> np.ndarray:
        """The scores of `candidates` (all indexed) for `text`, in their order."""
        scores = self.scores(text)
        return np.array([scores[self._position[c]] for c in candidates], dtype=np.float64)

    def rank(self, text: str, candidates: Sequence[str]) -> list[str]:
        """`candidates` (all indexed) by score for `text`, best first; ties keep the candidates' order."""
        values = self.scores_of(text, candidates)
        return [candidates[i] for i in np.argsort(-values, kind="stable")]

    def search(self, text: str, k: int, exclude: Sequence[str] = ()) -> list[tuple[str, float]]:
        """The `k` documents with the highest score for `text` (those sharing none of its words are left out),
        best first, ties in index order."""
        scores = self.scores(text)
        skip = {self._position[item] for item in exclude if item in self._position}
        found: list[tuple[str, float]] = []
        for i in np.argsort(-scores, kind="stable"):
            if scores[i] <= 0 or len(found) >= k:
                break
            if int(i) not in skip:
                found.append((self.ids[int(i)], float(scores[i])))
        return found


@dataclass
class LexicalCheck:
    in_step: bool
    indexed: int
    stored: int
    missing: int            # stored papers the index lacks
    extra: int              # indexed papers the store no longer has

    def as_dict(self) -> dict:
        return {"in_step": self.in_step, "indexed": self.indexed, "stored": self.stored,
                "missing": self.missing, "extra": self.extra}


class LexicalIndex:
    def __init__(self, root: Path, store: VectorStore) -> None:
        self.root = Path(root)
        self.store = store
        self._lock = threading.Lock()
        self._loaded: tuple[str, Bm25] | None = None       # (directory name, its index)

    # --- building
    def _stored_papers(self, with_documents: bool = True) -> tuple[list[str], list[str]]:
        ids, offset = [], 0
        documents: list[str] = []
        while True:
            found = self.store.papers.get(include=["documents"] if with_documents else [], limit=READ_CHUNK,
                                          offset=offset)
            ids.extend(found["ids"])
            if with_documents:
                documents.extend(doc or "" for doc in found["documents"])
            if len(found["ids"]) < READ_CHUNK:
                return ids, documents
            offset += READ_CHUNK

    def rebuild(self) -> int:
        """Index every stored paper anew; returns how many. The previous index stays in use until this one is
        complete."""
        with self._lock:
            started = time.monotonic()
            ids, documents = self._stored_papers()
            name = f"papers-{time.time_ns()}-{os.getpid()}"
            target = self.root / name
            target.mkdir(parents=True)
            index = Bm25(ids, documents)
            if index.retriever is not None:
                index.retriever.save(str(target))
            (target / IDS_FILE).write_text(json.dumps(ids), encoding="utf-8")
            pointer = self.root / POINTER
            tmp = self.root / f"{POINTER}.{os.getpid()}.tmp"
            tmp.write_text(name, encoding="utf-8")
            os.replace(tmp, pointer)
            self._loaded = None
            self._remove_old(keep=name)
            log.info("lexical index: %d papers in %.2f s", len(ids), time.monotonic() - started)
            return len(ids)

    def _remove_old(self, keep: str) -> None:
        for path in self.root.glob("papers-*"):
            if path.name != keep and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)

    # --- reading
    def _current_name(self) -> str | None:
        pointer = self.root / POINTER
        try:
            return pointer.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None

    def _load(self) -> Bm25:
        import bm25s

        name = self._current_name()
        if name is None:
            return Bm25([])
        if self._loaded is None or self._loaded[0] != name:
            directory = self.root / name
            try:
                ids = json.loads((directory / IDS_FILE).read_text(encoding="utf-8"))
                retriever = bm25s.BM25.load(str(directory)) if ids else None
            except FileNotFoundError:          # replaced and removed by another process between the two reads
                return Bm25([])
            self._loaded = (name, Bm25(ids, retriever=retriever))
        return self._loaded[1]

    def indexed_ids(self) -> list[str]:
        with self._lock:
            return list(self._load().ids)

    def _fresh(self) -> Bm25:
        with self._lock:
            index = self._load()
            if self._current_name() is not None and len(index.ids) == self.store.count("paper"):
                return index
        self.rebuild()
        with self._lock:
            return self._load()

    def search(self, text: str, k: int, exclude: Sequence[str] = ()) -> list[tuple[str, float]]:
        """The `k` stored papers with the highest BM25 score for `text`, best first (Bm25.search)."""
        return self._fresh().search(text, k, exclude)

    def check(self) -> LexicalCheck:
        """The index against the store, paper by paper (reads every stored id)."""
        stored, _ = self._stored_papers(with_documents=False)
        indexed = set(self.indexed_ids())
        missing, extra = len(set(stored) - indexed), len(indexed - set(stored))
        in_step = self._current_name() is not None and not missing and not extra
        return LexicalCheck(in_step, len(indexed), len(stored), missing, extra)
