"""A follow-up that filters the previous answer (issue #59 item 8), unit tier: which questions are one, the property
they ask about, and whether a sentence states it; hostile input read in linear time."""

from __future__ import annotations

import time

import pytest

from copilot.methods.filters import filter_of, states


@pytest.mark.parametrize(("question", "phrase", "negated"), [
    ("And which of them need no fine-tuning?", "need no fine-tuning", True),
    ("Which of these use reinforcement learning?", "use reinforcement learning", False),
    ("which of those papers evaluate on MMLU", "evaluate on MMLU", False),
    ("Do any of them release their code?", "release their code", False),
    ("How many of those are training-free?", "are training-free", True),
    ("Of these, which use LoRA?", "use LoRA", False),
    ("So which ones work without labels?", "work without labels", True),
])
def test_a_filtering_follow_up_and_its_property(question, phrase, negated):
    found = filter_of(question)
    assert found is not None and found.phrase == phrase and found.negated is negated


@pytest.mark.parametrize("question", [
    "Which papers use reinforcement learning for retrieval?",       # a new question over the library
    "Which of them?", "What is it?", "Which methods reduce object hallucination?",
    "Which of the two decoding methods is faster?", "",
])
def test_other_questions_are_not_filters(question):
    assert filter_of(question) is None


@pytest.mark.parametrize(("sentence", "stated"), [
    ("Our method does not require additional LVLM training.", True),
    ("It needs no fine-tuning of the base model.", True),
    ("A training-free approach that works at inference time.", True),
    ("We adapt the model without any additional fine-tuning.", True),
    ("We fine-tune LLaVA on the curated preference data.", False),   # mentions it, does not state it
    ("Experiments on POPE and CHAIR show large gains.", False),
])
def test_a_sentence_states_a_negated_property_only_with_its_negation(sentence, stated):
    assert states(filter_of("And which of them need no fine-tuning?"), sentence) is stated


def test_a_positive_property_needs_each_of_its_words():
    wanted = filter_of("Which of these use reinforcement learning?")
    assert states(wanted, "We train the policy with reinforcement learning from human feedback.")
    assert not states(wanted, "We use supervised learning only.")
    assert states(wanted, "Unlike RLHF, the method needs no reward model.")        # the words' initials
    assert not states(wanted, "We run a reward model (rl-free) on learned features.")


def test_hostile_questions_and_sentences_are_read_in_linear_time():
    hostile = ["which of them " + "a-" * 200_000 + "b", "and " * 100_000, "-" * 300_000, "x'" * 150_000]
    started = time.perf_counter()
    for text in hostile:
        found = filter_of(text)
        states(filter_of("which of them use x"), text)
        assert found is None or len(found.phrase) <= 400
    assert time.perf_counter() - started < 1.0
