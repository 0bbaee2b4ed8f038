"""Searching the library like a researcher: words and meaning together, filters, sort.

A query is ranked twice — by meaning (the embedded query against the papers' vectors in Chroma) and by its words
(BM25 over titles and abstracts, the index Related uses) — and the two lists are fused by reciprocal rank, equal
weights. Filters (date range, any of the categories, an author) are applied to the candidates before either list
is cut, through the in-memory catalog of the papers' dates, categories and authors. A paper the query names (its
arXiv id or link, title, coined name, or first author and year: features.named_papers) comes first. With no words
but a filter, the filtered papers are listed newest first. Sorted by date, the results relevant to the words
(`_by_date`) are listed newest first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from copilot.errors import UserError
from copilot.features.named_papers import named_papers
from copilot.methods.authors import AuthorNameError, matching_author, parse_author_name
from copilot.methods.fusion import reciprocal_rank_fusion
from copilot.records import Paper, date_number, storable_text
from copilot.services import Services

MAX_QUERY_CHARS = 500
MAX_LIMIT = 100
LIST_DEPTH = 200          # how deep each of the two lists is read before fusing
SORTS = ("relevance", "date")
# Sorted by date, a result must be this close to the query (cosine of the embedded query and the paper's title and
# abstract), or hold every word of the query. Measured on the corpus's first 2,000 papers: "jailbreak defense" in
# March 2025, cs.AI: the four jailbreak papers 0.40-0.51, then a backdoor defense 0.34 and the rest 0.30 and below;
# "speculative decoding": the five speculative-decoding papers 0.43-0.51, unrelated decoding papers 0.33-0.35.
DATE_FLOOR = 0.35
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-]{2,}")
_STOP = {"the", "and", "for", "with", "from", "that", "this", "are", "how", "what", "which", "into", "over", "can",
         "does", "using", "use", "about", "paper", "papers"}


@dataclass
class Hit:
    paper: Paper
    score: float                                   # RRF score (0 when listed by date only)
    ranks: dict[str, int] = field(default_factory=dict)   # {"meaning": rank, "words": rank}

    def as_dict(self) -> dict:
        p = self.paper
        return {"id": p.id, "version": p.version, "title": p.title, "authors": p.authors,
                "date": p.published.isoformat(), "categories": p.categories, "abstract": p.abstract,
                "abs_url": p.abs_url, "pdf_url": p.pdf_url, "score": round(self.score, 6), "ranks": self.ranks}


@dataclass
class SearchResult:
    query: str
    hits: list[Hit]
    matched: int | None        # papers passing the filters (None: no filter)
    message: str = ""

    def as_dict(self) -> dict:
        return {"query": self.query, "matched": self.matched, "message": self.message,
                "hits": [hit.as_dict() for hit in self.hits]}


def parse_day(text: str | None, what: str) -> date | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        raise UserError(f"the {what} date {text[:30]!r} is not a date; write it as YYYY-MM-DD") from None


def query_words(text: str) -> list[str]:
    """The query's content words, for highlighting in snippets."""
    return [w for w in dict.fromkeys(m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOP]


def search_papers(services: Services, text: str | None, date_from: str | date | None = None,
                  date_to: str | date | None = None, categories: list[str] | None = None, author: str | None = None,
                  sort: str = "relevance", limit: int = 20) -> SearchResult:
    query = " ".join(storable_text(text or "").split())
    if len(query) > MAX_QUERY_CHARS:
        raise UserError(f"the query has {len(query):,} characters; at most {MAX_QUERY_CHARS}")
    if sort not in SORTS:
        raise UserError(f"sort by one of: {', '.join(SORTS)}")
    limit = max(1, min(int(limit), MAX_LIMIT))
    start = date_from if isinstance(date_from, date) else parse_day(date_from, "from")
    end = date_to if isinstance(date_to, date) else parse_day(date_to, "to")
    if start and end and start > end:
        raise UserError(f"the date range is empty: from {start} is after to {end}")
    wanted_categories = [c.strip() for c in categories or [] if c and c.strip()]
    target = None
    if author and author.strip():
        try:
            target = parse_author_name(author)
        except AuthorNameError as error:
            raise UserError(f"author: {error}") from None
    filtered = bool(start or end or wanted_categories or target)
    if not query and not filtered:
        raise UserError("type words to search for, or choose a date range, a category or an author")
    if services.store.count("paper") == 0:
        raise UserError("the library is empty: add papers on the Library tab first")

    allowed = _filtered_ids(services, start, end, wanted_categories, target) if filtered else None
    if allowed is not None and not allowed:
        return SearchResult(query, [], 0, "No paper in the library matches these filters.")
    if not query and allowed is not None:       # no words: some filter was given (checked above)
        return _newest(services, query, allowed, limit)

    lists = {"meaning": _by_meaning(services, query, allowed), "words": _by_words(services, query, allowed)}
    fused = reciprocal_rank_fusion(lists)
    naming = named_papers(services, query, [pid for pid, _, _ in fused])
    named = [pid for pid in naming.ids if allowed is None or pid in allowed]
    if named:       # a paper named by its id, title, coined name or first author and year is looked up, not ranked
        ranks = {pid: found for pid, _, found in fused}      # its places in the two lists, where it has some
        fused = [(pid, float("inf"), ranks.get(pid, {})) for pid in named] + \
            [row for row in fused if row[0] not in named]
    if sort == "date":
        return _by_date(services, query, fused, allowed, limit)
    papers = {p.id: p for p in services.store.get_papers([pid for pid, _, _ in fused[:limit]])}
    hits = [Hit(papers[pid], 0.0 if score == float("inf") else score, ranks) for pid, score, ranks in fused
            if pid in papers]
    hits = hits[:limit]
    message = naming.notice if hits else "No paper matches this search; try other words or wider filters."
    return SearchResult(query, hits, None if allowed is None else len(allowed), message)


def _by_date(services: Services, query: str, fused: list[tuple[str, float, dict[str, int]]],
             allowed: set[str] | None, limit: int) -> SearchResult:
    """Sorted by date: the relevant results, newest first — those close to the query in meaning (cosine of the
    query and the title and abstract at least DATE_FLOOR) or holding every word of it, and a paper the query names.
    The date orders what the query found; it does not replace the query (issue #59: "jailbreak defense" sorted by
    date listed the filters' newest papers, none about jailbreaks)."""
    fused = fused[:LIST_DEPTH]
    papers = {p.id: p for p in services.store.get_papers([pid for pid, _, _ in fused])}
    closeness = _closeness(services, query, list(papers))
    words = query_words(query)
    hits = [Hit(papers[pid], 0.0 if score == float("inf") else score, ranks) for pid, score, ranks in fused
            if pid in papers and (score == float("inf") or closeness.get(pid, 0.0) >= DATE_FLOOR
                                  or _holds_words(papers[pid], words))]
    hits.sort(key=lambda h: h.paper.published, reverse=True)
    matched = None if allowed is None else len(allowed)
    if not hits:
        return SearchResult(query, [], matched, "No paper is close enough to this search to sort by date; sorted by "
                                                "relevance, the nearest ones are listed.")
    return SearchResult(query, hits[:limit], matched,
                        f"Newest first among the {len(hits)} papers relevant to the search (close in meaning, or "
                        "holding all its words).")


def _closeness(services: Services, query: str, ids: list[str]) -> dict[str, float]:
    """Cosine of the query and each paper's stored vector (its title and abstract)."""
    vectors = services.store.paper_embeddings(ids)
    if not vectors:
        return {}
    wanted = np.asarray(services.embedder.embed_cached([query])[0], dtype=np.float32)
    wanted = wanted / (np.linalg.norm(wanted) or 1.0)
    return {pid: float(vector @ wanted / (np.linalg.norm(vector) or 1.0)) for pid, vector in vectors.items()}


def _holds_words(paper: Paper, words: list[str]) -> bool:
    text = f"{paper.title} {paper.abstract}".lower()
    return bool(words) and all(re.search(rf"\b{re.escape(word)}", text) for word in words)


def _filtered_ids(services: Services, start: date | None, end: date | None, categories: list[str],
                  target) -> set[str]:
    low = date_number(start) if start else 0
    high = date_number(end) if end else 99_999_999
    wanted = set(categories)
    return {row.id for row in services.catalog.rows()
            if low <= row.date <= high
            and (not wanted or wanted.intersection(row.categories))
            and (target is None or matching_author(target, row.authors) is not None)}


def _by_meaning(services: Services, query: str, allowed: set[str] | None) -> list[str]:
    vector = services.embedder.embed_cached([query])[0]     # Chat's table search embeds the question it asks
    restrict = sorted(allowed) if allowed is not None else None
    items = services.store.search("paper", vector, LIST_DEPTH, ids=restrict)
    return [item.id for item in items]


def _by_words(services: Services, query: str, allowed: set[str] | None) -> list[str]:
    depth = LIST_DEPTH if allowed is None else services.store.count("paper")   # filter first, then cut
    ranked = [pid for pid, score in services.lexical.search(query, depth) if score > 0]
    if allowed is not None:
        ranked = [pid for pid in ranked if pid in allowed]
    return ranked[:LIST_DEPTH]


def _newest(services: Services, query: str, allowed: set[str], limit: int) -> SearchResult:
    rows = sorted((row for row in services.catalog.rows() if row.id in allowed), key=lambda r: r.date, reverse=True)
    papers = services.store.get_papers([row.id for row in rows[:limit]])
    return SearchResult(query, [Hit(p, 0.0) for p in papers], len(allowed))


def question_about(services: Services, paper_id: str) -> str:
    """A question to start Chat with about a library paper ("" when the library does not hold it)."""
    papers = services.store.get_papers([paper_id.strip()]) if paper_id and paper_id.strip() else []
    if not papers:
        return ""
    return f'What does "{papers[0].title}" (arXiv {papers[0].id}) propose, and how does it compare with related work?'


def warm_up(services: Services) -> None:
    """Load what the first search or question needs: the embedding model (about 10 s from a cold start on a
    2-core machine: torch, transformers and the weights), the store with its index and the word index, by one
    search that writes nothing, the catalog of dates and authors, and the model profile (read from the local
    model's file). The app runs it in the background at start, so the first visitor does not wait for it. An empty
    library loads the model only."""
    _ = services.model_profile
    if services.store.count("paper") == 0:
        services.embedder.embed(["a first question"])
        return
    services.catalog.rows()
    search_papers(services, "a first question about the library", limit=1)
