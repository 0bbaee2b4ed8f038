"""Chat overhead: a full chat turn (retrieval, prompts, both answers, LLM-call logging, thought draft, merge test,
thought storage) minus the time spent inside the LLM backend.

`TimedBackend` wraps any backend and adds up the time spent inside it; the overhead of a turn is its wall time
minus that. With `InstantBackend` (a benchmark instrument, never used by the app) the model answers at once
from the quoted sources, so the turn runs every step of our code at full speed; with the real local model the
same subtraction applies.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import numpy as np

from copilot.llm import Backend, Usage

_SOURCE = re.compile(r'<source id="([^"]+)">\n(.*?)\n</source>', re.S)


class InstantBackend:
    """Replies at once: an answer quoting the first source, or, for the thought prompt, '1' and a note."""

    name = "bench-instant"
    model = "instant"

    obeys_grammar = False

    def stream(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
               usage: Usage, grammar: str | None = None) -> Iterator[str]:
        text = "\n".join(m["content"] for m in messages)
        sources = _SOURCE.findall(text)
        question = text.rsplit("Question:", 1)[-1].split("\n", 1)[0].strip()
        if sources and sources[0][0] == "answer":
            reply = f"1\nAsked: {question} Found: {' '.join(sources[0][1].split()[:40])}"
        elif sources:
            reply = f"The sources report that {' '.join(sources[0][1].split()[:40])} [{sources[0][0]}]."
        else:
            reply = "0"
        usage.prompt_tokens = len(text.split())
        usage.completion_tokens = len(reply.split())
        yield reply


class TimedBackend:
    """Wraps a backend; `seconds` adds up the time spent inside it (generating, not consuming, the pieces)."""

    def __init__(self, inner: Backend, clock=time.perf_counter) -> None:
        self.inner = inner
        self.clock = clock
        self.name = inner.name
        self.model = inner.model
        self.obeys_grammar = getattr(inner, "obeys_grammar", False)
        self.seconds = 0.0
        self.calls = 0

    def __getattr__(self, name: str):     # an endpoint's key stays masked in the call log (LLM._mask)
        if name in ("mask", "secret"):
            return getattr(self.inner, name)
        raise AttributeError(name)

    def stream(self, messages, max_tokens, temperature, usage, grammar=None):
        self.calls += 1
        pieces = iter(self.inner.stream(messages, max_tokens, temperature, usage, grammar=grammar))
        while True:
            started = self.clock()
            try:
                piece = next(pieces)
            except StopIteration:
                return
            finally:
                self.seconds += self.clock() - started
            yield piece


def chat_overhead(services, questions: list[str], warmup: int = 2, local_model: bool = False) -> dict:
    """Run `questions` as full chat turns (`Chat.ask`, waiting for the thought job) and report the overhead."""
    from copilot.features.chat import Chat
    from copilot.llm import LLM, build_llm

    inner = build_llm(services.settings, services.db).backend if local_model else InstantBackend()
    timed = TimedBackend(inner)
    services.llm = LLM(timed, services.db, retries=0, grammars=services.generation.grammars)
    chat = Chat(services)
    # the vote (as a user's would) makes the turn's thought, so the thought draft, merge test and storage count
    for question in questions[:warmup]:
        chat.ask(question, "bench", vote="thoughts")
    overheads, totals, retrieval = [], [], []
    statuses: dict[str, int] = {}
    for question in questions[warmup:]:
        before = timed.seconds
        started = time.perf_counter()
        record = chat.ask(question, "bench", vote="thoughts")
        total = time.perf_counter() - started
        totals.append(total)
        overheads.append(total - (timed.seconds - before))
        retrieval.append(record["timings"]["retrieval_s"] or 0.0)
        for job in record["thought_jobs"]:
            statuses[job["status"]] = statuses.get(job["status"], 0) + 1
    ms = np.asarray(overheads) * 1000
    return {"llm": "local model, its time subtracted" if local_model else "instant backend (no model time)",
            "turns": len(overheads), "overhead_p50_ms": round(float(np.percentile(ms, 50)), 1),
            "overhead_p95_ms": round(float(np.percentile(ms, 95)), 1),
            "turn_p50_ms": round(float(np.percentile(np.asarray(totals) * 1000, 50)), 1),
            "retrieval_p50_ms": round(float(np.percentile(np.asarray(retrieval) * 1000, 50)), 1),
            "llm_calls_per_turn": round(timed.calls / max(len(questions), 1), 2),
            "thought_jobs": statuses, "thoughts_stored": services.store.count("thought")}
