"""The log of every LLM call (`llm_calls`): what was asked, what came back, tokens, time, error — and the speed
the configured model was measured at from it (shown by `status` and the Library tab)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from copilot.store.db import Database

SPEED_CALLS = 50                   # the most recent successful calls a speed figure is taken over


@dataclass(frozen=True)
class LLMCallRecord:
    started_at: float
    backend: str
    model: str
    prompt_name: str
    prompt: str                    # masked by the caller
    output: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    error: str | None


@dataclass(frozen=True)
class MeasuredSpeed:
    calls: int                     # successful calls with output that the figures are taken over
    output_tokens_per_s: float     # tokens written per second of whole calls (reading the prompt included)
    median_call_s: float
    median_prompt_tokens: float

    def as_dict(self) -> dict:
        return {"calls": self.calls, "output_tokens_per_s": round(self.output_tokens_per_s, 1),
                "median_call_s": round(self.median_call_s, 2), "median_prompt_tokens": self.median_prompt_tokens}


class LLMCallLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, call: LLMCallRecord) -> None:
        self.db.execute(
            "INSERT INTO llm_calls (started_at, backend, model, prompt_name, prompt, output, prompt_tokens,"
            " completion_tokens, latency_s, error) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (call.started_at, call.backend, call.model, call.prompt_name, call.prompt, call.output,
             call.prompt_tokens, call.completion_tokens, call.latency_s, call.error))

    def speed(self, backend: str, model: str, limit: int = SPEED_CALLS) -> MeasuredSpeed | None:
        """The speed of `backend`/`model` over its last `limit` successful calls that wrote 2+ tokens (None: none)."""
        rows = self.db.query(
            "SELECT prompt_tokens, completion_tokens, latency_s FROM llm_calls WHERE backend = ? AND model = ? "
            "AND error IS NULL AND completion_tokens > 1 AND latency_s > 0 ORDER BY id DESC LIMIT ?",
            (backend, model, limit))
        if not rows:
            return None
        seconds = sum(row["latency_s"] for row in rows)
        return MeasuredSpeed(len(rows), sum(row["completion_tokens"] for row in rows) / seconds,
                             statistics.median(row["latency_s"] for row in rows),
                             statistics.median(row["prompt_tokens"] or 0 for row in rows))
