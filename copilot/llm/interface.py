"""The LLM interface: one way to call a language model (complete, stream, weigh options), every call logged to
SQLite `llm_calls`, the key masked wherever it could show. The backends are in `local.py` and `openai.py`."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from copilot.prompts import RenderedPrompt
from copilot.records import storable_text
from copilot.secrets import StreamMask
from copilot.store.db import Database
from copilot.store.llm_calls import LLMCallLog, LLMCallRecord

log = logging.getLogger(__name__)


class LLMError(RuntimeError):
    """A failed LLM call. `retryable` says whether trying again may help."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int = 0                 # prompt tokens whose KV cache was reused from the previous call
    prompt_seconds: float | None = None    # evaluating the prompt (what the user waits for before a first token)
    first_token_seconds: float | None = None
    total_seconds: float | None = None
    notices: list[str] = field(default_factory=list)   # e.g. "the prompt was trimmed to fit"

    @property
    def prompt_rate(self) -> float | None:
        evaluated = (self.prompt_tokens or 0) - self.cached_tokens
        return evaluated / self.prompt_seconds if self.prompt_seconds and evaluated > 0 else None

    @property
    def generation_rate(self) -> float | None:
        if not self.completion_tokens or self.total_seconds is None or self.first_token_seconds is None:
            return None
        seconds = self.total_seconds - self.first_token_seconds
        return (self.completion_tokens - 1) / seconds if seconds > 0 and self.completion_tokens > 1 else None


class Backend(Protocol):
    name: str
    model: str
    obeys_grammar: bool

    def stream(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
               usage: Usage, grammar: str | None = None) -> Iterator[str]: ...


@runtime_checkable
class OptionScorer(Protocol):
    """A backend that can also weigh a choice of words (the local one)."""

    def option_logprobs(self, messages: list[dict[str, str]], options: list[str],
                        usage: Usage) -> dict[str, float]: ...


class LLM:
    """The one way the product talks to a language model."""

    def __init__(self, backend: Backend, db: Database | None, retries: int = 2, backoff: float = 1.0,
                 grammars: bool = True) -> None:
        self.backend = backend
        self.grammars = grammars
        self.db = db
        self.retries = retries
        self.backoff = backoff

    @property
    def info(self) -> dict[str, str]:
        return {"backend": self.backend.name, "model": self.backend.model}

    @property
    def obeys_grammar(self) -> bool:
        """Whether callers hold the output to a grammar: a backend that applies grammars (the local one), for a
        writer the generation plan holds (a small model; `grammars=False` lets a larger local model write freely)."""
        return self.grammars and getattr(self.backend, "obeys_grammar", False)

    @property
    def scores_options(self) -> bool:
        """Whether `option_logprobs` can weigh a choice of words (the local model; an endpoint cannot)."""
        return hasattr(self.backend, "option_logprobs")

    def option_logprobs(self, prompt: RenderedPrompt, options: Sequence[str],
                        usage: Usage | None = None) -> dict[str, float]:
        """Log-probability of each option as the reply to `prompt`, logged like any call. Only for a backend that
        `scores_options`."""
        prompt = RenderedPrompt(prompt.name, storable_text(prompt.system), storable_text(prompt.user))
        usage = usage if usage is not None else Usage()
        started, scores, error = time.time(), {}, None
        try:
            if not isinstance(self.backend, OptionScorer):
                raise LLMError(f"the {self.backend.name} backend cannot weigh options (see scores_options)")
            scores = self.backend.option_logprobs(prompt.as_messages(), list(options), usage)
            return scores
        except LLMError as caught:
            error = caught
            raise
        except Exception as caught:
            error = self._failure(caught)
            raise error from None
        finally:
            self._log(prompt, " · ".join(f"{option} {logprob:.3f}" for option, logprob in scores.items()), usage,
                      time.time() - started, started, error)

    def complete(self, prompt: RenderedPrompt, max_tokens: int = 256, temperature: float = 0.2,
                 grammar: str | None = None, usage: Usage | None = None) -> str:
        return "".join(self.stream(prompt, max_tokens=max_tokens, temperature=temperature, grammar=grammar,
                                   usage=usage))

    def stream(self, prompt: RenderedPrompt, max_tokens: int = 256, temperature: float = 0.2,
               grammar: str | None = None, usage: Usage | None = None) -> Iterator[str]:
        """Yield pieces of the answer. Transient errors before the first piece are retried with backoff.
        `grammar` (GBNF) constrains a backend that obeys grammars; `usage`, when given, receives token counts,
        timings and notices of the call."""
        # lone surrogates (pasted text, undecodable command-line bytes) cannot be encoded for the model or the log
        prompt = RenderedPrompt(prompt.name, storable_text(prompt.system), storable_text(prompt.user))
        attempt = 0
        usage = usage if usage is not None else Usage()   # a retry happens only before any piece, so it may share
        while True:
            pieces: list[str] = []
            started = time.time()
            error: LLMError | None = None
            try:
                masking = self._stream_mask()
                for piece in self.backend.stream(prompt.as_messages(), max_tokens, temperature, usage,
                                                 grammar=grammar):
                    pieces.append(piece)
                    shown = masking.feed(piece) if masking else piece
                    if shown:
                        yield shown
                if masking and (rest := masking.flush()):
                    yield rest
            except LLMError as caught:
                error = caught
            except Exception as caught:
                error = self._failure(caught)
            finally:
                self._log(prompt, "".join(pieces), usage, time.time() - started, started, error)
            if error is None:
                return
            if error.retryable and not pieces and attempt < self.retries:
                attempt += 1
                time.sleep(self.backoff * (2 ** (attempt - 1)) * (1 + random.random() / 2))
                continue
            raise error

    def _failure(self, caught: Exception) -> LLMError:
        """A backend bug or library error, reported as an LLM failure without the backend's secret."""
        return LLMError(self._mask(f"LLM call failed: {type(caught).__name__}: {caught}")[:400])

    def _stream_mask(self) -> StreamMask | None:
        """Masks the backend's secret in streamed pieces (an endpoint may echo the key in a successful answer)."""
        secret = getattr(self.backend, "secret", None)
        return StreamMask(secret) if secret else None

    def _mask(self, text: str) -> str:
        """`text` without the backend's secret (a backend without one has nothing to hide)."""
        mask = getattr(self.backend, "mask", None)
        return mask(text) if mask else text

    def _log(self, prompt, output, usage, latency, started, error) -> None:
        if self.db is None:
            return
        try:
            LLMCallLog(self.db).add(LLMCallRecord(
                started, self.backend.name, self.backend.model, prompt.name, self._mask(prompt.as_text()),
                self._mask(output), usage.prompt_tokens, usage.completion_tokens, latency,
                self._mask(str(error)) if error else None))
        except Exception:  # logging must never break an answer
            log.exception("could not log an LLM call")

