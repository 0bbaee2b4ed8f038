"""Ranking metrics over one query's candidates in ranked order, given their graded relevances (0-3).

NDCG uses the graded relevance as gain with a log2(rank + 1) discount; the ideal ranking is the query's
judged candidates sorted by relevance. MAP and Recall count a candidate as relevant when its grade reaches
`threshold` (CSFCube: 2). A query with no relevant candidate scores 0, as in the CSFCube scripts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

RELEVANT_GRADE = 2
CUTOFF = 20
METRICS = ("ndcg@20", "map", "recall@20")


def dcg_at_k(gains: Sequence[float], k: int) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))


def ndcg_at_k(ranked_grades: Sequence[float], k: int = CUTOFF) -> float:
    ideal = dcg_at_k(sorted(ranked_grades, reverse=True), k)
    return dcg_at_k(ranked_grades, k) / ideal if ideal > 0 else 0.0


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
    return {"ndcg@20": ndcg_at_k(ranked_grades, CUTOFF), "map": average_precision(ranked_grades),
            "recall@20": recall_at_k(ranked_grades, CUTOFF)}


def ranked_grades(ranked_ids: Sequence[str], grades: Mapping[str, float]) -> list[float]:
    """Grades in ranked order; an id without a judgement counts as 0."""
    return [grades.get(item, 0) for item in ranked_ids]


def mean_metrics(per_query: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over queries, plus the query count."""
    rows = list(per_query)
    means = {name: (sum(r[name] for r in rows) / len(rows) if rows else 0.0) for name in METRICS}
    return {**means, "queries": len(rows)}
