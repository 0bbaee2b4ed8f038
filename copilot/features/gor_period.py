"""Graph of Records in the app: "Ask about this period" answers at once (GoR's choice when the period's record graph
is trained and validated, plain retrieval otherwise), and training is an explicit action in the background, never
started by a question."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import date

import numpy as np

from copilot.features.gor import (
    GOR,
    PLAIN,
    ChosenNode,
    GoROptions,
    PeriodAnswer,
    Prepared,
    Scope,
    TooFewNodes,
    answer_from,
    corpus_version,
    gate_of,
    network_variant,
    not_validated_notice,
    paper_node,
    prepare,
    scope_graph,
    scope_papers,
)
from copilot.grounding import labels_to_ids
from copilot.llm import LLMError
from copilot.methods import gor, quotes
from copilot.methods.thought_retriever import fit_budget
from copilot.records import Evidence, date_number
from copilot.services import Services

log = logging.getLogger(__name__)


def quote_from(services: Services, question: str, nodes: Sequence[gor.Node], scores: Sequence[float]
               ) -> tuple[str, list[str], list[str]]:
    """The tiny profile's answer: quotes of the chosen records' whole texts, cited by id (methods.quotes)."""
    texts = [node.text for node in nodes]
    selection = quotes.select_quotes(services.embedder.embed_one(question), question, texts,
                                     services.embedder.embed_cached, list(scores))
    ids = [node.id for node in nodes]
    labelled = "".join(quotes.render(selection, [node.title or node.text[:120] for node in nodes], list(scores)))
    return labels_to_ids(labelled, ids), [ids[q.source] for q in selection.quotes], []



# --- training in the background (the app) ------------------------------------------------------------------
_progress_lock = threading.Lock()


def training_status(services: Services, scope: Scope, opts: GoROptions | None = None) -> dict:
    """{'state': 'idle' | 'running' | 'ready' | 'failed' | 'too small', 'stage': …} of a scope in this process."""
    opts = opts or GoROptions.from_settings(services.settings)
    key = scope.key(opts)
    with _progress_lock:
        status = dict(services.gor_progress.get(key, {}))
    if status.get("state") in ("running", "failed", "too small"):
        return status
    stored = services.gor_cache.network(key, corpus_version(services), network_variant(services, opts))
    if stored is not None:
        validated, why = gate_of(stored.meta)
        verdict = "" if validated else f"; not used: {why}"
        return {"state": "ready", "stage": f"trained on {stored.meta.get('questions')} simulated questions over "
                                           f"{stored.meta.get('nodes')} records{verdict}", "meta": stored.meta}
    return status or {"state": "idle", "stage": "not trained yet"}


def _set_status(services: Services, key: str, **status) -> None:
    with _progress_lock:
        services.gor_progress[key] = status


def start_training(services: Services, scope: Scope, opts: GoROptions | None = None, user: str | None = None
                   ) -> dict:
    """Train the scope on the GoR background thread unless it is trained or training; returns its status."""
    opts = opts or GoROptions.from_settings(services.settings)
    key = scope.key(opts)
    status = training_status(services, scope, opts)
    if status["state"] in ("running", "ready", "too small"):
        return status
    papers, _ = scope_papers(services, scope, opts.cap)
    if len(papers) < opts.min_nodes:
        _set_status(services, key, state="too small", stage=f"{len(papers)} papers in {scope.label}: too few to "
                    f"train the record graph on (at least {opts.min_nodes})")
        return training_status(services, scope, opts)
    _set_status(services, key, state="running", stage="queued", started=time.time())

    def job() -> None:
        try:
            prepare(services, scope, opts, user,
                    progress=lambda stage: _set_status(services, key, state="running", stage=stage))
        except TooFewNodes as error:
            _set_status(services, key, state="too small", stage=str(error))
            return
        except Exception as error:  # the job thread must record why, or the page waits forever
            log.exception("GoR training failed")
            _set_status(services, key, state="failed", stage=f"training failed: {error}")
            return
        with _progress_lock:
            services.gor_progress.pop(key, None)

    services.gor_jobs.submit(key, job)
    return training_status(services, scope, opts)


# Measured (issue #29): training a month of 1,000 papers took ~11 minutes at full CPU with the packaged model.
TRAINING_MINUTES = 11


def plain_notice(status: dict) -> str:
    """Why an answer used plain retrieval, for a scope whose record graph is not ready."""
    state = status.get("state")
    if state == "running":
        return (f"Plain retrieval: the record graph of this period is training ({status.get('stage')}); ask again "
                "when it is ready to get Graph of Records' choice.")
    if state in ("too small", "failed"):
        return f"Plain retrieval: {status.get('stage')}."
    return ("Plain retrieval: this period's record graph is not trained. Training it (\"Train the record graph\") "
            f"takes about {TRAINING_MINUTES} minutes of full CPU for a month of papers.")


# --- asking ------------------------------------------------------------------------------------------------
def _evidence(node: gor.Node, score: float) -> Evidence:
    return Evidence(node.id, node.kind, node.title, node.text, score)


def plain_choice(graph: gor.RecordGraph, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Top-k retrievable nodes by cosine of their embedder vectors: the baseline GoR is measured against."""
    return gor.top_nodes(graph.features, graph, query, k)


def with_period_papers(services: Services, scope: Scope, graph: gor.RecordGraph, query: np.ndarray, k: int
                       ) -> gor.RecordGraph:
    """The graph with the period's k papers nearest the question added, from all its papers, not only the capped
    even sample the graph holds (issue #59 item 7: on agents and tool use, over two months of 1,700 papers, the
    300-paper sample held none of the tool-use papers, and a legal evaluation "tool" paper was quoted)."""
    papers = services.store.papers_between(date_number(scope.start), date_number(scope.end),
                                           list(scope.categories) or None)
    have = {node.id for node in graph.nodes}
    vectors = services.store.paper_embeddings([p.id for p in papers if p.id not in have])
    fresh = [p for p in papers if p.id in vectors]
    if not fresh:
        return graph
    matrix = np.stack([vectors[p.id] for p in fresh]).astype(np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    nearest = np.argsort(-(matrix @ np.asarray(query, dtype=np.float32)), kind="stable")[:k]
    return gor.RecordGraph(graph.nodes + [paper_node(fresh[i]) for i in nearest],
                           np.vstack([graph.features, matrix[nearest]]), graph.edges)


def ask_period(services: Services, scope: Scope, question: str, opts: GoROptions | None = None,
               user: str | None = None, train: bool = False,
               progress: Callable[[str], None] = lambda _: None) -> PeriodAnswer:
    """Answer `question` from the scope's top-6 records. `train`: prepare the scope now if needed (the command
    line); otherwise a scope without a trained network is answered at once by plain retrieval, and its training
    is left to the user's explicit action (`start_training`)."""
    opts = opts or GoROptions.from_settings(services.settings)
    question = " ".join(question.split())
    if not question:
        raise ValueError("type a question about the period")
    seconds: dict[str, float] = {}
    notices: list[str] = []
    clock = time.perf_counter()
    prepared: Prepared | None = None
    if train:
        try:
            prepared = prepare(services, scope, opts, user, progress)
        except TooFewNodes as error:
            notices.append(f"Plain retrieval: {error}.")
    else:   # never trains unasked: training is its own action (start_training)
        status = training_status(services, scope, opts)
        if status["state"] == "ready":
            prepared = prepare(services, scope, opts, user)
        else:
            notices.append(plain_notice(status))
    seconds["prepare"] = time.perf_counter() - clock
    clock = time.perf_counter()
    query = services.embedder.embed_one(question)
    if prepared is not None and prepared.trained is not None and not gate_of(prepared.meta)[0]:
        notices.append(not_validated_notice(prepared.meta))
        prepared.trained = None
    if prepared is not None and prepared.trained is not None:
        graph = prepared.graph
        chosen, by = gor.top_nodes(gor.node_embeddings(prepared.trained, graph), graph, query, opts.top_k), GOR
    else:
        graph = prepared.graph if prepared else scope_graph(services, scope, opts, None, user)
        if not len(graph):
            raise ValueError(f"no papers in {scope.label}")
        graph = with_period_papers(services, scope, graph, query, opts.top_k)
        chosen, by = plain_choice(graph, query, opts.top_k), PLAIN
    seconds["retrieve"] = time.perf_counter() - clock
    items = fit_budget([_evidence(graph.nodes[i], s) for i, s in chosen], services.generation.source_budget,
                       item_tokens=services.generation.source_cap)
    clock = time.perf_counter()
    try:
        if services.model_profile.tiny:
            answer, cited, notes = quote_from(services, question, [graph.nodes[i] for i, _ in chosen][:len(items)],
                                              [s for _, s in chosen][:len(items)])
        else:
            answer, cited, notes = answer_from(services, question, items, scope.label,
                                               services.generation.answer_tokens)
    except LLMError as error:
        answer, cited, notes = "", [], [f"The model could not answer: {error}"]
    if not answer.strip() and not any(n.startswith("The model could not") for n in notes):
        notes.append("Nothing of the model's answer passed the output checks; the records it was given are "
                     "listed below.")
    seconds["answer"] = time.perf_counter() - clock
    nodes = [ChosenNode(graph.nodes[i].id, graph.nodes[i].kind, graph.nodes[i].title, s) for i, s in chosen]
    return PeriodAnswer(question, answer, cited, nodes[:len(items)], by, notices + notes, seconds)


def scope_for(start: date, end: date, categories: Sequence[str] | None = None) -> Scope:
    return Scope(start, end, tuple(sorted(c for c in (categories or []) if c)))


