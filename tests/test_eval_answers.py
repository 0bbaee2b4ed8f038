"""`eval answers` end to end on a small real library: the product's retrieval and answer, the rows read back, the
figures and report files (issue #39, item 6)."""

from __future__ import annotations

import json

from tests.helpers import PAPERS_JSONL, clean_env, run_cli_in_process

SEGMENTATION = "2503.12595 2503.12780 2503.12781 2503.12853 2503.13012".split()


def test_eval_answers_on_the_first_papers(tmp_path, monkeypatch, capsys):
    clean_env(monkeypatch)
    monkeypatch.setenv("COPILOT_DATA_DIR", str(tmp_path / "data"))
    survey = tmp_path / "survey.jsonl"
    survey.write_text("\n".join(json.dumps(row) for row in [
        {"question": "Which methods segment images, videos, point clouds or medical scans?", "relevant": SEGMENTATION},
        {"question": "How do I knead sourdough bread by hand?", "relevant": ["2503.12964"]}]) + "\n", encoding="utf-8")
    papers = tmp_path / "papers.jsonl"
    papers.write_text(json.dumps({"question": "What does the paper \"Deblur Gaussian Splatting SLAM\" propose?",
                                  "answer": "We present Deblur-SLAM, a robust RGB SLAM pipeline designed to recover "
                                            "sharp reconstructions from motion-blurred inputs.",
                                  "gold": ["2503.12572"]}) + "\n" + json.dumps(
        {"question": "What is a hash table?", "answer": "A map.", "gold": []}) + "\n", encoding="utf-8")
    code, report, err = run_cli_in_process(capsys, "eval", "answers", "--questions", str(survey), "--paper-questions",
                                           str(papers), "--corpus", str(PAPERS_JSONL), "--papers", "40", "--json")
    assert code == 0, err
    s = report["summary"]
    assert s["survey_questions"] == 2 and s["paper_questions"] == 1       # the general question is not asked
    first = report["survey"][0]
    assert first["rows"] >= 1 and first["precision"] is not None and 0 <= first["recall"] <= 1
    assert first["relevant_quoted"] >= 1                                  # five segmentation papers in 40
    assert all(q["paper"] for q in first["quoted"]) and all(q["quote"] in first["answer"] for q in first["quoted"])
    assert report["papers"][0]["gold_retrieved"] and isinstance(report["papers"][0]["key_quoted"], bool)
    assert report["meta"]["papers_in_library"] == 40 and report["meta"]["model_profile"]
    written = list((tmp_path / "data" / "eval").glob("answers-survey-n2-p1.*"))
    assert sorted(p.suffix for p in written) == [".json", ".md"]


def test_eval_answers_refuses_a_bad_question_file(tmp_path, monkeypatch, capsys):
    clean_env(monkeypatch)
    monkeypatch.setenv("COPILOT_DATA_DIR", str(tmp_path / "data"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "No relevant list"}\n', encoding="utf-8")
    code, _, err = run_cli_in_process(capsys, "eval", "answers", "--questions", str(bad), "--corpus",
                                      str(PAPERS_JSONL))
    assert code == 2 and "needs {\"question\": ..., \"relevant\": [...]}" in err
