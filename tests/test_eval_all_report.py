"""`eval all`'s report: effects with paired intervals, the tables, the plot, finished parts saved and read back."""

from __future__ import annotations

import json

import pytest

from copilot.cli.eval_all import FULL, QUICK, judge_refusal, limited
from copilot.errors import UserError
from copilot.eval import all_report
from copilot.eval.all_report import PartResult, paired_effect, unpaired_effect
from tests.conftest import make_settings

pytestmark = pytest.mark.unit

META = {"model": "SmolLM2-135M-Instruct.Q4_1", "cpu": "AMD EPYC", "cores": 2, "wall_seconds": 61.0, "quick": True,
        "limit": None, "finished": "2026-11-25 22:00 UTC"}


def parts() -> list[PartResult]:
    ran = PartResult("slim", "ran", seconds=12.0, load="1.00", size="6 questions", judge="not judged: tiny",
                     effects=[paired_effect("slim", "SlimPLM", "always-retrieve", "answer token-F1",
                                            [0.5, 0.4, 0.6], [0.3, 0.4, 0.2]),
                              unpaired_effect("slim", "SlimPLM", "always-retrieve", "judged accuracy", None, None, 3)])
    failed = PartResult("gor", "failed", reason="TooFewNodes: 12 nodes", seconds=3.0)
    return [ran, failed, PartResult("thoughts", "skipped", reason="--skip")]


def test_a_paired_effect_has_the_difference_its_interval_and_n():
    effect = paired_effect("p", "m", "b", "f1", [0.5, 0.4, 0.6], [0.3, 0.4, 0.2])
    assert effect.n == 3 and effect.difference == pytest.approx(0.2)
    assert effect.ci_low <= effect.difference <= effect.ci_high
    assert effect.method_value == pytest.approx(0.5) and effect.baseline_value == pytest.approx(0.3)


def test_the_markdown_says_every_part_and_why_one_did_not_run():
    text = all_report.markdown(parts(), META)
    assert "| slim | SlimPLM vs always-retrieve | answer token-F1 | 0.500 | 0.300 | 0.200 | [" in text
    assert "| gor | failed: TooFewNodes: 12 nodes |" in text and "| thoughts | skipped: --skip |" in text
    assert "AMD EPYC (2 cores)" in text and "--quick: small n" in text and "not judged: tiny" in text
    assert "no paired data" in text


def test_report_files_and_a_saved_part_read_back(tmp_path):
    report, paths = all_report.write_report(tmp_path, parts(), META)
    assert set(paths) == {"json", "md", "svg"} and paths["svg"].read_text().startswith("<svg")
    assert json.loads(paths["json"].read_text())["parts"][0]["effects"][0]["n"] == 3
    all_report.save_part(tmp_path, parts()[0])
    assert all_report.saved_part(tmp_path, "slim") == parts()[0]
    assert all_report.saved_part(tmp_path, "gor") is None


def test_quick_is_smaller_than_full_and_limit_caps_every_part():
    assert QUICK.csfcube_queries < 10 and QUICK.thoughts_warmup < FULL.thoughts_warmup
    small = limited(QUICK, 2)
    assert (small.csfcube_queries, small.slim_questions, small.related_targets, small.thoughts_warmup) == (2, 2, 1, 2)
    with pytest.raises(UserError):
        limited(QUICK, 0)


def test_the_judge_is_refused_for_the_135m_model_locally_and_behind_an_endpoint(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert "135M" in judge_refusal(make_settings(tmp_path))
    endpoint = make_settings(tmp_path, llm="openai", openai_api_key="k", llm_model="SmolLM2-135M-Instruct")
    assert "135M" in judge_refusal(endpoint)
    assert judge_refusal(make_settings(tmp_path, llm="openai", openai_api_key="k", llm_model="qwen2.5-7b")) is None


def test_a_null_measurement_is_not_printed_as_a_zero_effect():
    """Issue #41 item 9: with no thought in any query's top 8 the two lists are the same, and `eval all` printed a
    difference of +0.000 in [+0.000, +0.000]: a measurement that could not show anything, read as "no effect"."""
    from copilot.cli.eval_all import memory_effects
    from copilot.eval.all_report import PartResult, markdown

    same = [{"query": str(n), "precision": 0.2, "recall": 0.1, "thoughts": 0} for n in range(6)]
    effects = memory_effects({"papers": same, "papers+thoughts": same}, 40)
    assert all(e.difference is None and e.ci_low is None and "not measured" in e.note for e in effects)
    meta = {"model": "m", "cpu": "c", "cores": 2, "wall_seconds": 1.0, "quick": True, "limit": None, "finished": "f"}
    table = markdown([PartResult("thoughts", "ran", effects=effects)], meta)
    assert "+0.000" not in table and "not measured: no thought entered any query's top 8" in table
    entered = [dict(r, thoughts=1 if r["query"] == "0" else 0, recall=0.3 if r["query"] == "0" else 0.1) for r in same]
    [_, recall] = memory_effects({"papers": same, "papers+thoughts": entered}, 40)
    assert recall.difference is not None and recall.difference > 0
