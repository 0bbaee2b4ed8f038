"""Chat's paper retrieval for the evidence table (issue #39), with the real embedder over real papers: the filters a
question implies hold when they leave papers near the question, and give way when they leave none; a paper reached
through a thought is placed among the retrieved ones by its own cosine."""

from __future__ import annotations

import pytest

from copilot.features.evidence_search import FILTERED_FLOOR, implied_filters, table_paper_hits
from copilot.features.library import ingestor
from tests.conftest import read_rows
from tests.helpers import PAPERS_JSONL

KV_CACHE = {"2503.14881", "2503.17922", "2503.18893", "2503.18773"}       # 2025-03: KV-cache compression
LAST_YEAR = {"2511.11134", "2604.24942", "2606.14579"}                  # 2025-11 .. 2026-06: none about it


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    from copilot.services import Services
    from copilot.sources.snapshot import paper_from_row
    from tests.conftest import make_settings

    services = Services(make_settings(tmp_path_factory.mktemp("evidence-search") / "data"))
    wanted = KV_CACHE | LAST_YEAR
    ingestor(services).run("test", [paper_from_row(r) for r in read_rows(PAPERS_JSONL) if r["id"] in wanted])
    assert services.store.count("paper") == len(wanted)
    return services


def hits(services, question):
    return table_paper_hits(services, question, services.embedder.embed_one(question), 12)


def test_a_recent_filter_that_leaves_nothing_near_the_question_gives_way(library):
    question = "Which recent methods compress the KV cache of language models?"
    from datetime import date
    assert implied_filters(question, date(2026, 6, 15)).date_from == date(2025, 6, 15)     # "recent" is read
    found = hits(library, question)
    assert set(pid for pid, _ in found[:4]) == KV_CACHE, found
    assert max(score for _, score in found) >= FILTERED_FLOOR


def test_a_recent_filter_that_leaves_papers_near_the_question_holds(library):
    found = hits(library, "Which recent methods train GUI grounding models with GRPO?")
    assert found and found[0][0] == "2606.14579" and {pid for pid, _ in found} <= LAST_YEAR, found
