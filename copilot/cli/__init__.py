"""`python -m copilot …`: thin commands over the same feature functions the web app uses.

Every `--json` command prints exactly one JSON object on stdout; logs and progress go to stderr. Each module
here adds one feature's subcommands through its `add_*_commands(subparsers)`, listed in COMMAND_GROUPS in the
order `--help` shows them. A command builds `copilot.services.Services()`, calls a feature, prints; bad input
or a fault the user can act on is raised as `copilot.errors.UserError` (one line on stderr, exit 2).
Nothing in the product imports this package but `copilot/__main__.py`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from copilot.cli.backup import add_backup_commands
from copilot.cli.bench import add_bench_commands
from copilot.cli.chat import add_chat_commands
from copilot.cli.evals import add_eval_commands
from copilot.cli.export import add_export_commands
from copilot.cli.feed import add_feed_commands
from copilot.cli.fulltext import add_fulltext_commands
from copilot.cli.library import add_library_commands
from copilot.cli.memory import add_memory_commands
from copilot.cli.profile import add_profile_commands
from copilot.cli.related import add_related_commands
from copilot.cli.roles import add_roles_commands
from copilot.cli.search import add_search_commands
from copilot.cli.trends import add_trends_commands
from copilot.config import SettingsError
from copilot.errors import UserError

COMMAND_GROUPS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_library_commands,       # import, ingest, status
    add_fulltext_commands,      # fulltext import|fetch|status
    add_feed_commands,          # feed
    add_search_commands,        # search
    add_related_commands,       # related
    add_eval_commands,          # eval csfcube
    add_roles_commands,         # train-roles
    add_chat_commands,          # ask, vote, stats
    add_trends_commands,        # trends
    add_profile_commands,       # profile lookup|build|show
    add_export_commands,        # export bibtex
    add_bench_commands,         # bench, embed-distill
    add_memory_commands,        # doctor
    add_backup_commands,        # backup, restore
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
