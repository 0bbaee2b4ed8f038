"""A comparison only when there is something to compare (issue #40): when the answer with thought memory comes out
the same as the papers-only answer, the turn shows one answer, says memory had nothing new, takes no vote, and is
counted apart in the statistics. Through the real embedder and stores on the tiny profile (the evidence table)."""

from __future__ import annotations

import pytest

from copilot.features.chat import Chat, ChatError
from copilot.features.chat_view import same_answer
from copilot.features.stats import chat_stats
from copilot.methods.evidence_text import parse_table
from copilot.ui.chat.render import SAME_ANSWER, turn_outputs
from tests.helpers import clean_env

QUESTION = "Which methods make large language models reason better with reinforcement learning?"


@pytest.fixture
def chat(library200, monkeypatch):
    clean_env(monkeypatch)
    chat = Chat(library200)
    yield chat
    chat.wait_for_all(timeout=120)


def run(chat: Chat, question: str):
    turn = chat.prepare(question, "local")
    for _ in chat.stream(turn):
        pass
    return turn


def test_two_tables_with_the_same_rows_are_the_same_answer_whatever_their_labels():
    table = ("Evidence from 1 paper of the library, most relevant first:\n\n"
             "[{n}] Title One \u00b7 A. Author et al. \u00b7 2025-04-01 \u00b7 arXiv:2504.00001\n“We propose X.”")
    assert same_answer(table.format(n=1), table.format(n=7))
    assert parse_table(table.format(n=1))          # the fixture really is a table
    assert not same_answer(table.format(n=1), table.format(n=1).replace("We propose X.", "We propose Y."))
    assert same_answer("None of the retrieved papers answers this.", " None of the retrieved  papers answers this.")
    assert not same_answer("A written answer [1].", "Another written answer [1].")


def test_a_thought_that_brings_nothing_new_gives_one_answer_and_no_vote(chat):
    """A thought right on the question whose only paper the papers-only side already quotes: memory is retrieved
    (the items differ) but the table is the same, so the page shows one answer and the turn cannot be voted on."""
    first = run(chat, QUESTION)
    rows = parse_table(first.answers[0].text)
    assert rows, first.answers[0].text
    chat.wait_for_all(timeout=120)
    seeded = chat.memory.add(QUESTION, [(rows[0].paper_id, "paper")], origin="test", check_redundant=False)
    turn = run(chat, QUESTION)
    stored = chat.log.turn(turn.id)
    assert seeded in [s.id for s in stored.thoughts.sources]                    # memory was retrieved
    assert stored.thoughts.text and stored.raw.text                             # both answers are kept in the log
    assert turn.comparison == stored.comparison == "same_answer" and [a.label for a in turn.answers] == ["A"]
    with pytest.raises(ChatError, match="same"):
        chat.vote(turn.id, "thoughts", "local")
    view = chat.view(turn.id, "local")
    assert len(view.answers) == 1 and not view.votable
    notice, a_html, b_html = turn_outputs(view)
    assert "nothing new" in notice and SAME_ANSWER[:40] in notice and b_html == ""
    stats = chat_stats(chat.db)
    assert stats["same_answer"] >= 1 and stats["decisive_votes"] == 0


def test_no_comparison_ever_shows_two_identical_answers(chat):
    """Whatever memory holds, a turn offered for a vote has two answers that differ."""
    for question in (QUESTION, "How is retrieval used to ground the answers of language models?",
                     "What benchmarks evaluate reasoning in language models?"):
        turn = run(chat, question)
        chat.wait_for_all(timeout=120)
        if turn.comparison == "yes":
            assert not same_answer(turn.answers[0].text, turn.answers[1].text)
        assert turn.comparison != "yes" or len(turn.answers) == 2
