"""What a question about one paper asks for, and where a paper usually writes it (issue #57 item 4).

With one paper in scope, a question competes only with that paper's passages, so where the paper keeps each kind of
fact can count: its data in the dataset or setup sections, its hardware and training settings in the implementation
details or an appendix, its limits in the limitations or conclusion, its measurements in the experiments and
results, its code behind a repository's address. `question_kind` names the kind from the question's words (a set
lookup per word: linear, no pattern that can backtrack on what a user types); `section_prior` gives each body sentence
a bonus when its section's path (its top section and its own title, "5 Experiments 5.2 Implementation Details") holds
a word of the kind's sections; `dedicated_prior` puts first the section given over to the kind ("8.4 Limitations",
"Data and code availability") and the sentences holding a repository's address, for a question that asks only
that kind; `neighbour_prior` lets a sentence borrow part of the bonus of the sentence before it in the same section (a
fragment such as "Kaggle P100 GPU (16 GB VRAM), model on CPU at FP32." continues the sentence that says what it is
about).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from copilot.body import Body

MAX_QUESTION = 2000           # characters of a question read (a pasted page is not a question)

# the kinds, checked in this order (the first whose cue a question holds): "Which model families were the
# experiments limited to" is about limits before it is about models; "how many training runs" about settings
KINDS = ("limits", "setup", "data", "results", "code", "other")

# a question's words (lower case, whole words, or two in a row) that name each kind; "*" ends a prefix
_CUES: dict[str, tuple[str, ...]] = {
    "limits": ("limitation*", "limited", "limits", "fail*", "weakness*", "drawback*", "shortcoming*", "represent",
               "inefficient", "bias*", "risk*", "caveat*", "threat*", "less efficient", "may not", "not fully",
               "fall short", "falls short"),
    "setup": ("hardware", "gpu*", "cpu*", "tpu*", "precision", "fp32", "fp16", "bf16", "vram", "memory", "compute",
              "optimizer*", "optimiser*", "learning", "batch", "epoch*", "hyperparameter*", "temperature", "seed*",
              "warmup", "decay", "runs", "steps", "implementation", "implemented", "trained", "train", "training",
              "fine-tun*", "finetun*", "settings", "configuration"),
    "data": ("data", "dataset*", "corpus", "corpora", "samples", "documents", "subset*", "collected", "collect",
             "glossary", "split*", "annotat*", "sources", "prompts", "examples", "instances", "entries"),
    "results": ("compare*", "comparison", "versus", "vs", "accuracy", "score*", "scored", "recall*", "precision@*",
                "bleu", "f1", "error", "agree*", "improve*", "drop*", "change*", "lift", "gain*", "perform*",
                "baseline*", "ablation*", "outperform*", "happens", "effect", "impact", "proxy", "rate", "how well"),
    "code": ("code", "codebase", "github", "gitlab", "repository", "repo", "open-source*", "available",
             "availability", "release*", "public", "publicly"),
}
# the words of a section's path that say it holds each kind (lower case, whole words; "*" a prefix)
_SECTIONS: dict[str, tuple[str, ...]] = {
    "limits": ("limitation*", "conclusion*", "discussion", "future", "broader", "ethic*", "failure*", "threats",
               "caveats", "risks"),
    "setup": ("implementation", "details", "training", "setup", "set-up", "settings", "hyperparameter*", "appendix",
              "configuration", "reproducibility", "compute", "hardware", "experimental"),
    "data": ("data", "dataset*", "corpus", "corpora", "collection", "statistics", "construction", "preprocessing",
             "setup", "experimental", "benchmark*"),
    "results": ("experiment*", "result*", "evaluation*", "analysis", "analyses", "ablation*", "comparison*",
                "baseline*", "findings", "performance"),
}
# the words of a section's own title that say the section is given over to the kind ("8.4 Limitations", "Threats to
# validity"): a question asking only that kind of the paper is answered there
_DEDICATED: dict[str, tuple[str, ...]] = {
    "limits": ("limitation*", "threats", "caveats", "shortcoming*", "weakness*"),
    "code": ("availability",),      # "Data and code availability"
}
# …and the sentences that hold where the kind is found: a repository's address for the code ("… is available on
# GitHub at https://github.com/…", "[DOI: 10.5281/zenodo.…]"); a literal alternation, linear
# (not huggingface.co: there a paper links the models and data it used, more often than its own code)
_PLACES = {"code": re.compile(r"github\.com|gitlab\.com|codeberg\.org|bitbucket\.org|zenodo", re.I)}
SECTION_PRIOR = 0.08          # a body sentence's bonus for a section where the question's kind is written
DEDICATED_PRIOR = 2.0         # …for the section given over to it, when the question asks nothing else of the paper:
#                               more than any other bonus and cosine together, so its sentences come first
NUMBER_PRIOR = 0.12           # …and for stating a number, when the kind is measured in numbers
NUMBER_KINDS = frozenset({"results", "data", "setup"})
NEIGHBOUR_SHARE = 0.3         # the share of the previous sentence's bonus (same section) a sentence borrows
NEIGHBOUR_ALONE = 0.1         # …when its own bonus is under this (it holds hardly a word of the question)


def words(text: str) -> list[str]:
    """Lower-case words of a text (letters, digits, "-", "@", "/"), read once left to right."""
    kept = "".join(c if c.isalnum() or c in "-@/" else " " for c in text[:MAX_QUESTION].lower())
    return kept.split()


def _matches(word: str, cues: Sequence[str]) -> bool:
    return any(word.startswith(cue[:-1]) if cue.endswith("*") else word == cue for cue in cues)


def _holds(found: Sequence[str], cues: Sequence[str]) -> bool:
    """Whether a word, or two words in a row ("may not"), of `found` is one of `cues`."""
    pairs = [f"{a} {b}" for a, b in zip(found, found[1:])]
    return any(_matches(word, cues) for word in found) or any(pair in cues for pair in pairs)


def question_kind(question: str) -> str:
    """The kind of fact a question asks of a paper: "limits", "setup" (hardware, training settings), "data",
    "results" (evaluation, metrics, comparisons) or "other"."""
    found = words(question or "")
    return next((kind for kind in KINDS[:-1] if _holds(found, _CUES[kind])), "other")


def section_holds(kind: str, path: str) -> bool:
    """Whether a section path ("5 Experiments 5.2 Implementation Details") names where `kind` is written."""
    return kind in _SECTIONS and _holds(words(path), _SECTIONS[kind])


def section_prior(kind: str, body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]]) -> np.ndarray:
    """SECTION_PRIOR for each sentence whose section's path names where `kind` is written, else 0."""
    prior = np.zeros(len(sentences), dtype=np.float32)
    if kind not in _SECTIONS:
        return prior
    holds: dict[int, bool] = {}
    for n, sentence in enumerate(sentences):
        key = body.passages[sentence[2]].section
        if key not in holds:
            section = body.sections[key] if 0 <= key < len(body.sections) else None
            holds[key] = section is not None and section_holds(kind, f"{section.top} {section.title}")
        prior[n] = SECTION_PRIOR if holds[key] else 0.0
    return prior


def cue_words(kind: str, question: str) -> list[str]:
    """The question's words that name `kind` ("What are the *limitations* of NameRank?")."""
    return [word for word in words(question or "") if kind in _CUES and _matches(word, _CUES[kind])]


def dedicated_prior(kind: str, body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]]) -> np.ndarray:
    """DEDICATED_PRIOR for each sentence of a section whose own title says it is given over to `kind`, and for each
    that holds where that kind is found (a repository's address for the code), else 0."""
    prior = np.zeros(len(sentences), dtype=np.float32)
    if kind not in _DEDICATED:
        return prior
    holds: dict[int, bool] = {}
    place = _PLACES.get(kind)
    for n, sentence in enumerate(sentences):
        key = body.passages[sentence[2]].section
        if key not in holds:
            holds[key] = 0 <= key < len(body.sections) and _holds(words(body.sections[key].title), _DEDICATED[kind])
        if holds[key] or (place is not None and place.search(body.text, sentence[0], sentence[1])):
            prior[n] = DEDICATED_PRIOR
    return prior


def neighbour_prior(bonus: np.ndarray, body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]]) -> np.ndarray:
    """For each sentence, NEIGHBOUR_SHARE of the (positive) bonus of the sentence before it when both are in one
    section: a sentence that continues one holding the question's words is about them too."""
    prior = np.zeros(len(sentences), dtype=np.float32)
    for n in range(1, min(len(sentences), len(bonus))):
        if bonus[n] < NEIGHBOUR_ALONE and body.passages[sentences[n][2]].section == body.passages[
                sentences[n - 1][2]].section:
            prior[n] = NEIGHBOUR_SHARE * max(0.0, float(bonus[n - 1]))
    return prior


def number_prior(kind: str, body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]]) -> np.ndarray:
    """NUMBER_PRIOR for each sentence (or table row) that states a number, when the question's kind is one a number
    answers (results, data, settings: "How does X compare with Y" is answered by "Y achieves 0.388"), else 0."""
    if kind not in NUMBER_KINDS:
        return np.zeros(len(sentences), dtype=np.float32)
    return np.array([NUMBER_PRIOR if any(c.isdigit() for c in body.text[start:end]) else 0.0
                     for start, end, *_ in sentences], dtype=np.float32)
