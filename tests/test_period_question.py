"""Trends' "Ask about this period" on the tiny profile (issue #59 item 7): "agents and tool use" over a period quoted a
legal evaluation paper. Plain retrieval ranked only the capped, evenly sampled papers the period's record graph
holds, which can miss every paper of the topic asked about; it ranks the period's papers, all of them."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from copilot.features import gor_period as period
from copilot.features.gor import GoROptions
from copilot.records import date_number
from copilot.services import Services
from tests.conftest import import_papers, make_settings

SCOPE = period.scope_for(date(2025, 4, 1), date(2025, 4, 16))     # rows 900 … 1299 of the corpus: 400 papers
LEGAL_TOOL = "2504.01840"          # "LARGE: Legal Retrieval Augmented Generation Evaluation Tool"


@pytest.fixture(scope="module")
def april(tmp_path_factory):
    services = Services(make_settings(tmp_path_factory.mktemp("period-question") / "data"))
    import_papers(services, 400, 900)
    return services


def test_the_period_question_quotes_the_topics_papers_from_the_whole_period(april):
    services = april
    opts = GoROptions.from_settings(services.settings, cap=100)      # the graph holds a quarter of the period
    question = "tool use"
    result = period.ask_period(services, SCOPE, question, opts)
    papers = services.store.papers_between(date_number(SCOPE.start), date_number(SCOPE.end), None)
    assert len(papers) > 3 * opts.cap
    vectors = services.store.paper_embeddings([p.id for p in papers])
    query = services.embedder.embed_one(question)
    cosine = {pid: float(v @ query / np.linalg.norm(v)) for pid, v in vectors.items()}
    nearest = sorted(cosine, key=lambda pid: -cosine[pid])[:opts.top_k]
    titles = {p.id: p.title for p in papers}
    quoted = [pid for pid in titles if f"[{pid}]" in result.answer or f"arXiv:{pid}" in result.answer
              or f"/abs/{pid}" in result.answer]
    assert quoted and LEGAL_TOOL not in quoted, result.answer
    assert any("Tool Learning" in titles[pid] or "Tool Use" in titles[pid] for pid in quoted), \
        [titles[pid] for pid in quoted]
    assert [n.id for n in result.nodes] == nearest, [(n.id, n.title) for n in result.nodes]
