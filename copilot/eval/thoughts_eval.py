"""Does thought memory help? Thought-Retriever's Related-multi setting (§2.2, §4.6, Fig. 7) on CSFCube, offline.

The CSFCube abstracts are the papers of a fresh store (one abstract = one chunk). Thought memory is built by the
product's own chat path (`features.chat.Chat`: retrieve both ways, answer, thought + confidence, merge test,
lineage) from N warm-up questions. Each is written from the title of a paper drawn at random (seeded) from the
collection, the evaluation's query papers left out; no relevance judgement or citation is read to make them.

Evaluation: for each query paper of `*-qrels-cited.tsv` (title + abstract as the query, the paper itself left
out) take the top-K papers, and the top-K of papers ∪ thoughts; expand each thought to its root papers; score
the root papers against the papers the query paper cites (`cited = 1`): precision, recall, and the mean
abstraction level of the K items (a paper is 1, a thought 1 + its sources' mean). The same numbers after 0, ¼N,
½N and N warm-up questions form the self-evolution curve (Fig. 5's shape).

The warm-up is resumable: after every question its count is saved beside the store, so a killed run continues
where it stopped when the same command runs again; until all N are done no report is written.

With a judge (`--judge`), after the warm-up each query paper's question ("What is known about <title>?") is
answered twice by the product's answer path (`stream_answer`, `check_answer`) from that query's two top-K lists,
fitted to the answer budget as a chat turn's two sides are; the configured LLM then says which answer is better,
shown the two under the labels A and B in a seeded random order. Queries whose two lists hold the same items get
one answer in Chat and are not judged here either.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np

from copilot.config import Settings
from copilot.eval.csfcube import ABSTRACTS_FILE, EvalDataError, held_out_cited, machine, paper_text, read_abstracts
from copilot.eval.metrics import compare_paired
from copilot.eval.report_files import json_text, write_files
from copilot.eval.svg import svg_plot
from copilot.features.chat import Chat
from copilot.features.stats import wilson_interval
from copilot.llm import LLM, LLMError, cached_choice, packaged_gguf
from copilot.methods.thought_retriever import ThoughtMemory, check_answer, fit_budget, stream_answer
from copilot.prompts import (
    CANNOT_ANSWER,
    JUDGE_VERDICTS,
    PAIRWISE_JUDGE,
    judge_verdict_grammar,
    source_block,
    strip_quoting_tags,
)
from copilot.records import Evidence, Paper
from copilot.services import Services
from copilot.store.chat_log import THOUGHTS
from copilot.store.thoughts import PAPER, THOUGHT

QRELS_GLOB = "*-qrels-cited.tsv"
WARMUP_SOURCES = ("random", "neighbours")
SETTINGS = ("papers", "papers+thoughts")
WARMUP_USER = "warmup"
STATE_FILE = "warmup-state.json"


# --- data
@dataclass
class CitedGold:
    cited: dict[str, set[str]]                     # query paper → the papers it cites that are in the abstracts
    unknown_ids: dict[str, int] = field(default_factory=dict)   # qrels ids not in the abstracts, by role
    prefix: str = ""


def load_cited(data_dir: Path, papers: dict[str, dict]) -> CitedGold:
    """The `cited = 1` rows of the one `*-qrels-cited.tsv` in DIR. Ids missing from the abstracts are counted,
    not fatal; a query paper missing from them is left out."""
    found = sorted(Path(data_dir).glob(QRELS_GLOB))
    if len(found) != 1:
        what = "no file" if not found else f"{len(found)} files ({', '.join(p.name for p in found)})"
        raise EvalDataError(f"{what} matching {QRELS_GLOB} in {data_dir}; need exactly one")
    cited: dict[str, set[str]] = {}
    unknown = {"query": 0, "cited": 0}
    with found[0].open(encoding="utf-8", newline="") as rows:
        for row in csv.DictReader(rows, delimiter="\t"):
            query, cand = str(row["query_pid"]).strip(), str(row["cand_pid"]).strip()
            if str(row.get("cited", "")).strip() != "1":
                continue
            if query not in papers:
                unknown["query"] += 1
                continue
            if cand not in papers:
                unknown["cited"] += 1
                continue
            cited.setdefault(query, set()).add(cand)
    prefix = found[0].name[: -len("-qrels-cited.tsv")]
    return CitedGold(cited, unknown, prefix)


def question_about(pid: str, row: dict) -> dict:
    return {"from": pid, "question": f"What is known about {row['title'].strip().rstrip('.')}?"}


def warmup_questions(papers: dict[str, dict], exclude: set[str], count: int, seed: int) -> list[dict]:
    """`count` questions, each from the title of a paper drawn at random (seeded) outside `exclude`."""
    pool = sorted(pid for pid, row in papers.items() if pid not in exclude and (row.get("title") or "").strip())
    chosen = random.Random(seed).sample(pool, min(count, len(pool)))
    return [question_about(pid, papers[pid]) for pid in chosen]


def neighbour_questions(services: Services, papers: dict[str, dict], query_pids: Sequence[str],
                        count: int) -> list[dict]:
    """`count` questions from the titles of the papers nearest to the query papers by embedding (never a query
    paper), taken in turn: the nearest unused neighbour of the first query paper, then of the second, …
    No judgement is read, but the memory is built around the topics the evaluation will ask about."""
    vectors = services.embedder.embed([paper_text(papers[pid]) for pid in query_pids])
    depth = count // max(len(query_pids), 1) + len(query_pids) + 2
    nearest = {pid: [e.id for e in services.store.search(PAPER, vector, depth)]
               for pid, vector in zip(query_pids, vectors)}
    untitled = {pid for pid, row in papers.items() if not (row.get("title") or "").strip()}
    used = set(query_pids) | untitled
    chosen: list[str] = []
    while len(chosen) < count and any(nearest.values()):
        for pid in query_pids:
            while nearest[pid] and nearest[pid][0] in used:
                nearest[pid].pop(0)
            if nearest[pid] and len(chosen) < count:
                used.add(nearest[pid][0])
                chosen.append(nearest[pid].pop(0))
    return [question_about(pid, papers[pid]) for pid in chosen]


def as_paper(pid: str, row: dict) -> Paper:
    given = row.get("year")
    year = given if isinstance(given, int) and 1 <= given <= 9999 else 2000
    return Paper(id=pid, title=(row.get("title") or "").strip(), abstract=(row.get("abstract") or "").strip(),
                 authors=[], categories=[], published=date(year, 1, 1))


def fill_store(services: Services, papers: dict[str, dict], batch: int = 256, progress=print) -> int:
    """Put every abstract in the store's paper collection (once: those already there are skipped)."""
    ids = sorted(papers)
    stored = services.store.existing_papers(ids)
    missing = [pid for pid in ids if pid not in stored]
    for start in range(0, len(missing), batch):
        chunk = [as_paper(pid, papers[pid]) for pid in missing[start:start + batch]]
        services.store.upsert_papers(chunk, services.embedder.embed([p.document for p in chunk]))
        progress(f"store: embedded {start + len(chunk)}/{len(missing)} abstracts")
    return len(missing)


# --- scoring
def root_precision_recall(roots: Sequence[str], cited: set[str]) -> tuple[float, float]:
    """Precision and recall of a set of root papers against the cited papers (0 for an empty side)."""
    unique = set(roots)
    hits = len(unique & cited)
    return (hits / len(unique) if unique else 0.0, hits / len(cited) if cited else 0.0)


def expand_roots(items: Sequence[Evidence], memory: ThoughtMemory, leave_out: str) -> list[str]:
    """The root papers of retrieved items: a paper is its own root, a thought its lineage's papers."""
    roots: list[str] = []
    for item in items:
        for pid in ([item.id] if item.kind == PAPER else memory.root_sources(item.id)):
            if pid != leave_out and pid not in roots:
                roots.append(pid)
    return roots


def retrieve(services: Services, vector: np.ndarray, k: int, leave_out: str) -> dict[str, list[Evidence]]:
    """Top-K papers, and top-K of papers ∪ thoughts, without the query paper."""
    papers = [e for e in services.store.search(PAPER, vector, k + 1) if e.id != leave_out][:k]
    thoughts = services.store.search(THOUGHT, vector, k)
    union = sorted(papers + thoughts, key=lambda e: e.score, reverse=True)[:k]
    return {"papers": papers, "papers+thoughts": union}


def evaluate(services: Services, memory: ThoughtMemory, papers: dict[str, dict], gold: CitedGold,
             k: int) -> dict:
    """Mean root-source precision and recall, mean abstraction level and thought share per setting."""
    queries = sorted(gold.cited)
    vectors = services.embedder.embed([paper_text(papers[pid]) for pid in queries])
    rows: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for pid, vector in zip(queries, vectors):
        for name, items in retrieve(services, vector, k, pid).items():
            precision, recall = root_precision_recall(expand_roots(items, memory, pid), gold.cited[pid])
            levels = [1.0 if e.kind == PAPER else memory.level(e.id) for e in items]
            rows[name].append({"query": pid, "precision": precision, "recall": recall,
                               "level": float(np.mean(levels)) if levels else 0.0,
                               "thoughts": sum(1 for e in items if e.kind == THOUGHT)})
    summary = {name: {metric: float(np.mean([r[metric] for r in rows[name]])) if rows[name] else 0.0
                      for metric in ("precision", "recall", "level", "thoughts")} for name in SETTINGS}
    paired = {metric: compare_paired([r[metric] for r in rows["papers+thoughts"]], [r[metric] for r in rows["papers"]])
              for metric in ("precision", "recall")}
    return {"thoughts_in_memory": memory.count(), "queries": len(queries), "mean": summary,
            "thoughts_vs_papers": paired, "per_query": rows}


# --- warm-up with the product's chat path
def ask_warmup(chat: Chat, question: str) -> dict:
    """One chat turn; the thought comes from the thought-augmented answer, as for a turn nobody voted on."""
    turn = chat.prepare(question, WARMUP_USER)
    for _ in chat.stream(turn):
        pass
    if turn.comparison == "yes":
        chat.request_thought(turn.id, THOUGHTS, "no_vote")
    jobs = chat.wait_for_thoughts(turn.id)
    current = [job for job in jobs if job["superseded_at"] is None]
    return {"turn": turn.id, "comparison": turn.comparison,
            "thought": current[-1]["status"] if current else "none",
            "reason": current[-1].get("reason") if current else None}


def checkpoints(warmup: int) -> list[int]:
    return sorted({0, warmup // 4, warmup // 2, warmup})


class WarmupState:
    """What a warm-up has done so far, saved after every question (write to a temporary name, then rename)."""

    def __init__(self, path: Path, questions: list[dict]) -> None:
        self.path = path
        saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        if saved and saved.get("questions") != questions:
            raise EvalDataError(f"{path} holds another warm-up's questions; remove its directory to start over")
        self.questions = questions
        self.done: list[dict] = saved.get("done", [])
        self.curve: dict[str, dict] = saved.get("curve", {})

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"questions": self.questions, "done": self.done, "curve": self.curve}),
                       encoding="utf-8")
        os.replace(tmp, self.path)


@dataclass
class ThoughtsReport:
    curve: dict[str, dict]          # warm-up questions so far → evaluate(…)
    warmup: list[dict]
    meta: dict
    judge: dict | None = None       # judge_answers(…) after the whole warm-up, when asked for

    def as_json(self) -> dict:
        found = {"curve": self.curve, "warmup": self.warmup, "meta": self.meta}
        return found if self.judge is None else {**found, "judge": self.judge}


def run(services: Services, data_dir: Path, warmup: int = 40, k: int = 8, seed: int = 13,
        progress=print, warmup_from: str = "random", judge: bool = False, fold: str = "dev") -> ThoughtsReport:
    """`services` must be over the evaluation's own data dir (a fresh store the first time, the same one to
    resume). Raises KeyboardInterrupt through, with every finished question saved. With `judge`, the configured
    LLM judges the two answers per query after the warm-up (not saved: a resumed run judges again). `fold`
    "heldout": the query papers the qrels file does not hold (csfcube.held_out_cited)."""
    if k < 1 or warmup < 0:
        raise EvalDataError(f"need K >= 1 and a warm-up of N >= 0 questions, not K={k}, N={warmup}")
    if warmup_from not in WARMUP_SOURCES:
        raise EvalDataError(f"warm-up questions come from {' or '.join(WARMUP_SOURCES)}, not {warmup_from!r}")
    started, machine_before = time.monotonic(), machine()
    papers = read_abstracts(data_dir, QRELS_GLOB)
    gold = load_cited(data_dir, papers) if fold == "dev" else CitedGold(
        held_out_cited(data_dir, papers, QRELS_GLOB), prefix="heldout")
    if not gold.cited:
        raise EvalDataError(f"no cited = 1 row of {QRELS_GLOB} names a query paper of {ABSTRACTS_FILE}")
    added = fill_store(services, papers, progress=progress)
    progress(f"store: {services.store.count(PAPER)} papers ({added} added)")
    if warmup_from == "random":
        questions = warmup_questions(papers, set(gold.cited), warmup, seed)
    else:
        questions = neighbour_questions(services, papers, sorted(gold.cited), warmup)
    state = WarmupState(services.settings.data_dir / STATE_FILE, questions)
    chat = Chat(services)
    chat.resume_jobs()                              # a thought job a killed run left behind
    chat.wait_for_all()
    marks = checkpoints(len(questions))
    while True:
        done = len(state.done)
        if done in marks and str(done) not in state.curve:
            state.curve[str(done)] = evaluate(services, chat.memory, papers, gold, k)
            state.save()
            mean = state.curve[str(done)]["mean"]
            progress(f"after {done} warm-up questions: " + "; ".join(
                f"{name} P {mean[name]['precision']:.3f} R {mean[name]['recall']:.3f}" for name in SETTINGS))
        if done == len(questions):
            break
        asked = ask_warmup(chat, questions[done]["question"])
        state.done.append(asked)
        state.save()
        progress(f"warm-up {done + 1}/{len(questions)}: thought {asked['thought']}")
    judged = judge_answers(services, papers, gold, k, seed, progress) if judge else None
    meta = {"data": str(data_dir), "fold": gold.prefix, "papers": len(papers), "query_papers": len(gold.cited),
            "cited_pairs": sum(len(c) for c in gold.cited.values()), "unknown_qrels_ids": gold.unknown_ids,
            "warmup": len(questions), "warmup_from": warmup_from, "k": k, "seed": seed,
            "merge_threshold": services.settings.merge_threshold,
            "llm": services.llm_info(), "embedder": services.embedder.name,
            "seconds": round(time.monotonic() - started, 1), "machine_at_start": machine_before,
            "machine_at_end": machine()}
    warm = [{**q, **d} for q, d in zip(state.questions, state.done)]
    return ThoughtsReport({c: state.curve[c] for c in sorted(state.curve, key=int)}, warm, meta, judged)


def markdown(report: ThoughtsReport) -> str:
    lines = ["| warm-up questions | thoughts in memory | setting | root precision | root recall | "
             "mean abstraction level | thoughts among the K |", "|---|---|---|---|---|---|---|"]
    for done, point in report.curve.items():
        for name in SETTINGS:
            m = point["mean"][name]
            lines.append(f"| {done} | {point['thoughts_in_memory']} | {name} | {m['precision']:.4f} | "
                         f"{m['recall']:.4f} | {m['level']:.3f} | {m['thoughts']:.2f} |")
    last = list(report.curve)[-1]
    lines += ["", f"Papers ∪ thoughts against papers only after {last} warm-up questions, paired over the "
              f"{report.curve[last]['queries']} query papers (sign test without ties; bootstrap, 10,000 resamples, "
              "seed 13):", "", "| metric | mean Δ | 95% bootstrap CI | wins/losses/ties | sign test p | bootstrap p |",
              "|---|---|---|---|---|---|"]
    for metric, c in report.curve[last]["thoughts_vs_papers"].items():
        lines.append(f"| {metric} | {c['mean_difference']:+.4f} | [{c['bootstrap_ci_low']:+.4f}, "
                     f"{c['bootstrap_ci_high']:+.4f}] | {c['wins']}/{c['losses']}/{c['ties']} | "
                     f"{c['sign_test_p']:.3f} | {c['bootstrap_p']:.3f} |")
    meta = report.meta
    made: dict[str, int] = {}
    for turn in report.warmup:
        made[turn["thought"]] = made.get(turn["thought"], 0) + 1
    lines += ["", f"Fold `{meta['fold']}`: {meta['papers']} abstracts as papers, {meta['query_papers']} query papers, "
              f"{meta['cited_pairs']} cited pairs (ids of the qrels missing from the abstracts: "
              f"{json.dumps(meta['unknown_qrels_ids'])}). K = {meta['k']}, merge threshold {meta['merge_threshold']}, "
              f"LLM {meta['llm']['backend']}/{meta['llm']['model']}, embedder {meta['embedder']}.",
              f"Warm-up: {meta['warmup']} questions from {meta['warmup_from']} papers (seed {meta['seed']}), "
              f"their thoughts: {json.dumps(made)}.",
              f"Time: {meta['seconds']} s on {meta['machine_at_start']['cpu']} ({meta['machine_at_start']['cores']} "
              f"cores), load average {meta['machine_at_start']['load_average'][0]} at start, "
              f"{meta['machine_at_end']['load_average'][0]} at end."]
    if report.judge is not None:
        lines += judge_markdown(report.judge)
    return "\n".join(lines) + "\n"


# --- a blind pairwise judge of the two answers per query (`--judge`)
JUDGE_OUTCOMES = ("win", "loss", "tie", "unparseable", "same_items", "failed")   # from the thoughts side's view
JUDGE_MAX_TOKENS = 8
_VERDICT = re.compile(r"^(?:(?:verdict|winner|better|the better answer is|answer)\s*[:\-]?\s*)?"
                      r"(?:answer\s+)?\(?(a|b|tie)\)?\s*[.!]?$", re.I)


def judge_refusal(settings: Settings, allow_local: bool = False) -> str | None:
    """Why the configured LLM may not judge, or None: the packaged 135M model cannot (`allow_local` for tests)."""
    if settings.llm_backend != "local" or allow_local:
        return None
    try:
        choice = cached_choice(settings)       # a Hub reference that fell back to the packaged model counts as it
        if choice is None or choice.path.resolve() != packaged_gguf().resolve():
            return None                        # another GGUF: the user chose it
    except LLMError:
        return None
    return ("--judge needs a model that can judge answers, and the configured LLM is the packaged 135M local "
            "model, which cannot: set OPENAI_API_KEY (and OPENAI_BASE_URL, COPILOT_LLM_MODEL) for an "
            "OpenAI-compatible endpoint, or COPILOT_LOCAL_MODEL to a larger GGUF (--judge-local judges with the "
            "local model anyway, to test the plumbing)")


def blind_order(seed: int, count: int) -> list[bool]:
    """Per query, in order: whether the thoughts side is shown as A (a seeded coin, one draw per query)."""
    coin = random.Random(seed)
    return [coin.random() < 0.5 for _ in range(count)]


def verdict_line(output: str) -> str:
    """A judge's first non-empty line, without quoting tags, Markdown emphasis and surrounding quotes: where a
    one-word verdict is read from (also by `eval slim --judge`)."""
    lines = [line.strip() for line in strip_quoting_tags(output).replace("*", "").replace("`", "").splitlines()]
    return next((line for line in lines if line), "").strip("\"' ")


def parse_verdict(output: str) -> str | None:
    """"A", "B" or "tie" when the output's first line is clearly one verdict (optionally "Verdict: A", "Answer
    B."), else None: anything else is not read as a verdict."""
    found = _VERDICT.match(verdict_line(output))
    if not found:
        return None
    word = found.group(1).lower()
    return "tie" if word == "tie" else word.upper()


def answer_sides(services: Services, retrieved: dict[str, list[Evidence]]) -> dict[str, list[Evidence]]:
    """The sources each answer gets, fitted as a chat turn's two sides are (`retrieve_both`): within the answer
    budget, each item cut to its cap, then both lists cut to the shorter one's length."""
    plan = services.generation
    fitted = {name: fit_budget(items, plan.source_budget, item_tokens=plan.source_cap)
              for name, items in retrieved.items()}
    count = min(len(items) for items in fitted.values())
    return {name: items[:count] for name, items in fitted.items()}


def answer(services: Services, question: str, sources: Sequence[Evidence]) -> str:
    """One answer by the product's answer path: stream it, then the output checks (nothing left → CANNOT_ANSWER)."""
    text = "".join(stream_answer(services.llm, question, sources, services.generation.answer_tokens)).strip()
    checked = check_answer(text, sources).text if text else ""
    return checked or CANNOT_ANSWER


def judge_prompt(question: str, shown: Sequence[tuple[str, Sequence[Evidence]]]):
    """The judge's prompt for (answer A, its sources), (answer B, its sources); sources under labels 1..n."""
    def block(items: Sequence[Evidence]) -> str:
        return "\n".join(source_block(str(n), item.text) for n, item in enumerate(items, 1)) or "(none)"

    (text_a, items_a), (text_b, items_b) = shown
    return PAIRWISE_JUDGE.render(question=question, answer_a=source_block("A", text_a), sources_a=block(items_a),
                                 answer_b=source_block("B", text_b), sources_b=block(items_b))


def judge_pair(llm: LLM, question: str, answers: dict[str, str], sources: dict[str, list[Evidence]],
               thoughts_first: bool) -> dict:
    """Show the two answers as A and B (the thoughts side first when `thoughts_first`), ask the judge, and read
    its verdict from the thoughts side's view: win, loss, tie or unparseable."""
    order = ["papers+thoughts", "papers"] if thoughts_first else ["papers", "papers+thoughts"]
    rendered = judge_prompt(question, [(answers[name], sources[name]) for name in order])
    grammar = judge_verdict_grammar() if llm.obeys_grammar else None
    output = llm.complete(rendered, max_tokens=JUDGE_MAX_TOKENS, temperature=0.0, grammar=grammar)
    verdict = parse_verdict(output)
    if verdict is None:
        outcome = "unparseable"
    elif verdict == "tie":
        outcome = "tie"
    else:
        outcome = "win" if order["AB".index(verdict)] == "papers+thoughts" else "loss"
    return {"thoughts_shown_as": "A" if thoughts_first else "B", "verdict": verdict, "output": output[:300],
            "outcome": outcome}


def judge_answers(services: Services, papers: dict[str, dict], gold: CitedGold, k: int, seed: int,
                  progress=print) -> dict:
    """Per query paper: its question, two answers (papers only, papers ∪ thoughts), a blind verdict; the counts,
    and the thoughts side's win rate over decisive verdicts with a 95% Wilson interval."""
    queries = sorted(gold.cited)
    vectors = services.embedder.embed([paper_text(papers[pid]) for pid in queries])
    rows = []
    for pid, vector, thoughts_first in zip(queries, vectors, blind_order(seed, len(queries))):
        question = question_about(pid, papers[pid])["question"]
        sides = answer_sides(services, retrieve(services, vector, k, pid))
        row = {"query": pid, "question": question, "sources": len(sides["papers"])}
        if [e.id for e in sides["papers"]] == [e.id for e in sides["papers+thoughts"]]:
            row["outcome"] = "same_items"
        else:
            try:
                row["answers"] = {name: answer(services, question, items) for name, items in sides.items()}
                row.update(judge_pair(services.llm, question, row["answers"], sides, thoughts_first))
            except LLMError as error:
                row.update(outcome="failed", error=str(error)[:300])
        rows.append(row)
        progress(f"judge {len(rows)}/{len(queries)}: {row['outcome']}")
    return judge_summary(rows, services.llm_info(), seed)


def judge_summary(rows: list[dict], judge: dict, seed: int) -> dict:
    counts = {outcome: sum(1 for r in rows if r["outcome"] == outcome) for outcome in JUDGE_OUTCOMES}
    decisive = counts["win"] + counts["loss"]
    low, high = wilson_interval(counts["win"], decisive)
    verdicts = {v: sum(1 for r in rows if r.get("verdict") == v) for v in JUDGE_VERDICTS}
    return {"judge": judge, "seed": seed, "queries": len(rows),
            "judged": counts["win"] + counts["loss"] + counts["tie"] + counts["unparseable"],
            "wins": counts["win"], "losses": counts["loss"], "ties": counts["tie"],
            "unparseable": counts["unparseable"], "same_items": counts["same_items"], "failed": counts["failed"],
            "win_rate": counts["win"] / decisive if decisive else None, "ci_low": low, "ci_high": high,
            "verdicts_by_label": verdicts, "per_query": rows}


def judge_markdown(judged: dict) -> list[str]:
    rate = "—" if judged["win_rate"] is None else f"{judged['win_rate']:.3f}"
    interval = "—" if judged["ci_low"] is None else f"[{judged['ci_low']:.3f}, {judged['ci_high']:.3f}]"
    by_label = judged["verdicts_by_label"]
    return ["", f"Blind pairwise judge ({judged['judge']['backend']}/{judged['judge']['model']}): the two answers "
            "per query paper under the labels A and B in a seeded random order (seed "
            f"{judged['seed']}); papers ∪ thoughts against papers only:", "",
            "| queries | judged | wins | losses | ties | unparseable | same sources (not judged) | failed | "
            "win rate (wins / decisive) | 95% Wilson interval |", "|---|---|---|---|---|---|---|---|---|---|",
            f"| {judged['queries']} | {judged['judged']} | {judged['wins']} | {judged['losses']} | {judged['ties']} | "
            f"{judged['unparseable']} | {judged['same_items']} | {judged['failed']} | {rate} | {interval} |", "",
            f"Verdicts by label (a position bias shows here): A {by_label['A']}, B {by_label['B']}, "
            f"tie {by_label['tie']}."]


# --- plots (copilot/eval/svg.py draws them)
def plots(report: ThoughtsReport) -> dict[str, str]:
    """Fig. 7's shape (recall against precision, a point per checkpoint) and Fig. 5's (recall against thoughts)."""
    curve = list(report.curve.values())
    by_precision = {name: [(p["mean"][name]["precision"], p["mean"][name]["recall"]) for p in curve]
                    for name in SETTINGS}
    by_thoughts = {name: [(p["thoughts_in_memory"], p["mean"][name]["recall"]) for p in curve] for name in SETTINGS}
    return {"recall-precision": svg_plot("root-source recall vs precision", "precision", "recall", by_precision),
            "recall-thoughts": svg_plot("root-source recall vs thoughts in memory", "thoughts", "recall",
                                        by_thoughts)}


def write_outputs(report: ThoughtsReport, out_dir: Path, name: str) -> dict[str, Path]:
    """`name.json`, `name.md` and the two plots `name-recall-precision.svg`, `name-recall-thoughts.svg`."""
    files = {"json": (f"{name}.json", json_text(report.as_json())), "markdown": (f"{name}.md", markdown(report))}
    files.update({plot: (f"{name}-{plot}.svg", svg) for plot, svg in plots(report).items()})
    return write_files(out_dir, files)
