"""The Related default chosen by a nested procedure on CSFCube (issue #32).

`csfcube.choose_default` picks the default among the product's rankings on the same queries it then reports the
default's score on, so that score flatters the choice. Here the choice itself is held out: leave one query paper
out at a time (its facets go together, as in `csfcube.cross_validate`), apply the very same rule
(`choose_default`: best mean upstream NDCG@20 among the rankings that beat `abstract` by the paired bootstrap with
no facet more than a point below it) to the other papers' queries, and score the held-out paper's queries with the
ranking chosen without them. The mean over every held-out query estimates what "choose by this rule" is worth on
queries it did not see; it is reported beside the in-sample figure of the chosen default.

The choice is among the rankings of the run (with their shipped weights); the rankings' per-query scores are the
run's own, so this costs no embedding and no LLM call.
"""

from __future__ import annotations

from collections import Counter

from copilot.eval.csfcube import BASELINE, FACETS, SELECTION_METRIC, Report, choose_default, compare_with_baseline
from copilot.eval.metrics import compare_paired, mean_metrics


def paper_of(key: str) -> str:
    """The query paper of a per-query key `<paper id>_<facet>`."""
    return key.rsplit("_", 1)[0]


def _report_on(per_query: dict[str, dict[str, dict[str, float]]], keys: list[str]) -> Report:
    """A Report over `keys` only: means overall and per facet, and every method paired with the baseline."""
    rows = {method: {k: by_key[k] for k in keys} for method, by_key in per_query.items()}
    results = {method: {"overall": mean_metrics(by_key.values()),
                        **{f: mean_metrics(v for k, v in by_key.items() if k.endswith(f"_{f}")) for f in FACETS}}
               for method, by_key in rows.items()}
    return Report(results, rows, compare_with_baseline(rows))


def nested_default(report: Report) -> dict:
    """Leave-one-query-paper-out estimate of the default-choosing rule; {} with fewer than two query papers."""
    keys = list(report.per_query[BASELINE])
    papers = list(dict.fromkeys(paper_of(k) for k in keys))
    if len(papers) < 2:
        return {}
    held_out: dict[str, dict[str, float]] = {}
    chosen = []
    for paper in papers:
        train = [k for k in keys if paper_of(k) != paper]
        pick, _ = choose_default(_report_on(report.per_query, train))
        chosen.append(pick)
        held_out.update({k: report.per_query[pick][k] for k in keys if paper_of(k) == paper})
    baseline = [report.per_query[BASELINE][k][SELECTION_METRIC] for k in keys]
    in_sample = report.default_method
    return {
        "folds": len(papers),
        "mean": mean_metrics(held_out[k] for k in keys),
        "vs_abstract": compare_paired([held_out[k][SELECTION_METRIC] for k in keys], baseline),
        "chosen": [{"method": m, "folds": n} for m, n in Counter(chosen).most_common()],
        "in_sample_default": in_sample,
        "in_sample_mean": report.results[in_sample]["overall"][SELECTION_METRIC],
        "in_sample_vs_abstract": (report.vs_baseline[in_sample][SELECTION_METRIC]["mean_difference"]
                                  if in_sample != BASELINE else 0.0),
    }


def markdown(nested: dict) -> str:
    if not nested:
        return ""
    test = nested["vs_abstract"]
    picks = ", ".join(f"{c['method']} ({c['folds']})" for c in nested["chosen"])
    return "\n".join([
        f"Default chosen by a nested procedure (leave one query paper out, {nested['folds']} folds), upstream NDCG@20:",
        "",
        "| | default | NDCG@20 (upstream) | Δ vs abstract | 95% CI | wins/losses | bootstrap p |",
        "|---|---|---|---|---|---|---|",
        f"| in-sample (chosen and scored on all queries) | {nested['in_sample_default']} | "
        f"{100 * nested['in_sample_mean']:.2f} | {100 * nested['in_sample_vs_abstract']:+.2f} | | | |",
        f"| nested (each paper scored by the choice made without it) | {picks} | "
        f"{100 * nested['mean'][SELECTION_METRIC]:.2f} | {100 * test['mean_difference']:+.2f} | "
        f"[{100 * test['bootstrap_ci_low']:+.2f}, {100 * test['bootstrap_ci_high']:+.2f}] | "
        f"{test['wins']}/{test['losses']} | {test['bootstrap_p']:.3f} |",
    ])
