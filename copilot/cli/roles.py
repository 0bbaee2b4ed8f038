"""Sentence roles and whether answers answer (issue #39): `train-roles`, `eval roles`, `eval answers`; whether a
question naming a paper finds it (issue #57): `eval named`."""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

from copilot.cli.chat import add_visitor_flags, env_token
from copilot.cli.output import print_json
from copilot.config import load_settings
from copilot.errors import UserError
from copilot.features.signin import visitor_writer
from copilot.llm import LLMError

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _embedder():
    """The product's embedder as the settings configure it (the vectors Chat computes)."""
    from copilot.embed import Embedder

    settings = load_settings()
    return Embedder(settings.embed_model, batch_size=settings.embed_batch_size, backend=settings.embed_backend,
                    models_dir=settings.data_dir / "models", precision=settings.embed_precision)


def cmd_train_roles(args: argparse.Namespace) -> int:
    from copilot.eval import roles_eval

    data = Path(args.data)
    if not (data / "train.jsonl").is_file() or not (data / "dev.jsonl").is_file():
        raise UserError(f"{data} needs train.jsonl and dev.jsonl in CSAbstruct's format")
    csfcube = Path(args.csfcube) if args.csfcube else None
    if csfcube and not csfcube.is_file():
        raise UserError(f"no CSFCube abstracts file at {csfcube}")
    try:
        outcome = roles_eval.train(_embedder(), data, csfcube, Path(args.out) if args.out else None,
                                   progress=_to_stderr)
    except roles_eval.RolesDataError as error:
        raise UserError(str(error)) from None
    _to_stderr(f"wrote {outcome['weights']} ({outcome['bytes']:,} bytes): {outcome['chosen']}")
    if args.json:
        print_json(outcome)
    return 0


def cmd_eval_roles(args: argparse.Namespace) -> int:
    from copilot.eval import roles_eval
    from copilot.methods.sentence_roles import RoleModelError

    try:
        report = roles_eval.evaluate(_embedder(), Path(args.data), Path(args.weights) if args.weights else None)
    except (roles_eval.RolesDataError, RoleModelError) as error:
        raise UserError(str(error)) from None
    return _report(report, roles_eval, load_settings().data_dir / "eval", "roles-" + Path(args.data).resolve().stem,
                   args.json)


def cmd_eval_answers(args: argparse.Namespace) -> int:
    from copilot.eval import answers_eval

    corpus = _corpus(args)
    try:
        survey = answers_eval.read_questions(Path(args.questions), args.limit)
        papers = ([] if not args.paper_questions else
                  [r for r in answers_eval.read_questions(Path(args.paper_questions), key="gold") if r["gold"]])
    except answers_eval.AnswersDataError as error:
        raise UserError(str(error)) from None
    papers = papers[:args.paper_limit] if args.paper_limit is not None else papers
    settings = load_settings()
    token = env_token(settings, args.hf_token_env, args.hf_model)      # before the library: a bad flag fails at once
    services = _eval_library(settings, corpus, args.papers, sorted({pid for row in papers for pid in row["gold"]}))
    writer = visitor_writer(services, token, model=args.hf_model) if token else None
    try:
        report = answers_eval.evaluate(services, survey, papers, progress=_to_stderr, writer=writer)
    except LLMError as error:           # the router's sentence (the writer makes no call after its first failure)
        raise UserError(f"the answers could not be written: {error}") from None
    report["meta"].update(questions=str(args.questions), paper_questions=str(args.paper_questions or ""),
                          questions_sha1=hashlib.sha1(Path(args.questions).read_bytes()).hexdigest()[:12],
                          corpus=str(corpus), first_papers=args.papers)
    by = "-" + re.sub(r"[^A-Za-z0-9.-]+", "-", writer.model)[:60] if writer else ""
    return _report(report, answers_eval, settings.data_dir / "eval",
                   f"answers-{Path(args.questions).stem}-n{len(survey)}-p{len(papers)}{by}", args.json)


def cmd_eval_named(args: argparse.Namespace) -> int:
    from copilot.eval import answers_eval, named_eval

    corpus = _corpus(args)
    try:
        questions = named_eval.read_questions(Path(args.questions), args.limit)
        gold = sorted({pid for row in answers_eval.read_questions(Path(args.paper_questions), key="gold")
                       for pid in row["gold"]}) if args.paper_questions else []
    except (named_eval.NamedDataError, answers_eval.AnswersDataError) as error:
        raise UserError(str(error)) from None
    settings = load_settings()
    services = _eval_library(settings, corpus, args.papers, gold)
    missing = sorted({row["paper"] for row in questions} - {p.id for p in services.store.get_papers(
        sorted({row["paper"] for row in questions}))})
    if missing:
        raise UserError(f"the library lacks the named papers {', '.join(missing[:5])}: raise --papers")
    report = named_eval.evaluate(services, questions, progress=_to_stderr)
    report["meta"].update(questions=str(args.questions), corpus=str(corpus), first_papers=args.papers,
                          questions_sha1=hashlib.sha1(Path(args.questions).read_bytes()).hexdigest()[:12])
    return _report(report, named_eval, settings.data_dir / "eval",
                   f"named-{Path(args.questions).stem}-n{len(questions)}", args.json)


def cmd_eval_thoughts_dev(args: argparse.Namespace) -> int:
    from copilot.eval import answers_eval, thoughts_dev_eval

    corpus = _corpus(args)
    try:
        dev = answers_eval.read_questions(Path(args.questions), args.limit)
        warmups = thoughts_dev_eval.read_warmups(Path(args.warmup), len(dev))
        gold = sorted({pid for row in answers_eval.read_questions(Path(args.paper_questions), key="gold")
                       for pid in row["gold"]}) if args.paper_questions else []
    except answers_eval.AnswersDataError as error:
        raise UserError(str(error)) from None
    settings = load_settings()
    services = _eval_library(settings, corpus, args.papers, gold, prefix="thoughts-dev-")
    modes = [m for m in args.vector_modes.split(",") if m.strip()]
    report = thoughts_dev_eval.evaluate(services, dev, warmups, progress=_to_stderr, vector_modes=modes,
                                        trends=args.trends)
    report["meta"].update(questions=str(args.questions), warmup=str(args.warmup),
                          warmup_sha1=hashlib.sha1(Path(args.warmup).read_bytes()).hexdigest()[:12],
                          corpus=str(corpus), first_papers=args.papers)
    trends = "" if args.trends == "none" else f"-trends-{args.trends}"
    return _report(report, thoughts_dev_eval, settings.data_dir / "eval",
                   f"thoughts-dev-{Path(args.questions).stem}-n{len(dev)}-w{len(warmups)}{trends}", args.json)


def _corpus(args: argparse.Namespace) -> Path:
    corpus = Path(args.corpus)
    if not corpus.is_file():
        raise UserError(f"no corpus at {corpus}: pass --corpus PATH (a JSON-lines file of arXiv papers)")
    return corpus


def _eval_library(settings, corpus: Path, count: int, gold: list[str], prefix: str = ""):
    """The services over an evaluation's own library: the corpus's first `count` papers and the `gold` ones, kept
    under the data dir's eval/ folder (imported once)."""
    from copilot.eval import answers_eval
    from copilot.services import Services

    store_dir = settings.data_dir / "eval" / (prefix + answers_eval.library_name(count, gold))
    services = Services(settings.model_copy(update={"data_dir": store_dir, "scheduler": False}))
    stored = answers_eval.prepare_library(services, corpus, count, gold)
    _to_stderr(f"library: {stored} papers in {store_dir}")
    return services


def _report(report: dict, evaluation, folder: Path, name: str, as_json: bool) -> int:
    """An evaluation's report written as JSON + Markdown under `folder`, its table on stderr, then on stdout the
    one JSON object (--json) or the table."""
    paths = evaluation.write_outputs(report, folder, name)
    _to_stderr(evaluation.markdown(report))
    _to_stderr("wrote " + ", ".join(str(p) for p in paths.values()))
    if as_json:
        print_json(report)
    else:
        print(evaluation.markdown(report))
    return 0


def add_roles_commands(sub: argparse._SubParsersAction) -> None:
    """`train-roles`."""
    p = sub.add_parser("train-roles", help="train the sentence-role classifier (background / objective / method / "
                       "result / other) on CSAbstruct and write its weights into the package")
    p.add_argument("--data", default=str(SHARED / "csabstruct"), help="folder with CSAbstruct's train.jsonl and "
                   "dev.jsonl (dev only chooses the regularisation); default ../shared/data/csabstruct")
    p.add_argument("--csfcube", default=None, help="also try CSFCube's predicted sentence labels as down-weighted "
                   "training rows (abstracts-csfcube-from-readable.jsonl); kept only for a dev macro-F1 gain of 0.01+")
    p.add_argument("--out", default=None, help="weights file to write (default: copilot/methods/sentence_roles.npz)")
    p.add_argument("--json", action="store_true", help="print one JSON object: weights, chosen, trials")
    p.set_defaults(func=cmd_train_roles)


def add_roles_evals(names: argparse._SubParsersAction) -> None:
    """`eval roles`, `eval answers`, `eval named` and `eval thoughts-dev`."""
    p = names.add_parser("roles", help="the sentence-role classifier on CSAbstruct-format data: accuracy, macro-F1, "
                         "per-role precision/recall/F1, confusion")
    p.add_argument("--data", required=True, help="a JSON-lines file, or a folder of them, of {sentences, labels}")
    p.add_argument("--weights", default=None, help="weights file (default: the shipped ones)")
    p.add_argument("--json", action="store_true", help="print one JSON object (the Markdown tables go to stderr)")
    p.set_defaults(func=cmd_eval_roles)
    p = names.add_parser("answers", help="do Chat's answers answer? survey questions (recall and precision of the "
                         "papers quoted, background or bare-title quotes) and paper questions (key sentence quoted)")
    p.add_argument("--questions", default=str(REPO / "tests" / "data" / "answers-dev.jsonl"),
                   help="JSON lines {question, relevant: [arXiv ids]} (default tests/data/answers-dev.jsonl)")
    p.add_argument("--paper-questions", default=str(REPO / "tests" / "data" / "slim-dev.jsonl"),
                   help="JSON lines {question, answer, gold}; rows with a gold paper are asked (default "
                   "tests/data/slim-dev.jsonl; '' for none)")
    p.add_argument("--corpus", default=str(SHARED / "arxiv-cs-2025-2026" / "papers.jsonl"),
                   help="JSON-lines papers (default ../shared/data/arxiv-cs-2025-2026/papers.jsonl)")
    p.add_argument("--papers", type=int, default=2000, help="the corpus's first N papers form the library "
                   "(default 2000), with the paper questions' gold papers")
    p.add_argument("--limit", type=int, default=None, help="only the first N survey questions")
    p.add_argument("--paper-limit", type=int, default=None, help="only the first N paper questions")
    add_visitor_flags(p, "the answers are written by the router's model as that signed-in visitor's are on the page "
                      "(the figures read the table under the words)")
    p.add_argument("--json", action="store_true", help="print one JSON object: summary, survey, papers, meta")
    p.set_defaults(func=cmd_eval_answers)
    p = names.add_parser("named", help="does a question naming a paper (coined name, title, arXiv id, first author "
                         "and year) find it? the share where it heads Chat's table, is in it, and is Search's first "
                         "hit")
    p.add_argument("--questions", default=str(REPO / "tests" / "data" / "named-dev.jsonl"),
                   help="JSON lines {question, paper, names_by} (default tests/data/named-dev.jsonl)")
    p.add_argument("--paper-questions", default=str(REPO / "tests" / "data" / "slim-dev.jsonl"),
                   help="their gold papers join the library, as in `eval answers` (the same store; '' for none)")
    p.add_argument("--corpus", default=str(SHARED / "arxiv-cs-2025-2026" / "papers.jsonl"),
                   help="JSON-lines papers (default ../shared/data/arxiv-cs-2025-2026/papers.jsonl)")
    p.add_argument("--papers", type=int, default=2000, help="the corpus's first N papers form the library")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--json", action="store_true", help="print one JSON object: summary, per_question, meta")
    p.set_defaults(func=cmd_eval_named)
    p = names.add_parser("thoughts-dev", help="does thought memory add relevant papers? warm memory with related "
                         "questions voted for the thought side, then ask the answers dev set: recall and precision "
                         "per side, identical answers, comparisons, rows from memory")
    p.add_argument("--questions", default=str(REPO / "tests" / "data" / "answers-dev.jsonl"),
                   help="JSON lines {question, relevant: [arXiv ids]} (default tests/data/answers-dev.jsonl)")
    p.add_argument("--warmup", default=str(REPO / "tests" / "data" / "thoughts-warmup.jsonl"),
                   help="JSON lines {for: dev line, question} asked first (default tests/data/thoughts-warmup.jsonl)")
    p.add_argument("--paper-questions", default=str(REPO / "tests" / "data" / "slim-dev.jsonl"),
                   help="their gold papers join the library, as in `eval answers` ('' for none)")
    p.add_argument("--corpus", default=str(SHARED / "arxiv-cs-2025-2026" / "papers.jsonl"),
                   help="JSON-lines papers (default ../shared/data/arxiv-cs-2025-2026/papers.jsonl)")
    p.add_argument("--papers", type=int, default=2000, help="the corpus's first N papers form the library")
    p.add_argument("--limit", type=int, default=None, help="only the first N dev questions (and their warm-ups)")
    p.add_argument("--vector-modes", default="", help="comma-separated: also ask the dev questions with the row "
                   "thoughts embedded each way (question, question+quotes, quotes)")
    p.add_argument("--trends", choices=("none", "first", "only"), default="none",
                   help="store Trends summaries of the library's months as thoughts first (first), instead of the "
                   "warm-up (only), or not (none, default)")
    p.add_argument("--json", action="store_true", help="print one JSON object: summary, per_question, warmup, "
                   "by_vector, meta")
    p.set_defaults(func=cmd_eval_thoughts_dev)
