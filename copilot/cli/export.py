"""`export bibtex`: library papers as BibTeX on stdout."""

from __future__ import annotations

import argparse
import sys

from copilot.features.bibtex import bibtex_for_ids
from copilot.services import Services


def cmd_export_bibtex(args: argparse.Namespace) -> int:
    ids = [token for token in args.ids.replace(" ", ",").split(",") if token]
    sys.stdout.write(bibtex_for_ids(Services(), ids))
    return 0


def add_export_commands(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("export", help="export library papers (bibtex)")
    formats = group.add_subparsers(dest="export_format", metavar="bibtex", required=True)
    p = formats.add_parser("bibtex", help="BibTeX of library papers by arXiv id, on stdout")
    p.add_argument("--ids", required=True, help="arXiv ids, comma-separated")
    p.set_defaults(func=cmd_export_bibtex)
