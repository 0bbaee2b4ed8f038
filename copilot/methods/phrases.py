"""Noun phrases a researcher would write about their own work, cut from their papers' titles (then abstracts).

No tagger: a title is cut at its punctuation and at the words that join phrases ("for", "via", "with", "of", …), a
leading verb of the "-ing" kind ("Mitigating", "Improving") or an opener ("Towards", "A") is dropped, and what
remains of two to four words is a phrase ("object hallucinations", "retrospective replay",
"length extrapolation"). Every phrase is a slice of its source (only the case of a Title-Cased word is lowered),
so nothing is invented; the bigrams of a stop-word-free TF-IDF were not ("embeddings manipulation" joined two words
across the "for" between them, issue #59). Ranking: phrases several of the papers use first, phrases the field uses
everywhere ("large language models") left out, then the phrases nearest the papers' meaning. UI-free.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

# words that join or open phrases: a phrase never holds one
JOINERS = frozenset("""
a an the for with via of in on to from by and or but nor through using towards toward under across against beyond
without into onto over at as when where how what why which who whose is are was were be been being can could do does
did we our us you your it its their they this that these those than then between about vs versus not no more less
most least very do while within upon after before during among along around beyond whether if so such one two three
all any each both every some other another only just also even still yet is are has have had may might should would
will shall must let make makes made need needs needed meets meet beats matter matters better worse
""".split())
# a title's opening word that names no topic ("Towards …", "Rethinking …")
OPENERS = frozenset("""
rethinking revisiting understanding towards toward beyond improving enhancing boosting mitigating exploring
learning leveraging scaling unlocking unleashing bridging teaching training evaluating measuring benchmarking
investigating analyzing analysing probing assessing enabling efficient effective simple better novel new
""".split())
# "-ing" words that open a noun phrase rather than a verb's ("reasoning models", "prompting strategies")
NOUNS = frozenset("""
reasoning modeling modelling planning computing processing tuning fine-tuning prompting clustering ranking embedding
encoding decoding parsing tagging matching routing pruning editing sampling pooling thinking grounding
""".split())
# words of the field's boilerplate: a phrase made only of them names no one's topic
VAGUE = frozenset("""
approach approaches method methods framework frameworks study studies analysis survey paper work results model
models task tasks performance data system systems evaluation case perspective view insights lessons more directions
""".split())
MIN_WORDS, MAX_WORDS = 2, 4
GENERIC_SHARE = 0.05        # a phrase used by more of the field's papers than this names no one's topic
_CUT = re.compile(r"[:;,.!?()\[\]{}\"“”‘’]|\s[-–—]+\s|\s/\s|\$[^$]*\$|\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-'][A-Za-z0-9]+)*")


def _shown(word: str) -> str:
    """A Title-Cased word in lower case ("Object" → "object"); an acronym or a name keeps its case ("MLLMs",
    "DeepSeek-R1", "WorldPM")."""
    return word.lower() if re.fullmatch(r"[A-Z][a-z]+(?:-[A-Z]?[a-z]+)*", word) else word


def _runs(words: list[str]) -> list[list[str]]:
    """The word runs between joiners, each without its opening verb or opener."""
    runs: list[list[str]] = []
    current: list[str] = []
    for word in words + [""]:
        if not word or word.lower() in JOINERS:
            if current:
                runs.append(current)
            current = []
        else:
            current.append(word)
    trimmed = []
    for run in runs:
        while run and (run[0].lower() in OPENERS or (run[0].lower().endswith("ing") and run[0].lower() not in NOUNS)):
            run = run[1:]
        trimmed.append(run)
    return trimmed


def candidate_phrases(text: str) -> list[str]:
    """The phrases of one title or sentence, in order: runs of two to four words between joiners and punctuation."""
    found: list[str] = []
    for piece in _CUT.split(text or ""):
        for run in _runs(_WORD.findall(piece)):
            if not MIN_WORDS <= len(run) <= MAX_WORDS or any(w.isdigit() for w in run):
                continue
            if all(w.lower() in VAGUE for w in run) or len(run[-1]) < 3:
                continue
            found.append(" ".join(_shown(w) for w in run))
    return found


def _stem(word: str) -> str:
    return word[:-3] + "y" if word.endswith("ies") else word[:-1] if word.endswith("s") and len(word) > 3 else word


def _key(phrase: str) -> str:
    """One key for "object hallucination" and "Object Hallucinations"."""
    return " ".join(_stem(word) for word in phrase.lower().split())


def _uses(phrase_key: str, text_keys: str) -> bool:
    return f" {phrase_key} " in text_keys


def _text_keys(text: str) -> str:
    words = [_stem(w.lower()) for w in _WORD.findall(text or "")]
    return " " + " ".join(words) + " "


def _overlaps(a: str, b: str) -> bool:
    """Two phrases sharing a word say one topic twice ("object hallucinations", "hallucination mitigation")."""
    return bool(set(_key(a).split()) & set(_key(b).split()))


def research_phrases(titles: Sequence[str], texts: Sequence[str], field: Sequence[str] = (),
                     embed: Callable[[list[str]], np.ndarray] | None = None, count: int = 6) -> list[str]:
    """Up to `count` phrases naming the topics of `texts` (a researcher's papers, title and abstract each, or a text
    they wrote), best first: phrases of the `titles` before phrases of the texts; among them, phrases more of the
    texts use first, then (with `embed`) those nearest the texts' meaning. A phrase more than GENERIC_SHARE of the
    `field` documents use is left out; a phrase sharing a word with a chosen one is skipped."""
    texts = [t for t in texts if t and t.strip()]
    docs = [_text_keys(text) for text in texts]
    field_keys = [_text_keys(text) for text in field]
    centre = np.asarray(embed(list(texts)), dtype=np.float32).mean(axis=0) if embed is not None and texts else None
    chosen: list[str] = []
    for source in (titles, texts):
        pool = list(dict.fromkeys(p for text in source for p in candidate_phrases(text)))
        pool = [p for p in pool if not _generic(p, field_keys)]
        for phrase in _ranked(pool, docs, centre, embed):
            if len(chosen) >= count:
                return chosen
            if not any(_overlaps(phrase, c) for c in chosen):
                chosen.append(phrase)
    return chosen


def _generic(phrase: str, field_keys: list[str]) -> bool:
    if not field_keys:
        return False
    key = _key(phrase)
    return sum(_uses(key, text) for text in field_keys) > GENERIC_SHARE * len(field_keys)


def _ranked(pool: list[str], docs: list[str], centre: np.ndarray | None,
            embed: Callable[[list[str]], np.ndarray] | None) -> list[str]:
    if not pool:
        return []
    uses = np.array([sum(_uses(_key(p), d) for d in docs) for p in pool], dtype=np.float32)
    near = np.zeros(len(pool), dtype=np.float32)
    if centre is not None and embed is not None:
        vectors = np.asarray(embed(pool), dtype=np.float32)
        near = vectors @ centre / max(float(np.linalg.norm(centre)), 1e-9)
    order = sorted(range(len(pool)), key=lambda i: (-min(float(uses[i]), 2.0), -float(near[i]), i))
    return [pool[i] for i in order]
