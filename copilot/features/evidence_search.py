"""Chat's paper retrieval for the evidence table: the way Search ranks (meaning and words fused), with the filters
a question implies ("recent", a year, an arXiv category), and each paper's cosine to the question kept for the
relevance floor (features.answers, methods.evidence).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np

from copilot.errors import UserError
from copilot.features.named_papers import named_papers
from copilot.features.search import MAX_QUERY_CHARS, search_papers
from copilot.records import number_to_date
from copilot.services import Services

log = logging.getLogger(__name__)
RECENT_DAYS = 365          # "recent" / "latest": the library's last year
FILTERED_FLOOR = 0.40      # the filtered papers' best cosine must reach the table's floor (evidence.ROW_FLOOR)
_RECENT = re.compile(r"\b(?:recent(?:ly)?|latest|newest|lately|nowadays|these days|current(?:ly)?)\b", re.I)
_YEAR = re.compile(r"\b(?P<since>since|after|from)?\s*(?P<year>20[0-3]\d)\b", re.I)
_CATEGORY = re.compile(r"\b(?P<cat>(?:cs|stat|math|eess|q-bio|q-fin|physics|astro-ph|cond-mat)\.[A-Za-z]{2})\b")


@dataclass
class Filters:
    date_from: date | None = None
    date_to: date | None = None
    categories: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.date_from or self.date_to or self.categories)


def implied_filters(question: str, newest: date | None) -> Filters:
    """The filters a question states: "recent" → the library's last RECENT_DAYS, "in 2025" → that year, "since
    2025" → from then on, "cs.CL" → that category."""
    found = Filters(categories=[m.group("cat")[:-2].lower() + m.group("cat")[-2:].upper()
                                for m in _CATEGORY.finditer(question)])
    year = _YEAR.search(question)
    if year:
        first = date(int(year.group("year")), 1, 1)
        found.date_from = first
        found.date_to = None if year.group("since") else date(first.year, 12, 31)
    elif _RECENT.search(question) and newest:
        found.date_from = newest - timedelta(days=RECENT_DAYS)
    return found


def _newest(services: Services) -> date | None:
    rows = services.catalog.rows()
    return number_to_date(max(row.date for row in rows)) if rows else None


def table_paper_hits(services: Services, question: str, embedding: np.ndarray, k: int) -> list[tuple[str, float]]:
    """(paper id, cosine to the question) of the `k` papers Search ranks first for the question, fused order,
    within the filters it implies; without them when they leave nothing, or nothing whose cosine reaches
    `FILTERED_FLOOR` ("How do recent methods improve 3D Gaussian Splatting?" names no date: when the library's
    last year holds no such paper, the older ones answer it)."""
    query = " ".join(question.split())[:MAX_QUERY_CHARS]
    filters = implied_filters(query, _newest(services))
    named = _named(services, question, embedding)
    scored: list[tuple[str, float]] = []
    for chosen in ((filters, Filters()) if filters.any else (Filters(),)):
        scored = _fused_hits(services, query, embedding, k, chosen, named)
        found = [score for pid, score in scored if pid not in named]      # a named paper is there whatever its cosine
        if found and (not chosen.any or max(found) >= FILTERED_FLOOR):
            break
    return scored


def _named(services: Services, question: str, embedding: np.ndarray) -> tuple[str, ...]:
    """The papers the whole question names (an id may follow a long paste that Search's query cuts off); a name's
    several papers closest to the question first."""
    naming = named_papers(services, question)
    several = list(dict.fromkeys(pid for mention in naming.mentions if mention.ambiguous for pid in mention.ids))
    if not several:
        return naming.ids
    closest = [item.id for item in services.store.search("paper", embedding, len(several), ids=several)]
    return named_papers(services, question, closest).ids


def _fused_hits(services: Services, query: str, embedding: np.ndarray, k: int,
                filters: Filters, named: Sequence[str] = ()) -> list[tuple[str, float]]:
    """Search's first `k` for the query within `filters`, the papers the question names first whatever the filters
    (a name is looked up, not ranked: issue #57)."""
    try:
        hits = search_papers(services, query, filters.date_from, filters.date_to, filters.categories, limit=k).hits
    except UserError as error:      # the table is then made without these papers: said in the log, not hidden
        log.warning("the evidence table's paper search failed (%s); it has no papers from it", error)
        hits = []
    found = [hit.paper.id for hit in hits]
    ids = list(dict.fromkeys([*named, *found]))[:max(k, len(named))]
    if not ids:
        return []
    scored = {item.id: item.score for item in services.store.search("paper", embedding, len(ids), ids=ids)}
    return [(pid, scored[pid]) for pid in ids if pid in scored]
