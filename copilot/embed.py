"""One embedder: sentence-transformers, loaded once from a local path, no model hub access.

A model path may also name a *static* model made by `distill_static` (a directory holding
`static_embeddings.npz` and `tokenizer.json`): one vector per vocabulary token, distilled from the packaged
MiniLM; a text's vector is the normalised sum of its tokens' vectors. It embeds ~100x faster on a CPU at
some cost in quality (docs/performance.md has both numbers). Its vectors are not comparable with MiniLM's.

On the torch path texts run in bfloat16 (autocast) where the CPU multiplies bf16 in hardware (`native_bf16`): ~2x
faster on a full paper's sentences, vectors within cosine 0.9999 of fp32 (docs/performance.md, "bf16 on the torch
path"). Every text of every call runs so, each padded to a length of its own (copilot.embed_bf16): its vector is the
same alone or in any batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import warnings
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from copilot import embed_bf16
from copilot.embed_static import (
    STATIC_FILE,
    EmbedderError,
    StaticModel,
    distill_static,
    is_static_model,
    packaged_minilm,
)

if TYPE_CHECKING:
    from copilot.store.sentence_vectors import SentenceVectors

log = logging.getLogger(__name__)
__all__ = ["STATIC_FILE", "Embedder", "EmbedderError", "OnnxModel", "StaticModel", "distill_static", "is_static_model",
           "native_bf16", "onnx_copy", "packaged_minilm"]
BACKENDS = ("torch", "onnx", "onnx-int8")
PRECISIONS = ("auto", "fp32")
# The instruction set that multiplies bf16 in hardware (every AMX CPU lists it too). torch's own check (oneDNN's) also
# says yes on plain AVX-512, where oneDNN emulates bf16, slower than fp32; on AVX2 it says no. Both must agree.
BF16_FLAG = "avx512_bf16"
BF16_MIN_COSINE = 0.9999  # the same-embedder rule of the fp32 ONNX copy (ONNX_MIN_COSINE[False])
CPUINFO = Path("/proc/cpuinfo")


SENTENCE_CACHE = 20_000           # texts kept by Embedder.embed_cached (~30 MB of 384-float vectors)

_models: dict[str, object] = {}
_bf16_ok: dict[str, bool] = {}           # per torch model: bf16 passed the CPU gate and its check
_models_lock = threading.Lock()


@lru_cache(maxsize=4)
def native_bf16(cpuinfo: Path = CPUINFO) -> tuple[bool, str]:
    """Whether torch runs bf16 matrix products natively on this CPU, and why (or why not)."""
    from copilot.llm.cpu_backend import cpu_flags

    if BF16_FLAG not in cpu_flags(cpuinfo):
        return False, f"the CPU does not list {BF16_FLAG} (bf16 would be emulated, slower than fp32)"
    # oneDNN's AMX kernels are left out, as llama.cpp's are (copilot/llm/cpu_backend.py): a VM can list AMX that it
    # does not grant. Read by oneDNN at its first use; ONEDNN_MAX_CPU_ISA=ALL in the environment allows them.
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    import torch

    if not (torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        return False, f"the CPU lists {BF16_FLAG} but torch's oneDNN has no bf16 kernels for it"
    return True, f"the CPU lists {BF16_FLAG}"


def _sentence_transformer(ref: str):
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(ref, device="cpu")
    except Exception as error:
        raise EmbedderError(f"cannot load embedding model {ref!r}: {error}. "
                            "COPILOT_EMBED_MODEL must name a model available offline") from None


class Embedder:
    """Unit-normalised float32 embeddings, batched. The model loads on first use and is shared per process."""

    def __init__(self, model: str | None = None, batch_size: int = 32, backend: str = "torch",
                 models_dir: Path | None = None, precision: str = "auto") -> None:
        """`backend`: `torch` (sentence-transformers), `onnx` or `onnx-int8` (an ONNX Runtime copy of the model,
        exported once into `models_dir`; without a models dir, or when the export fails, torch with a logged
        reason). A static model ignores the backend. `precision`: `auto` runs torch's batches in bf16 where
        `native_bf16` says so, `fp32` never."""
        if backend not in BACKENDS:
            raise EmbedderError(f"unknown embedding backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        if precision not in PRECISIONS:
            raise EmbedderError(f"unknown embedding precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
        self.model_ref = model or str(packaged_minilm())
        self.batch_size = batch_size
        self.backend = backend
        self.precision = precision
        self.models_dir = Path(models_dir) if models_dir else None

    @property
    def base_name(self) -> str:
        path = Path(self.model_ref)
        return "all-MiniLM-L6-v2" if path == packaged_minilm() else (path.name or self.model_ref)

    @property
    def name(self) -> str:
        """What made the vectors. The fp32 ONNX copy gives torch's vectors (cosine >= 0.99999) and keeps the name, as
        do torch's bf16 batches (checked >= BF16_MIN_COSINE at load, measured >= 0.9999 on thousands of sentences);
        int8 vectors differ (cosine ~0.995), so they are another embedder. Loads the model for `onnx-int8`: a
        failed export falls back to torch, whose vectors then carry torch's name."""
        if self.backend == "onnx-int8" and isinstance(self._model(), OnnxModel):
            return f"{self.base_name}-onnx-int8"
        return self.base_name

    @property
    def key(self) -> str:
        return f"{self.model_ref}\x00{self.backend}" if self.backend != "torch" else self.model_ref

    def _model(self):
        with _models_lock:
            if self.key not in _models:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                if is_static_model(self.model_ref):
                    _models[self.key] = StaticModel(Path(self.model_ref))
                elif self.backend != "torch":
                    _models[self.key] = self._onnx_or_torch()
                else:
                    _models[self.key] = _sentence_transformer(self.model_ref)
            return _models[self.key]

    def _bf16(self, model) -> bool:
        """Whether texts run in bf16 (all of them, whatever their number: one precision, so a text's vector does not
        depend on its batch); the gate and its check run once per model and process."""
        if self.precision != "auto" or isinstance(model, (StaticModel, OnnxModel)):
            return False
        with _models_lock:
            if self.key not in _bf16_ok:
                _bf16_ok[self.key] = _bf16_checked(model, self.model_ref)
            return _bf16_ok[self.key]

    @property
    def path(self) -> str:
        """How a batch of texts is embedded here: `torch bf16`, `torch fp32`, `onnx`, `onnx-int8` or `static`.
        Loads the model."""
        model = self._model()
        if isinstance(model, StaticModel):
            return "static"
        if isinstance(model, OnnxModel):
            return self.backend
        return "torch bf16" if self._bf16(model) else "torch fp32"

    def _onnx_or_torch(self):
        """The ONNX Runtime model, or torch's with the reason logged: the same vectors are never lost, only speed."""
        try:
            if self.models_dir is None:
                raise EmbedderError("no models folder to keep the ONNX copy in")
            path = onnx_copy(Path(self.model_ref), self.models_dir, self.base_name, self.backend == "onnx-int8")
            return OnnxModel(path, Path(self.model_ref))
        except Exception as error:  # noqa: BLE001 - any failure of export or runtime means: use torch
            log.warning("embedding backend %s unavailable (%s); using torch", self.backend, error)
            return _sentence_transformer(self.model_ref)

    @property
    def dimension(self) -> int:
        model = self._model()
        if isinstance(model, (StaticModel, OnnxModel)):
            return model.dimension
        named = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(named())

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._model()
        if isinstance(model, StaticModel):
            return model.encode(list(texts))
        if isinstance(model, OnnxModel):
            return model.encode(list(texts), self.batch_size)
        if self._bf16(model):        # each text padded to a length of its own: its vector is the same in any batch
            return embed_bf16.encode(model, texts, self.batch_size)
        vectors = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=False)
        return vectors.astype(np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_cached(self, texts: list[str], stored: SentenceVectors | None = None) -> np.ndarray:
        """`embed` through a bounded per-process cache keyed by the text, and then through `stored` (vectors kept on
        disk, see store.sentence_vectors), which also keeps what had to be embedded: the sentences of a stored
        abstract are embedded once, not once per answer. A quoted answer embeds the candidate sentences of its ~12
        sources, and the two sides and the next users' questions mostly share them: 20 users asking at once were
        CPU-bound on those repeats (issue #41 item 7). `stored` never fails the call: a broken file reads as
        empty and keeps nothing, so what it misses is embedded here (issue #47 item 6)."""
        cache = self.__dict__.setdefault("_sentence_cache", OrderedDict())
        lock = self.__dict__.setdefault("_sentence_lock", threading.Lock())
        with lock:
            missing = list(dict.fromkeys(t for t in texts if t not in cache))
        known = stored.get(self.name, missing) if stored is not None and missing else {}
        to_embed = [t for t in missing if t not in known]
        fresh = self.embed(to_embed) if to_embed else np.zeros((0, 0), dtype=np.float32)
        if stored is not None and to_embed:
            stored.put(self.name, to_embed, fresh)
        with lock:
            for text, vector in [*known.items(), *zip(to_embed, fresh)]:
                cache[text] = vector
            while len(cache) > SENTENCE_CACHE:
                cache.popitem(last=False)
            found = {t: cache.get(t) for t in texts}
        if any(v is None for v in found.values()):       # evicted meanwhile by another thread: embed those now
            return self.embed(list(texts))
        return np.stack([found[t] for t in texts]) if texts else np.zeros((0, self.dimension), dtype=np.float32)

    def token_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Per text, its tokens' contextual vectors (the model's last layer; [CLS] and [SEP] left out), each
        unit-normalised: the material of a BERTScore-style similarity. Texts are cut at the model's maximum
        length (256 word pieces for the packaged MiniLM). A static model gives its per-token vectors."""
        model = self._model()
        if isinstance(model, StaticModel):
            encodings = model.tokenizer.encode_batch(list(texts), add_special_tokens=False)
            rows = [model.vectors[np.asarray(e.ids or [0], dtype=np.int64)] for e in encodings]
        elif isinstance(model, OnnxModel):
            rows = [t[1:-1] if len(t) > 2 else t for t in model.token_embeddings(list(texts), self.batch_size)]
        else:
            out = model.encode(list(texts), batch_size=self.batch_size, output_value="token_embeddings",
                               convert_to_numpy=False, show_progress_bar=False)
            rows = [t.float().numpy()[1:-1] if len(t) > 2 else t.float().numpy() for t in out]
        normed = []
        for row in rows:
            norms = np.linalg.norm(row, axis=1, keepdims=True)
            normed.append((row / np.where(norms > 0, norms, 1.0)).astype(np.float32))
        return normed


def _bf16_checked(model, ref: str) -> bool:
    """The CPU gate, then bf16 against fp32 on the check texts: a CPU whose bf16 kernels misbehave stays fp32."""
    native, why = native_bf16(CPUINFO)
    if not native:
        log.info("embedding in fp32: %s", why)
        return False
    texts = list(ONNX_CHECK_TEXTS)
    expected = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    got = embed_bf16.encode(model, texts, len(texts))
    cosine = float(np.min(np.sum(got * expected, axis=1)))
    if cosine < BF16_MIN_COSINE:
        log.warning("embedding in fp32: bf16 vectors of %s differ from fp32 (cosine %.5f)", ref, cosine)
        return False
    log.info("embedding in bf16: %s (check cosine %.5f)", why, cosine)
    return True


# --- ONNX Runtime copies of a sentence-transformers model (COPILOT_EMBED_BACKEND) -------------------------------
# Texts the export is checked on: the copy must give torch's vectors on them before it is ever used.
ONNX_CHECK_TEXTS = (
    "Graph neural networks for molecule property prediction",
    "We study how retrieval changes the answers of small language models when the retrieved passages disagree "
    "with what the model memorised, and propose a decoding rule that prefers the sources.",
    "A short note.",
    " ".join(["Contrastive pre-training of sentence encoders on scientific abstracts and citation pairs."] * 30),
)
ONNX_MIN_COSINE = {False: 0.9999, True: 0.95}   # fp32: torch's vectors; int8: see docs/performance.md section 4


def _onnx_source_info(source: Path) -> dict:
    """What an ONNX copy depends on; raises unless the model is a BERT encoder with mean pooling and normalisation
    (the packaged MiniLM), the one pipeline OnnxModel reproduces."""
    try:
        modules = json.loads((source / "modules.json").read_text())
        kinds = [module["type"].rsplit(".", 1)[-1] for module in modules]
        pooling_dir = next(source / module["path"] for module in modules if module["type"].endswith("Pooling"))
        pooling = json.loads((pooling_dir / "config.json").read_text())
        config = json.loads((source / "config.json").read_text())
        max_length = json.loads((source / "sentence_bert_config.json").read_text())["max_seq_length"]
    except (OSError, ValueError, KeyError, StopIteration) as error:
        raise EmbedderError(f"not a sentence-transformers model folder the ONNX backend knows: {error}") from None
    modes = [key for key, value in pooling.items() if key.startswith("pooling_mode") and value]
    if kinds != ["Transformer", "Pooling", "Normalize"] or modes != ["pooling_mode_mean_tokens"] or \
            config.get("model_type") != "bert":
        raise EmbedderError("the ONNX backend takes mean-pooled, normalised BERT models only")
    return {"max_length": int(max_length), "heads": int(config["num_attention_heads"]),
            "hidden": int(config["hidden_size"]),
            "source_mtime": max(path.stat().st_mtime for path in [*source.iterdir(), *pooling_dir.iterdir()])}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def onnx_copy(source: Path, models_dir: Path, stem: str, int8: bool) -> Path:
    """The ONNX copy of `source` in `models_dir`, exported (and for int8 quantised) once. A copy is reused only
    when its recorded SHA-256 matches and it is newer than the source; a partial, corrupt or stale one is rebuilt."""
    info = _onnx_source_info(source)
    target = Path(models_dir) / f"{stem}{'.int8' if int8 else ''}.onnx"
    record = target.with_name(target.name + ".json")
    try:
        recorded = json.loads(record.read_text())
        if recorded["source"] == str(source) and target.stat().st_mtime >= info["source_mtime"] and \
                recorded["sha256"] == _sha256(target):
            return target
        log.info("the ONNX copy %s is stale or damaged; making it again", target)
    except (OSError, ValueError, KeyError, TypeError):
        pass                                   # no copy yet, or no record of a finished one
    _export(source, target, int8, info)
    return target


def _export(source: Path, target: Path, int8: bool, info: dict) -> None:
    """Make the copy in a child process: torch and the export peak at ~1.3-1.5 GB there, and the app process never
    holds them (with the ONNX backend it never imports torch at all)."""
    import subprocess
    import sys

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run([sys.executable, "-m", "copilot.embed", str(source), str(target), "int8" if int8 else
                               "fp32"], capture_output=True, text=True, env=env, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EmbedderError(f"the ONNX export did not run: {error}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise EmbedderError(f"the ONNX export failed: {lines[-1] if lines else f'exit code {done.returncode}'}")
    record = json.loads(target.with_name(target.name + ".json").read_text())
    log.info("made the ONNX copy %s of %s in %.1f s (check cosine %.5f)", target, source, record["made_s"],
             record["check_cosine_min"])


def _export_here(source: Path, target: Path, int8: bool) -> None:
    """torch.onnx.export of the transformer (eager attention, so ONNX Runtime's optimizer fuses it), the fusion
    pass, optionally int8 dynamic quantisation (per channel), then a check against torch's own vectors; written
    as `.partial` and renamed only when it passed, with its SHA-256 recorded."""
    import gc
    import tempfile
    import time

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    started = time.monotonic()
    info = _onnx_source_info(source)
    model = _sentence_transformer(str(source))
    expected = model.encode(list(ONNX_CHECK_TEXTS), normalize_embeddings=True, convert_to_numpy=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".onnx-export-") as scratch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw, fused = Path(scratch) / "raw.onnx", Path(scratch) / "fused.onnx"
        torch_version = _torch_export(model, raw)
        del model
        gc.collect()
        optimizer.optimize_model(str(raw), model_type="bert", num_heads=info["heads"],
                                 hidden_size=info["hidden"]).save_model_to_file(str(fused))
        gc.collect()
        if int8:
            quantize_dynamic(str(fused), str(partial), weight_type=QuantType.QInt8, per_channel=True,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        else:
            fused.replace(partial)
    cosine = float(np.min(np.sum(OnnxModel(partial, source).encode(list(ONNX_CHECK_TEXTS)) * expected, axis=1)))
    if cosine < ONNX_MIN_COSINE[int8]:
        partial.unlink(missing_ok=True)
        raise EmbedderError(f"the ONNX copy's vectors differ from torch's (cosine {cosine:.5f})")
    record = {"source": str(source), "sha256": _sha256(partial), "int8": int8, "check_cosine_min": round(cosine, 6),
              "torch": torch_version, "made_s": round(time.monotonic() - started, 1)}
    target.with_name(target.name + ".json.partial").write_text(json.dumps(record, indent=1))
    partial.replace(target)
    target.with_name(target.name + ".json.partial").replace(target.with_name(target.name + ".json"))


def _torch_export(model, path: Path) -> str:
    """The model's transformer (last hidden states; pooling stays outside) as ONNX, batch and length dynamic."""
    import torch

    transformer = model[0].auto_model.eval()
    transformer.set_attn_implementation("eager")

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                    token_type_ids=token_type_ids).last_hidden_state

    sample = model.tokenizer(list(ONNX_CHECK_TEXTS[:2]), padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {0: "batch", 1: "tokens"}
    with torch.inference_mode():
        torch.onnx.export(Hidden().eval(), tuple(sample[n] for n in names), str(path), input_names=names,
                          output_names=["hidden"], dynamic_axes={n: axes for n in [*names, "hidden"]},
                          opset_version=17, dynamo=False)
    return torch.__version__


class OnnxModel:
    """The ONNX copy run by ONNX Runtime, with sentence-transformers' steps around it: the model's own tokenizer
    (stripped text, cut at its maximum length), mean pooling over the attention mask, L2 normalisation."""

    def __init__(self, path: Path, source: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        info = _onnx_source_info(source)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.enable_cpu_mem_arena = False     # the arena keeps a batch's peak for good (+~0.5 GB measured)
        # Idle threads sleep instead of spinning: a spinning pool takes the CPU from llama.cpp, which answers
        # right after the question is embedded, on a 2-core machine.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {item.name for item in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
        self.tokenizer.enable_truncation(info["max_length"])
        pad = self.tokenizer.token_to_id("[PAD]")
        self.tokenizer.enable_padding(pad_id=pad or 0, pad_token="[PAD]")
        self.dimension = info["hidden"]

    def _hidden(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        encodings = self.tokenizer.encode_batch([text.strip() for text in texts])
        feed = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}
        hidden = self.session.run(None, {name: value for name, value in feed.items() if name in self.inputs})[0]
        return hidden, feed["attention_mask"]

    def _batches(self, texts: list[str], batch_size: int):
        """Longest texts first, as sentence-transformers batches them (less padding per batch)."""
        order = np.argsort([-len(text) for text in texts], kind="stable")
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            yield rows, *self._hidden([texts[i] for i in rows])

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for rows, hidden, mask in self._batches(texts, batch_size):
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out

    def token_embeddings(self, texts: list[str], batch_size: int = 64) -> list[np.ndarray]:
        out: list[np.ndarray] = [np.zeros((0, self.dimension), np.float32)] * len(texts)
        for rows, hidden, mask in self._batches(texts, batch_size):
            for row, states, used in zip(rows, hidden, mask.sum(axis=1)):
                out[row] = np.asarray(states[:used], dtype=np.float32)
        return out


if __name__ == "__main__":      # the child process of _export: python -m copilot.embed SOURCE TARGET fp32|int8
    import sys

    logging.basicConfig(level=logging.WARNING)
    _export_here(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "int8")
