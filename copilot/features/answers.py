"""One chat answer, as the model profile allows: the evidence table on the tiny profile (the papers that bear on
the question, each with its own sentences that answer it), the model's answer over that table on the capable.

Every table comes from `answer_tables` (one entry point: Chat's two sides, Adaptive, the evaluations), as a record
(copilot.table); `stream_reply` yields the answer's text in pieces on either profile, so the page streams both alike.
The output checks run on a model's words only: a table's quotes are slices of their papers, checked where they are
made (`evidence.make_table`), and never edited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np

from copilot import prompts
from copilot.features import scope
from copilot.features.evidence_search import table_paper_hits
from copilot.features.named_papers import named_papers
from copilot.features.signin import Writer
from copilot.llm import Usage
from copilot.methods import evidence, evidence_groups, evidence_text, quotes, sentence_roles
from copilot.methods.thought_retriever import stream_answer
from copilot.records import Evidence
from copilot.services import Services
from copilot.store.fulltext import StoredBody
from copilot.table import BODY, EvidenceTable


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

Ranking = Sequence[tuple[str, float]]      # (paper id, cosine to the question) in Search's fused order


def question_ranking(services: Services, question: str, question_vector: np.ndarray,
                     depth: int = MEMORY_DEPTH) -> list[tuple[str, float]]:
    """Search's fused ranking of the library for the question, at least MEMORY_DEPTH deep: a turn computes it once
    and both its retrieval and its tables read it."""
    return table_paper_hits(services, question, question_vector, max(depth, MEMORY_DEPTH))


def table_sources(services: Services, items: Sequence[Evidence], question: str, question_vector: np.ndarray,
                  ranking: Ranking, by_question: bool = False,
                  bodies: dict[str, StoredBody | None] | None = None) -> list[evidence.Source]:
    """The papers a table may quote: the retrieved papers, then the papers each retrieved thought rests on (a quote
    reached through a thought is the paper's words; `via` names the thought). A paper reached through a thought must
    be in `ranking` (`question_ranking`) and is ranked by its own relevance to the question, like any other (issue
    #40): it is placed before the first retrieved paper whose cosine it beats; a paper the question names (its arXiv
    id, title, coined name or first author and year: features.named_papers) is marked as named. `by_question`: the
    papers came from several queries (SlimPLM's, some made from a draft), so they are ranked by `ranking`, and one it
    does not hold is left out (another query's topic).
    `bodies`: the papers' full texts already read from the store this turn (those missing are read and added)."""
    via: dict[str, str] = {}
    scores: dict[str, float] = {}
    for item in items:
        if item.kind == "paper" and item.id not in via:
            via[item.id] = ""
            scores[item.id] = item.score
    for item in items:
        if item.kind == "thought":
            for paper_id in services.thought_memory.root_sources(item.id):
                via.setdefault(paper_id, item.id)
    ranking = ranking[:MEMORY_DEPTH]
    ranked = dict(ranking)
    through_thoughts = [pid for pid in via if pid not in scores]
    for paper_id in through_thoughts:
        if paper_id in ranked:
            scores[paper_id] = ranked[paper_id]
        else:
            del via[paper_id]
    through_thoughts = [pid for pid in through_thoughts if pid in ranked]
    named = {pid for mention in named_papers(services, question).mentions for pid in mention.ids}
    retrieved = [scores[pid] for pid in via if pid not in through_thoughts]
    ranks = {pid: float(n) for n, pid in enumerate(pid for pid in via if pid not in through_thoughts)}
    for paper_id in through_thoughts:      # placed before the first retrieved paper it beats
        ranks[paper_id] = next((n for n, s in enumerate(retrieved) if s < scores[paper_id]), len(retrieved)) - 0.5
    if by_question:
        order = {pid: float(n) for n, (pid, _) in enumerate(ranking)}
        via = {pid: thought for pid, thought in via.items() if pid in order or pid in named}
        ranks = {pid: order.get(pid, -1.0) for pid in via}      # a paper the question names by id comes first
        scores.update((pid, cosine) for pid, cosine in ranking if pid in via)     # closeness to the question
    papers = services.store.get_papers(list(via))
    bodies = {} if bodies is None else bodies
    missing = [p.id for p in papers if p.id not in bodies]
    if missing:
        found = services.fulltext.get(missing, services.embedder.name)
        bodies.update((pid, found.get(pid)) for pid in missing)
    return [evidence.Source(p.id, p.title, tuple(p.authors), p.published.isoformat(), p.abstract, scores[p.id],
                            p.id in named, ranks[p.id], via[p.id], f"v{p.version}", bodies[p.id])
            for p in papers]


def answer_tables(services: Services, question: str, sides: Sequence[Sequence[Evidence]],
                  ranking: Ranking | None = None, by_question: bool = False,
                  looks: Mapping[str, StoredBody] | None = None) -> list[EvidenceTable]:
    """The one way to a table: each side's evidence table for `question` over its retrieved items, built once.
    Every profile gets them (a writing profile shows its table under the model's words). Two sides get one row
    budget: the fewer rows either holds (when both hold some), so the thought side differs from papers-only by which
    papers it shows, never by how many; labels are given after the rows are chosen, 1, 2, … on both sides (issue
    #47). `ranking`: the turn's `question_ranking` (made here when not given). `by_question`: see
    `table_sources`. `looks`: bodies being read (their first looks, `FulltextReader.looks`) for papers whose whole
    body is not stored yet."""
    question_vector = services.embedder.embed_cached([question])[0]
    if ranking is None:
        ranking = question_ranking(services, question, question_vector)
    built: list[tuple[list[evidence.Row], np.ndarray | None]] = []
    bodies: dict[str, StoredBody | None] = {}        # each paper's full text read once for both sides
    if looks:
        stored = services.fulltext.get(list(looks), services.embedder.name)
        bodies.update((pid, stored.get(pid) or look) for pid, look in looks.items())   # a whole body wins
    if sides and all(scope.is_scoped(items) for items in sides):     # a question about chosen papers (issue #57)
        return [scope.scope_table(services, question, question_vector, items, bodies) for items in sides]
    for items in sides:
        sources = table_sources(services, items, question, question_vector, ranking, by_question,
                                bodies) if items else []
        # the sources are papers only: their sentences may be kept on disk (a question or a thought's text never is)
        # a side reaching papers through thoughts keeps as many more candidates, so the rows a paper from memory
        # would push out are still there for `no_displacing` to weigh
        extra = sum(bool(source.via) for source in sources)
        built.append(evidence.build_rows(question, question_vector, sources, services.embed_sentences,
                                         max_rows=evidence.MAX_ROWS + extra,
                                         learned_roles=sentence_roles.trained_for(services.embedder.name))
                     if sources else ([], None))
    counts = [min(len(rows), evidence.MAX_ROWS) for rows, _ in built]
    budget = min(counts) if len(sides) == 2 and all(counts) else evidence.MAX_ROWS
    tables = []
    for rows, vectors in built:
        chosen = no_displacing(rows, budget, margin=services.settings.thought_row_margin)
        kept = [rows[n] for n in chosen]
        evidence_groups.group_rows(kept, None if vectors is None else vectors[chosen], question)
        tables.append(evidence.make_table(kept, question))
    return tables


def row_score(row: evidence.Row) -> float:
    """A row's own evidence for the question: its best sentence's score (the cosine plus the role bonus, the measure
    `evidence.build_rows` picks a paper's quotes by)."""
    return row.score


# A row reached through a thought keeps its place only when its score beats the row it pushes out by this much. A
# smaller difference is within what the table itself calls close (evidence.SECOND_WITHIN, a second sentence "close
# behind" the first), so the comparison would be a vote on noise. Chosen on `eval thoughts-dev`'s comparisons
# (copilot.eval.displace_eval, docs/thoughts-eval.md): no margin lost 3 relevant papers there, 0.06-0.08 none.
# The default of the setting COPILOT_THOUGHT_ROW_MARGIN, which answer_tables reads.
DISPLACE_MARGIN = 0.08


def no_displacing(rows: Sequence[evidence.Row], budget: int,
                  strength: Callable[[evidence.Row], float] = row_score,
                  margin: float = DISPLACE_MARGIN) -> list[int]:
    """Which of a side's candidate rows (in table order) it shows, at most `budget`: the first ones, except that a
    row reached through a thought keeps its place only when its own evidence for the question (`strength`) is at
    least `margin` above that of the row it pushes out, one of the retrieved rows a papers-only table would show
    (the first `budget` retrieved ones); else that row is shown instead. The weakest thought row meets the strongest
    such row first (issue #49: the thought side's one different row was mostly a paper less relevant than the row
    it pushed out, and by the paper's cosine alone it looked closer). A paper the question names by id stays."""
    kept = list(range(min(budget, len(rows))))
    reference = [n for n in range(len(rows)) if not rows[n].source.via][:budget]
    left_out = sorted((n for n in reference if n not in kept), key=lambda n: -strength(rows[n]))
    weighed = (s for s, n in enumerate(kept) if rows[n].source.via and not rows[n].source.named)  # asked for by id
    for slot in sorted(weighed, key=lambda s: strength(rows[kept[s]])):
        if left_out and strength(rows[left_out[0]]) + margin > strength(rows[kept[slot]]):
            kept[slot] = left_out.pop(0)
    return sorted(kept)


def table_text(table: EvidenceTable, items: Sequence[Evidence]) -> str:
    """What a table says as an answer's text: its rows, or the one no-answer sentence listing the nearest papers."""
    if not items:
        return f"{quotes.NO_SOURCE_ANSWERS}."
    if not table.rows:      # the nearest retrieved papers (never a thought: its title is a stored question)
        return quotes.nearest_line([item.title if item.kind == "paper" else "" for item in items],
                                   [item.score if item.kind == "paper" else -1.0 for item in items])
    return "".join(evidence_text.render_table(table))


def with_body_sentences(items: Sequence[Evidence], table: EvidenceTable | None) -> list[Evidence]:
    """The items a model writes from: a paper whose row in `table` quotes its full text gets those sentences after
    its abstract, each after its section (issue #48), so a writing profile reads the body sentences the table under
    its words shows, and the output checks hold its words against them too."""
    body = {row.paper_id: [q for q in row.quotes if q.source == BODY] for row in table.rows} if table else {}
    found = []
    for item in items:
        quoted = body.get(item.id) if item.kind == "paper" else None
        if quoted:
            sentences = " ".join(f"(\u00a7{q.section}) {q.shown}" if q.section else q.shown for q in quoted)
            item = replace(item, text=f"{item.text}\n{prompts.BODY_SENTENCES_LEAD}: {sentences}")
        found.append(item)
    return found


def stream_reply(services: Services, question: str, items: Sequence[Evidence], table: EvidenceTable,
                 reader: str = "", usage: Usage | None = None, writes: bool | None = None,
                 writer: Writer | None = None) -> Iterator[str]:
    """The answer's text in pieces, as the model profile allows (`writes`: the turn's choice, else the profile's):
    the model's own words (writing; the caller adds the table under them once the words are checked,
    `with_table`), or the table (tiny). `writer`: a signed-in visitor's model writes them (features.signin); after
    its first failure in the turn it is not called again (the error is raised at once)."""
    if writer is not None:
        if writer.failure is not None:
            raise writer.failure
        yield from stream_answer(writer.llm, question, with_body_sentences(items, table), writer.plan.answer_tokens,
                                 reader, usage=usage)
        return
    if services.model_profile.writes if writes is None else writes:
        yield from stream_answer(services.llm, question, with_body_sentences(items, table),
                                 services.generation.answer_tokens, reader, usage=usage)
        return
    if items and table.rows:
        yield from evidence_text.render_table(table)
    else:
        yield table_text(table, items)


def with_table(words: str, table: EvidenceTable) -> str:
    """A writing profile's checked words with its table under them."""
    if not table.rows:
        return words
    rendered = "".join(evidence_text.render_table(table))
    return f"{words}\n\n{rendered}" if words else rendered


def table_exports(services: Services, question: str, table: EvidenceTable | None,
                  paper_ids: Sequence[str]) -> dict[str, str]:
    """A turn's evidence as files' contents: {"csv", "md", "bib"} of its table's rows (the BibTeX alone, of
    `paper_ids`, when the answer has no table). Empty values are left out."""
    from copilot.features.bibtex import bibtex_for_ids

    found = {}
    if table is not None and table.rows:
        found = {"csv": evidence_text.table_csv(question, table), "md": evidence_text.table_markdown(question, table)}
    ids = (table.paper_ids if table is not None and table.rows else []) or list(paper_ids)
    if ids:
        found["bib"] = bibtex_for_ids(services, ids)
    return {kind: text for kind, text in found.items() if text.strip()}
