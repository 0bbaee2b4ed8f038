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
# Words that point back at the previous turn. A cue counts only where it cannot be part of a new question (issue
# #38: "and what" inside "What acceptance rates and what speedups …" made it a follow-up of an unrelated turn):
# - anywhere: phrases only a follow-up uses ("you mentioned", "your previous answer"), not followed by a hyphen
#   ("previous answer-set programming", "the above-chance");
_BACK_PHRASE = re.compile(
    r"\b(?:you (?:mentioned|said|cited|listed|gave|described)|(?:your|the) (?:previous|last|earlier) "
    r"(?:answer|reply|response)|(?:in|from) your (?:answer|reply)|the above)\b(?!-)", re.I)
# - at the start only: "And what …", "What about …", "How so?", "Elaborate …", "Tell me more." (alone or on "it");
_OPENING_CUE = re.compile(
    r"^(?:(?:ok|okay|so|and|but|also|then|now|please|could you|can you)[,\s]+)*"
    r"(?:(?:what|how) about\b|and (?:what|how|why|which|who|where|when|is|are|does|do|did|can)\b|how so\b|"
    r"(?:why|how) (?:is|was) that\s*[?.!]*$|go on\b|continue\b|(?:elaborate|expand)\b|"
    r"(?:tell me|say) more\s*(?:[?.!]*$|about (?:it|this|that|them|these|those)\b)|(?:why|how|really)\s*[?.!]*$)", re.I)
# - in a short question: a pronoun with nothing before it to refer to ("How does it compare with BM25?", "What are
#   their limits?"), a pronoun right after an auxiliary ("What datasets did they use?"), or a demonstrative that
#   ends the question or names a method/paper/result ("Which of these methods is fastest?"). An "it" that only
#   opens a clause ("Is it possible to …", "Does it matter which …") refers to nothing.
_PRONOUN = re.compile(r"\b(?:it|its|they|them|their)\b", re.I)
_AUX_PRONOUN = re.compile(r"\b(?:is|are|was|were|do|does|did|can|could|would|will|has|have|had) "
                          r"(?:it|they)\b", re.I)
_DUMMY_IT = re.compile(r"\bit (?:\w+ )?(?:to|that|whether|which|if|when)\b", re.I)
_DEMONSTRATIVE = re.compile(
    r"\b(?:this|that|these|those)(?=\s*(?:[?.!,]|$)|\s+(?:methods?|approach(?:es)?|papers?|ones?|models?|ideas?|"
    r"results?|techniques?|works?|findings?|stud(?:y|ies)|claims?|true|right|correct)\b)|"
    r"\bthe same (?:holds?|applies|apply|is true)\b",
    re.I)
_FUNCTION_WORDS = frozenset(
    "how what why which who whom where when whose is are was were do does did can could would will should shall has "
    "have had may might must and but so also then now ok okay please well much many often exactly really about in on "
    "of for with to by at from".split())
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
    if _BACK_PHRASE.search(text) or _OPENING_CUE.search(text) or _short_and_pointing_back(text):
        return Rewrite(f"{text} (follow-up to: {previous.question})", True, "refers to the previous question")
    return Rewrite(text, False)


def _short_and_pointing_back(text: str) -> bool:
    if len(text.split()) > SHORT_QUESTION_WORDS:
        return False       # a long question usually names its own subject
    referring = _DUMMY_IT.sub("", text)
    if _DEMONSTRATIVE.search(text) or _AUX_PRONOUN.search(referring):
        return True
    for pronoun in _PRONOUN.finditer(referring):
        before = re.findall(r"[\w'-]+", referring[:pronoun.start()].lower())
        if all(word in _FUNCTION_WORDS for word in before):
            return True
    return False
