"""Follow-up questions: "Can you say more about the second paper you mentioned?" means nothing to a retriever
on its own. A question that refers back to the previous turn is rewritten into a standalone one, and the
rewritten question is what retrieval and the answer see (the UI shows it).

The rewrite is deterministic rather than written by the model: a 135M model rewrites unreliably, and a rule
that names the paper it resolved is easy to check on screen.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
            "fifth": 5, "5th": 5, "last": -1}
_ORDINAL_REF = re.compile(
    r"\b(?:the\s+)?(" + "|".join(ORDINALS) + r")\s+(?:paper|source|study|one|work|article|result|reference|item)"
    r"(?:\s+(?:you|that\s+you)\s+(?:mentioned|cited|listed|gave|used))?", re.I)
_NUMBER_REF = re.compile(r"\b(?:paper|source|reference|item)\s*\[?(\d{1,2})\]?|\[(\d{1,2})\]", re.I)
# Phrases that point back whatever the question's length; pronouns only in a short question ("Why is that?",
# "How does it compare with BM25?"), since a long one usually names its own subject.
_BACK_PHRASE = re.compile(
    r"\b(?:the above|you mentioned|you said|you cited|say more|tell me more|more about (?:it|this|that|them)|"
    r"more detail|elaborate|expand on|go on|what about|how about|and what|why is that|how so|previous answer|"
    r"your answer)\b", re.I)
_BACK_PRONOUN = re.compile(r"\b(?:it|its|they|them|their|this|that|these|those|why|same)\b", re.I)
SHORT_QUESTION_WORDS = 12


@dataclass(frozen=True)
class PreviousTurn:
    question: str
    answer: str                       # as shown, citing [n] labels
    source_titles: Sequence[str]      # title (or opening words) of source n at index n-1


@dataclass(frozen=True)
class Rewrite:
    question: str                     # what retrieval and the answer use
    rewritten: bool
    reason: str = ""


def _cited_order(answer: str) -> list[int]:
    order: list[int] = []
    for match in re.finditer(r"\[(\d{1,3})\]", answer):
        number = int(match.group(1))
        if number not in order:
            order.append(number)
    return order


def _title(previous: PreviousTurn, number: int) -> str | None:
    if 1 <= number <= len(previous.source_titles):
        title = " ".join(previous.source_titles[number - 1].split())[:160]
        return title or None
    return None


def standalone_question(question: str, previous: PreviousTurn | None) -> Rewrite:
    """The question as it can be understood without the previous turn."""
    text = " ".join((question or "").split())
    if previous is None or not text:
        return Rewrite(text, False)
    ordinal = _ORDINAL_REF.search(text)
    if ordinal:
        cited = _cited_order(previous.answer) or list(range(1, len(previous.source_titles) + 1))
        position = ORDINALS[ordinal.group(1).lower()]
        index = position - 1 if position > 0 else len(cited) - 1
        title = _title(previous, cited[index]) if 0 <= index < len(cited) else None
        if title:
            rewritten = text[:ordinal.start()] + f'the paper "{title}"' + text[ordinal.end():]
            return Rewrite(rewritten, True, f"the {ordinal.group(1).lower()} paper of the previous answer")
    number = _NUMBER_REF.search(text)
    if number:
        title = _title(previous, int(number.group(1) or number.group(2)))
        if title:
            rewritten = text[:number.start()] + f'the paper "{title}"' + text[number.end():]
            return Rewrite(rewritten, True, "a source of the previous answer")
    if _BACK_PHRASE.search(text) or (len(text.split()) <= SHORT_QUESTION_WORDS and _BACK_PRONOUN.search(text)):
        return Rewrite(f"{text} (follow-up to: {previous.question})", True, "refers to the previous question")
    return Rewrite(text, False)
