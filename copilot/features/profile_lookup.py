"""Profile: find a researcher's papers by their name (arXiv author search and the library), grouped by namesake."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from copilot.errors import failure_sentence
from copilot.features.profile import NOT_FOUND_HINT, ProfileError
from copilot.methods.authors import (
    RARE_NAME,
    AuthorName,
    AuthorNameError,
    NamesakeGroup,
    author_queries,
    expected_namesakes,
    full_name_query,
    group_namesakes,
    matching_author,
    parse_author_name,
    written_as_typed,
)
from copilot.records import Paper, date_number
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSourceError


@dataclass
class Candidate:
    paper: Paper
    group: int                  # NamesakeGroup.number
    written_as: str             # how the looked-up name is spelled on this paper
    found_in: str = "arxiv"     # "library", "arxiv" or "both"

    def as_dict(self) -> dict:
        p = self.paper
        return {"id": p.id, "title": p.title, "date": p.published.isoformat(), "authors": list(p.authors),
                "primary_category": p.primary_category, "group": self.group, "found_in": self.found_in}


@dataclass
class Lookup:
    name: str                   # the parsed name, displayed
    query: str                  # the arXiv query whose results are shown ('' when none was sent)
    candidates: list[Candidate]
    groups: list[NamesakeGroup]
    dropped: int = 0            # papers arXiv returned whose authors do not match the name
    message: str = ""
    checked: list[int] = field(default_factory=list)   # the groups checked by default (`as_typed_group`)
    searched: str = ""          # the arXiv query in words, for the page ('' when none was sent)

    def as_dict(self) -> dict:
        return {"name": self.name, "query": self.query, "candidates": [c.as_dict() for c in self.candidates],
                "groups": [{"group": g.number, "label": g.label(), "paper_ids": g.paper_ids,
                            "checked": g.number in self.checked} for g in self.groups],
                "message": self.message}


# The full name's own results are read to the end (up to this many): a common surname's other authors must not
# crowd the person's papers out of a list cut at the newest N (issue #18: "chen, muhao" found 5 of 10).
MAX_OWN_PAPERS = 300


def parse_name(name: str) -> AuthorName:
    """The name as an AuthorName, or ProfileError (and no arXiv query) when it is not usable."""
    try:
        return parse_author_name(name)
    except AuthorNameError as error:
        raise ProfileError(str(error)) from None


def _fetch(services: Services, query: str, limit: int,
           progress: Callable[[int], None] | None, done: int = 0) -> tuple[list[Paper], str]:
    """Papers for one author query; a failure after some pages keeps those pages and says so."""
    papers: list[Paper] = []
    try:
        for paper in services.arxiv.by_author(query, max_results=limit):
            papers.append(paper)
            if progress:
                progress(done + len(papers))
    except ArxivSourceError as error:
        if not papers:
            raise ArxivDown(error) from None
        return papers, failure_sentence(f"arXiv stopped answering after {len(papers)} papers", error,
                                        "Showing those.")
    return papers, ""


class ArxivDown(Exception):
    """arXiv could not be searched at all (the library's papers may still answer the lookup)."""


def _matching(papers: Sequence[Paper], target: AuthorName) -> tuple[list[tuple[Paper, str]], int]:
    kept, dropped = [], 0
    for paper in papers:
        written = matching_author(target, paper.authors)
        if written is None:
            dropped += 1
        else:
            kept.append((paper, written))
    return kept, dropped


def _from_arxiv(services: Services, target: AuthorName, limit: int,
                progress: Callable[[int], None] | None) -> tuple[list[tuple[Paper, str]], str, int, str]:
    """(papers with the name as written, the query that found them, dropped, warning). The full name first, read
    to the end; only when it finds nothing, the broader queries (surname and initial, then the surname)."""
    kept: list[tuple[Paper, str]] = []
    dropped, warning, query = 0, "", ""
    full = full_name_query(target)
    if full:
        found, warning = _fetch(services, full, MAX_OWN_PAPERS, progress)
        kept, dropped = _matching(found, target)
        query = full
    if not kept:
        for query in author_queries(target):
            found, warning = _fetch(services, query, limit, progress)
            kept, more = _matching(found, target)
            dropped += more
            if kept:
                if len(found) >= limit:
                    warning = (warning + f" Showing the newest {limit} arXiv results for {query}.").strip()
                break
    return kept, query, dropped, warning


def _from_library(services: Services, target: AuthorName) -> list[tuple[Paper, str]]:
    """The library's papers with an author of this name (same normalisation as the arXiv path)."""
    ids = [row.id for row in services.catalog.rows() if matching_author(target, row.authors) is not None]
    papers = services.store.get_papers(ids[:MAX_OWN_PAPERS])
    return [(paper, written) for paper in papers if (written := matching_author(target, paper.authors)) is not None]


def as_typed_group(groups: Sequence[NamesakeGroup], target: AuthorName) -> int:
    """The group checked by default: the largest one where the name is written as typed ('Qi Zhang', not only 'Q.
    Zhang'); the largest group when none is. Other groups may be namesakes: the researcher checks the ones that are
    theirs (issue #59: all nine groups of 'Qi Zhang' were checked, a namesake's rain-streak paper among them)."""
    return next((g.number for g in groups if any(written_as_typed(target, s) for s in g.spellings)),
                groups[0].number if groups else 0)


def query_in_words(target: AuthorName, query: str) -> str:
    """What arXiv was asked, in words (the page shows this, not the query's syntax): 'the full name Qi Zhang',
    'the surname Zhang with the initial Q', 'the surname Zhang'."""
    surname = " ".join(w.capitalize() for w in target.last)
    if not query:
        return ""
    if query == full_name_query(target):
        return f"the full name {target.display()}"
    if target.initial and query == author_queries(target)[0]:
        return f"the surname {surname} with the initial {target.initial.upper()}"
    return f"the surname {surname}"


def _rare(services: Services, target: AuthorName) -> bool:
    """Is the full name one few people of the library's field share (`expected_namesakes` below RARE_NAME)?"""
    expected = expected_namesakes(target, (author for row in services.catalog.rows() for author in row.authors))
    return expected is not None and expected < RARE_NAME


def lookup_author(services: Services, name: str, max_results: int | None = None,
                  progress: Callable[[int], None] | None = None) -> Lookup:
    """Papers by `name` from the library and from arXiv (when reachable), merged by id and grouped by likely
    identity. On arXiv the full name is asked first and read to the end; the surname with its initial, then the
    surname alone, only when the full name finds nothing — keeping authors whose first names fit."""
    target = parse_name(name)
    limit = max_results or services.settings.profile_max_papers
    local = _from_library(services, target)
    try:
        remote, query, dropped, warning = _from_arxiv(services, target, limit, progress)
    except ArxivDown as error:
        down = error.args[0] if error.args else error
        if not local:
            raise ProfileError(failure_sentence(
                f"No papers found for {target.display()} in this library, and arXiv could not be searched", down,
                "Your saved profile is unchanged. " + NOT_FOUND_HINT)) from None
        remote, query, dropped = [], "", 0
        warning = failure_sentence("arXiv could not be searched", down, "Showing the papers in this library.")
    where: dict[str, str] = {}
    merged: dict[str, tuple[Paper, str]] = {}
    for paper, written in remote:
        merged[paper.id], where[paper.id] = (paper, written), "arxiv"
    for paper, written in local:
        where[paper.id] = "both" if paper.id in merged else "library"
        merged.setdefault(paper.id, (paper, written))
    if not merged:
        others = f" (arXiv had {dropped} by authors with other first names)" if dropped else ""
        return Lookup(target.display(), query, [], [], dropped,
                      f"No papers found for {target.display()} on arXiv or in this library{others}. "
                      + NOT_FOUND_HINT)
    papers = [paper for paper, _ in merged.values()]
    groups = group_namesakes(papers, target, rare_name=_rare(services, target))
    group_of = {pid: g.number for g in groups for pid in g.paper_ids}
    candidates = [Candidate(p, group_of[p.id], written, where[p.id]) for p, written in merged.values()]
    candidates.sort(key=lambda c: (c.group, -date_number(c.paper.published)))
    in_library = sum(1 for c in candidates if c.found_in != "arxiv")
    message = (f"{len(candidates)} papers found for {target.display()} in {len(groups)} group(s)"
               f" ({in_library} of them in this library).")
    checked = as_typed_group(groups, target)
    if len(groups) > 1:
        message += (f" Groups may be different people with the same name: group {checked}, written as you typed it, "
                    "is checked; check the others that are yours.")
    if warning:
        message += " " + warning
    return Lookup(target.display(), query, candidates, groups, dropped, message, [checked],
                  query_in_words(target, query))
