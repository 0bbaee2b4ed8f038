"""`eval NAME …`: evaluations that write JSON + Markdown under the data dir (`eval csfcube`, `eval thoughts`,
`eval slim`), and `eval slim-questions`, which writes SlimPLM's dev question set."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from copilot.cli.fulltext import add_fulltext_eval
from copilot.cli.output import print_json
from copilot.cli.roles import add_roles_evals
from copilot.config import load_settings
from copilot.errors import UserError
from copilot.eval import csfcube_lists, csfcube_nested, related_work_eval, slim_agreement, slim_eval, thoughts_eval
from copilot.eval.bench_chat import TimedBackend
from copilot.eval.csfcube import FACETS, METHODS, EvalDataError, output_name, run
from copilot.eval.csfcube_report import markdown_table, write_outputs
from copilot.llm import build_llm
from copilot.methods.prism import ASPECT_MAX_TOKENS, DETAILED_ASPECT_MAX_TOKENS, MODES, SEPARATE
from copilot.services import Services


def cmd_eval_csfcube(args: argparse.Namespace) -> int:
    facets = [f.strip() for f in args.facets.split(",") if f.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    services = Services()
    try:
        report = run(services, Path(args.data), facets, args.limit, args.mode, args.aspect_tokens, methods)
    except EvalDataError as error:
        raise UserError(str(error)) from None
    report.default_nested = csfcube_nested.nested_default(report)
    report.meta["list_ablation"] = csfcube_lists.list_ablation(report)
    name = output_name(report.meta["fold"], args.mode, args.limit, facets, report.meta["methods"])
    paths = write_outputs(report, services.settings.data_dir / "eval", name)
    _to_stderr(markdown_table(report))
    _to_stderr(csfcube_nested.markdown(report.default_nested))
    _to_stderr(csfcube_lists.markdown(report.meta["list_ablation"]))
    _to_stderr("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.json:
        print_json(report.as_json())
    else:
        print(markdown_table(report))
    return 0


def thoughts_run_name(warmup_from: str, warmup: int, k: int, seed: int) -> str:
    source = "" if warmup_from == "random" else f"-{warmup_from}"
    return f"w{warmup}{source}-k{k}-s{seed}"


def thoughts_store_dir(eval_dir: Path, data: Path, run_name: str) -> Path:
    """The evaluation's own store: one per data directory and run (warm-up, K, seed), so a rerun resumes it."""
    digest = hashlib.sha1(str(data.resolve()).encode("utf-8")).hexdigest()[:8]
    return eval_dir / "thoughts-store" / f"{data.resolve().name}-{digest}-{run_name}"


def cmd_eval_thoughts(args: argparse.Namespace) -> int:
    settings = load_settings()
    refused = thoughts_eval.judge_refusal(settings, args.judge_local) if args.judge else None
    if refused:
        raise UserError(refused)
    eval_dir = settings.data_dir / "eval"
    run_name = thoughts_run_name(args.warmup_from, args.warmup, args.k, args.seed)
    store_dir = thoughts_store_dir(eval_dir, Path(args.data), run_name if args.fold == "dev" else
                                   f"{args.fold}-{run_name}")
    services = Services(settings.model_copy(update={"data_dir": store_dir, "top_k": args.k}))
    try:
        report = thoughts_eval.run(services, Path(args.data), args.warmup, args.k, args.seed, progress=_to_stderr,
                                   warmup_from=args.warmup_from, judge=args.judge, fold=args.fold)
    except thoughts_eval.EvalDataError as error:
        raise UserError(str(error)) from None
    except KeyboardInterrupt:
        _to_stderr(f"interrupted: the warm-up so far is saved in {store_dir}; run the same command to resume "
                   "(no report was written)")
        return 130
    name = f"thoughts-{report.meta['fold'] or 'fold'}-{run_name}"
    paths = thoughts_eval.write_outputs(report, eval_dir, name)
    _to_stderr(thoughts_eval.markdown(report))
    _to_stderr("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.json:
        print_json(report.as_json())
    else:
        print(thoughts_eval.markdown(report))
    return 0


def default_corpus() -> Path:
    """The shared 2025-2026 arXiv corpus beside the repository (../shared/data/…)."""
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "arxiv-cs-2025-2026" / "papers.jsonl"


def _corpus(args: argparse.Namespace) -> Path:
    corpus = Path(args.corpus) if args.corpus else default_corpus()
    if not corpus.is_file():
        raise UserError(f"no corpus at {corpus}: pass --corpus PATH (a JSON-lines file of arXiv papers)")
    return corpus


def cmd_eval_related_work(args: argparse.Namespace) -> int:
    """Drafts with plain retrieval + one call, RAT, and RAT over papers ∪ thoughts after a warm-up."""
    settings = load_settings()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in related_work_eval.METHODS]
    if unknown:
        raise UserError(f"unknown method(s) {', '.join(unknown)}: choose from {', '.join(related_work_eval.METHODS)}")
    refused = thoughts_eval.judge_refusal(settings, args.judge_local) if args.judge else None
    if refused:
        raise UserError(refused)
    if args.judge and not {"plain", "rat"} <= set(methods):
        raise UserError("--judge compares RAT's drafts with plain retrieval's: keep both in --methods")
    try:
        targets = related_work_eval.load_targets(Path(args.data))[:args.limit]
    except related_work_eval.EvalDataError as error:
        raise UserError(str(error)) from None
    eval_dir = settings.data_dir / "eval"
    digest = hashlib.sha1(str(Path(args.data).resolve()).encode("utf-8")).hexdigest()[:8]
    store_dir = eval_dir / "related-work-store" / f"{digest}-d{args.distractors}"
    store_settings = settings.model_copy(update={"data_dir": store_dir, **related_work_eval.WRITING})
    backend = TimedBackend(build_llm(store_settings, None).backend)
    services = Services(store_settings, llm_backend=backend)
    stored = related_work_eval.prepare_library(services, targets, _corpus(args), args.distractors)
    _to_stderr(f"library: {stored} papers in {store_dir}; {len(targets)} target papers")
    report = related_work_eval.evaluate(services, backend, targets, methods, progress=_to_stderr)
    report.meta.update(data=str(args.data), library_papers=stored, distractors=args.distractors)
    if args.judge:
        report.judge = related_work_eval.judge_drafts(services, targets, report.per_target, progress=_to_stderr)
    paths = related_work_eval.write_outputs(report, eval_dir)
    _to_stderr(related_work_eval.markdown(report))
    _to_stderr("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.json:
        print_json(report.as_json())
    else:
        print(related_work_eval.markdown(report))
    return 0


def cmd_eval_slim_questions(args: argparse.Namespace) -> int:
    rows = slim_eval.make_questions(_corpus(args), args.seed, args.papers)
    out = slim_eval.write_questions(rows, Path(args.out))
    papers = sum(bool(row["gold"]) for row in rows)
    _to_stderr(f"wrote {len(rows)} questions ({papers} about a paper, {len(rows) - papers} general) to {out}")
    return 0


def cmd_eval_slim_agreement(args: argparse.Namespace) -> int:
    path = Path(args.questions)
    if not path.is_file():
        raise UserError(f"no question file at {path}")
    settings = load_settings()
    services = Services(settings)
    try:
        report = slim_agreement.measure(services, slim_eval.read_questions(path, args.limit), progress=_to_stderr)
    except ValueError as error:
        raise UserError(str(error)) from None
    report["meta"]["questions_file"] = str(path)
    out = settings.data_dir / "eval" / f"slim-agreement-{path.stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    _to_stderr(slim_agreement.markdown(report))
    _to_stderr(f"wrote {out}")
    if args.json:
        print_json(report)
    else:
        print(slim_agreement.markdown(report))
    return 0


def cmd_eval_slim(args: argparse.Namespace) -> int:
    path = Path(args.questions)
    if not path.is_file():
        raise UserError(f"no question file at {path}: make one with `python -m copilot eval slim-questions --out "
                        f"{path}`")
    questions = slim_eval.read_questions(path, args.limit)
    settings = load_settings()
    refused = thoughts_eval.judge_refusal(settings, args.judge_local) if args.judge else None
    if refused:
        raise UserError(refused)
    eval_dir = settings.data_dir / "eval"
    store_dir = eval_dir / slim_eval.library_name(questions, args.distractors)
    services = Services(settings.model_copy(update={"data_dir": store_dir}))
    stored = slim_eval.prepare_library(services, questions, _corpus(args), args.distractors)
    _to_stderr(f"library: {stored} papers in {store_dir}")
    strategies = [s.strip() for s in (args.strategies or ",".join(slim_eval.STRATEGIES)).split(",") if s.strip()]
    if not strategies or set(strategies) - set(slim_eval.ALL_STRATEGIES):
        raise UserError(f"--strategies takes some of {', '.join(slim_eval.ALL_STRATEGIES)}")
    report = slim_eval.evaluate(services, questions, strategies, progress=_to_stderr,
                                answer_judge=services.llm if args.judge else None)
    report.meta.update(questions_file=str(path), library_papers=stored, distractors=args.distractors)
    paths = slim_eval.write_outputs(report, eval_dir, f"slim-{path.stem}-n{len(questions)}"
                                       + ("" if len(strategies) == len(slim_eval.STRATEGIES)
                                          else "-" + "-".join(strategies)))
    _to_stderr(slim_eval.markdown(report))
    _to_stderr("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.json:
        print_json(report.as_json())
    else:
        print(slim_eval.markdown(report))
    return 0 if report.meta["slim_one_main_call"] else 1


GOR_VARIANT_KEYS = {"epochs": int, "lr": float, "alpha": float, "dropout": float, "tau": float}


def _train_variant(train, items: list[str]):
    """The training settings with `--train KEY=VALUE` changes (a variant is trained and stored beside the default,
    on the period's cached simulation)."""
    from dataclasses import replace

    changes = {}
    for item in items:
        key, _, value = item.partition("=")
        if key not in GOR_VARIANT_KEYS or not value:
            raise UserError(f"--train takes KEY=VALUE with KEY one of {', '.join(GOR_VARIANT_KEYS)}; got {item!r}")
        try:
            changes[key] = GOR_VARIANT_KEYS[key](value)
        except ValueError:
            raise UserError(f"--train {key} needs a number, got {value!r}") from None
    return replace(train, **changes)


def cmd_eval_gor(args: argparse.Namespace) -> int:
    from datetime import date

    from copilot.eval import gor_eval
    from copilot.features import gor, gor_period

    services = Services()
    categories = [c.strip() for c in (args.categories or "").split(",") if c.strip()]
    try:
        start, end = date.fromisoformat(args.start), date.fromisoformat(args.end)
    except ValueError:
        raise UserError("--from and --to take dates like 2025-05-12") from None
    scope = gor_period.scope_for(start, end, categories)
    opts = gor.GoROptions.from_settings(services.settings)
    opts.train = _train_variant(opts.train, args.train or [])
    try:
        report = gor_eval.run(services, scope, opts, answers=args.answers,
                              progress=lambda s: _to_stderr(f"[gor] {s}"))
    except (gor.TooFewNodes, ValueError) as error:
        raise UserError(str(error)) from None
    variant = "".join(f"-{item.replace('=', '')}" for item in args.train or [])
    paths = gor_eval.write_outputs(report, services.settings.data_dir / "eval",
                                   f"gor-{start}-{end}{'-' + '-'.join(categories) if categories else ''}{variant}")
    _to_stderr(gor_eval.markdown(report))
    _to_stderr("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.json:
        print_json(report.as_json())
    else:
        print(gor_eval.markdown(report))
    return 0


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_eval_commands(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("eval", help="run an evaluation (eval NAME … --json); writes JSON + Markdown "
                           "under the data dir")
    names = group.add_subparsers(dest="eval_name", metavar="NAME", required=True)
    _add_csfcube(names)
    _add_thoughts(names)
    _add_slim(names)
    _add_slim_agreement(names)
    _add_gor(names)
    _add_related_work(names)
    _add_slim_questions(names)
    add_roles_evals(names)        # eval roles, eval answers (issue #39): their own module
    add_fulltext_eval(names)      # eval fulltext (issue #48)


def _add_csfcube(names: argparse._SubParsersAction) -> None:
    """`eval csfcube`."""
    p = names.add_parser("csfcube", help="faceted paper-to-paper retrieval on CSFCube (NDCG@20, upstream NDCG%%20, "
                         "MAP, Recall@20; each method against the abstract baseline, paired over queries)")
    p.add_argument("--data", required=True, help="directory with abstracts-csfcube-from-readable.jsonl and "
                   "*-pid2anns-{background,method,result}.json")
    p.add_argument("--facets", default=",".join(FACETS), help="comma-separated facets (default: all three)")
    p.add_argument("--methods", default=",".join(METHODS),
                   help="comma-separated methods (default: all; abstract, the baseline, is always run); "
                   "without prism and prism-facet no LLM is used")
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N queries (facet order)")
    p.add_argument("--mode", choices=MODES, default=SEPARATE,
                   help="aspect descriptions: one LLM call per aspect (separate) or one JSON call (json)")
    p.add_argument("--aspect-tokens", type=int, default=None,
                   help=f"most tokens per aspect description (default: {ASPECT_MAX_TOKENS} for a small local model, "
                   f"{DETAILED_ASPECT_MAX_TOKENS} for the detailed paragraphs a capable writer gives)")
    p.add_argument("--json", action="store_true", help="print one JSON object: results, vs_abstract, per_query, meta "
                   "(the Markdown tables go to stderr)")
    p.set_defaults(func=cmd_eval_csfcube)


def _add_thoughts(names: argparse._SubParsersAction) -> None:
    """`eval thoughts`."""
    p = names.add_parser("thoughts", help="does thought memory help? root-source precision/recall of papers vs "
                         "papers + thoughts on CSFCube, after 0, N/4, N/2 and N warm-up questions")
    p.add_argument("--data", required=True, help="directory with abstracts-csfcube-from-readable.jsonl and one "
                   "*-qrels-cited.tsv (query_pid, cand_pid, cited)")
    p.add_argument("--warmup", type=int, default=40, help="warm-up questions asked through the chat path "
                   "(default 40)")
    p.add_argument("--k", type=int, default=8, help="items retrieved per query and per warm-up question (default 8)")
    p.add_argument("--seed", type=int, default=13, help="seed of the warm-up papers' draw")
    p.add_argument("--warmup-from", choices=thoughts_eval.WARMUP_SOURCES, default="random",
                   help="warm-up questions from the titles of random papers (default) or of the query papers' "
                   "nearest neighbours by embedding (never a query paper; no judgement read)")
    p.add_argument("--fold", choices=("dev", "heldout"), default="dev", help="the query papers of the qrels file "
                   "(dev, default), or those of test-pid2pool-csfcube.json it does not hold (heldout: each with the "
                   "candidates the pool took from its reference list)")
    _add_judge_flags(p, "after the warm-up, the configured LLM (an OpenAI-compatible endpoint) judges each query's "
                     "two answers, blind and in seeded random order: wins/losses/ties of papers + thoughts, win rate "
                     "with a 95%% Wilson interval")
    p.add_argument("--json", action="store_true", help="print one JSON object: curve, warmup, meta, and judge with "
                   "--judge (the Markdown table goes to stderr)")
    p.set_defaults(func=cmd_eval_thoughts)


def _add_slim(names: argparse._SubParsersAction) -> None:
    """`eval slim`."""
    p = names.add_parser("slim", help="SlimPLM against always- and never-retrieve: answer token-F1, retrieval rate, "
                         "main calls per question, proxy+judge token share, time, gold paper retrieved")
    p.add_argument("--questions", required=True, help="JSON lines {question, answer, gold: [arXiv ids]} "
                   "(e.g. tests/data/slim-dev.jsonl)")
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N questions")
    p.add_argument("--corpus", default=None, help="JSON-lines papers the gold and distractor papers are imported "
                   "from (default: ../shared/data/arxiv-cs-2025-2026/papers.jsonl)")
    p.add_argument("--distractors", type=int, default=300, help="the corpus's first N other papers also imported "
                   "(default 300)")
    p.add_argument("--strategies", default=None, help="comma-separated, some of always,never,adaptive,extractive "
                   "(default: the first three; adaptive is SlimPLM, extractive answers by quotes)")
    _add_judge_flags(p, "the configured LLM (an OpenAI-compatible endpoint) also judges every answer correct or "
                     "incorrect against the reference answer, not told how it was made")
    p.add_argument("--json", action="store_true", help="print one JSON object: summary, judge, per_question, meta "
                   "(the Markdown tables go to stderr); exit 1 if SlimPLM ever called the main model other than once")
    p.set_defaults(func=cmd_eval_slim)



def _add_slim_agreement(names: argparse._SubParsersAction) -> None:
    """`eval slim-agreement`."""
    p = names.add_parser("slim-agreement", help="SlimPLM's judge read three ways on the questions no rule forces: "
                         "weighed at P(unknown) 0.5, the greedy word, the written word; how often they agree")
    p.add_argument("--questions", required=True, help="JSON lines {question, answer, gold} (tests/data/slim-dev.jsonl)")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions of the file")
    p.add_argument("--json", action="store_true", help="print one JSON object: summary, rows, meta")
    p.set_defaults(func=cmd_eval_slim_agreement)


def _add_gor(names: argparse._SubParsersAction) -> None:
    """`eval gor`."""
    p = names.add_parser("gor", help="Graph of Records on a real period: GoR's top-6 vs plain embedding and BM25 "
                         "top-6 on held-out simulated questions (MRR, hit@6, overlap@6 of the BERTScore ranking), "
                         "topic coverage, training and retrieval time (trains the period first if needed)")
    p.add_argument("--from", dest="start", required=True, help="first day, YYYY-MM-DD")
    p.add_argument("--to", dest="end", required=True, help="last day, YYYY-MM-DD")
    p.add_argument("--categories", default=None, help="comma-separated primary categories (default: all)")
    p.add_argument("--answers", type=int, default=0, help="also answer the first N held-out questions with each "
                   "method's top-6 and report ROUGE-L against the question's source paper (default 0: no LLM)")
    p.add_argument("--train", action="append", metavar="KEY=VALUE", help="a training variant (repeatable): "
                   "epochs, lr, alpha, dropout or tau changed from the product's, e.g. --train dropout=0.2; trained "
                   "on the period's cached simulation and stored beside the default network")
    p.add_argument("--json", action="store_true", help="print one JSON object: meta, heldout, trained_on, coverage, "
                   "answers, timing, per_question (the Markdown table goes to stderr)")
    p.set_defaults(func=cmd_eval_gor)


def _add_judge_flags(p: argparse.ArgumentParser, judge_help: str) -> None:
    """--judge (what the judge does, `judge_help`) and --judge-local, as every judged evaluation takes them."""
    p.add_argument("--judge", action="store_true", help=judge_help)
    p.add_argument("--judge-local", action="store_true", help="let the packaged 135M local model judge (it cannot "
                   "judge well; for testing the plumbing)")


def _add_related_work(names: argparse._SubParsersAction) -> None:
    """`eval related-work`."""
    p = names.add_parser("related-work", help="related-work drafts against real sections: plain retrieval + one call "
                         "vs RAT vs RAT over papers and thoughts after a warm-up (citation recall/precision, ROUGE-L, "
                         "length, time, LLM calls)")
    p.add_argument("--data", required=True, help="directory of rwsg-prv records (e.g. ../shared/data/related-work)")
    p.add_argument("--methods", default=",".join(related_work_eval.METHODS), help="comma-separated: "
                   + ", ".join(related_work_eval.METHODS))
    p.add_argument("--limit", type=int, default=None, help="only the first N target papers")
    p.add_argument("--corpus", default=None, help="JSON-lines papers the distractors come from "
                   "(default: ../shared/data/arxiv-cs-2025-2026/papers.jsonl)")
    p.add_argument("--distractors", type=int, default=300, help="the corpus's first N papers also in the library "
                   "(default 300)")
    _add_judge_flags(p, "the configured LLM (an OpenAI-compatible endpoint or a larger GGUF) judges RAT's draft "
                     "against plain retrieval's per target, blind and in seeded random order: RAT's win rate with a "
                     "95%% Wilson interval")
    p.add_argument("--json", action="store_true", help="print one JSON object: summary, per_target, meta, judge "
                   "(the Markdown table goes to stderr)")
    p.set_defaults(func=cmd_eval_related_work)


def _add_slim_questions(names: argparse._SubParsersAction) -> None:
    """`eval slim-questions`."""
    p = names.add_parser("slim-questions", help="write SlimPLM's dev question set: questions about seeded recent "
                         "papers (reference: the abstract's proposal sentence) alternating with general CS questions")
    p.add_argument("--out", required=True, help="the JSON-lines file to write (e.g. tests/data/slim-dev.jsonl)")
    p.add_argument("--seed", type=int, default=0, help="seed of the papers' draw (default 0)")
    p.add_argument("--papers", type=int, default=None, help="paper questions (default: as many as the general ones)")
    p.add_argument("--corpus", default=None, help="JSON-lines papers to draw from "
                   "(default: ../shared/data/arxiv-cs-2025-2026/papers.jsonl)")
    p.set_defaults(func=cmd_eval_slim_questions)

    from copilot.cli.eval_all import add_eval_all_command  # `eval all`: its own module (issue #31)

    add_eval_all_command(names)
