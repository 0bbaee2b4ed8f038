"""Ask about a period: a free question answered from the records GoR chooses (issue #16, methods.md §5).

A scope is a Trends period (and its categories). Preparing it: its papers (the Trends selection without a profile,
capped), the stored thoughts whose lineage touches them, simulated questions written by the LLM from random papers
(cached), the LLM's answers to the training questions as response records (cached), BERTScore labels, and the
training of the graph network (cached per scope and corpus version; written only once finished). Asking: with a
trained network, the top-6 retrievable nodes by query · GNN(node); without one (still training, or too few nodes),
the top-6 by plain embedding cosine, and the answer says so. Training runs on one background thread in the app, in
the foreground on the command line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from datetime import date

import numpy as np

from copilot.features.gor_types import (
    FORMAT,
    GOR,
    PLAIN,
    ChosenNode,
    GoROptions,
    PeriodAnswer,
    Prepared,
    Scope,
    TooFewNodes,
)
from copilot.features.trends import corpus_version, select_papers
from copilot.grounding import check_chat_answer, labels_to_ids
from copilot.grounding import cited as cited_keys
from copilot.llm import LLMError
from copilot.methods import gor
from copilot.methods.thought_retriever import fit_budget
from copilot.methods.topics import previous_window
from copilot.prompts import (
    GOR_PERIOD_ANSWER,
    GOR_PERIOD_STATEMENTS,
    GOR_SIMULATED_QUESTION,
    question_grammar,
    source_block,
    statements_grammar,
)
from copilot.records import Evidence, Paper
from copilot.services import Services
from copilot.store.gor_cache import SimulatedQuestion, SimulatedResponse, Simulation

log = logging.getLogger(__name__)

# --- keys ---------------------------------------------------------------------------------------------------
def network_variant(services: Services, opts: GoROptions) -> str:
    s = opts.train
    return json.dumps([FORMAT, "validated-split", services.embedder.name, services.llm_info()["model"],
                       opts.train_questions,
                       opts.responses, opts.response_k, s.epochs, s.lr, s.alpha, s.tau, s.dropout, s.heads, s.seed])


def _seed(key: str) -> int:
    return int(hashlib.sha1(key.encode("utf-8")).hexdigest()[:8], 16)


# --- the scope's graph --------------------------------------------------------------------------------------
def paper_node(paper: Paper) -> gor.Node:
    return gor.Node(paper.id, gor.PAPER, f"{paper.title}\n{paper.abstract}", paper.title)


def scope_papers(services: Services, scope: Scope, cap: int) -> tuple[list[Paper], np.ndarray]:
    papers, vectors, _ = select_papers(services, scope.start, scope.end, list(scope.categories), None, cap)
    return papers, vectors


def thought_records(services: Services, item_ids: Sequence[str], user: str | None) -> list[gor.Record]:
    found = services.thoughts.live_touching(item_ids, user)
    vectors = services.thoughts.vectors_of([row.id for row, _ in found])
    return [gor.Record(row.id, gor.THOUGHT, row.text, vectors[row.id], tuple(s for s, _ in sources),
                       title=row.question[:120])
            for row, sources in found if row.id in vectors]


def response_records(services: Services, simulation: Simulation, opts: GoROptions) -> list[gor.Record]:
    """The simulated answers to training questions (never to held-out ones: those would lead to their paper)."""
    training = {q.question for q in opts.training_part(simulation.questions)[0]}
    responses = [r for r in simulation.responses if r.question in training]
    if not responses:
        return []
    vectors = services.embedder.embed([r.text for r in responses])
    return [gor.Record(r.id, gor.RESPONSE, r.text, v, r.sources, title=r.question)
            for r, v in zip(responses, vectors)]


def scope_graph(services: Services, scope: Scope, opts: GoROptions, simulation: Simulation | None,
                user: str | None) -> gor.RecordGraph:
    papers, vectors = scope_papers(services, scope, opts.cap)
    paper_nodes = [paper_node(p) for p in papers]
    records = thought_records(services, [p.id for p in papers], user)
    if simulation:
        records += response_records(services, simulation, opts)
    return gor.build_graph(paper_nodes, vectors, records)


def negatives_graph(services: Services, scope: Scope, opts: GoROptions) -> gor.RecordGraph | None:
    """The previous window's papers: an unrelated graph whose nodes serve as in-batch negatives (as the paper's
    other documents do)."""
    before = Scope(*previous_window(scope.start, scope.end), scope.categories)
    papers, vectors = scope_papers(services, before, opts.negatives_cap)
    return gor.build_graph([paper_node(p) for p in papers], vectors, []) if papers else None


# --- simulation: questions and the answers to them --------------------------------------------------------
# A simulated question is kept only when it is about its paper: the 135M model, even under the question grammar,
# writes "What is the answer to this question?" or "What is the purpose of this paper?" for about half the papers
# (seen in llm_calls). The paper notes the need for such a filter among its limitations.
_GENERIC = re.compile(r"\b(?:this|the|our|your) (?:paper|question|answer|study|research|article|work)\b"
                      r"|\byou\b|\byour\b|\bour\b|\bI\b", re.I)
_WORD = re.compile(r"[a-z][a-z0-9-]{3,}")
_PLAIN_WORDS = frozenset("what which does have with that this from into about purpose answer question used using "
                         "they their there when where whom will would could should been being more most some such "
                         "than then these those help improve main role".split())
MIN_SHARED_WORDS = 2


def about_its_paper(question: str, paper: Paper) -> bool:
    """No generic reference ("this paper", "you"), and at least MIN_SHARED_WORDS content words of the paper, a
    word of its title counting twice ("What is the purpose of BioProBench?" is about the BioProBench paper)."""
    if _GENERIC.search(question):
        return False
    words = set(_WORD.findall(question.lower())) - _PLAIN_WORDS
    title = set(_WORD.findall(paper.title.lower()))
    shared = words & (title | set(_WORD.findall(paper.abstract.lower())))
    return len(shared) + len(shared & title) >= MIN_SHARED_WORDS


def write_question(services: Services, paper: Paper, opts: GoROptions) -> str:
    text = paper.abstract[:opts.quote_chars].rsplit(" ", 1)[0] if len(paper.abstract) > opts.quote_chars \
        else paper.abstract
    prompt = GOR_SIMULATED_QUESTION.render(source=source_block(paper.id, f"{paper.title}\n{text}"))
    grammar = question_grammar() if services.llm.obeys_grammar else None
    out = services.llm.complete(prompt, max_tokens=opts.question_tokens, temperature=0.5, grammar=grammar)
    line = " ".join(out.strip().split("\n")[0].split())
    return line if line.endswith("?") and about_its_paper(line, paper) else ""


def simulate_questions(services: Services, papers: Sequence[Paper], opts: GoROptions, seed: int,
                       progress: Callable[[str], None]) -> list[SimulatedQuestion]:
    """`opts.questions` distinct questions about their papers, each from a randomly drawn paper (at most four
    tries per question)."""
    order = gor.choose_sources(4 * opts.questions, len(papers), seed)
    questions: list[SimulatedQuestion] = []
    seen: set[str] = set()
    for index in order:
        if len(questions) >= opts.questions:
            break
        try:
            text = write_question(services, papers[index], opts)
        except LLMError as error:
            log.warning("simulated question failed: %s", error)
            continue
        if text and text.lower() not in seen:
            seen.add(text.lower())
            questions.append(SimulatedQuestion(text, papers[index].id))
            progress(f"simulated question {len(questions)} of {opts.questions}")
    return questions


def answer_from(services: Services, question: str, items: Sequence[Evidence], period: str, max_tokens: int
                ) -> tuple[str, list[str], list[str]]:
    """(checked answer with [id] citations, cited ids, notes of the checks) from the numbered items."""
    blocks = "\n".join(source_block(str(n), item.text) for n, item in enumerate(items, 1))
    prompt = GOR_PERIOD_ANSWER.render(period=period, question=question, sources=blocks)
    labels = [str(n) for n in range(1, len(items) + 1)]
    grammar = statements_grammar(labels, GOR_PERIOD_STATEMENTS, opener="Source") if services.llm.obeys_grammar \
        else None
    text = services.llm.complete(prompt, max_tokens=max_tokens, temperature=0.1, grammar=grammar).strip()
    ids = [item.id for item in items]
    checked = check_chat_answer(text, ids, [i.text for i in items], [GOR_PERIOD_ANSWER.system],
                                statements=grammar is not None)
    answer = labels_to_ids(checked.text, ids)
    cited = [ids[int(n) - 1] for n in dict.fromkeys(cited_keys(checked.text)) if n.isdigit() and
             0 < int(n) <= len(ids)]
    return answer, cited, checked.notes


def simulate_responses(services: Services, papers: Sequence[Paper], vectors: np.ndarray,
                       questions: Sequence[SimulatedQuestion], opts: GoROptions, period: str,
                       progress: Callable[[str], None]) -> list[SimulatedResponse]:
    """RAG over the scope for each training question, as the paper builds its graph: the `response_k` records
    closest to the question (papers and the responses written so far) → the LLM's answer, a response record with
    an edge from each of them."""
    texts = [f"{p.title}\n{p.abstract}" for p in papers]
    ids = [p.id for p in papers]
    titles = [p.title for p in papers]
    matrix = np.asarray(vectors, dtype=np.float32)
    wanted = list(questions[:opts.responses])
    query_vectors = services.embedder.embed([q.question for q in wanted]) if wanted else []
    responses: list[SimulatedResponse] = []
    for number, (question, query) in enumerate(zip(wanted, query_vectors), start=1):
        scores = matrix @ query
        best = np.argsort(-scores, kind="stable")[:opts.response_k]
        items = [Evidence(ids[i], gor.PAPER if i < len(papers) else gor.RESPONSE, titles[i], texts[i],
                          float(scores[i])) for i in best]
        items = fit_budget(items, services.settings.answer_budget_tokens,
                           item_tokens=services.settings.source_cap_tokens)
        try:
            answer, _, _ = answer_from(services, question.question, items, period, opts.response_tokens)
        except LLMError as error:
            log.warning("simulated response failed: %s", error)
            continue
        if len(answer.split()) < 6:
            continue
        response = SimulatedResponse(f"R{number}", question.question, answer, tuple(i.id for i in items))
        responses.append(response)
        vector = services.embedder.embed_one(answer)
        matrix = np.vstack([matrix, vector[None, :]])
        texts.append(answer)
        ids.append(response.id)
        titles.append(question.question)
        progress(f"simulated answer {len(responses)} of {len(wanted)}")
    return responses


def simulation_for(services: Services, scope: Scope, opts: GoROptions, papers: Sequence[Paper], vectors: np.ndarray,
                   progress: Callable[[str], None]) -> Simulation:
    key, corpus = scope.key(opts), corpus_version(services)
    model = json.dumps([services.llm_info()["model"], opts.questions, opts.train_questions, opts.responses,
                        opts.response_k])
    cached = services.gor_cache.simulation(key, corpus, model)
    if cached is not None and cached.questions:
        return cached
    questions = simulate_questions(services, papers, opts, _seed(key), progress)
    train, _ = opts.training_part(questions)
    responses = simulate_responses(services, papers, vectors, train, opts, scope.label, progress)
    simulation = Simulation(questions, responses)
    services.gor_cache.put_simulation(key, corpus, model, simulation)
    return simulation


# --- preparing a scope: simulate, label, train ------------------------------------------------------------
def labels_for(services: Services, graph: gor.RecordGraph, questions: Sequence[SimulatedQuestion],
               token_vectors: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """(query vectors [Q, d], BERTScore labels [Q, N], every node's token vectors) for questions whose source
    paper is in the graph."""
    where = graph.index()
    kept = [q for q in questions if q.source_id in where]
    if token_vectors is None:
        token_vectors = services.embedder.token_vectors([n.text for n in graph.nodes])
    labels = gor.label_matrix([where[q.source_id] for q in kept], token_vectors) if kept else \
        np.zeros((0, len(graph)), np.float32)
    queries = services.embedder.embed([q.question for q in kept]) if kept else \
        np.zeros((0, graph.features.shape[1]), np.float32)
    return queries, labels, token_vectors


def prepare(services: Services, scope: Scope, opts: GoROptions | None = None, user: str | None = None,
            progress: Callable[[str], None] = lambda _: None, should_stop: Callable[[], bool] | None = None,
            retrain: bool = False) -> Prepared:
    """The scope's graph with its trained network, from the cache when one was trained for this scope, corpus
    version and setting; else simulated, labelled, trained and stored. Raises TooFewNodes on a small scope and
    gor.TrainingStopped when asked to stop (nothing is stored then)."""
    opts = opts or GoROptions.from_settings(services.settings)
    key, corpus, variant = scope.key(opts), corpus_version(services), network_variant(services, opts)
    services.gor_cache.drop_stale(key, corpus)
    papers, vectors = scope_papers(services, scope, opts.cap)
    if len(papers) < opts.min_nodes:
        raise TooFewNodes(f"{len(papers)} papers in {scope.label}: too few to train the record graph on "
                          f"(at least {opts.min_nodes})")
    stored = None if retrain else services.gor_cache.network(key, corpus, variant)
    simulation = simulation_for(services, scope, opts, papers, vectors, progress)
    graph = scope_graph(services, scope, opts, simulation, user)
    if stored is not None:
        return Prepared(graph, gor.from_bytes(stored.weights), simulation, meta=stored.meta)
    progress("scoring every record against each question's paper (BERTScore)")
    started = time.perf_counter()
    train_questions, _ = opts.training_part(simulation.questions)
    queries, labels, tokens = labels_for(services, graph, train_questions)
    label_seconds = time.perf_counter() - started
    if len(queries) < 2:
        raise TooFewNodes(f"only {len(queries)} usable simulated questions for {scope.label}")

    def report(epoch: int, epochs: int, loss: float) -> None:
        if epoch == 1 or epoch % 10 == 0 or epoch == epochs:
            progress(f"training epoch {epoch} of {epochs} (loss {loss:.3f})")

    trained = gor.train(graph, queries, labels, opts.train, negatives_graph(services, scope, opts), report,
                        should_stop)
    meta = {"nodes": len(graph), "edges": len(graph.edges), "papers": len(papers),
            "thoughts": sum(n.kind == gor.THOUGHT for n in graph.nodes),
            "responses": sum(n.kind == gor.RESPONSE for n in graph.nodes), "questions": len(queries),
            "train_seconds": round(trained.seconds, 2), "label_seconds": round(label_seconds, 2),
            "final_loss": round(trained.losses[-1], 4), "first_loss": round(trained.losses[0], 4)}
    meta.update(validate(services, graph, trained, opts.training_part(simulation.questions)[1], tokens))
    services.gor_cache.put_network(key, corpus, variant, gor.to_bytes(trained), meta)
    return Prepared(graph, trained, simulation, tokens, meta)


def validate(services: Services, graph: gor.RecordGraph, trained: gor.Trained,
             held_out: Sequence[SimulatedQuestion], tokens: list[np.ndarray]) -> dict:
    """The trained network against plain retrieval on the held-out questions (MRR of the training objective's
    positive, over the retrievable records). `validated`: GoR did at least as well; otherwise answers use plain
    retrieval and say why. Too few held-out questions (`gor.gate`) is no evidence: plain retrieval is used."""
    queries, labels, _ = labels_for(services, graph, held_out, tokens)
    if not len(queries):
        return {"validated": False, "heldout_questions": 0, "gate": gor.gate(0, None, None)[1]}
    keep = graph.retrievable()
    ours = gor.ranking_metrics((queries @ gor.node_embeddings(trained, graph).T)[:, keep], labels[:, keep])
    plain = gor.ranking_metrics((queries @ graph.features.T)[:, keep], labels[:, keep])
    validated, why = gor.gate(len(queries), ours["mrr"], plain["mrr"])
    return {"validated": validated, "heldout_questions": len(queries), "gate": why,
            "heldout_mrr_gor": round(ours["mrr"], 4), "heldout_mrr_plain": round(plain["mrr"], 4)}


def gate_of(meta: dict) -> tuple[bool, str]:
    """`gor.gate` read again from a stored network's meta (one stored before the minimum existed is held to it)."""
    return gor.gate(meta.get("heldout_questions", 0), meta.get("heldout_mrr_gor"), meta.get("heldout_mrr_plain"))


def not_validated_notice(meta: dict) -> str:
    return (f"Plain retrieval chose these records: the record graph trained on this period is not used: "
            f"{gate_of(meta)[1]} (docs/gor-eval.md says why).")


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


# --- asking ------------------------------------------------------------------------------------------------
def _evidence(node: gor.Node, score: float) -> Evidence:
    return Evidence(node.id, node.kind, node.title, node.text, score)


def plain_choice(graph: gor.RecordGraph, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Top-k retrievable nodes by cosine of their embedder vectors: the baseline GoR is measured against."""
    return gor.top_nodes(graph.features, graph, query, k)


def ask_period(services: Services, scope: Scope, question: str, opts: GoROptions | None = None,
               user: str | None = None, train: bool = False,
               progress: Callable[[str], None] = lambda _: None) -> PeriodAnswer:
    """Answer `question` from the scope's top-6 records. `train`: prepare the scope now if needed (the command
    line); otherwise a scope without a trained network is answered by plain retrieval and its training started
    in the background (the app)."""
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
    else:
        status = start_training(services, scope, opts, user)
        if status["state"] == "ready":
            prepared = prepare(services, scope, opts, user)
        elif status["state"] == "too small":
            notices.append(f"Plain retrieval: {status['stage']}.")
        elif status["state"] == "failed":
            notices.append(f"Plain retrieval: the record graph's {status['stage']}.")
        else:
            notices.append("Plain retrieval: the record graph of this period is still training "
                           f"({status['stage']}); ask again when it is ready to get GoR's choice.")
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
        chosen, by = plain_choice(graph, query, opts.top_k), PLAIN
    seconds["retrieve"] = time.perf_counter() - clock
    items = fit_budget([_evidence(graph.nodes[i], s) for i, s in chosen], services.settings.answer_budget_tokens,
                       item_tokens=services.settings.source_cap_tokens)
    clock = time.perf_counter()
    try:
        answer, cited, notes = answer_from(services, question, items, scope.label, services.settings.answer_tokens)
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


