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
from tests.helpers import (  # noqa: F401
    ARXIV_RESPONSES,
    CSFCUBE,
    DATA,
    KAGGLE_JSONL,
    PAPERS_JSONL,
    ROOT,
    SHARED,  # the data paths, still importable from here
    clean_env,
    untracked_files,
)

# Modules of the `unit` tier: no model, no embedder, no server, no subprocess, stores only small and in a temporary
# dir; seconds in all. tests/e2e/ is the `browser` tier; every other module is `integration` unless it sets its own
# `pytestmark`.
UNIT_MODULES = {"test_authors", "test_chat_blinding", "test_config", "test_db", "test_grounding", "test_layers",
                "test_prompts", "test_rat", "test_stats", "test_store_chat_log", "test_store_profiles",
                "test_store_runs_caches", "test_store_thoughts", "test_thought_confidence", "test_metrics"}
UNIT_MODULES |= {"test_slim"}      # SlimPLM's decision branches, scripted models (issue #14)
UNIT_MODULES |= {"test_eval_judge"}    # eval thoughts --judge: blind order, verdicts, Wilson (issue #13)
UNIT_MODULES |= {"test_eval_slim"}  # eval slim: F1, the dev set, scripted counts; its real run: integration
UNIT_MODULES |= {"test_login"}     # the password gate with a fake clock (issue #19)
UNIT_MODULES |= {"test_fusion"}    # Related rankings: fusion, BM25, query choice, the default rule (issue #22)
UNIT_MODULES |= {"test_gor_unit"}  # Graph of Records: graph, BERTScore, loss, store (issue #16)
UNIT_MODULES |= {"test_scope_ids"}  # a question about chosen papers: which ids a scope holds (issue #57)
UNIT_MODULES |= {"test_filters"}    # a follow-up filtering the previous answer: its form and property (#59 item 8)
UNIT_MODULES |= {"test_answer_papers"}   # a Chat answer's papers under "Ask about these": blind until the vote (#57)
UNIT_MODULES |= {"test_longform", "test_eval_related_work"}  # RAT deep answers, related-work drafts (issue #15)
UNIT_MODULES |= {"test_bibtex"}    # BibTeX out and in (issue #18)
UNIT_MODULES |= {"test_errors"}    # one error family under UserError (issue #28)
UNIT_MODULES |= {"test_fairness"}  # each user's share of the queue (issue #19)
UNIT_MODULES |= {"test_guard"}     # session binding (issue #34)
UNIT_MODULES |= {"test_snapshot_rows"}   # what an import accepts (issue #34)
# vote statistics under peeking, preference export, the merge test with private thoughts (issue #30)
UNIT_MODULES |= {"test_ab_stats", "test_preferences", "test_merge_privacy"}
UNIT_MODULES |= {"test_thought_rows"}    # a thought of the table's rows, its vector text, eval thoughts-dev (issue #40)
UNIT_MODULES |= {"test_linear_text"}     # hostile text read in linear time (issue #47)
UNIT_MODULES |= {"test_documents_store"}  # uploaded documents: private, deletable, never backed up (#57)
UNIT_MODULES |= {"test_fulltext_rows"}   # full text in the evidence table, its store and its section links (#48)
UNIT_MODULES |= {"test_tex_text"}        # short inline TeX in characters (#49 item 4)
UNIT_MODULES |= {"test_paper_names"}     # the names a question gives a paper, read in linear time (#57 item 1)
UNIT_MODULES |= {"test_screen_words"}    # what the screens say, in words (#59)
UNIT_MODULES |= {"test_question_kinds"}  # a question's kind and the sections it lives in (#57 item 4)
TIERS = ("unit", "integration", "browser")
_BEFORE = pytest.StashKey[set[str]]()


def make_settings(data_dir: Path, **overrides):
    values = dict(data_dir=data_dir, llm="local", scheduler=False, arxiv_delay=0.0, arxiv_retries=1,
                  arxiv_timeout=5.0, answer_max_tokens=96, local_threads=1, fulltext_reading=False)
    values.update(overrides)
    return load_settings(**values)


def tier_of(path: Path) -> str:
    if path.parent.name == "e2e":
        return "browser"
    return "unit" if path.stem in UNIT_MODULES else "integration"


@pytest.hookimpl(tryfirst=True)      # before `-m` deselects
def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(tier_of(item.path))


def pytest_sessionstart(session) -> None:
    session.config.stash[_BEFORE] = untracked_files()


def pytest_sessionfinish(session, exitstatus) -> None:
    """The suite fails when it leaves a file in the repository (a test's data dir was once committed, #58)."""
    left = sorted(untracked_files() - session.config.stash.get(_BEFORE, set()))
    if left:
        shown = "\n  ".join(left[:20]) + ("\n  …" if len(left) > 20 else "")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"FAILED: the tests left {len(left)} file(s) in the repository:\n  {shown}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def settings(tmp_path, monkeypatch):
    clean_env(monkeypatch)
    return make_settings(tmp_path / "data")


@pytest.fixture
def services(settings):
    return Services(settings)


@pytest.fixture(scope="module")
def library200(tmp_path_factory):
    """Real stores over 200 real papers, shared by one test module's tests (each module gets its own)."""
    services = Services(make_settings(tmp_path_factory.mktemp("library200") / "data"))
    import_papers(services, 200)
    return services


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
