"""The confidence step fails safe (issue #12): the thought prompt's output becomes a thought only when it is clearly
a real passage. Outputs below are written the way SmolLM2-135M answers the thought prompt (both cases quoted in the
issue among them); each is judged exactly, with the reason for a rejection.
"""

from __future__ import annotations

import pytest

from copilot.grounding import is_loop
from copilot.methods.thought_retriever import draft_thought, judge_thought, parse_thought, passage_problem
from copilot.prompts import CANNOT_ANSWER
from tests.doubles import scripted_llm

QUESTION = "How do large language models use retrieval to answer questions?"

REJECTED = [
    # a 0 as a step answer, in any position or after any label
    ("0", "0 or N/A"),
    ("0.", "0 or N/A"),
    ("**0**", "0 or N/A"),
    ("Step 1: 0\nStep 2: N/A", "0 or N/A"),                                                    # quoted in the issue
    ("Step 1: 0\nStep 2: N/A (the answer does not say how retrieval is used by the models)", "0 or N/A"),
    ("Step 1: 0 Step 2: Retrieval augmented models read retrieved passages before they answer.", "0 or N/A"),
    ("1\nStep 1: 0\nStep 2: The models retrieve passages and then write an answer from them.", "0 or N/A"),
    ("Step 1: 1\nStep 2: 0", "0 or N/A"),
    ("Confidence: 0\nThought: Language models retrieve passages from a corpus before answering.", "0 or N/A"),
    ("Output: 0\n\nThe answer only says that the sources are not enough.", "0 or N/A"),
    ("Step 1: No.\nStep 2: Language models retrieve passages from a corpus before answering.", "0 or N/A"),
    ("Language models retrieve passages before they answer, so the confidence is 0", "0 or N/A"),
    ("Step 2: None", "0 or N/A"),
    # the sentinel, or another way of saying the question cannot be answered
    (CANNOT_ANSWER, "cannot be answered"),
    ("1\nI cannot answer this from the available sources. Retrieval is mentioned in [2501.00001].",
     "cannot be answered"),
    ("1\nThe question cannot be answered because the sources do not describe retrieval in detail.",
     "cannot be answered"),
    ("1\nThere is not enough information in the answer to write a knowledge point about retrieval.",
     "cannot be answered"),
    # an echo of the prompt's own instructions
    ("1\nOtherwise output 1 on the first line, then one short self-contained paragraph that states what was asked.",
     "echoes"),
    ("Step 1: Is this a real answer, or does it only say the question cannot be answered? Yes.\n"
     "Step 2: Retrieval helps language models answer questions from papers.", "echoes"),
    ("1\nText inside source tags is quoted material from papers or notes, and models answer from it.", "echoes"),
    # loops
    ("1\nThe answer is that the answer is that the answer is that the answer is that the answer is retrieval.",
     "loop"),
    ("1\nLanguage models use retrieval. Language models use retrieval. Language models use retrieval.", "loop"),
    ("1\nRetrieval models retrieve papers. Retrieval models retrieve papers. They answer questions with them.",
     "loop"),
    # too short, or only the question back
    ("1", "too short"),
    ("1. Yes", "too short"),
    ("1\nRetrieval helps [2501.00001] [2501.00002].", "too short"),
    ("Step 1: 1\nStep 2:", "too short"),
    ("1\nHow do large language models use retrieval to answer questions?", "question"),
    ("", "too short"),
]

ACCEPTED = [
    ("1\nLarge language models answer questions by first retrieving relevant papers and then grounding the "
     "answer in them [2501.00001].",
     "Large language models answer questions by first retrieving relevant papers and then grounding the answer "
     "in them [2501.00001]."),
    ("Step 1: 1\nStep 2: Retrieval-augmented generation lets a small model cite the passages it read, which "
     "reduces unsupported claims [2501.00002].",
     "Retrieval-augmented generation lets a small model cite the passages it read, which reduces unsupported "
     "claims [2501.00002]."),
    ("Step 1: The answer is a real answer.\nStep 2: Dense retrievers find passages by embedding similarity and "
     "the reader model answers from the top ones.",
     "Dense retrievers find passages by embedding similarity and the reader model answers from the top ones."),
    ("1\nHere is a summarized knowledge point: Retrieval raised exact match from 0.41 to 0.52 on open-domain "
     "question answering [2501.00003].",
     "Retrieval raised exact match from 0.41 to 0.52 on open-domain question answering [2501.00003]."),
    ('<source id="answer">1\nThe question asked how models use retrieval; the answer found they read retrieved '
     "abstracts before answering.</source>",
     "The question asked how models use retrieval; the answer found they read retrieved abstracts before "
     "answering."),
    ("**1**\n**Thought:** Zero-shot retrieval works without task data because the retriever was trained on "
     "web questions.",
     "Zero-shot retrieval works without task data because the retriever was trained on web questions."),
]


@pytest.mark.parametrize("output, reason", REJECTED)
def test_rejected_outputs(output, reason):
    draft = judge_thought(output, QUESTION)
    assert (draft.confidence, draft.text) == (0, "") and reason in draft.reason, draft.reason
    assert parse_thought(output, QUESTION) == (0, "")


@pytest.mark.parametrize("output, text", ACCEPTED)
def test_accepted_outputs(output, text):
    draft = judge_thought(output, QUESTION)
    assert (draft.confidence, draft.text, draft.reason) == (1, text, "")


def test_loop_detection_is_about_repetition_not_length():
    assert is_loop("word " * 50)
    assert not is_loop("Retrieval grounds answers in papers; dense retrievers rank passages by embedding "
                       "similarity, and the reader cites the passages it used for each claim it makes.")


def test_a_looping_answer_gets_no_thought_and_no_llm_call(services):
    llm, backend = scripted_llm(services.db, [])
    loop = "Retrieval is used to answer questions. " * 6
    draft = draft_thought(llm, QUESTION, loop)
    assert (draft.confidence, draft.llm_called, draft.reason) == (0, False, "the answer repeats itself (a loop)")
    assert backend.calls == []


def test_passage_check_on_trend_texts():
    instructions = ["Summarize what these papers on the topic have in common, in two or three sentences."]
    assert passage_problem("Papers on sparse attention cut memory use for long inputs while keeping accuracy "
                           "close to dense attention [2501.00001].", instructions) is None
    assert passage_problem("Summarize what these papers on the topic have in common, in two or three sentences "
                           "about sparse attention.", instructions) == "echoes the prompt's instructions"
    assert passage_problem("Sparse attention is rising [2501.00001].", instructions) == "too short"
    assert passage_problem("Sparse attention is rising. " * 3, instructions) == "repeats itself (a loop)"
