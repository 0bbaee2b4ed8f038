"""`related`: papers related to a query paper, ranked by one of the Related rankings (default: Settings)."""

from __future__ import annotations

import argparse
import sys

from copilot.cli.output import print_json
from copilot.features.related import (
    MODES,
    ONE_CALL_PER_ASPECT,
    QUERY_LABELS,
    RANKINGS,
    RESULT_LIMIT,
    find_related,
    parse_query,
)
from copilot.features.related_work import draft_related_work
from copilot.services import Services


def cmd_related(args: argparse.Namespace) -> int:
    services = Services()
    query = parse_query(services, args.arxiv_id or "", args.title or "", args.abstract or args.text or "")
    result = find_related(services, query, args.limit, args.mode, lambda step: print(step, file=sys.stderr),
                          method=args.method)
    for notice in [*result.notices, result.missing_notice]:
        if notice:
            print(notice, file=sys.stderr)
    if args.json:
        print_json(result.as_dict())
        return 0
    print(f"Query: {query.paper.title or '(untitled)'} [{query.source}]")
    print(f"Ranked by {result.method}: {result.method_label}")
    for aspect, text in result.aspect_queries.items():
        print(f"  {QUERY_LABELS[aspect]} ({result.aspect_sources[aspect]}): {text}")
    for n, row in enumerate(result.results, start=1):
        ranks = " ".join(f"{QUERY_LABELS[k][:3]}={v}" for k, v in row["ranks"].items())
        print(f"{n:2d}. {row['score']:.4f} {row['id']} {row['title'][:70]} ({ranks})")
    return 0


def cmd_related_work(args: argparse.Namespace) -> int:
    services = Services()
    query = parse_query(services, args.arxiv_id or "", args.title or "", args.abstract or "")
    draft = draft_related_work(services, query, user=args.user, thoughts=args.with_thoughts,
                               progress=lambda step: print(step, file=sys.stderr))
    record = draft.as_dict()
    if args.json:
        print_json(record)
        return 0
    print(record["text"])
    print()
    print(record["bibtex"])
    return 0


def add_related_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("related", help="papers related to a query paper (PRISM aspect queries, title, abstract and "
                       "shared words, fused by RRF)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--arxiv-id", help="arXiv id or URL of the query paper (library first, else arXiv)")
    source.add_argument("--title", help="title of the query paper (with --abstract)")
    source.add_argument("--text", help="pasted text of the query paper (a short first line is taken as title)")
    p.add_argument("--abstract", help="abstract of the query paper (with --title)")
    p.add_argument("--limit", type=int, default=RESULT_LIMIT, help="number of results")
    p.add_argument("--method", choices=list(RANKINGS), default=None,
                   help="the ranking (default: COPILOT_RELATED_METHOD; docs/related-eval.md compares them): "
                   + "; ".join(f"{name}: {label}" for name, label in RANKINGS.items()))
    p.add_argument("--mode", choices=MODES, default=ONE_CALL_PER_ASPECT,
                   help="how the LLM writes aspect descriptions (rankings prism, prism-hybrid): one call per aspect, "
                   "or one JSON call")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_related)

    p = sub.add_parser("related-work", help="draft a related-work section for a paper, citing library papers "
                       "(PRISM retrieval, then RAT revision), with the BibTeX of the cited papers")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--arxiv-id", help="arXiv id or URL of the paper (library first, else arXiv)")
    source.add_argument("--title", help="title of the paper (with --abstract)")
    p.add_argument("--abstract", help="abstract of the paper (with --title)")
    p.add_argument("--with-thoughts", action="store_true", help="also retrieve stored thoughts at each step")
    p.add_argument("--user", default="local", help="whose private thoughts may be retrieved (default: local)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_related_work)
