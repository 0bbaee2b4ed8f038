"""Retrieval, memory and disk at one corpus size, measured in fresh child processes.

`build` fills a Chroma store in a temporary data dir (real paper embeddings, then perturbed copies of them
beyond the real corpus, plus synthetic thoughts) through `VectorStore`; `serve` opens that store the way the
app does and times top-k search over papers ∪ thoughts — ours (two HNSW queries, merged) against the
anchor's way (concatenate every vector into a fresh exact index on each query, then search it) — and
reports recall@k of ours against exact search and the peak RSS of the serving process.

Each phase runs as `python -m copilot.eval.bench_store PHASE SPEC.json` so its peak RSS is its own.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

PERTURB_SIGMA = 0.025   # per-dimension noise: a copy keeps cosine ≈ 0.9 with the paper it was made from
THOUGHT_SOURCES = 3     # a synthetic thought = normalised mean of this many real papers' vectors + noise
WARMUP_QUERIES = 5


@dataclass
class Spec:
    work_dir: str          # temporary data dir of the store
    papers_jsonl: str      # real papers, in the order of the rows of `embeddings`
    embeddings: str        # .npy of real paper embeddings (unit vectors), one row per paper of papers_jsonl
    queries: str           # .npy of query embeddings
    n_papers: int
    n_thoughts: int
    k: int = 8
    seed: int = 0
    questions: str = ""    # .json list of the queries' texts: the serving process embeds them as a turn does
    ef_search: int = 0     # set this HNSW search width (in its own process) before serving; 0 keeps the store's

    @classmethod
    def load(cls, path: str | Path) -> Spec:
        return cls(**json.loads(Path(path).read_text()))


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM; unlike ru_maxrss it is not inherited from the parent across exec)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def corpus_vectors(real: np.ndarray, n_papers: int, n_thoughts: int,
                   seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(paper vectors, index of the real paper each row comes from, thought vectors)."""
    rng = np.random.default_rng(seed)
    n_real = min(n_papers, len(real))
    source = np.concatenate([np.arange(n_real), rng.integers(0, len(real), n_papers - n_real)])
    papers = real[source].copy()
    if n_papers > n_real:
        papers[n_real:] = _unit(papers[n_real:] + rng.normal(0, PERTURB_SIGMA, (n_papers - n_real, real.shape[1])))
    mixes = rng.integers(0, n_real, (n_thoughts, THOUGHT_SOURCES))
    thoughts = real[mixes].mean(axis=1) + rng.normal(0, PERTURB_SIGMA, (n_thoughts, real.shape[1]))
    return papers.astype(np.float32), source, _unit(thoughts) if n_thoughts else thoughts.astype(np.float32)


def _settings(work_dir: str):
    from copilot.config import load_settings

    return load_settings(data_dir=Path(work_dir), llm="local", scheduler=False)


def build(spec: Spec) -> dict:
    from copilot.sources.snapshot import paper_from_row
    from copilot.store.vectors import VectorStore, chroma_client

    real = np.load(spec.embeddings, mmap_mode="r")
    with open(spec.papers_jsonl, encoding="utf-8") as lines:
        real_papers = [paper_from_row(json.loads(line)) for _, line in zip(range(len(real)), lines)]
    paper_vecs, source, thought_vecs = corpus_vectors(np.asarray(real), spec.n_papers, spec.n_thoughts, spec.seed)
    started = time.perf_counter()
    store = VectorStore(chroma_client(_settings(spec.work_dir)))
    batch = 4096
    seen: set[str] = set()
    paper_ids: list[str] = []
    for start in range(0, spec.n_papers, batch):
        rows = range(start, min(start + batch, spec.n_papers))
        papers = []
        for row in rows:
            paper = real_papers[source[row]]
            paper_id = paper.id if paper.id not in seen else f"{paper.id}-copy{row}"
            seen.add(paper_id)
            paper_ids.append(paper_id)
            papers.append(replace(paper, id=paper_id))
        store.upsert_papers(papers, paper_vecs[start:start + len(papers)])
    for start in range(0, spec.n_thoughts, batch):
        stop = min(start + batch, spec.n_thoughts)
        store.thoughts.upsert(
            ids=[f"t{i}" for i in range(start, stop)], embeddings=thought_vecs[start:stop],
            documents=[f"Synthetic thought {i}: " + real_papers[i % len(real_papers)].abstract[:600]
                       for i in range(start, stop)],
            metadatas=[{"question": f"synthetic question {i}", "level": 2.0, "created": 0} for i in range(start, stop)])
    counts = {"papers": store.count("paper"), "thoughts": store.count("thought")}
    build_s = time.perf_counter() - started
    del store
    np.save(Path(spec.work_dir) / "papers.npy", paper_vecs)
    np.save(Path(spec.work_dir) / "thoughts.npy", thought_vecs)
    (Path(spec.work_dir) / "ids.json").write_text(json.dumps(paper_ids + [f"t{i}" for i in range(spec.n_thoughts)]))
    return {"build_s": round(build_s, 2), "stored": counts, "peak_rss_mb": round(peak_rss_mb(), 1)}


def merged_search(store, query: np.ndarray, k: int) -> list[str]:
    """Retrieval as it was before issue #33: top-k of papers ∪ thoughts through two HNSW queries that each
    return their k items' documents and metadata, merged by cosine."""
    found = store.search("paper", query, k) + store.search("thought", query, k)
    found.sort(key=lambda item: item.score, reverse=True)
    return [item.id for item in found[:k]]


def merged_nearest(store, query: np.ndarray, k: int) -> list[str]:
    """The ids the product's retrieval ranks first: both collections' k nearest (ids and distances), merged."""
    hits = store.nearest("paper", query, k) + store.nearest("thought", query, k)
    hits.sort(key=lambda hit: hit[1], reverse=True)
    return [item_id for item_id, _ in hits[:k]]


def set_ef_search(spec: Spec) -> dict:
    """Change the stored HNSW search width of both collections (a process that already loaded an index keeps
    the old width, so the serving process must start after this one)."""
    from copilot.store.vectors import VectorStore, chroma_client

    store = VectorStore(chroma_client(_settings(spec.work_dir)))
    for collection in (store.papers, store.thoughts):
        collection.modify(configuration={"hnsw": {"ef_search": spec.ef_search}})
    return {"ef_search": spec.ef_search}


def anchor_search(papers: np.ndarray, thoughts: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """The anchor's way: every query concatenates all vectors into a fresh exact (flat inner-product) index
    and searches it. Our numpy version copies contiguous arrays; the anchor's FAISS `IndexFlat.add` over a
    Python list of vectors copies at least as much."""
    index = np.concatenate([papers, thoughts])
    scores = index @ query
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def _percentiles(seconds: list[float]) -> dict:
    ms = np.asarray(seconds) * 1000.0
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p95_ms": round(float(np.percentile(ms, 95)), 3),
            "mean_ms": round(float(ms.mean()), 3)}


def _timed(function, inputs) -> tuple[list, list[float]]:
    outputs, seconds = [], []
    for item in inputs:
        t0 = time.perf_counter()
        outputs.append(function(item))
        seconds.append(time.perf_counter() - t0)
    return outputs, seconds


def turn_retrieval(services, questions: list[str]) -> dict:
    """A chat turn's retrieval as the product does it: one query embedding (the configured embedder, already
    loaded), then `retrieve_both` (papers and papers ∪ thoughts, the kept items' documents, budgets)."""
    from copilot.methods.thought_retriever import retrieve_both

    settings, plan = services.settings, services.generation

    def retrieve(vector: np.ndarray):
        return retrieve_both(services.store, vector, settings.top_k, plan.source_budget, item_tokens=plan.source_cap)

    for question in questions[:WARMUP_QUERIES]:
        retrieve(services.embedder.embed_one(question))
    vectors, embed_times = _timed(services.embedder.embed_one, questions)
    _, retrieve_times = _timed(retrieve, vectors)
    _, turn_times = _timed(lambda question: retrieve(services.embedder.embed_one(question)), questions)
    return {"embedder": services.embedder.name, "embed": _percentiles(embed_times),
            "retrieve_both": _percentiles(retrieve_times), "embed_and_retrieve": _percentiles(turn_times)}


def serve(spec: Spec) -> dict:
    from copilot.services import Services

    baseline_rss = current_rss_mb()
    queries = np.load(spec.queries).astype(np.float32)
    started = time.perf_counter()
    services = Services(_settings(spec.work_dir))
    store = services.store                # as the app opens it (it also looks for other writers on each read)
    merged_nearest(store, queries[0], spec.k)
    first_query_s = time.perf_counter() - started
    for query in queries[1:1 + WARMUP_QUERIES]:
        merged_nearest(store, query, spec.k)
        merged_search(store, query, spec.k)
    ours_ids, ours_times = _timed(lambda q: merged_nearest(store, q, spec.k), queries)
    _, before_times = _timed(lambda q: merged_search(store, q, spec.k), queries)
    ours_rss = peak_rss_mb()
    turn = turn_retrieval(services, json.loads(Path(spec.questions).read_text())) if spec.questions else None

    papers = np.load(Path(spec.work_dir) / "papers.npy")
    thoughts = np.load(Path(spec.work_dir) / "thoughts.npy")
    id_of = json.loads((Path(spec.work_dir) / "ids.json").read_text())
    anchor_times, recalls = [], []
    for query, ours in zip(queries, ours_ids):
        t0 = time.perf_counter()
        exact = anchor_search(papers, thoughts, query, spec.k)
        anchor_times.append(time.perf_counter() - t0)
        exact_ids = {id_of[i] for i in exact}
        recalls.append(len(exact_ids & set(ours)) / len(exact_ids))
    ours_stats, anchor_stats = _percentiles(ours_times), _percentiles(anchor_times)
    return {
        "queries": len(queries),
        "ef_search": _ef_search(store),
        "ours": ours_stats,
        "before_33": _percentiles(before_times),
        "turn": turn,
        "anchor": anchor_stats,
        "p95_speedup": round(anchor_stats["p95_ms"] / max(ours_stats["p95_ms"], 1e-9), 2),
        f"recall_at_{spec.k}": round(float(np.mean(recalls)), 4),
        "first_query_s": round(first_query_s, 3),
        "baseline_rss_mb": round(baseline_rss, 1),
        "peak_rss_mb": round(ours_rss, 1),
        "peak_rss_with_anchor_arrays_mb": round(peak_rss_mb(), 1),
        "disk_bytes": disk_bytes(Path(spec.work_dir) / "chroma"),
    }


def _ef_search(store) -> int | None:
    try:
        return int(store.papers.configuration_json["hnsw"]["ef_search"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def main(argv: list[str]) -> int:
    phase, spec_path = argv
    spec = Spec.load(spec_path)
    result = {"build": build, "serve": serve, "ef": set_ef_search}[phase](spec)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
