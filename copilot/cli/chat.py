"""`ask`, `vote` and `stats`: the blind comparison from the command line."""

from __future__ import annotations

import argparse
import os
import sys

from copilot.cli.output import print_json
from copilot.config import Settings
from copilot.errors import UserError
from copilot.features.adaptive import ask_adaptive
from copilot.features.chat import VOTE_CHOICES, ChatError, chat_for
from copilot.features.chat_view import job_record
from copilot.features.deep import ask_deep
from copilot.features.signin import Writer, picked_model, turn_model, visitor_writer
from copilot.features.stats import chat_stats
from copilot.services import Services


def cmd_ask(args: argparse.Namespace) -> int:
    if args.mode == "slim":
        return ask_slim(args)
    if args.mode == "deep":
        return ask_deep_answer(args)
    services = Services()
    try:
        record = chat_for(services).ask(args.question, args.user, personalize=args.personalize, vote=args.vote,
                                        previous_turn=args.after, reveal=args.reveal,
                                        writer=token_writer(services, args.hf_token_env, args.hf_model),
                                        papers=args.paper)
    except ChatError as error:
        raise UserError(str(error)) from None
    if args.json:
        print_json(record)
        return 0
    if record.get("notice"):
        print(record["notice"], file=sys.stderr)
    if record.get("vote") and not record["vote"]["recorded"]:
        print(f"vote not recorded: {record['vote']['error']}", file=sys.stderr)
    print(f"turn {record['turn_id']}" + ("" if record["comparison"] else " (no comparison)"))
    for answer in record["answers"]:
        print(f"\n--- Answer {answer['label']}\n{answer['error'] or answer['text']}")
        for source in answer.get("sources", []):
            print(f"  [{source['id']}] {source['title']}")
    if record.get("sides_hidden"):
        print(f"\n{BLIND_HINT.format(turn=record['turn_id'])}")
    return 0


def token_writer(services: Services, variable: str | None, model: str | None = None) -> Writer | None:
    """A signed-in visitor's model from a token in the environment variable `variable` (`--hf-token-env`): the
    command answers as that visitor would on the page, with `model` (`--hf-model`, one of those offered; default
    COPILOT_HF_MODEL). The variable's name is given, never the token (a command line is visible to every process
    of the machine)."""
    token = env_token(services.settings, variable, model)
    return visitor_writer(services, token, model=model) if token else None


def env_token(settings: Settings, variable: str | None, model: str | None = None) -> str | None:
    """The token in the environment variable `variable` (None without `--hf-token-env`), once `model` is known to be
    one of those offered; a UserError for an unset or empty variable, or a model without a token."""
    picked_model(settings, model)
    if not variable:
        if model:
            raise UserError("--hf-model picks the model a signed-in visitor's answers are written by: give the "
                            "token's variable with --hf-token-env too")
        return None
    token = os.environ.get(variable, "").strip()
    if not token:
        raise UserError(f"--hf-token-env {variable}: that environment variable is not set or empty")
    return token


def add_visitor_flags(p: argparse.ArgumentParser, what: str) -> None:
    """--hf-token-env and --hf-model: act as a signed-in visitor (`what` happens through COPILOT_HF_ROUTER_URL)."""
    p.add_argument("--hf-token-env", default=None, metavar="NAME", help="as a signed-in visitor whose Hugging Face "
                   f"token is in environment variable NAME (never the token itself on the command line): {what}")
    p.add_argument("--hf-model", default=None, metavar="MODEL", help="with --hf-token-env: the router's model, one "
                   "of COPILOT_HF_MODEL (the default) and COPILOT_HF_MODELS; another is refused")


BLIND_HINT = ("Sources, and which answer used thoughts, stay hidden until you vote: python -m copilot vote {turn} "
              "A|B|tie|bad. Only a vote cast before the sides are shown counts in `stats`.")


def ask_slim(args: argparse.Namespace) -> int:
    """One answer the SlimPLM way: the local proxy decides whether and what to retrieve."""
    if args.vote or args.after or args.personalize or args.reveal or args.paper:
        raise UserError("--vote, --after, --personalize, --reveal and --paper belong to the A/B mode, not to "
                        "--mode slim")
    try:
        record = ask_adaptive(Services(), args.question, args.user)
    except ChatError as error:
        raise UserError(str(error)) from None
    if args.json:
        print_json(record)
        return 0
    trace = record["trace"]
    print(record["answer"])
    for citation in record["citations"]:
        print(f"  [{citation['label']}] {citation['id']} {citation['title']}")
    print(f"\nretrieval: {'yes' if trace['retrieved'] else 'skipped'} ({trace['reason']})", file=sys.stderr)
    for claim in trace["claims"]:
        print(f"  claim: {claim['text']} | query: {claim['query']} | {claim['verdict']}", file=sys.stderr)
    return 0


def ask_deep_answer(args: argparse.Namespace) -> int:
    """One deep answer (RAT): a step-by-step draft, each step checked against papers and thoughts and revised."""
    if args.vote or args.after or args.personalize or args.reveal or args.paper:
        raise UserError("--vote, --after, --personalize, --reveal and --paper belong to the A/B mode, not to "
                        "--mode deep")
    try:
        record = ask_deep(Services(), args.question, args.user, keep=not args.no_thought)
    except ChatError as error:
        raise UserError(str(error)) from None
    if args.json:
        print_json(record)
        return 0
    print(record["answer"])
    for citation in record["citations"]:
        print(f"  [{citation['label']}] {citation['id']} {citation['title']}")
    for step in record["trace"]:
        print(f"step {step['step']} ({step['status']}): {' '.join(step['query'].split())[:100]} -> "
              f"{', '.join(r['id'] for r in step['retrieved']) or 'nothing'}", file=sys.stderr)
    return 0


def cmd_vote(args: argparse.Namespace) -> int:
    services = Services()
    chat = chat_for(services)
    try:
        stored = services.chat_log.turn(args.turn_id)      # its thought is drafted by the model that wrote it
        model = turn_model(services, {"backend": stored.backend, "model": stored.model}) if stored else None
        result = chat.vote(args.turn_id, args.choice, args.user,
                           writer=token_writer(services, args.hf_token_env, model))
    except ChatError as error:
        raise UserError(str(error)) from None
    result["thought_jobs"] = [job_record(job) for job in chat.wait_for_thoughts(args.turn_id)]
    result["answers"] = (chat.turn_record(result["turn_id"]) or {}).get("answers", [])   # the vote reveals the sides
    if args.json:
        print_json(result)
        return 0
    counted = "" if result["counted"] else " (not counted in the statistics: " + (
        "only a comparison's first vote counts)" if result["previous"] else "the sides had been shown before it)")
    print(f"vote recorded: {result['choice']} (answer {result['label']}){counted}")
    for answer in result["answers"]:
        kind = "papers + thoughts" if answer["thought_augmented"] else "papers only"
        print(f"--- Answer {answer['label']}: {kind}")
        for source in answer["sources"]:
            print(f"  [{source['id']}] {source['kind']}: {source['title']}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    result = chat_stats(Services().db)
    if args.json:
        print_json(result)
    else:
        for key, value in result.items():
            if not isinstance(value, (list, dict)):
                print(f"{key}: {value}")
    return 0


def add_chat_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="answer a question twice (papers only vs papers + thoughts)")
    p.add_argument("question", help="the question")
    p.add_argument("--user", default="local", help="user id the turn belongs to (default: local)")
    p.add_argument("--personalize", action="store_true", help="adapt the answers to the user's saved profile")
    p.add_argument("--vote", choices=VOTE_CHOICES, default=None,
                   help="for scripts: vote once the answers are done, then wait for the thought job (thoughts = the "
                   "thought-augmented answer was better; A/B = the side as shown). Without it a comparison makes "
                   "no thought until it is voted on or its grace period ends")
    p.add_argument("--after", default=None, metavar="TURN_ID",
                   help="the previous turn of this chat: a follow-up question is read in its context")
    p.add_argument("--paper", action="append", default=None, metavar="ID",
                   help="ask about this paper only (an arXiv id or link; repeat for up to 5 papers): one answer "
                   "quoting their passages, their full text read first; a paper the library lacks is fetched from "
                   "arXiv and added")
    p.add_argument("--mode", choices=("ab", "slim", "deep"), default="ab",
                   help="ab (default): the blind comparison of two answers; slim: one answer, the local proxy model "
                   "deciding whether and what to retrieve first (SlimPLM), with its decision trace; deep: a "
                   "step-by-step answer, each step checked against papers and thoughts and revised (RAT), with its "
                   "trace")
    p.add_argument("--reveal", action="store_true",
                   help="show the sources and which answer used thoughts before voting; a vote after that is not "
                   "blind and stays out of the statistics (without it the sides stay hidden until `vote`)")
    p.add_argument("--no-thought", action="store_true",
                   help="--mode deep: do not turn the finished answer into a thought")
    add_visitor_flags(p, "both answers are written by the router's model, billed to that account")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("vote", help="vote on a turn: which answer was better")
    p.add_argument("turn_id", help="turn id printed by `ask`")
    p.add_argument("choice", choices=VOTE_CHOICES, help="thoughts = the thought-augmented answer was better; "
                   "A/B = the side as shown; bad = both bad (no thought)")
    p.add_argument("--user", default="local", help="user id the turn belongs to (default: local)")
    p.add_argument("--hf-token-env", default=None, metavar="NAME",
                   help="the voter's Hugging Face token is in environment variable NAME: their model writes the "
                   "thought made from a preferred written answer (without it, the thought is the answer's table)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_vote)

    p = sub.add_parser("stats", help="thought-augmented win rate with a Wilson 95%% interval, by position, user "
                       "and day")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_stats)
