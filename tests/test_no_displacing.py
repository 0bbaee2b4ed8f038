"""A row reached through a thought keeps its place only when its own evidence beats the row it pushes out (issue #49
item 3): over constructed rows (`answers.no_displacing`), and through a real turn on 200 real papers, where the
thought side's candidates must still hold the papers-only rows a memory paper would push out."""

from __future__ import annotations

import pytest

from copilot.features import answers, chat_thoughts
from copilot.features.chat import Chat
from copilot.methods import evidence
from tests.comparisons import remember_papers_beyond_the_pool
from tests.helpers import clean_env

MARGIN = answers.DISPLACE_MARGIN


def row(paper: str, score: float, rank: float, via: str = "", cosine: float = 0.5,
        named: bool = False) -> evidence.Row:
    return evidence.Row(evidence.Source(paper, "", (), "", "", cosine, named, rank, via), [], score, score)


def retrieved(scores: list[float]) -> list[evidence.Row]:
    return [row(f"p{n}", s, float(n)) for n, s in enumerate(scores)]


def shown(rows: list[evidence.Row], budget: int) -> list[str]:
    return [rows[n].source.paper_id for n in answers.no_displacing(rows, budget)]


@pytest.mark.unit
def test_the_margin_is_the_setting_default():
    from copilot.config import Settings

    assert Settings.model_fields["thought_row_margin"].default == MARGIN


@pytest.mark.unit
def test_a_thought_row_with_weaker_evidence_gives_the_place_back():
    """The speculative-decoding turn's shape: the memory paper's paper cosine is higher (0.512 against 0.481), its
    best sentence barely (0.462 against 0.442), and it was not relevant while the row it pushed out was."""
    rows = retrieved([0.73, 0.56, 0.72, 0.76, 0.52])
    rows.append(row("memory", 0.462, 4.5, via="T1", cosine=0.512))
    rows.append(row("pushed", 0.442, 5.0, cosine=0.481))
    assert shown(rows, 6) == ["p0", "p1", "p2", "p3", "p4", "pushed"]
    rows[5] = row("memory", 0.462, -1.0, via="T1", named=True)     # the question names it by its arXiv id: it stays
    assert "memory" in shown(rows, 6)


@pytest.mark.unit
def test_a_thought_row_with_stronger_evidence_keeps_its_place():
    """The multi-hop RAG turn's shape: the memory paper's best sentence scores 0.507 against the pushed-out row's
    0.417, and it was the relevant one."""
    rows = retrieved([0.56, 0.58])
    rows.append(row("memory", 0.507, 1.5, via="T1"))
    rows += [row(f"q{n}", s, 2.0 + n) for n, s in enumerate([0.56, 0.38, 0.56, 0.417])]
    assert shown(rows, 6) == ["p0", "p1", "memory", "q0", "q1", "q2"]
    rows[2] = row("memory", 0.417 + MARGIN - 0.01, 1.5, via="T1")   # ahead, but by less than the margin: a tie
    assert "memory" not in shown(rows, 6)


@pytest.mark.unit
def test_the_row_given_back_is_one_papers_only_shows_and_the_weakest_thought_row_goes_first():
    """Two memory rows within a budget of 4: the papers-only table shows p0..p3, so p2 and p3 are the rows they push
    out; p4 (beyond papers-only's budget, however strong) is never brought in. The weaker memory row meets the
    stronger of p2, p3 and gives its place to p3; the stronger memory row, which p3 would beat, beats p2 by more than
    the margin and stays."""
    rows = [row("p0", 0.7, 0), row("m-strong", 0.7, 0.5, via="T1"), row("m-weak", 0.45, 0.6, via="T2"),
            row("p1", 0.6, 1), row("p2", 0.5, 2), row("p3", 0.8, 3), row("p4", 0.9, 4)]
    assert shown(rows, 4) == ["p0", "m-strong", "p1", "p3"]


@pytest.fixture
def chat(library200, monkeypatch):
    clean_env(monkeypatch)
    monkeypatch.setattr(chat_thoughts, "UNVOTED_FLOOR", 0.0)
    chat = Chat(library200)
    for live in chat.memory.thoughts.list_live(limit=1000):
        chat.memory.delete(live.id)
    yield chat
    chat.wait_for_all(timeout=120)


def test_a_turn_weighs_memory_rows_against_the_papers_only_rows_they_would_push_out(chat, monkeypatch):
    """Memory holding the question's nearest papers beyond the pool. The thought side's candidates used to stop at
    the table's 6 rows, so the row a memory paper pushed out was not among them and no rule could give its place
    back; now they hold every papers-only row, in the same order, and each memory row shown beats the rows it
    pushed out by the margin."""
    question = "Which methods make large language models reason better with reinforcement learning?"
    first = chat.prepare(question, "dana")
    for _ in chat.stream(first):
        pass
    remember_papers_beyond_the_pool(chat, first.id, question, "dana")
    turn = chat.prepare(question, "dana")
    sides = {a.kind: a.sources for a in turn.answers}
    assert any(s.kind == "thought" for s in sides.get("thoughts", [])), "no thought reached the turn"
    calls = []
    real = answers.no_displacing

    def spy(rows, budget, **how):
        calls.append((rows, budget))
        return real(rows, budget, **how)
    monkeypatch.setattr(answers, "no_displacing", spy)
    answers.answer_tables(chat.services, question, [sides["raw"], sides["thoughts"]], turn.ranking)
    (papers, budget), (candidates, _) = calls
    assert not any(r.source.via for r in papers)
    assert any(r.source.via for r in candidates[:budget]), "no memory row reached the budget: the test shows nothing"
    reference = [r for r in candidates if not r.source.via][:budget]
    assert [r.source.paper_id for r in reference] == [r.source.paper_id for r in papers[:budget]]
    chosen = [candidates[n] for n in real(candidates, budget)]
    pushed = [r for r in reference if r not in chosen]
    kept_rows = [r for r in chosen if r.source.via]
    if not kept_rows:        # every memory row gave its place back: the table is the papers-only one (on this library)
        assert [r.source.paper_id for r in chosen] == [r.source.paper_id for r in reference]
    for kept in kept_rows:   # (a memory row keeping its place over real rows: the unit tests above)
        assert all(kept.score >= r.score + MARGIN for r in pushed), (kept.source.paper_id, kept.score,
                                                                     [(r.source.paper_id, r.score) for r in pushed])
