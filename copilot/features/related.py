"""Related papers: a query paper (arXiv id/URL, title + abstract, or pasted text) → PRISM over the library.

Four queries (three LLM-written aspect descriptions and the abstract) each retrieve from the paper store;
Reciprocal Rank Fusion merges them. The abstract-only list is kept as a baseline for comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from copilot.methods import prism
from copilot.records import Evidence, Paper, parse_arxiv_id, storable_text
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSourceError

RESULT_LIMIT = 20
SEARCH_DEPTH = 60          # candidates each of the four queries retrieves before fusion

# The method's names the UI and the CLI show, so they need not reach into methods/prism.py
ASPECTS = prism.ASPECTS                       # the three aspect descriptions, in display order
ABSTRACT = prism.ABSTRACT                     # the fourth query: the abstract itself (also the baseline)
QUERY_LABELS = prism.ASPECT_LABELS            # aspect or ABSTRACT → its label
ONE_CALL_PER_ASPECT, ONE_JSON_CALL = prism.SEPARATE, prism.JSON    # how the descriptions are written
MODES = prism.MODES                           # (ONE_CALL_PER_ASPECT, ONE_JSON_CALL)


class RelatedError(ValueError):
    """Bad input or a fault the user can act on; the message says what to do."""


@dataclass
class QueryInfo:
    paper: prism.QueryPaper
    source: str                       # "library" | "arxiv" | "input"
    date: str | None = None
    notice: str | None = None

    @property
    def url(self) -> str | None:
        return f"https://arxiv.org/abs/{self.paper.id}" if self.paper.id else None

    def as_dict(self) -> dict:
        return {"id": self.paper.id, "title": self.paper.title, "abstract": self.paper.abstract,
                "source": self.source, "date": self.date, "url": self.url}


@dataclass
class RelatedResult:
    query: QueryInfo
    aspects: prism.AspectSet
    results: list[dict] = field(default_factory=list)
    baseline: list[dict] = field(default_factory=list)

    @property
    def missing_notice(self) -> str | None:
        if not self.aspects.missing:
            return None
        names = ", ".join(prism.ASPECT_LABELS[a].lower() for a in self.aspects.missing)
        return f"No {names} description (the LLM failed); the ranking fuses the remaining queries."

    def as_dict(self) -> dict:
        return {"query": self.query.as_dict(), "aspects": dict(self.aspects.descriptions),
                "missing_aspects": dict(self.aspects.missing), "results": self.results, "baseline": self.baseline}


def _from_paper(paper: Paper, source: str) -> QueryInfo:
    return QueryInfo(prism.QueryPaper(paper.title, paper.abstract, id=paper.id), source, paper.published.isoformat())


def query_from_arxiv(services: Services, reference: str) -> QueryInfo:
    """An arXiv id or URL → the paper, from the library if stored there, else from the arXiv API."""
    parsed = parse_arxiv_id(reference)
    if not parsed:
        raise RelatedError(f"not an arXiv id or URL: {reference.strip()[:80]!r} (e.g. 2501.01234 or "
                           "https://arxiv.org/abs/2501.01234)")
    paper_id = parsed[0]
    stored = services.store.get_papers([paper_id])
    if stored:
        return _from_paper(stored[0], "library")
    try:
        fetched = services.arxiv.by_ids([paper_id])
    except ArxivSourceError as error:
        raise RelatedError(f"{paper_id} is not in the library and arXiv could not be asked: {error}") from None
    if not fetched:
        raise RelatedError(f"unknown arXiv id {paper_id}: it is not in the library and arXiv has no such paper")
    return _from_paper(fetched[0], "arxiv")


def query_from_text(title: str, abstract: str, max_chars: int) -> QueryInfo:
    """A title and abstract typed or pasted by the user. Without a title, a short first line becomes the title."""
    title, abstract = storable_text(title).strip(), storable_text(abstract).strip()
    if not title:
        lines = [line.strip() for line in abstract.splitlines() if line.strip()]
        if len(lines) >= 2 and len(lines[0]) <= 200:
            title, abstract = lines[0], "\n".join(lines[1:])
    if not abstract:
        raise RelatedError("the abstract is empty: give an arXiv id, or paste a title and an abstract")
    notice = None
    if len(abstract) > max_chars:
        abstract = abstract[:max_chars]
        notice = f"The text was cut to its first {max_chars} characters."
    return QueryInfo(prism.QueryPaper(title[:300], abstract), "input", notice=notice)


def parse_query(services: Services, reference: str = "", title: str = "", abstract: str = "") -> QueryInfo:
    """One entry point for the UI and CLI: an id/URL wins; otherwise title + abstract (or pasted text)."""
    reference = (reference or "").strip()
    if reference and parse_arxiv_id(reference):
        return query_from_arxiv(services, reference)
    if reference and not (title or abstract) and len(reference) < 120:
        return query_from_arxiv(services, reference)      # raises "not an arXiv id or URL"
    return query_from_text(title, abstract or reference, services.settings.max_input_chars)


def _row(evidence: Evidence, score: float, ranks: dict[str, int] | None = None) -> dict:
    meta = evidence.metadata
    date = str(meta.get("date", ""))
    row = {"id": evidence.id, "title": evidence.title, "score": round(score, 6),
           "date": f"{date[:4]}-{date[4:6]}-{date[6:]}" if len(date) == 8 else None, "url": evidence.url}
    if ranks is not None:
        row["ranks"] = ranks
    return row


def find_related(services: Services, query: QueryInfo, limit: int = RESULT_LIMIT, mode: str = ONE_CALL_PER_ASPECT,
                 progress: Callable[[str], None] | None = None) -> RelatedResult:
    """PRISM over the paper store: aspect descriptions (cached), four searches, RRF; plus the abstract baseline."""
    if services.store.count("paper") == 0:
        raise RelatedError("the library holds no papers yet: import or ingest papers first (Library tab)")
    aspects = prism.describe_aspects(services.llm, query.paper, prism.AspectCache(services.db), mode=mode,
                                     progress=progress)
    if progress:
        progress("searching the library with each query")
    seen: dict[str, Evidence] = {}

    def search(vector) -> list[str]:
        found = [e for e in services.store.search("paper", vector, SEARCH_DEPTH + 1) if e.id != query.paper.id]
        seen.update({e.id: e for e in found})
        return [e.id for e in found[:SEARCH_DEPTH]]

    ranking = prism.rank_with_queries(prism.prism_queries(query.paper, aspects), services.embedder.embed, search)
    results = [_row(seen[item], score, ranks) for item, score, ranks in ranking.fused[:limit]]
    baseline_ids = ranking.lists[prism.ABSTRACT][:limit]
    baseline = [_row(seen[item], seen[item].score) for item in baseline_ids]
    return RelatedResult(query, aspects, results, baseline)
