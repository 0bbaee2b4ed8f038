"""Issue #41 item 2: no stored question is shown anywhere but to its author. A thought's question was its title
wherever it was retrieved: in the no-answer line ("the nearest are …", before the vote, to any user with shared
memory) and in Trends' "Ask about this period" record list. Real SQLite, Chroma and embedder."""

from __future__ import annotations

import pytest

from copilot.features.answers import answer_tables, table_text
from copilot.features.gor import thought_records
from copilot.methods.quotes import NO_SOURCE_ANSWERS
from copilot.services import Services
from tests.conftest import import_papers, make_settings

SECRET_QUESTION = "CONFIDENTIAL: which lab is Bob's startup about to acquire?"
THOUGHT = "Retrieval-augmented models ground their answers in passages taken from the retrieved papers."


@pytest.fixture(scope="module")
def bobs_thought(tmp_path_factory):
    services = Services(make_settings(tmp_path_factory.mktemp("privacy") / "data"))
    import_papers(services, 30)
    paper = services.store.search("paper", services.embedder.embed_one(THOUGHT), 1)[0]
    memory = services.thought_memory
    thought_id = memory.add(THOUGHT, [(paper.id, "paper")], origin="chat", question=SECRET_QUESTION, user="bob",
                            check_redundant=False)
    return services, thought_id, paper


def test_a_retrieved_thought_carries_no_question(bobs_thought):
    services, thought_id, _ = bobs_thought
    [hit] = [h for h in services.store.search("thought", services.embedder.embed_one(THOUGHT), 5)
             if h.id == thought_id]
    assert "CONFIDENTIAL" not in f"{hit.title} {hit.text} {hit.metadata}"


def test_the_no_answer_line_lists_no_question_and_nothing_a_paper_side_would_not(bobs_thought):
    services, thought_id, paper = bobs_thought
    items = services.store.fetch("thought", [(thought_id, 0.9)]) + services.store.fetch("paper", [(paper.id, 0.8)])
    line = table_text(answer_tables(services, "Zxqv plorb wunk?", [items])[0], items)
    assert line.startswith(NO_SOURCE_ANSWERS), line          # nothing clears the floor: the nearest are listed
    assert "CONFIDENTIAL" not in line and THOUGHT[:40] not in line
    assert paper.title.split()[0] in line                     # papers are still listed by title


def test_trends_records_are_titled_by_their_text_never_their_question(bobs_thought):
    services, thought_id, paper = bobs_thought
    records = thought_records(services, [paper.id], "alice")
    assert [r.id for r in records] == [thought_id]
    assert "CONFIDENTIAL" not in records[0].title and records[0].title.startswith("Retrieval-augmented")
