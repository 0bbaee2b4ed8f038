"""The sentences of a paper's full text (copilot.body) that a table row may quote, and the rule for which of them may
stand for the paper's own work (issue #48).

A paragraph, list item or footnote is split like an abstract (quotes.sentence_bounds: "et al.", "e.g.", "Fig. 3",
"Eq. (2)" and decimals do not end a sentence), a sentence too long to quote cut into bounded spans; a table row or a
caption is one span (bounded the same way). What the related work or the background says is other papers' work,
never this paper's finding: those sections are not quoted, nor the introduction's sentences that do not speak in
the paper's own voice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from copilot.body import Body, Section
from copilot.methods import quotes
from copilot.store import lexical

MIN_WORDS = quotes.MIN_QUOTE_WORDS
MAX_SENTENCES = 4000          # a body's spans kept at most (a 30-page paper has ~600)

# sections that report other work, the setting, or no finding at all
_NOT_FINDINGS = re.compile(r"\b(?:related\s+work|prior\s+work|previous\s+work|literature|background|preliminar\w*"
                           r"|acknowledge?ments?|funding|competing\s+interests|ethic\w*|impact\s+statement"
                           r"|author\s+contributions?|table\s+of\s+contents|references|bibliography"
                           r"|broader\s+impacts?|datasheet)\b", re.I)
_INTRODUCTION = re.compile(r"\bintroduction\b", re.I)
# a section title that carries its number: "4.2 Ablations", "III-B3 Training", "A Proofs", "Appendix B Prompts"
_NUMBERED = re.compile(r"^(?:Appendix\s+)?(?:\d+|[A-Z]|[IVXLC]+)(?:[.\-]\w+)*\s")
_OWN_VOICE = re.compile(r"\b(?:we|our|us|this\s+(?:paper|work|study|article))\b", re.I)


@dataclass(frozen=True)
class BodySentence:
    start: int                # offsets into Body.text
    end: int
    passage: int              # index into Body.passages
    cut_before: bool = False  # a bounded piece of a longer sentence
    cut_after: bool = False


def body_sentences(body: Body) -> list[BodySentence]:
    """Every span of the body a quote may be, in reading order (offsets into `body.text`)."""
    found: list[BodySentence] = []
    text = body.text
    for index, passage in enumerate(body.passages):
        if passage.kind in ("table_row", "caption"):
            bounds = [(passage.start, passage.end)]
        else:
            bounds = [(passage.start + a, passage.start + b)
                      for a, b in quotes.sentence_bounds(text[passage.start:passage.end])]
        for start, end in bounds:
            pieces = quotes.bounded_bounds(text, start, end, quotes.MAX_SPAN_WORDS)
            for n, (a, b) in enumerate(pieces):
                if len(re.findall(r"[A-Za-z]{2,}", text[a:b])) >= MIN_WORDS:
                    found.append(BodySentence(a, b, index, n > 0, n < len(pieces) - 1))
                if len(found) >= MAX_SENTENCES:
                    return found
    return found


def may_state_finding(body: Body, sentence: BodySentence) -> bool:
    """Whether the sentence may be quoted as what the paper does or finds: not from related work, background,
    acknowledgements and the like; from the introduction only in the paper's own voice ("we show …")."""
    section = body.section_of(body.passages[sentence.passage])
    if section is None:
        return False          # before the first section: title and author blocks
    top = section.top or section.title
    if _NOT_FINDINGS.search(top) or _NOT_FINDINGS.search(section.title):
        return False
    if _INTRODUCTION.search(top):
        return bool(_OWN_VOICE.search(body.text[sentence.start:sentence.end]))
    return True


def section_label(body: Body, section: Section) -> str:
    """A section as a quote names it: its numbered title, or for an unnumbered heading (LaTeX's \\paragraph) the
    numbered section it sits in first: "4.1 Datasets › Evaluation"."""
    if _NUMBERED.match(section.title + " ") or not section.anchor:
        return section.title
    parts = section.anchor.split(".")
    by_anchor = {s.anchor: s for s in body.sections if s.anchor}
    for n in range(len(parts) - 1, 0, -1):
        parent = by_anchor.get(".".join(parts[:n]))
        if parent is not None and _NUMBERED.match(parent.title + " "):
            return f"{parent.title} \u203a {section.title}"
    return section.title


def sentence_terms(texts: Sequence[str]) -> list[list[str]]:
    """Each text's word stems without stop words (the library's BM25 tokens), kept with a body's sentences."""
    return lexical.tokenize(texts) if texts else []


def word_shares(question: str, terms: Sequence[frozenset[str]]) -> np.ndarray:
    """For each sentence, the share of the question's words it holds, each word weighted by how rare it is in the
    body (its inverse sentence frequency): "weight decay" counts for more than the paper's own name, which most of
    its sentences hold. 0 for all when the body holds none of the question's words. Linear in the body's terms (a
    set intersection per sentence), however long the question."""
    asked = frozenset(sentence_terms([question])[0]) if question.strip() else frozenset()
    shares = np.zeros(len(terms), dtype=np.float32)
    if not asked or not terms:
        return shares
    held = [t & asked for t in terms]
    counts: dict[str, int] = {}
    for words in held:
        for word in words:
            counts[word] = counts.get(word, 0) + 1
    weights = {word: math.log((len(terms) + 1) / (n + 0.5)) for word, n in counts.items()}
    total = sum(weights.values())
    if total <= 0:
        return shares
    for n, words in enumerate(held):
        shares[n] = sum(weights[word] for word in words) / total
    return shares
