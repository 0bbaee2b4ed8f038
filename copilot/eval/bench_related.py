"""Related latency: one query paper in a library of real papers, through `related.find_related`, per ranking that
calls no LLM (the LLM's own time is what the aspect descriptions cost on top, measured by `eval csfcube`), and the
time to build the lexical index of the library."""

from __future__ import annotations

import time

import numpy as np

from copilot.features import related

RANKINGS = tuple(name for name in related.RANKINGS if not related.uses_llm(name))


def related_latency(services, papers: list, queries: int = 30, warmup: int = 2) -> dict:
    """`papers` are already in services' store. Times `queries` query papers taken evenly from the library."""
    started = time.perf_counter()
    indexed = services.lexical.rebuild()
    build_seconds = time.perf_counter() - started
    step = max(1, len(papers) // (queries + warmup))
    picked = [papers[i] for i in range(0, len(papers), step)][:queries + warmup]
    result: dict = {"papers": services.store.count("paper"), "queries": len(picked) - warmup,
                    "lexical_index_papers": indexed, "lexical_index_build_s": round(build_seconds, 2), "rankings": {}}
    for name in RANKINGS:
        times = []
        for n, paper in enumerate(picked):
            query = related.parse_query(services, paper.id)
            t0 = time.perf_counter()
            related.find_related(services, query, method=name)
            if n >= warmup:
                times.append(1000 * (time.perf_counter() - t0))
        result["rankings"][name] = {"p50_ms": round(float(np.percentile(times, 50)), 1),
                                    "p95_ms": round(float(np.percentile(times, 95)), 1),
                                    "max_ms": round(max(times), 1)}
    return result


def to_markdown(result: dict) -> str:
    rows = [f"| {name} | {r['p50_ms']} | {r['p95_ms']} | {r['max_ms']} |" for name, r in result["rankings"].items()]
    return "\n".join([
        f"Related, one query paper in a library of {result['papers']:,} papers ({result['queries']} queries; "
        f"rankings without an LLM call; lexical index of {result['lexical_index_papers']:,} papers built in "
        f"{result['lexical_index_build_s']} s):", "",
        "| ranking | p50 ms | p95 ms | max ms |", "|---|---|---|---|", *rows]) + "\n"
