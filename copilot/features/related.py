"""Related papers: a query paper (arXiv id/URL, title + abstract, or pasted text) → a ranking of the library.

Several queries each retrieve from the paper store — the abstract, the title, aspect queries (written by the LLM,
PRISM; or taken from the abstract's own sentences), and a lexical (BM25) search — and weighted Reciprocal Rank
Fusion merges them. Which lists and weights is a ranking method (`RANKINGS`); the default is the one that won on the
CSFCube dev fold (docs/related-eval.md, Settings.related_method). The abstract-only list is kept as the baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from copilot.errors import UserError
from copilot.methods import prism
from copilot.records import Evidence, Paper, parse_arxiv_id, storable_text
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSourceError

RESULT_LIMIT = 20
SEARCH_DEPTH = 60          # candidates each query retrieves before fusion
SHORT_ABSTRACT_WORDS = 5   # an abstract shorter than this leaves the title to carry the query

# The method's names the UI and the CLI show, so they need not reach into methods/prism.py
ASPECTS = prism.ASPECTS                       # the three aspect descriptions, in display order
ABSTRACT = prism.ABSTRACT                     # the abstract as a query (also the baseline)
QUERY_LABELS = prism.ASPECT_LABELS            # list name → its label
LIST_ORDER = (*prism.ASPECTS, prism.ABSTRACT, prism.TITLE, prism.LEXICAL)
ONE_CALL_PER_ASPECT, ONE_JSON_CALL = prism.SEPARATE, prism.JSON    # how the LLM writes the descriptions
MODES = prism.MODES                           # (ONE_CALL_PER_ASPECT, ONE_JSON_CALL)
RANKINGS = {name: method.label for name, method in prism.RANKINGS.items()}    # ranking method → what it does


def uses_llm(method: str) -> bool:
    return prism.RANKINGS[method].uses_llm


class RelatedError(UserError, ValueError):
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
    method: str                                   # the ranking method (a key of RANKINGS)
    aspects: prism.AspectSet                      # the LLM's descriptions (empty for a method without them)
    aspect_queries: dict[str, str] = field(default_factory=dict)     # aspect → the text it searched with
    aspect_sources: dict[str, str] = field(default_factory=dict)     # aspect → "llm" or "extractive"
    results: list[dict] = field(default_factory=list)
    baseline: list[dict] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    @property
    def method_label(self) -> str:
        return RANKINGS[self.method]

    @property
    def missing_notice(self) -> str | None:
        if not self.aspects.missing:
            return None
        reasons = "; ".join(f"{prism.ASPECT_LABELS[a].lower()}: {why}" for a, why in self.aspects.missing.items())
        stood_in = any(self.aspect_sources.get(a) == prism.EXTRACTIVE_ASPECTS for a in self.aspects.missing)
        stand_in = "the abstract's own sentences stand in" if stood_in else "the ranking fuses the remaining queries"
        return f"Some aspect descriptions were not used ({reasons}); {stand_in}."

    def as_dict(self) -> dict:
        return {"query": self.query.as_dict(), "method": self.method, "method_label": self.method_label,
                "aspects": dict(self.aspects.descriptions), "missing_aspects": dict(self.aspects.missing),
                "aspect_queries": self.aspect_queries, "aspect_sources": self.aspect_sources,
                "notices": self.notices, "results": self.results, "baseline": self.baseline}


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
    if not abstract and not title:
        raise RelatedError("nothing to search with: give an arXiv id, or paste a title and an abstract")
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
           "date": f"{date[:4]}-{date[4:6]}-{date[6:]}" if len(date) == 8 else None, "url": evidence.url,
           "authors": [a.strip() for a in str(meta.get("authors", "")).split(";") if a.strip()]}
    if ranks is not None:
        row["ranks"] = ranks
    return row


def find_related(services: Services, query: QueryInfo, limit: int = RESULT_LIMIT, mode: str = ONE_CALL_PER_ASPECT,
                 progress: Callable[[str], None] | None = None, method: str | None = None) -> RelatedResult:
    """Rank the library for `query` with `method` (default: Settings.related_method), plus the abstract baseline.
    The LLM is asked (aspect descriptions, cached) only by a method that uses it; a description it fails to write,
    or that fails the gate, is replaced by the abstract's own sentences for that aspect, with a notice."""
    method = method or services.generation.related_ranking
    if method not in prism.RANKINGS:
        raise RelatedError(f"unknown ranking method {method!r}; choose from {', '.join(prism.RANKINGS)}")
    ranking_method = prism.RANKINGS[method]
    if services.store.count("paper") == 0:
        raise RelatedError("the library holds no papers yet: import or ingest papers first (Library tab)")
    paper, notices = query.paper, []
    if len(paper.abstract.split()) < SHORT_ABSTRACT_WORDS:
        if not paper.title.strip():
            raise RelatedError("the abstract is empty or too short and there is no title: paste a title and an "
                               "abstract, or give an arXiv id")
        notices.append("The abstract is empty or very short, so the title carries the query.")
    aspects = prism.AspectSet()
    if ranking_method.uses_llm:
        aspects = prism.describe_aspects(services.llm, paper, services.aspect_cache, mode=mode,
                                         progress=progress, detailed=services.generation.detailed_aspects)
        if ranking_method.gate:
            prism.gate_descriptions(aspects, paper, services.embedder.embed)
    extractive = prism.extractive_aspects(paper, services.embedder.embed) if ranking_method.stand_ins else {}
    queries = prism.ranking_queries(ranking_method, paper, aspects.descriptions, extractive)
    sources = {a: (prism.LLM_ASPECTS if queries[a] == aspects.descriptions.get(a) else prism.EXTRACTIVE_ASPECTS)
               for a in prism.ASPECTS if a in queries}
    if progress:
        progress("searching the library with each query")
    seen: dict[str, Evidence] = {}

    def search(vector) -> list[str]:
        found = [e for e in services.store.search("paper", vector, SEARCH_DEPTH + 1) if e.id != paper.id]
        seen.update({e.id: e for e in found})
        return [e.id for e in found[:SEARCH_DEPTH]]

    def lexical(text: str) -> list[str]:
        return [item for item, _ in services.lexical.search(text, SEARCH_DEPTH, exclude=[paper.id] if paper.id else [])]

    ranking = prism.rank_with_method(ranking_method, paper, queries, services.embedder.embed, search, lexical)
    if prism.LEXICAL in ranking_method.weights and not ranking.lists.get(prism.LEXICAL):
        notices.append("No paper shares a word with the query; the ranking uses the embedding queries only.")
    _fetch_missing(services, seen, [item for item, _, _ in ranking.fused[:limit]])
    results = [_row(seen[item], score, ranks) for item, score, ranks in ranking.fused[:limit] if item in seen]
    baseline_ids = ranking.lists[prism.ABSTRACT][:limit] if prism.ABSTRACT in ranking.lists else \
        search(services.embedder.embed([paper.abstract_query])[0])[:limit]
    baseline = [_row(seen[item], seen[item].score) for item in baseline_ids]
    return RelatedResult(query, method, aspects, {a: queries[a] for a in sources}, sources, results, baseline,
                         notices)


def _fetch_missing(services: Services, seen: dict[str, Evidence], ids: list[str]) -> None:
    """Papers only the lexical list found have no Evidence yet: read them from the store."""
    todo = [item for item in ids if item not in seen]
    for stored in services.store.get_papers(todo):
        seen[stored.id] = Evidence(id=stored.id, kind="paper", title=stored.title, text=stored.document, score=0.0,
                                   metadata=stored.metadata())
