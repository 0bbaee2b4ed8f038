"""One chat answer, as the model profile allows: the evidence table on the tiny profile (the papers that bear on
the question, each with its own sentences that answer it), the model's answer over that table on the capable.

Chat, Adaptive, GoR's period answers and the benchmarks call `stream_reply` or `quoted_answer`; they yield the
answer in pieces either way, so the page streams both alike, and the output checks run on both
(`thought_retriever.check_answer`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from copilot.features.evidence_search import table_paper_hits
from copilot.llm import Usage
from copilot.methods import evidence, evidence_text, quotes, sentence_roles
from copilot.methods.thought_retriever import stream_answer
from copilot.records import ARXIV_ID, Evidence
from copilot.services import Services


def full_texts(services: Services, items: Sequence[Evidence]) -> list[str]:
    """Each item's whole text: a paper's title and abstract (the retrieved item may be cut to a token budget), a
    thought's stored text."""
    papers = {p.id: p for p in services.store.get_papers([i.id for i in items if i.kind == "paper"])}
    texts = []
    for item in items:
        if item.kind == "paper" and item.id in papers:
            paper = papers[item.id]
            texts.append(f"{' '.join(paper.title.split())}\n{paper.abstract}")
        elif item.kind == "thought":
            row = services.thoughts.get(item.id, include_hidden=True)
            texts.append(row.text if row else item.text)
        else:
            texts.append(item.text)
    return texts


def select(services: Services, question: str, items: Sequence[Evidence],
           max_quotes: int = quotes.MAX_QUOTES) -> quotes.Selection:
    """The quotes of `items` that answer `question` (methods.quotes.select_quotes with the product's embedder)."""
    if not items:
        return quotes.Selection([], None)
    embedder = services.embedder
    return quotes.select_quotes(embedder.embed_one(question), question, full_texts(services, items),
                                embedder.embed_cached,
                                [item.score for item in items], max_quotes=max_quotes)


# A paper a retrieved thought rests on becomes a candidate row only when the chat's own ranking (meaning and words
# fused, features.evidence_search) places it in its first MEMORY_DEPTH papers for this question: memory may lift
# a paper from below the pool, not bring one of another topic (issue #40, docs/thoughts-eval.md).
MEMORY_DEPTH = 40


def table_sources(services: Services, items: Sequence[Evidence], question: str = "",
                  question_vector: np.ndarray | None = None, by_question: bool = False) -> list[evidence.Source]:
    """The papers a table may quote: the retrieved papers under their own labels, then the papers each retrieved
    thought rests on, under the thought's label (a quote reached through a thought is the paper's words). A paper
    reached through a thought is ranked by its own relevance to the question, like any other (issue #40): it is
    placed before the first retrieved paper whose cosine it beats; a paper whose arXiv id the question holds is
    marked as named. `by_question`: the papers came from several queries (SlimPLM's, some made from a draft), so
    they are ranked by the chat's own ranking for the question, and one it does not place in its first
    MEMORY_DEPTH is left out (another query's topic)."""
    labels: dict[str, str] = {}
    scores: dict[str, float] = {}
    for n, item in enumerate(items, 1):
        if item.kind == "paper":
            labels.setdefault(item.id, str(n))
            scores.setdefault(item.id, item.score)
    for n, item in enumerate(items, 1):
        if item.kind == "thought":
            for paper_id in services.thought_memory.root_sources(item.id):
                labels.setdefault(paper_id, str(n))
    through_thoughts = [paper_id for paper_id in labels if paper_id not in scores]
    if through_thoughts and question_vector is not None and MEMORY_DEPTH:
        ranked = {pid for pid, _ in table_paper_hits(services, question, question_vector, MEMORY_DEPTH)}
        for paper_id in [pid for pid in through_thoughts if pid not in ranked]:
            del labels[paper_id]
        through_thoughts = [pid for pid in through_thoughts if pid in ranked]
    if through_thoughts and question_vector is not None:
        for hit in services.store.search("paper", question_vector, len(through_thoughts), ids=through_thoughts):
            scores[hit.id] = hit.score
    for paper_id in through_thoughts:
        scores.setdefault(paper_id, min(scores.values(), default=0.0))
    named = {m.group("base") for m in ARXIV_ID.finditer(question or "")}
    retrieved = [scores[paper_id] for paper_id in labels if paper_id not in through_thoughts]
    ranks = {paper_id: float(n) for n, paper_id in enumerate(labels) if paper_id not in through_thoughts}
    for paper_id in through_thoughts:      # placed before the first retrieved paper it beats
        ranks[paper_id] = next((n for n, s in enumerate(retrieved) if s < scores[paper_id]), len(retrieved)) - 0.5
    if by_question and question_vector is not None:
        hits = table_paper_hits(services, question, question_vector, MEMORY_DEPTH)
        order = {pid: float(n) for n, (pid, _) in enumerate(hits)}
        labels = {pid: label for pid, label in labels.items() if pid in order or pid in named}
        ranks = {pid: order.get(pid, -1.0) for pid in labels}      # a paper the question names by id comes first
        scores.update((pid, cosine) for pid, cosine in hits if pid in labels)     # closeness to the question
    papers = services.store.get_papers(list(labels))
    return [evidence.Source(labels[p.id], p.id, p.title, tuple(p.authors), p.published.isoformat(), p.abstract,
                            scores[p.id], p.id in named, ranks[p.id]) for p in papers]


def table_rows(services: Services, question: str, items: Sequence[Evidence],
               by_question: bool = False) -> tuple[list[evidence.Row], np.ndarray | None]:
    """The table's rows for `question` over the retrieved `items`, best first (at most `evidence.MAX_ROWS`), not
    yet grouped, with each row's vector for the grouping (`grouped`). `by_question`: see `table_sources`."""
    question_vector = services.embedder.embed_cached([question])[0]    # the turn's two sides ask it twice
    sources = table_sources(services, items, question, question_vector, by_question)
    if not sources:
        return [], None
    # the sources are papers only: their sentences may be kept on disk (a question or a thought's text never is)
    return evidence.build_rows(question, question_vector, sources, services.embed_sentences,
                               learned_roles=sentence_roles.trained_for(services.embedder.name))


def grouped(question: str, rows: Sequence[evidence.Row], vectors: np.ndarray | None,
            max_rows: int = evidence.MAX_ROWS) -> list[evidence.Row]:
    """The first `max_rows` of `table_rows`' rows, grouped where they fall apart clearly (the same rows as a table
    built for `max_rows` rows: the rows' order does not depend on how many are kept)."""
    kept = list(rows[:max_rows])
    evidence.group_rows(kept, None if vectors is None else vectors[:len(kept)], question)
    return kept


def evidence_rows(services: Services, question: str, items: Sequence[Evidence],
                  max_rows: int = evidence.MAX_ROWS) -> list[evidence.Row]:
    """The table's rows for `question` over the retrieved `items` (at most `max_rows`, grouped where they fall apart
    clearly)."""
    return grouped(question, *table_rows(services, question, items), max_rows)


def side_tables(services: Services, question: str,
                sides: Sequence[Sequence[Evidence]]) -> list[list[evidence.Row]] | None:
    """The tiny profile's tables for a turn's sides, each built once (the answers render them). Two sides get one
    row budget: the fewer rows either holds (when both hold some), so the thought side differs from papers-only by
    which papers it shows, never by how many: a longer answer must not give the side away (issue #40). None on a
    writing profile: its answer builds the table under the model's words."""
    if services.model_profile.writes:
        return None
    built = [table_rows(services, question, items) if items else ([], None) for items in sides]
    counts = [len(rows) for rows, _ in built]
    budget = min(counts) if len(sides) == 2 and all(counts) else evidence.MAX_ROWS
    return [grouped(question, rows, vectors, budget) for rows, vectors in built]


def no_answer_line(items: Sequence[Evidence]) -> str:
    """The one no-answer sentence, listing the nearest retrieved papers (never a thought: its title is a stored
    question)."""
    titles = [item.title if item.kind == "paper" else "" for item in items]
    return quotes.nearest_line(titles, [item.score if item.kind == "paper" else -1.0 for item in items])


def quoted_answer(services: Services, question: str, items: Sequence[Evidence],
                  rows: Sequence[evidence.Row] | None = None) -> Iterator[str]:
    """The extractive answer in pieces: the evidence table (`rows` when already built, `side_tables`), or the one
    no-answer sentence."""
    if not items:
        yield f"{quotes.NO_SOURCE_ANSWERS}."
        return
    if rows is None:
        rows = evidence_rows(services, question, items)
    if not rows:
        yield no_answer_line(items)
        return
    yield from evidence.render_table(rows, textbook=evidence.is_textbook(question))


def stream_reply(services: Services, question: str, items: Sequence[Evidence], reader: str = "",
                 usage: Usage | None = None, rows: Sequence[evidence.Row] | None = None) -> Iterator[str]:
    """The answer the model profile allows: the table (tiny; `rows` when already built), or the model's own answer
    with the table under it (capable; `evidence_text.split_table` parts them again for the output checks, which apply
    to the model's words)."""
    if services.model_profile.writes:
        yield from stream_answer(services.llm, question, items, services.generation.answer_tokens, reader, usage=usage)
        rows = evidence_rows(services, question, items) if items else []
        if rows:
            yield "\n\n" + "".join(evidence.render_table(rows, textbook=evidence.is_textbook(question)))
        return
    yield from quoted_answer(services, question, items, rows)


def table_exports(services: Services, question: str, answer_text: str, paper_ids: Sequence[str]) -> dict[str, str]:
    """A turn's evidence as files' contents: {"csv", "md", "bib"} of its table's rows (the BibTeX alone, of
    `paper_ids`, when the answer is not a table). Empty values are left out."""
    from copilot.features.bibtex import bibtex_for_ids

    rows = evidence_text.parse_table(answer_text)
    found = {}
    if rows:
        found = {"csv": evidence_text.table_csv(question, rows), "md": evidence_text.table_markdown(question, rows)}
    ids = [row.paper_id for row in rows] or list(paper_ids)
    if ids:
        found["bib"] = bibtex_for_ids(services, ids)
    return {kind: text for kind, text in found.items() if text.strip()}
