"""`import`, `ingest` and `status`: filling the library and reporting on it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from copilot.cli.output import ingest_progress_bar, print_json
from copilot.errors import UserError
from copilot.features import library
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSourceError


def cmd_import(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.is_file():
        raise UserError(f"no such file: {path}")
    total = args.limit
    if total is None:
        with path.open("rb") as handle:
            total = sum(1 for _ in handle)
    bar, update = ingest_progress_bar(total, "paper")
    counts = library.import_snapshot(Services(), path, args.limit, update)
    bar.close()
    for bad in counts.bad_lines[:20]:
        print(f"line {bad.line_no}: skipped ({bad.reason})", file=sys.stderr)
    result: dict[str, object] = dict(counts.as_dict())
    result["bad_lines"] = [{"line": b.line_no, "reason": b.reason} for b in counts.bad_lines]
    print_json(result) if args.json else print(_counts_line(result))
    return 0


def _counts_line(counts: dict) -> str:
    return ("seen {seen}, added {added}, updated {updated}, unchanged {unchanged}, skipped {skipped}"
            .format(**counts))


def cmd_ingest(args: argparse.Namespace) -> int:
    categories = [c.strip() for c in args.categories.split(",") if c.strip()] if args.categories else None
    bar, update = ingest_progress_bar(None, "paper")
    try:
        counts = library.ingest_from_arxiv(Services(), args.days, categories, update)
    except ArxivSourceError as error:
        raise UserError(f"ingestion failed: {error}") from None
    finally:
        bar.close()
    for bad in counts.bad_lines[:20]:
        print(bad.sentence, file=sys.stderr)
    print_json(counts.as_dict()) if args.json else print(_counts_line(counts.as_dict()))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    result = library.status(Services())
    if args.json:
        print_json(result)
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


def cmd_sentences(args: argparse.Namespace) -> int:
    from copilot.features import sentence_prefill

    parent = args.parent or os.getppid()
    if args.background:
        os.nice(19)          # only what the app's asks and pages leave
    services = Services()
    counts = sentence_prefill.run(services, stop=(lambda: os.getppid() != parent) if args.background else None)
    if counts is None:         # the running one was told to look again before it ends
        if not args.background:
            raise UserError("another process is filling this library's sentence vectors; it fills these papers too")
        return 0
    result = counts.as_dict()
    if args.json:
        print_json(result)
    elif not args.background:
        print("papers {papers}: {already} done before, {filled} done now ({sentences} sentences, {seconds} s)"
              .format(**result))
    return 0


def add_library_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import a JSON-lines snapshot of arXiv papers")
    p.add_argument("path", help="snapshot file (daily-listing or Kaggle arxiv-metadata-oai-snapshot schema)")
    p.add_argument("--limit", type=int, default=None, help="import at most N papers")
    p.add_argument("--json", action="store_true", help="print counts as JSON")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("ingest", help="fetch recent papers of the configured categories from arXiv")
    p.add_argument("--days", type=int, default=None, help="days back (default COPILOT_INGEST_DAYS)")
    p.add_argument("--categories", default=None, help="comma-separated categories (default COPILOT_CATEGORIES)")
    p.add_argument("--json", action="store_true", help="print counts as JSON")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("sentences", help="embed the papers' quotable sentences now, so answers look them up")
    p.add_argument("--background", action="store_true", help="lowest CPU priority, quiet; exit if one runs already")
    p.add_argument("--parent", type=int, default=None, help=argparse.SUPPRESS)   # the app: stop once it is gone
    p.add_argument("--json", action="store_true", help="print counts as JSON")
    p.set_defaults(func=cmd_sentences)

    p = sub.add_parser("status", help="corpus size, last and next ingestion, models")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_status)
