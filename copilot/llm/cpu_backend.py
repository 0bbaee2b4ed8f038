"""Which of llama.cpp's CPU kernels this process runs.

requirements.txt builds llama.cpp with every x86 variant of its CPU code as a loadable library
(`GGML_BACKEND_DL` + `GGML_CPU_ALL_VARIANTS`: `bin/libggml-cpu-<variant>.so` in the llama-cpp-python wheel).
llama-cpp-python does not load one by itself (abetlen/llama-cpp-python#2069: a model load then fails with "no
backends are loaded"), so this module does, once per process and before the first model: the variant with the most
instruction sets among those /proc/cpuinfo lists, never an AMX one, each refused one logged, down to `x64`.

We choose rather than call ggml's `ggml_backend_load_all`, which scores variants by CPUID bits alone: on the
project's Intel VMs CPUID lists AMX that the VM does not grant, and the AMX variant crashed there
(docs/performance.md). ggml's score still runs as a second check: `ggml_backend_load` refuses a variant whose
instructions CPUID lacks. A build without variant files (an older portable install, a wheel pip reused from its
cache) has its kernels built in, and nothing is loaded.

`COPILOT_CPU_VARIANT=<name>` forces one variant (e.g. `haswell` to compare); it is read here, not with the other
settings, because the choice is made once per process when llama.cpp is first imported.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from copilot.llm.interface import LLMError

log = logging.getLogger(__name__)

_AVX2 = frozenset({"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"})
_AVX512 = _AVX2 | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}

# The variants GGML_CPU_ALL_VARIANTS builds on x86 and the /proc/cpuinfo flags each one's kernels use (ggml's
# src/CMakeLists.txt and src/ggml-cpu/CMakeLists.txt), best first: more instruction sets, faster kernels.
VARIANT_NEEDS: dict[str, frozenset[str]] = {
    "zen4": _AVX512 | {"avx512vbmi", "avx512_vnni", "avx512_bf16"},
    "cooperlake": _AVX512 | {"avx512_vnni", "avx512_bf16"},
    "icelake": _AVX512 | {"avx512vbmi", "avx512_vnni"},
    "cascadelake": _AVX512 | {"avx512_vnni"},
    "cannonlake": _AVX512 | {"avx512vbmi"},
    "skylakex": _AVX512,
    "alderlake": _AVX2 | {"avx_vnni"},
    "haswell": _AVX2,
    "piledriver": frozenset({"sse4_2", "avx", "f16c", "fma"}),
    "ivybridge": frozenset({"sse4_2", "avx", "f16c"}),
    "sandybridge": frozenset({"sse4_2", "avx"}),
    "sse42": frozenset({"sse4_2"}),
    "x64": frozenset(),
}
NEVER = {"sapphirerapids": "AMX kernels: a VM can list AMX that it does not grant, and they crashed there"}


@dataclass
class CPUBackend:
    """What was loaded and why; `variant` is None for a build with its kernels built in."""

    variant: str | None
    reason: str
    built: list[str] = field(default_factory=list)          # variant files found in the installed build
    refused: dict[str, str] = field(default_factory=dict)   # variant -> why it was not used

    def describe(self) -> str:
        if self.variant is None:
            return self.reason
        return f"{self.variant}, chosen at run time from {len(self.built)} built variants: {self.reason}"


_chosen: CPUBackend | None = None
_lock = threading.Lock()


def variant_files() -> dict[str, Path]:
    """The CPU variant libraries the installed llama-cpp-python carries, by name (empty for a built-in build)."""
    try:
        files = metadata.files("llama_cpp_python") or []
        dist = metadata.distribution("llama_cpp_python")
    except metadata.PackageNotFoundError:
        return {}
    found = {}
    for entry in files:
        name = Path(str(entry)).name
        if name.startswith("libggml-cpu-") and name.endswith(".so"):
            found[name[len("libggml-cpu-"):-len(".so")]] = Path(str(dist.locate_file(entry)))
    return found


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    try:
        return next((set(line.split(":", 1)[1].split()) for line in cpuinfo.read_text().splitlines()
                     if line.startswith("flags")), set())
    except OSError:
        return set()


def candidates(built: dict[str, Path], flags: set[str], requested: str = "auto") -> tuple[list[str], dict[str, str]]:
    """The built variants this CPU can run, best first, and why each other one is not a candidate."""
    refused = {name: why for name, why in NEVER.items() if name in built}
    order = []
    for name in VARIANT_NEEDS:
        if name not in built:
            continue
        missing = sorted(VARIANT_NEEDS[name] - flags)
        if missing:
            refused[name] = "this CPU lacks " + ", ".join(missing)
        else:
            order.append(name)
    refused.update({name: "not a variant this app knows" for name in built
                    if name not in VARIANT_NEEDS and name not in NEVER})
    if requested != "auto":
        if requested in order:
            order.remove(requested)
            order.insert(0, requested)
        else:
            log.warning("COPILOT_CPU_VARIANT=%s is not usable here (%s); choosing automatically", requested,
                        refused.get(requested, "not in this build"))
    return order, refused


def ensure_loaded(llama_cpp) -> CPUBackend:
    """Load this machine's CPU variant into llama.cpp once per process (a no-op for a built-in build)."""
    global _chosen
    with _lock:
        if _chosen is None:
            _chosen = _load(llama_cpp, variant_files(), cpu_flags(), os.environ.get("COPILOT_CPU_VARIANT", "auto"))
        return _chosen


def _load(llama_cpp, built: dict[str, Path], flags: set[str], requested: str) -> CPUBackend:
    if not built:
        return CPUBackend(None, "built in: one CPU variant chosen when llama-cpp-python was compiled")
    # libllama's own handle: dlsym through it reaches the libggml that libllama uses. The wheel stores each
    # library's symlinks as copies, so opening llama_cpp/lib/libggml.so by path would load a second libggml
    # with a registry of its own that llama.cpp never reads.
    lib = llama_cpp.llama_cpp._lib
    lib.ggml_backend_load.restype = ctypes.c_void_p
    lib.ggml_backend_load.argtypes = [ctypes.c_char_p]
    order, refused = candidates(built, flags, requested)
    for name in order:
        if lib.ggml_backend_load(str(built[name]).encode()):
            used = sorted(VARIANT_NEEDS[name] & {"avx2", "avx512f", "avx512vbmi", "avx512_vnni", "avx512_bf16",
                                                 "avx_vnni"})
            reason = ("forced by COPILOT_CPU_VARIANT" if name == requested else
                      "the built variant with the most instruction sets this CPU lists") + \
                (f" ({', '.join(used)})" if used else "")
            log.info("llama.cpp CPU variant %s loaded from %s; %s", name, built[name], reason)
            return CPUBackend(name, reason, sorted(built), refused)
        refused[name] = "ggml_backend_load refused it (missing CPUID bits or a broken file)"
        log.warning("llama.cpp CPU variant %s did not load (%s); trying the next", name, built[name])
    raise LLMError("no llama.cpp CPU variant loads on this machine: " +
                       "; ".join(f"{name}: {why}" for name, why in refused.items()))
