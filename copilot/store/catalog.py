"""The papers' filterable facts (date, categories, authors) held in memory, for search filters.

Chroma filters metadata by equality and ranges but cannot test "one of this paper's categories" or "one of its
authors" on our string fields, and reading all metadata takes about 3 s at 14,000 papers. So the catalog reads it
once and again only when the number of stored papers changed (ingestion here or in another process).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from copilot.store.vectors import VectorStore

PAGE = 2000


@dataclass(frozen=True)
class CatalogRow:
    id: str
    date: int                      # date number, e.g. 20250318
    categories: tuple[str, ...]    # primary first
    authors: tuple[str, ...]


class PaperCatalog:
    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._rows: list[CatalogRow] = []
        self._count = -1

    def rows(self) -> list[CatalogRow]:
        count = self.store.count("paper")
        with self._lock:
            if count != self._count:
                self._rows, self._count = self._read_all(), count
            return self._rows

    def _read_all(self) -> list[CatalogRow]:
        rows, offset = [], 0
        while True:
            page = self.store.paper_metadata_page(offset, PAGE)
            rows += [CatalogRow(pid, int(meta.get("date", 0)), tuple(str(meta.get("categories", "")).split()),
                                tuple(a.strip() for a in str(meta.get("authors", "")).split(";") if a.strip()))
                     for pid, meta in page]
            if len(page) < PAGE:
                return rows
            offset += PAGE
