"""A newcomer's memory, measured (#59 item 11): how many of their turns become blind comparisons when they may keep
a one-answer turn ("Remember this answer") versus when only an unvoted table over the floor becomes a thought.

    python -m tests.bench_judged_memory [--papers 2000] [--json]

The library: the corpus's first N papers (tests/conftest.import_papers), on the default tiny profile. The newcomer's
questions: for each dev question of tests/data/answers-dev.jsonl, its two warm-ups of tests/data/thoughts-warmup.jsonl
(a paraphrase and a sibling, written without reading the papers), then the dev question itself. Two arms on copies of
one library: "floor" asks and never judges (today's unvoted floor decides); "keep" asks and keeps every finished
one-answer turn, as a newcomer who liked the answer would. Counted per arm: the turns that were comparisons, and the
dev questions (asked after their warm-ups) that were.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from copilot.eval.answers_eval import read_questions
from copilot.eval.thoughts_dev_eval import read_warmups
from copilot.features.chat import ONE_ANSWER, Chat
from copilot.services import Services
from tests.conftest import import_papers, make_settings

DATA = Path(__file__).resolve().parent / "data"


def newcomer_questions() -> list[tuple[str, bool]]:
    """(question, whether it is a dev question) in the order asked."""
    dev = read_questions(DATA / "answers-dev.jsonl")
    warmups = read_warmups(DATA / "thoughts-warmup.jsonl", len(dev))
    asked: list[tuple[str, bool]] = []
    for line, row in enumerate(dev):
        asked += [(w["question"], False) for w in warmups if w["for"] == line]
        asked.append((row["question"], True))
    return asked


def run_arm(data_dir: Path, keep: bool) -> dict:
    chat = Chat(Services(make_settings(data_dir)))
    turns = compared = dev_compared = kept = 0
    for question, is_dev in newcomer_questions():
        turn = chat.prepare(question, "newcomer")
        for _ in chat.stream(turn):
            pass
        turns += 1
        compared += turn.comparison == "yes"
        dev_compared += is_dev and turn.comparison == "yes"
        if keep and turn.comparison in ONE_ANSWER and all(a.text and not a.error for a in turn.answers):
            chat.judge(turn.id, "keep", "newcomer")
            kept += 1
        chat.wait_for_thoughts(turn.id, timeout=120)
    stored = chat.services.thoughts.count_live()
    return {"turns": turns, "comparisons": compared, "dev_comparisons": dev_compared, "kept": kept,
            "thoughts": stored}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--papers", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        library = Path(tmp) / "library"
        started = time.perf_counter()
        import_papers(Services(make_settings(library)), args.papers)
        report: dict = {"papers": args.papers, "import_s": round(time.perf_counter() - started, 1),
                        "dev_questions": sum(is_dev for _, is_dev in newcomer_questions())}
        for arm, keep in (("floor", False), ("keep", True)):
            copy = Path(tmp) / arm
            shutil.copytree(library, copy)
            started = time.perf_counter()
            report[arm] = run_arm(copy, keep) | {"seconds": round(time.perf_counter() - started, 1)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print("| arm | turns | comparisons | dev questions compared | kept | seconds |\n|---|---|---|---|---|---|")
    for arm in ("floor", "keep"):
        r = report[arm]
        print(f"| {arm} | {r['turns']} | {r['comparisons']} | {r['dev_comparisons']} of {report['dev_questions']} | "
              f"{r['kept']} | {r['seconds']} |")


if __name__ == "__main__":
    main()
