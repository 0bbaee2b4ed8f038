"""Research Copilot: a personalized research assistant over arXiv."""

import os

# OpenMP threads that sleep rather than spin while they wait, for both runtimes this process loads (torch's bundled
# libgomp under the embedder, the system one under llama.cpp); each reads this once, when it loads, so it is set
# before any of them is imported. Spinning threads collapse when another process wants the same cores: embedding
# one abstract on 2 threads took 1,286 ms with spinning and 34 ms with sleeping threads (52 ms on 1 thread) on the
# project's 2-core machine at load 3.8, and a 512-token prompt on llama.cpp ran at 16 tok/s spinning and 198 tok/s
# sleeping (docs/performance.md). An explicit OMP_WAIT_POLICY in the environment wins. This is the one place it is set.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Freed C memory is overwritten from here on (copilot.secrets.scrub_freed_memory says why: key bytes in Chroma's files).
from copilot.secrets import scrub_freed_memory  # noqa: E402

scrub_freed_memory()

__version__ = "0.1.0"
