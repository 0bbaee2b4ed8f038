"""`python -m copilot bench --json [--sizes 1000,10000,100000] [--quick]`: our speed against the anchor's way.

One run measures ingestion (our batched import path vs one-by-one embedding, and the static fast path when
one is given), retrieval at each corpus size (our HNSW store vs an exact index rebuilt per query, recall of
ours against exact search), memory and disk of the store, the chat overhead (a full turn minus the LLM's own
time) and, for the fast path, its quality cost on CSFCube. It prints one JSON object on stdout, a Markdown
table on stderr, and writes both under `<data dir>/bench/`.

Real abstracts come from the shared 2025-2026 corpus. Corpus sizes beyond it use perturbed copies of real
embeddings, and the thoughts are synthetic (mixtures of real paper vectors); the output says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from copilot.eval.bench_store import PERTURB_SIGMA, THOUGHT_SOURCES, Spec
from copilot.records import Paper
from copilot.store.vectors import HNSW

ROOT = Path(__file__).resolve().parents[2]
PAPERS_JSONL = ROOT.parent / "shared" / "data" / "arxiv-cs-2025-2026" / "papers.jsonl"
CSFCUBE = ROOT.parent / "shared" / "data" / "csfcube"
PARTS = ("ingestion", "retrieval", "chat", "quality", "answers", "related", "fulltext")
DEFAULT_PARTS = ("ingestion", "retrieval", "chat", "quality")   # `answers` runs the local model: ask for it
FULLTEXT_QUESTION = "Which optimizer and learning rate train the RASST speech-text retriever?"
THOUGHTS_PER_PAPER = 0.1      # 100,000 papers come with 10,000 thoughts
HNSW_EF_SEARCH = int(HNSW["ef_search"])
TARGETS = {"retrieval_p95_ms": 20, "recall_at_8": 0.95, "peak_rss_mb": 1536, "chat_overhead_p95_ms": 150,
           "fast_ingest_papers_per_s": 200, "fast_ndcg_relative_loss": 0.05}


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- inputs -------------------------------------------------------------------------------------------------
def read_papers(path: Path, limit: int | None = None) -> list:
    from copilot.sources.snapshot import paper_from_row

    papers: list[Paper] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if limit is not None and len(papers) >= limit:
                break
            papers.append(paper_from_row(json.loads(line)))
    return papers


def cached_vectors(embedder, texts: list[str], cache_dir: Path, label: str) -> np.ndarray:
    """Embeddings of `texts`, cached per embedder and label. The cache of a prefix of `texts` is reused and
    extended, so an interrupted or shorter run still saves work."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    done = np.zeros((0, 0), dtype=np.float32)
    caches = sorted(cache_dir.glob(f"{label}-{embedder.name}-*.npy"), key=lambda f: int(f.stem.rsplit("-", 1)[1]))
    if caches:
        done = np.load(caches[-1], mmap_mode="r")
        if len(done) >= len(texts):
            return np.asarray(done[:len(texts)], dtype=np.float32)
    log(f"embedding {len(texts) - len(done):,} texts with {embedder.name} for {label} (cached for the next run)")
    parts = [np.asarray(done, dtype=np.float32)] if len(done) else []
    parts += [embedder.embed(texts[i:i + 512]) for i in range(len(done), len(texts), 512)]
    vectors = np.concatenate(parts)
    tmp = cache_dir / f".{label}.tmp.npy"
    np.save(tmp, vectors)
    tmp.replace(cache_dir / f"{label}-{embedder.name}-{len(texts)}.npy")
    for old in caches:
        old.unlink(missing_ok=True)
    return vectors


def query_texts(papers: list, count: int, seed: int = 1) -> list[str]:
    """Questions a user might ask, made from the titles of randomly chosen real papers."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(papers), size=min(count, len(papers)), replace=False)
    return [f"What is known about {papers[i].title.rstrip('.')}?" for i in picks]


# --- ingestion ----------------------------------------------------------------------------------------------
def _fresh_services(root: Path, **overrides):
    from copilot.config import load_settings
    from copilot.services import Services

    directory = Path(tempfile.mkdtemp(dir=root))
    values = {"llm": "local", "scheduler": False, **overrides}
    return Services(load_settings(data_dir=directory, **values))


def ingestion(work: Path, papers: list, one_by_one: int, fast_model: str | None) -> dict:
    """Papers per second through the product's import path (embed + upsert), and one-by-one embedding."""
    from copilot.features.library import ingestor

    result: dict = {"papers": len(papers)}
    services = _fresh_services(work)
    started = time.perf_counter()
    services.embedder.embed_one("warm up the model")
    result["model_load_s"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    counts = ingestor(services).run("bench", papers)
    seconds = time.perf_counter() - started
    result["ours_papers_per_s"] = round(counts.added / seconds, 2)
    started = time.perf_counter()
    services.embedder.embed([p.document for p in papers])
    result["ours_embed_only_papers_per_s"] = round(len(papers) / (time.perf_counter() - started), 2)
    started = time.perf_counter()
    for paper in papers[:one_by_one]:
        services.embedder.embed_one(paper.document)
    seconds = time.perf_counter() - started
    result["one_by_one_papers"] = min(one_by_one, len(papers))
    result["one_by_one_papers_per_s"] = round(result["one_by_one_papers"] / seconds, 2)
    result["ratio"] = round(result["ours_papers_per_s"] / result["one_by_one_papers_per_s"], 2)
    result["embed_only_ratio"] = round(result["ours_embed_only_papers_per_s"] / result["one_by_one_papers_per_s"], 2)
    result["embedder"] = services.embedder.name
    if fast_model:
        fast = _fresh_services(work, embed_model=fast_model)
        fast.embedder.embed_one("warm up the model")
        started = time.perf_counter()
        counts = ingestor(fast).run("bench", papers)
        seconds = time.perf_counter() - started
        result["fast_embedder"] = fast.embedder.name
        result["fast_papers_per_s"] = round(counts.added / seconds, 2)
        started = time.perf_counter()
        fast.embedder.embed([p.document for p in papers])
        result["fast_embed_only_papers_per_s"] = round(len(papers) / (time.perf_counter() - started), 1)
        result["fast_ratio_vs_ours"] = round(result["fast_papers_per_s"] / result["ours_papers_per_s"], 2)
    return result


# --- retrieval, memory, disk --------------------------------------------------------------------------------
def _child(phase: str, spec: Spec, spec_path: Path) -> dict:
    spec_path.write_text(json.dumps(asdict(spec)))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "copilot.eval.bench_store", phase, str(spec_path)],
                          capture_output=True, text=True, env=env, cwd=str(ROOT))
    if done.returncode != 0:
        raise RuntimeError(f"bench_store {phase} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def retrieval(work: Path, sizes: list[int], real_vectors: Path, real_count: int, queries: Path, k: int = 8,
              questions: Path | None = None, ef_values: list[int] | None = None,
              store_dir: Path | None = None) -> list[dict]:
    """One row per size (and per HNSW search width in `ef_values`, each served by a fresh process). With
    `store_dir`, the stores are kept there and a later run reuses one built at the same size."""
    rows = []
    for size in sizes:
        thoughts = int(size * THOUGHTS_PER_PAPER)
        with tempfile.TemporaryDirectory(dir=work) as scratch:
            directory = Path(scratch) if store_dir is None else store_dir / f"store-{size}"
            directory.mkdir(parents=True, exist_ok=True)
            spec = Spec(work_dir=str(directory), papers_jsonl=str(PAPERS_JSONL), embeddings=str(real_vectors),
                        queries=str(queries), n_papers=size, n_thoughts=thoughts, k=k,
                        questions=str(questions) if questions else "")
            built = _built(spec, directory)
            for ef in ef_values or [0]:
                if ef:
                    _child("ef", replace(spec, ef_search=ef), directory / "spec.json")
                log(f"  timing queries (ef_search {ef or 'as stored'})")
                served = _child("serve", spec, directory / "spec.json")
                rows.append({"papers": size, "thoughts": thoughts, "real_papers": min(size, real_count),
                             "synthetic_papers": max(0, size - real_count), "build_s": built["build_s"],
                             "build_peak_rss_mb": built["peak_rss_mb"], **served})
            if ef_values:
                _child("ef", replace(spec, ef_search=HNSW_EF_SEARCH), directory / "spec.json")
    return rows


def _built(spec: Spec, directory: Path) -> dict:
    """Build the store of `spec` in `directory`, or reuse the one a previous run built there from the same vectors."""
    marker = directory / "built.json"
    key = {"n_papers": spec.n_papers, "n_thoughts": spec.n_thoughts, "seed": spec.seed,
           "embeddings_sha1": hashlib.sha1(Path(spec.embeddings).read_bytes()).hexdigest()}
    if marker.is_file():
        stored = json.loads(marker.read_text())
        if stored.get("key") == key:
            log(f"retrieval at {spec.n_papers:,} papers + {spec.n_thoughts:,} thoughts: "
                f"reusing the store in {directory}")
            return stored["built"]
    log(f"retrieval at {spec.n_papers:,} papers + {spec.n_thoughts:,} thoughts: building the store")
    built = _child("build", spec, directory / "spec.json")
    log(f"  built in {built['build_s']} s")
    marker.write_text(json.dumps({"key": key, "built": built}))
    return built


def store_unique(store, papers: list, vectors: np.ndarray, batch: int = 4000) -> None:
    """Upsert papers with precomputed vectors, first occurrence of each id only, in Chroma-sized batches."""
    first: dict[str, int] = {}
    for i, paper in enumerate(papers):
        first.setdefault(paper.id, i)
    rows = list(first.values())
    for start in range(0, len(rows), batch):
        chunk = rows[start:start + batch]
        store.upsert_papers([papers[i] for i in chunk], vectors[chunk])


# --- embedding quality --------------------------------------------------------------------------------------
def quality(services, fast_model: str | None, cache_dir: Path) -> dict:
    from copilot.embed import Embedder
    from copilot.eval.bench_quality import csfcube_ndcg

    def cached(embedder):
        def embed(texts: list[str]) -> np.ndarray:
            digest = hashlib.sha1("\x00".join(texts).encode()).hexdigest()[:10]
            return cached_vectors(embedder, texts, cache_dir, f"csfcube{digest}")
        return embed

    result: dict[str, Any] = {"dataset": "CSFCube dev fold, abstract vs abstract", services.embedder.name:
              csfcube_ndcg(cached(services.embedder), CSFCUBE)}
    if fast_model:
        fast = Embedder(fast_model)
        result[fast.name] = csfcube_ndcg(fast.embed, CSFCUBE)
        base, quick = result[services.embedder.name]["ndcg@20"], result[fast.name]["ndcg@20"]
        result["fast_relative_loss"] = round((base - quick) / base, 4) if base else None
    return result


# --- the run ------------------------------------------------------------------------------------------------
def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    import chromadb
    import torch

    return {"cpus": os.cpu_count(), "cpu": cpu, "memory_gb": round(os.sysconf("SC_PAGE_SIZE") *
            os.sysconf("SC_PHYS_PAGES") / 2**30, 1), "python": platform.python_version(),
            "torch": torch.__version__, "chromadb": chromadb.__version__, "load_avg_start": list(os.getloadavg())}


def plan(args: argparse.Namespace) -> dict:
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    else:
        sizes = [1000] if args.quick else [1000, 10000, 100000]
    quick = args.quick
    parts = [x.strip() for x in (args.parts or ",".join(DEFAULT_PARTS)).split(",") if x.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown part(s) {', '.join(sorted(unknown))}; choose from {', '.join(PARTS)}")
    return {"parts": parts, "sizes": sizes, "ingest_papers": 64 if quick else 512, "one_by_one": 16 if quick else 128,
            "queries": 40 if quick else 200, "chat_turns": 6 if quick else 40, "chat_papers": 500 if quick else 2000,
            "quality": "quality" in parts and (not quick or bool(args.fast_model)), "quick": quick,
            "ef_search": [int(x) for x in (getattr(args, "ef_search", None) or "").split(",") if x.strip()]}


def run(services, args: argparse.Namespace) -> dict:
    started = time.perf_counter()
    settings = services.settings
    out_dir = settings.data_dir / "bench"
    cache_dir = out_dir / "cache"
    out_dir.mkdir(parents=True, exist_ok=True)
    p = plan(args)
    fast_model = args.fast_model
    result: dict = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
                    "plan": p, "targets": TARGETS}
    with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
        work = Path(scratch)
        all_papers = read_papers(PAPERS_JSONL)
        real_count = min(len(all_papers), max(p["sizes"] + [p["chat_papers"]]), args.real_papers or len(all_papers))
        if "ingestion" in p["parts"]:
            log(f"ingestion: {p['ingest_papers']} papers batched, {p['one_by_one']} one by one")
            result["ingestion"] = ingestion(work, all_papers[-p["ingest_papers"]:], p["one_by_one"], fast_model)

        if {"retrieval", "chat", "related"} & set(p["parts"]):
            vectors = cached_vectors(services.embedder, [x.document for x in all_papers[:real_count]], cache_dir,
                                     "papers")
            np.save(work / "real.npy", vectors)
            questions = query_texts(all_papers, p["queries"] + p["chat_turns"] + 2)
            query_vectors = services.embedder.embed(questions[:p["queries"]])
            np.save(work / "queries.npy", query_vectors)
            (work / "questions.json").write_text(json.dumps(questions[:p["queries"]]))
        if "retrieval" in p["parts"]:
            result["retrieval"] = retrieval(work, p["sizes"], work / "real.npy", real_count, work / "queries.npy",
                                            questions=work / "questions.json", ef_values=p["ef_search"],
                                            store_dir=Path(args.store_dir) if args.store_dir else None)
        result["retrieval_notes"] = "" if not {"retrieval", "chat"} & set(p["parts"]) else (
            f"papers beyond the first {real_count:,} real ones are perturbed copies of real embeddings "
            f"(Gaussian noise, sigma {PERTURB_SIGMA} per dimension, cosine ≈ 0.9 to the source) with the source "
            f"paper's text; thoughts ({THOUGHTS_PER_PAPER:.0%} of papers) are synthetic: the normalised mean of "
            f"{THOUGHT_SOURCES} real paper vectors plus the same noise. Queries are questions made from real "
            "titles, embedded with the configured model. 'anchor' concatenates all vectors into a fresh exact "
            "inner-product index and searches it, per query; 'ours' queries both HNSW collections through "
            "VectorStore.search and merges. Peak RSS is of the serving process (a fresh process that opens the "
            "store and answers the queries).")

        if "chat" in p["parts"]:
            from copilot.eval.bench_chat import chat_overhead

            log(f"chat overhead: {p['chat_turns']} turns over {p['chat_papers']} papers")
            chat_services = _fresh_services(work)
            store_unique(chat_services.store, all_papers[:min(p["chat_papers"], real_count)], vectors)
            result["chat_overhead"] = chat_overhead(chat_services, questions[p["queries"]:], warmup=2,
                                                    local_model=args.chat_llm == "local")
        if "related" in p["parts"]:
            from copilot.eval.bench_related import related_latency

            count = min(p["chat_papers"], real_count)
            log(f"related: one query paper in a library of {count} papers")
            related_services = _fresh_services(work)
            store_unique(related_services.store, all_papers[:count], vectors)
            result["related"] = related_latency(related_services, all_papers[:count],
                                                queries=10 if p["quick"] else 30)
        if "answers" in p["parts"]:
            from copilot.eval.bench_answers import QUESTIONS, answers_bench

            count = 300 if quick_answers(p) else 2000
            log(f"answers: {len(QUESTIONS)} questions over {count} papers through {services.llm_info()['model']}")
            answer_services = _fresh_services(work, **_llm_settings(settings))
            result["answers"] = answers_bench(answer_services, QUESTIONS[:6] if quick_answers(p) else QUESTIONS,
                                              all_papers[:count])
        if "fulltext" in p["parts"]:
            result["fulltext"] = _fulltext(services, work, all_papers, cache_dir)
        if p["quality"]:
            log("embedding quality on CSFCube")
            result["quality"] = quality(services, fast_model, cache_dir)
    result["machine"]["load_avg_end"] = list(os.getloadavg())
    result["seconds"] = round(time.perf_counter() - started, 1)
    markdown = to_markdown(result)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for name in (f"bench-{stamp}", "bench-latest"):
        (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1))
        (out_dir / f"{name}.md").write_text(markdown)
    result["written"] = str(out_dir / f"bench-{stamp}.json")
    return result


def _fulltext(services, work: Path, all_papers: list, cache_dir: Path) -> dict:
    from copilot.eval.bench_fulltext import fulltext_bench

    pages = PAPERS_JSONL.parents[1] / "arxiv-html"
    log(f"full text: the pages of {pages}, in a library of 2,000 papers and theirs")
    text_services = _fresh_services(work)
    store_unique(text_services.store, all_papers[:2000], cached_vectors(
        services.embedder, [x.document for x in all_papers[:2000]], cache_dir, "papers"))
    return fulltext_bench(text_services, pages, pages / "papers.jsonl", FULLTEXT_QUESTION, "2601.22777")


def quick_answers(p: dict) -> bool:
    return bool(p["quick"])


def _llm_settings(settings) -> dict:
    """The LLM settings of the running configuration, for the fresh store the answers bench builds."""
    names = ("llm", "openai_base_url", "openai_api_key", "llm_model", "local_model", "local_context", "local_threads",
             "local_batch_threads", "local_batch", "local_requantize", "llm_timeout", "context_tokens",
             "source_tokens", "answer_max_tokens", "top_k")
    return {name: getattr(settings, name) for name in names}


def to_markdown(result: dict) -> str:
    m = result["machine"]
    lines = [f"Benchmark {result['created']} — {m['cpus']} CPUs ({m['cpu']}), {m['memory_gb']} GB, load average "
             f"{m['load_avg_start'][0]:.1f} at start, {m.get('load_avg_end', [0])[0]:.1f} at end; "
             f"{result.get('seconds', 0):.0f} s"]
    if "ingestion" in result:
        lines += ["", *_ingestion_rows(result["ingestion"])]
    if result.get("retrieval"):
        lines += ["", *_retrieval_rows(result["retrieval"])]
    if "chat_overhead" in result:
        chat = result["chat_overhead"]
        lines += ["", f"Chat overhead ({chat['llm']}, {chat['turns']} turns): p50 {chat['overhead_p50_ms']} ms, "
                  f"p95 {chat['overhead_p95_ms']} ms (retrieval p50 {chat['retrieval_p50_ms']} ms, "
                  f"{chat['llm_calls_per_turn']} LLM calls per turn)."]
    if "quality" in result:
        q = result["quality"]
        scores = ", ".join(f"{name} {value['ndcg@20']}" for name, value in q.items() if isinstance(value, dict))
        lines += ["", f"CSFCube NDCG@20 ({q['dataset']}): {scores}" +
                  (f"; fast path relative loss {q['fast_relative_loss']:.1%}" if q.get("fast_relative_loss")
                   is not None else "")]
    if "related" in result:
        from copilot.eval import bench_related

        lines += ["", bench_related.to_markdown(result["related"]).rstrip()]
    if "answers" in result:
        from copilot.eval import bench_answers

        lines += ["", bench_answers.to_markdown(result["answers"]).rstrip()]
    if "fulltext" in result:
        from copilot.eval import bench_fulltext

        lines += ["", *bench_fulltext.markdown(result["fulltext"])]
    if result["retrieval_notes"]:
        lines += ["", result["retrieval_notes"]]
    return "\n".join(lines) + "\n"


def _ingestion_rows(ing: dict) -> list[str]:
    rows = ["| ingestion | papers/s |", "|---|---|",
            f"| ours: batched import (embed + upsert), {ing['embedder']} | {ing['ours_papers_per_s']} |",
            f"| ours: batched embedding alone | {ing['ours_embed_only_papers_per_s']} |",
            f"| anchor: one-by-one embedding, {ing['embedder']} | {ing['one_by_one_papers_per_s']} |",
            f"| ratio ours (import) / anchor | {ing['ratio']}× |",
            f"| ratio ours (embedding alone) / anchor | {ing['embed_only_ratio']}× |"]
    if "fast_papers_per_s" in ing:
        rows += [f"| fast path: batched import, {ing['fast_embedder']} | {ing['fast_papers_per_s']} |",
                 f"| fast path: embedding alone | {ing['fast_embed_only_papers_per_s']} |"]
    return rows


def _retrieval_rows(retrieval: list[dict]) -> list[str]:
    rows = ["| papers + thoughts | synthetic papers | ef_search | ours p50 / p95 ms | before #33 p50 / p95 ms | "
            "turn: embed + retrieve p50 / p95 ms (embed alone) | anchor p50 / p95 ms | p95 speed-up | recall@8 | "
            "first query s | peak RSS MB (baseline) | disk MB | build s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in retrieval:
        before, turn = row.get("before_33"), row.get("turn")
        before_text = f"{before['p50_ms']:.2f} / {before['p95_ms']:.2f}" if before else "—"
        turn_text = (f"{turn['embed_and_retrieve']['p50_ms']:.2f} / {turn['embed_and_retrieve']['p95_ms']:.2f} "
                     f"({turn['embed']['p50_ms']:.2f} / {turn['embed']['p95_ms']:.2f})" if turn else "—")
        rows.append(f"| {row['papers']:,} + {row['thoughts']:,} | {row['synthetic_papers']:,} | "
                    f"{row.get('ef_search') or '—'} | {row['ours']['p50_ms']:.2f} / {row['ours']['p95_ms']:.2f} | "
                    f"{before_text} | {turn_text} | "
                    f"{row['anchor']['p50_ms']:.2f} / {row['anchor']['p95_ms']:.2f} | {row['p95_speedup']}× | "
                    f"{row['recall_at_8']:.3f} | {row['first_query_s']:.2f} | {row['peak_rss_mb']:.0f} "
                    f"({row['baseline_rss_mb']:.0f}) | {row['disk_bytes'] / 2**20:.1f} | {row['build_s']:.1f} |")
    return rows
