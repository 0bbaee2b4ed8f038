"""Reciprocal Rank Fusion: RRF(d) = sum over lists of 1 / (k + rank(d)), ranks from 1; absent items add 0."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RRF_K = 60


def reciprocal_rank_fusion(ranked_lists: Mapping[str, Sequence[str]] | Sequence[Sequence[str]],
                           k: int = RRF_K) -> list[tuple[str, float, dict[str, int]]]:
    """Fuse ranked id lists. Returns (id, score, {list name: rank}) best first; ties keep first-seen order.

    `ranked_lists` is either a mapping name → ids or a plain sequence of id lists (named "0", "1", …).
    Duplicates inside one list count once, at their best rank.
    """
    named = ranked_lists.items() if isinstance(ranked_lists, Mapping) else \
        ((str(i), ids) for i, ids in enumerate(ranked_lists))
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, ids in named:
        seen: set[str] = set()
        for rank, item in enumerate(ids, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            ranks.setdefault(item, {})[name] = rank
    order = sorted(scores, key=lambda item: -scores[item])
    return [(item, scores[item], ranks[item]) for item in order]
