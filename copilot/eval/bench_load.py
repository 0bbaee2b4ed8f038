"""Load through the page: N users each ask M questions one after another, all users at once, against a running app
over HTTP (gradio_client, the Ask tab's `/ask` endpoint, as the page calls it). Prints JSON, writes Markdown.

`python -m copilot.eval.bench_load URL [--users 20] [--asks 3] [--signed-in] [--out bench-load.md]`: per ask the
seconds from submit to the last streamed output (an ask refused with a notice counts as an error, not an answer);
the report gives errors, p50 / p95 / max and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path

import numpy as np

QUESTIONS = ["How are retrieval-augmented language models evaluated?", "What methods compress the KV cache?",
             "How do graph neural networks handle heterophily?", "Which benchmarks test code generation?",
             "How is speech recognition made robust to noise?", "What do recent papers say about protein folding?",
             "How are recommender systems evaluated offline?", "How do vision-language models hallucinate?",
             "What limits federated learning on non-IID data?", "How is reinforcement learning used for robots?"]


def run(url: str, users: int, asks: int, timeout: float = 600.0, signed_in: bool = False) -> dict:
    """`signed_in`: user i signs in as user<i> / pw<i> (the app started with COPILOT_AUTH listing them), so each is
    its own user, as on a shared Space; otherwise all are the one local user and share its limits."""
    from gradio_client import Client

    seconds: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(users)

    def user(index: int) -> None:
        try:
            client = Client(url, verbose=False, auth=(f"user{index}", f"pw{index}") if signed_in else None)
            barrier.wait(timeout=300)
            for n in range(asks):
                question = f"{QUESTIONS[(index + n) % len(QUESTIONS)]} (user {index}, ask {n})"
                started = time.monotonic()
                output = client.submit(question, False, api_name="/ask").result(timeout=timeout)
                took = time.monotonic() - started
                shown = " ".join(str(x) for x in output)
                with lock:
                    if "This answer failed" in shown:
                        errors.append(f"user {index} ask {n}: an answer failed")
                    elif "chat-question" not in shown:   # refused (e.g. a rate limit): only a notice came back
                        errors.append(f"user {index} ask {n}: not answered: {shown[:160]}")
                    else:
                        seconds.append(took)
        except Exception as error:  # noqa: BLE001 - counted and reported
            with lock:
                errors.append(f"user {index}: {type(error).__name__}: {str(error)[:200]}")

    load_before = os.getloadavg()
    started = time.monotonic()
    threads = [threading.Thread(target=user, args=(i,)) for i in range(users)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    times = np.array(seconds) if seconds else np.zeros(0)
    return {"users": users, "asks_per_user": asks, "answered": len(seconds), "errors": errors,
            "p50_s": float(np.percentile(times, 50)) if seconds else None,
            "p95_s": float(np.percentile(times, 95)) if seconds else None,
            "max_s": float(times.max()) if seconds else None, "wall_s": time.monotonic() - started,
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def markdown(result: dict) -> str:
    def fmt(value):
        return "—" if value is None else f"{value:.1f}"

    return (f"| users × asks | answered | errors | p50 (s) | p95 (s) | max (s) | wall (s) | load before → after |\n"
            f"|---|---|---|---|---|---|---|---|\n"
            f"| {result['users']} × {result['asks_per_user']} | {result['answered']} | {len(result['errors'])} | "
            f"{fmt(result['p50_s'])} | {fmt(result['p95_s'])} | {fmt(result['max_s'])} | {fmt(result['wall_s'])} | "
            f"{result['load_before'][0]} → {result['load_after'][0]} |\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--asks", type=int, default=3)
    parser.add_argument("--out", default="bench-load.md")
    parser.add_argument("--signed-in", action="store_true", help="user i signs in as user<i> / pw<i>")
    args = parser.parse_args()
    result = run(args.url, args.users, args.asks, signed_in=args.signed_in)
    Path(args.out).write_text(markdown(result), encoding="utf-8")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
