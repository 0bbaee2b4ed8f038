"""CSFCube evaluation: faceted query-by-example over CS abstracts, graded relevance 0-3.

Protocol (upstream eval_scripts/ranking_eval.py): for every (query paper, facet) rank that query's annotated
candidates (`cands`, without the query paper itself: one upstream pool holds its own query) and score the ranking
against `relevance_adju`: our NDCG@20, upstream's NDCG%20 and NDCG@20 (`metrics.py` says how they differ), MAP
and Recall@20 (grade >= 2 is relevant). Per facet and over all queries ("overall", the upstream "all" split) the
metrics are means over queries; every method is compared with `abstract` query by query (sign test, paired
bootstrap). The product's rankings (`prism.RANKINGS`: abstract, lexical, hybrid, prism, prism-hybrid,
prism-extractive) run through the product's own code (`prism.ranking_queries`, `prism.rank_with_method`) with the
product's embedder, each pool ranked by cosine and by BM25 over all the fold's candidate abstracts. Compared beside
them, not offered in the product:

- `facet-sentences`: only the query abstract's sentences CSFCube labelled with the facet;
- `prism-facet`: the LLM's aspect description matching the facet, fused with the abstract;
- `prism-extractive-scores`: prism-extractive's lists fused by standardised scores instead of ranks.

The weights of the hybrid rankings are cross-validated (leave one query paper out, `cross_validate`), and the
report names the default: the best product ranking on the selection metric that beats `abstract` by the paired
bootstrap (p < 0.05) with no facet more than one point below it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from copilot.eval.metrics import TESTED_METRICS, compare_paired, mean_metrics, score_ranking
from copilot.methods import prism
from copilot.methods.fusion import reciprocal_rank_fusion, score_fusion
from copilot.services import Services
from copilot.store.lexical import Bm25

FACETS = ("background", "method", "result")
PRODUCT_METHODS = tuple(prism.RANKINGS)
EVAL_ONLY_METHODS = ("facet-sentences", "prism-facet", "prism-extractive-scores")
METHODS = (*PRODUCT_METHODS, *EVAL_ONLY_METHODS)
BASELINE = "abstract"
LLM_METHODS = tuple(m for m in PRODUCT_METHODS if prism.RANKINGS[m].uses_llm) + ("prism-facet",)
SELECTION_METRIC = "upstream_ndcg@20"
SIGNIFICANCE = 0.05
FACET_TOLERANCE = 0.01            # no facet of the default may lose more than one NDCG point to the baseline
TUNED_METHODS = ("hybrid", "prism-hybrid", "prism-extractive")
WEIGHT_GRID = {prism.ABSTRACT: (1.0, 2.0), prism.TITLE: (0.0, 1.0), prism.LEXICAL: (0.0, 1.0, 2.0),
               "aspects": (0.0, 0.5, 1.0)}
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

    cross_validated: dict[str, dict] = field(default_factory=dict)
    default_method: str = BASELINE
    default_nested: dict = field(default_factory=dict)       # the choice held out (csfcube_nested), set by the CLI
    lists: dict = field(default_factory=dict)                # product method → query key → its ranked lists by name
    queries: list = field(default_factory=list)              # the CsfQuery objects scored

    def as_json(self) -> dict:
        return {"default_method": self.default_method, "product_default": self.meta.get("product_default"),
                "selection": self.meta.get("selection"), "default_nested": self.default_nested,
                "results": self.results, "vs_abstract": self.vs_baseline,
                "cross_validated": self.cross_validated, "per_query": self.per_query, "meta": self.meta}


POOL_FILE = "test-pid2pool-csfcube.json"


def held_out_cited(data_dir: Path, papers: dict[str, dict], qrels_glob: str) -> dict[str, set[str]]:
    """The held-out fold of a citation gold: the query papers of POOL_FILE that the one `qrels_glob` file (the dev
    fold, on which the thought methods were tuned) does not name, each with the candidates the pool took from its
    reference list (`cand_source` holds "cited", as SOURCE.txt's qrels-cited-from-pool). Ids missing from the
    abstracts are left out."""
    pool_file, qrels = Path(data_dir) / POOL_FILE, sorted(Path(data_dir).glob(qrels_glob))
    if not pool_file.is_file() or len(qrels) != 1:
        raise EvalDataError(f"the held-out fold needs {POOL_FILE} and one {qrels_glob} in {data_dir}")
    with qrels[0].open(encoding="utf-8") as rows:
        dev = {line.split("\t", 1)[0].strip() for line in rows}
    cited: dict[str, set[str]] = {}
    for query, pool in json.loads(pool_file.read_text(encoding="utf-8")).items():
        if query in dev or query not in papers:
            continue
        found = {str(c) for c, how in zip(pool["cands"], pool["cand_source"]) if "cited" in how and str(c) in papers}
        if found:
            cited[query] = found
    return cited


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


def _aspects_of(services: Services, fold: Fold, query_pids: list[str], mode: str,
                aspect_tokens: int | None) -> dict[str, prism.AspectSet]:
    aspect_cache = services.aspect_cache
    aspects: dict[str, prism.AspectSet] = {}
    for n, pid in enumerate(query_pids, start=1):
        aspects[pid] = prism.describe_aspects(services.llm, _query_paper(fold, pid), aspect_cache, mode=mode,
                                              max_tokens=aspect_tokens,
                                              detailed=services.generation.detailed_aspects)
        missing = ", ".join(aspects[pid].missing) or "none"
        _log(f"aspects {n}/{len(query_pids)} ({pid}): {aspects[pid].llm_calls} LLM calls, missing: {missing}")
    return aspects


def _query_paper(fold: Fold, pid: str) -> prism.QueryPaper:
    row = fold.papers[pid]
    return prism.QueryPaper(title=row.get("title") or "", abstract=row.get("abstract") or "", id=pid)


@dataclass
class QueryLists:
    """Everything one query's methods rank with: each method's ranked pool and fused lists."""

    rankings: dict[str, list[str]]
    lists: dict[str, dict[str, list[str]]]      # tuned method → its ranked lists by name (for cross-validation)


def _query_lists(query: CsfQuery, paper: prism.QueryPaper, row: dict, embed: Callable[[list[str]], np.ndarray],
                 cand_vectors: dict[str, np.ndarray], lexical: Bm25, raw: dict[str, str], gated: dict[str, str],
                 methods: Sequence[str]) -> QueryLists:
    """`raw`: the LLM's aspect descriptions; `gated`: those the gate let through."""
    vectors: dict[str, np.ndarray] = {}

    def embed_once(texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in vectors]
        if todo:
            vectors.update(zip(todo, embed(todo)))
        return np.stack([vectors[t] for t in texts])

    pool = np.stack([cand_vectors[c] for c in query.cands])

    def cosines(vector: np.ndarray) -> np.ndarray:
        return pool @ np.asarray(vector, dtype=np.float32)

    def search(vector: np.ndarray) -> list[str]:
        return prism.rank_candidates(vector, query.cands, pool)

    def lexical_rank(text: str) -> list[str]:
        return lexical.rank(text, query.cands)

    extractive = prism.extractive_aspects(paper, embed_once) if \
        any(m in methods for m in ("prism-hybrid", "prism-extractive", "prism-extractive-scores")) else {}
    rankings: dict[str, list[str]] = {}
    lists: dict[str, dict[str, list[str]]] = {}
    for name in (m for m in methods if m in prism.RANKINGS):
        method = prism.RANKINGS[name]
        descriptions = raw if name == "prism" else gated
        queries = prism.ranking_queries(method, paper, descriptions, extractive)
        ranking = prism.rank_with_method(method, paper, queries, embed_once, search, lexical_rank)
        rankings[name] = [item for item, _, _ in ranking.fused]
        lists[name] = ranking.lists
    if "facet-sentences" in methods:
        rankings["facet-sentences"] = search(embed_once([facet_sentences(row, query.facet)])[0])
    if "prism-facet" in methods:
        aspect = FACET_ASPECT[query.facet]
        texts = {n: t for n, t in ((aspect, raw.get(aspect)), (prism.ABSTRACT, paper.abstract_query)) if t}
        facet_lists = {n: search(v) for n, v in zip(texts, embed_once(list(texts.values())))}
        rankings["prism-facet"] = [item for item, _, _ in reciprocal_rank_fusion(facet_lists)]
    if "prism-extractive-scores" in methods:
        method = prism.RANKINGS["prism-extractive"]
        queries = prism.ranking_queries(method, paper, {}, extractive)
        scored = {n: dict(zip(query.cands, cosines(v))) for n, v in zip(queries, embed_once(list(queries.values())))}
        scored[prism.LEXICAL] = dict(zip(query.cands, lexical.scores_of(paper.abstract_query, query.cands)))
        rankings["prism-extractive-scores"] = [item for item, _ in score_fusion(scored, method.weights)]
    return QueryLists(rankings, lists)


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


def cross_validate(lists: dict[str, dict[str, dict[str, list[str]]]], queries: Sequence[CsfQuery],
                   baseline: dict[str, dict[str, float]]) -> dict[str, dict]:
    """For each tuned method: leave one query paper out, choose the RRF weights (WEIGHT_GRID; one weight for the
    three aspect lists) that score best on the other papers' queries, and score the held-out queries with them.
    The mean over all held-out scores estimates what the weights are worth on unseen queries. Needs two query
    papers at least (else {})."""
    by_key = {q.key: q for q in queries}
    papers = list(dict.fromkeys(q.pid for q in queries))
    out: dict[str, dict] = {}
    if len(papers) < 2:                 # nothing left to choose weights on
        return out
    for method, per_query_lists in lists.items():
        axes = [prism.ABSTRACT, prism.TITLE, prism.LEXICAL] + (["aspects"] if prism.RANKINGS[method].aspects else [])
        grid = [dict(zip(axes, values)) for values in itertools.product(*(WEIGHT_GRID[a] for a in axes))]
        scores = []       # grid index → query key → metrics
        for weights in grid:
            expanded = {**{a: weights.get("aspects", 0.0) for a in prism.ASPECTS}, **weights}
            expanded.pop("aspects", None)
            scores.append({key: score_ranking([i for i, _, _ in reciprocal_rank_fusion(named, weights=expanded)],
                                              by_key[key].grades, by_key[key].pid)
                           for key, named in per_query_lists.items()})

        def best(keys: list[str]) -> int:
            # called within the iteration that defines it (B023 does not apply)
            return max(range(len(grid)), key=lambda i: (np.mean([scores[i][k][SELECTION_METRIC] for k in keys]),  # noqa: B023
                                                        -i))  # noqa: B023

        held_out, chosen = {}, []
        for pid in papers:
            train = [k for k in per_query_lists if by_key[k].pid != pid]
            pick = best(train)
            chosen.append(json.dumps(grid[pick], sort_keys=True))
            held_out.update({k: scores[pick][k] for k in per_query_lists if by_key[k].pid == pid})
        keys = list(baseline)
        out[method] = {
            "mean": mean_metrics(held_out[k] for k in keys),
            "vs_abstract": compare_paired([held_out[k][SELECTION_METRIC] for k in keys],
                                          [baseline[k][SELECTION_METRIC] for k in keys]),
            "weights_chosen": [{"weights": json.loads(w), "folds": n} for w, n in Counter(chosen).most_common()],
            "weights_on_all_queries": grid[best(keys)],
            "product_weights": {name: w for name, w in prism.RANKINGS[method].weights.items()},
        }
    return out


METRIC_LABELS = {"ndcg@20": "NDCG@20 (ours)", "upstream_ndcg%20": "NDCG%20 (upstream)",
                 "upstream_ndcg@20": "NDCG@20 (upstream)", "map": "MAP", "recall@20": "Recall@20"}


def choose_default(report: Report) -> tuple[str, str]:
    """The product ranking with the best mean SELECTION_METRIC among those that beat the baseline by the paired
    bootstrap (p < SIGNIFICANCE) and lose no more than FACET_TOLERANCE to it on any facet; else the baseline."""
    base = report.results[BASELINE]
    eligible = []
    for method in (m for m in report.results if m in PRODUCT_METHODS and m != BASELINE):
        test = report.vs_baseline[method][SELECTION_METRIC]
        facets = [f for f in report.results[method] if f in FACETS]
        worst = min((report.results[method][f][SELECTION_METRIC] - base[f][SELECTION_METRIC] for f in facets),
                    default=0.0)
        if test["mean_difference"] > 0 and test["bootstrap_p"] < SIGNIFICANCE and worst >= -FACET_TOLERANCE:
            eligible.append((report.results[method]["overall"][SELECTION_METRIC], method))
    rule = (f"best mean {METRIC_LABELS[SELECTION_METRIC]} among the product's rankings that beat `{BASELINE}` by "
            f"the paired bootstrap (p < {SIGNIFICANCE}) and lose at most {100 * FACET_TOLERANCE:.0f} point on any "
            "facet")
    return (max(eligible)[1] if eligible else BASELINE), rule


def run(services: Services, data_dir: Path, facets: Sequence[str] = FACETS, limit: int | None = None,
        mode: str = prism.SEPARATE, aspect_tokens: int | None = None,
        methods: Sequence[str] = METHODS) -> Report:
    """Rank every query's pool with each of `methods` (the baseline always included) and score the rankings.
    The LLM writes aspect descriptions only when a method that uses them is asked for."""
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
    needed = sorted({pid for q in fold.queries for pid in q.cands})
    t0 = time.monotonic()
    cand_vectors = cache.embed({pid: paper_text(fold.papers[pid]) for pid in needed}, embedder.embed)
    embed_seconds = time.monotonic() - t0
    t0 = time.monotonic()
    lexical = Bm25(needed, [paper_text(fold.papers[pid]) for pid in needed])
    lexical_seconds = time.monotonic() - t0

    query_pids = list(dict.fromkeys(q.pid for q in fold.queries))
    uses_llm = any(m in LLM_METHODS for m in methods)
    t0 = time.monotonic()
    aspects = _aspects_of(services, fold, query_pids, mode, aspect_tokens) if uses_llm else {}
    llm_seconds = time.monotonic() - t0

    per_query: dict[str, dict[str, dict[str, float]]] = {m: {} for m in methods}
    tuned_lists: dict[str, dict[str, dict[str, list[str]]]] = {m: {} for m in methods if m in prism.RANKINGS}
    gated: dict[str, prism.AspectSet] = {}
    for pid, written in aspects.items():
        gated[pid] = prism.AspectSet(descriptions=dict(written.descriptions))
        prism.gate_descriptions(gated[pid], _query_paper(fold, pid), embedder.embed)
    t0 = time.monotonic()
    for query in fold.queries:
        paper = _query_paper(fold, query.pid)
        raw = aspects[query.pid].descriptions if query.pid in aspects else {}
        passed = gated[query.pid].descriptions if query.pid in gated else {}
        made = _query_lists(query, paper, fold.papers[query.pid], embedder.embed, cand_vectors, lexical, raw,
                            passed, methods)
        for method, ranked in made.rankings.items():
            per_query[method][query.key] = score_ranking(ranked, query.grades, query.pid)
        for method in tuned_lists:
            tuned_lists[method][query.key] = made.lists[method]
    rank_seconds = time.monotonic() - t0

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
        "detailed_aspects": services.generation.detailed_aspects if uses_llm else None,
        "llm": services.llm.info if uses_llm else None, "embedder": embedder.name,
        "aspects_missing": {pid: a.missing for pid, a in aspects.items() if a.missing},
        "aspects_gated": {pid: a.missing for pid, a in gated.items() if a.missing},
        "llm_calls": sum(a.llm_calls for a in aspects.values()),
        "selection_metric": SELECTION_METRIC,
        "product_default": services.generation.related_ranking,
        "seconds": {"total": round(time.monotonic() - started, 1), "embed_candidates": round(embed_seconds, 1),
                    "lexical_index": round(lexical_seconds, 1), "aspects": round(llm_seconds, 1),
                    "rank_all_queries": round(rank_seconds, 1)},
        "machine_at_start": machine_before, "machine_at_end": machine(),
    }
    report = Report(results, per_query, compare_with_baseline(per_query), meta)
    report.lists, report.queries = tuned_lists, fold.queries        # for csfcube_lists (each list alone)
    report.cross_validated = cross_validate({m: v for m, v in tuned_lists.items() if m in TUNED_METHODS},
                                            fold.queries, per_query[BASELINE])
    report.default_method, report.meta["selection"] = choose_default(report)
    return report


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
