"""Shared fixtures: a temporary data dir per test, real stores, the real embedder and local model."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pytest

from copilot.config import load_settings
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = SHARED / "data"
PAPERS_JSONL = DATA / "arxiv-cs-2025-2026" / "papers.jsonl"
KAGGLE_JSONL = DATA / "arxiv-kaggle-sample" / "arxiv-metadata-oai-snapshot.head.jsonl"
ARXIV_RESPONSES = DATA / "arxiv-api-responses"
CSFCUBE = DATA / "csfcube"


def make_settings(data_dir: Path, **overrides):
    values = dict(data_dir=data_dir, llm="local", scheduler=False, arxiv_delay=0.0, arxiv_retries=1,
                  arxiv_timeout=5.0, answer_max_tokens=96, local_threads=1)
    values.update(overrides)
    return load_settings(**values)


@pytest.fixture
def settings(tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "COPILOT_LLM", "COPILOT_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    return make_settings(tmp_path / "data")


@pytest.fixture
def services(settings):
    return Services(settings)


def stop_process(proc, timeout: float = 20) -> None:
    """Stop a server subprocess started by a test: terminate, then kill if it does not exit in time."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def read_rows(path: Path, start: int = 0, count: int | None = None) -> list[dict]:
    with path.open(encoding="utf-8") as lines:
        chosen = itertools.islice(lines, start, None if count is None else start + count)
        return [json.loads(line) for line in chosen]


def sample_papers(count: int = 300, start: int = 0):
    """Real papers from the shared 2025-2026 corpus, in file order."""
    return [paper_from_row(row) for row in read_rows(PAPERS_JSONL, start, count)]


def import_papers(services: Services, count: int = 300, start: int = 0):
    """Embed and store `count` real papers through the product's ingestion path."""
    from copilot.features.library import ingestor

    papers = sample_papers(count, start)
    ingestor(services).run("test", papers)
    return papers
