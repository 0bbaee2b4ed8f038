"""A question about chosen papers (issue #57): a Chat turn scoped to one to MAX_PAPERS papers the researcher chose
(a card's "Ask about this paper", an arXiv id or link typed in the question and taken up, `ask --paper ID`).

A scoped question is answered from those papers only, as one answer: thought memory adds no paper to it, so there
is nothing to compare. Its table holds a row per chosen paper, quoting that paper's passages that answer the
question (methods.passages), from its abstract at once and from its body as the background reader reads it (the
same first looks and reading as any answer's papers, features.fulltext). A chosen paper the library lacks is
fetched from arXiv and added to the library, as pasted ids are on the Library tab (features.library.import_ids).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date

import numpy as np

from copilot.errors import UserError
from copilot.features import documents
from copilot.features.library import import_ids
from copilot.methods import evidence, filters, passages, sentence_roles
from copilot.methods.thought_retriever import Retrievals
from copilot.readable import readable
from copilot.records import ARXIV_ID, DOCUMENT_PREFIX, Evidence, Paper, document_number, is_document, parse_arxiv_id
from copilot.services import Services
from copilot.store.documents import Document
from copilot.store.fulltext import StoredBody
from copilot.table import EvidenceTable

MAX_PAPERS = 5
SCOPED = "scoped"             # an item's metadata key: a paper the researcher chose (the turn is scoped)
MAX_OFFERED = MAX_PAPERS      # ids of a typed question offered as the scope at most


class ScopeError(UserError, ValueError):
    """A scope that cannot be asked about (not an id, too many papers, unknown to arXiv); the message says what to
    do. Chat.prepare raises it like its ChatError."""


def scope_ids(references: Sequence[str] | None) -> list[str]:
    """The arXiv ids (without version) of a scope given as ids or links, and the uploaded documents' "doc:<n>", in
    order, each once. A ScopeError for a reference that is neither, or for more than MAX_PAPERS papers."""
    ids: list[str] = []
    for reference in references or ():
        if not isinstance(reference, str) or not reference.strip():
            continue
        number = document_number(reference)
        parsed = (f"{DOCUMENT_PREFIX}{number}", None) if number is not None else parse_arxiv_id(reference)
        if parsed is None:
            raise ScopeError(f"Not an arXiv id or link: {reference.strip()[:80]!r} (e.g. 2501.01234 or "
                            "https://arxiv.org/abs/2501.01234).")
        if parsed[0] not in ids:
            ids.append(parsed[0])
    if len(ids) > MAX_PAPERS:
        raise ScopeError(f"A question can be about at most {MAX_PAPERS} papers; {len(ids)} were chosen. Remove some, "
                        "or ask the whole library.")
    return ids


def ids_in(text: str | None) -> list[str]:
    """The arXiv ids a typed question holds, bare or in a link, in order, each once (at most MAX_OFFERED)."""
    found: list[str] = []
    for match in ARXIV_ID.finditer(text or ""):
        if match.group("base") not in found:
            found.append(match.group("base"))
        if len(found) >= MAX_OFFERED:
            break
    return found


def _document_paper(document: Document) -> Paper:
    """An uploaded document where a scope holds papers: its id "doc:<n>", its title, no abstract."""
    return Paper(id=document.item_id, title=document.title, abstract="", authors=[], categories=[],
                 published=date.fromtimestamp(document.uploaded_at))


def scope_papers(services: Services, ids: Sequence[str], user: str = "") -> tuple[list[Paper], str]:
    """The chosen papers in the order chosen, and a note ("" when none). A paper the library lacks is fetched from
    arXiv and added to the library; one arXiv does not know, or arXiv out of reach, is a ScopeError saying so. An
    uploaded document ("doc:<n>") must be `user`'s own (features.documents): another's is a ScopeError, as for one
    that never was."""
    stored: dict[str, Paper] = {}
    for pid in ids:
        if is_document(pid):
            try:
                stored[pid] = _document_paper(documents.owned(services, user, pid))
            except documents.DocumentError as error:
                raise ScopeError(str(error)) from None
    arxiv_ids = [pid for pid in ids if not is_document(pid)]
    stored.update((paper.id, paper) for paper in services.store.get_papers(arxiv_ids))
    missing = [pid for pid in ids if pid not in stored]
    note = ""
    if missing:
        try:
            import_ids(services, " ".join(missing))
        except UserError as error:
            raise ScopeError(f"{', '.join(missing)} is not in the library, and could not be added: {error}") from None
        stored.update((paper.id, paper) for paper in services.store.get_papers(missing))
        unknown = [pid for pid in missing if pid not in stored]
        if unknown:
            raise ScopeError(f"arXiv has no paper {', '.join(unknown)}: check the id, or remove it from the papers "
                            "asked about.")
        note = f"Added to the library from arXiv: {', '.join(missing)}."
    return [stored[pid] for pid in ids], note


def scoped_retrievals(services: Services, papers: Sequence[Paper], question_vector: np.ndarray,
                      user: str = "") -> Retrievals:
    """The chosen papers as a turn's retrieved items (both sides the same: one answer), each with its cosine to the
    question and marked SCOPED; an uploaded document of `user`'s as its item (features.documents.scoped_item)."""
    arxiv_ids = [paper.id for paper in papers if not is_document(paper.id)]
    vectors = services.store.paper_embeddings(arxiv_ids) if arxiv_ids else {}
    vector = np.asarray(question_vector, dtype=np.float32)
    hits = [(pid, float(vectors[pid] @ vector)) for pid in arxiv_ids if pid in vectors]
    found = {item.id: replace(item, metadata={**item.metadata, SCOPED: True})
             for item in services.store.fetch("paper", hits)} if hits else {}
    for paper in papers:
        number = document_number(paper.id)
        document = services.documents.find(number, user) if number is not None and user else None
        if document is not None:
            found[paper.id] = documents.scoped_item(services, user, document, vector, {SCOPED: True})
    items = [found[paper.id] for paper in papers if paper.id in found]
    return Retrievals(raw=items, augmented=list(items), seconds=0.0)


def scoped_ranking(items: Sequence[Evidence]) -> list[tuple[str, float]]:
    """A scoped turn's ranking: its papers in the order chosen, with their cosines."""
    return [(item.id, item.score) for item in items]


def is_scoped(items: Sequence[Evidence]) -> bool:
    """Whether a side's items are a scoped turn's chosen papers."""
    return bool(items) and all(item.metadata.get(SCOPED) for item in items)


def paper_label(paper: Paper, width: int = 90) -> str:
    """How a chosen paper is named on the page: its title (cut) and arXiv id."""
    title = " ".join(readable(paper.title).split())
    return f"{title[:width - 1]}\u2026 ({paper.id})" if len(title) > width else f"{title} ({paper.id})"


def scope_notice(papers: Sequence[Paper], titled: bool = True) -> str:
    """What the page says of a scoped turn; `titled`: naming each paper (a filtering follow-up's notice has named
    them already)."""
    named = "; ".join(paper_label(paper, 70) for paper in papers)
    which = "this paper" if len(papers) == 1 else f"these {len(papers)} papers"
    return (f"Asked about {which} only{': ' + named if titled else ''}. One answer, quoting their own passages "
            "(thought memory adds no paper to a question about chosen papers, so there is nothing to compare).")


def scope_table(services: Services, question: str, question_vector: np.ndarray, items: Sequence[Evidence],
                bodies: Mapping[str, StoredBody | None] | None = None) -> EvidenceTable:
    """A scoped side's table: a row per chosen paper with its passages that answer the question (methods.passages),
    and, once its full text is read, the question's words it never uses (`passages.absent_words`).
    `bodies`: the papers' full texts or first looks already at hand; the others are read from the store."""
    known = dict(bodies or {})
    order = {item.id: n for n, item in enumerate(items)}
    owned = {item.id: source for item in items if is_document(item.id)
             and (source := documents.source_of(services, item, float(order[item.id]))) is not None}
    papers = services.store.get_papers([item.id for item in items if not is_document(item.id)])
    missing = [paper.id for paper in papers if known.get(paper.id) is None]
    if missing:
        known.update(services.fulltext.get(missing, services.embedder.name))
    scores = {item.id: item.score for item in items}
    sources = [evidence.Source(p.id, p.title, tuple(p.authors), p.published.isoformat(), p.abstract, scores[p.id],
                               True, float(order[p.id]), "", f"v{p.version}", known.get(p.id)) for p in papers]
    sources = sorted([*sources, *owned.values()], key=lambda source: source.rank)
    wanted = filters.filter_of(question)    # "which of them …": the passages on the property, then who states it
    asked, asked_vector = ((wanted.phrase, services.embedder.embed_cached([wanted.phrase])[0]) if wanted
                           else (question, question_vector))
    rows = passages.passage_rows(asked, asked_vector, sources, services.embed_sentences,
                                 learned_roles=sentence_roles.trained_for(services.embedder.name))
    if wanted:
        return evidence.make_table(filtered_rows(wanted, rows, sources), question, chosen=True)
    made = evidence.make_table(rows, question, chosen=True)
    by_id = {source.paper_id: source for source in sources}
    return replace(made, rows=tuple(replace(row, absent=passages.absent_words(question, by_id[row.paper_id]))
                                    for row in made.rows))


STATES, STATES_NOT = "states it: ", "does not state it (its closest passage)"


def filtered_rows(wanted: filters.Filter, rows: Sequence[evidence.Row],
                  sources: Sequence[evidence.Source]) -> list[evidence.Row]:
    """A filtering question's rows in two groups: first the papers that state the property (headed "states it: <the
    property>"), quoting the passages that state it (methods.filters.states): those chosen for it, else the abstract's
    sentences that do; then the others (headed "does not state it"), with their passages closest to it."""
    by_paper = {row.source.paper_id: row for row in rows}
    stating, others = [], []
    for source in sources:
        row = by_paper.get(source.paper_id)
        found = [span for span in (row.spans if row else []) if filters.states(wanted, span.text)] or [
            span for span in evidence.spans_of(source.abstract)
            if evidence.quotable(span) and filters.states(wanted, span.text)]
        if found:
            spans = sorted(found[:2], key=lambda span: span.position)
            relevance, score = (row.relevance, row.score) if row else (source.score, source.score)
            stating.append(evidence.Row(source, spans, relevance, score, group=STATES + wanted.phrase))
        elif row is not None:
            others.append(replace(row, group=STATES_NOT))
    return stating + others


def filter_notice(wanted: filters.Filter, papers: Sequence[Paper]) -> str:
    """What the page says of a follow-up that filters the previous answer."""
    return (f"Read as a follow-up on the previous answer's {len(papers)} papers "
            f"({', '.join(paper.id for paper in papers)}): which of them state \u201c{wanted.phrase}\u201d. The papers "
            "whose passages state it come first, quoted; then those whose passages do not state it.")


def scope_choices(services: Services, ids: Sequence[str], user: str = "") -> list[tuple[str, str]]:
    """(label, id) of each chosen paper as the Ask box shows it: "About: <title> (arXiv id)"; a paper the library
    lacks by its id, fetched from arXiv when asked; an uploaded document by its title when it is `user`'s (else by
    its id alone: another visitor's title is never shown)."""
    arxiv_ids = [pid for pid in ids if not is_document(pid)]
    stored = {paper.id: paper for paper in services.store.get_papers(arxiv_ids)} if arxiv_ids else {}
    for pid in ids:
        number = document_number(pid)
        document = services.documents.find(number, user) if number is not None and user else None
        if document is not None:
            stored[pid] = _document_paper(document)
    return [(f"About: {paper_label(stored[pid])}" if pid in stored
             else f"About: your document {pid}" if is_document(pid)
             else f"About: arXiv {pid} (not in the library: fetched from arXiv when asked)", pid) for pid in ids]


def with_paper(ids: Sequence[str] | None, added: Sequence[str]) -> tuple[list[str], str]:
    """A scope with more papers (each once, the first MAX_PAPERS kept), and a note when some did not fit."""
    kept = list(dict.fromkeys([*(ids or []), *added]))
    note = (f"A question can be about at most {MAX_PAPERS} papers: remove one (×) to add another."
            if len(kept) > MAX_PAPERS else "")
    return kept[:MAX_PAPERS], note
