"""What `eval answers` reads from an answer, and the role classifier's pure parts (issue #39, items 3 and 6)."""

from __future__ import annotations

import numpy as np
import pytest

from copilot.eval.answers_eval import Row, answer_rows, quote_positions
from copilot.eval.roles_eval import Abstracts, scores
from copilot.methods import quotes, sentence_roles
from copilot.methods.sentence_roles import CUES, HAND_FEATURES, ROLES
from copilot.records import Evidence

pytestmark = pytest.mark.unit

ITEMS = [Evidence(id=pid, kind="paper", title=f"Paper {pid}", text="", score=0.5)
         for pid in ("2503.17922", "2503.18893", "2504.00970")]


def test_rows_of_the_three_quote_answer():
    selection = quotes.Selection([quotes.Quote(2, "SentenceKV caches at the sentence level.", 0.7),
                                  quotes.Quote(0, "WindowKV selects windows per task.", 0.6)], 0.7)
    text = "".join(quotes.render(selection, [i.title for i in ITEMS]))
    assert answer_rows(text, ITEMS) == [Row("2504.00970", "SentenceKV caches at the sentence level."),
                                        Row("2503.17922", "WindowKV selects windows per task.")]


def test_rows_of_a_table_with_links_and_two_quotes_in_a_cell():
    text = ("| paper | what it does or finds |\n|---|---|\n"
            "| [xKV](https://arxiv.org/abs/2503.18893) · 2025 "
            "| \u201cWe propose xKV.\u201d \u201cIt saves 6.8x memory.\u201d |\n"
            "| [3] SentenceKV | \u201cSentence-level caching.\u201d |")
    assert answer_rows(text, ITEMS) == [Row("2503.18893", "We propose xKV."),
                                        Row("2503.18893", "It saves 6.8x memory."),
                                        Row("2504.00970", "Sentence-level caching.")]


def test_quotes_under_a_heading_belong_to_the_heading_paper():
    text = "**[2] xKV: Cross-Layer SVD** (arXiv:2503.18893)\n\n\u201cWe propose xKV.\u201d\n\n[1]\n\u201cWindows.\u201d"
    assert [r.paper for r in answer_rows(text, ITEMS)] == ["2503.18893", "2503.17922"]


def test_a_group_heading_quotes_no_source():
    text = ("### \u201c2-bit quantization\u201d\n[1] \u201cWindows.\u201d\n| **\u201ceviction\u201d** | |\n"
            "\u201cNobody's.\u201d\n| [2] xKV | \u201cSVD.\u201d |")
    assert answer_rows(text, ITEMS) == [Row("2503.17922", "Windows."), Row(None, "Nobody's."),
                                        Row("2503.18893", "SVD.")]


def test_the_no_answer_line_has_no_rows_and_an_unnamed_quote_has_no_paper():
    line = quotes.nearest_line([i.title for i in ITEMS], [0.3, 0.2, 0.1])
    assert answer_rows(line, ITEMS) == []
    assert answer_rows("\u201cA quote of nobody.\u201d [9]", ITEMS) == [Row(None, "A quote of nobody.")]


def test_quote_positions_find_the_sentence_and_the_bare_title():
    abstracts = {"a": ("Cocktail: Mixed Precision",
                       "LLMs have become large. We propose Cocktail. It saves 52% memory.")}
    placed = quote_positions([Row("a", "Cocktail: mixed precision"), Row("a", "It saves 52% memory."),
                              Row("a", "We propose Cocktail."), Row("b", "Unknown paper.")], abstracts)
    assert placed == [(True, 0.0), (False, 1.0), (False, 0.5), (False, 0.5)]


def test_hand_features_see_cues_digits_and_position():
    rows = sentence_roles.hand_features(["Deep learning has become ubiquitous in recent years.",
                                         "Results show a 12% gain over strong baselines."], [0.0, 1.0])
    assert rows.shape == (2, len(HAND_FEATURES))
    named = [dict(zip(HAND_FEATURES, row)) for row in rows]
    assert named[0]["has_become"] == 1 and named[0]["first"] == 1 and named[0]["digits"] == 0
    assert named[1]["results_show"] == 1 and named[1]["percent"] == 1 and named[1]["last"] == 1
    assert len({name for name, _ in CUES}) == len(CUES)


def test_a_model_with_the_wrong_shape_of_vectors_is_refused():
    model = sentence_roles.RoleModel(np.zeros((8 + len(HAND_FEATURES), 5), np.float32), np.zeros(5, np.float32),
                                     np.zeros(len(HAND_FEATURES), np.float32), np.ones(len(HAND_FEATURES), np.float32))
    assert sentence_roles.classify(["One.", "Two."], np.zeros((2, 8), np.float32), model=model) == ["background"] * 2
    with pytest.raises(ValueError):
        sentence_roles.classify(["One."], np.zeros((1, 9), np.float32), model=model)


def test_scores_accuracy_macro_f1_and_confusion():
    gold = ["background", "method", "result", "result"]
    said = ["background", "result", "result", "result"]
    report = scores(gold, said)
    assert report["accuracy"] == 0.75
    assert report["per_role"]["result"]["precision"] == round(2 / 3, 4) and report["per_role"]["method"]["f1"] == 0
    assert report["macro_f1"] == round((1 + 0 + 0.8) / 3, 4)     # roles neither in gold nor said are left out
    assert report["confusion"]["rows_gold"][ROLES.index("method")][ROLES.index("result")] == 1


def test_abstracts_keep_positions_and_drop_unknown_labels():
    data = Abstracts()
    data.add(["A.", "B.", "C."], ["background", "nonsense", "result"])
    assert data.sentences == ["A.", "C."] and data.positions == [0.0, 1.0] and data.abstracts == 1


def test_the_answers_dev_set_is_judged_over_the_library_the_eval_builds():
    import json

    from tests.helpers import PAPERS_JSONL, ROOT

    rows = [json.loads(line) for line in (ROOT / "tests" / "data" / "answers-dev.jsonl").read_text().splitlines()]
    gold = {pid for line in (ROOT / "tests" / "data" / "slim-dev.jsonl").read_text().splitlines()
            for pid in json.loads(line)["gold"]}
    with PAPERS_JSONL.open(encoding="utf-8") as lines:
        first = {json.loads(line)["id"] for _, line in zip(range(2000), lines)}
    assert len(rows) >= 25 and len({r["question"] for r in rows}) == len(rows)
    for row in rows:
        assert row["relevant"] and len(set(row["relevant"])) == len(row["relevant"])
        assert set(row["relevant"]) <= first | gold, row["question"]
