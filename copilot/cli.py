"""`python -m copilot …`: the same feature functions the web app uses.

Every `--json` command prints exactly one JSON object on stdout; logs and progress go to stderr.
Each feature adds its subcommands through one `add_*_commands(subparsers)` function listed in COMMAND_GROUPS.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from copilot.config import SettingsError


class UserError(Exception):
    """Bad input or a fault the user can act on: printed as one line, exit code 2."""


def print_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def services():
    from copilot.services import Services

    return Services()


# --- foundation commands
def _progress_bar(total: int | None, unit: str):
    from tqdm import tqdm

    bar = tqdm(total=total, unit=unit, file=sys.stderr, dynamic_ncols=True)

    def update(counts) -> None:
        bar.n = counts.seen + counts.skipped
        bar.set_postfix(added=counts.added, updated=counts.updated, unchanged=counts.unchanged,
                        skipped=counts.skipped, refresh=False)
        bar.refresh()

    return bar, update


def cmd_import(args: argparse.Namespace) -> int:
    from copilot.features import library

    path = Path(args.path)
    if not path.is_file():
        raise UserError(f"no such file: {path}")
    total = args.limit
    if total is None:
        with path.open("rb") as handle:
            total = sum(1 for _ in handle)
    bar, update = _progress_bar(total, "paper")
    counts = library.import_snapshot(services(), path, args.limit, update)
    bar.close()
    for bad in counts.bad_lines[:20]:
        print(f"line {bad.line_no}: skipped ({bad.reason})", file=sys.stderr)
    result = counts.as_dict()
    result["bad_lines"] = [{"line": b.line_no, "reason": b.reason} for b in counts.bad_lines]
    print_json(result) if args.json else print(_counts_line(result))
    return 0


def _counts_line(counts: dict) -> str:
    return ("seen {seen}, added {added}, updated {updated}, unchanged {unchanged}, skipped {skipped}"
            .format(**counts))


def cmd_ingest(args: argparse.Namespace) -> int:
    from copilot.features import library
    from copilot.sources.arxiv_api import ArxivSourceError

    categories = [c.strip() for c in args.categories.split(",") if c.strip()] if args.categories else None
    bar, update = _progress_bar(None, "paper")
    try:
        counts = library.ingest_from_arxiv(services(), args.days, categories, update)
    except ArxivSourceError as error:
        raise UserError(f"ingestion failed: {error}") from None
    finally:
        bar.close()
    print_json(counts.as_dict()) if args.json else print(_counts_line(counts.as_dict()))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from copilot.features import library

    result = library.status(services())
    if args.json:
        print_json(result)
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


def add_foundation_commands(sub: argparse._SubParsersAction) -> None:
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

    p = sub.add_parser("status", help="corpus size, last and next ingestion, models")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_status)


def eval_group(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The `eval NAME …` group: each evaluation adds its NAME parser to what this returns (created once)."""
    parser = sub.choices.get("eval")
    if parser is None:
        parser = sub.add_parser("eval", help="run an evaluation (eval NAME … --json); writes JSON + Markdown "
                                "under the data dir")
        parser.eval_names = parser.add_subparsers(dest="eval_name", metavar="NAME", required=True)
    return parser.eval_names


def add_related_commands(sub: argparse._SubParsersAction) -> None:
    from copilot.features.related import add_related_commands as add

    add(sub)


def add_chat_commands(sub: argparse._SubParsersAction) -> None:
    from copilot.features.chat import add_chat_commands as add

    add(sub)


def add_trends_commands(sub: argparse._SubParsersAction) -> None:
    from copilot.features.trends import add_trends_commands as add

    add(sub)


def add_profile_commands(sub: argparse._SubParsersAction) -> None:
    from copilot.features.profile import add_profile_commands as add

    add(sub)


def cmd_doctor(args: argparse.Namespace) -> int:
    from copilot.features.memory import doctor

    report = doctor(services(), repair=args.repair)
    left = report["after_repair"]["mismatches"] if args.repair else report["mismatches"]
    if args.json:
        print_json(report)
    else:
        print(f"papers: {report['papers']['stored']} stored, "
              f"{len(report['papers']['missing_sources'])} sources of thoughts missing")
        for key, value in report["thoughts"].items():
            print(f"thoughts {key}: {value}")
        print(f"stale thought jobs: {report['stale_jobs']}")
        print(f"mismatches: {report['mismatches']}" + (f", after repair: {left}" if args.repair else ""))
    return 0 if left == 0 else 1


def add_doctor_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check that SQLite and Chroma agree about thoughts (exit 1 if not)")
    p.add_argument("--repair", action="store_true",
                   help="drop vectors without a live row, re-add missing ones, resume stale thought jobs")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_doctor)


def add_bench_commands(sub: argparse._SubParsersAction) -> None:
    from copilot.eval.bench import add_bench_commands as add

    add(sub)


COMMAND_GROUPS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_foundation_commands,
    add_related_commands,
    add_chat_commands,
    add_trends_commands,
    add_profile_commands,
    add_bench_commands,
    add_doctor_commands,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m copilot", description="Research Copilot command line.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    for add_commands in COMMAND_GROUPS:
        add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except (UserError, SettingsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
