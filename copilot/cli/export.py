"""`export bibtex`: library papers as BibTeX on stdout. `export preferences`: voted comparisons as JSON lines."""

from __future__ import annotations

import argparse
import sys

from copilot.cli.output import print_json
from copilot.features.bibtex import bibtex_for_ids
from copilot.features.preferences import export_preferences, push_preferences
from copilot.services import Services


def cmd_export_bibtex(args: argparse.Namespace) -> int:
    ids = [token for token in args.ids.replace(" ", ",").split(",") if token]
    sys.stdout.write(bibtex_for_ids(Services(), ids))
    return 0


def cmd_export_preferences(args: argparse.Namespace) -> int:
    services = Services()
    export = export_preferences(services, since=args.since, out=args.out)
    push = ({"status": "skipped", "reason": "--no-push"} if args.no_push else push_preferences(services, export))
    if args.json:
        print_json({"export": export, "push": push})
    else:
        print(export["message"])
        if push["status"] == "ok":
            print(f"pushed to {push['repository']} as {push['path_in_repo']}")
        elif push["status"] == "failed":
            print(f"push to {push['repository']} failed: {push['error']}", file=sys.stderr)
    return 1 if push["status"] == "failed" else 0


def add_export_commands(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("export", help="export library papers (bibtex) or voted comparisons (preferences)")
    formats = group.add_subparsers(dest="export_format", metavar="{bibtex,preferences}", required=True)
    p = formats.add_parser("bibtex", help="BibTeX of library papers by arXiv id, on stdout")
    p.add_argument("--ids", required=True, help="arXiv ids, comma-separated")
    p.set_defaults(func=cmd_export_bibtex)
    p = formats.add_parser("preferences", help="every voted comparison as a JSON line: preference pairs (prompt, "
                           "chosen, rejected) for a DPO trainer, ties and both-bad with their label; pushed to "
                           "COPILOT_HUB_PREFERENCES when it and HF_TOKEN are set")
    p.add_argument("--since", default=None, metavar="DAY", help="only votes cast on or after this UTC day "
                   "(YYYY-MM-DD)")
    p.add_argument("--out", default=None, metavar="FILE", help="where to write (default: a new file under the data "
                   "dir's exports/)")
    p.add_argument("--no-push", action="store_true", help="write the file only, even when a dataset is set")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_export_preferences)
