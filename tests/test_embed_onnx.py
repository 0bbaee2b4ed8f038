"""COPILOT_EMBED_BACKEND: the ONNX Runtime copy of the packaged MiniLM against torch on real abstracts, the copy's
life cycle (made once, reused, rebuilt when damaged, partial or stale) and the fall-back to torch."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest

import copilot.embed as embed
from copilot.config import SettingsError, load_settings
from copilot.embed import Embedder, EmbedderError, OnnxModel, onnx_copy, packaged_minilm
from copilot.sources.snapshot import paper_from_row
from tests.helpers import PAPERS_JSONL, clean_env

# Measured on 300 real abstracts (docs/performance.md section 4): fp32 min 0.99999+, int8 min 0.990.
FP32_MIN_COSINE = 0.9999
INT8_MIN_COSINE = 0.98


def abstracts(count: int) -> list[str]:
    rows = []
    with PAPERS_JSONL.open(encoding="utf-8") as lines:
        for line in lines:
            rows.append(paper_from_row(json.loads(line)).document)
            if len(rows) == count:
                break
    return rows


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return abstracts(48)


@pytest.fixture(scope="module")
def torch_vectors(texts) -> np.ndarray:
    return Embedder(precision="fp32").embed(texts)     # the fp32 ONNX copy is held to torch fp32


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


def fresh(backend: str, models_dir, precision: str = "auto") -> Embedder:
    """An embedder that loads its model again (the process keeps one per model and backend)."""
    embedder = Embedder(backend=backend, models_dir=models_dir, precision=precision)
    embed._models.pop(embedder.key, None)
    return embedder


def test_onnx_gives_torch_vectors_on_real_abstracts(texts, torch_vectors, models_dir):
    embedder = fresh("onnx", models_dir)
    vectors = embedder.embed(texts)
    assert isinstance(embedder._model(), OnnxModel), "the ONNX copy was not used"
    assert vectors.dtype == np.float32 and vectors.shape == torch_vectors.shape
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(vectors * torch_vectors, axis=1))) >= FP32_MIN_COSINE
    assert embedder.name == Embedder().name == "all-MiniLM-L6-v2"    # the same vectors: the same embedder
    one = embedder.embed_one(texts[3])
    assert float(one @ torch_vectors[3]) >= FP32_MIN_COSINE


def test_onnx_token_vectors_match_torch(texts, models_dir):
    ours = fresh("onnx", models_dir).token_vectors(texts[:3])
    theirs = Embedder().token_vectors(texts[:3])
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        assert float(np.min(np.sum(a * b, axis=1))) >= FP32_MIN_COSINE


def test_int8_is_close_to_torch_and_named_apart(texts, torch_vectors, models_dir):
    embedder = fresh("onnx-int8", models_dir)
    vectors = embedder.embed(texts)
    assert isinstance(embedder._model(), OnnxModel)
    cosines = np.sum(vectors * torch_vectors, axis=1)
    assert float(cosines.min()) >= INT8_MIN_COSINE
    assert float(cosines.mean()) < 0.9999, "int8 weights should not reproduce torch exactly"
    assert embedder.name == "all-MiniLM-L6-v2-onnx-int8"     # other vectors: never mixed with torch's
    assert (models_dir / "all-MiniLM-L6-v2.int8.onnx").is_file()


def count_exports(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = embed._export

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(embed, "_export", counted)
    return calls


def test_a_good_copy_is_reused(models_dir, monkeypatch):
    target = onnx_copy(packaged_minilm(), models_dir, "all-MiniLM-L6-v2", int8=False)
    calls = count_exports(monkeypatch)
    assert onnx_copy(packaged_minilm(), models_dir, "all-MiniLM-L6-v2", int8=False) == target
    assert calls == []


@pytest.mark.parametrize("damage", ["flipped bytes", "cut short", "stale", "no record"])
def test_a_damaged_partial_or_stale_copy_is_rebuilt(tmp_path, texts, torch_vectors, monkeypatch, damage):
    source = packaged_minilm()
    target = onnx_copy(source, tmp_path, "m", int8=False)
    record = tmp_path / "m.onnx.json"
    data = target.read_bytes()
    if damage == "flipped bytes":                   # still a loadable model, with wrong weights
        middle = len(data) // 2
        target.write_bytes(data[:middle] + bytes(b ^ 0xFF for b in data[middle:middle + 4096]) + data[middle + 4096:])
    elif damage == "cut short":                     # an interrupted copy
        target.write_bytes(data[: len(data) // 3])
    elif damage == "stale":                         # older than the model it was made from
        os.utime(target, (0, 0))
    else:                                           # the export stopped before it recorded the finished copy
        record.unlink()
    calls = count_exports(monkeypatch)
    assert onnx_copy(source, tmp_path, "m", int8=False) == target
    assert calls == [1]
    assert target.read_bytes() != data[: len(data) // 3]
    assert json.loads(record.read_text())["sha256"] == embed._sha256(target)
    vectors = OnnxModel(target, source).encode(texts[:8])
    assert float(np.min(np.sum(vectors * torch_vectors[:8], axis=1))) >= FP32_MIN_COSINE


def test_a_leftover_partial_file_is_never_used(tmp_path, monkeypatch):
    (tmp_path / "m.onnx.partial").write_bytes(b"half an export")
    calls = count_exports(monkeypatch)
    target = onnx_copy(packaged_minilm(), tmp_path, "m", int8=False)
    assert calls == [1] and target.name == "m.onnx" and not (tmp_path / "m.onnx.partial").exists()


def assert_torch_instead(embedder, texts, torch_vectors, caplog, logged: str, also=lambda: True) -> None:
    """The embedder fell back to torch: torch's vectors, the reason logged, and `also` holds."""
    with caplog.at_level(logging.WARNING, logger="copilot.embed"):
        vectors = embedder.embed(texts[:4])
    assert not isinstance(embedder._model(), OnnxModel)
    assert float(np.min(np.sum(vectors * torch_vectors[:4], axis=1))) >= 0.99999
    assert logged in caplog.text
    assert also()
    embed._models.pop(embedder.key, None)


def test_a_failed_export_falls_back_to_torch(tmp_path, texts, torch_vectors, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("exporter crashed")

    monkeypatch.setattr(embed, "_export", broken)
    embedder = fresh("onnx-int8", tmp_path, precision="fp32")   # fp32 torch, as `torch_vectors` (not bf16)
    assert_torch_instead(embedder, texts, torch_vectors, caplog,
                         "onnx-int8 unavailable (exporter crashed); using torch",
                         lambda: embedder.name == "all-MiniLM-L6-v2")   # torch made these vectors, so torch's name


def test_a_failing_runtime_falls_back_to_torch(models_dir, texts, torch_vectors, monkeypatch, caplog):
    import onnxruntime

    def no_session(*args, **kwargs):
        raise RuntimeError("onnxruntime cannot run here")

    monkeypatch.setattr(onnxruntime, "InferenceSession", no_session)
    assert_torch_instead(fresh("onnx", models_dir, precision="fp32"), texts, torch_vectors, caplog,
                         "onnxruntime cannot run here")


def test_without_a_models_folder_torch_is_used(caplog):
    embedder = Embedder(backend="onnx")
    embed._models.pop(embedder.key, None)
    with caplog.at_level(logging.WARNING, logger="copilot.embed"):
        assert embedder.dimension == 384
    assert "no models folder" in caplog.text
    embed._models.pop(embedder.key, None)


def test_only_mean_pooled_bert_models_are_exported(tmp_path):
    (tmp_path / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "",
                                                        "type": "sentence_transformers.models.Transformer"}]))
    with pytest.raises(EmbedderError, match="ONNX backend"):
        onnx_copy(tmp_path, tmp_path / "models", "x", int8=False)


def test_bad_backend_names_are_refused(monkeypatch, tmp_path):
    with pytest.raises(EmbedderError, match="unknown embedding backend 'cuda'"):
        Embedder(backend="cuda")
    clean_env(monkeypatch)
    monkeypatch.setenv("COPILOT_EMBED_BACKEND", "openvino")
    with pytest.raises(SettingsError, match="COPILOT_EMBED_BACKEND"):
        load_settings(data_dir=tmp_path)
    monkeypatch.delenv("COPILOT_EMBED_BACKEND")
    assert load_settings(data_dir=tmp_path).embed_backend == "torch"
