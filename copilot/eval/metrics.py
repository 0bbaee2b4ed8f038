"""Ranking metrics over one query's candidates in ranked order, given their graded relevances (0-3), and paired
significance tests of one method against a baseline over the same queries.

Two NDCG definitions, both with the grade itself as gain and the ideal = the ranked candidates sorted by grade:

- ours (`ndcg@20`): discount log2(rank + 1), so rank 1 counts 1, rank 2 0.63, rank 3 0.5 (Järvelin & Kekäläinen);
- upstream CSFCube's (`upstream_ndcg@20`, `upstream_ndcg%20`): rank 1 and rank 2 both count 1, rank r >= 2 is
  discounted by log2(r) (0.63 at rank 3). Upstream's headline NDCG%20 cuts at int(0.2 × number of ranked
  candidates), i.e. the top fifth of the pool, not the top 20.

MAP and Recall@20 count a candidate as relevant when its grade reaches `threshold` (CSFCube: 2); they are the same
as upstream's. A query with no relevant candidate scores 0, as in the CSFCube scripts. The query paper itself is
never a candidate of its own ranking (`score_ranking` drops it from the ranking and from the ideal).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

RELEVANT_GRADE = 2
CUTOFF = 20
UPSTREAM_POOL_FRACTION = 0.20
METRICS = ("ndcg@20", "upstream_ndcg%20", "upstream_ndcg@20", "map", "recall@20")
TESTED_METRICS = ("upstream_ndcg@20", "ndcg@20", "upstream_ndcg%20", "map")   # compared with the baseline
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 13


def dcg_at_k(gains: Sequence[float], k: int) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))


def ndcg_at_k(ranked_grades: Sequence[float], k: int = CUTOFF) -> float:
    ideal = dcg_at_k(sorted(ranked_grades, reverse=True), k)
    return dcg_at_k(ranked_grades, k) / ideal if ideal > 0 else 0.0


def upstream_dcg_at_k(gains: Sequence[float], k: int) -> float:
    """Upstream CSFCube's DCG: the first gain undiscounted, the gain at rank r >= 2 divided by log2(r)."""
    return sum(g / (math.log2(rank) if rank > 1 else 1.0) for rank, g in enumerate(gains[:k], start=1))


def upstream_ndcg_at_k(ranked_grades: Sequence[float], k: int) -> float:
    ideal = upstream_dcg_at_k(sorted(ranked_grades, reverse=True), k)
    return upstream_dcg_at_k(ranked_grades, k) / ideal if ideal > 0 else 0.0


def upstream_pool_cutoff(pool_size: int) -> int:
    """NDCG%20's cutoff: int(0.2 × pool size) ranks (0 for a pool under 5, which then scores 0)."""
    return int(UPSTREAM_POOL_FRACTION * pool_size)


def average_precision(ranked_grades: Sequence[float], threshold: float = RELEVANT_GRADE) -> float:
    hits, precisions = 0, []
    for rank, grade in enumerate(ranked_grades, start=1):
        if grade >= threshold:
            hits += 1
            precisions.append(hits / rank)
    return sum(precisions) / len(precisions) if precisions else 0.0


def recall_at_k(ranked_grades: Sequence[float], k: int = CUTOFF, threshold: float = RELEVANT_GRADE) -> float:
    relevant = sum(1 for g in ranked_grades if g >= threshold)
    found = sum(1 for g in ranked_grades[:k] if g >= threshold)
    return found / relevant if relevant else 0.0


def query_metrics(ranked_grades: Sequence[float]) -> dict[str, float]:
    """Every metric of METRICS for one query whose whole judged pool is `ranked_grades`, in ranked order."""
    return {"ndcg@20": ndcg_at_k(ranked_grades, CUTOFF),
            "upstream_ndcg%20": upstream_ndcg_at_k(ranked_grades, upstream_pool_cutoff(len(ranked_grades))),
            "upstream_ndcg@20": upstream_ndcg_at_k(ranked_grades, CUTOFF),
            "map": average_precision(ranked_grades),
            "recall@20": recall_at_k(ranked_grades, CUTOFF)}


def ranked_grades(ranked_ids: Sequence[str], grades: Mapping[str, float]) -> list[float]:
    """Grades in ranked order; an id without a judgement counts as 0."""
    return [grades.get(item, 0) for item in ranked_ids]


def score_ranking(ranked_ids: Sequence[str], grades: Mapping[str, float], query_id: str) -> dict[str, float]:
    """query_metrics of a ranking of the query's pool, without the query paper itself: it is neither a hit in the
    ranking nor part of the ideal ranking or the pool size."""
    return query_metrics(ranked_grades([item for item in ranked_ids if item != query_id], grades))


def mean_metrics(per_query: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over queries, plus the query count."""
    rows = list(per_query)
    means = {name: (sum(r[name] for r in rows) / len(rows) if rows else 0.0) for name in METRICS}
    return {**means, "queries": len(rows)}


# --- paired significance over queries
def sign_test_p(wins: int, losses: int) -> float:
    """Exact two-sided sign test: the chance of a split at least this uneven when wins and losses are equally
    likely (ties are left out before calling)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_bootstrap(differences: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED) -> dict[str, float]:
    """Resample queries with replacement (seeded). Returns the 95% percentile interval of the mean difference and
    a two-sided p-value: how often the mean of a resample of the differences shifted to mean 0 is at least as far
    from 0 as the observed mean ((count + 1) / (resamples + 1))."""
    values = np.asarray(differences, dtype=float)
    if values.size == 0:
        return {"ci_low": 0.0, "ci_high": 0.0, "p": 1.0}
    picks = np.random.default_rng(seed).integers(0, values.size, size=(resamples, values.size))
    means = values[picks].mean(axis=1)
    observed = values.mean()
    null_means = means - observed
    extreme = int(np.sum(np.abs(null_means) >= abs(observed) - 1e-12))
    low, high = np.percentile(means, [2.5, 97.5])
    return {"ci_low": float(low), "ci_high": float(high), "p": (extreme + 1) / (resamples + 1)}


def compare_paired(method: Sequence[float], baseline: Sequence[float], tie: float = 1e-9,
                   resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict[str, float]:
    """One metric of a method against the baseline, query by query (same order): the mean difference, wins /
    losses / ties (|difference| <= `tie` is a tie), the sign test's p and the paired bootstrap's interval and p."""
    if len(method) != len(baseline):
        raise ValueError(f"paired scores differ in length: {len(method)} vs {len(baseline)}")
    differences = [m - b for m, b in zip(method, baseline)]
    wins = sum(1 for d in differences if d > tie)
    losses = sum(1 for d in differences if d < -tie)
    boot = paired_bootstrap(differences, resamples, seed)
    return {"queries": len(differences), "mean_difference": float(np.mean(differences)) if differences else 0.0,
            "wins": wins, "losses": losses, "ties": len(differences) - wins - losses,
            "sign_test_p": sign_test_p(wins, losses), "bootstrap_ci_low": boot["ci_low"],
            "bootstrap_ci_high": boot["ci_high"], "bootstrap_p": boot["p"]}


_WORD = re.compile(r"[a-z0-9]+")


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 over lower-cased word tokens (the longest common subsequence; beta = 1)."""
    a, b = _WORD.findall(candidate.lower()), _WORD.findall(reference.lower())
    if not a or not b:
        return 0.0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    lcs = previous[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(a), lcs / len(b)
    return 2 * precision * recall / (precision + recall)
