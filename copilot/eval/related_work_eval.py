"""`eval related-work`: related-work drafts against real related-work sections (issue #15).

Data: the rwsg-prv records (../shared/data/related-work/*.json): a target paper (title, abstract, its real
related-work section) and the papers it cites (`leaves`), about half of them with an abstract. The library holds
every cited paper that has an abstract (of all targets: each target's cited papers are the others' distractors)
plus the first N papers of the arXiv corpus as distractors. For each target, three ways to draft:

- `plain`: the abstract as the query, top-k papers by cosine, one model call that writes the section from them;
- `rat`: the product's related-work draft (PRISM pool, zero-shot draft, RAT revision), papers only;
- `rat+thoughts`: the same over papers ∪ thoughts, after a warm-up that stored, for every target, the thought of a
  deep answer to "What earlier work is closest to <title>?" (never the target's own section).

Scores against the real section and its cited papers: citation recall (cited papers of the target that the draft
cites / those in the library) and precision (cited papers of the target / papers the draft cites), ROUGE-L F1
(longest common subsequence of words), length in words, seconds and model calls. Ten targets: small data,
for seeing the mechanism and gross differences, not for statistics.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np

from copilot.eval.bench_chat import TimedBackend
from copilot.eval.metrics import rouge_l
from copilot.eval.report_files import json_text, write_files
from copilot.eval.thoughts_eval import (
    JUDGE_MAX_TOKENS,
    blind_order,
    judge_markdown,
    judge_prompt,
    judge_summary,
    parse_verdict,
)
from copilot.features import related
from copilot.features.deep import keep_as_thought, stream_deep
from copilot.features.library import ingestor
from copilot.features.longform import Longform, Numbering, checked_text
from copilot.features.related_work import draft_related_work, with_authors
from copilot.llm import LLMError
from copilot.methods.prism import QueryPaper
from copilot.prompts import RELATED_WORK_ONE_CALL, judge_verdict_grammar, source_block, statements_grammar
from copilot.records import Evidence, Paper, clean_text
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row

METHODS = ("plain", "rat", "rat+thoughts")
# RAT is measured with the model writing: the product offers related-work drafts and deep answers only when the
# model profile writes, and a small model let write keeps its grammars and budgets (model_profile.generation_plan).
WRITING = {"model_profile": "capable"}
JUDGE_TASK = "Write the related-work section of the paper titled \u201c{title}\u201d."
PLAIN_K = 6
WARMUP_QUESTION = "What earlier work is closest to {title}?"


class EvalDataError(ValueError):
    """The data directory does not hold what the evaluation needs."""


@dataclass
class Target:
    name: str
    title: str
    abstract: str
    section: str                  # the real related-work section
    cited: list[Paper]            # its cited papers that have an abstract (they go into the library)
    cited_total: int              # all its cited papers, with or without an abstract


@dataclass
class Outcome:
    text: str
    cited_ids: list[str]
    seconds: float
    calls: int
    error: str | None = None


@dataclass
class Report:
    summary: dict[str, dict[str, float | None]]
    per_target: dict[str, dict[str, dict]]
    meta: dict = field(default_factory=dict)
    judge: dict | None = None          # judge_drafts: RAT against plain retrieval, blind

    def as_json(self) -> dict:
        return {"summary": self.summary, "per_target": self.per_target, "meta": self.meta, "judge": self.judge}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- data ----------------------------------------------------------------------------------------------------
def load_targets(data_dir: Path, min_section_chars: int = 200) -> list[Target]:
    """The records of DIR whose related-work section is real text (ours.json holds a placeholder)."""
    files = sorted(Path(data_dir).glob("*.json"), key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit()
                                                                 else 0, p.stem))
    if not files:
        raise EvalDataError(f"no *.json records in {data_dir} (expected rwsg-prv's dataset/jsons)")
    targets = []
    for path in files:
        record = json.loads(path.read_text(encoding="utf-8"))
        root, leaves = record.get("root") or {}, record.get("leaves") or []
        section = clean_text(root.get("relatedwork"))
        if len(section) < min_section_chars or not root.get("abstract"):
            continue
        cited = [leaf_paper(path.stem, n, leaf) for n, leaf in enumerate(leaves, start=1)
                 if clean_text(leaf.get("abstract"))]
        targets.append(Target(path.stem, clean_text(root["title"]), clean_text(root["abstract"]), section, cited,
                              len(leaves)))
    if not targets:
        raise EvalDataError(f"no record in {data_dir} has a related-work section")
    return targets


def leaf_paper(target: str, number: int, leaf: dict) -> Paper:
    """A cited paper as a library paper. It has no arXiv id in the data: its id says where it comes from."""
    year = int(leaf.get("year") or 2000)
    return Paper(id=f"rw{target}-{number:02d}", title=clean_text(leaf.get("title")),
                 abstract=clean_text(leaf.get("abstract")), authors=list(leaf.get("author") or []), categories=[],
                 published=date(max(1900, min(year, 2100)), 1, 1))


def prepare_library(services: Services, targets: Sequence[Target], corpus: Path, distractors: int) -> int:
    """Every cited paper with an abstract and the corpus's first `distractors` papers, through the product's
    ingestion (idempotent: a second run adds nothing)."""
    papers = [p for t in targets for p in t.cited]
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            if len(papers) >= distractors + sum(len(t.cited) for t in targets):
                break
            if line.strip():
                papers.append(paper_from_row(json.loads(line)))
    ingestor(services).run("eval related-work", papers)
    return services.store.count("paper")


# --- metrics -------------------------------------------------------------------------------------------------
_TOKEN = re.compile(r"[a-z0-9]+")


def citation_scores(cited: Sequence[str], gold: Sequence[str]) -> tuple[float, float | None]:
    """(recall over the gold papers in the library, precision over the papers the draft cites; None if none)."""
    cited_ids, gold_ids = set(cited), set(gold)
    recall = len(cited_ids & gold_ids) / len(gold_ids) if gold_ids else 0.0
    precision = len(cited_ids & gold_ids) / len(cited_ids) if cited_ids else None
    return recall, precision


def words(text: str) -> int:
    return len(_TOKEN.findall(re.sub(r"\[[^\]]*\]", " ", text.lower())))


# --- the three methods ----------------------------------------------------------------------------------------
def plain(services: Services, target: Target, k: int = PLAIN_K) -> Outcome:
    """Top-k papers by the abstract, one call, the same output checks."""
    vector = services.embedder.embed_one(f"{target.title}\n{target.abstract}")
    items = services.store.search("paper", vector, k)
    numbering = Numbering()
    numbering.add(items)
    sources = "\n".join(source_block(numbering.label(i), f"{i.title}\n{i.text[:360]}") for i in items)
    grammar = statements_grammar(numbering.labels, 4, opener="Source") if services.llm.obeys_grammar else None
    text = services.llm.complete(RELATED_WORK_ONE_CALL.render(sources=sources, title=target.title),
                                 max_tokens=320, temperature=0.2, grammar=grammar)
    run = Longform(task=target.title, numbering=numbering)
    run.text = checked_text(text.replace("\n", " "), numbering, target.title).text
    papers = {i.id: Paper(i.id, i.title, "", str(i.metadata.get("authors", "")).split("; "), [], date(2000, 1, 1))
              for i in items}
    shown = with_authors(run.text, items, papers)
    return Outcome(shown, [i.id for i in run.cited], 0.0, 1)


def rat(services: Services, target: Target, thoughts: bool) -> Outcome:
    query = related.QueryInfo(QueryPaper(target.title, target.abstract), "input")
    draft = draft_related_work(services, query, user=None, thoughts=thoughts)
    record = draft.as_dict()
    return Outcome(record["text"], [c["id"] for c in record["citations"] if c["kind"] == "paper"], 0.0, 0)


def warm_up(services: Services, targets: Sequence[Target], progress: Callable[[str], None]) -> int:
    """For every target, a deep answer about its title over the library, kept as a thought when it passes the
    thought step. Returns the thoughts stored."""
    stored = 0
    for target in targets:
        answer = None
        for answer in stream_deep(services, WARMUP_QUESTION.format(title=target.title), "eval"):  # noqa: B007 - drained to its last value
            pass
        assert answer is not None       # stream_deep yields at least once or raises
        if answer.run.text:
            outcome = keep_as_thought(services, answer, "eval")
            stored += outcome.status == "stored"
            progress(f"warm-up {target.name}: {outcome.status}")
    return stored


def timed(backend: TimedBackend, work: Callable[[], Outcome]) -> Outcome:
    calls, started = backend.calls, time.perf_counter()
    try:
        outcome = work()
    except (LLMError, related.RelatedError) as error:
        outcome = Outcome("", [], 0.0, 0, error=str(error))
    outcome.seconds = time.perf_counter() - started
    outcome.calls = backend.calls - calls
    return outcome


def evaluate(services: Services, backend: TimedBackend, targets: Sequence[Target], methods: Sequence[str] = METHODS,
             progress: Callable[[str], None] = _log) -> Report:
    in_library = {p.id for p in services.store.get_papers([p.id for t in targets for p in t.cited])}
    per_target: dict[str, dict[str, dict]] = {t.name: {} for t in targets}
    warmed = None
    for method in methods:
        if method == "rat+thoughts" and warmed is None:
            clock = time.perf_counter()
            warmed = warm_up(services, targets, progress)
            progress(f"warm-up: {warmed} thoughts stored in {time.perf_counter() - clock:.0f} s")
        for target in targets:
            if method == "plain":
                outcome = timed(backend, lambda: plain(services, target))  # noqa: B023 - called at once
            else:
                outcome = timed(backend, lambda: rat(services, target,  # noqa: B023 - called at once
                                                     thoughts=method == "rat+thoughts"))  # noqa: B023
            gold = [p.id for p in target.cited if p.id in in_library]
            recall, precision = citation_scores(outcome.cited_ids, gold)
            per_target[target.name][method] = {
                "citation_recall": recall, "citation_precision": precision, "rouge_l": rouge_l(outcome.text,
                                                                                              target.section),
                "words": words(outcome.text), "seconds": outcome.seconds, "llm_calls": outcome.calls,
                "cited": outcome.cited_ids, "gold_in_library": len(gold), "text": outcome.text, "error": outcome.error}
            progress(f"{method} {target.name}: recall {recall:.2f}, precision "
                     f"{'—' if precision is None else f'{precision:.2f}'}, {outcome.seconds:.0f} s, "
                     f"{outcome.calls} calls{' — ' + outcome.error if outcome.error else ''}")
    summary = {method: summarize([per_target[t.name][method] for t in targets]) for method in methods}
    return Report(summary, per_target, {"targets": len(targets), "warmup_thoughts": warmed,
                                        "model": services.llm.info["model"], "embedder": services.embedder.name})


# --- the blind judge: RAT's draft against plain retrieval's --------------------------------------------------------
def cited_sources(services: Services, ids: Sequence[str]) -> list[Evidence]:
    """The papers a draft cites, as the judge reads them (title and abstract)."""
    return [Evidence(p.id, "paper", p.title, f"{p.title}\n{p.abstract}", 1.0) for p in services.store.get_papers(ids)]


def judge_draft_pair(services: Services, target: Target, drafts: dict[str, dict], rat_first: bool) -> dict:
    """RAT's and plain retrieval's drafts for `target` under the labels A and B (RAT first when `rat_first`), each
    with the papers it cites; the verdict read from RAT's view: win, loss, tie, unparseable or failed."""
    if any(drafts[m]["error"] or not drafts[m]["text"].strip() for m in ("rat", "plain")):
        return {"outcome": "failed", "error": "a draft failed or is empty"}
    order = ["rat", "plain"] if rat_first else ["plain", "rat"]
    shown = [(drafts[m]["text"], cited_sources(services, drafts[m]["cited"])) for m in order]
    llm = services.llm
    try:
        output = llm.complete(judge_prompt(JUDGE_TASK.format(title=target.title), shown),
                              max_tokens=JUDGE_MAX_TOKENS, temperature=0.0,
                              grammar=judge_verdict_grammar() if llm.obeys_grammar else None)
    except LLMError as error:
        return {"outcome": "failed", "error": str(error)[:300]}
    verdict = parse_verdict(output)
    outcome = "unparseable" if verdict is None else "tie" if verdict == "tie" else \
        "win" if order["AB".index(verdict)] == "rat" else "loss"
    return {"rat_shown_as": "A" if rat_first else "B", "verdict": verdict, "output": output[:300], "outcome": outcome}


def judge_drafts(services: Services, targets: Sequence[Target], per_target: dict[str, dict[str, dict]],
                 seed: int = 13, progress: Callable[[str], None] = _log) -> dict:
    """Per target, a blind verdict between RAT's draft and plain retrieval's (a seeded coin decides which is A);
    RAT's win rate over decisive verdicts with a 95% Wilson interval (`thoughts_eval.judge_summary`'s fields)."""
    rows = []
    for target, rat_first in zip(targets, blind_order(seed, len(targets))):
        rows.append({"target": target.name, **judge_draft_pair(services, target, per_target[target.name], rat_first)})
        progress(f"judge {len(rows)}/{len(targets)}: {rows[-1]['outcome']}")
    return judge_summary(rows, services.llm_info(), seed)


def summarize(rows: Sequence[dict]) -> dict[str, float | None]:
    def mean(key: str) -> float | None:
        values = [row[key] for row in rows if row[key] is not None]
        return float(np.mean(values)) if values else None
    return {"citation_recall": mean("citation_recall"), "citation_precision": mean("citation_precision"),
            "rouge_l": mean("rouge_l"), "words": mean("words"), "seconds": mean("seconds"),
            "llm_calls": mean("llm_calls"), "failed": sum(1 for row in rows if row["error"]),
            "cited_nothing": sum(1 for row in rows if not row["cited"])}


def markdown(report: Report) -> str:
    def cell(value, digits=2):
        return "—" if value is None else f"{value:.{digits}f}"
    lines = ["| method | citation recall | citation precision | ROUGE-L F1 | words | seconds | LLM calls "
             "| cited none |",
             "|---|---|---|---|---|---|---|---|"]
    for method, s in report.summary.items():
        lines.append(f"| {method} | {cell(s['citation_recall'])} | {cell(s['citation_precision'])} | "
                     f"{cell(s['rouge_l'], 3)} | {cell(s['words'], 0)} | {cell(s['seconds'], 1)} | "
                     f"{cell(s['llm_calls'], 1)} | {s['cited_nothing']} of {report.meta['targets']} |")
    return "\n".join(lines)


def write_outputs(report: Report, out_dir: Path) -> dict[str, Path]:
    text = markdown(report)
    if report.judge:
        text += "\n" + "\n".join(judge_markdown(report.judge)).replace("papers ∪ thoughts against papers only",
                                                                       "RAT against plain retrieval + one call")
    return write_files(out_dir, {"json": ("related-work.json", json_text(report.as_json(), indent=1)),
                                 "md": ("related-work.md", text + "\n")})
