"""The parts every feature uses, built once from the settings, and the state one process keeps. Heavy parts load
on first use."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from functools import cached_property

import numpy as np

from copilot.config import Settings, load_settings
from copilot.embed import Embedder
from copilot.llm import LLM, Backend, build_llm
from copilot.methods.thought_retriever import ThoughtMemory
from copilot.model_profile import CAPABLE, Generation, ModelProfile, choose_profile, generation_plan
from copilot.ratelimit import RateLimiter
from copilot.sources.arxiv_api import ArxivSource
from copilot.store.backup import BackupLog
from copilot.store.caches import AspectCache, TrendsCache
from copilot.store.catalog import PaperCatalog
from copilot.store.chat_log import ChatLog
from copilot.store.db import Database
from copilot.store.documents import DocumentStore
from copilot.store.failures import FailureLog
from copilot.store.feed import FeedStore
from copilot.store.fulltext import FAILURE_KIND as FULLTEXT_FAILURE
from copilot.store.fulltext import FILE_NAME as FULLTEXT_FILE
from copilot.store.fulltext import FulltextStore
from copilot.store.gor_cache import GoRCache
from copilot.store.lexical import LexicalIndex
from copilot.store.profiles import ProfileStore
from copilot.store.runs import RunLog
from copilot.store.sentence_vectors import ANSWER_BUSY_S, SentenceVectors
from copilot.store.sentence_vectors import FAILURE_KIND as SENTENCE_FAILURE
from copilot.store.sentence_vectors import FILE_NAME as SENTENCE_VECTORS_FILE
from copilot.store.slim_log import SlimLog
from copilot.store.thoughts import ThoughtStore
from copilot.store.vectors import VectorStore, chroma_client, reopened_client


class BackgroundJobs:
    """Jobs run one at a time on one background thread, remembered by key until done (so callers can wait)."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._executor: ThreadPoolExecutor | None = None
        self._futures: dict[int | str, Future] = {}
        self._lock = threading.Lock()

    def submit(self, key: int | str, function: Callable, *args) -> Future:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread_name)
            future = self._executor.submit(function, *args)
            for finished in [k for k, done in self._futures.items() if done.done()]:
                del self._futures[finished]
            self._futures[key] = future
        return future

    def wait(self, keys: Iterable[int], timeout: float | None = None) -> list[int]:
        """Wait for the given jobs submitted here; returns the keys still running after `timeout`."""
        wanted = set(keys)
        with self._lock:
            futures = {key: future for key, future in self._futures.items() if key in wanted}
        late = []
        for key, future in futures.items():
            try:
                future.result(timeout=timeout)
            except FutureTimeout:
                late.append(key)
        return late

    def wait_all(self, timeout: float | None = None) -> None:
        """Wait for every job submitted here; a job's exception is raised."""
        with self._lock:
            futures = list(self._futures.values())
        for future in futures:
            future.result(timeout=timeout)


class Services:
    """One per process in the app and the CLI. `llm_backend` replaces the configured model (a test double, a
    benchmark's recorder); it is called without retries, since its replies are scripted."""

    def __init__(self, settings: Settings | None = None, *, llm_backend: Backend | None = None) -> None:
        self.settings = settings or load_settings()
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._llm_backend = llm_backend
        self.after_papers_written: Callable[[], object] | None = None    # the app: start the sentence filler

    @cached_property
    def db(self) -> Database:
        return Database(self.settings.db_path)

    @cached_property
    def store(self) -> VectorStore:
        with self._lock:
            if self.settings.chroma_host:     # a server: every client sees every write
                return VectorStore(chroma_client(self.settings))
            pid = os.getpid()
            return VectorStore(chroma_client(self.settings), reopen=lambda: reopened_client(self.settings),
                               others_version=lambda: self.runs.others_progress(pid))

    @cached_property
    def backups(self) -> BackupLog:
        return BackupLog(self.db)

    @cached_property
    def documents(self) -> DocumentStore:
        return DocumentStore(self.db)

    @cached_property
    def feed(self) -> FeedStore:
        return FeedStore(self.db)

    @cached_property
    def catalog(self) -> PaperCatalog:
        return PaperCatalog(self.store, self.runs.latest_progress)

    @cached_property
    def lexical(self) -> LexicalIndex:
        return LexicalIndex(self.settings.data_dir / "lexical", self.store)

    @cached_property
    def chat_log(self) -> ChatLog:
        return ChatLog(self.db)

    @cached_property
    def thoughts(self) -> ThoughtStore:
        return ThoughtStore(self.db, self.store)

    @cached_property
    def thought_memory(self) -> ThoughtMemory:
        """Thoughts with lineage (Thought-Retriever's memory), as Chat, deep answers and Trends keep them."""
        return ThoughtMemory(self.db, self.store, self.embedder, self.settings.merge_threshold,
                             private=self.settings.private_thoughts)

    @cached_property
    def profiles(self) -> ProfileStore:
        return ProfileStore(self.db)

    @cached_property
    def aspect_cache(self) -> AspectCache:
        return AspectCache(self.db)

    @cached_property
    def trends_cache(self) -> TrendsCache:
        return TrendsCache(self.db)

    @cached_property
    def runs(self) -> RunLog:
        return RunLog(self.db)

    @cached_property
    def failures(self) -> FailureLog:
        return FailureLog(self.db)

    @cached_property
    def slim_log(self) -> SlimLog:
        return SlimLog(self.db)

    @cached_property
    def gor_cache(self) -> GoRCache:
        return GoRCache(self.db)

    @cached_property
    def embedder(self) -> Embedder:
        return Embedder(self.settings.embed_model, batch_size=self.settings.embed_batch_size,
                        backend=self.settings.embed_backend, models_dir=self.settings.data_dir / "models",
                        precision=self.settings.embed_precision)

    @cached_property
    def sentence_vectors(self) -> SentenceVectors:
        """The answers' sentence store: waits briefly for a lock, and a broken file is recorded in `failures`."""
        return self.sentence_store(ANSWER_BUSY_S)

    def sentence_store(self, busy_timeout: float) -> SentenceVectors:
        return SentenceVectors(self.settings.data_dir / SENTENCE_VECTORS_FILE, busy_timeout,
                               on_failure=lambda kind, reason: self.failures.record(SENTENCE_FAILURE, reason))

    @cached_property
    def fulltext(self) -> FulltextStore:
        """Papers' full texts, their sentences and vectors (derived from arXiv; not in backups)."""
        return FulltextStore(self.settings.data_dir / FULLTEXT_FILE,
                             on_failure=lambda kind, reason: self.failures.record(FULLTEXT_FAILURE, reason))

    def embed_sentences(self, texts: list[str]) -> np.ndarray:
        """Vectors of abstracts' sentences: from memory, then the data dir's sentence store, embedding (and keeping)
        only what neither holds."""
        return self.embedder.embed_cached(texts, stored=self.sentence_vectors)

    @cached_property
    def llm(self) -> LLM:
        if self._llm_backend is not None:
            return LLM(self._llm_backend, self.db, retries=0, grammars=self.generation.grammars)
        return build_llm(self.settings, self.db, grammars=self.generation.grammars)

    @cached_property
    def model_profile(self) -> ModelProfile:
        """Tiny (quotes only) or capable (writes): read by every feature that shows model output. A replacing
        backend that takes no grammar is taken as an endpoint (capable) unless COPILOT_MODEL_PROFILE says otherwise."""
        backend = self._llm_backend
        if backend is not None and self.settings.model_profile == "auto" and not getattr(backend, "obeys_grammar",
                                                                                        False):
            return ModelProfile(CAPABLE, f"replacing backend {getattr(backend, 'name', '?')} without grammars")
        return choose_profile(self.settings)

    @cached_property
    def generation(self) -> Generation:
        """Budgets and decoding for the configured writer (model_profile.generation_plan)."""
        return generation_plan(self.settings, self.model_profile)

    @cached_property
    def arxiv(self) -> ArxivSource:
        return ArxivSource(self.settings)

    # --- state of this process
    @cached_property
    def thought_jobs(self) -> BackgroundJobs:
        """Chat's thought jobs: one background thread."""
        return BackgroundJobs("thought-job")

    @cached_property
    def gor_jobs(self) -> BackgroundJobs:
        """Graph of Records trainings: one background thread (one core), keyed by scope."""
        return BackgroundJobs("gor-training")

    @cached_property
    def gor_progress(self) -> dict:
        """What each GoR training of this process is doing, by scope key (written by its one job thread)."""
        return {}

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        """The limit on LLM-backed actions per session (the web app has one Services, so one per process)."""
        return RateLimiter(self.settings.rate_limit, self.settings.rate_window)

    def cpu_kernels(self) -> dict | None:
        """The local model's CPU kernels (copilot.llm.local.cpu_kernels); None with an endpoint as the model."""
        if self.settings.llm_backend == "openai":
            return None
        from copilot.llm.local import cpu_kernels

        return cpu_kernels()

    def llm_info(self) -> dict[str, str]:
        """Backend and model, without loading the model."""
        s = self.settings
        if s.llm_backend == "openai":
            return {"backend": "openai", "model": s.llm_model}
        from copilot.llm import cached_choice

        choice = cached_choice(s)            # a Hub reference not fetched yet is named as written
        return {"backend": "local", "model": choice.path.stem if choice else str(s.local_model)}
