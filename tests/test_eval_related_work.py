"""eval related-work: its metrics by hand, and the real rwsg-prv records read as targets (no model, no store)."""

from __future__ import annotations

import pytest

from copilot.eval.metrics import rouge_l
from copilot.eval.related_work_eval import Report, citation_scores, load_targets, markdown, summarize
from tests.helpers import DATA

RELATED_WORK = DATA / "related-work"


@pytest.mark.parametrize("candidate, reference, expected", [
    ("the cat sat on the mat", "the cat sat on the mat", 1.0),
    ("", "anything", 0.0),
    ("a b c d", "a x c y", 0.5),                  # LCS "a c": precision 2/4, recall 2/4
    ("police killed the gunman", "the gunman police killed", 0.5),   # LCS 2 of 4 either way
    ("A B", "a b c d e f", 2 * (1.0 * (2 / 6)) / (1.0 + 2 / 6)),
])
def test_rouge_l_by_hand(candidate, reference, expected):
    assert rouge_l(candidate, reference) == pytest.approx(expected)


def test_citation_scores():
    assert citation_scores(["a", "b", "x"], ["a", "b", "c", "d"]) == (0.5, pytest.approx(2 / 3))
    assert citation_scores([], ["a"]) == (0.0, None)          # nothing cited: precision is undefined, not 0


def test_the_ten_real_records_are_read_and_the_placeholder_left_out():
    targets = load_targets(RELATED_WORK)
    assert [t.name for t in targets] == ["10", "22", "25", "28", "33", "36", "37", "77", "80", "95"]
    first = targets[0]
    assert first.title == "Subset Retrieval Nearest Neighbor Machine Translation"
    assert len(first.section) > 1000 and first.cited_total == 15
    assert 4 <= len(first.cited) < first.cited_total and all(p.abstract for p in first.cited)
    assert first.cited[0].id.startswith("rw10-") and first.cited[0].published.year >= 1984
    ids = [p.id for t in targets for p in t.cited]
    assert len(ids) == len(set(ids))


def test_summary_and_table():
    rows = [{"citation_recall": 0.5, "citation_precision": None, "rouge_l": 0.1, "words": 80, "seconds": 3.0,
             "llm_calls": 4, "cited": [], "error": None},
            {"citation_recall": 0.0, "citation_precision": 0.5, "rouge_l": 0.2, "words": 100, "seconds": 5.0,
             "llm_calls": 6, "cited": ["a"], "error": None}]
    summary = summarize(rows)
    assert summary["citation_precision"] == 0.5 and summary["words"] == 90 and summary["cited_nothing"] == 1
    table = markdown(Report({"rat": summary}, {}, {"targets": 2}))
    assert "| rat | 0.25 | 0.50 | 0.150 | 90 | 4.0 | 5.0 | 1 of 2 |" in table


def test_the_judge_sees_the_two_drafts_blind_and_its_verdict_is_read_from_rats_view(tmp_path):
    from copilot.eval.related_work_eval import Target, judge_drafts
    from copilot.eval.thoughts_eval import blind_order
    from copilot.services import Services
    from tests.conftest import make_settings
    from tests.doubles import ScriptedBackend

    judge = ScriptedBackend(["A", "Verdict: A", "A"])
    services = Services(make_settings(tmp_path / "data"), llm_backend=judge)
    targets = [Target(str(n), f"Paper {n}", "", "", [], 0) for n in range(3)]

    def drafts(error=None):
        return {"rat": {"text": "The revised draft cites [1].", "cited": ["x"], "error": error},
                "plain": {"text": "The single-call draft cites [1].", "cited": ["y"], "error": None}}
    per_target = {"0": drafts(), "1": drafts(), "2": drafts(error="the model failed")}
    judged = judge_drafts(services, targets, per_target, seed=13, progress=lambda _: None)
    rat_first = blind_order(13, 3)
    expected = ["win" if first else "loss" for first in rat_first[:2]]
    assert [row["outcome"] for row in judged["per_query"]] == [*expected, "failed"]
    assert len(judge.calls) == 2 and judged["failed"] == 1                 # a failed draft is never judged
    assert judged["wins"] == expected.count("win") and judged["losses"] == expected.count("loss")
    for call, first in zip(judge.calls, rat_first):
        prompt = "\n".join(m["content"] for m in call.messages)
        assert "Paper" in prompt and ("revised draft" in prompt.split("Answer B")[0]) == first
        assert "RAT" not in prompt and "retrieval" not in prompt.lower()          # nothing names the methods
