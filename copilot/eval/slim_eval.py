"""`eval slim`: does SlimPLM's adaptive retrieval pay? Always-retrieve, never-retrieve and SlimPLM answer the same
questions through the method's own code (`slim.run`, the baselines by `SlimOptions.retrieval`), and we compare
answer token-F1 against a short reference, retrieval rate, main-model calls per question (exactly 1 for SlimPLM),
proxy + judge tokens as a share of main-model tokens, seconds per question and, for questions about a recent paper,
whether that paper was among the references.

The dev question set (`make_questions`, `eval slim-questions`) is built without a model from the real corpus:
  - paper questions: a seeded sample of papers whose abstract has a sentence saying what it proposes
    ("we propose/introduce/present …"); the question names the title, alternately as "the paper \"<title>\""
    (the timeliness rule forces retrieval) and bare (the proxy's judge decides); the reference is that sentence;
  - general questions: CS knowledge a model has without retrieval, written by hand (GENERAL), gold = [].
Paper and general questions alternate, so `--limit N` takes both kinds.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from copilot.eval.answer_figures import (  # noqa: F401
    answer_figures,
    answer_tokens,
    mean_or_none,
    quoted_trace,
    token_f1,
)
from copilot.eval.report_files import json_text, write_files
from copilot.eval.thoughts_eval import JUDGE_MAX_TOKENS, verdict_line
from copilot.features.adaptive import paper_retriever, proxy_llm, slim_options
from copilot.features.library import ingestor
from copilot.llm import LLM, LLMError
from copilot.methods import slim
from copilot.methods.slim import JUDGE, MAIN, PROXY, REWRITE, Retriever, SlimTrace
from copilot.prompts import ACCURACY_JUDGE, ACCURACY_VERDICTS, accuracy_verdict_grammar, source_block
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row

STRATEGIES = ("always", "never", "adaptive")          # SlimOptions.retrieval; "adaptive" is SlimPLM
# also on request: "extractive", always-retrieve answered by quotes of the references (the tiny profile's chat answer)
ALL_STRATEGIES = (*STRATEGIES, "extractive")
LABELS = {"always": "always-retrieve", "never": "never-retrieve", "adaptive": "SlimPLM",
          "extractive": "always-retrieve, quoted"}
GROUPS = ("all", "paper", "general")
PAPER_TEMPLATES = ('What does the paper "{title}" propose?', "What does {title} propose?")

# General CS knowledge, in our own words: (question, short reference answer).
GENERAL: tuple[tuple[str, str], ...] = (
    ("What does a hash table do?", "A hash table stores key-value pairs and finds a value by hashing its key to a "
     "bucket, in constant expected time."),
    ("What is a binary search?", "Binary search finds an item in a sorted array by halving the search interval at "
     "each step, in logarithmic time."),
    ("What is a stack data structure?", "A stack is a last-in first-out collection with push and pop operations."),
    ("What is a queue data structure?", "A queue is a first-in first-out collection: items are added at the back "
     "and removed from the front."),
    ("What is recursion in programming?", "Recursion is when a function calls itself on a smaller instance of the "
     "problem until it reaches a base case."),
    ("What is the time complexity of merge sort?", "Merge sort runs in O(n log n) time in every case."),
    ("What does a compiler do?", "A compiler translates source code in a high-level language into machine code or "
     "another lower-level language."),
    ("What is an operating system?", "An operating system manages a computer's hardware and provides services such "
     "as processes, memory and files to programs."),
    ("What is a linked list?", "A linked list is a sequence of nodes where each node holds a value and a pointer "
     "to the next node."),
    ("What is a binary search tree?", "A binary search tree keeps keys so that each node's left subtree holds "
     "smaller keys and its right subtree larger keys."),
    ("What is gradient descent?", "Gradient descent minimizes a function by repeatedly stepping in the direction "
     "of the negative gradient."),
    ("What is overfitting in machine learning?", "Overfitting is when a model fits the training data too closely, "
     "noise included, and generalizes poorly to new data."),
    ("What is a neural network?", "A neural network is a model of layers of connected units that compute weighted "
     "sums followed by nonlinear activations."),
    ("What does backpropagation compute?", "Backpropagation computes the gradient of the loss with respect to every "
     "weight of a neural network by the chain rule."),
    ("What is a convolutional neural network?", "A convolutional neural network applies learned filters across an "
     "input such as an image to detect local patterns."),
    ("What is a recurrent neural network?", "A recurrent neural network processes a sequence step by step, keeping "
     "a hidden state that carries information forward."),
    ("What is the attention mechanism in transformers?", "Attention lets each token weigh all other tokens by the "
     "similarity of queries and keys and mix their values."),
    ("What is a transformer model?", "A transformer is a neural network built from self-attention and feed-forward "
     "layers that processes all tokens of a sequence in parallel."),
    ("What is tokenization in natural language processing?", "Tokenization splits text into units such as words or "
     "subwords that a model processes."),
    ("What is a word embedding?", "A word embedding represents a word as a dense vector so that similar words have "
     "nearby vectors."),
    ("What is supervised learning?", "Supervised learning trains a model on inputs paired with labels so it can "
     "predict labels for new inputs."),
    ("What is unsupervised learning?", "Unsupervised learning finds structure such as clusters in data without "
     "labels."),
    ("What is reinforcement learning?", "Reinforcement learning trains an agent to act in an environment so as to "
     "maximize cumulative reward."),
    ("What is k-means clustering?", "K-means splits data into k clusters by assigning each point to the nearest "
     "centroid and recomputing the centroids."),
    ("What is a decision tree?", "A decision tree predicts by following a series of feature tests from the root to "
     "a leaf that holds the prediction."),
    ("What is cross-validation?", "Cross-validation estimates a model's performance by training and testing it on "
     "different splits of the data."),
    ("What is regularization in machine learning?", "Regularization adds a penalty on model complexity, such as "
     "the size of the weights, to reduce overfitting."),
    ("What is dropout in neural networks?", "Dropout randomly sets a fraction of units to zero during training to "
     "reduce overfitting."),
    ("What is a loss function?", "A loss function measures how far a model's predictions are from the targets; "
     "training minimizes it."),
    ("What is precision in classification?", "Precision is the fraction of predicted positives that are actually "
     "positive."),
    ("What is recall in classification?", "Recall is the fraction of actual positives that the model finds."),
    ("What is a relational database?", "A relational database stores data in tables of rows and columns and is "
     "queried with SQL."),
    ("What does SQL stand for?", "SQL stands for Structured Query Language, the language for querying relational "
     "databases."),
    ("What is a database index?", "A database index is a data structure, often a B-tree, that speeds up finding "
     "rows by a column's value."),
    ("What is a transaction in databases?", "A transaction is a group of operations executed as one unit that "
     "either all succeed or all fail."),
    ("What is TCP?", "TCP is a transport protocol that gives reliable, ordered delivery of a byte stream over a "
     "connection."),
    ("What is the difference between TCP and UDP?", "TCP is connection-oriented and reliable; UDP sends datagrams "
     "without connection, ordering or delivery guarantees."),
    ("What does DNS do?", "DNS translates domain names into IP addresses."),
    ("What is HTTP?", "HTTP is the protocol web browsers and servers use to request and send web pages and other "
     "resources."),
    ("What is public-key cryptography?", "Public-key cryptography uses a pair of keys: a public key to encrypt or "
     "verify and a private key to decrypt or sign."),
    ("What is a cryptographic hash function?", "A cryptographic hash function maps data to a fixed-size digest that "
     "is hard to invert or to find collisions for."),
    ("What is a deadlock?", "A deadlock is when processes wait forever for resources held by each other."),
    ("What is a thread in computing?", "A thread is a unit of execution within a process that shares the process's "
     "memory with other threads."),
    ("What is virtual memory?", "Virtual memory gives each process its own address space, mapped to physical memory "
     "and disk by the operating system."),
    ("What is a cache in computer architecture?", "A cache is a small fast memory that keeps copies of frequently "
     "used data close to the processor."),
    ("What is Big O notation?", "Big O notation describes an upper bound on how an algorithm's running time or "
     "memory grows with the input size."),
    ("What is dynamic programming?", "Dynamic programming solves a problem by combining solutions of overlapping "
     "subproblems, each computed once and stored."),
    ("What does Dijkstra's algorithm compute?", "Dijkstra's algorithm computes shortest paths from one source in a "
     "graph with non-negative edge weights."),
    ("What is breadth-first search?", "Breadth-first search explores a graph level by level from a start node, "
     "using a queue."),
    ("What is depth-first search?", "Depth-first search explores a graph by going as deep as possible along each "
     "branch before backtracking."),
    ("What is a graph in computer science?", "A graph is a set of nodes connected by edges."),
    ("What is version control?", "Version control records changes to files over time so that versions can be "
     "compared, restored and merged; git is an example."),
    ("What is an API?", "An API is a defined interface through which programs request services or data from other "
     "software."),
    ("What is a large language model?", "A large language model is a neural network trained on large amounts of "
     "text to predict the next token, used to generate and understand text."),
    ("What is transfer learning?", "Transfer learning reuses a model trained on one task as the starting point for "
     "another task."),
)


# --- the dev question set -----------------------------------------------------------------------------------------
_PROPOSES = re.compile(r"\b(?:we|this (?:paper|work|study)|in this (?:paper|work))\b[^.]*?\b(?:propose|introduce|"
                       r"present)s?\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def proposal_sentence(abstract: str) -> str | None:
    """The abstract's first sentence saying what the paper proposes, 8-60 words, or None."""
    for sentence in _SENTENCE_END.split(" ".join(abstract.split())):
        if _PROPOSES.search(sentence) and 8 <= len(sentence.split()) <= 60:
            return sentence
    return None


def make_questions(corpus: Path, seed: int = 0, papers: int | None = None) -> list[dict]:
    """The dev set: `papers` (default: as many as GENERAL) paper questions from a seeded sample of the corpus,
    alternating with the GENERAL questions; rows {question, answer, gold}."""
    papers = len(GENERAL) if papers is None else papers
    eligible = []
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            title, sentence = " ".join(row["title"].split()), proposal_sentence(row.get("summary") or "")
            if sentence and '"' not in title and 3 <= len(title.split()) <= 20:
                eligible.append((row["id"], title, sentence))
    chosen = random.Random(seed).sample(eligible, papers)
    paper_rows = [{"question": PAPER_TEMPLATES[n % 2].format(title=title), "answer": sentence, "gold": [pid]}
                  for n, (pid, title, sentence) in enumerate(chosen)]
    general_rows = [{"question": q, "answer": a, "gold": []} for q, a in GENERAL]
    rows = []
    for n in range(max(len(paper_rows), len(general_rows))):
        rows += paper_rows[n:n + 1] + general_rows[n:n + 1]
    return rows


def write_questions(rows: Sequence[dict], out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    os.replace(tmp, out)
    return out


def read_questions(path: Path, limit: int | None = None) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        row.setdefault("gold", [])
    return rows[:limit] if limit else rows


# --- the library -------------------------------------------------------------------------------------------------
def library_name(questions: Sequence[dict], distractors: int) -> str:
    gold = sorted({pid for row in questions for pid in row["gold"]})
    return f"slim-store-{hashlib.sha1(' '.join(gold).encode()).hexdigest()[:8]}-d{distractors}"


def prepare_library(services: Services, questions: Sequence[dict], corpus: Path, distractors: int) -> int:
    """Import the gold papers and the corpus's first `distractors` other papers through the product's ingestion;
    papers already stored are not embedded again. Returns the papers stored."""
    gold = {pid for row in questions for pid in row["gold"]}
    rows, others = [], 0
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if row["id"] in gold or others < distractors:
                others += row["id"] not in gold
                rows.append(row)
    stored = {p.id for p in services.store.get_papers([r["id"] for r in rows])}
    todo = [paper_from_row(r) for r in rows if r["id"] not in stored]
    if todo:
        ingestor(services).run("eval slim", todo)
    return services.store.count("paper")


# --- an LLM judge of answer accuracy (`--judge`) -----------------------------------------------------------------
_ACCURACY = re.compile(r"^(?:(?:verdict|grade|answer)\s*[:\-]?\s*)?(correct|incorrect)\s*[.!]?$", re.I)


def read_accuracy(output: str) -> str | None:
    """"correct" or "incorrect" when the judge's first line is clearly that word (optionally "Verdict: …"), else
    None (counted as unparseable, never as either)."""
    found = _ACCURACY.match(verdict_line(output))
    return found.group(1).lower() if found else None


def judge_accuracy(judge: LLM, row: dict, answer: str) -> dict:
    """The judge's verdict on one answer against the row's reference answer; the prompt does not say how the
    answer was made. A failed judge call is recorded, not raised."""
    rendered = ACCURACY_JUDGE.render(question=row["question"], reference=source_block("reference", row["answer"]),
                                     answer=source_block("answer", answer))
    grammar = accuracy_verdict_grammar() if judge.obeys_grammar else None
    try:
        output = judge.complete(rendered, max_tokens=JUDGE_MAX_TOKENS, temperature=0.0, grammar=grammar)
    except LLMError as error:
        return {"accuracy": None, "accuracy_output": "", "accuracy_error": str(error)[:200]}
    return {"accuracy": read_accuracy(output), "accuracy_output": output.strip()[:200]}


# --- the comparison --------------------------------------------------------------------------------------------
@dataclass
class SlimReport:
    summary: dict[str, dict[str, dict]]           # strategy → group → figures
    judge: dict[str, dict[str, int]]              # question kind → how SlimPLM decided → count
    per_question: list[dict]
    meta: dict = field(default_factory=dict)
    calibration: dict = field(default_factory=dict)   # how well the judge's P(unknown) separates the kinds

    def as_json(self) -> dict:
        return {"summary": self.summary, "judge": self.judge, "calibration": self.calibration,
                "per_question": self.per_question, "meta": self.meta}


def _tokens(trace: SlimTrace, roles: Sequence[str]) -> int:
    return sum(trace.costs[r].prompt_tokens + trace.costs[r].completion_tokens for r in roles)


def how_decided(trace: SlimTrace) -> str:
    """SlimPLM's decision for the judge table: forced, proxy failed, judged known, or the claim-level outcome."""
    if trace.decided_by != "judge":
        return trace.decided_by
    if trace.verdict == "known":
        return "judged known"
    all_known = trace.claims and not any(claim.needs_retrieval for claim in trace.claims)
    return f"judged {trace.verdict}: " + ("claims all known" if all_known else "retrieved")


def score_one(row: dict, strategy: str, trace: SlimTrace | None, seconds: float, error: str = "") -> dict:
    kind = "paper" if row["gold"] else "general"
    ids = [item.id for item in trace.items] if trace else []
    return {"question": row["question"], "kind": kind, "strategy": strategy, "error": error,
            "answer": trace.answer if trace else "", "f1": round(token_f1(trace.answer, row["answer"]), 4) if trace
            else 0.0, "retrieved": bool(trace and trace.retrieved), "items": ids,
            "gold_found": bool(set(row["gold"]) & set(ids)) if row["gold"] else None,
            "main_calls": trace.main_calls if trace else 0,
            "helper_tokens": _tokens(trace, (PROXY, REWRITE, JUDGE)) if trace else 0,
            "main_tokens": _tokens(trace, (MAIN,)) if trace else 0, "seconds": round(seconds, 3),
            "decided": how_decided(trace) if trace else "error",
            "heuristic_answer": trace.heuristic_answer if trace else "", "judge_output": trace.judge_output if trace
            else "", "p_unknown": trace.p_unknown if trace else None,
            "claims": [(c.text, c.query, c.verdict) for c in trace.claims] if trace else []}


def summarize(rows: Sequence[dict]) -> dict:
    if not rows:
        return {"questions": 0}
    paper = [r for r in rows if r["gold_found"] is not None]
    main_tokens = sum(r["main_tokens"] for r in rows)
    calls = [r["main_calls"] for r in rows]
    return {"questions": len(rows), "f1": round(sum(r["f1"] for r in rows) / len(rows), 4),
            "retrieval_rate": round(sum(r["retrieved"] for r in rows) / len(rows), 4),
            "gold_found": round(sum(r["gold_found"] for r in paper) / len(paper), 4) if paper else None,
            "main_calls_per_question": round(sum(calls) / len(rows), 4), "main_calls_min": min(calls),
            "main_calls_max": max(calls), "helper_token_share": round(sum(r["helper_tokens"] for r in rows)
                                                                       / main_tokens, 4) if main_tokens else None,
            "seconds_per_question": round(sum(r["seconds"] for r in rows) / len(rows), 3),
            "errors": sum(bool(r["error"]) for r in rows),
            "supported": mean_or_none([r.get("supported") for r in rows]),
            "key_quoted_when_retrieved": mean_or_none([r.get("key_quoted") for r in paper if r["gold_found"]]),
            **judged(rows)}


def judged(rows: Sequence[dict]) -> dict:
    """With `--judge`: the share of answers judged correct among those with a verdict, and how many had none."""
    if not any("accuracy" in r for r in rows):
        return {}
    verdicts = Counter(r.get("accuracy") for r in rows if "accuracy" in r)
    decided = verdicts["correct"] + verdicts["incorrect"]
    return {"judge_accuracy": round(verdicts["correct"] / decided, 4) if decided else None,
            "judge_verdicts": {v: verdicts[v] for v in ACCURACY_VERDICTS}, "judge_unparseable": verdicts[None]}


# --- the judge's calibration ----------------------------------------------------------------------------------------
CV_FOLDS = 5


def _balanced_accuracy(weighed: Sequence[tuple[float, bool]], decisions: Sequence[bool]) -> float:
    """Mean of the share of paper questions retrieved for and the share of general questions answered without."""
    paper = [d for d, (_, is_paper) in zip(decisions, weighed) if is_paper]
    general = [not d for d, (_, is_paper) in zip(decisions, weighed) if not is_paper]
    return (sum(paper) / len(paper) + sum(general) / len(general)) / 2


def best_threshold(weighed: Sequence[tuple[float, bool]]) -> float:
    """The P(unknown) threshold with the best balanced accuracy over `weighed` (probability, is a paper question);
    of equal ones the lowest, which retrieves more (the fail-safe side)."""
    candidates = sorted({p for p, _ in weighed})
    return max(candidates, key=lambda t: (_balanced_accuracy(weighed, [p >= t for p, _ in weighed]), -t))


def calibration(rows: Sequence[dict], threshold_in_use: float | None) -> dict:
    """How well the question-level judge's P(unknown) tells the questions that need papers (about a 2025–26 paper,
    which no model we run has seen) from general CS questions, over the questions it weighed: the AUC, and a
    threshold chosen by stratified cross-validation with its decisions on the held-out questions (a threshold chosen
    and scored on the same questions flatters itself; the held-out decisions do not)."""
    weighed = [(r["p_unknown"], r["kind"] == "paper") for r in rows
               if r["strategy"] == "adaptive" and r.get("p_unknown") is not None]
    papers = sum(is_paper for _, is_paper in weighed)
    if not papers or papers == len(weighed):
        return {}
    pairs = [(p, q) for p, is_paper in weighed if is_paper for q, other in weighed if not other]
    auc = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p, q in pairs) / len(pairs)
    fold_of: list[int] = []
    seen: Counter[bool] = Counter()
    for _, is_paper in weighed:                  # stratified: each kind dealt round the folds in turn
        fold_of.append(seen[is_paper] % CV_FOLDS)
        seen[is_paper] += 1
    held_out, thresholds = [True] * len(weighed), []
    for fold in range(CV_FOLDS):
        train = [w for w, f in zip(weighed, fold_of) if f != fold]
        if fold not in fold_of or all(p for _, p in train) or not any(p for _, p in train):
            continue                             # too few questions of one kind: the fold's questions retrieve
        threshold = best_threshold(train)
        thresholds.append(round(threshold, 4))
        for i, f in enumerate(fold_of):
            if f == fold:
                held_out[i] = weighed[i][0] >= threshold

    def retrieved(decisions: Sequence[bool], paper: bool) -> str:
        kind = [d for d, (_, is_paper) in zip(decisions, weighed) if is_paper == paper]
        return f"{sum(kind)}/{len(kind)}"

    in_use = [p >= threshold_in_use for p, _ in weighed] if threshold_in_use is not None else None
    return {"weighed": len(weighed), "auc": round(auc, 4), "best_threshold_all": round(best_threshold(weighed), 4),
            "cv_folds": CV_FOLDS, "cv_thresholds": thresholds,
            "cv_retrieved": {"paper": retrieved(held_out, True), "general": retrieved(held_out, False)},
            "cv_balanced_accuracy": round(_balanced_accuracy(weighed, held_out), 4),
            "threshold_in_use": threshold_in_use,
            "in_use_retrieved": ({"paper": retrieved(in_use, True), "general": retrieved(in_use, False)}
                                 if in_use is not None else None)}


def evaluate(services: Services, questions: Sequence[dict], strategies: Sequence[str] = STRATEGIES,
             retriever: Retriever | None = None, progress: Callable[[str], None] | None = None,
             answer_judge: LLM | None = None) -> SlimReport:
    """Every question through every strategy, with the product's proxy, main model, papers retriever and options;
    with an `answer_judge`, each answer also gets its verdict against the reference (judge_accuracy)."""
    proxy, retriever = proxy_llm(services), retriever or paper_retriever(services)
    base = slim_options(services)
    rows = []
    for n, row in enumerate(questions, 1):
        for strategy in strategies:
            started = time.perf_counter()
            try:
                table = None
                if strategy == "extractive":
                    trace, table = quoted_trace(services, row["question"], retriever, base.top_k)
                else:
                    trace = slim.run(row["question"], proxy=proxy, main=services.llm, retriever=retriever,
                                     options=replace(base, retrieval=strategy))
                rows.append(score_one(row, strategy, trace, time.perf_counter() - started))
                rows[-1].update(answer_figures(services, row, trace, table))
            except LLMError as error:
                rows.append(score_one(row, strategy, None, time.perf_counter() - started, str(error)[:200]))
            if answer_judge is not None:
                rows[-1].update(judge_accuracy(answer_judge, row, rows[-1]["answer"]) if rows[-1]["answer"] else
                                {"accuracy": None, "accuracy_output": "", "accuracy_error": "no answer"})
        if progress:
            progress(f"{n}/{len(questions)} " + " · ".join(f"{LABELS[r['strategy']]} F1 {r['f1']:.2f}"
                                                            for r in rows[-len(strategies):]))
    summary = {s: {g: summarize([r for r in rows if r["strategy"] == s and g in ("all", r["kind"])])
                   for g in GROUPS} for s in strategies}
    judge: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["strategy"] == "adaptive":
            judge.setdefault(r["kind"], Counter())[r["decided"]] += 1
    slim_calls = [r["main_calls"] for r in rows if r["strategy"] == "adaptive" and not r["error"]]
    meta = {"questions": len(questions), "strategies": list(strategies), "proxy_model": proxy.info["model"],
            "main_model": services.llm.info["model"], "slim_one_main_call": all(c == 1 for c in slim_calls),
            "answer_judge": answer_judge.info if answer_judge is not None else None}
    return SlimReport(summary, {k: dict(v) for k, v in judge.items()}, rows, meta,
                      calibration(rows, base.unknown_threshold))


# --- output -------------------------------------------------------------------------------------------------------
def _fmt(value, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(report: SlimReport) -> str:
    lines = ["| strategy | questions | token-F1 all / paper / general | retrieval rate all / paper / general | "
             "gold paper retrieved | main calls per question (min–max) | proxy+judge tokens ÷ main tokens | "
             "s per question | supported | key sentence quoted (gold retrieved) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for strategy, groups in report.summary.items():
        a, p, g = (groups[group] for group in GROUPS)
        if not a["questions"]:
            continue
        lines.append(f"| {LABELS[strategy]} | {a['questions']} | "
                     + " / ".join(_fmt(x.get("f1")) for x in (a, p, g)) + " | "
                     + " / ".join(_fmt(x.get("retrieval_rate")) for x in (a, p, g)) + f" | {_fmt(p.get('gold_found'))}"
                     f" | {_fmt(a['main_calls_per_question'])} ({a['main_calls_min']}–{a['main_calls_max']}) | "
                     f"{_fmt(a['helper_token_share'])} | {_fmt(a['seconds_per_question'], 1)} | "
                     f"{_fmt(a.get('supported'))} | {_fmt(p.get('key_quoted_when_retrieved'))} |")
    if report.judge:
        lines += ["", "| SlimPLM decided | " + " | ".join(report.judge) + " |",
                  "|---|" + "---|" * len(report.judge)]
        for decided in sorted({d for counts in report.judge.values() for d in counts}):
            lines.append(f"| {decided} | " + " | ".join(str(counts.get(decided, 0))
                                                         for counts in report.judge.values()) + " |")
    c = report.calibration
    if c:
        lines += ["", f"The question-level judge's P(unknown), over the {c['weighed']} questions it weighed: AUC "
                  f"{c['auc']:.2f} (paper questions above general ones); threshold by {c['cv_folds']}-fold "
                  f"cross-validation {', '.join(f'{t:.3f}' for t in c['cv_thresholds'])}, its held-out decisions "
                  f"retrieve for {c['cv_retrieved']['paper']} paper and {c['cv_retrieved']['general']} general "
                  f"questions (balanced accuracy {c['cv_balanced_accuracy']:.2f}); best on all "
                  f"{c['best_threshold_all']:.3f}"
                  + (f"; in use {c['threshold_in_use']:.3f} retrieves for {c['in_use_retrieved']['paper']} paper "
                     f"and {c['in_use_retrieved']['general']} general questions" if c["in_use_retrieved"] else "")
                  + "."]
    judge = report.meta.get("answer_judge")
    if judge:
        lines += ["", f"LLM judge of answer accuracy ({judge['backend']}/{judge['model']}): share of answers judged "
                  "correct against the reference, among those with a verdict:", "",
                  "| strategy | judged correct all / paper / general | correct / incorrect / no verdict |",
                  "|---|---|---|"]
        for strategy, groups in report.summary.items():
            a = groups["all"]
            if a.get("judge_verdicts"):
                counts = a["judge_verdicts"]
                lines.append(f"| {LABELS[strategy]} | " + " / ".join(_fmt(groups[g].get("judge_accuracy"))
                                                                      for g in GROUPS)
                             + f" | {counts['correct']} / {counts['incorrect']} / {a['judge_unparseable']} |")
    lines += ["", f"SlimPLM called the main model exactly once per question: "
              f"{'yes' if report.meta.get('slim_one_main_call') else 'NO'}"]
    return "\n".join(lines) + "\n"


def write_outputs(report: SlimReport, out_dir: Path, name: str) -> dict[str, Path]:
    return write_files(out_dir, {"json": (f"{name}.json", json_text(report.as_json())),
                                 "markdown": (f"{name}.md", markdown(report))})
