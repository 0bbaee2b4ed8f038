"""Why one fused ranking beats another on CSFCube: each of its lists alone, and each fused with the abstract alone.

docs/related-eval.md ("Why PRISM lost") reads these numbers: every aspect query alone against the abstract, the
title alone, abstract + title, abstract + BM25. They come from the lists the evaluation itself ranked with
(`Report.lists`: product ranking → query → its ranked lists by name), so they need no embedding and no LLM call of
their own; with `prism` or `prism-hybrid` in the run, the LLM's aspect lists are among them.
"""

from __future__ import annotations

import numpy as np

from copilot.eval.csfcube import BASELINE, SELECTION_METRIC, Report
from copilot.eval.metrics import score_ranking
from copilot.methods import prism
from copilot.methods.fusion import reciprocal_rank_fusion


def list_ablation(report: Report) -> dict:
    """{ranking: {"alone": {list: mean}, "with_abstract": {list: mean}}} of upstream NDCG@20 over the run's queries
    (RRF at the product's k, weights 1 / 1 for a pair); "abstract" holds the baseline's mean."""
    by_key = {q.key: q for q in report.queries}
    out: dict = {"abstract": float(np.mean([r[SELECTION_METRIC] for r in report.per_query[BASELINE].values()]))}

    def mean_of(rank, name: str) -> float:
        """Over the queries that have list `name` (an aspect with no query is missing for some papers)."""
        return float(np.mean([score_ranking(rank(named), by_key[key].grades, by_key[key].pid)[SELECTION_METRIC]
                              for key, named in per_key.items() if name in named]))

    for method, per_key in report.lists.items():
        if not per_key or method == BASELINE:
            continue
        names = list(dict.fromkeys(n for named in per_key.values() for n in named))
        alone = {name: mean_of(lambda named, n=name: list(named[n]), name) for name in names}
        paired = {name: mean_of(lambda named, n=name: [i for i, _, _ in reciprocal_rank_fusion(
                      {prism.ABSTRACT: named.get(prism.ABSTRACT, []), n: named[n]})], name)
                  for name in names if name != prism.ABSTRACT}
        queries = {name: sum(name in named for named in per_key.values()) for name in names}
        out[method] = {"alone": alone, "with_abstract": paired, "queries": queries}
    return out


def markdown(ablation: dict) -> str:
    if len(ablation) < 2:
        return ""
    lines = [f"Each list of a ranking alone and fused with the abstract (upstream NDCG@20; abstract alone "
             f"{100 * ablation['abstract']:.2f}):", "",
             "| ranking | list | alone | Δ vs abstract (all queries) | abstract + list |",
             "|---|---|---|---|---|"]
    for method, parts in ablation.items():
        if method == "abstract":
            continue
        for name, value in parts["alone"].items():
            pair = parts["with_abstract"].get(name)
            lines.append(f"| {method} | {name} ({parts['queries'][name]} queries) | {100 * value:.2f} | "
                         f"{100 * (value - ablation['abstract']):+.2f} | "
                         + (f"{100 * pair:.2f}" if pair is not None else "—") + " |")
    return "\n".join(lines)
