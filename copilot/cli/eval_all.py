"""`eval all [--quick] [--skip PART] --json`: every method's evaluation against the configured model, one report.

Each part runs the same evaluation its own `eval NAME` command runs (CSFCube for PRISM and the Related default,
thought memory, SlimPLM, RAT related-work drafts, Graph of Records), in its own store under
`<data dir>/eval/all/<model>-<quick|full>/`, and is saved when it finishes: a rerun after a kill skips the finished
parts. A part that fails says why and the others still run. The LLM judge is used only when the configured model
can judge (not the packaged 135M model: the report says "not judged" and why).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

from copilot.cli.chat import add_visitor_flags, env_token
from copilot.cli.output import print_json
from copilot.config import Settings, load_settings
from copilot.errors import UserError
from copilot.eval import all_report, csfcube, csfcube_report, related_work_eval, slim_eval, thoughts_eval
from copilot.eval.all_report import PARTS, PartResult, paired_effect, unpaired_effect
from copilot.eval.bench_chat import TimedBackend
from copilot.features.signin import picked_model, routed_settings
from copilot.llm import build_llm
from copilot.llm.interface import Backend
from copilot.llm.router import RouterBackend
from copilot.methods.prism import SEPARATE
from copilot.services import Services

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data"
DEFAULT_CORPUS = SHARED_DATA / "arxiv-cs-2025-2026" / "papers.jsonl"


@dataclass(frozen=True)
class Sizes:
    """How much each part evaluates. --quick: small n chosen to finish in under 15 minutes on 2 cores with the
    packaged model; the report says so."""
    csfcube_queries: int | None
    thoughts_warmup: int
    slim_questions: int | None
    slim_distractors: int
    related_targets: int | None
    related_distractors: int
    gor_papers: int
    gor_questions: int

    def describe(self, part: str) -> str:
        return {"csfcube": f"{self.csfcube_queries or 'all'} queries",
                "thoughts": f"warm-up of {self.thoughts_warmup} questions, K 8",
                "slim": f"{self.slim_questions or 'all'} questions, {self.slim_distractors} distractor papers",
                "related-work": f"{self.related_targets or 'all'} target papers, {self.related_distractors} "
                                "distractors",
                "gor": f"{self.gor_papers} papers, {self.gor_questions} simulated questions"}[part]


QUICK = Sizes(csfcube_queries=6, thoughts_warmup=4, slim_questions=6, slim_distractors=60, related_targets=1,
              related_distractors=60, gor_papers=60, gor_questions=8)
FULL = Sizes(csfcube_queries=None, thoughts_warmup=40, slim_questions=None, slim_distractors=300, related_targets=None,
             related_distractors=300, gor_papers=300, gor_questions=40)


def limited(sizes: Sizes, n: int) -> Sizes:
    """At most `n` items per part (queries, warm-up questions, questions, targets) and few distractors: for a
    plumbing check, not for figures."""
    if n < 1:
        raise UserError("--limit takes a number of items, at least 1")
    def cap(value):
        return n if value is None else min(value, n)
    return replace(sizes, csfcube_queries=cap(sizes.csfcube_queries), thoughts_warmup=cap(sizes.thoughts_warmup),
                   slim_questions=cap(sizes.slim_questions), slim_distractors=min(sizes.slim_distractors, 20),
                   related_targets=cap(sizes.related_targets), related_distractors=min(sizes.related_distractors, 20),
                   gor_papers=min(sizes.gor_papers, 40), gor_questions=4)


@dataclass
class Context:
    settings: Settings
    run_dir: Path
    sizes: Sizes
    csfcube: Path
    slim_questions: Path
    related_work: Path
    corpus: Path
    judge_refused: str | None
    router: Callable[[], Backend] | None = None     # --hf-token-env: a visitor's router backend, a fresh one per part

    def services(self, settings: Settings) -> Services:
        """A part's services: its model the configured one, or (--hf-token-env) the router's under that token."""
        return Services(settings, llm_backend=self.router() if self.router else None)


def judge_refusal(settings: Settings) -> str | None:
    """Why the configured model may not judge: the packaged 135M model, locally or behind an endpoint."""
    refused = thoughts_eval.judge_refusal(settings)
    if refused:
        return "the configured model is the packaged 135M one, which cannot judge"
    if settings.llm_backend == "openai" and "135m" in settings.llm_model.lower():
        return f"the endpoint's model {settings.llm_model} is a 135M model, which cannot judge"
    return None


# --- the parts: each returns (effects, judge line, details path)
def part_csfcube(ctx: Context) -> tuple[list, str, str]:
    services = ctx.services(ctx.settings.model_copy(update={"data_dir": ctx.run_dir / "csfcube-store"}))
    default = services.generation.related_ranking
    methods = list(dict.fromkeys(["prism", default]))
    report = csfcube.run(services, ctx.csfcube, csfcube.FACETS, ctx.sizes.csfcube_queries, SEPARATE,
                         None, methods)
    paths = csfcube_report.write_outputs(report, ctx.run_dir / "details", "csfcube")
    metric = csfcube.SELECTION_METRIC
    keys = list(report.per_query[csfcube.BASELINE])
    effects = [paired_effect("csfcube", m, csfcube.BASELINE, metric, [report.per_query[m][k][metric] for k in keys],
                             [report.per_query[csfcube.BASELINE][k][metric] for k in keys],
                             "the Related default" if m == default else "")
               for m in methods if m in report.per_query]
    return effects, "no judge in this part", _details(paths)


def memory_effects(rows: dict[str, list[dict]], warmups: int) -> list:
    """Thought memory's root-source precision and recall against papers alone, per query paper. When no thought
    entered any query's top 8 the two lists were the same: that is no measurement, not a zero effect."""
    effects = [paired_effect("thoughts", "papers+thoughts", "papers", f"root-source {metric}",
                             [r[metric] for r in rows["papers+thoughts"]], [r[metric] for r in rows["papers"]],
                             f"after {warmups} warm-up questions") for metric in ("precision", "recall")]
    if any(r["thoughts"] for r in rows["papers+thoughts"]):
        return effects
    return [all_report.not_measured(e, "no thought entered any query's top 8, so both lists were the same; not "
                                       "evidence either way") for e in effects]


def part_thoughts(ctx: Context) -> tuple[list, str, str]:
    judge = ctx.judge_refused is None
    store = ctx.run_dir / f"thoughts-store-w{ctx.sizes.thoughts_warmup}-k8-s13"
    services = ctx.services(ctx.settings.model_copy(update={"data_dir": store, "top_k": 8}))
    report = thoughts_eval.run(services, ctx.csfcube, ctx.sizes.thoughts_warmup, 8, 13, progress=_to_stderr,
                               judge=judge)
    paths = thoughts_eval.write_outputs(report, ctx.run_dir / "details", "thoughts")
    last = report.curve[max(report.curve, key=int)]
    effects = memory_effects(last["per_query"], max(int(c) for c in report.curve))
    if report.judge:
        effects.append(_win_rate_effect("thoughts", "papers+thoughts", "papers", report.judge))
    return effects, _judge_line(ctx, judge), _details(paths)


def part_slim(ctx: Context) -> tuple[list, str, str]:
    judge = ctx.judge_refused is None
    questions = slim_eval.read_questions(ctx.slim_questions, ctx.sizes.slim_questions)
    store = ctx.run_dir / slim_eval.library_name(questions, ctx.sizes.slim_distractors)
    services = ctx.services(ctx.settings.model_copy(update={"data_dir": store}))
    slim_eval.prepare_library(services, questions, ctx.corpus, ctx.sizes.slim_distractors)
    report = slim_eval.evaluate(services, questions, ("always", "adaptive"), progress=_to_stderr,
                                answer_judge=services.llm if judge else None)
    paths = slim_eval.write_outputs(report, ctx.run_dir / "details", "slim")
    by = {s: {r["question"]: r for r in report.per_question if r["strategy"] == s} for s in ("always", "adaptive")}
    keys = [q for q in by["adaptive"] if q in by["always"]]
    effects = [paired_effect("slim", "SlimPLM", "always-retrieve", metric,
                             [float(by["adaptive"][q][key]) for q in keys], [float(by["always"][q][key]) for q in keys])
               for metric, key in (("answer token-F1", "f1"), ("retrieval rate", "retrieved"),
                                   ("main-model calls", "main_calls"))]
    if judge:
        ours, theirs = (report.summary[s]["all"].get("judge_accuracy") for s in ("adaptive", "always"))
        effects.append(unpaired_effect("slim", "SlimPLM", "always-retrieve", "judged accuracy", ours, theirs,
                                       len(keys)))
    return effects, _judge_line(ctx, judge), _details(paths)


def part_related_work(ctx: Context) -> tuple[list, str, str]:
    targets = related_work_eval.load_targets(ctx.related_work)[:ctx.sizes.related_targets]
    digest = hashlib.sha1(str(ctx.related_work.resolve()).encode()).hexdigest()[:8]
    store_settings = ctx.settings.model_copy(update={"data_dir": ctx.run_dir / f"related-work-{digest}",
                                                     **related_work_eval.WRITING})
    backend = TimedBackend(ctx.router() if ctx.router else build_llm(store_settings, None).backend)
    services = Services(store_settings, llm_backend=backend)
    related_work_eval.prepare_library(services, targets, ctx.corpus, ctx.sizes.related_distractors)
    report = related_work_eval.evaluate(services, backend, targets, ("plain", "rat"), progress=_to_stderr)
    judge = ctx.judge_refused is None
    if judge:
        report.judge = related_work_eval.judge_drafts(services, targets, report.per_target, progress=_to_stderr)
    paths = related_work_eval.write_outputs(report, ctx.run_dir / "details")
    rows = list(report.per_target.values())
    effects = []
    for metric, key in (("citation recall", "citation_recall"), ("citation precision", "citation_precision")):
        pairs = [(r["rat"][key], r["plain"][key]) for r in rows if None not in (r["rat"][key], r["plain"][key])]
        if pairs:             # precision is undefined for a draft that cites nothing: such targets are left out
            effects.append(paired_effect("related-work", "RAT", "plain retrieval + one call", metric,
                                         [a for a, _ in pairs], [b for _, b in pairs]))
    if report.judge:
        effects.append(_win_rate_effect("related-work", "RAT", "plain retrieval + one call", report.judge))
    return effects, _judge_line(ctx, judge), _details(paths)


def part_gor(ctx: Context) -> tuple[list, str, str]:
    from copilot.eval import gor_eval
    from copilot.features import gor_period as period_feature
    from copilot.features import library

    store = ctx.run_dir / f"gor-store-{ctx.sizes.gor_papers}"
    settings = ctx.settings.model_copy(update={"data_dir": store, "gor_questions": ctx.sizes.gor_questions,
                                               "gor_responses": max(2, ctx.sizes.gor_questions // 2)})
    services = ctx.services(settings)
    days = gor_period(ctx.corpus, ctx.sizes.gor_papers)
    if services.store.count("paper") == 0:
        library.import_snapshot(services, ctx.corpus, ctx.sizes.gor_papers, lambda *_: None)
    report = gor_eval.run(services, period_feature.scope_for(days[0], days[1]),
                          progress=lambda s: _to_stderr(f"[gor] {s}"))
    paths = gor_eval.write_outputs(report, ctx.run_dir / "details", "gor")
    n = report.meta.get("heldout_questions", 0)
    effects = [unpaired_effect("gor", "GoR", baseline, "held-out MRR", report.heldout["gor"].get("mrr"),
                               report.heldout[baseline].get("mrr"), n, "means only (no per-question scores)")
               for baseline in ("plain", "bm25")]
    return effects, "no judge in this part", _details(paths)


def gor_period(corpus: Path, papers: int) -> tuple[date, date]:
    """The first and last publication day of the corpus's first `papers` papers (the period GoR is trained on)."""
    days = []
    with corpus.open(encoding="utf-8") as handle:
        for _, line in zip(range(papers), handle):
            found = re.search(r"\d{4}-\d{2}-\d{2}", str(_day_of(json.loads(line))))
            if found:
                days.append(date.fromisoformat(found[0]))
    if not days:
        raise ValueError(f"no publication dates in the first {papers} papers of {corpus}")
    return min(days), max(days)


def _day_of(row: dict) -> str:
    return row.get("listing_date") or row.get("published") or row.get("update_date") or ""


RUNNERS: dict[str, Callable[[Context], tuple[list, str, str]]] = {
    "csfcube": part_csfcube, "thoughts": part_thoughts, "slim": part_slim, "related-work": part_related_work,
    "gor": part_gor}


def _details(paths: dict[str, Path]) -> str:
    return str(paths.get("markdown") or paths.get("md") or "")


def _win_rate_effect(part: str, method: str, baseline: str, judged: dict):
    """A blind judge's win rate for `method` (judge_summary's fields) against the coin's 0.5."""
    note = "no decisive verdict" if judged["ci_low"] is None else \
        f"Wilson interval [{judged['ci_low']:.2f}, {judged['ci_high']:.2f}]"
    return unpaired_effect(part, method, baseline, "judged win rate", judged.get("win_rate"), 0.5,
                           judged["wins"] + judged["losses"], note)


def _judge_line(ctx: Context, judged: bool) -> str:
    return f"judged by {ctx.settings.llm_model if ctx.settings.llm_backend == 'openai' else 'the local model'}" \
        if judged else f"not judged: {ctx.judge_refused}"


def run_part(ctx: Context, name: str) -> PartResult:
    started = time.monotonic()
    _to_stderr(f"[all] {name}: {ctx.sizes.describe(name)}")
    try:
        effects, judge, details = RUNNERS[name](ctx)
        result = PartResult(name, "ran", effects=effects, judge=judge, details=details)
    except KeyboardInterrupt:
        raise
    except Exception as error:               # one part's failure is reported; the others still run
        _to_stderr(traceback.format_exc())
        result = PartResult(name, "failed", reason=f"{type(error).__name__}: {str(error)[:300]}")
    result.seconds = round(time.monotonic() - started, 1)
    result.load = " ".join(f"{x:.2f}" for x in csfcube.machine()["load_average"])
    result.size = ctx.sizes.describe(name)
    return result


def model_name(settings: Settings) -> str:
    return Services(settings).llm_info()["model"] if settings.llm_backend == "local" else \
        f"{settings.llm_model} at {settings.openai_base_url or 'api.openai.com'}"


def visitor_router(settings: Settings, variable: str | None,
                   model: str | None) -> tuple[Settings, Callable[[], Backend] | None]:
    """--hf-token-env (and --hf-model): every part's model calls, the judge's included, go through the router with
    that visitor's token, the router's model named as the configured one (reports, judge lines, caches). A fresh
    backend per part: a router failure stops that part's calls (no retries), not the next part's."""
    token = env_token(settings, variable, model)
    if token is None:
        return settings, None
    name = picked_model(settings, model)
    routed = routed_settings(settings, name)
    return routed, lambda: RouterBackend(settings.hf_router_url, token, name, settings.hf_timeout)


def cmd_eval_all(args: argparse.Namespace) -> int:
    settings, router = visitor_router(load_settings(), args.hf_token_env, args.hf_model)
    skip = {s.strip() for value in args.skip for s in value.split(",") if s.strip()}
    if skip - set(PARTS):
        raise UserError(f"--skip takes some of {', '.join(PARTS)}, not {', '.join(sorted(skip - set(PARTS)))}")
    model = model_name(settings)
    slug = re.sub(r"[^A-Za-z0-9.-]+", "-", model)[:60].strip("-")
    run_dir = settings.data_dir / "eval" / "all" / f"{slug}-{'quick' if args.quick else 'full'}"
    sizes = QUICK if args.quick else FULL
    if args.limit is not None:
        sizes = limited(sizes, args.limit)
        run_dir = run_dir.with_name(run_dir.name + f"-n{args.limit}")
    ctx = Context(settings, run_dir, sizes, Path(args.csfcube), Path(args.slim_questions),
                  Path(args.related_work), Path(args.corpus) if args.corpus else DEFAULT_CORPUS,
                  judge_refusal(settings), router)
    started = time.monotonic()
    parts = [_one_part(ctx, name, skip) for name in PARTS]
    # hook for issue #31 item 2 (the model profile, branch `extract`): report the profile in use beside the model
    meta = {"model": model, "backend": settings.llm_backend, "quick": args.quick, "limit": args.limit, **_machine(),
            "wall_seconds": round(time.monotonic() - started, 1), "finished": all_report.now(),
            "resumed_parts": [p.name for p in parts if p.reason.startswith("resumed")], "run_dir": str(run_dir)}
    report, paths = all_report.write_report(run_dir, parts, meta)
    _to_stderr(all_report.markdown(parts, meta))
    _to_stderr("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.json:
        print_json(report)
    else:
        print(all_report.markdown(parts, meta))
    return 0


def _one_part(ctx: Context, name: str, skip: set[str]) -> PartResult:
    if name in skip:
        return PartResult(name, "skipped", reason="--skip", size=ctx.sizes.describe(name))
    saved = all_report.saved_part(ctx.run_dir, name)
    if saved is not None and saved.status == "ran":
        _to_stderr(f"[all] {name}: finished in an earlier run, kept ({ctx.run_dir / 'parts'})")
        return saved
    result = run_part(ctx, name)
    all_report.save_part(ctx.run_dir, result)
    return result


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _machine() -> dict:
    found = csfcube.machine()
    return {"cpu": found["cpu"], "cores": found["cores"], "load_at_end": found["load_average"]}


def add_eval_all_command(names: argparse._SubParsersAction) -> None:
    p = names.add_parser("all", help="every method's evaluation against the configured model, one report "
                         "(Markdown, JSON, SVG): each method's effect against its baseline with a paired interval, n, "
                         "the model, the machine and the wall time; resumable, each part skippable")
    p.add_argument("--quick", action="store_true", help="small n per part (under 15 minutes on 2 cores with the "
                   "packaged model; the report says what ran)")
    p.add_argument("--skip", action="append", default=[], metavar="PART",
                   help=f"leave a part out (repeatable or comma-separated): {', '.join(PARTS)}")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="at most N items per part and few "
                   "distractors: checks the plumbing in minutes; the figures mean nothing")
    p.add_argument("--csfcube", default=str(SHARED_DATA / "csfcube"), help="CSFCube directory (default: "
                   "../shared/data/csfcube)")
    p.add_argument("--slim-questions", default=str(ROOT / "tests" / "data" / "slim-dev.jsonl"),
                   help="SlimPLM question file (default: tests/data/slim-dev.jsonl)")
    p.add_argument("--related-work", default=str(SHARED_DATA / "related-work"), help="related-work records "
                   "(default: ../shared/data/related-work)")
    p.add_argument("--corpus", default=None, help="JSON-lines papers for distractors and GoR's period (default: "
                   "../shared/data/arxiv-cs-2025-2026/papers.jsonl)")
    add_visitor_flags(p, "every part's model, the judge included, is the router's, billed to that account")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object: meta, parts (the "
                   "Markdown goes to stderr)")
    p.set_defaults(func=cmd_eval_all)

