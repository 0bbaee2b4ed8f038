"""COPILOT_EMBED_PRECISION: torch runs in bf16 only where the CPU multiplies bf16 in hardware, and then gives the
packaged MiniLM's fp32 vectors within BF16_MIN_COSINE on real abstracts and a real paper's body sentences, and a
text's vector is the same bit for bit alone or in any batch (issue #58 item 10: bf16 vectors depended on the batch)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import copilot.embed as embed
from copilot.embed import BF16_MIN_COSINE, Embedder, EmbedderError, native_bf16
from copilot.methods import body_text
from copilot.sources.fulltext_html import parse_html
from copilot.sources.snapshot import paper_from_row
from tests.helpers import DATA, PAPERS_JSONL

BASE = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall "
        "nx pdpe1gb rdtscp lm constant_tsc rep_good nopl cpuid pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe "
        "popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm bmi1 avx2 smep bmi2 erms adx smap clflushopt sha_ni "
        "xsaveopt xsavec xgetbv1 xsaves")
AVX512 = "avx512f avx512dq avx512cd avx512bw avx512vl avx512ifma avx512vbmi avx512_vbmi2 avx512_vnni gfni vaes"
CPUS = {   # /proc/cpuinfo flags of the kinds of machine the project runs on, and whether bf16 is native there
    "epyc-avx2-only": (f"{BASE} vaes vpclmulqdq clzero rdpid", False),
    "xeon-avx512-no-bf16": (f"{BASE} {AVX512} vpclmulqdq", False),     # oneDNN would emulate bf16 here: slower
    "epyc-zen4": (f"{BASE} {AVX512} avx512_bf16 avx512_bitalg avx512_vpopcntdq", True),
    "xeon-amx": (f"{BASE} {AVX512} avx512_bf16 amx_bf16 amx_tile amx_int8 avx512_fp16", True),
}
PAGE = DATA / "arxiv-html" / "2601.22777.html"


def torch_has_bf16_kernels() -> bool:
    import torch

    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def cpuinfo(tmp_path, flags: str):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: a test CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\n"
                    f"flags\t\t: {flags}\n")
    return path


@pytest.mark.parametrize("cpu", sorted(CPUS))
def test_bf16_follows_the_cpu_flags(cpu, tmp_path, monkeypatch):
    flags, native = CPUS[cpu]
    path = cpuinfo(tmp_path, flags)
    decided, why = native_bf16(path)
    assert decided is (native and torch_has_bf16_kernels()), why
    # and through an embedder of the packaged model: its path, and what a batch and a question run in
    monkeypatch.setattr(embed, "CPUINFO", path)
    monkeypatch.setattr(embed, "_bf16_ok", {})
    auto, fp32 = Embedder(precision="auto"), Embedder(precision="fp32")
    assert auto.path == ("torch bf16" if decided else "torch fp32")
    assert fp32.path == "torch fp32"
    model = auto._model()
    assert auto._bf16(model) is decided


def test_no_flags_line_means_fp32(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")     # an ARM CPU's file: not x86 flags
    assert native_bf16(path)[0] is False
    assert native_bf16(tmp_path / "missing")[0] is False


def test_unknown_precision_is_refused():
    with pytest.raises(EmbedderError, match="precision"):
        Embedder(precision="fp16")


def real_texts() -> list[str]:
    rows = []
    with PAPERS_JSONL.open(encoding="utf-8") as lines:
        for line in lines:
            rows.append(paper_from_row(json.loads(line)).document)
            if len(rows) == 48:
                break
    parsed = parse_html(PAGE.read_bytes(), PAGE.stem)
    assert parsed.body is not None
    body = [" ".join(parsed.body.text[s.start:s.end].split()) for s in body_text.body_sentences(parsed.body)
            if body_text.may_state_finding(parsed.body, s)]
    return rows + body[:200]


def test_bf16_vectors_are_fp32_vectors_on_real_text(monkeypatch):
    monkeypatch.setattr(embed, "_bf16_ok", {})
    auto, fp32 = Embedder(precision="auto"), Embedder(precision="fp32")
    if auto.path != "torch bf16":
        pytest.skip(f"this CPU embeds in fp32: {native_bf16(embed.CPUINFO)[1]}")
    texts = real_texts()
    got, expected = auto.embed(texts), fp32.embed(texts)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(got, expected, atol=1e-6), "the bf16 path gave fp32's exact vectors: it did not run"
    cosine = np.sum(got * expected, axis=1)
    worst = int(np.argmin(cosine))
    assert cosine[worst] >= BF16_MIN_COSINE, f"cosine {cosine[worst]:.6f} on {texts[worst][:80]!r}"


def test_a_texts_vector_is_the_same_alone_and_in_any_batch(monkeypatch):
    """A sentence embedded with a question, in a resumed import or beside another paper's sentences gets the same
    vector, so no table depends on what was embedded beside it."""
    monkeypatch.setattr(embed, "_bf16_ok", {})
    auto = Embedder(precision="auto")
    if auto.path != "torch bf16":
        pytest.skip(f"this CPU embeds in fp32: {native_bf16(embed.CPUINFO)[1]}")
    texts = real_texts()[:96]
    together = auto.embed(texts)
    alone = np.vstack([auto.embed([text]) for text in texts[:20]])
    assert np.array_equal(alone, together[:20])
    order = np.random.default_rng(7).permutation(len(texts))
    shuffled = auto.embed([texts[i] for i in order])
    assert np.array_equal(shuffled[np.argsort(order)], together)
    assert np.array_equal(Embedder(precision="auto", batch_size=5).embed(texts[:40]), together[:40])
