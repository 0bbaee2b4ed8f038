"""One chat answer, as the model profile allows: quotes of the sources on the tiny profile, written on the capable.

Chat, GoR's period answers and the benchmarks call `stream_reply`; it yields the answer in pieces either way, so the
page streams both alike, and the output checks run on both (`thought_retriever.check_answer`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from copilot.llm import Usage
from copilot.methods import quotes
from copilot.methods.thought_retriever import stream_answer
from copilot.records import Evidence
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


def quoted_answer(services: Services, question: str, items: Sequence[Evidence]) -> Iterator[str]:
    """The extractive answer in pieces: quotes under their labels, or the one no-answer sentence."""
    if not items:
        yield f"{quotes.NO_SOURCE_ANSWERS}."
        return
    selection = select(services, question, items)
    # the no-answer line lists the nearest papers by title; a thought has none (its question is its author's alone,
    # and a snippet in its place would tell the sides apart before the vote)
    yield from quotes.render(selection, [item.title if item.kind == "paper" else "" for item in items],
                             [item.score for item in items])


def stream_reply(services: Services, question: str, items: Sequence[Evidence], reader: str = "",
                 usage: Usage | None = None) -> Iterator[str]:
    """The answer the model profile allows: quotes (tiny) or the model's own answer (capable)."""
    if services.model_profile.writes:
        yield from stream_answer(services.llm, question, items, services.generation.answer_tokens, reader, usage=usage)
        return
    yield from quoted_answer(services, question, items)
