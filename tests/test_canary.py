"""Issue #41 item 3: key bytes left in freed heap memory must reach neither the data dir nor a backup. Chroma's HNSW
writes its index file from a `malloc`'d block at its whole capacity while only the slots in use are set, so free
capacity carries whatever the heap held. A fresh process whose heap is seeded with a canary key builds an index,
writes it and backs up; the canary is found in no file written and nothing uploaded."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from copilot.llm import router
from tests.helpers import PAPERS_JSONL, subprocess_env
from tests.router_double import RouterDouble, Visitor
from tests.tls import make_certificate, trust_env

CANARY = "sk-canary-5f0d8c1e2b7a4c39a1e6d2f08b3c7e91"
ROOT = Path(__file__).resolve().parent.parent


def holding_canary(root: Path) -> list[str]:
    found = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    for archive in root.rglob("*.tar.gz"):
        with tarfile.open(archive) as tar:
            found += [f"{archive.name}:{m.name}" for m in tar.getmembers()
                      if m.isfile() and CANARY.encode() in tar.extractfile(m).read()]
    return found


def test_a_canary_in_the_heap_reaches_no_file_and_no_backup(tmp_path):
    data_dir, hub_dir = tmp_path / "data", tmp_path / "hub"
    env = subprocess_env(data_dir, OPENAI_API_KEY=CANARY, HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "tests.canary_child", str(data_dir), str(hub_dir), "300"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr[-3000:]
    assert list(data_dir.rglob("data_level0.bin")), "the index was not written: the test would prove nothing"
    assert holding_canary(data_dir) == [] and holding_canary(hub_dir) == []


VISITOR_CANARY = "hf_canary_eval_8d2f4b6a1c9e4e07b5a3d1f6c8e2a9b4"


def test_an_eval_run_as_a_signed_in_visitor_leaves_their_token_in_no_file_and_no_output(tmp_path):
    """Issue #50: `eval answers --hf-token-env` in a fresh process, through a loopback router that takes the canary
    as a visitor's token, once answered and once refused (401): the token is in no file of the data dir (stores,
    call log, report files) and not in the process's output."""
    if not PAPERS_JSONL.is_file():
        pytest.skip("the shared data (../shared/data) is not beside the repository")
    certificate = make_certificate(tmp_path / "tls")
    survey = tmp_path / "survey.jsonl"
    survey.write_text(json.dumps({"question": "How are retrieval-augmented language models evaluated?",
                                  "relevant": ["2503.12595"]}) + "\n", encoding="utf-8")
    data_dir = tmp_path / "data"
    with RouterDouble(certificate, {VISITOR_CANARY: Visitor("carol")}) as double:
        env = subprocess_env(data_dir, HF_HUB_OFFLINE="1", COPILOT_SCHEDULER="false", COPILOT_LLM="local",
                             COPILOT_HF_ROUTER_URL=double.url, VISITOR_TOKEN=VISITOR_CANARY, **trust_env(certificate))
        args = [sys.executable, "-m", "copilot", "eval", "answers", "--questions", str(survey), "--paper-questions",
                "", "--corpus", str(PAPERS_JSONL), "--papers", "40", "--hf-token-env", "VISITOR_TOKEN", "--json"]
        done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        double.visitors[VISITOR_CANARY] = Visitor("carol", "401")
        refused = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert refused.returncode != 0 and router.SIGN_IN_AGAIN in refused.stderr
    assert [s.token for s in double.seen] == [VISITOR_CANARY] * 2, "the token was not used: the test proves nothing"
    assert list(data_dir.rglob("data_level0.bin")) and list(data_dir.rglob("answers-survey-*.json"))
    outputs = done.stdout + done.stderr + refused.stdout + refused.stderr
    assert VISITOR_CANARY not in outputs
    assert [str(p) for p in data_dir.rglob("*") if p.is_file() and VISITOR_CANARY.encode() in p.read_bytes()] == []


REUSE = """
import ctypes, sys
import copilot  # noqa: F401  (its import turns the scrubbing on)
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
canary = sys.argv[1].encode() * 40_000
seen = 0
for size in (4096, 100_000, 1_000_000):
    block = libc.malloc(size)
    ctypes.memmove(block, canary, size)
    libc.free(block)
    again = libc.malloc(size)            # glibc hands the same chunk back first
    seen += ctypes.string_at(again, size).count(sys.argv[1].encode())
    libc.free(again)
print(seen)
"""


def test_memory_freed_with_a_key_in_it_is_handed_out_again_without_it(tmp_path):
    """The mechanism under the test above, exactly: a block freed with the canary in it and allocated again (what
    Chroma's index buffer may get) holds no copy of it. Fails without copilot.secrets.scrub_freed_memory. Blocks of
    at most 1 KB that glibc keeps in its per-thread cache are not scrubbed (README says so); an index buffer is far
    larger."""
    env = subprocess_env(tmp_path, strip=("COPILOT_", "MALLOC_"))
    done = subprocess.run([sys.executable, "-c", REUSE, CANARY], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "0"
