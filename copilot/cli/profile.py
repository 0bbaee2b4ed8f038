"""`profile lookup|build|show`: find your arXiv papers, write a profile from them, read it back."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from copilot.cli.output import print_json
from copilot.errors import UserError
from copilot.features.bibtex import arxiv_ids_from_bibtex_file
from copilot.features.profile import DEFAULT_USER, load_profile
from copilot.features.profile_draft import build_profile
from copilot.features.profile_lookup import lookup_author
from copilot.services import Services


def cmd_lookup(args: argparse.Namespace) -> int:
    def progress(count: int) -> None:
        print(f"\rfetched {count} papers", end="", file=sys.stderr, flush=True)

    result = lookup_author(Services(), args.name, args.max, progress)
    print("", file=sys.stderr)
    if args.json:
        print_json(result.as_dict())
        return 0
    print(result.message)
    for group in result.groups:
        print(f"\n{group.label()}")
        for candidate in (c for c in result.candidates if c.group == group.number):
            p = candidate.paper
            print(f"  {p.id:<22} {p.published} {p.primary_category:<14} {p.title[:90]}")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    if not (args.ids or args.text or args.bibtex):
        raise UserError("give --ids ID,…, --bibtex FILE or --text T")
    if args.bibtex:
        ids, others = arxiv_ids_from_bibtex_file(args.bibtex)
        print(f"{len(ids)} arXiv entries in {args.bibtex}" + (f"; {others} other entries skipped" if others else ""),
              file=sys.stderr)
        args.ids = ",".join([args.ids] * bool(args.ids) + ids)
    services = Services()
    profile, draft = build_profile(services, args.user, ids=args.ids or "", text=args.text or "",
                                   max_tokens=args.max_tokens)
    for note in draft.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        result = profile.as_dict()
        result.pop("saved_at")
        print_json(result)
    else:
        print(f"saved version {profile.version} for {profile.user}\n\n{profile.text}\n\nKeywords: "
              + ", ".join(profile.keywords))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    profile = load_profile(Services(), args.user)
    if profile is None:
        raise UserError(f"no saved profile for user {args.user!r}; build one with `profile build`")
    if args.json:
        print_json(profile.as_dict())
    else:
        print(f"{profile.user} · version {profile.version} · saved "
              f"{datetime.fromtimestamp(profile.saved_at, timezone.utc):%Y-%m-%d %H:%M} UTC\n\n{profile.text}\n\n"
              f"Keywords: {', '.join(profile.keywords)}\nPapers: {', '.join(profile.paper_ids)}")
    return 0


def add_profile_commands(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("profile", help="research profile: look up your arXiv papers, build, show")
    commands = group.add_subparsers(dest="profile_command", metavar="lookup|build|show", required=True)

    p = commands.add_parser("lookup", help="find an author's arXiv papers, grouped by likely identity")
    p.add_argument("name", help="author name, e.g. 'Yoshua Bengio', 'Bengio, Yoshua' or 'Y. Bengio'")
    p.add_argument("--max", type=int, default=None, help="most papers (default COPILOT_PROFILE_MAX_PAPERS)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_lookup)

    p = commands.add_parser("build", help="generate a profile from papers or a text, and save it")
    p.add_argument("--ids", default=None, help="arXiv ids or links, comma-separated")
    p.add_argument("--bibtex", default=None, help="a BibTeX file (e.g. a Zotero export): its arXiv entries are the "
                   "profile's papers")
    p.add_argument("--text", default=None, help="a text about your research")
    p.add_argument("--user", default=DEFAULT_USER, help=f"whose profile (default {DEFAULT_USER})")
    p.add_argument("--max-tokens", type=int, default=None, help="most tokens generated "
                   "(default COPILOT_PROFILE_MAX_TOKENS)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_build)

    p = commands.add_parser("show", help="the saved profile")
    p.add_argument("--user", default=DEFAULT_USER, help=f"whose profile (default {DEFAULT_USER})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_show)
