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
# - in a short question, a word that needs an antecedent and finds none in the question itself (issue #49: "Which
#   papers study LLM-as-a-judge bias, and what biases did *they* find?" refers inside the question). A pronoun
#   (they, them, their, it, its; "it" that only opens a clause — "Is it possible to …" — refers to nothing) finds
#   one in an earlier clause that holds a content word; in its own clause only a possessive does, after the clause's
#   subject ("Do LLM judges prefer *their* own outputs?"), never inside what a "What is/are …" asks about ("What
#   are the limits of their method?"), nor a subject or object pronoun ("What datasets did they use?", "Who found
#   it first?"). A demonstrative that ends the question, opens it after an auxiliary ("Does this hold …?"), or
#   names a generic thing the question has not named ("these papers", "those comparisons") points back, as do
#   "which one(s)", an opening "Any that/of/on …", and a closing "then" or "there".
_PRONOUN = re.compile(r"\b(?:it|its|they|them|their)\b", re.I)
_DUMMY_IT = re.compile(r"\bit (?:\w+ )?(?:to|that|whether|which|if|when)\b", re.I)
_AUX = frozenset("is are was were do does did can could would will should has have had may might must".split())
_COPULA = frozenset("is are was were 's".split())
_WH = frozenset("what which who whom whose how why where when".split())
# a clause starts after punctuation or at a conjunction, a subordinator or a wh-word inside the question
_BOUNDARY = frozenset("and but or when whenever if while because since before after until unless whether without "
                      "once than so what which who whom where why how that".split())
_GENERIC = (r"methods?|approach(?:es)?|papers?|ones?|models?|ideas?|results?|techniques?|works?|findings?|"
            r"stud(?:y|ies)|claims?|comparisons?|benchmarks?|datasets?|systems?|experiments?|numbers?|"
            r"sources?|articles?|authors?|tools?|attacks?|defen[cs]es?|metrics?|baselines?|settings?|"
            r"evaluations?|areas?|directions?|problems?|issues?|limitations?|cases?|true|right|correct")
_DEMONSTRATIVE = re.compile(
    r"\b(?:this|that|these|those)(?=\s*(?:[?.!,]|$))|\bof (?:these|those)\b|"
    r"\b(?:this|that|these|those)\s+(" + _GENERIC + r")\b|"
    r"^(?:\w+\s+)?(?:does|did|do|can|could|will|would)\s+(?:this|that)\b|"
    r"\bthe same (?:holds?|applies|apply|is true)\b|\bwhich ones?\b(?!\s+of\b)|^any (?:that|of|on|in|for|with)\b|"
    r"\b(?:then|there)\s*[?.!]*$", re.I)
_EXISTENTIAL_THERE = re.compile(r"\b(?:is|are|was|were) there\s*[?.!]*$", re.I)
_FUNCTION_WORDS = frozenset(
    "how what why which who whom where when whose is are was were do does did can could would will should shall has "
    "have had may might must and but so also then now ok okay please well much many often exactly really about in on "
    "of for with to by at from the a an any some all each both either neither none one ones other others own same "
    "more most less this that these those there here i me my we us our you your tell explain describe say give show "
    "list compare summarize summarise thanks thank great cool nice interesting hmm yes no not".split())
SHORT_QUESTION_WORDS = 12
FOLLOW_UP_MARK = " (follow-up to: "       # a vague follow-up carries the previous question after this


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
        return Rewrite(f"{text}{FOLLOW_UP_MARK}{previous.question})", True, "refers to the previous question")
    return Rewrite(text, False)


def asked_words(question: str) -> str:
    """The user's own words of a question rewritten as a vague follow-up (`standalone_question`), else "": what
    asking it on its own asks. (A question that named a paper of the previous answer by its place is rewritten
    with the paper's title: it means nothing on its own.)"""
    words, mark, _ = question.partition(FOLLOW_UP_MARK)
    return words if mark and question.endswith(")") else ""


def _short_and_pointing_back(text: str) -> bool:
    if len(text.split()) > SHORT_QUESTION_WORDS:
        return False       # a long question usually names its own subject
    demonstrative = _DEMONSTRATIVE.search(text)
    if demonstrative and not _EXISTENTIAL_THERE.search(text) and not _named_before(text, demonstrative):
        return True
    referring = _DUMMY_IT.sub(lambda m: " " * len(m.group()), text)     # positions kept
    return any(not _has_antecedent(referring, pronoun) for pronoun in _PRONOUN.finditer(referring))


def _named_before(text: str, demonstrative: re.Match) -> bool:
    """Whether the question names what the demonstrative points at: in an earlier clause ("RAG or fine-tuning:
    which of these is cheaper?"), or the very noun before it ("these benchmarks" after "benchmarks")."""
    before = _words(text[:demonstrative.start()])
    if _content(before[:_clause_start(before)]):
        return True
    noun = demonstrative.group(1)
    if not noun:
        return False
    stem = noun.lower().rstrip("s")[:5]
    return any(word.startswith(stem) for word in before)


def _clause_start(words: Sequence[str]) -> int:
    """Where the last clause of `words` starts: after punctuation, or at a conjunction, subordinator or wh-word."""
    start = 0
    for index, word in enumerate(words):
        if index and (word in _BOUNDARY or not word[0].isalnum()):
            start = index
    return start


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'-]+|[,;:?!.]", text.lower())


def _content(words: Sequence[str]) -> bool:
    return any(word not in _FUNCTION_WORDS and word[0].isalnum() for word in words)


def _has_antecedent(text: str, pronoun: re.Match) -> bool:
    """Whether the question itself holds what `pronoun` may refer to (see the comment on _PRONOUN)."""
    before = _words(text[:pronoun.start()])
    start = _clause_start(before)
    if _content(before[:start]):
        return True                 # an earlier clause names something
    if pronoun.group().lower() == "they" and before and _content(before[-1:]):
        return _content(_without_head(before))   # "the documents they retrieve": a relative clause on its head
    clause = [word for word in before[start:] if word[0].isalnum()]
    if pronoun.group().lower() not in ("their", "its"):
        return False                # a subject or object pronoun is not bound inside its own clause
    aux = next((i for i, word in enumerate(clause[:5]) if word in _AUX or word in _COPULA), None)
    if aux is None:
        return _content(clause[1:] if clause and clause[0] in _WH else clause)
    if clause[0] in _WH and clause[aux] in _COPULA:
        return False                # "What are the limits of their method?": the pronoun is inside what is asked
    return _content(clause[aux + 1:])


def _without_head(words: list[str]) -> list[str]:
    """`words` without the noun phrase they end with ("… use the documents" → "… use")."""
    end = len(words)
    while end and _content(words[end - 1:end]):
        end -= 1
    if end and words[end - 1] in ("the", "a", "an", "these", "those", "this", "that", "their", "its"):
        end -= 1
    return words[:end]
