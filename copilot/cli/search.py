"""`search`: the library searched by words and meaning, with filters and sort (the Search tab's feature)."""

from __future__ import annotations

import argparse

from copilot.cli.output import print_json
from copilot.features.search import MAX_LIMIT, SORTS, search_papers
from copilot.services import Services


def cmd_search(args: argparse.Namespace) -> int:
    categories = [c for c in (args.category or "").split(",") if c.strip()]
    result = search_papers(Services(), args.query, args.date_from, args.date_to, categories, args.author,
                           args.sort, args.limit)
    if args.json:
        print_json(result.as_dict())
        return 0
    if result.message:
        print(result.message)
    for n, hit in enumerate(result.hits, start=1):
        paper = hit.paper
        print(f"{n:2d}. {paper.id} {paper.published} {paper.title[:80]} ({', '.join(paper.authors[:3])})")
    return 0


def add_search_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="search the library by words and meaning, with filters")
    p.add_argument("query", nargs="?", default="", help="words to search for (may be empty with a filter)")
    p.add_argument("--from", dest="date_from", default=None, help="papers dated on or after YYYY-MM-DD")
    p.add_argument("--to", dest="date_to", default=None, help="papers dated on or before YYYY-MM-DD")
    p.add_argument("--category", default=None, help="arXiv categories, comma-separated (any of them)")
    p.add_argument("--author", default=None, help="an author's name, e.g. 'Chen, Muhao' or 'M. Chen'")
    p.add_argument("--sort", choices=SORTS, default="relevance", help="relevance (default) or date, newest first")
    p.add_argument("--limit", type=int, default=20, help=f"most results (at most {MAX_LIMIT})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_search)
