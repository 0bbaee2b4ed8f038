"""The papers' filterable facts (date, categories, authors, when stored, title) held in memory, for search filters,
the feed and the names a question gives a paper.

Chroma filters metadata by equality and ranges but cannot test "one of this paper's categories" or "one of its
authors" on our string fields, and reading all metadata takes about 3 s at 14,000 papers. So the catalog reads it
once and again only when the number of stored papers or the ingestion runs' progress changed (ingestion here or in
another process).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from copilot.store.vectors import VectorStore

PAGE = 2000


@dataclass(frozen=True)
class CatalogRow:
    id: str
    date: int                      # date number, e.g. 20250318
    categories: tuple[str, ...]    # primary first
    authors: tuple[str, ...]
    ingested: int                  # unix time this version was stored (0: stored before this was recorded)
    title: str = ""                # as stored (for the names a question may give a paper by: features.named_papers)


class PaperCatalog:
    def __init__(self, store: VectorStore, writes: Callable[[], object] = tuple) -> None:
        """`writes` tells how far ingestion has written (it changes when papers are added or replaced)."""
        self.store = store
        self._writes = writes
        self._lock = threading.Lock()
        self._rows: list[CatalogRow] = []
        self._seen: tuple = ()

    def rows(self) -> list[CatalogRow]:
        seen = (self.store.count("paper"), self._writes())
        with self._lock:
            if seen != self._seen:
                self._rows, self._seen = self._read_all(), seen
            return self._rows

    def _read_all(self) -> list[CatalogRow]:
        rows, offset = [], 0
        while True:
            page = self.store.paper_metadata_page(offset, PAGE)
            rows += [CatalogRow(pid, int(meta.get("date", 0)), tuple(str(meta.get("categories", "")).split()),
                                tuple(a.strip() for a in str(meta.get("authors", "")).split(";") if a.strip()),
                                int(meta.get("ingested", 0)), str(meta.get("title", "")))
                     for pid, meta in page]
            if len(page) < PAGE:
                return rows
            offset += PAGE
