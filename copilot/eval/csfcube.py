"""CSFCube evaluation: faceted query-by-example over CS abstracts, graded relevance 0-3.

Protocol (upstream eval_scripts/ranking_eval.py): for every (query paper, facet) rank that query's annotated
candidates (`cands`, without the query paper itself: one upstream pool holds its own query) and score the ranking
against `relevance_adju`: our NDCG@20, upstream's NDCG%20 and NDCG@20 (`metrics.py` says how they differ), MAP
and Recall@20 (grade >= 2 is relevant). Per facet and over all queries ("overall", the upstream "all" split) the
metrics are means over queries; every method is compared with `abstract` query by query (sign test, paired
bootstrap). Methods compared, all with the product's Embedder and cosine similarity:

- `abstract`: the query's title + abstract (the A2A baseline);
- `facet-sentences`: only the query abstract's sentences labelled with the facet;
- `prism`: the three PRISM aspect descriptions plus the abstract, fused by RRF;
- `prism-facet`: the aspect description matching the facet, fused with the abstract.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from copilot.eval.metrics import METRICS, TESTED_METRICS, compare_paired, mean_metrics, score_ranking
from copilot.methods import prism
from copilot.methods.fusion import reciprocal_rank_fusion
from copilot.services import Services

FACETS = ("background", "method", "result")
METHODS = ("abstract", "facet-sentences", "prism", "prism-facet")
BASELINE = "abstract"
LLM_METHODS = ("prism", "prism-facet")
FACET_ASPECT = {"background": "research_question", "method": "method", "result": "experiments"}
ABSTRACTS_FILE = "abstracts-csfcube-from-readable.jsonl"


class EvalDataError(ValueError):
    """The data directory does not hold what the evaluation needs; the message says what is missing."""


@dataclass
class CsfQuery:
    pid: str
    facet: str
    cands: list[str]
    grades: dict[str, int]

    @property
    def key(self) -> str:
        return f"{self.pid}_{self.facet}"


@dataclass
class Fold:
    prefix: str
    papers: dict[str, dict]
    queries: list[CsfQuery]
    in_own_pool: list[str] = field(default_factory=list)    # keys of queries whose pool listed the query paper


@dataclass
class Report:
    results: dict[str, dict[str, dict[str, float]]]          # method → group (overall, facet) → metric means
    per_query: dict[str, dict[str, dict[str, float]]]        # method → query key → metrics
    vs_baseline: dict[str, dict[str, dict[str, float]]]      # method → metric → compare_paired(…) over all queries
    meta: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"results": self.results, "vs_abstract": self.vs_baseline, "per_query": self.per_query,
                "meta": self.meta}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_abstracts(data_dir: Path, also_needed: str) -> dict[str, dict]:
    """The rows of ABSTRACTS_FILE by paper id; `also_needed` names the other files of DIR in the error."""
    abstracts = Path(data_dir) / ABSTRACTS_FILE
    if not abstracts.is_file():
        raise EvalDataError(f"{abstracts} not found: --data must hold {ABSTRACTS_FILE} and {also_needed}")
    papers = {}
    with abstracts.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                papers[str(row["paper_id"])] = row
    return papers


def load_fold(data_dir: Path, facets: Sequence[str] = FACETS, limit: int | None = None) -> Fold:
    """Read the abstracts and the `*-pid2anns-{facet}.json` files; queries ordered by facet, then file order.
    A query paper listed among its own candidates is taken out of them (and its key kept in `in_own_pool`)."""
    data_dir = Path(data_dir)
    papers = read_abstracts(data_dir, "*-pid2anns-FACET.json")
    queries, prefixes, in_own_pool = [], set(), []
    for facet in facets:
        if facet not in FACETS:
            raise EvalDataError(f"unknown facet {facet!r}; choose from {', '.join(FACETS)}")
        found = sorted(data_dir.glob(f"*-pid2anns-{facet}.json"))
        if len(found) != 1:
            what = "no file" if not found else f"{len(found)} files ({', '.join(p.name for p in found)})"
            raise EvalDataError(f"{what} matching *-pid2anns-{facet}.json in {data_dir}; need exactly one")
        prefixes.add(found[0].name[: -len(f"-pid2anns-{facet}.json")])
        for pid, ann in json.loads(found[0].read_text(encoding="utf-8")).items():
            cands = [str(c) for c in ann["cands"]]
            absent = [c for c in [pid, *cands] if c not in papers]
            if absent:
                raise EvalDataError(f"{len(absent)} paper ids of query {pid}/{facet} are not in {ABSTRACTS_FILE}, "
                                    f"e.g. {absent[0]}")
            grades = {c: g for c, g in zip(cands, ann["relevance_adju"]) if c != str(pid)}
            query = CsfQuery(str(pid), facet, [c for c in cands if c != str(pid)], grades)
            if len(query.cands) < len(cands):
                in_own_pool.append(query.key)
            queries.append(query)
    if limit is not None:
        queries = queries[:limit]
    kept = {q.key for q in queries}
    return Fold(prefix="-".join(sorted(prefixes)), papers=papers, queries=queries,
                in_own_pool=[key for key in in_own_pool if key in kept])


def paper_text(row: dict) -> str:
    title = (row.get("title") or "").strip()
    abstract = (row.get("abstract") or "").strip()
    return f"{title}\n\n{abstract}" if title else abstract


def facet_sentences(row: dict, facet: str) -> str:
    """The abstract's sentences labelled with `facet`; the whole abstract when none is."""
    abstract = row.get("abstract") or ""
    spans = row.get("sentence_spans") or []
    labels = row.get("sentence_labels") or []
    chosen = [abstract[start:end].strip() for (start, end), label in zip(spans, labels) if label == facet]
    return " ".join(c for c in chosen if c) or abstract.strip()


class EmbeddingCache:
    """Candidate embeddings in an .npz file under the data dir, keyed by paper id and text digest."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.vectors: dict[str, tuple[str, np.ndarray]] = {}
        if path.is_file():
            with np.load(path, allow_pickle=False) as data:
                for pid, digest, vector in zip(data["ids"], data["digests"], data["vectors"]):
                    self.vectors[str(pid)] = (str(digest), vector)

    @staticmethod
    def digest(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def embed(self, texts: dict[str, str], embed: Callable[[list[str]], np.ndarray],
              batch: int = 256) -> dict[str, np.ndarray]:
        todo = [pid for pid, text in texts.items()
                if pid not in self.vectors or self.vectors[pid][0] != self.digest(text)]
        for start in range(0, len(todo), batch):
            chunk = todo[start:start + batch]
            for pid, vector in zip(chunk, embed([texts[p] for p in chunk])):
                self.vectors[pid] = (self.digest(texts[pid]), vector)
            _log(f"embedded {min(start + batch, len(todo))}/{len(todo)} candidate abstracts")
        if todo:
            self.save()
        return {pid: self.vectors[pid][1] for pid in texts}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ids = list(self.vectors)
        tmp = self.path.with_name(self.path.stem + ".tmp.npz")
        np.savez(tmp, ids=np.array(ids), digests=np.array([self.vectors[i][0] for i in ids]),
                 vectors=np.stack([self.vectors[i][1] for i in ids]).astype(np.float32))
        os.replace(tmp, self.path)


def _rank(vector: np.ndarray, query: CsfQuery, cand_vectors: dict[str, np.ndarray]) -> list[str]:
    return prism.rank_candidates(vector, query.cands, np.stack([cand_vectors[c] for c in query.cands]))


def _fused(lists: dict[str, list[str]]) -> list[str]:
    return [item for item, _, _ in reciprocal_rank_fusion(lists)]


def _aspects_of(services: Services, fold: Fold, query_pids: list[str], mode: str,
                aspect_tokens: int) -> dict[str, prism.AspectSet]:
    aspect_cache = prism.AspectCache(services.db)
    aspects: dict[str, prism.AspectSet] = {}
    for n, pid in enumerate(query_pids, start=1):
        row = fold.papers[pid]
        paper = prism.QueryPaper(title=row.get("title") or "", abstract=row.get("abstract") or "", id=pid)
        aspects[pid] = prism.describe_aspects(services.llm, paper, aspect_cache, mode=mode, max_tokens=aspect_tokens)
        missing = ", ".join(aspects[pid].missing) or "none"
        _log(f"aspects {n}/{len(query_pids)} ({pid}): {aspects[pid].llm_calls} LLM calls, missing: {missing}")
    return aspects


def _rankings(query: CsfQuery, texts: dict[str, str], embed: Callable[[list[str]], np.ndarray],
              cand_vectors: dict[str, np.ndarray], methods: Sequence[str]) -> dict[str, list[str]]:
    names = list(texts)
    vectors = dict(zip(names, embed([texts[n] for n in names])))
    lists = {name: _rank(vectors[name], query, cand_vectors) for name in names}
    aspect = FACET_ASPECT[query.facet]
    rankings = {
        "abstract": lambda: lists[prism.ABSTRACT],
        "facet-sentences": lambda: lists["facet-sentences"],
        "prism": lambda: _fused({n: lists[n] for n in [*prism.ASPECTS, prism.ABSTRACT] if n in lists}),
        "prism-facet": lambda: _fused({n: lists[n] for n in (aspect, prism.ABSTRACT) if n in lists}),
    }
    return {method: rankings[method]() for method in methods}


def compare_with_baseline(per_query: dict[str, dict[str, dict[str, float]]],
                          baseline: str = BASELINE) -> dict[str, dict[str, dict[str, float]]]:
    """Each method against the baseline on TESTED_METRICS, paired over the baseline's queries."""
    keys = list(per_query[baseline])
    return {method: {metric: compare_paired([rows[k][metric] for k in keys],
                                            [per_query[baseline][k][metric] for k in keys])
                     for metric in TESTED_METRICS}
            for method, rows in per_query.items() if method != baseline}


def machine() -> dict:
    """The CPU model (as lscpu names it), the core count and the load average now."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"cpu": model, "cores": os.cpu_count(), "load_average": [round(x, 2) for x in load]}


def run(services: Services, data_dir: Path, facets: Sequence[str] = FACETS, limit: int | None = None,
        mode: str = prism.SEPARATE, aspect_tokens: int = prism.ASPECT_MAX_TOKENS,
        methods: Sequence[str] = METHODS) -> Report:
    """Rank every query's pool with each of `methods` (the baseline always included) and score the rankings.
    The LLM writes aspect descriptions only when a PRISM method is asked for."""
    started, machine_before = time.monotonic(), machine()
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise EvalDataError(f"unknown method {unknown[0]!r}; choose from {', '.join(METHODS)}")
    methods = [m for m in METHODS if m == BASELINE or m in methods]
    fold = load_fold(data_dir, facets, limit)
    if not fold.queries:
        raise EvalDataError("no queries selected")
    embedder = services.embedder
    cache = EmbeddingCache(services.settings.data_dir / "eval" / "cache" / f"csfcube-{embedder.name}.npz")
    needed = {pid for q in fold.queries for pid in q.cands}
    t0 = time.monotonic()
    cand_vectors = cache.embed({pid: paper_text(fold.papers[pid]) for pid in sorted(needed)}, embedder.embed)
    embed_seconds = time.monotonic() - t0

    query_pids = list(dict.fromkeys(q.pid for q in fold.queries))
    uses_llm = any(m in LLM_METHODS for m in methods)
    t0 = time.monotonic()
    aspects = _aspects_of(services, fold, query_pids, mode, aspect_tokens) if uses_llm else {}
    llm_seconds = time.monotonic() - t0

    per_query: dict[str, dict[str, dict[str, float]]] = {m: {} for m in methods}
    for query in fold.queries:
        row = fold.papers[query.pid]
        paper = prism.QueryPaper(title=row.get("title") or "", abstract=row.get("abstract") or "", id=query.pid)
        texts = prism.prism_queries(paper, aspects.get(query.pid, {}))
        texts["facet-sentences"] = facet_sentences(row, query.facet)
        for method, ranked in _rankings(query, texts, embedder.embed, cand_vectors, methods).items():
            per_query[method][query.key] = score_ranking(ranked, query.grades, query.pid)

    results = {}
    for method in methods:
        rows = per_query[method]
        entry = {"overall": mean_metrics(rows.values())}
        for facet in facets:
            entry[facet] = mean_metrics(v for k, v in rows.items() if k.endswith(f"_{facet}"))
        results[method] = entry
    meta = {
        "data": str(data_dir), "fold": fold.prefix, "queries": len(fold.queries), "query_papers": len(query_pids),
        "candidates": len(needed), "facets": list(facets), "methods": methods,
        "query_in_own_pool_removed": fold.in_own_pool,
        "mode": mode if uses_llm else None, "aspect_max_tokens": aspect_tokens if uses_llm else None,
        "llm": services.llm.info if uses_llm else None, "embedder": embedder.name,
        "aspects_missing": {pid: a.missing for pid, a in aspects.items() if a.missing},
        "llm_calls": sum(a.llm_calls for a in aspects.values()),
        "seconds": {"total": round(time.monotonic() - started, 1), "embed_candidates": round(embed_seconds, 1),
                    "aspects": round(llm_seconds, 1)},
        "machine_at_start": machine_before, "machine_at_end": machine(),
    }
    return Report(results, per_query, compare_with_baseline(per_query), meta)


METRIC_LABELS = {"ndcg@20": "NDCG@20 (ours)", "upstream_ndcg%20": "NDCG%20 (upstream)",
                 "upstream_ndcg@20": "NDCG@20 (upstream)", "map": "MAP", "recall@20": "Recall@20"}


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _p(value: float) -> str:
    return f"{value:.3f}" if value >= 0.001 else "<0.001"


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
    llm = (f"LLM {m['llm']['backend']}/{m['llm']['model']} ({m['mode']}, ≤ {m['aspect_max_tokens']} tokens per "
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
    sections = [
        *overall, "",
        f"Paired over the {m['queries']} queries against `abstract` (two-sided exact sign test without ties; "
        f"paired bootstrap, 10,000 resamples, seed 13):", "", *compared, "",
        "Per facet:", "", *by_facet, "",
        f"Per query ({' / '.join(METRIC_LABELS[t] for t in TESTED_METRICS)}):", "", *per_query, "", *notes,
    ]
    return "\n".join(sections) + "\n"


def write_outputs(report: Report, out_dir: Path, name: str) -> dict[str, Path]:
    """`name.json` (results, comparison with the baseline, per-query scores, meta) and `name.md`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{name}.json", "markdown": out_dir / f"{name}.md"}
    contents = {"json": json.dumps(report.as_json(), indent=2), "markdown": markdown_table(report)}
    for key, path in paths.items():
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(contents[key], encoding="utf-8")
        os.replace(tmp, path)
    return paths


def output_name(fold_prefix: str, mode: str, limit: int | None, facets: Sequence[str],
                methods: Sequence[str] = METHODS) -> str:
    name = f"csfcube-{fold_prefix or 'fold'}"
    if list(facets) != list(FACETS):
        name += "-" + "-".join(facets)
    if [m for m in METHODS if m in methods or m == BASELINE] != list(METHODS):
        name += "-" + ("-".join(m for m in METHODS if m in methods and m != BASELINE) or BASELINE)
    if mode != prism.SEPARATE and any(m in LLM_METHODS for m in methods):
        name += f"-{mode}"
    if limit is not None:
        name += f"-limit{limit}"
    return name
