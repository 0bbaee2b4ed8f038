"""Follow-up detection measured on 40 questions written for issue #38 (tests/data/followup-questions.jsonl): half
real follow-ups of the previous question, half new questions that merely contain words a follow-up might use
("and what", "why", "it", "that", "the same", "elaborate" …). A new question taken as a follow-up is answered as
one (the issue: "What acceptance rates and speedups …" answered as a follow-up to a question on hallucination), so
precision must stay high; a missed follow-up is only retrieved for as it is written."""

from __future__ import annotations

import json
import re

import pytest

from copilot.methods.followup import PreviousTurn, standalone_question
from tests.helpers import ROOT

pytestmark = pytest.mark.unit

QUESTIONS = ROOT / "tests" / "data" / "followup-questions.jsonl"
# issue #49: 72 standalone questions that hold pronouns and 34 real follow-ups, written before the rule was measured
# on them; alternate rows form a "tune" half (the rule was changed looking at it) and a "held" half (only reported)
PRONOUN_QUESTIONS = ROOT / "tests" / "data" / "followup-pronouns.jsonl"
ANSWER = "Source [1] shows one thing.\nSource [2] shows another.\nSource [3] a third.\n"
TITLES = ["A first paper", "A second paper", "A third paper"]


def _rows(path=QUESTIONS, half: str | None = None) -> list[dict]:
    with path.open(encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    return [row for row in rows if half in (None, row.get("half"))]


def measure(rows: list[dict] | None = None) -> dict:
    """Precision and recall of `standalone_question(...).rewritten` as the follow-up decision."""
    rows = _rows() if rows is None else rows
    tp = fp = fn = 0
    wrong = []
    for row in rows:
        said = standalone_question(row["question"], PreviousTurn(row["previous"], ANSWER, TITLES)).rewritten
        tp += said and row["follow_up"]
        fp += said and not row["follow_up"]
        fn += row["follow_up"] and not said
        if said != row["follow_up"]:
            wrong.append(row["question"])
    return {"questions": len(rows), "precision": tp / max(tp + fp, 1),
            "recall": tp / max(tp + fn, 1), "wrong": wrong}


def test_the_question_set_is_half_follow_ups():
    rows = _rows()
    assert len(rows) == 40 and sum(row["follow_up"] for row in rows) == 20


def test_follow_up_detection_is_precise():
    result = measure()
    print(json.dumps(result, indent=1))
    assert result["precision"] >= 0.95, result
    assert result["recall"] >= 0.8, result


def test_and_what_inside_a_question_is_not_a_cue():
    previous = PreviousTurn("How do language models hallucinate?", ANSWER, TITLES)
    question = "What acceptance rates and speedups does speculative decoding reach and what limits them?"
    assert not standalone_question(question, previous).rewritten
    assert standalone_question("And what limits them?", previous).rewritten


def test_the_pronoun_set_is_standalone_questions_with_pronouns_and_real_follow_ups():
    rows = _rows(PRONOUN_QUESTIONS)
    standalone = [row for row in rows if not row["follow_up"]]
    assert len(standalone) >= 60 and len(rows) - len(standalone) >= 30
    pronoun = re.compile(r"\b(?:they|them|their|it|its|this|these|those|that)\b", re.I)
    assert all(pronoun.search(row["question"]) for row in standalone)
    assert {row["half"] for row in rows} == {"tune", "held"}


@pytest.mark.parametrize("half", ["tune", "held"])
def test_a_pronoun_inside_a_new_question_does_not_make_it_a_follow_up(half):
    """Measured before the change (the rule of issue #38): tune precision 0.692 recall 0.529, held 0.462 / 0.353."""
    result = measure(_rows(PRONOUN_QUESTIONS, half))
    print(json.dumps(result, indent=1))
    assert result["precision"] >= 0.95, result
    assert result["recall"] >= 0.75, result


@pytest.mark.parametrize("question", [
    "Which papers study LLM-as-a-judge bias, and what biases did they find?",
    "What are vision-language models bad at, and why do they fail?",
    "Do retrieval-augmented models actually use the documents they retrieve?",
    "Do LLM judges prefer their own outputs?",
    "RAG or fine-tuning: which of these is cheaper?",
])
def test_the_issue_49_questions_are_read_on_their_own(question):
    previous = PreviousTurn("How does speculative decoding speed up inference?", ANSWER, TITLES)
    assert not standalone_question(question, previous).rewritten


@pytest.mark.parametrize("question", [
    "What datasets did they use?", "Who found it first?", "Do the features they find transfer between models?",
    "Which one is cheapest to run?", "Is 8-bit safe then?", "What are the limits of their method?",
    "Does this hold for small models too?", "What's the success rate on miniF2F in these papers?",
])
def test_a_reference_with_nothing_to_refer_to_in_the_question_is_a_follow_up(question):
    previous = PreviousTurn("How does speculative decoding speed up inference?", ANSWER, TITLES)
    assert standalone_question(question, previous).rewritten
