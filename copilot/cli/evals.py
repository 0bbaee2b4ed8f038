"""`eval NAME …`: evaluations that write JSON + Markdown under the data dir (today: `eval csfcube`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from copilot.cli.output import print_json
from copilot.errors import UserError
from copilot.eval.csfcube import FACETS, METHODS, EvalDataError, markdown_table, output_name, run, write_outputs
from copilot.methods.prism import ASPECT_MAX_TOKENS, MODES, SEPARATE
from copilot.services import Services


def cmd_eval_csfcube(args: argparse.Namespace) -> int:
    facets = [f.strip() for f in args.facets.split(",") if f.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    services = Services()
    try:
        report = run(services, Path(args.data), facets, args.limit, args.mode, args.aspect_tokens, methods)
    except EvalDataError as error:
        raise UserError(str(error)) from None
    name = output_name(report.meta["fold"], args.mode, args.limit, facets, report.meta["methods"])
    paths = write_outputs(report, services.settings.data_dir / "eval", name)
    _to_stderr(markdown_table(report))
    _to_stderr("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.json:
        print_json(report.as_json())
    else:
        print(markdown_table(report))
    return 0


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_eval_commands(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("eval", help="run an evaluation (eval NAME … --json); writes JSON + Markdown "
                           "under the data dir")
    names = group.add_subparsers(dest="eval_name", metavar="NAME", required=True)

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
    p.add_argument("--aspect-tokens", type=int, default=ASPECT_MAX_TOKENS,
                   help="most tokens per aspect description")
    p.add_argument("--json", action="store_true", help="print one JSON object: results, vs_abstract, per_query, meta "
                   "(the Markdown tables go to stderr)")
    p.set_defaults(func=cmd_eval_csfcube)
