"""The CSFCube evaluation's Markdown report: overall and per-facet tables, the comparison with the baseline and the
per-query scores (the evaluation itself is in csfcube.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from copilot.eval.csfcube import METRIC_LABELS, SELECTION_METRIC, Report
from copilot.eval.metrics import METRICS, TESTED_METRICS
from copilot.eval.report_files import json_text, write_files
from copilot.methods import prism


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _p(value: float) -> str:
    return f"{value:.3f}" if value >= 0.001 else "<0.001"


def _interval(test: dict) -> str:
    return f"[{100 * test['bootstrap_ci_low']:+.2f}, {100 * test['bootstrap_ci_high']:+.2f}]"


def _weights(weights: dict[str, float]) -> str:
    short = {prism.ABSTRACT: "a", prism.TITLE: "t", prism.LEXICAL: "w", "aspects": "x"}
    return " ".join(f"{short[name]}{value:g}" for name, value in weights.items())


def markdown_table(report: Report) -> str:
    """The overall table, the comparison with the baseline, the per-facet table and the per-query scores."""
    facets, methods = report.meta["facets"], list(report.results)
    overall = _table(["method", *(METRIC_LABELS[m] for m in METRICS)],
                     [[method, *(f"{100 * report.results[method]['overall'][m]:.2f}" for m in METRICS)]
                      for method in methods])
    compared = _table(
        ["method", "metric", "mean Δ vs abstract", "95% bootstrap CI", "wins/losses/ties", "sign test p",
         "bootstrap p"],
        [[method, METRIC_LABELS[metric], f"{100 * c['mean_difference']:+.2f}",
          f"[{100 * c['bootstrap_ci_low']:+.2f}, {100 * c['bootstrap_ci_high']:+.2f}]",
          f"{c['wins']}/{c['losses']}/{c['ties']}", _p(c["sign_test_p"]), _p(c["bootstrap_p"])]
         for method, by_metric in report.vs_baseline.items() for metric, c in by_metric.items()])
    facet_metrics = ("ndcg@20", "upstream_ndcg%20", "map", "recall@20")
    by_facet = _table(["method", *(f"{f} {METRIC_LABELS[m]}" for f in facets for m in facet_metrics)],
                      [[method, *(f"{100 * report.results[method][f][m]:.2f}" for f in facets for m in facet_metrics)]
                       for method in methods])
    keys = list(report.per_query[methods[0]])
    per_query = _table(["query", *methods],
                       [[key, *(" / ".join(f"{100 * report.per_query[m][key][metric]:.1f}"
                                           for metric in TESTED_METRICS) for m in methods)] for key in keys])
    counts = ", ".join(f"{g} {report.results[methods[0]][g]['queries']}" for g in ["overall", *facets])
    m = report.meta
    detail = "detailed paragraphs" if m.get("detailed_aspects") else "2-3 sentences"
    most = m["aspect_max_tokens"] or "the default"
    llm = (f"LLM {m['llm']['backend']}/{m['llm']['model']} ({m['mode']}, {detail}, ≤ {most} tokens per "
           f"aspect, temperature 0, {m['llm_calls']} calls)" if m["llm"] else "no LLM (embedder-only methods)")
    start, end = m["machine_at_start"], m["machine_at_end"]
    notes = [
        f"Queries: {counts}. Fold `{m['fold']}`, {m['candidates']} candidate abstracts; query papers taken out of "
        f"their own pool: {', '.join(m['query_in_own_pool_removed']) or 'none'}. {llm}, embedder {m['embedder']}. "
        "Scores ×100.",
        f"Time: {m['seconds']['total']} s total (candidate embeddings {m['seconds']['embed_candidates']} s, "
        f"aspect descriptions {m['seconds']['aspects']} s) on {start['cpu'] or 'an unknown CPU'} "
        f"({start['cores']} cores), load average {start['load_average'][0]} at start, "
        f"{end['load_average'][0]} at end.",
    ]
    if m["aspects_missing"]:
        notes.append(f"Missing aspect descriptions (fused without them): {json.dumps(m['aspects_missing'])}")
    if m.get("aspects_gated"):
        notes.append("Aspect descriptions the gate dropped (prism-hybrid uses the extractive query instead; prism, "
                     f"as published, uses them): {json.dumps(m['aspects_gated'])}")
    if report.cross_validated:
        label = METRIC_LABELS[SELECTION_METRIC]
        crossed = _table(
            ["method", f"{label}, weights as shipped", f"{label}, cross-validated", "Δ vs abstract (CV)",
             "95% bootstrap CI", "wins/losses/ties", "sign test p", "bootstrap p", "weights chosen (folds)"],
            [[method, f"{100 * report.results[method]['overall'][SELECTION_METRIC]:.2f}",
              f"{100 * cv['mean'][SELECTION_METRIC]:.2f}", f"{100 * cv['vs_abstract']['mean_difference']:+.2f}",
              _interval(cv["vs_abstract"]),
              f"{cv['vs_abstract']['wins']}/{cv['vs_abstract']['losses']}/{cv['vs_abstract']['ties']}",
              _p(cv["vs_abstract"]["sign_test_p"]), _p(cv["vs_abstract"]["bootstrap_p"]),
              "; ".join(f"{_weights(c['weights'])} ({c['folds']})" for c in cv["weights_chosen"])]
             for method, cv in report.cross_validated.items()])
        crossed_section = [
            "Weights by cross-validation (leave one query paper out: the RRF weights that score best on the other "
            "papers' queries rank the held-out ones; a = abstract, t = title, w = words (BM25), x = each aspect):",
            "", *crossed, ""]
    else:
        crossed_section = []
    agree = "the same" if m.get("product_default") == report.default_method else "NOT the same"
    sections = [
        f"**Default ranking by this run: `{report.default_method}`** — {m.get('selection')}. The product's default "
        f"for this LLM backend (Settings.related_method) is `{m.get('product_default')}`: {agree}.", "",
        *overall, "",
        f"Paired over the {m['queries']} queries against `abstract` (two-sided exact sign test without ties; "
        f"paired bootstrap, 10,000 resamples, seed 13):", "", *compared, "",
        *crossed_section,
        "Per facet:", "", *by_facet, "",
        f"Per query ({' / '.join(METRIC_LABELS[t] for t in TESTED_METRICS)}):", "", *per_query, "", *notes,
    ]
    return "\n".join(sections) + "\n"


def write_outputs(report: Report, out_dir: Path, name: str) -> dict[str, Path]:
    """`name.json` (results, comparison with the baseline, per-query scores, meta) and `name.md`."""
    return write_files(out_dir, {"json": (f"{name}.json", json_text(report.as_json())),
                                 "markdown": (f"{name}.md", markdown_table(report))})
