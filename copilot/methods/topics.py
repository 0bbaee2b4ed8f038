"""Topics of a set of papers: k-means on their embeddings, class-based TF-IDF labels, counts over time,
and rising/falling against the previous window of equal length. UI-free; no store, no model.

Rising is measured on one partition of the embedding space: the previous window's papers are assigned to the
nearest current topic centroid, and a topic's share of its window is compared between the two windows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np

from copilot.records import Paper

MAX_TOPICS = 8
RISE_RATIO = 1.25        # share now ≥ 1.25 × share before …
RISE_POINTS = 0.02       # … and at least 2 points of share more, and …
RISE_MIN_PAPERS = 2      # … at least 2 papers now
# The previous window needs this many papers for shares to compare (issue #59: against a window of 1 paper, seven of
# eight topics read "rising" by more than 50 points); with fewer, no topic is marked rising or falling.
MIN_PREVIOUS_PAPERS = 30
# A term names a topic only when at least this many of its papers use it (not one paper's acronym repeated: "rek")
LABEL_MIN_PAPERS = 2
# Whole words only, digits and inner hyphens included ("deepseek-r1", "gpt-4o"): the earlier letters-only pattern cut
# "deepseek-r1" to "deepseek-" (issue #59). At least three characters, starting with a letter.
_TOKEN = r"(?u)(?<![\w-])(?=[a-zA-Z][a-zA-Z0-9-]{2})[a-zA-Z][a-zA-Z0-9]*(?:-[a-zA-Z0-9]+)*(?![\w-])"

_LATEX = re.compile(r"\$[^$]*\$|\\[a-zA-Z]+|https?://\S+")
DOMAIN_STOP_WORDS = frozenset("""
paper papers propose proposed proposes approach approaches method methods model models results result show shows
shown using use used based new novel work works task tasks performance data dataset datasets existing study
framework frameworks problem problems also however significantly significant state art demonstrate demonstrates
achieve achieves achieving improve improves improved improvement improvements experiments experimental extensive
effective effectively efficient various different large language llm llms ai learning neural network networks
approach introduce introduces present presents address addresses key code available github com https
""".split())


@dataclass
class Topic:
    index: int                              # 0 = largest
    label: str
    terms: list[str]
    paper_ids: list[str]                    # closest to the topic centre first
    counts: dict[str, int]                  # bucket start (ISO date) → papers
    previous: int | None = None             # papers of the previous window nearest to this topic
    share: float = 0.0
    previous_share: float | None = None
    rising: bool | None = None              # None: no previous window to compare with
    falling: bool | None = None
    summary: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.paper_ids)

    @property
    def change(self) -> float | None:
        """Share now minus share in the previous window (fraction of the window's papers)."""
        return None if self.previous_share is None else self.share - self.previous_share


# --- clustering --------------------------------------------------------------------------------------------
def topic_count(n_papers: int, max_topics: int = MAX_TOPICS) -> int:
    """Heuristic k: about sqrt(n/3), between 2 and max_topics; 1 for fewer than 6 papers."""
    if n_papers < 6:
        return 1
    return int(min(max_topics, max(2, round(math.sqrt(n_papers / 3)))))


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def cluster(embeddings: np.ndarray, k: int | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """K-means on unit vectors. Returns (labels, unit centroids); topic 0 is the largest, ties by first paper."""
    from sklearn.cluster import KMeans

    vectors = _unit(embeddings)
    n = len(vectors)
    if n == 0:
        return np.zeros(0, dtype=int), np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 0), np.float32)
    k = min(k or topic_count(n), n)
    if k <= 1:
        return np.zeros(n, dtype=int), _unit(vectors.mean(axis=0, keepdims=True))
    model = KMeans(n_clusters=k, n_init=5, random_state=seed).fit(vectors)
    raw = model.labels_
    order = sorted(range(k), key=lambda c: (-int((raw == c).sum()), int(np.argmax(raw == c))))
    remap = np.empty(k, dtype=int)
    remap[order] = np.arange(k)
    return remap[raw], _unit(model.cluster_centers_[order])


def assign(embeddings: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Nearest centroid (cosine) of each vector."""
    if len(embeddings) == 0:
        return np.zeros(0, dtype=int)
    return np.argmax(_unit(embeddings) @ centroids.T, axis=1)


# --- labels ------------------------------------------------------------------------------------------------
def _clean(text: str) -> str:
    return _LATEX.sub(" ", text)


def topic_terms(documents: Sequence[str], labels: np.ndarray | Sequence[int], top_n: int = 6) -> list[list[str]]:
    """Class-based TF-IDF (as in BERTopic): one document per topic; tf normalised per topic,
    idf = log(1 + mean words per topic / frequency of the term over all topics). Best terms first; a term
    that overlaps a better one ("graph" under "graph neural", "agents" under "agent") is skipped."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

    labels = np.asarray(labels)
    k = int(labels.max()) + 1 if len(labels) else 0
    if k == 0:
        return []
    joined = [" ".join(_clean(documents[int(i)]) for i in np.flatnonzero(labels == c)) for c in range(k)]
    vectorizer = CountVectorizer(stop_words=sorted(ENGLISH_STOP_WORDS | DOMAIN_STOP_WORDS), ngram_range=(1, 2),
                                 token_pattern=_TOKEN, lowercase=True)
    try:
        counts = vectorizer.fit_transform(joined).toarray().astype(np.float64)
    except ValueError:  # nothing but stop words
        return [[] for _ in range(k)]
    used = vectorizer.transform([_clean(d) for d in documents]) > 0           # paper × term: does it use the term
    papers_using = np.vstack([np.asarray(used[np.flatnonzero(labels == c)].sum(axis=0)).ravel() for c in range(k)])
    vocabulary = vectorizer.get_feature_names_out()
    per_topic_words = counts.sum(axis=1, keepdims=True)
    tf = counts / np.where(per_topic_words == 0, 1, per_topic_words)
    idf = np.log(1 + per_topic_words.mean() / np.maximum(counts.sum(axis=0), 1))
    # a term must occur in at least two of its topic's papers (unless the topic is tiny) to name it
    sizes = np.bincount(labels, minlength=k)[:, None]
    scores = tf * idf * (papers_using >= np.minimum(LABEL_MIN_PAPERS, sizes))
    result = []
    for c in range(k):
        chosen: list[str] = []
        for j in np.argsort(-scores[c], kind="stable"):
            if scores[c, j] <= 0 or len(chosen) >= top_n:
                break
            term = str(vocabulary[j])
            words = _stems(term)
            if any(words & _stems(other) for other in chosen):
                continue
            chosen.append(term)
        result.append(chosen)
    return result


def _stems(term: str) -> set[str]:
    """Words of a term with a plural "s" folded, so "agent" and "agents" count as one."""
    return {w[:-1] if w.endswith("s") and not w.endswith("ss") and len(w) > 3 else w for w in term.split()}


def label_of(terms: Sequence[str], index: int) -> str:
    return " · ".join(terms[:3]) if terms else f"topic {index + 1}"


# --- time --------------------------------------------------------------------------------------------------
def bucket_unit(start: date, end: date) -> str:
    """Days for ranges up to two weeks, else weeks (starting on the range's first day)."""
    return "day" if (end - start).days < 14 else "week"


def buckets(start: date, end: date, unit: str) -> list[date]:
    step = timedelta(days=1 if unit == "day" else 7)
    days, current = [], start
    while current <= end:
        days.append(current)
        current += step
    return days


def bucket_of(day: date, start: date, unit: str) -> date:
    width = 1 if unit == "day" else 7
    return start + timedelta(days=((day - start).days // width) * width)


def counts_over_time(dates: Sequence[date], start: date, end: date, unit: str) -> dict[str, int]:
    counts = {b.isoformat(): 0 for b in buckets(start, end, unit)}
    for day in dates:
        if start <= day <= end:
            counts[bucket_of(day, start, unit).isoformat()] += 1
    return counts


def previous_window(start: date, end: date) -> tuple[date, date]:
    """The window of equal length just before [start, end]."""
    length = (end - start).days + 1
    return start - timedelta(days=length), start - timedelta(days=1)


# --- rising and falling ------------------------------------------------------------------------------------
def rise_flags(now: int, total_now: int, before: int, total_before: int) -> tuple[bool | None, bool | None]:
    """(rising, falling) of one topic from its counts in two windows; (None, None) without a previous window."""
    if total_before <= 0 or total_now <= 0:
        return None, None
    share, previous = now / total_now, before / total_before
    rising = now >= RISE_MIN_PAPERS and share >= RISE_RATIO * previous and share - previous >= RISE_POINTS
    falling = previous >= RISE_RATIO * share and previous - share >= RISE_POINTS
    return rising, falling


# --- everything together -----------------------------------------------------------------------------------
def build_topics(papers: Sequence[Paper], embeddings: np.ndarray, start: date, end: date,
                 previous_embeddings: np.ndarray | None = None, k: int | None = None, seed: int = 0,
                 top_terms: int = 6) -> list[Topic]:
    """Topics of `papers` (row i of `embeddings` is papers[i]), largest first, with counts per day/week and
    rising/falling against the previous window's papers (`previous_embeddings`; None, or fewer than
    MIN_PREVIOUS_PAPERS = unknown)."""
    if not papers:
        return []
    embeddings = np.asarray(embeddings, dtype=np.float32)
    labels, centroids = cluster(embeddings, k, seed)
    terms = topic_terms([p.document for p in papers], labels, top_terms)
    unit = bucket_unit(start, end)
    closeness = _unit(embeddings) @ centroids.T
    before = np.zeros(len(centroids), dtype=int)
    total_before = 0
    if previous_embeddings is not None and len(previous_embeddings):
        before = np.bincount(assign(previous_embeddings, centroids), minlength=len(centroids))
        total_before = int(before.sum()) if len(previous_embeddings) >= MIN_PREVIOUS_PAPERS else 0
    topics = []
    for c in range(len(centroids)):
        members = np.flatnonzero(labels == c)
        members = members[np.argsort(-closeness[members, c], kind="stable")]
        rising, falling = rise_flags(len(members), len(papers), int(before[c]), total_before)
        topics.append(Topic(
            index=c, label=label_of(terms[c], c), terms=terms[c], paper_ids=[papers[int(i)].id for i in members],
            counts=counts_over_time([papers[int(i)].published for i in members], start, end, unit),
            previous=int(before[c]) if total_before else None, share=len(members) / len(papers),
            previous_share=before[c] / total_before if total_before else None, rising=rising, falling=falling))
    return topics
