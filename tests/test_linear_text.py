"""Nothing a user or a paper writes stalls the server (issue #47 item 5): the question's textbook check and the
sentence splitter read hostile text in time linear in its length. Each case took seconds to hours before (25 s for
the 900-character word; 14 s for 3,300 initials); the bound here is far above what a linear pass needs on any
machine, so the test guards the algorithm, not the machine's speed (`bench --parts hostile` measures the times)."""

from __future__ import annotations

import time

import pytest

from copilot.methods import evidence, quotes

BOUND_S = 2.0


def took(call, *args) -> float:
    started = time.perf_counter()
    call(*args)
    return time.perf_counter() - started


@pytest.mark.parametrize("question", [
    "What is " + "x" * 900 + " in 2503.14421?",
    "What is " + "x" * 3990 + "?",
    "What does " + "ab-" * 1300 + " stand for?",
    "define " + "a " * 2000,
])
def test_the_textbook_check_is_linear_in_the_question(question):
    assert took(evidence.is_textbook, question) < BOUND_S
    assert not evidence.is_textbook(question)


def test_the_textbook_check_still_tells_definition_questions():
    for question in ("What is a transformer?", "Define attention", "What does RLHF stand for?",
                     "What is speculative decoding ?", "explain the KV cache."):
        assert evidence.is_textbook(question), question
    for question in ("What are the limits of RAG for multi-hop QA?", "Which methods compress the KV cache?"):
        assert not evidence.is_textbook(question), question


@pytest.mark.parametrize("text", [
    "A. " * 3300,                                 # initials: the head before each was searched again
    "e.g. " * 2000 + "We end here.",
    "Fig. 3 shows it. " * 600,
    "x" * 200_000 + ". Then more.",
    ("word " * 50 + "et al. ") * 200,
])
def test_the_sentence_splitter_is_linear_in_the_text(text):
    assert took(quotes.split_sentences, text) < BOUND_S
    assert took(evidence.spans_of, text) < BOUND_S


def test_sentences_are_slices_of_the_text_and_keep_their_closing_marks():
    text = ('We call it FastDec (a "fast decoder.") Experiments show it works, e.g. on MMLU. '
            "Smith et al. agree.\nA second line follows.")
    bounds = quotes.sentence_bounds(text)
    assert [text[a:b] for a, b in bounds] == ['We call it FastDec (a "fast decoder.")',
                                              "Experiments show it works, e.g. on MMLU.",
                                              "Smith et al. agree.", "A second line follows."]
    for a, b in bounds:
        pieces = quotes.bounded_bounds(text, a, b, 3)       # cut at clause marks, which no piece ends on (#49)
        assert [w.rstrip(",;:") for w in " ".join(text[x:y] for x, y in pieces).split()] == [
            w.rstrip(",;:") for w in text[a:b].split()]


@pytest.mark.parametrize("case", ["arxiv id in a long word", "a result cue on a run of digits", "ids on a run of tabs"])
def test_the_patterns_that_read_questions_and_abstracts_are_linear(case):
    from copilot.records import ARXIV_ID

    call, text = {"arxiv id in a long word": (ARXIV_ID.findall, "x" * 10_000),
                  "a result cue on a run of digits": (lambda t: evidence.cue_role(t, False), "1" * 10_000),
                  "ids on a run of tabs": (quotes.drop_ids, "\t" * 10_000 + "a")}[case]
    assert took(call, text) < BOUND_S


def test_ids_and_results_are_still_found():
    from copilot.records import ARXIV_ID

    found = [m.group("base") for m in ARXIV_ID.finditer("see hep-th/9901001, math.GT/0309136 and 2401.01234v2")]
    assert found == ["hep-th/9901001", "math.GT/0309136", "2401.01234"]
    assert quotes.strip_ids("Dense beats sparse [2] [2503.16965v2] (arXiv:2501.00001).") == "Dense beats sparse."
    assert evidence.cue_role("It runs 2.5x faster than the baseline.", False) == "result"


def test_related_embeds_a_bounded_number_of_an_abstracts_sentences():
    from copilot.methods.prism import MAX_ASPECT_SENTENCES, abstract_sentences

    assert len(abstract_sentences("A. " * 3300)) == MAX_ASPECT_SENTENCES
    assert abstract_sentences("We propose X. It works well.") == ["We propose X.", "It works well."]
