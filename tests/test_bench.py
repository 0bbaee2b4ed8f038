"""Benchmark: its measuring parts exactly, the static embedding path, and `bench --quick --json` end to end.

The end-to-end run uses a small static embedding model (random token vectors over the packaged MiniLM
tokenizer: a bag-of-words random projection) so it stays fast on 2 busy cores; the MiniLM numbers come from
the command itself (docs/performance.md). The chat overhead is also measured once through the real local model.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from copilot.cli import main
from copilot.embed import STATIC_FILE, Embedder, EmbedderError, packaged_minilm
from copilot.eval.bench_chat import InstantBackend, TimedBackend, chat_overhead
from copilot.eval.bench_quality import csfcube_ndcg
from copilot.eval.bench_store import anchor_search, corpus_vectors
from copilot.llm import LLM, Usage
from copilot.prompts import CHAT_ANSWER, CHAT_THOUGHT, source_block
from copilot.services import Services
from tests.conftest import CSFCUBE, import_papers


def unit_rows(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, dim))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def static_model(tmp_path_factory):
    """A static model directory in the format `distill_static` writes, with random 64-d token vectors."""
    path = tmp_path_factory.mktemp("static") / "tiny-static"
    path.mkdir()
    shutil.copy(packaged_minilm() / "tokenizer.json", path / "tokenizer.json")
    np.savez(path / STATIC_FILE, vectors=np.random.default_rng(0).normal(size=(30522, 64)).astype(np.float32))
    return path


# --- corpus, anchor search, recall -------------------------------------------------------------------------
def test_corpus_keeps_real_rows_then_adds_unit_perturbed_copies_and_thoughts():
    real = unit_rows(50)
    papers, source, thoughts = corpus_vectors(real, 120, 12, seed=3)
    assert papers.shape == (120, 16) and thoughts.shape == (12, 16)
    assert np.array_equal(papers[:50], real) and list(source[:50]) == list(range(50))
    assert np.allclose(np.linalg.norm(papers, axis=1), 1, atol=1e-5)
    assert np.allclose(np.linalg.norm(thoughts, axis=1), 1, atol=1e-5)
    copies = np.sum(papers[50:] * real[source[50:]], axis=1)
    assert copies.min() > 0.9 and copies.max() < 1.0     # close to their source paper, but not identical


def test_corpus_within_the_real_papers_has_no_synthetic_rows():
    real = unit_rows(50)
    papers, source, _ = corpus_vectors(real, 30, 0, seed=0)
    assert np.array_equal(papers, real[:30]) and list(source) == list(range(30))


def test_anchor_search_is_exact_top_k_over_papers_and_thoughts():
    papers, thoughts, query = unit_rows(200, seed=1), unit_rows(20, seed=2), unit_rows(1, seed=3)[0]
    every = np.concatenate([papers, thoughts])
    expected = np.argsort(-(every @ query))[:8]
    assert list(anchor_search(papers, thoughts, query, 8)) == list(expected)


# --- chat overhead instruments -----------------------------------------------------------------------------
def test_instant_backend_answers_from_the_first_source_and_writes_a_thought():
    backend = InstantBackend()
    answer_messages = CHAT_ANSWER.render(sources=source_block("2501.00001", "Graphs help retrieval."),
                                         question="Do graphs help?", reader="").as_messages()
    answer = "".join(backend.stream(answer_messages, 50, 0.1, Usage()))
    assert answer == "The sources report that Graphs help retrieval. [2501.00001]."
    thought_messages = CHAT_THOUGHT.render(question="Do graphs help?",
                                           answer=source_block("answer", answer)).as_messages()
    thought = "".join(backend.stream(thought_messages, 50, 0.1, Usage()))
    assert thought.startswith("1\nAsked: Do graphs help? Found: The sources report")


def test_timed_backend_adds_up_only_the_time_spent_inside_the_model():
    clock = [0.0]

    class Slow:
        name, model = "slow", "slow"

        def stream(self, messages, max_tokens, temperature, usage, grammar=None):
            for piece in ("a", "b"):
                clock[0] += 5.0              # the model works 5 s per piece
                yield piece

    timed = TimedBackend(Slow(), clock=lambda: clock[0])
    pieces = []
    for piece in LLM(timed, None, retries=0).stream(CHAT_ANSWER.render(sources="x", question="q", reader="")):
        pieces.append(piece)
        clock[0] += 100.0                    # the consumer's time is not the model's
    assert pieces == ["a", "b"] and timed.calls == 1 and timed.seconds == 10.0


# --- static embeddings -------------------------------------------------------------------------------------
def test_static_model_embeds_unit_vectors_and_shared_words_make_texts_similar(static_model):
    embedder = Embedder(str(static_model))
    vectors = embedder.embed(["graph neural networks for retrieval", "retrieval for graph neural networks",
                              "protein folding in yeast cells", ""])
    assert vectors.shape == (4, 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1, atol=1e-5)
    assert not vectors[3].any()                                     # an empty text stays a zero vector
    assert vectors[0] @ vectors[1] > 0.99 > vectors[0] @ vectors[2]  # same words, any order
    assert embedder.dimension == 64 and embedder.name == "tiny-static"


def test_a_broken_static_model_says_how_to_remake_it(tmp_path):
    (tmp_path / STATIC_FILE).write_bytes(b"not an npz")
    with pytest.raises(EmbedderError, match="embed-distill"):
        Embedder(str(tmp_path)).embed(["text"])


def test_csfcube_quality_ranks_by_the_embedding_it_is_given(static_model):
    good = csfcube_ndcg(Embedder(str(static_model)).embed, CSFCUBE)
    noise = csfcube_ndcg(lambda texts: unit_rows(len(texts), 32, seed=7), CSFCUBE)
    assert good["queries"] == noise["queries"] == 24
    assert 0 <= noise["ndcg@20"] < good["ndcg@20"] <= 1             # word overlap beats random vectors


# --- end to end --------------------------------------------------------------------------------------------
def test_bench_quick_prints_one_json_object_and_writes_json_and_markdown(tmp_path, monkeypatch, capsys, static_model):
    data = tmp_path / "data"
    monkeypatch.setenv("COPILOT_DATA_DIR", str(data))
    monkeypatch.setenv("COPILOT_EMBED_MODEL", str(static_model))
    monkeypatch.setenv("COPILOT_LLM", "local")
    assert main(["bench", "--quick", "--sizes", "300,2500", "--real-papers", "2000", "--fast-model", str(static_model),
                 "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)                                  # exactly one JSON object on stdout
    assert "| ingestion | papers/s |" in err and "recall@8" in err
    ingestion = result["ingestion"]
    assert ingestion["ours_papers_per_s"] > 0 and ingestion["one_by_one_papers_per_s"] > 0
    assert ingestion["ours_embed_only_papers_per_s"] > 0
    assert ingestion["fast_embedder"] == "tiny-static"
    small, large = result["retrieval"]
    assert (small["papers"], small["thoughts"], small["synthetic_papers"]) == (300, 30, 0)
    assert (large["papers"], large["thoughts"], large["synthetic_papers"]) == (2500, 250, 500)
    for row in (small, large):
        assert 0.5 <= row["recall_at_8"] <= 1.0
        assert row["ours"]["p95_ms"] >= row["ours"]["p50_ms"] > 0 and row["anchor"]["p50_ms"] > 0
        assert row["disk_bytes"] > 0 and row["peak_rss_mb"] > row["baseline_rss_mb"] > 0
    assert large["disk_bytes"] > small["disk_bytes"]
    assert "perturbed copies" in result["retrieval_notes"]
    chat = result["chat_overhead"]
    assert chat["turns"] == 6 and chat["overhead_p95_ms"] >= chat["overhead_p50_ms"] > 0
    assert chat["llm_calls_per_turn"] == 0            # the tiny default quotes: answers and thoughts call no model
    assert result["quality"]["tiny-static"]["ndcg@20"] > 0
    written = data / "bench" / "bench-latest.json"
    assert json.loads(written.read_text())["retrieval"] == result["retrieval"]
    assert (data / "bench" / "bench-latest.md").read_text().startswith("Benchmark ")


def test_retrieval_sweeps_the_search_width_in_fresh_processes_and_reuses_a_kept_store(tmp_path, monkeypatch,
                                                                                        capsys, static_model):
    monkeypatch.setenv("COPILOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COPILOT_EMBED_MODEL", str(static_model))
    args = ["bench", "--quick", "--sizes", "400", "--real-papers", "300", "--parts", "retrieval",
            "--ef-search", "4,80", "--store-dir", str(tmp_path / "stores"), "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr()[0])["retrieval"]
    assert [row["ef_search"] for row in first] == [4, 80]
    for row in first:
        turn = row["turn"]
        assert turn["embedder"] == "tiny-static" and turn["embed"]["p50_ms"] > 0
        assert turn["embed_and_retrieve"]["p95_ms"] >= turn["embed_and_retrieve"]["p50_ms"] > 0
        assert row["before_33"]["p50_ms"] > 0
    assert first[1]["recall_at_8"] >= first[0]["recall_at_8"]
    assert main(args) == 0
    again, err = capsys.readouterr()
    assert "reusing the store" in err and "building the store" not in err
    assert json.loads(again)["retrieval"][0]["build_s"] == first[0]["build_s"]
    assert main(["bench", "--parts", "retrieval", "--ef-search", "4,wide"]) == 2
    assert "--ef-search takes whole numbers" in capsys.readouterr()[1]


def test_chat_overhead_through_the_real_local_model(services):
    # the writing path (on the tiny default answers quote and call no model, so there is no overhead to compare)
    services = Services(services.settings.model_copy(update={"model_profile": "capable"}))
    papers = import_papers(services, 30)
    # about one of the papers: a question no paper is close to gets the cannot-answer sentence with no LLM call
    result = chat_overhead(services, [f"What does the paper '{papers[0].title}' find?"], warmup=0,
                           local_model=True)
    assert result["turns"] == 1 and result["llm"].startswith("local model")
    assert result["llm_calls_per_turn"] >= 1
    assert 0 < result["overhead_p50_ms"] < result["turn_p50_ms"]
    calls = services.db.query("SELECT backend, latency_s FROM llm_calls")
    assert calls and all(row["backend"] == "local" for row in calls)
