"""A follow-up that filters the previous answer (issue #59 item 8): "And which of them need no fine-tuning?", "Which of
these use reinforcement learning?", "Do any of them release their code?". It is asked of the papers the previous
answer showed, not of the library, and answered by saying which of them state the property and which do not.

The form is read by a scan over the question's first words (tokens found by a pattern that cannot backtrack, at most
MAX_CHARS of the question): no pattern over the whole question. Whether a sentence states the property is a word match:
every content word of the property (by its stem; "fine-tuning" is also "finetuned", "fine-tune"; several words also
by their initials in capitals: "reinforcement learning" is "RL", "RLHF") occurs in it, and a
negated property ("need no fine-tuning", "without labels") needs a negation next to its word ("does not require
fine-tuning", "without any fine-tuning", "tuning-free"). A sentence that only mentions the word does not state it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_CHARS = 400                   # a filtering follow-up is short; the scan reads no further
NEAR = 4                          # a negation this many words before the property's word negates it
_TOKEN = re.compile(r"[a-z0-9]+(?:['\u2019-][a-z0-9]+)*")    # runs split by single marks: linear
_WORD = re.compile(r"[A-Za-z0-9]+(?:['\u2019-][A-Za-z0-9]+)*")       # _TOKEN in either case
_OPENERS = frozenset("and so but ok okay now then also well please".split())
_WH = frozenset("which what who".split())
_POINTING = frozenset("them these those".split())
_NOUNS = frozenset("papers paper ones one works methods approaches studies models".split())
_AUX = frozenset("do does did are is were was can could".split())
_NEGATIONS = frozenset("no not without never none neither nor free zero n't don't doesn't didn't cannot".split())
# words of a property that say how a paper relates to it, not what it is
_LIGHT = frozenset(
    "need needs needed require requires required use uses used using rely relies relying on do does did is are was "
    "were be been being have has had any a an the of for to in on at by with from as their its it they them this that "
    "these those which who what also still actually only both all some more most support supports involve involves "
    "employ employs apply applies can could would should will make makes report reports perform performs provide "
    "provides include includes based rather than at least just really even".split()) | _NEGATIONS
# a negated property about training is also stated by "training-free", "without any training"
_RELATED = {"finetun": ("train", "retrain"), "train": ("finetun",)}


@dataclass(frozen=True)
class Filter:
    phrase: str                   # the property as asked: "need no fine-tuning"
    terms: tuple[str, ...]        # its content words' stems: ("finetun",)
    negated: bool                 # the property is an absence ("no", "without", "-free")


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text.lower()[:MAX_CHARS])]


def _stem(word: str) -> str:
    word = word.replace("-", "").replace("'", "").replace("\u2019", "")
    return word if len(word) <= 5 else word[:max(5, len(word) - 3)]


def _rest(words: Sequence[str]) -> int | None:
    """Where the property starts after a filtering opening ("which of them", "which ones", "do any of these",
    "how many of those papers"), or None for another question."""
    n = 0
    while n < len(words) and words[n] in _OPENERS:
        n += 1
    head = words[n:n + 6]
    if head[:1] == ["of"] and head[1:2] and head[1] in _POINTING:      # "Of these, which …"
        skip = 3 if head[2:3] and head[2] in _NOUNS else 2
        if head[skip:skip + 1] and head[skip] in _WH:
            head, n = [head[skip], "of", head[1], *head[skip + 1:]], n + skip - 2
    if len(head) >= 2 and head[0] == "how" and head[1] == "many":
        head, n = ["which", *head[2:]], n + 1
    if head[:1] and head[0] in _AUX and head[1:3] == ["any", "of"]:
        head, n = ["which", *head[2:]], n + 1          # "do any of them": "which of them"
    if head[:1] == ["any"] and head[1:2] == ["of"]:
        head, n = ["which", *head[1:]], n
    if not head or head[0] not in _WH:
        return None
    if head[1:2] == ["of"] and head[2:3] and head[2] in _POINTING:
        at = n + 3
    elif head[1:2] and head[1] in _NOUNS and head[2:3] == ["of"] and head[3:4] and head[3] in _POINTING:
        at = n + 4
    elif head[1:2] and head[1] in ("ones", "one"):
        at = n + 2 + (2 if head[2:3] == ["of"] and head[3:4] and head[3] in _POINTING else 0)
    else:
        return None
    if at < len(words) and words[at] in _NOUNS:
        at += 1
    while at < len(words) and words[at] in ("that", "which", "who"):
        at += 1
    return at if at < len(words) else None


def filter_of(question: str | None) -> Filter | None:
    """The property a filtering follow-up asks about, or None when the question is not one."""
    text = " ".join((question or "").split())[:MAX_CHARS]
    found = _tokens(text)
    at = _rest([word for word, _, _ in found])
    if at is None:
        return None
    rest = found[at:]
    terms = tuple(dict.fromkeys(_stem(word.removesuffix("-free")) for word, _, _ in rest
                                if word not in _LIGHT and not word.isdigit()))
    if not terms:
        return None
    negated = any(word in _NEGATIONS or word.endswith(("-free", "n't")) for word, _, _ in rest)
    return Filter(text[rest[0][1]:rest[-1][2]], terms, negated)


def _matches(word: str, term: str, negated: bool) -> bool:
    flat = word.replace("-", "")
    return flat.startswith(term) or (negated and any(flat.startswith(other) for other in _RELATED.get(term, ())))


def states(wanted: Filter, sentence: str) -> bool:
    """Whether `sentence` states the property: each of its terms occurs; a negated property's term next to a
    negation (NEAR words before it, or "-free" on it or after it)."""
    cased = [m.group() for m in _WORD.finditer(sentence[:4 * MAX_CHARS])]
    words = [word.lower() for word in cased]
    places = [[n for n, word in enumerate(words) if _matches(word, term, wanted.negated)] for term in wanted.terms]
    if not all(places) and len(wanted.terms) > 1:       # "reinforcement learning" is also "RL", "RLHF"
        initials = "".join(term[0] for term in wanted.terms).upper()
        places = [[n for n, word in enumerate(cased) if word.isupper() and word.startswith(initials)]]
    if not all(places):
        return False
    if not wanted.negated:
        return True
    return any(_negated_at(words, n) for found in places for n in found)


def _negated_at(words: Sequence[str], n: int) -> bool:
    if words[n].endswith("-free") or words[n + 1:n + 2] == ["free"]:
        return True
    return any(word in _NEGATIONS or word.endswith("n't") for word in words[max(0, n - NEAR):n])
