"""A Chat answer's papers under "Ask about these" (issue #57 item 2), unit tier: listed only once the sides are shown
(one answer, or a voted comparison), never before a vote (which papers an answer holds would tell the sides apart);
each paper once, in the order shown."""

from __future__ import annotations

from dataclasses import replace

from copilot.features.chat_view import AnswerView, TurnView, VoteView
from copilot.store.chat_log import RAW, THOUGHTS, SourceRecord
from copilot.table import EvidenceTable, Quote, Row
from copilot.ui.chat.answer_papers import shown_choices


def _row(label: str, paper_id: str) -> Row:
    return Row(label, paper_id, "v1", f"Title of {paper_id}", ("A. Author",), "2025-03-01",
               (Quote("abstract", 0, 5, "Words"),), 0.5)


def _answer(label: str, kind: str, ids: list[str]) -> AnswerView:
    table = EvidenceTable(tuple(_row(str(n), pid) for n, pid in enumerate(ids, start=1)))
    sources = tuple(SourceRecord(pid, "paper", f"Title of {pid}", "", 0.5) for pid in ids)
    return AnswerView(label, kind, "text", None, True, 1.0, kind == THOUGHTS, sources, table=table)


def _turn(comparison: str, answers: tuple[AnswerView, ...], vote: VoteView | None = None) -> TurnView:
    return TurnView("t1", "ann", "q?", comparison, answers, 0.1, vote=vote)


def test_a_comparison_lists_its_papers_only_after_the_vote():
    pair = (_answer("A", THOUGHTS, ["2503.00001", "2503.00002"]), _answer("B", RAW, ["2503.00002", "2503.00003"]))
    assert shown_choices(_turn("yes", pair)) == [], "blind until the vote"
    voted = shown_choices(_turn("yes", pair, VoteView(THOUGHTS, "A")))
    assert [pid for _, pid in voted] == ["2503.00001", "2503.00002", "2503.00003"]
    assert voted[0][0].startswith("A1 · Title of 2503.00001") and voted[2][0].startswith("B2 · ")


def test_one_answer_lists_its_papers_once_done():
    one = _answer("A", RAW, ["2503.00001", "2503.00002"])
    assert [pid for _, pid in shown_choices(_turn("same_items", (one,)))] == ["2503.00001", "2503.00002"]
    assert shown_choices(_turn("same_items", (replace(one, done=False),))) == []
    assert shown_choices(None) == []
