"""Adaptive retrieval (SlimPLM, issue #14): the small local model decides whether and what to look up in the
library's papers before the main model answers, once. Each answered question is logged (store/slim_log.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

from copilot import grounding
from copilot.errors import failure_sentence
from copilot.features.answers import answer_tables, table_text
from copilot.features.chat import ChatError, clean_question
from copilot.features.evidence_search import table_paper_hits
from copilot.llm import LLM, LLMError, build_llm
from copilot.methods import evidence, slim
from copilot.methods.slim import Retriever, SlimOptions, SlimTrace
from copilot.records import ARXIV_ID, Evidence
from copilot.services import Services
from copilot.store.slim_log import SlimClaimRecord, SlimItemRecord, SlimQuestionRecord, SlimRoleRecord


class MainModelFailed(ChatError):
    """The main model failed (after the proxy's decision); nothing of the question was stored."""


def proxy_llm(services: Services) -> LLM:
    """The proxy: the configured model itself when it is the local one (or a test's double), otherwise a local
    model built from the same settings (the packaged one unless COPILOT_LOCAL_MODEL names another)."""
    if services.llm.backend.name != "openai":
        return services.llm
    return build_llm(services.settings.model_copy(update={"llm": "local"}), services.db)


def paper_retriever(services: Services) -> Retriever:
    """The papers Chat's ranking puts first for a query (meaning and words fused, as Search ranks, with the filters
    the query states), each scored by its cosine to the query, or to `question` when given (SlimPLM's relevance
    floor, `slim_options`); a query that names stored papers by arXiv id gets those papers only (what was asked
    about; an id means nothing to the embedder)."""
    def retrieve(query: str, k: int, question: str | None = None) -> list[Evidence]:
        named = list(dict.fromkeys(m.group("base") for m in ARXIV_ID.finditer(query)))
        found = [Evidence(p.id, "paper", p.title, p.document, 1.0) for p in services.store.get_papers(named)][:k]
        if not found:
            vector = services.embedder.embed_one(query)
            found = (services.store.fetch("paper", table_paper_hits(services, query, vector, k))
                     or services.store.search("paper", vector, k))
        if question is None or question == query or not found:
            return found
        closeness = {hit.id: hit.score for hit in services.store.search(
            "paper", services.embedder.embed_cached([question])[0], len(found), ids=[item.id for item in found])}
        return [replace(item, score=closeness.get(item.id, 0.0)) for item in found]
    return retrieve


def slim_options(services: Services) -> SlimOptions:
    s, plan = services.settings, services.generation
    # a query the proxy wrote keeps only papers as close to the question as a row of Chat's table must be
    return SlimOptions(top_k=s.top_k, budget_tokens=plan.source_budget, item_tokens=plan.source_cap,
                       answer_tokens=plan.answer_tokens, unknown_threshold=s.slim_unknown_threshold,
                       query_floor=evidence.PAPER_FLOOR)


NOT_LOOKED_UP = ("Not looked up: the judge found this answerable without the library, and the tiny local model "
                 "writes no answer of its own. Ask it on the Ask tab for quoted sources, or configure a larger model.")


def quoting_writer(services: Services) -> slim.AnswerWriter:
    """The tiny profile's answer: quotes of the retrieved papers, and no model words when nothing was retrieved."""
    def write(question: str, items, usage) -> Iterator[str]:
        if not items:
            yield NOT_LOOKED_UP
            return
        # SlimPLM's queries made from the tiny proxy's draft reach papers of other topics: rows are ranked (and
        # kept) by the chat's own ranking for the question
        yield table_text(answer_tables(services, question, [items], by_question=True)[0], items)
    return write


def stream_adaptive(services: Services, question: str | None, user: str) -> Iterator[SlimTrace]:
    """SlimPLM over the library's papers, yielding the trace after every step and piece of the answer. The
    finished question is logged, then the trace is yielded once more with its `log_id`; a failure of the main
    model raises MainModelFailed and stores nothing. On the tiny profile the answer quotes the papers retrieved."""
    text, notice = clean_question(question, services.settings.max_input_chars)
    proxy = proxy_llm(services)
    writes = services.model_profile.writes
    asked_at = time.time()
    trace = SlimTrace(text)
    try:
        for trace in slim.stream(text, proxy=proxy, main=services.llm, retriever=paper_retriever(services),
                                 options=slim_options(services),
                                 answer_writer=None if writes else quoting_writer(services)):
            yield trace
    except LLMError as error:
        raise MainModelFailed(failure_sentence("The main model failed", error,
                                               "Plain Chat and Search still work.")) from None
    if notice:
        trace.notes.insert(0, notice)
    main_model = services.llm.info["model"] if writes else "quotes (no model)"
    trace.log_id = services.slim_log.add(log_record(trace, user, asked_at, proxy.info["model"], main_model))
    yield trace


def ask_adaptive(services: Services, question: str | None, user: str = "local") -> dict:
    """One question answered the SlimPLM way, without a UI: the answer, its citations and the decision trace."""
    trace = SlimTrace(question or "")
    for trace in stream_adaptive(services, question, user):  # noqa: B007 - drained to its last value
        pass
    logged = services.slim_log.get(trace.log_id) if trace.log_id is not None else None
    return {"mode": "slim", "question": trace.question, "answer": trace.answer, "citations": citations(trace),
            "notes": trace.notes, "log_id": trace.log_id, "trace": trace.as_dict(),
            "models": {"proxy": logged.proxy_model if logged else None, "main": services.llm.info["model"]}}


def citations(trace: SlimTrace) -> list[dict]:
    """The references the answer cites, by their label."""
    cited = []
    for key in grounding.cited(trace.answer):
        if key.isdigit() and 1 <= int(key) <= len(trace.items):
            item = trace.items[int(key) - 1]
            cited.append({"label": int(key), "id": item.id, "kind": item.kind, "title": item.title, "url": item.url})
    return cited


def log_record(trace: SlimTrace, user: str, asked_at: float, proxy_model: str, main_model: str) -> SlimQuestionRecord:
    return SlimQuestionRecord(
        user=user, asked_at=asked_at, question=trace.question, retrieved=trace.retrieved,
        decided_by=trace.decided_by, reason=trace.reason, forced_rule=trace.forced_rule,
        heuristic_answer=trace.heuristic_answer, judge_output=trace.judge_output, verdict=trace.verdict,
        decomposition=trace.decomposition, proxy_error=trace.proxy_error, answer=trace.answer,
        proxy_model=proxy_model, main_model=main_model,
        claims=tuple(SlimClaimRecord(c.text, c.query, c.verdict, c.judge_output) for c in trace.claims),
        items=tuple(SlimItemRecord(i.id, i.kind, i.title, round(i.score, 4), i.metadata.get("slim_query", ""))
                    for i in trace.items),
        roles=tuple(SlimRoleRecord(role, c.calls, c.prompt_tokens, c.completion_tokens, round(c.seconds, 3))
                    for role, c in trace.costs.items()))
