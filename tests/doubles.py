"""Test doubles at the outer boundary only: a scripted LLM backend (a real implementation of the Backend
interface that replies from a queue and records every call)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from copilot.llm import LLM, LLMError, Usage


@dataclass
class RecordedCall:
    messages: list[dict[str, str]]
    max_tokens: int
    temperature: float
    grammar: str | None = None

    @property
    def text(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


@dataclass
class ScriptedBackend:
    """Replies in order. A reply may be a string, an LLMError to raise, or a callable(messages) -> str."""

    replies: list[str | LLMError | Callable[[list[dict[str, str]]], str]] = field(default_factory=list)
    name: str = "scripted"
    model: str = "scripted-model"
    obeys_grammar: bool = False
    calls: list[RecordedCall] = field(default_factory=list)

    def stream(self, messages, max_tokens, temperature, usage: Usage, grammar: str | None = None):
        self.calls.append(RecordedCall(messages, max_tokens, temperature, grammar))
        if not self.replies:
            raise AssertionError(f"scripted LLM ran out of replies at call {len(self.calls)}")
        reply = self.replies.pop(0)
        if isinstance(reply, LLMError):
            raise reply
        text = reply(messages) if callable(reply) else reply
        usage.prompt_tokens = sum(len(m["content"].split()) for m in messages)
        usage.completion_tokens = len(text.split())
        for index, word in enumerate(text.split(" ")):
            yield word if index == 0 else " " + word  # the pieces join back to exactly `text`


def scripted_llm(db, replies: Iterable = ()) -> tuple[LLM, ScriptedBackend]:
    backend = ScriptedBackend(list(replies))
    return LLM(backend, db, retries=0), backend


def rescript(services, replies: Iterable = ()) -> ScriptedBackend:
    """The scripted backend a Services was built with (`Services(settings, llm_backend=ScriptedBackend())`), its
    queue replaced by `replies` and its record of calls cleared: one Services over a module's data, a script per
    test."""
    backend = services.llm.backend
    if not isinstance(backend, ScriptedBackend):
        raise TypeError("this Services was not built with a ScriptedBackend")
    backend.replies[:] = list(replies)
    backend.calls.clear()
    return backend
