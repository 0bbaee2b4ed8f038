"""Fusing ranked lists into one ranking.

Reciprocal Rank Fusion: RRF(d) = sum over lists of w_list / (k + rank(d)), ranks from 1, absent items add 0, every
weight 1 unless given. Score fusion: the sum over lists of w_list × the list's scores standardised per list
(z-scores), over the items every list scored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

RRF_K = 60


def reciprocal_rank_fusion(ranked_lists: Mapping[str, Sequence[str]] | Sequence[Sequence[str]],
                           k: int = RRF_K, weights: Mapping[str, float] | None = None,
                           ) -> list[tuple[str, float, dict[str, int]]]:
    """Fuse ranked id lists. Returns (id, score, {list name: rank}) best first; ties keep first-seen order.

    `ranked_lists` is either a mapping name → ids or a plain sequence of id lists (named "0", "1", …).
    Duplicates inside one list count once, at their best rank. `weights` maps a list name to its weight (1 for
    a name it does not list); a list of weight 0 still reports its ranks but adds nothing.
    """
    named = ranked_lists.items() if isinstance(ranked_lists, Mapping) else \
        ((str(i), ids) for i, ids in enumerate(ranked_lists))
    weights = weights or {}
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, ids in named:
        weight = float(weights.get(name, 1.0))
        seen: set[str] = set()
        for rank, item in enumerate(ids, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            ranks.setdefault(item, {})[name] = rank
    order = sorted(scores, key=lambda item: -scores[item])
    return [(item, scores[item], ranks[item]) for item in order]


def score_fusion(scored_lists: Mapping[str, Mapping[str, float]],
                 weights: Mapping[str, float] | None = None) -> list[tuple[str, float]]:
    """Fuse lists that carry scores: each list's scores are standardised (mean 0, standard deviation 1 over the
    items it scored; a constant list adds 0), weighted and summed. An item a list did not score gets that list's
    lowest standardised score, so a missing item is not rewarded. (id, fused score) best first; ties keep
    first-seen order."""
    weights = weights or {}
    order = list(dict.fromkeys(item for scores in scored_lists.values() for item in scores))
    total = dict.fromkeys(order, 0.0)
    for name, scores in scored_lists.items():
        if not scores:
            continue
        values = np.array(list(scores.values()), dtype=np.float64)
        spread = values.std()
        if spread == 0:
            continue
        floor = (values.min() - values.mean()) / spread
        weight = float(weights.get(name, 1.0))
        for item in order:
            standard = (scores[item] - values.mean()) / spread if item in scores else floor
            total[item] += weight * standard
    ranked = sorted(order, key=lambda item: -total[item])
    return [(item, total[item]) for item in ranked]
