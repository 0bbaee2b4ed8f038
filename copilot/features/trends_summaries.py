"""Trends summaries: a topic's and the period's, cited by arXiv id.

On the tiny model profile they are quotes, not the model's words: a topic's summary is the key sentence of each of
its most central papers (the sentence nearest the centre of those papers), the period's is the key sentence of the
most central paper of each largest topic, under the topic's label. On the capable profile the model writes them
under the output checks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from copilot.grounding import (
    check,
    close_cut_statements,
    ids_to_labels,
    keep_paper_citations,
    labels_to_ids,
    prose_words,
    reattribute,
    tidy,
)
from copilot.llm import LLMError
from copilot.methods import evidence, quotes, sentence_roles
from copilot.methods.topics import Topic
from copilot.prompts import (
    ANSWER_STATEMENT_CHARS,
    TRENDS_PERIOD_SUMMARY,
    TRENDS_TOPIC_SUMMARY,
    Prompt,
    source_block,
    statements_grammar,
)
from copilot.records import Paper
from copilot.services import Services

MIN_PROSE_WORDS = 4       # less than this left after the checks is a fragment, not a summary: show nothing
TOPIC_STATEMENTS = 2      # statements in a grammar-bound topic summary; papers quoted in an extractive one
PERIOD_STATEMENTS = 3     # …and topics quoted in an extractive period summary


class TooLittleLeft(LLMError):
    """The output checks left only a fragment of what the model wrote."""


def cite_or_credit(text: str, given: Sequence[str], prompt: Prompt | None = None,
                   source_texts: Sequence[str] = (), grammar_bound: bool = False) -> tuple[str, list[str]]:
    """Checked text (no loop, no echo of `prompt`'s instructions, no unsourced link, citations only of the given
    papers, each statement's one citation moved to the paper its words come from when `source_texts` — the
    given papers' texts, in order — show that clearly); when the model cited none of them, credit them all
    (they are what it read). `grammar_bound`: written under statements_grammar, whose length cap may have cut
    the last statement. Raises TooLittleLeft when the checks leave only a fragment."""
    instructions = [prompt.system, prompt.user] if prompt else []
    if grammar_bound:
        text = close_cut_statements(text, ANSWER_STATEMENT_CHARS)
    text = check(text, allowed=None, instructions=instructions).text
    cleaned, cited, _ = keep_paper_citations(tidy(text, paragraphs=False), given)
    if source_texts:
        labelled, moved = reattribute(ids_to_labels(cleaned, given), source_texts)
        if moved:
            cleaned, cited, _ = keep_paper_citations(labels_to_ids(labelled, given), given)
    if prose_words(cleaned) < MIN_PROSE_WORDS:
        raise TooLittleLeft("too little of the model's text passed the output checks (repetition, echoed "
                            "instructions, invented citations) to show")
    if not cited:
        cited = list(given)
        cleaned = f"{cleaned} (from {', '.join(f'[{i}]' for i in cited)})".strip()
    return cleaned, cited


def _abstract_block(paper: Paper, chars: int) -> str:
    text = paper.abstract if len(paper.abstract) <= chars else paper.abstract[:chars].rsplit(" ", 1)[0] + " …"
    return source_block(paper.id, f"{paper.title}\n{text}")


def _paper_text(paper: Paper) -> str:
    return f"{paper.title}\n{paper.abstract}"


def summarize_topic(services: Services, topic: Topic, papers: dict[str, Paper], opts) -> list[str]:
    """Write topic.summary (or say it failed); returns the ids given to the model (quoted, on the tiny profile)."""
    if services.model_profile.tiny:
        return quote_topic(services, topic, papers, opts)
    given = [papers[i] for i in topic.paper_ids[:opts.papers_per_summary]]
    ids = [p.id for p in given]
    prompt = TRENDS_TOPIC_SUMMARY.render(sources="\n".join(_abstract_block(p, opts.quote_chars) for p in given),
                                         label=topic.label, example_id=ids[0])
    grammar = statements_grammar(ids, TOPIC_STATEMENTS, opener="Paper") if services.llm.obeys_grammar else None
    text = services.llm.complete(prompt, max_tokens=opts.summary_tokens, temperature=0.2, grammar=grammar).strip()
    if not text:
        raise LLMError("the model returned an empty summary")
    topic.summary, cited = cite_or_credit(text, ids, TRENDS_TOPIC_SUMMARY, [_paper_text(p) for p in given],
                                          grammar_bound=grammar is not None)
    topic.extra["summary_ids"] = cited
    return cited


def period_label(report) -> str:
    return f"{report.start} … {report.end}" if report.start != report.end else str(report.start)


def summarize_period(services: Services, report, papers: dict[str, Paper], opts) -> list[str]:
    """Write report.summary; returns the ids given to the model (quoted, on the tiny profile)."""
    if services.model_profile.tiny:
        return quote_period(services, report, papers, opts)
    top = report.topics[:6]
    given = [papers[t.paper_ids[0]] for t in top[:4]]
    lines = [f"- {t.label} ({t.size} papers{', rising' if t.rising else ''})" for t in top]
    prompt = TRENDS_PERIOD_SUMMARY.render(period=period_label(report), topics="\n".join(lines),
                                          sources="\n".join(_abstract_block(p, opts.quote_chars // 2) for p in given),
                                          example_id=given[0].id)
    ids = [p.id for p in given]
    grammar = statements_grammar(ids, PERIOD_STATEMENTS, opener="Paper") if services.llm.obeys_grammar else None
    text = services.llm.complete(prompt, max_tokens=opts.summary_tokens, temperature=0.2, grammar=grammar).strip()
    if not text:
        raise LLMError("the model returned an empty summary")
    report.summary, report.summary_ids = cite_or_credit(text, ids, TRENDS_PERIOD_SUMMARY,
                                                        [_paper_text(p) for p in given], grammar is not None)
    return [p.id for p in given]


# --- the tiny profile: quotes ---------------------------------------------------------------------------------
def quote_line(paper_id: str, sentence: str) -> str:
    return f"[{paper_id}] {quotes.OPEN_QUOTE}{sentence}{quotes.CLOSE_QUOTE}"


def central_quotes(services: Services, given: Sequence[Paper]) -> list[tuple[str, str]]:
    """(id, key sentence) of each paper, the key sentence being the one nearest the centre of all given papers among
    those that say what the paper does or finds (not its background)."""
    stored = services.store.paper_embeddings([p.id for p in given])
    vectors = [stored.get(p.id) for p in given]
    known = [v for v in vectors if v is not None]
    if not known:
        return []
    centre = np.mean(known, axis=0)
    centre = centre / (np.linalg.norm(centre) or 1.0)
    found = evidence.key_findings(np.vstack([centre] * len(given)), [_paper_text(p) for p in given],
                                  services.embedder.embed, sentence_roles.trained_for(services.embedder.name))
    return [(p.id, s) for p, s in zip(given, found) if s]


def quote_topic(services: Services, topic: Topic, papers: dict[str, Paper], opts) -> list[str]:
    """topic.summary as the key sentences of its TOPIC_STATEMENTS most central papers; returns their ids."""
    given = [papers[i] for i in topic.paper_ids[:TOPIC_STATEMENTS]]
    found = central_quotes(services, given)
    if not found:
        raise LLMError("none of the topic's central papers has a sentence to quote")
    topic.summary = "\n".join(quote_line(pid, sentence) for pid, sentence in found)
    topic.extra["summary_ids"] = [pid for pid, _ in found]
    return topic.extra["summary_ids"]


def quote_period(services: Services, report, papers: dict[str, Paper], opts) -> list[str]:
    """report.summary as, for each of the PERIOD_STATEMENTS largest topics, its label and the key sentence of its
    most central paper (toward the topic's centre); returns the ids quoted."""
    lines, ids = [], []
    for topic in report.topics[:PERIOD_STATEMENTS]:
        found = central_quotes(services, [papers[i] for i in topic.paper_ids[:TOPIC_STATEMENTS]])[:1]
        for pid, sentence in found:
            lines.append(f"{topic.label}: {quote_line(pid, sentence)}")
            ids.append(pid)
    if not lines:
        raise LLMError("no topic has a sentence to quote")
    report.summary, report.summary_ids = "\n".join(lines), ids
    return ids
