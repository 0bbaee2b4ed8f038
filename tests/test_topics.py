"""Topics (methods/topics.py): clustering, c-TF-IDF labels, counts over time and rising/falling logic, on a
fixed two-month slice of the real corpus (April and May 2025, every 10th paper) with the real embedder."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pytest

from copilot.embed import Embedder
from copilot.methods import topics as tp
from tests.conftest import sample_papers

APRIL = (850, 850)      # file rows of April 2025 (the file is sorted by listing date, 850 papers a month)
MAY = (1700, 850)


@pytest.fixture(scope="module")
def slice_():
    april = sample_papers(APRIL[1], APRIL[0])[::10]
    may = sample_papers(MAY[1], MAY[0])[::10]
    assert {p.published.month for p in april} == {4} and {p.published.month for p in may} == {5}
    embedder = Embedder()
    return april, embedder.embed([p.document for p in april]), may, embedder.embed([p.document for p in may])


def test_clusters_are_deterministic_sorted_by_size_and_cover_every_paper(slice_):
    _, _, may, vectors = slice_
    labels, centroids = tp.cluster(vectors)
    again, _ = tp.cluster(vectors)
    k = tp.topic_count(len(may))
    assert 2 <= k <= tp.MAX_TOPICS and len(centroids) == k
    assert (labels == again).all()
    sizes = np.bincount(labels, minlength=k)
    assert (sizes > 0).all() and list(sizes) == sorted(sizes, reverse=True)
    assert np.allclose(np.linalg.norm(centroids, axis=1), 1, atol=1e-5)


def test_topic_terms_are_distinctive_for_their_cluster(slice_):
    _, _, may, vectors = slice_
    labels, _ = tp.cluster(vectors)
    terms = tp.topic_terms([p.document for p in may], labels)
    docs = [p.document.lower() for p in may]
    for c, words in enumerate(terms):
        assert words, f"topic {c} got no terms"
        top = words[0]
        inside = np.mean([top in docs[i] for i in np.flatnonzero(labels == c)])
        outside = np.mean([top in docs[i] for i in np.flatnonzero(labels != c)])
        assert inside > outside, f"topic {c}: '{top}' is not distinctive ({inside:.2f} vs {outside:.2f})"
        assert not set(words) & tp.DOMAIN_STOP_WORDS


def test_counts_per_week_over_two_months(slice_):
    april, april_vecs, may, may_vecs = slice_
    papers, vectors = april + may, np.vstack([april_vecs, may_vecs])
    start, end = date(2025, 4, 1), date(2025, 5, 31)
    topics = tp.build_topics(papers, vectors, start, end)
    assert tp.bucket_unit(start, end) == "week"
    keys = list(topics[0].counts)
    assert keys[0] == "2025-04-01" and all(date.fromisoformat(b) - date.fromisoformat(a) == timedelta(days=7)
                                           for a, b in zip(keys, keys[1:]))
    assert sum(t.size for t in topics) == len(papers)
    by_id = {p.id: p for p in papers}
    for topic in topics:
        assert sum(topic.counts.values()) == topic.size
        first = by_id[topic.paper_ids[0]].published
        assert topic.counts[tp.bucket_of(first, start, "week").isoformat()] >= 1


def test_rising_and_falling_against_the_previous_window(slice_):
    april, april_vecs, may, may_vecs = slice_
    start, end = date(2025, 5, 1), date(2025, 5, 31)
    plain = tp.build_topics(may, may_vecs, start, end, april_vecs)
    assert sum(t.previous for t in plain) == len(april)
    for t in plain:
        assert (t.rising, t.falling) == tp.rise_flags(t.size, len(may), t.previous, len(april))

    # Shift the previous month on purpose: drop April's papers nearest topic 0 (so topic 0 must rise) and
    # triple those nearest topic 1 (so topic 1 must fall).
    _, centroids = tp.cluster(may_vecs)
    nearest = tp.assign(april_vecs, centroids)
    shifted = np.vstack([april_vecs[nearest > 1], *[april_vecs[nearest == 1]] * 3])
    moved = tp.build_topics(may, may_vecs, start, end, shifted)
    assert moved[0].previous == 0 and moved[0].rising is True and moved[0].falling is False
    assert moved[1].falling is True and moved[1].rising is False
    assert moved[1].change < 0 < moved[0].change


def test_without_a_previous_window_rising_is_unknown(slice_):
    _, _, may, vectors = slice_
    topics = tp.build_topics(may[:40], vectors[:40], date(2025, 5, 1), date(2025, 5, 7))
    assert all(t.rising is None and t.previous is None and t.change is None for t in topics)
    assert tp.bucket_unit(date(2025, 5, 1), date(2025, 5, 7)) == "day"
    assert len(topics[0].counts) == 7


@pytest.mark.parametrize("now, total_now, before, total_before, expected", [
    (30, 100, 10, 100, (True, False)),     # 30% vs 10%
    (10, 100, 30, 100, (False, True)),     # 10% vs 30%
    (11, 100, 10, 100, (False, False)),    # 11% vs 10%: not enough
    (1, 10, 0, 100, (False, False)),       # one paper is not a trend
    (2, 10, 0, 100, (True, False)),
    (5, 50, 5, 0, (None, None)),           # no previous window
])
def test_rise_flags(now, total_now, before, total_before, expected):
    assert tp.rise_flags(now, total_now, before, total_before) == expected


def test_class_based_tfidf_on_hand_made_documents():
    docs = ["graph neural message passing graph", "graph neural pooling graph nodes",
            "speech recognition acoustic speech", "speech synthesis acoustic vocoder speech"]
    terms = tp.topic_terms(docs, [0, 0, 1, 1], top_n=3)
    assert terms[0][0].startswith("graph") and terms[1][0].startswith("speech") or terms[1][0] == "acoustic"
    assert not {w for t in terms[0] for w in t.split()} & {"speech", "acoustic"}
    assert tp.label_of([], 2) == "topic 3"


def test_previous_window_has_equal_length():
    assert tp.previous_window(date(2025, 5, 1), date(2025, 5, 31)) == (date(2025, 3, 31), date(2025, 4, 30))
    assert tp.previous_window(date(2025, 5, 7), date(2025, 5, 7)) == (date(2025, 5, 6), date(2025, 5, 6))
    assert tp.build_topics([], np.zeros((0, 3)), date(2025, 5, 1), date(2025, 5, 2)) == []


def test_plural_forms_do_not_both_name_a_topic():
    terms = tp.topic_terms(["agents agent agents tool tool use agent", "speech asr asr speech"], [0, 1])
    assert len([t for t in terms[0] if t.rstrip("s") == "agent"]) == 1
