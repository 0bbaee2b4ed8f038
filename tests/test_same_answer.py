"""A comparison only when there is something to compare (issue #40): when the answer with thought memory comes out
the same as the papers-only answer, the turn shows one answer, says memory had nothing new, takes no vote, and is
counted apart in the statistics. Through the real embedder and stores on the tiny profile (the evidence table)."""

from __future__ import annotations

import re

import pytest

from copilot.features.chat import Chat, ChatError
from copilot.features.chat_view import same_answer
from copilot.features.stats import chat_stats
from copilot.table import EvidenceTable, Quote, Row
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


def _row(label: str, paper_id: str, text: str) -> Row:
    return Row(label, paper_id, "v1", f"Title {paper_id}", ("A. Author",), "2025-04-01",
               (Quote("abstract", 0, len(text), text),), 0.5)


def test_two_tables_with_the_same_rows_are_the_same_answer_whatever_their_order():
    one, two = _row("1", "2504.00001", "We propose X."), _row("2", "2504.00002", "We find Y.")
    first = EvidenceTable((one, two))
    reordered = EvidenceTable((Row(**{**two.__dict__, "label": "1"}), Row(**{**one.__dict__, "label": "2"})))
    other_quote = EvidenceTable((one, _row("2", "2504.00002", "We find Y and Z.")))
    assert same_answer("", "", first, reordered)
    assert not same_answer("", "", first, other_quote)
    assert not same_answer("", "", first, EvidenceTable((one,)))
    assert same_answer("None of the retrieved papers answers this.", " None of the retrieved  papers answers this.")
    assert not same_answer("A written answer [1].", "Another written answer [1].")


def test_a_thought_that_brings_nothing_new_gives_one_answer_and_no_vote(chat):
    """A thought right on the question whose only paper the papers-only side already quotes: memory is retrieved
    (the items differ) but the table is the same, so the page shows one answer and the turn cannot be voted on."""
    first = run(chat, QUESTION)
    rows = first.answers[0].table.rows
    assert rows, first.answers[0].text
    chat.wait_for_all(timeout=120)
    seeded = chat.memory.add(QUESTION, [(rows[0].paper_id, "paper")], origin="test", check_redundant=False)
    turn = chat.prepare(QUESTION, "local")
    pages = [turn_outputs(live.view(), live.notice) for live in chat.stream(turn)]
    # as the page shows it while answered (a comparison's answers are shown once both are done, issue #59): never
    # two answers alike, to be folded into one once the turn is finished
    assert all(b == "" or "shown together" in b for _, _, b in pages), "two identical answers were shown"
    assert "shown together" not in pages[-2][1] and "chat-answer-text" in pages[-2][1]
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


def _says(text: str) -> str:
    """What an answer's text says, without its labels (each side numbers its own rows)."""
    return re.sub(r"\[\d{1,3}\]", "", " ".join(text.split()))


def test_no_comparison_ever_shows_two_identical_answers(chat):
    """Whatever memory holds, a turn offered for a vote has two answers whose words differ (read from the texts
    shown, not through `same_answer`); a turn whose answers say the same is shown as one."""
    for question in (QUESTION, "How is retrieval used to ground the answers of language models?",
                     "What benchmarks evaluate reasoning in language models?"):
        turn = run(chat, question)
        chat.wait_for_all(timeout=120)
        stored = chat.log.turn(turn.id)
        texts = [stored.raw.text or "", stored.thoughts.text or ""]
        if turn.comparison == "yes":
            assert len(turn.answers) == 2 and _says(texts[0]) != _says(texts[1])
        elif stored.thoughts.text:
            assert turn.comparison != "same_answer" or _says(texts[0]) == _says(texts[1])
