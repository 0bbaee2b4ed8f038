"""`eval thoughts --judge`: the Wilson interval on known values, the blind order of the two answers, the verdict
parser, unparseable verdicts counted, and the refusal of the packaged 135M model as a judge. A scripted judge, no
model, no embedder."""

from __future__ import annotations

import pytest

from copilot.eval import thoughts_eval
from copilot.eval.thoughts_eval import blind_order, judge_pair, judge_summary, parse_verdict
from copilot.records import Evidence
from tests.conftest import make_settings
from tests.doubles import scripted_llm
from tests.helpers import clean_env, run_cli_in_process

SOURCES = {"papers": [Evidence(id="p1", kind="paper", title="", text="Parsers use treebanks.", score=0.8)],
           "papers+thoughts": [Evidence(id="T1", kind="thought", title="", text="Treebanks train parsers.",
                                        score=0.9)]}
ANSWERS = {"papers": "Source [1] shows that parsers use treebanks.",
           "papers+thoughts": "Source [1] shows that treebanks train parsers."}


def _rows(**counts: int) -> list[dict]:
    return [{"outcome": outcome} for outcome, n in counts.items() for _ in range(n)]


# --- the interval
@pytest.mark.parametrize("wins, losses, low, high", [
    (7, 3, 0.3968, 0.8922),         # the textbook 7 of 10
    (5, 5, 0.2366, 0.7634),
    (0, 10, 0.0, 0.2775),
    (10, 0, 0.7225, 1.0),
])
def test_win_rate_over_decisive_verdicts_with_a_wilson_interval(wins, losses, low, high):
    summary = judge_summary(_rows(win=wins, loss=losses, tie=2, unparseable=1, same_items=3, failed=1),
                            {"backend": "openai", "model": "m"}, seed=1)
    assert summary["win_rate"] == pytest.approx(wins / (wins + losses))
    assert (summary["ci_low"], summary["ci_high"]) == pytest.approx((low, high), abs=5e-5)
    assert (summary["wins"], summary["losses"], summary["ties"], summary["unparseable"]) == (wins, losses, 2, 1)
    assert (summary["judged"], summary["same_items"], summary["failed"]) == (wins + losses + 3, 3, 1)
    assert summary["queries"] == summary["judged"] + summary["same_items"] + summary["failed"]


def test_no_decisive_verdict_has_no_rate():
    summary = judge_summary(_rows(tie=2, unparseable=1), {"backend": "openai", "model": "m"}, seed=1)
    assert (summary["win_rate"], summary["ci_low"], summary["ci_high"]) == (None, None, None)
    assert "| 3 | 3 | 0 | 0 | 2 | 1 | 0 | 0 | — | — |" in "\n".join(thoughts_eval.judge_markdown(summary))


# --- blinding
def test_the_prompt_depends_only_on_the_order_shown():
    llm, backend = scripted_llm(None, ["A", "A"])
    judge_pair(llm, "What is known about parsing?", ANSWERS, SOURCES, thoughts_first=True)
    swapped_answers = {"papers": ANSWERS["papers+thoughts"], "papers+thoughts": ANSWERS["papers"]}
    swapped_sources = {"papers": SOURCES["papers+thoughts"], "papers+thoughts": SOURCES["papers"]}
    judge_pair(llm, "What is known about parsing?", swapped_answers, swapped_sources, thoughts_first=False)
    first, second = (call.text for call in backend.calls)
    assert first == second                     # same words shown in the same places: nothing else tells the sides
    assert first.index(ANSWERS["papers+thoughts"]) < first.index(ANSWERS["papers"])
    for secret in ("thought", "t1", "p1", "papers only", "raw"):
        assert secret not in first.lower().replace("treebanks train", "")


def test_a_judge_that_always_says_a_wins_exactly_where_the_seed_put_thoughts_first():
    order = blind_order(13, 40)
    llm, _ = scripted_llm(None, ["A"] * 40)
    outcomes = [judge_pair(llm, "Q?", ANSWERS, SOURCES, first)["outcome"] for first in order]
    assert outcomes == ["win" if first else "loss" for first in order]
    assert 12 <= outcomes.count("win") <= 28 and outcomes.count("win") == sum(order)
    assert order == blind_order(13, 40) and order != blind_order(14, 40)


# --- reading the verdict
@pytest.mark.parametrize("output, verdict", [
    ("A", "A"), ("b", "B"), ("Tie.", "tie"), ("  **B**  ", "B"), ("Verdict: A", "A"), ("Answer B.", "B"),
    ("A\nAnswer A cites its source.", "A"), ("(A)", "A"),
    ("", None), ("Both", None), ("A or B", None), ("A because it is longer", None), ("I think B", None),
    ("C", None), ("0", None), ("Answer A and answer B are equal", None),
])
def test_parse_verdict(output, verdict):
    assert parse_verdict(output) == verdict


def test_unparseable_verdicts_are_counted_not_guessed():
    llm, _ = scripted_llm(None, ["Both answers are fine.", "B", "", "tie"])
    outcomes = [judge_pair(llm, "Q?", ANSWERS, SOURCES, thoughts_first=True) for _ in range(4)]
    assert [o["outcome"] for o in outcomes] == ["unparseable", "loss", "unparseable", "tie"]
    assert outcomes[0]["verdict"] is None and outcomes[0]["output"] == "Both answers are fine."
    summary = judge_summary(outcomes, {"backend": "openai", "model": "m"}, seed=1)
    assert (summary["unparseable"], summary["losses"], summary["ties"], summary["judged"]) == (2, 1, 1, 4)
    assert summary["verdicts_by_label"] == {"A": 0, "B": 1, "tie": 1}


def test_a_grammar_obeying_judge_is_held_to_one_verdict():
    llm, backend = scripted_llm(None, ["tie"])
    backend.obeys_grammar = True
    judge_pair(llm, "Q?", ANSWERS, SOURCES, thoughts_first=False)
    assert backend.calls[0].grammar == 'root ::= "A" | "B" | "tie"'
    assert backend.calls[0].max_tokens == thoughts_eval.JUDGE_MAX_TOKENS and backend.calls[0].temperature == 0.0


# --- who may judge
def test_the_packaged_local_model_is_refused_as_a_judge(tmp_path, monkeypatch):
    clean_env(monkeypatch)
    local = make_settings(tmp_path / "data")
    assert "135M" in thoughts_eval.judge_refusal(local) and "OPENAI_API_KEY" in thoughts_eval.judge_refusal(local)
    assert thoughts_eval.judge_refusal(local, allow_local=True) is None
    endpoint = make_settings(tmp_path / "data", llm="openai", openai_api_key="sk-x",
                             openai_base_url="http://127.0.0.1:9/v1")
    assert thoughts_eval.judge_refusal(endpoint) is None


def test_the_command_refuses_judge_without_an_endpoint_before_any_work(tmp_path, monkeypatch, capsys):
    clean_env(monkeypatch)
    monkeypatch.setenv("COPILOT_DATA_DIR", str(tmp_path / "data"))
    code, printed, err = run_cli_in_process(capsys, "eval", "thoughts", "--data", str(tmp_path / "none"), "--judge")
    assert code == 2 and printed is None
    assert err.startswith("error: --judge needs a model that can judge") and "OPENAI_API_KEY" in err
    assert not (tmp_path / "data" / "eval").exists()
