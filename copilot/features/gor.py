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
import time
from collections.abc import Callable, Sequence

import numpy as np

from copilot.features.gor_types import (
    FORMAT,
    GOR,  # noqa: F401 - re-exported: callers import it from here
    PLAIN,  # noqa: F401 - re-exported: callers import it from here
    ChosenNode,  # noqa: F401 - re-exported: callers import it from here
    GoROptions,
    PeriodAnswer,  # noqa: F401 - re-exported: callers import it from here
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
    # titled by its own words, never by the question it was made for: that is its author's alone (issue #41)
    return [gor.Record(row.id, gor.THOUGHT, row.text, vectors[row.id], tuple(s for s, _ in sources),
                       title=" ".join(row.text.split())[:120])
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
    query_vectors: np.ndarray | list = services.embedder.embed([q.question for q in wanted]) if wanted else []
    responses: list[SimulatedResponse] = []
    for number, (question, query) in enumerate(zip(wanted, query_vectors), start=1):
        scores = matrix @ query
        best = np.argsort(-scores, kind="stable")[:opts.response_k]
        items = [Evidence(ids[i], gor.PAPER if i < len(papers) else gor.RESPONSE, titles[i], texts[i],
                          float(scores[i])) for i in best]
        items = fit_budget(items, services.generation.source_budget,
                           item_tokens=services.generation.source_cap)
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
