"""A generated text repeating itself (a loop) or its instructions (an echo): the detectors behind the output checks
of copilot/grounding.py, which re-exports them. Small models do both; a capable model's text passes unchanged."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from copilot.prompts import CANNOT_ANSWER

# One bracket group such as [2], [1, 3], [2501.01234v2], [hep-th/9901001], [Source 4], [T0a1b2c3d4e].
BRACKET = re.compile(r"\[([^\[\]\n]{1,80})\]")
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

LOOP_NGRAM = 8            # a run of this many words seen before marks the start of a loop
NEAR_COPY_WORDS = 12      # a sentence this long or longer that mostly copies an earlier one is a loop…
NEAR_COPY_SHARE = 0.6     # …when this share of its (or the earlier one's) 3-word runs is shared
ECHO_NGRAM = 7            # a sentence sharing this many consecutive words with the instructions is an echo
SHORT_ECHO_RUN = 3        # …or, when shorter than that, made mostly of a run of this many instruction words


def lower_words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def cut_loop(text: str, n: int = LOOP_NGRAM) -> tuple[str, bool]:
    """Cut the text where it starts repeating itself: at the first sentence that repeats an earlier sentence, or
    that repeats a run of `n` words which the text writes at least three times (twice can be an honest shared
    phrase; three times is a loop). What came before stays."""
    sentences = split_keeping(text)
    counts: dict[tuple[str, ...], int] = {}
    for sentence in sentences:
        words = lower_words(sentence)
        for i in range(max(0, len(words) - n + 1)):
            gram = tuple(words[i:i + n])
            counts[gram] = counts.get(gram, 0) + 1
    looping = {gram for gram, count in counts.items() if count >= 3}
    kept: list[str] = []
    seen_sentences: set[str] = set()
    seen_grams: set[tuple[str, ...]] = set()
    long_trigrams: list[set[tuple[str, ...]]] = []     # of the earlier sentences long enough to be copied
    for sentence in sentences:
        words = lower_words(sentence)
        norm = " ".join(lower_words(BRACKET.sub(" ", sentence)))     # the same sentence under another label repeats
        grams = {tuple(words[i:i + n]) for i in range(max(0, len(words) - n + 1))}
        # a run of n words seen before, or repeated within this very sentence
        inner_repeat = len(words) >= 2 * n and len(grams) < len(words) - n + 1
        trigrams = _trigrams(norm.split()) if len(norm.split()) >= NEAR_COPY_WORDS else None
        copied = (norm and norm in seen_sentences and len(words) >= 3) or _near_copy(trigrams, long_trigrams)
        if copied or (grams & seen_grams & looping) or inner_repeat:
            if inner_repeat and not (grams & seen_grams & looping):
                kept.append(_cut_inside(sentence, n))
            return "".join(kept).rstrip(), True
        seen_sentences.add(norm)
        seen_grams |= grams
        if trigrams is not None:
            long_trigrams.append(trigrams)
        kept.append(sentence)
    return text, False


def _trigrams(words: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def _near_copy(trigrams: set[tuple[str, ...]] | None, earlier: Iterable[set[tuple[str, ...]]]) -> bool:
    """Whether a long sentence (its 3-word runs, citations aside; None when too short) mostly copies an earlier one:
    a small model writing its claim again for another source with a verb or two changed ("X [4] show that …" /
    "Y [2] report that …")."""
    return trigrams is not None and any(len(trigrams & other) >= NEAR_COPY_SHARE * min(len(trigrams), len(other))
                                        for other in earlier)


def _cut_inside(sentence: str, n: int) -> str:
    """A sentence cut just before the first repeat of an n-word run inside it."""
    tokens = list(_WORD.finditer(sentence))
    seen: set[tuple[str, ...]] = set()
    for i in range(len(tokens) - n + 1):
        gram = tuple(t.group(0).lower() for t in tokens[i:i + n])
        if gram in seen:
            return sentence[:tokens[i].start()].rstrip() + " …"
        seen.add(gram)
    return sentence


def split_keeping(text: str) -> list[str]:
    """Sentences with their trailing whitespace, so joining them gives the text back."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        pieces.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


# A sentence about the text itself rather than the subject: "Revised draft with additional information …",
# "Here is the revised version:". The revision instruction asks for a revised draft; a small model announces one.
_ABOUT_THE_DRAFT = re.compile(
    r"^\W*(?:(?:(?:here|this|below) is\s+)?(?:(?:the|a|an|my|our)\s+)?(?:revised|updated|improved|rewritten|final|new)"
    r"\s+draft\b|(?:here|below) is\s+(?:the|a|an|my|our)\s+(?:revised|updated|improved|rewritten|final|new)\s+"
    r"(?:version|text|answer)\b)", re.I)


def drop_echo(text: str, instructions: Iterable[str], n: int = ECHO_NGRAM) -> tuple[str, bool]:
    """Remove sentences that copy a run of `n` words from the instructions the model was given, and sentences that
    announce the text itself ("Revised draft …") when there are instructions to echo."""
    grams: set[tuple[str, ...]] = set()
    short_grams: set[tuple[str, ...]] = set()
    for instruction in instructions:
        words = lower_words(instruction)
        grams |= {tuple(words[i:i + n]) for i in range(max(0, len(words) - n + 1))}
        short_grams |= {tuple(words[i:i + SHORT_ECHO_RUN]) for i in range(max(0, len(words) - SHORT_ECHO_RUN + 1))}
    if not grams:
        return text, False
    kept, echoed = [], False
    sentinel = lower_words(CANNOT_ANSWER)
    for sentence in split_keeping(text):
        words = lower_words(BRACKET.sub(" ", sentence))
        if words != sentinel and (any(tuple(words[i:i + n]) in grams for i in range(max(0, len(words) - n + 1)))
                                  or _short_echo(words, n, short_grams) or _ABOUT_THE_DRAFT.match(sentence)):
            echoed = True
            continue
        kept.append(sentence)
    return "".join(kept).strip(), echoed


def _short_echo(words: list[str], n: int, short_grams: set[tuple[str, ...]]) -> bool:
    """A sentence too short for the n-word test whose words are mostly runs of instruction words, such as
    "Cite papers by and." left when the ids of "Cite papers by id [2503.13309] and …" were removed."""
    if not SHORT_ECHO_RUN <= len(words) < n:
        return False
    covered: set[int] = set()
    for i in range(len(words) - SHORT_ECHO_RUN + 1):
        if tuple(words[i:i + SHORT_ECHO_RUN]) in short_grams:
            covered.update(range(i, i + SHORT_ECHO_RUN))
    return len(covered) >= 0.6 * len(words)


def is_loop(text: str, n: int = LOOP_NGRAM) -> bool:
    """Whether cut_loop would cut the text."""
    return cut_loop(text, n)[1]


def echoes(text: str, instructions: Iterable[str], n: int = ECHO_NGRAM) -> bool:
    """Whether drop_echo would remove a sentence of the text."""
    return drop_echo(text, instructions, n)[1]
