"""Names find their paper (issue #57), through real stores: 300 real papers embedded by the real embedder, Chat's
turn and evidence table as the page makes them, and Search. A paper named by its coined name, its arXiv id (after
a long pasted token) or its first author and year heads the table and is Search's first hit; a name that fits
several papers says so."""

from __future__ import annotations

import pytest

from copilot.features.answers import answer_tables
from copilot.features.chat import Chat
from copilot.features.library import ingestor
from copilot.features.named_papers import named_papers
from copilot.features.search import MAX_QUERY_CHARS, search_papers
from copilot.sources.snapshot import paper_from_row
from copilot.store.chat_log import RAW
from copilot.ui.search import results_html
from tests.conftest import import_papers, read_rows
from tests.helpers import PAPERS_JSONL

LATER = {"2503.20271", "2505.11739"}       # ViLBench, ZeroTuning: beyond the first 300
PASTED = "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" * 15   # 922 chars


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    from copilot.services import Services
    from tests.conftest import make_settings

    services = Services(make_settings(tmp_path_factory.mktemp("named") / "data"))
    import_papers(services, 300)
    ingestor(services).run("test", [paper_from_row(r) for r in read_rows(PAPERS_JSONL) if r["id"] in LATER])
    return services


def table_of(services, question):
    turn = Chat(services).prepare(question, "named-test")
    answer = next(a for a in turn.answers if a.kind == RAW)
    table = answer_tables(services, turn.question, [answer.sources], turn.ranking)[0]
    return turn, [row.paper_id for row in table.rows]


@pytest.mark.parametrize("question, paper", [
    ("Who rated the videos of ExDDV, and how much do the raters agree?", "2503.14421"),
    ("how big is vilbench and where do its examples come from?", "2503.20271"),
    ("How much extra compute does ZeroTuning need at inference?", "2505.11739"),
    ("Which datasets does Seyfarth et al. 2025 evaluate on, and what compute did it need?", "2503.13211"),
])
def test_a_named_paper_heads_the_table_and_search(library, question, paper):
    _, rows = table_of(library, question)
    assert rows and rows[0] == paper, rows
    assert search_papers(library, question).hits[0].paper.id == paper


def test_an_id_after_a_long_pasted_token_is_looked_up(library):
    question = f"{PASTED} Which baselines does 2503.14505 compare with, and what are its limits?"
    assert len(" ".join(question.split())) > MAX_QUERY_CHARS      # beyond what Search's query keeps
    _, rows = table_of(library, question)
    assert rows and rows[0] == "2503.14505", rows


def test_a_name_that_fits_several_papers_says_so_and_shows_them(library):
    question = "What data do Zhang et al. 2025 use, and how big are their models?"
    naming = named_papers(library, question)
    assert len(naming.ids) == 5 and "fits" in naming.notice and "Zhang et al. 2025" in naming.notice
    turn, rows = table_of(library, question)
    assert "Zhang et al. 2025" in turn.notice
    assert set(rows[:3]) <= set(m for mention in naming.mentions for m in mention.ids), rows
    result = search_papers(library, question)
    several = {m for mention in naming.mentions for m in mention.ids}
    assert {hit.paper.id for hit in result.hits[:5]} <= several          # five of the seven come first
    assert "fits 7 papers" in result.message and "fits 7 papers" in results_html(result)


def test_a_named_paper_heads_a_writing_models_sources_too(library, monkeypatch):
    """A writing model (a capable endpoint, a signed-in visitor's) reads the nearest papers by meaning, not the
    table's pool: the paper the question names must still head both sides, which keep the same length."""
    from copilot.model_profile import CAPABLE, ModelProfile, generation_plan

    profile = ModelProfile(CAPABLE, "the writing profile, for this test")
    monkeypatch.setitem(library.__dict__, "model_profile", profile)
    monkeypatch.setitem(library.__dict__, "generation", generation_plan(library.settings, profile))
    for question, paper in (("Who rated the videos of ExDDV, and how much do the raters agree?", "2503.14421"),
                            (f"{PASTED} Which baselines does 2503.14505 compare with, and what are its limits?",
                             "2503.14505")):
        turn = Chat(library).prepare(question, "named-writer-test")
        assert turn.writes
        for answer in turn.answers:
            assert answer.sources and answer.sources[0].id == paper, [s.id for s in answer.sources]
        assert len({len(answer.sources) for answer in turn.answers}) == 1
