"""`feed`: the papers new for a user, ranked by their profile and feedback; and that feedback."""

from __future__ import annotations

import argparse

from copilot.cli.output import print_json
from copilot.features.feed import FEED_LIMIT, MORE, NOT_INTERESTED, feed_for, feed_token, give_feedback
from copilot.features.profile import DEFAULT_USER
from copilot.services import Services


def cmd_feed(args: argparse.Namespace) -> int:
    services = Services()
    if args.more_like or args.not_interested:
        paper_id = give_feedback(services, args.user, args.more_like or args.not_interested,
                                 MORE if args.more_like else NOT_INTERESTED)
        result = {"user": args.user, "paper": paper_id, "feedback": "more like this" if args.more_like
                  else "not interested"}
        print_json(result) if args.json else print(f"{result['feedback']}: {paper_id}")
        return 0
    if args.token:
        token = feed_token(services, args.user, renew=args.token == "new")
        print_json({"user": args.user, "path": f"/feed/{token}.atom"}) if args.json else print(f"/feed/{token}.atom")
        return 0
    feed = feed_for(services, args.user, args.since, args.limit, visit=not args.since)
    if args.json:
        print_json(feed.as_dict())
        return 0
    print(f"New for {args.user}: {feed.since} ({feed.candidates} papers). {feed.message}".strip())
    for n, item in enumerate(feed.items, start=1):
        print(f"{n:2d}. {item.score:.4f} {item.paper.id} {item.paper.published} {item.paper.title[:80]}")
    return 0


def add_feed_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("feed", help="papers new for a user, ranked by their profile and feedback")
    p.add_argument("--user", default=DEFAULT_USER, help=f"whose feed (default {DEFAULT_USER})")
    p.add_argument("--since", default=None, help="papers dated YYYY-MM-DD or later (default: new since the "
                   "previous visit; the first time, the newest week)")
    p.add_argument("--limit", type=int, default=FEED_LIMIT, help=f"most papers (default {FEED_LIMIT})")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--more-like", metavar="ID", default=None, help="mark a paper 'more like this'")
    action.add_argument("--not-interested", metavar="ID", default=None, help="mark a paper 'not interested'")
    action.add_argument("--token", choices=("show", "new"), default=None,
                        help="print the path of the user's private Atom feed (new: replace its secret)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_feed)
