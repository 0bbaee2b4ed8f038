"""What a faster embedder costs in quality: the CSFCube evaluation's abstract-to-abstract ranking (the `abstract`
method of `copilot.eval.csfcube`, no LLM involved), NDCG@20 per facet and overall, for any embedding function.

Same fold loader, texts and metrics as `python -m copilot eval csfcube`, so the numbers line up with it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from copilot.eval.csfcube import FACETS, load_fold, paper_text
from copilot.eval.metrics import ndcg_at_k, ranked_grades


def csfcube_ndcg(embed: Callable[[list[str]], np.ndarray], directory: Path) -> dict:
    """Mean NDCG@20 overall and per facet when each query paper ranks its candidates by cosine of embeddings."""
    fold = load_fold(Path(directory))
    needed = sorted({q.pid for q in fold.queries} | {c for q in fold.queries for c in q.cands})
    vectors = dict(zip(needed, embed([paper_text(fold.papers[pid]) for pid in needed])))
    scores: dict[str, list[float]] = {facet: [] for facet in FACETS}
    for query in fold.queries:
        similarity = {c: float(vectors[c] @ vectors[query.pid]) for c in query.cands}
        ranked = sorted(query.cands, key=lambda c: -similarity[c])
        scores[query.facet].append(ndcg_at_k(ranked_grades(ranked, query.grades)))
    every = [s for values in scores.values() for s in values]
    result = {"ndcg@20": round(float(np.mean(every)), 4), "queries": len(every), "texts_embedded": len(needed)}
    result.update({f"ndcg@20_{facet}": round(float(np.mean(v)), 4) for facet, v in scores.items() if v})
    return result
