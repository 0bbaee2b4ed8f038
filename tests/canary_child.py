"""Run as a child process by tests/test_canary.py: seed this process's C heap with a canary key, then build a search
index, write it and back it up to a folder standing in for the Hub. argv: data dir, hub folder, paper count."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import copilot  # noqa: F401 - the product's own start-up runs first, as in the app

CANARY = os.environ["OPENAI_API_KEY"].encode()
BLOCK = 1 << 20


def seed_heap(blocks: int = 48) -> None:
    """Fill freed heap memory with the canary, as a process that held a key in request buffers would have: a freed
    8 MB block raises glibc's mmap threshold, so the 1 MB blocks after it come from the heap; a live fence after
    them keeps the freed span from being trimmed back to the kernel."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(8 << 20))
    pattern = (CANARY + b" ") * (BLOCK // (len(CANARY) + 1) + 1)
    held = []
    for _ in range(blocks):
        pointer = libc.malloc(BLOCK)
        ctypes.memmove(pointer, pattern, BLOCK)
        held.append(pointer)
    fence = libc.malloc(64)
    for pointer in held:
        libc.free(pointer)
    seed_heap.fence = fence          # type: ignore[attr-defined]  (kept alive to the end)


def main() -> None:
    data_dir, hub_dir, count = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    seed_heap()
    from copilot.features import backup
    from copilot.services import Services
    from tests.conftest import import_papers, make_settings
    from tests.doubles import FakeHub

    settings = make_settings(data_dir, hub_backup="someone/backup", hub_token="hf_not_the_canary_0000")
    services = Services(settings)
    import_papers(services, count)
    result = backup.backup_now(services, api=FakeHub(hub_dir))
    print(result["status"], result.get("error", ""))


if __name__ == "__main__":
    main()
