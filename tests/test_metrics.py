"""Ranking metrics and paired significance tests, against values worked out by hand on hand-made rankings.

Upstream CSFCube's NDCG discounts rank r >= 2 by log2(r) (ranks 1 and 2 both count fully); ours discounts rank r
by log2(r + 1). NDCG%20 cuts at int(0.2 × pool size)."""

from __future__ import annotations

import math

import pytest

from copilot.eval.metrics import (
    METRICS,
    average_precision,
    compare_paired,
    dcg_at_k,
    mean_metrics,
    ndcg_at_k,
    paired_bootstrap,
    query_metrics,
    recall_at_k,
    score_ranking,
    sign_test_p,
    upstream_dcg_at_k,
    upstream_ndcg_at_k,
    upstream_pool_cutoff,
)

L2, L3, L4, L5 = math.log2(2), math.log2(3), math.log2(4), math.log2(5)


# --- the two DCG discounts
def test_dcg_discounts_differ_from_rank_two_on():
    assert dcg_at_k([3, 2, 1], 3) == pytest.approx(3 / L2 + 2 / L3 + 1 / L4)
    assert upstream_dcg_at_k([3, 2, 1], 3) == pytest.approx(3 + 2 / L2 + 1 / L3)   # rank 2 undiscounted
    assert dcg_at_k([3], 5) == upstream_dcg_at_k([3], 5) == 3.0
    assert dcg_at_k([], 5) == upstream_dcg_at_k([], 5) == 0.0


def test_ndcg_variants_on_a_hand_made_ranking():
    grades = [3, 0, 2, 1]
    ours = (3 / L2 + 2 / L4 + 1 / L5) / (3 / L2 + 2 / L3 + 1 / L4)
    upstream = (3 + 2 / L3 + 1 / L4) / (3 + 2 / L2 + 1 / L3)
    assert ndcg_at_k(grades, 20) == pytest.approx(ours) == pytest.approx(0.930451, abs=1e-6)
    assert upstream_ndcg_at_k(grades, 20) == pytest.approx(upstream) == pytest.approx(0.845661, abs=1e-6)
    assert upstream_ndcg_at_k([2, 1, 2, 0], 4) == pytest.approx(0.920303, abs=1e-6)
    # a swap of ranks 1 and 2 costs nothing upstream, something in ours
    assert upstream_ndcg_at_k([2, 3], 2) == 1.0 and ndcg_at_k([2, 3], 2) < 1.0


@pytest.mark.parametrize("pool, cutoff", [(4, 0), (5, 1), (10, 2), (99, 19), (100, 20), (101, 20), (251, 50)])
def test_upstream_pool_cutoff_is_a_fifth_rounded_down(pool, cutoff):
    assert upstream_pool_cutoff(pool) == cutoff


def test_ndcg_percent_20_cuts_at_a_fifth_of_the_pool():
    pool = [0, 3] + [0] * 6 + [3, 0]                       # 10 candidates: cutoff 2
    m = query_metrics(pool)
    assert m["upstream_ndcg%20"] == pytest.approx((3 / L2) / (3 + 3 / L2))
    assert m["upstream_ndcg@20"] == pytest.approx((3 / L2 + 3 / math.log2(9)) / (3 + 3 / L2))
    assert query_metrics([3, 0, 0, 0])["upstream_ndcg%20"] == 0.0          # pool of 4: cutoff 0


def test_average_precision_and_recall():
    assert average_precision([3, 0, 2, 1]) == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert recall_at_k([3, 0, 2, 1], 20) == 1.0 and recall_at_k([3, 0, 2, 1], 2) == 0.5
    assert query_metrics([1, 1, 0])["map"] == 0.0 and query_metrics([1, 1, 0])["recall@20"] == 0.0


def test_cutoff_and_no_relevant():
    late = [0] * 20 + [3] + [0] * 4
    assert ndcg_at_k(late, 20) == 0.0 and upstream_ndcg_at_k(late, 20) == 0.0 and recall_at_k(late, 20) == 0.0
    assert average_precision(late) == pytest.approx(1 / 21)
    assert ndcg_at_k(late, 21) == pytest.approx(1 / math.log2(22))
    assert upstream_ndcg_at_k(late, 21) == pytest.approx((3 / math.log2(21)) / 3)
    assert query_metrics([0, 0]) == dict.fromkeys(METRICS, 0.0)


def test_a_perfect_ranking_scores_one_on_every_metric():
    assert query_metrics([3, 2, 2, 1, 0]) == dict.fromkeys(METRICS, 1.0)


# --- the query paper inside its own pool
def test_the_query_paper_is_no_hit_of_its_own_ranking():
    grades = {"q": 3, "a": 2, "b": 0, "c": 1, "d": 0}
    ranking = ["q", "b", "a", "c", "d"]               # the query ranks itself first, as a cosine ranker does
    fixed = score_ranking(ranking, grades, "q")
    assert fixed == query_metrics([0, 2, 1, 0])
    assert fixed["ndcg@20"] == pytest.approx((2 / L3 + 1 / L4) / (2 / L2 + 1 / L3))
    assert fixed["upstream_ndcg@20"] == pytest.approx((2 + 1 / L3) / (2 + 1))
    assert fixed["upstream_ndcg%20"] == 0.0           # 4 candidates left: cutoff int(0.8) = 0
    assert fixed["map"] == pytest.approx(1 / 2) and fixed["recall@20"] == 1.0
    inflated = query_metrics([3, 0, 2, 1, 0])         # what counting it gave
    assert inflated["map"] == pytest.approx((1 + 2 / 3) / 2) and inflated["ndcg@20"] > fixed["ndcg@20"]


def test_the_query_paper_leaves_the_ideal_and_the_pool_size():
    grades = {f"c{i}": 0 for i in range(9)} | {"q": 3, "c0": 2}
    ranking = [f"c{i}" for i in range(9)] + ["q"]     # ranked last: it still must not count in the ideal
    m = score_ranking(ranking, grades, "q")
    assert m["ndcg@20"] == 1.0 and m["upstream_ndcg@20"] == 1.0 and m["map"] == 1.0
    assert m["upstream_ndcg%20"] == 1.0               # 9 left: cutoff 1, c0 is there
    assert query_metrics([2] + [0] * 8 + [3])["ndcg@20"] < 1.0


def test_mean_metrics():
    rows = [dict.fromkeys(METRICS, 1.0), dict.fromkeys(METRICS, 0.0)]
    assert mean_metrics(rows) == {**dict.fromkeys(METRICS, 0.5), "queries": 2}
    assert mean_metrics([]) == {**dict.fromkeys(METRICS, 0.0), "queries": 0}


# --- paired significance
@pytest.mark.parametrize("wins, losses, p", [
    (0, 0, 1.0), (1, 0, 1.0), (5, 0, 2 / 32), (0, 5, 2 / 32), (3, 2, 1.0), (15, 9, 0.307456),
    (8, 16, 0.151590), (20, 4, 0.001544),
])
def test_sign_test_is_the_exact_two_sided_binomial(wins, losses, p):
    assert sign_test_p(wins, losses) == pytest.approx(p, abs=1e-6)


def test_bootstrap_is_seeded_and_brackets_the_mean():
    differences = [0.1, 0.2, -0.05, 0.15, 0.0, 0.3, -0.1, 0.2]
    first, again = paired_bootstrap(differences), paired_bootstrap(differences)
    assert first == again
    assert first["ci_low"] < sum(differences) / len(differences) < first["ci_high"]
    assert paired_bootstrap(differences, seed=1) != first


def test_bootstrap_p_separates_a_clear_gain_from_noise():
    assert paired_bootstrap([0.1] * 12 + [0.12] * 12)["p"] < 0.001
    assert paired_bootstrap([0.1, -0.1] * 12)["p"] > 0.9
    assert paired_bootstrap([0.0] * 6) == {"ci_low": 0.0, "ci_high": 0.0, "p": 1.0}
    assert paired_bootstrap([]) == {"ci_low": 0.0, "ci_high": 0.0, "p": 1.0}


def test_compare_paired_counts_wins_losses_and_ties():
    result = compare_paired([0.5, 0.7, 0.2, 0.4], [0.4, 0.7, 0.3, 0.1])
    assert (result["wins"], result["losses"], result["ties"], result["queries"]) == (2, 1, 1, 4)
    assert result["mean_difference"] == pytest.approx((0.1 + 0 - 0.1 + 0.3) / 4)
    assert result["sign_test_p"] == 1.0
    assert result["bootstrap_ci_low"] <= result["mean_difference"] <= result["bootstrap_ci_high"]
    with pytest.raises(ValueError, match="length"):
        compare_paired([0.1], [0.1, 0.2])
