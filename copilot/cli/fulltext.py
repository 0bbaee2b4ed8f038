"""`fulltext import|fetch|status`: papers' full text (issue #48), read now rather than in the app's background."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from copilot.cli.output import print_json
from copilot.errors import UserError
from copilot.features import documents, fulltext
from copilot.services import Services
from copilot.sources.arxiv_fulltext import id_from_file_name
from copilot.sources.fulltext_pdf import MAX_PDF_BYTES


def _report(outcomes: list[fulltext.Outcome], as_json: bool) -> int:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    if as_json:
        print_json({"counts": counts, "papers": [
            {"id": o.paper_id, "status": o.status, "source": o.source, "message": o.message, "sentences": o.sentences,
             "fetch_s": round(o.fetch_s, 3), "parse_s": round(o.parse_s, 3), "embed_s": round(o.embed_s, 3)}
            for o in outcomes]})
    else:
        for o in outcomes:
            print(f"{o.paper_id or '?'}: {o.status} ({o.source or '-'}) {o.message}")
        print(", ".join(f"{status} {n}" for status, n in sorted(counts.items())) or "nothing to read")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    path = Path(args.dir)
    if path.is_file() and id_from_file_name(path.name) is None:
        return _import_document(path, args.user, args.json)
    if path.is_file():
        return _report(fulltext.import_paths(Services(), [path]), args.json)
    if not path.is_dir():
        raise UserError(f"no such file or folder: {path}")
    return _report(fulltext.import_files(Services(), path), args.json)


def _import_document(path: Path, user: str, as_json: bool) -> int:
    """A PDF not named by an arXiv id: a private document of `user` (features.documents), asked with
    `ask --paper doc:<n> --user USER`."""
    try:
        size = path.stat().st_size
        if size > MAX_PDF_BYTES:
            raise UserError(f"{path.name} is {size / 2 ** 20:.1f} MiB; a document may be at most "
                            f"{MAX_PDF_BYTES // 2 ** 20} MiB")
        data = path.read_bytes()
    except OSError as error:
        raise UserError(f"{path} could not be read ({error.strerror})") from None
    done = documents.upload(Services(), user, data, path.name)
    doc = done.document
    if as_json:
        print_json({"status": done.status, "message": done.message, "user": user,
                    "document": None if doc is None else {"id": doc.item_id, "title": doc.title, "pages": doc.pages,
                                                          "sentences": doc.sentences},
                    "parse_s": round(done.parse_s, 3), "embed_s": round(done.embed_s, 3)})
    else:
        print(f"{doc.item_id if doc else path.name}: {done.status} {done.message}")
    return 0 if doc is not None else 1


def cmd_fetch(args: argparse.Namespace) -> int:
    services = Services()
    if args.ids:
        ids = [i.strip() for part in args.ids for i in part.split(",") if i.strip()]
    elif args.feed:
        from copilot.features.feed import feed_for

        ids = [item.paper.id for item in feed_for(services, args.feed, visit=False).items[:args.limit]]
    else:
        rows = sorted(services.catalog.rows(), key=lambda row: -row.date)
        ids = [row.id for row in rows[:args.top]]
    known = {p.id for p in services.store.get_papers(ids)}
    unknown = [pid for pid in ids if pid not in known]
    for pid in unknown:
        print(f"{pid}: not in the library (import or ingest it first)", file=sys.stderr)
    todo = [pid for pid in ids if pid in known]
    if not args.again:
        todo = fulltext.wanted(services, todo)
    return _report([fulltext.read_paper(services, pid) for pid in todo], args.json)


def cmd_status(args: argparse.Namespace) -> int:
    counts = Services().fulltext.counts()
    print_json({"full_text": counts}) if args.json else print(
        ", ".join(f"{status} {n}" for status, n in sorted(counts.items())) or "no paper read yet")
    return 0


def add_fulltext_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fulltext", help="papers' full text: import files, fetch from arXiv, status")
    inner = p.add_subparsers(dest="fulltext_command", required=True)
    q = inner.add_parser("import", help="HTML or PDF files named by arXiv id (e.g. 2601.22777.html); a PDF named "
                         "otherwise becomes a private document of --user (ask it with ask --paper doc:N)")
    q.add_argument("dir", help="the folder of files, or one file")
    q.add_argument("--user", default="local", help="a private document's owner (default: local)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=cmd_import)

    q = inner.add_parser("fetch", help="read papers' full text from arXiv's HTML (the PDF where there is none)")
    which = q.add_mutually_exclusive_group(required=True)
    which.add_argument("--ids", nargs="+", help="arXiv ids (space- or comma-separated)")
    which.add_argument("--feed", metavar="USER", help="the top of this user's feed")
    which.add_argument("--top", type=int, metavar="N", help="the library's N newest papers")
    q.add_argument("--limit", type=int, default=10, help="with --feed: how many of its papers (default 10)")
    q.add_argument("--again", action="store_true", help="read papers again even if stored or recently failed")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=cmd_fetch)

    q = inner.add_parser("status", help="how many papers have full text, and why the others have none")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=cmd_status)


def cmd_eval_fulltext(args: argparse.Namespace) -> int:
    import hashlib
    import json

    from copilot.cli.roles import _corpus, _eval_library, _report, _to_stderr
    from copilot.config import load_settings
    from copilot.eval import fulltext_eval
    from copilot.features.library import ingestor
    from copilot.sources.snapshot import paper_from_row

    try:
        questions = fulltext_eval.read_questions(Path(args.questions), args.limit)
    except fulltext_eval.FulltextDataError as error:
        raise UserError(str(error)) from None
    pages = Path(args.pages) if args.pages else None
    if pages is not None and not pages.is_dir():
        raise UserError(f"no such folder: {pages}")
    wanted = sorted({row["paper"] for row in questions})
    settings = load_settings()
    services = _eval_library(settings, _corpus(args), args.papers, wanted, prefix="fulltext-")
    missing = set(wanted) - {p.id for p in services.store.get_papers(wanted)}
    if missing and Path(args.question_papers).is_file():
        rows = [json.loads(line) for line in Path(args.question_papers).read_text(encoding="utf-8").splitlines()
                if line.strip()]
        ingestor(services).run("eval fulltext", [paper_from_row(r) for r in rows if r.get("id") in missing])
    report = fulltext_eval.evaluate(services, questions, pages, progress=_to_stderr)
    report["meta"].update(questions=str(args.questions), pages=str(pages or ""),
                          questions_sha1=hashlib.sha1(Path(args.questions).read_bytes()).hexdigest()[:12],
                          first_papers=args.papers)
    return _report(report, fulltext_eval, settings.data_dir / "eval",
                   f"fulltext-{Path(args.questions).stem}-n{len(questions)}", args.json)


def add_fulltext_eval(names: argparse._SubParsersAction) -> None:
    """`eval fulltext` (issue #48)."""
    from copilot.cli.roles import REPO, SHARED

    p = names.add_parser("fulltext", help="do answers quote what a paper's body says? per question, ask before and "
                         "after reading the paper: the answer's sentence quoted, its section named, times")
    p.add_argument("--questions", default=str(REPO / "tests" / "data" / "fulltext-questions.jsonl"),
                   help="JSON lines {paper, question, patterns, kind, section} (default "
                   "tests/data/fulltext-questions.jsonl)")
    p.add_argument("--pages", default=None, help="read the papers from this folder of HTML/PDF files named by id "
                   "(e.g. ../shared/data/arxiv-html); default: fetch from COPILOT_ARXIV_HTML_URL")
    p.add_argument("--corpus", default=str(SHARED / "arxiv-cs-2025-2026" / "papers.jsonl"),
                   help="JSON-lines papers (default ../shared/data/arxiv-cs-2025-2026/papers.jsonl)")
    p.add_argument("--question-papers", default=str(SHARED / "arxiv-html" / "papers.jsonl"),
                   help="JSON-lines records of the questions' papers the corpus lacks (default "
                   "../shared/data/arxiv-html/papers.jsonl)")
    p.add_argument("--papers", type=int, default=2000, help="the corpus's first N papers form the library")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--json", action="store_true", help="print one JSON object: summary, readings, per_question")
    p.set_defaults(func=cmd_eval_fulltext)
