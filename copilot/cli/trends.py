"""`trends`: topics, rising and falling, summaries and research ideas of a period."""

from __future__ import annotations

import argparse
import sys

from copilot.cli.output import print_json
from copilot.errors import UserError
from copilot.features import gor_period
from copilot.features.trends import (
    IDEAS_OFF_NOTICE,
    NO_IDEA_PASSED,
    PRESETS,
    TrendsOptions,
    TrendsReport,
    default_ideas,
    resolve_range,
    run_trends,
)
from copilot.services import Services


def cmd_trends(args: argparse.Namespace) -> int:
    services = Services()
    categories = [c.strip() for c in (args.categories or "").split(",") if c.strip()]
    if args.ask is not None:
        return cmd_ask_period(services, args, categories)
    start, end = resolve_range(services, args.range, args.start, args.end)
    opts = TrendsOptions.for_writer(services.generation, cap=args.cap, summarized_topics=args.summaries,
                                    ideas=default_ideas(services) if args.ideas is None else args.ideas,
                                    for_me=args.for_me)
    report = run_trends(services, start, end, categories, args.user, opts,
                        refresh=args.refresh,
                        on_stage=lambda r: print(f"[trends] {r.stage}", file=sys.stderr, flush=True))
    for notice in report.notices + report.failures:
        print(f"[trends] {notice}", file=sys.stderr)
    print("[trends] seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in report.timings.items()), file=sys.stderr)
    if args.json:
        print_json({**report.as_json(), **ideas_status(report, opts.ideas)})
    else:
        print(f"{report.papers} papers, {report.start} … {report.end}")
        for topic in report.topics:
            print(f"- {topic.label} ({topic.size}{', rising' if topic.rising else ''}): {topic.summary}")
        print(f"\n{report.summary}\n")
        for idea in report.ideas:
            print(f"* {idea.text}")
    return 0


def ideas_status(report: TrendsReport, asked: int) -> dict:
    """Why `ideas` is what it is, for a script: `ideas_status` is shown | off | none_passed | failed, and
    `ideas_note` the sentence the page shows (None when ideas are shown)."""
    if report.ideas:
        return {"ideas_status": "shown", "ideas_note": None}
    if IDEAS_OFF_NOTICE in report.notices:       # off on this model, whatever --ideas asked for
        return {"ideas_status": "off", "ideas_note": IDEAS_OFF_NOTICE}
    if asked <= 0:
        return {"ideas_status": "off", "ideas_note": "Research ideas were not asked for (--ideas 0)."}
    if report.ideas_error == NO_IDEA_PASSED:
        return {"ideas_status": "none_passed", "ideas_note": NO_IDEA_PASSED}
    return {"ideas_status": "failed", "ideas_note": report.ideas_error or "Ideas failed; see the logs."}


def cmd_ask_period(services: Services, args: argparse.Namespace, categories: list[str]) -> int:
    """`trends --ask QUESTION`: trains the period's record graph first when none is cached (progress on stderr)."""
    try:
        start, end = resolve_range(services, args.range, args.start, args.end)
        result = gor_period.ask_period(services, gor_period.scope_for(start, end, categories), args.ask, train=True,
                                progress=lambda stage: print(f"[gor] {stage}", file=sys.stderr, flush=True))
    except ValueError as error:      # Graph of Records reports bad input as a plain ValueError
        raise UserError(str(error)) from None
    for notice in result.notices:
        print(f"[gor] {notice}", file=sys.stderr)
    if args.json:
        print_json(result.as_json())
    else:
        print(result.answer)
        print(f"\nchosen by {result.chosen_by}:")
        for node in result.nodes:
            print(f"  {node.score:.3f} {node.kind} {node.id} {node.title[:90]}")
    return 0


def add_trends_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trends", help="topics, summaries and research ideas of a time range")
    p.add_argument("--from", dest="start", default=None, help="first day, YYYY-MM-DD")
    p.add_argument("--to", dest="end", default=None, help="last day, YYYY-MM-DD")
    p.add_argument("--range", choices=sorted(PRESETS), default=None,
                   help="instead of --from/--to: the last day, week or month of the corpus")
    p.add_argument("--categories", default=None, help="comma-separated primary categories, e.g. cs.CL,cs.IR")
    p.add_argument("--user", default="local", help="whose profile ranks the papers with --for-me (default: local)")
    p.add_argument("--for-me", action="store_true",
                   help="analyse the papers ranked by the user's profile (default: the field, the whole range sampled "
                   "evenly)")
    p.add_argument("--cap", type=int, default=300, help="most papers analysed (default 300)")
    p.add_argument("--summaries", type=int, default=5, help="topics summarized by the LLM, largest first (default 5)")
    p.add_argument("--ideas", type=int, default=None,
                   help="research ideas = RAT steps (default 3 with an endpoint, 0 with the local model; 0 = none)")
    p.add_argument("--refresh", action="store_true", help="recompute even when a cached report exists")
    p.add_argument("--ask", default=None, metavar="QUESTION",
                   help="instead of the report: answer a free question about the period from the records Graph of "
                   "Records chooses (trains the period's graph first if needed); JSON: answer, citations, nodes "
                   "with scores, chosen_by (gor or plain)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_trends)
