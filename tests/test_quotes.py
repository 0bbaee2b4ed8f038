"""Extractive answers (issue #29): splitting, id stripping, the quote format, and thoughts made of quotes.

Unit tier: the embedder is a bag-of-words stand-in here (`embed`), so the rules are exact; the selection on real
abstracts with the real embedder is in test_quotes_real.py."""

from __future__ import annotations

import re

import numpy as np
import pytest

from copilot.methods import quotes
from copilot.methods.quotes import (
    NO_SOURCE_ANSWERS,
    is_quoted_answer,
    parse_quotes,
    restates,
    select_quotes,
    split_sentences,
    strip_ids,
)
from copilot.methods.thought_retriever import check_answer, describes_itself, is_cannot_answer, quoted_thought
from copilot.records import Evidence

pytestmark = pytest.mark.unit

VOCABULARY: dict[str, int] = {}


def embed(texts):
    """Unit-normalised word-count vectors over a growing vocabulary (a deterministic stand-in for MiniLM)."""
    rows = []
    for text in texts:
        vector = np.zeros(512, dtype=np.float32)
        for word in re.findall(r"[a-z]{3,}", text.lower()):
            vector[VOCABULARY.setdefault(word, len(VOCABULARY) % 512)] += 1
        rows.append(vector / (np.linalg.norm(vector) or 1))
    return np.vstack(rows)


def test_sentences_split_at_ends_not_at_abbreviations():
    text = ("We study retrieval, e.g. dense and sparse models as in Smith et al. 2020. Results improve by 3.5 points. "
            "Code is released.")
    assert split_sentences(text) == ["We study retrieval, e.g. dense and sparse models as in Smith et al. 2020.",
                                     "Results improve by 3.5 points.", "Code is released."]


def test_text_without_punctuation_is_split_into_bounded_spans():
    words = [f"token{n}" for n in range(200)]
    spans = split_sentences(" ".join(words), max_words=45)
    assert all(len(span.split()) <= 45 for span in spans)
    assert " ".join(spans).split() == words            # nothing lost, nothing repeated, order kept
    clauses = split_sentences("alpha beta gamma, " * 30, max_words=20)
    assert all(len(c.split()) <= 20 for c in clauses) and all(c.endswith("gamma") for c in clauses[:-1])
    assert ", ".join(clauses) + "," == " ".join(("alpha beta gamma, " * 30).split())   # cut at commas, without them


def test_ids_and_labels_are_stripped_from_quotes():
    text = "Paper [2503.16965] introduces a benchmark [1, 2] (arXiv:2501.00001v2) as in T0a1b2c3d4e [T0a1b2c3d4e]."
    assert strip_ids(text) == "Paper introduces a benchmark as in."
    assert not re.search(r"\d{4}\.\d{4}|T0a1b|\[", strip_ids(text))


def test_a_title_the_question_names_only_restates_it():
    assert restates("Cross-Lingual Activation Steering for Multilingual Language Models",
                    "What does Cross-Lingual Activation Steering for Multilingual Language Models propose?")
    assert not restates("We propose CLAS, a training-free intervention that modulates neuron activations.",
                        "What does Cross-Lingual Activation Steering for Multilingual Language Models propose?")


TEXTS = ["Dense retrieval for question answering\nWe train dense retrievers for open-domain question answering. "
         "Dense retrievers beat sparse retrieval on five benchmarks.",
         "Protein folding with transformers\nWe predict protein structures from sequences with a transformer.",
         "Sparse retrieval revisited\nSparse retrieval with BM25 remains a strong baseline for question answering."]


def test_quotes_are_relevant_diverse_labelled_and_visibly_quoted():
    question = "How do dense retrievers compare with sparse retrieval for question answering?"
    selection = select_quotes(embed([question])[0], question, TEXTS, embed, floor=0.2)
    assert selection.quotes and all(q.source != 1 for q in selection.quotes)     # the protein paper is not quoted
    assert len({q.source for q in selection.quotes}) >= 2                          # more than one source
    answer = "".join(quotes.render(selection, ["a", "b", "c"]))
    assert is_quoted_answer(answer)
    for label, text in parse_quotes(answer):
        assert text in " ".join(TEXTS[int(label) - 1].split())                    # verbatim from the source it cites
    items = [Evidence(f"2501.0000{n}", "paper", "t", t[:60], 0.5) for n, t in enumerate(TEXTS)]
    assert check_answer(answer, items, quoted=True).text == answer     # the checks leave quotes alone


def test_a_title_is_not_quoted_beside_a_sentence_of_its_own_abstract():
    question = "How is speculative decoding adapted to classification tasks?"
    title = "A worker and judge framework for speculative decoding in classification"
    only = [f"{title}\nWe adapt speculative decoding to classification tasks with worker models. Speculative decoding "
            "for classification tasks uses a judge model."]
    selection = select_quotes(embed([question])[0], question, only, embed, floor=0.1)
    quoted = [q.text for q in selection.quotes]
    assert len(quoted) == 2 and title not in quoted
    alone = select_quotes(embed([question])[0], question, [f"{title}\n"], embed, floor=0.1)   # no abstract
    assert [q.text for q in alone.quotes] == [title]


def test_no_relevant_sentence_gives_the_one_no_answer_sentence():
    question = "What is the best recipe for banana bread?"
    selection = select_quotes(embed([question])[0], question, TEXTS, embed)
    assert not selection.quotes
    answer = "".join(quotes.render(selection, ["Dense retrieval", "Protein folding", "Sparse"], [0.3, 0.1, 0.2]))
    assert answer.startswith(NO_SOURCE_ANSWERS) and answer.count(".") == 1 and answer.endswith(".")
    assert answer.index("[1]") < answer.index("[3]") < answer.index("[2]")       # nearest first
    assert is_cannot_answer(answer)


SOURCES = [Evidence("2501.00001", "paper", "Dense retrieval", "", 0.6),
           Evidence("T0a1b2c3d4e", "thought", "", "", 0.5),
           Evidence("2501.00003", "paper", "Sparse retrieval", "", 0.4)]


def test_a_thought_is_the_relevant_quotes_with_their_sources():
    question = "How do dense retrievers compare with sparse retrieval?"
    answer = ("[2501.00001] \u201cDense retrievers beat sparse retrieval on five benchmarks.\u201d\n"
              "[2501.00003] \u201cWe predict protein structures from sequences with a transformer.\u201d")
    draft, lineage = quoted_thought(embed, question, answer, SOURCES, floor=0.2)
    assert draft.confidence == 1 and not draft.llm_called
    assert draft.text == "\u201cDense retrievers beat sparse retrieval on five benchmarks.\u201d"
    assert lineage == [("2501.00001", "paper")]                                    # the irrelevant quote went


def test_a_thought_of_irrelevant_quotes_is_refused():
    answer = "[1] \u201cWe predict protein structures from sequences with a transformer.\u201d"
    draft, lineage = quoted_thought(embed, "How do dense retrievers compare with sparse retrieval?", answer,
                                    SOURCES, floor=0.2)
    assert draft.confidence == 0 and "not relevant" in draft.reason and lineage == []


@pytest.mark.parametrize("text", ["The answer is not a real answer, but it does provide an explanation.",
                                  "This response provides an overview of retrieval.",
                                  "As an AI I cannot say which retriever is better."])
def test_text_that_describes_itself_is_refused(text):
    assert describes_itself(text)
    draft, _ = quoted_thought(embed, "Is the answer about retrieval?", f"[2] \u201c{text}\u201d", SOURCES, floor=-1)
    assert draft.confidence == 0


@pytest.mark.parametrize("text", ["Dense retrievers beat sparse retrieval on five benchmarks.",
                                  "This question remains open for low-resource languages."])
def test_research_sentences_do_not_describe_themselves(text):
    assert not describes_itself(text)
