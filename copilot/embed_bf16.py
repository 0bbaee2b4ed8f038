"""bf16 embeddings whose vector of a text does not depend on the batch it is embedded in (issue #58 item 10).

sentence-transformers pads a batch to its longest text; in bf16 the padded length changes a text's vector (by up to
~1e-3 on this project's Sapphire Rapids machine: kernels block the sums by the sequence length, and every layer's
output is rounded to bf16), and the embedder ran fp32 below 16 texts: a sentence embedded with a question, in a
resumed import or in another paper's batch got another vector, so a table could depend on what was embedded beside
it. Here every text is padded to a length of its own, its token count rounded up to `BUCKET_TOKENS`, and texts are
batched only with texts of that same length: its computation has the same shape whatever its neighbours, and its
vector is the same bit for bit alone or in any batch (checked by tests/test_embed_bf16.py). The cost is at most
`BUCKET_TOKENS - 1` padding tokens per text and one batch per length present (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BUCKET_TOKENS = 16        # a text's padded length: its token count rounded up to a multiple of this


def autocast():
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)


def padded_length(tokens: int, most: int) -> int:
    """The length a text of `tokens` tokens is padded to (never past the model's maximum `most`)."""
    return min(most, -(-max(tokens, 1) // BUCKET_TOKENS) * BUCKET_TOKENS)


def encode(model, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """Unit-normalised float32 vectors of `texts` by a sentence-transformers `model` in bf16, each text padded to its
    own `padded_length` and batched only with texts of that length (at most `batch_size` a batch)."""
    import torch

    texts = list(texts)
    most = int(model.max_seq_length)
    counts = model.preprocess(texts)["attention_mask"].sum(dim=1).tolist() if texts else []
    groups: dict[int, list[int]] = {}
    for index, count in enumerate(counts):
        groups.setdefault(padded_length(int(count), most), []).append(index)
    out = np.zeros((len(texts), model.get_embedding_dimension()), dtype=np.float32)
    for length, indices in sorted(groups.items()):
        for start in range(0, len(indices), batch_size):
            part = indices[start:start + batch_size]
            features = model.preprocess([texts[i] for i in part])
            features = {key: _pad(value, length) for key, value in features.items()}
            with torch.inference_mode(), autocast():
                vectors = model(features)["sentence_embedding"]
            out[part] = vectors.float().numpy()
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def _pad(value, length: int):
    """A (batch, tokens) tensor of token ids, masks or types padded with zeros to `length` tokens; anything else
    as it is."""
    import torch

    if not isinstance(value, torch.Tensor) or value.dim() != 2 or value.shape[1] >= length:
        return value
    return torch.nn.functional.pad(value, (0, length - value.shape[1]), value=0)
