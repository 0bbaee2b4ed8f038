"""The LLM layer: one interface (`interface.py`) over two backends, llama.cpp in this process (`local.py`) and an
OpenAI-compatible endpoint (`openai.py`). `build_llm` picks the backend the settings name. Callers import from
here: `from copilot.llm import LLM, LLMError, Usage`."""

from __future__ import annotations

from copilot.config import Settings
from copilot.llm.interface import LLM, Backend, LLMError, Usage
from copilot.llm.local import LocalBackend, built_with_amx, fast_copy, packaged_gguf
from copilot.llm.models import ModelChoice, cached_choice, choose_local_model, llama_cpp_build
from copilot.llm.openai import OpenAIBackend
from copilot.store.db import Database

__all__ = ["LLM", "Backend", "LLMError", "LocalBackend", "ModelChoice", "OpenAIBackend", "Usage", "build_llm",
           "built_with_amx", "cached_choice", "choose_local_model", "fast_copy", "llama_cpp_build", "packaged_gguf"]


def build_llm(settings: Settings, db: Database | None, grammars: bool = True) -> LLM:
    """The LLM the settings ask for. It lives here rather than in interface.py, which the backends import: the
    layer test counts an import inside a function, and interface -> local -> interface would be a cycle."""
    if settings.llm_backend == "openai":
        if not settings.openai_api_key:
            raise LLMError("no key found: set OPENAI_API_KEY or use COPILOT_LLM=local")
        backend: Backend = OpenAIBackend(settings.openai_base_url, settings.openai_api_key.get_secret_value(),
                                         settings.llm_model, settings.llm_timeout)
    else:
        backend = LocalBackend(choose_local_model(settings).path, settings.local_context,
                               settings.local_threads, settings.llm_timeout, batch_threads=settings.batch_threads,
                               n_batch=settings.local_batch,
                               cache_dir=settings.data_dir / "models" if settings.local_requantize else None)
    return LLM(backend, db, retries=settings.llm_retries, grammars=grammars)
