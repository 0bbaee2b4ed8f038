"""`eval gor`: does Graph of Records choose better records than plain retrieval on a real period? (issue #16)

On held-out simulated questions of the period (written like the training ones, never trained on) GoR's top-6 is
compared with the top-6 by plain embedding cosine (= the network before training, by construction) and by BM25 on
the records' words, over the retrievable records (papers and stored thoughts):
- the training objective's own ranking metric: where the best node by BERTScore against the question's source
  paper (the InfoNCE positive) ranks (MRR, hit@6), and how much of the BERTScore top-6 the top-6 holds (overlap@6);
- coverage of the period's topics (the Trends clustering): for one question about the whole period, how many
  topics the top-6 spans; for one question per large topic, the share of the top-6 from that topic;
- with `answers`, ROUGE-L (F) of the local model's answer from each top-6 against the question's source text.
Training time (simulation, labels, epochs) and retrieval time per question are reported beside them.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from copilot.eval.metrics import rouge_l
from copilot.eval.report_files import json_text, write_files
from copilot.features import gor as feature
from copilot.methods import gor
from copilot.methods.topics import build_topics
from copilot.records import Evidence
from copilot.services import Services
from copilot.store.lexical import Bm25

METHODS = ("gor", "plain", "bm25")
TOPIC_QUESTIONS = 5


@dataclass
class GoREvalReport:
    meta: dict = field(default_factory=dict)
    heldout: dict = field(default_factory=dict)        # method → metrics on held-out questions
    trained_on: dict = field(default_factory=dict)     # method → metrics on the training questions
    coverage: dict = field(default_factory=dict)       # method → topic coverage
    answers: dict = field(default_factory=dict)        # method → ROUGE-L
    timing: dict = field(default_factory=dict)
    per_question: list[dict] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"meta": self.meta, "heldout": self.heldout, "trained_on": self.trained_on, "coverage": self.coverage,
                "answers": self.answers, "timing": self.timing, "per_question": self.per_question}


# --- BM25: the product's lexical ranker (store/lexical.py) over the records' texts ------------------------------
def bm25_scores(documents: Sequence[str], queries: Sequence[str]) -> np.ndarray:
    """[Q, N] BM25 scores of every document for every query."""
    index = Bm25([str(i) for i in range(len(documents))], documents)
    return np.array([index.scores(query) for query in queries], dtype=np.float64).reshape(len(queries),
                                                                                           len(documents))


# --- the run ---------------------------------------------------------------------------------------------------
def _restricted(scores: np.ndarray, keep: np.ndarray) -> np.ndarray:
    return scores[:, keep]


def run(services: Services, scope: feature.Scope, opts: feature.GoROptions | None = None, answers: int = 0,
        progress: Callable[[str], None] = lambda _: None) -> GoREvalReport:
    opts = opts or feature.GoROptions.from_settings(services.settings)
    report = GoREvalReport()
    clock = time.perf_counter()
    calls_before = _llm_seconds(services)
    prepared = feature.prepare(services, scope, opts, progress=progress)
    prepare_seconds = time.perf_counter() - clock
    graph, trained = prepared.graph, prepared.trained
    if trained is None:                 # prepare trains or loads a network; only an ask drops an unvalidated one
        raise ValueError(f"no trained network for {scope.label}")
    questions = prepared.simulation.questions
    train_q, held_q = opts.training_part(questions)
    if not held_q:
        raise ValueError(f"no held-out simulated question among the {len(questions)} written: raise "
                         "COPILOT_GOR_QUESTIONS")
    progress("labelling held-out questions (BERTScore)")
    tokens = prepared.token_vectors or services.embedder.token_vectors([n.text for n in graph.nodes])
    keep = graph.retrievable()
    nodes_gor = gor.node_embeddings(trained, graph)
    documents = [graph.nodes[i].text for i in np.flatnonzero(keep)]

    def metrics_for(qs) -> tuple[dict, np.ndarray, dict[str, np.ndarray]]:
        query_vectors, labels, _ = feature.labels_for(services, graph, qs, tokens)
        scored = {"gor": query_vectors @ nodes_gor.T, "plain": query_vectors @ graph.features.T}
        labels = _restricted(labels, keep)
        scored = {m: _restricted(s, keep) for m, s in scored.items()}
        kept_q = [q for q in qs if q.source_id in graph.index()]
        scored["bm25"] = bm25_scores(documents, [q.question for q in kept_q])
        return {m: gor.ranking_metrics(s, labels) for m, s in scored.items()}, labels, scored

    report.heldout, held_labels, held_scores = metrics_for(held_q)
    report.trained_on, _, _ = metrics_for(train_q)
    retrievable_nodes = [graph.nodes[i] for i in np.flatnonzero(keep)]
    for qi, question in enumerate(q for q in held_q if q.source_id in graph.index()):
        row = {"question": question.question, "source": question.source_id}
        for method, scores in held_scores.items():
            top = np.argsort(-scores[qi], kind="stable")[:opts.top_k]
            row[method] = [retrievable_nodes[i].id for i in top]
        report.per_question.append(row)

    progress("topic coverage")
    report.coverage = topic_coverage(services, scope, graph, keep, nodes_gor, opts)

    progress("timing retrieval")
    report.timing = {"prepare_seconds": round(prepare_seconds, 2),
                     "llm_seconds_during_prepare": round(_llm_seconds(services) - calls_before, 2),
                     **{k: v for k, v in prepared.meta.items() if k.endswith("seconds")},
                     "per_query_seconds": _per_query_seconds(services, graph, trained, held_q, opts)}
    if answers:
        report.answers = answer_quality(services, scope, graph, keep, held_q[:answers], held_scores, opts, progress)
    report.meta = {"scope": scope.label, "categories": list(scope.categories), "nodes": len(graph),
                   "retrievable": int(keep.sum()), "edges": len(graph.edges),
                   "papers": sum(n.kind == gor.PAPER for n in graph.nodes),
                   "thoughts": sum(n.kind == gor.THOUGHT for n in graph.nodes),
                   "responses": sum(n.kind == gor.RESPONSE for n in graph.nodes),
                   "train_questions": len(train_q), "heldout_questions": len(report.per_question),
                   "embedder": services.embedder.name, "llm": services.llm_info()["model"],
                   "settings": vars(opts.train), "response_k": opts.response_k, "k": opts.top_k,
                   "training": prepared.meta, "cpu": _cpu(), "load": _load()}
    return report


def _llm_seconds(services: Services) -> float:
    row = services.db.query_one("SELECT COALESCE(SUM(latency_s), 0) AS s FROM llm_calls")
    return float(row["s"]) if row else 0.0


def _per_query_seconds(services: Services, graph: gor.RecordGraph, trained: gor.Trained, questions, opts) -> dict:
    """Seconds per question: embedding it, and GoR's choice with the GNN forward pass over the whole graph
    (what the app does per question) against plain cosine."""
    texts = [q.question for q in questions] or ["What moved this period?"]
    started = time.perf_counter()
    vectors = services.embedder.embed(texts)
    embed = (time.perf_counter() - started) / len(texts)
    started = time.perf_counter()
    for v in vectors:
        gor.top_nodes(gor.node_embeddings(trained, graph), graph, v, opts.top_k)
    with_gnn = (time.perf_counter() - started) / len(texts)
    started = time.perf_counter()
    for v in vectors:
        gor.top_nodes(graph.features, graph, v, opts.top_k)
    plain = (time.perf_counter() - started) / len(texts)
    return {"embed_question": round(embed, 4), "gor_forward_and_rank": round(with_gnn, 4),
            "plain_rank": round(plain, 5)}


def node_topics(graph: gor.RecordGraph, paper_topic: dict[str, int]) -> list[int | None]:
    """A paper's topic; a record's: the most common topic of the papers its lineage reaches in the graph."""
    topics: list[int | None] = [paper_topic.get(n.id) for n in graph.nodes]
    incoming: dict[int, list[int]] = {}
    for source, target in graph.edges:
        incoming.setdefault(target, []).append(source)
    for i, _node in enumerate(graph.nodes):            # records come after their sources
        if topics[i] is None and incoming.get(i):
            found = [topics[s] for s in incoming[i] if topics[s] is not None]
            topics[i] = Counter(found).most_common(1)[0][0] if found else None
    return topics


def topic_coverage(services: Services, scope: feature.Scope, graph: gor.RecordGraph, keep: np.ndarray,
                   nodes_gor: np.ndarray, opts: feature.GoROptions) -> dict:
    papers, vectors = feature.scope_papers(services, scope, opts.cap)
    topics = build_topics(papers, vectors, scope.start, scope.end, None)
    paper_topic = {pid: t.index for t in topics for pid in t.paper_ids}
    of_node = node_topics(graph, paper_topic)
    retrievable = np.flatnonzero(keep)
    documents = [graph.nodes[i].text for i in retrievable]
    period_q = f"What did research in {scope.label} work on, across its topics?"
    topic_qs = [f"What did the papers on {t.label} find?" for t in topics[:TOPIC_QUESTIONS]]
    vectors_q = services.embedder.embed([period_q] + topic_qs)
    scored = {"gor": vectors_q @ nodes_gor[retrievable].T, "plain": vectors_q @ graph.features[retrievable].T,
              "bm25": bm25_scores(documents, [period_q] + topic_qs)}
    out = {"topics": len(topics), "topic_labels": [t.label for t in topics[:TOPIC_QUESTIONS]]}
    for method, scores in scored.items():
        tops = [retrievable[np.argsort(-row, kind="stable")[:opts.top_k]] for row in scores]
        spanned = len({of_node[i] for i in tops[0] if of_node[i] is not None})
        precision = [np.mean([of_node[i] == t.index for i in top]) for top, t in zip(tops[1:], topics)]
        out[method] = {"period_topics_in_top6": spanned,
                       "topic_precision@6": round(float(np.mean(precision)) if precision else 0.0, 4)}
    return out


def answer_quality(services: Services, scope: feature.Scope, graph: gor.RecordGraph, keep: np.ndarray, questions,
                   scores: dict[str, np.ndarray], opts: feature.GoROptions, progress) -> dict:
    """ROUGE-L of the local model's answer from each method's top-6 against the question's source paper."""
    from copilot.methods.thought_retriever import fit_budget

    retrievable = np.flatnonzero(keep)
    index = graph.index()
    out: dict[str, list[float]] = {m: [] for m in scores}
    for qi, question in enumerate(questions):
        reference = graph.nodes[index[question.source_id]].text
        for method, rows in scores.items():
            top = retrievable[np.argsort(-rows[qi], kind="stable")[:opts.top_k]]
            items = [Evidence(graph.nodes[i].id, graph.nodes[i].kind, graph.nodes[i].title, graph.nodes[i].text,
                              float(rows[qi][list(retrievable).index(i)])) for i in top]
            items = fit_budget(items, services.generation.source_budget,
                               item_tokens=services.generation.source_cap)
            answer, _, _ = feature.answer_from(services, question.question, items, scope.label,
                                               services.generation.answer_tokens)
            out[method].append(rouge_l(answer, reference))
        progress(f"answered held-out question {qi + 1} of {len(questions)} with every method")
    return {m: {"rouge_l": round(float(np.mean(v)), 4), "questions": len(v)} for m, v in out.items()}


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} × {os.cpu_count()}"
    except OSError:
        pass
    return f"{os.cpu_count()} cores"


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


# --- output ----------------------------------------------------------------------------------------------------
def markdown(report: GoREvalReport) -> str:
    m = report.meta
    k = m.get("k", gor.TOP_K)
    lines = [f"GoR on {m['scope']}: {m['nodes']} records ({m['papers']} papers, {m['thoughts']} thoughts, "
             f"{m['responses']} simulated answers; {m['edges']} lineage edges), {m['train_questions']} training and "
             f"{m['heldout_questions']} held-out simulated questions; {m['llm']}, {m['embedder']}; load {m['load']}; "
             f"{m['cpu']}", "",
             f"| method | held-out MRR | held-out hit@{k} | held-out overlap@{k} | train MRR | period topics in "
             f"top {k} | topic precision@{k} |" + (" ROUGE-L |" if report.answers else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if report.answers else "")]
    for method in METHODS:
        h, t, c = report.heldout[method], report.trained_on[method], report.coverage[method]
        row = (f"| {method} | {h['mrr']:.3f} | {h[f'hit@{k}']:.3f} | {h[f'overlap@{k}']:.3f} | {t['mrr']:.3f} | "
               f"{c['period_topics_in_top6']} of {report.coverage['topics']} | {c['topic_precision@6']:.3f} |")
        if report.answers:
            row += f" {report.answers[method]['rouge_l']:.3f} |"
        lines.append(row)
    timing = report.timing
    per = timing["per_query_seconds"]
    lines += ["", f"Preparing the scope took {timing['prepare_seconds']:.1f} s "
              f"(LLM {timing['llm_seconds_during_prepare']:.1f} s; "
              f"BERTScore labels {timing.get('label_seconds', 0):.1f} s; "
              f"training {timing.get('train_seconds', 0):.1f} s"
              f" for {m['settings']['epochs']} epochs). Per question: embedding {per['embed_question']:.3f} s, GoR "
              f"(GNN forward + ranking) {per['gor_forward_and_rank']:.3f} s, plain ranking {per['plain_rank']:.4f} s."]
    return "\n".join(lines)


def write_outputs(report: GoREvalReport, out_dir: Path, name: str) -> dict[str, Path]:
    return write_files(out_dir, {"json": (f"{name}.json", json_text(report.as_json())),
                                 "markdown": (f"{name}.md", markdown(report))})
