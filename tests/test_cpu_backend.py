"""llama.cpp's CPU kernels chosen at run time (copilot.llm.cpu_backend, issue #33 item 1): which variant each kind
of project machine gets, never AMX, a variant that does not load falls back to the next one, and the real model
runs on what was chosen."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from copilot.llm import cpu_backend

AVX2_HOST = set("fpu sse4_2 avx f16c fma avx2 bmi2".split())                         # AMD EPYC Zen 3
AVX512_HOST = AVX2_HOST | set("avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16 "
                              "avx_vnni".split())                                   # AMD EPYC Zen 5
AMX_HOST = AVX512_HOST | {"amx_tile", "amx_int8", "amx_bf16"}                         # Intel Xeon, AMX listed
ALL_BUILT = {name: Path(f"/nowhere/libggml-cpu-{name}.so") for name in [*cpu_backend.VARIANT_NEEDS,
                                                                         *cpu_backend.NEVER]}


@pytest.mark.unit
@pytest.mark.parametrize("flags,best", [(AVX2_HOST, "haswell"), (AVX512_HOST, "zen4"), (AMX_HOST, "zen4"),
                                        (set(), "x64")])
def test_each_host_kind_gets_the_variant_with_the_most_instruction_sets_it_lists(flags, best):
    order, refused = cpu_backend.candidates(ALL_BUILT, flags)
    assert order[0] == best and order[-1] == "x64"
    assert "sapphirerapids" not in order and "AMX" in refused["sapphirerapids"]
    for name in order:                                    # never one whose instructions the CPU lacks
        assert cpu_backend.VARIANT_NEEDS[name] <= flags


@pytest.mark.unit
def test_an_avx2_host_is_told_what_each_avx512_variant_needs():
    _, refused = cpu_backend.candidates(ALL_BUILT, AVX2_HOST)
    assert refused["skylakex"].startswith("this CPU lacks avx512bw, avx512cd")
    assert "avx_vnni" in refused["alderlake"]


@pytest.mark.unit
def test_a_forced_variant_goes_first_and_an_unusable_one_is_ignored():
    assert cpu_backend.candidates(ALL_BUILT, AVX512_HOST, "haswell")[0][0] == "haswell"
    assert cpu_backend.candidates(ALL_BUILT, AVX2_HOST, "zen4")[0][0] == "haswell"
    assert cpu_backend.candidates(ALL_BUILT, AMX_HOST, "sapphirerapids")[0][0] == "zen4"


@pytest.mark.unit
def test_a_build_without_variant_files_keeps_its_built_in_kernels():
    chosen = cpu_backend._load(llama_cpp=None, built={}, flags=AVX512_HOST, requested="auto")
    assert chosen.variant is None and chosen.describe().startswith("built in")


@pytest.mark.unit
def test_the_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f\n\nprocessor\t: 1\nflags\t\t: fpu avx2 avx512f\n")
    assert cpu_backend.cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512f"}
    assert cpu_backend.cpu_flags(tmp_path / "missing") == set()


needs_variants = pytest.mark.skipif(not cpu_backend.variant_files(),
                                    reason="the installed llama-cpp-python has its CPU kernels built in")

# Loads variants into a fresh process (a process keeps what it loaded), then the packaged model, and prints JSON.
_CHILD = textwrap.dedent("""
    import json, sys
    import llama_cpp
    from copilot.llm import cpu_backend
    from copilot.llm.local import packaged_gguf
    built = cpu_backend.variant_files()
    built["zen4"] = sys.argv[1]                       # a broken file where the best variant would be
    chosen = cpu_backend._load(llama_cpp, built, cpu_backend.cpu_flags() | cpu_backend.VARIANT_NEEDS["zen4"],
                               "auto")
    llm = llama_cpp.Llama(model_path=str(packaged_gguf()), n_ctx=256, n_threads=1, verbose=False, seed=0)
    text = llm("The capital of France is", max_tokens=8, temperature=0.0)["choices"][0]["text"]
    print(json.dumps({"variant": chosen.variant, "refused": chosen.refused, "text": text}))
""")


@needs_variants
def test_a_variant_that_does_not_load_falls_back_to_the_next_and_the_model_runs(tmp_path):
    broken = tmp_path / "libggml-cpu-zen4.so"
    broken.write_bytes(b"not a shared library")
    result = subprocess.run([sys.executable, "-c", _CHILD, str(broken)], capture_output=True, text=True,
                            timeout=180, cwd=Path(__file__).parent.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["variant"] != "zen4" and "refused" in report["refused"]["zen4"]
    assert report["variant"] in cpu_backend.VARIANT_NEEDS and report["text"].strip()


@needs_variants
def test_the_app_process_runs_the_chosen_variant_and_says_so():
    from copilot.llm.local import cpu_kernels

    kernels = cpu_kernels()
    chosen = cpu_backend.ensure_loaded(None)              # already chosen: the same answer, nothing loaded again
    assert chosen.variant in cpu_backend.VARIANT_NEEDS and kernels["variant"].startswith(chosen.variant)
    wanted = {"avx2": "AVX2", "avx512f": "AVX512", "avx512_vnni": "AVX512_VNNI"}
    for flag, name in wanted.items():                     # the instruction sets it was chosen for are in use
        assert (name in kernels["built_for"]) == (flag in cpu_backend.VARIANT_NEEDS[chosen.variant])
