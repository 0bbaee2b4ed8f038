"""CSFCube evaluation: faceted query-by-example over CS abstracts, graded relevance 0-3.

Protocol (upstream eval_scripts/ranking_eval.py): for every (query paper, facet) rank that query's annotated
candidates (`cands`) and score the ranking against `relevance_adju`: NDCG@20 (graded), MAP and Recall@20
(grade >= 2 is relevant). Per facet and over all queries ("overall", the upstream "all" split) the metrics
are means over queries. Methods compared, all with the product's Embedder and cosine similarity:

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

from copilot.eval.metrics import METRICS, mean_metrics, query_metrics, ranked_grades
from copilot.methods import prism
from copilot.methods.fusion import reciprocal_rank_fusion
from copilot.services import Services

FACETS = ("background", "method", "result")
METHODS = ("abstract", "facet-sentences", "prism", "prism-facet")
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


@dataclass
class Report:
    results: dict[str, dict[str, dict[str, float]]]
    per_query: dict[str, dict[str, dict[str, float]]]
    meta: dict = field(default_factory=dict)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_fold(data_dir: Path, facets: Sequence[str] = FACETS, limit: int | None = None) -> Fold:
    """Read the abstracts and the `*-pid2anns-{facet}.json` files; queries ordered by facet, then file order."""
    data_dir = Path(data_dir)
    abstracts = data_dir / ABSTRACTS_FILE
    if not abstracts.is_file():
        raise EvalDataError(f"{abstracts} not found: --data must hold {ABSTRACTS_FILE} and *-pid2anns-FACET.json")
    papers = {}
    with abstracts.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                papers[str(row["paper_id"])] = row
    queries, prefixes = [], set()
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
            queries.append(CsfQuery(str(pid), facet, cands, dict(zip(cands, ann["relevance_adju"]))))
    if limit is not None:
        queries = queries[:limit]
    return Fold(prefix="-".join(sorted(prefixes)), papers=papers, queries=queries)


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


def run(services: Services, data_dir: Path, facets: Sequence[str] = FACETS, limit: int | None = None,
        mode: str = prism.SEPARATE, aspect_tokens: int = prism.ASPECT_MAX_TOKENS) -> Report:
    started = time.monotonic()
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
    aspect_cache = prism.AspectCache(services.db)
    aspects: dict[str, prism.AspectSet] = {}
    t0 = time.monotonic()
    for n, pid in enumerate(query_pids, start=1):
        row = fold.papers[pid]
        paper = prism.QueryPaper(title=row.get("title") or "", abstract=row.get("abstract") or "", id=pid)
        aspects[pid] = prism.describe_aspects(services.llm, paper, aspect_cache, mode=mode, max_tokens=aspect_tokens)
        missing = ", ".join(aspects[pid].missing) or "none"
        _log(f"aspects {n}/{len(query_pids)} ({pid}): {aspects[pid].llm_calls} LLM calls, missing: {missing}")
    llm_seconds = time.monotonic() - t0

    per_query: dict[str, dict[str, dict[str, float]]] = {m: {} for m in METHODS}
    for query in fold.queries:
        row = fold.papers[query.pid]
        paper = prism.QueryPaper(title=row.get("title") or "", abstract=row.get("abstract") or "", id=query.pid)
        texts = prism.prism_queries(paper, aspects[query.pid])
        texts["facet-sentences"] = facet_sentences(row, query.facet)
        names = list(texts)
        vectors = dict(zip(names, embedder.embed([texts[n] for n in names])))
        lists = {name: _rank(vectors[name], query, cand_vectors) for name in names}
        aspect = FACET_ASPECT[query.facet]
        rankings = {
            "abstract": lists[prism.ABSTRACT],
            "facet-sentences": lists["facet-sentences"],
            "prism": _fused({n: lists[n] for n in [*prism.ASPECTS, prism.ABSTRACT] if n in lists}),
            "prism-facet": _fused({n: lists[n] for n in (aspect, prism.ABSTRACT) if n in lists}),
        }
        for method, ranked in rankings.items():
            per_query[method][query.key] = query_metrics(ranked_grades(ranked, query.grades))

    results = {}
    for method in METHODS:
        rows = per_query[method]
        entry = {"overall": mean_metrics(rows.values())}
        for facet in facets:
            entry[facet] = mean_metrics(v for k, v in rows.items() if k.endswith(f"_{facet}"))
        results[method] = entry
    meta = {
        "data": str(data_dir), "fold": fold.prefix, "queries": len(fold.queries), "query_papers": len(query_pids),
        "candidates": len(needed), "facets": list(facets), "mode": mode, "aspect_max_tokens": aspect_tokens,
        "llm": services.llm.info, "embedder": embedder.name,
        "aspects_missing": {pid: a.missing for pid, a in aspects.items() if a.missing},
        "llm_calls": sum(a.llm_calls for a in aspects.values()),
        "seconds": {"total": round(time.monotonic() - started, 1), "embed_candidates": round(embed_seconds, 1),
                    "aspects": round(llm_seconds, 1)},
    }
    return Report(results, per_query, meta)


def markdown_table(report: Report) -> str:
    facets = report.meta["facets"]
    groups = ["overall", *facets]
    header = "| method | " + " | ".join(f"{g} {m}" for g in groups for m in METRICS) + " |"
    lines = [header, "|" + "---|" * (1 + len(groups) * len(METRICS))]
    for method, entry in report.results.items():
        cells = [f"{100 * entry[g][m]:.2f}" for g in groups for m in METRICS]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    counts = ", ".join(f"{g} {report.results[METHODS[0]][g]['queries']}" for g in groups)
    m = report.meta
    notes = [
        "",
        f"Queries: {counts}. Fold `{m['fold']}`, {m['candidates']} candidate abstracts. "
        f"LLM {m['llm']['backend']}/{m['llm']['model']} ({m['mode']}, ≤ {m['aspect_max_tokens']} tokens per aspect, "
        f"temperature 0, {m['llm_calls']} calls), embedder {m['embedder']}. Scores ×100.",
        f"Time: {m['seconds']['total']} s total (candidate embeddings {m['seconds']['embed_candidates']} s, "
        f"aspect descriptions {m['seconds']['aspects']} s).",
    ]
    if m["aspects_missing"]:
        notes.append(f"Missing aspect descriptions (fused without them): {json.dumps(m['aspects_missing'])}")
    return "\n".join(lines + notes) + "\n"


def write_outputs(report: Report, out_dir: Path, name: str) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{name}.json", "markdown": out_dir / f"{name}.md",
             "per_query": out_dir / f"{name}-per-query.json"}
    contents = {"json": json.dumps(report.results, indent=2), "markdown": markdown_table(report),
                "per_query": json.dumps({"meta": report.meta, "per_query": report.per_query}, indent=2)}
    for key, path in paths.items():
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(contents[key], encoding="utf-8")
        os.replace(tmp, path)
    return paths


def output_name(fold_prefix: str, mode: str, limit: int | None, facets: Sequence[str]) -> str:
    name = f"csfcube-{fold_prefix or 'fold'}"
    if list(facets) != list(FACETS):
        name += "-" + "-".join(facets)
    if mode != prism.SEPARATE:
        name += f"-{mode}"
    if limit is not None:
        name += f"-limit{limit}"
    return name
