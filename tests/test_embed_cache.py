"""Embedder.embed_cached (issue #41 item 7): a quoted answer's sentences are embedded once per process."""

from __future__ import annotations

from copilot.services import Services
from tests.conftest import make_settings


def test_sentences_are_embedded_once_per_process_and_read_back_the_same(tmp_path, monkeypatch):
    """A quoted answer embeds every sentence of its sources; the next answer over the same papers reads them back."""
    import numpy as np

    embedder = Services(make_settings(tmp_path / "cache")).embedder
    texts = ["Dense retrieval beats BM25 on question answering.", "Graphs link papers.", "Graphs link papers."]
    direct = embedder.embed(texts)
    seen: list[list[str]] = []
    real = embedder.embed
    monkeypatch.setattr(embedder, "embed", lambda batch: seen.append(list(batch)) or real(batch))
    first, again = embedder.embed_cached(texts), embedder.embed_cached(texts[::-1])
    assert np.allclose(first, direct, atol=1e-5) and np.allclose(again, direct[::-1], atol=1e-5)
    assert seen == [texts[:2]]                       # each distinct text once; the second call embedded nothing
