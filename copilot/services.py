"""The parts every feature uses, built once from the settings. Heavy parts load on first use."""

from __future__ import annotations

import threading
from functools import cached_property

from copilot.config import Settings, load_settings
from copilot.embed import Embedder
from copilot.llm import LLM, build_llm
from copilot.sources.arxiv_api import ArxivSource
from copilot.store.db import Database
from copilot.store.vectors import VectorStore, chroma_client


class Services:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()

    @cached_property
    def db(self) -> Database:
        return Database(self.settings.db_path)

    @cached_property
    def store(self) -> VectorStore:
        with self._lock:
            return VectorStore(chroma_client(self.settings))

    @cached_property
    def embedder(self) -> Embedder:
        return Embedder(self.settings.embed_model, batch_size=self.settings.embed_batch_size)

    @cached_property
    def llm(self) -> LLM:
        return build_llm(self.settings, self.db)

    @cached_property
    def arxiv(self) -> ArxivSource:
        return ArxivSource(self.settings)

    def llm_info(self) -> dict[str, str]:
        """Backend and model, without loading the model."""
        s = self.settings
        if s.llm_backend == "openai":
            return {"backend": "openai", "model": s.llm_model}
        from copilot.llm import packaged_gguf

        return {"backend": "local", "model": (s.local_model or packaged_gguf()).stem}
