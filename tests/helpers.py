"""Helpers the test modules share: where the data is, a clean environment, running the CLI, a free port, a
loopback llama_cpp.server."""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.tls import Certificate

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = SHARED / "data"
PAPERS_JSONL = DATA / "arxiv-cs-2025-2026" / "papers.jsonl"
KAGGLE_JSONL = DATA / "arxiv-kaggle-sample" / "arxiv-metadata-oai-snapshot.head.jsonl"
ARXIV_RESPONSES = DATA / "arxiv-api-responses"
CSFCUBE = DATA / "csfcube"

# Variables that would move a test off its own data dir or onto a hosted model
MODEL_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "COPILOT_LLM", "COPILOT_DATA_DIR")
PROJECT_PREFIXES = ("COPILOT_", "OPENAI_")


def clean_env(monkeypatch: pytest.MonkeyPatch, *more: str) -> None:
    """Remove MODEL_ENV (and `more`) from this process's environment for the test."""
    for name in (*MODEL_ENV, *more):
        monkeypatch.delenv(name, raising=False)


def temporary_data_dir(value: str | Path) -> str:
    """`value` as a child process's COPILOT_DATA_DIR, refused unless it is an absolute path inside the temporary
    directory: a relative or mangled one (a `(dir, n)` tuple's text once) made the app create its data inside the
    repository, where it was committed (#58 item 8)."""
    path = Path(str(value))
    temporary = Path(tempfile.gettempdir()).resolve()
    if not path.is_absolute() or not path.resolve().is_relative_to(temporary):
        raise ValueError(f"a test's COPILOT_DATA_DIR must be an absolute path under {temporary}: {str(value)[:200]!r}")
    return str(path)


def untracked_files() -> set[str]:
    """The repository's untracked and ignored files, less caches that Python, pytest and the linters keep."""
    listed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--ignored", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=False).stdout
    paths = {entry[3:] for entry in listed.split("\0") if entry[:2] in ("??", "!!")}
    caches = ("__pycache__/", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/")
    return {p for p in paths if not p.endswith(".pyc") and not any(c in p or p.startswith(c) for c in caches)}


def subprocess_env(data_dir: Path, strip: tuple[str, ...] = PROJECT_PREFIXES, **values: str) -> dict[str, str]:
    """This process's environment without variables starting with `strip`, then COPILOT_DATA_DIR, no full-text
    reading, and `values`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(strip)}
    # no background reading of full text from arXiv, unless a test turns it on (tests/test_fulltext_answers.py)
    env.update(COPILOT_DATA_DIR=str(data_dir), COPILOT_FULLTEXT_READING="false")
    env.update(values)
    env["COPILOT_DATA_DIR"] = temporary_data_dir(env["COPILOT_DATA_DIR"])
    return env


def app_env(data_dir: Path) -> dict[str, str]:
    """The environment of the app or CLI in a child process as the browser tests run it: the local model with short
    answers, no Gradio settings from outside, and no real arXiv (an unused loopback port unless a test overrides it).
    No background sentence filler: each of the tier's ~20 short-lived apps would load a second embedder for papers it
    never serves long (tests/test_sentence_vectors.py starts it the way app.py does)."""
    return subprocess_env(data_dir, strip=(*PROJECT_PREFIXES, "GRADIO_"), COPILOT_LLM="local",
                          COPILOT_ANSWER_MAX_TOKENS="64", COPILOT_LOCAL_THREADS="1", COPILOT_SENTENCE_PREFILL="false",
                          COPILOT_ARXIV_API_URL=f"http://127.0.0.1:{free_port()}/api/query",
                          GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")


def run_cli(args: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m copilot ARGS` in a child process, from the repository root, output captured as text."""
    temporary_data_dir(env.get("COPILOT_DATA_DIR", ""))
    return subprocess.run([sys.executable, "-m", "copilot", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def run_cli_in_process(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, dict | None, str]:
    """The CLI's main() in this process: exit code, the JSON object on stdout (None if nothing), stderr."""
    from copilot.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def llama_server(model: Path, log_path: Path, alias: str, key: str, n_ctx: int = 2048,
                 tls: Certificate | None = None) -> Iterator[str]:
    """A real OpenAI-compatible endpoint on loopback: `python -m llama_cpp.server` serving `model` under `alias`,
    one thread, behind `key` (over HTTPS with `tls`'s certificate, which the caller must trust). Yields its base URL
    (…/v1); the server's log (uvicorn's access lines included, one "POST /v1/chat/completions" per request) goes to
    `log_path`. Stopped on exit."""
    port = free_port()
    base = f"{'https' if tls else 'http'}://127.0.0.1:{port}/v1"
    serving = ["--ssl_certfile", str(tls.cert), "--ssl_keyfile", str(tls.key)] if tls else []
    with log_path.open("wb") as log:   # a file, not a pipe: llama.cpp logs a lot and would block on a full pipe
        proc = subprocess.Popen([sys.executable, "-m", "copilot.llm.serve", "--model", str(model), "--host",
                                 "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "1",
                                 "--model_alias", alias, "--api_key", key, *serving],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while not _serving(base, key, tls):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("llama_cpp.server did not come up: "
                                       + log_path.read_text(errors="replace")[-2000:])
                time.sleep(0.3)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _serving(base: str, key: str, tls: Certificate | None = None) -> bool:
    request = urllib.request.Request(base + "/models", headers={"Authorization": f"Bearer {key}"})
    context = ssl.create_default_context(cafile=str(tls.cert)) if tls else None
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as answer:
            return answer.status == 200
    except OSError:
        return False


def answer_words(text: str) -> str:
    """A shown answer's own words: its text before the evidence table a writing profile puts under them (what a
    reader of the page or the CLI's JSON sees; the product keeps the table as a record and never reads it back)."""
    from copilot.methods.evidence_text import TABLE_INTRO, TEXTBOOK_LINE

    intro = TABLE_INTRO.split("{count}")[0]
    cut = min((at for at in (text.find(intro), text.find(TEXTBOOK_LINE)) if at >= 0), default=len(text))
    return text[:cut].rstrip()


def unlabelled(text: str) -> str:
    """The text with its citation labels as "[n]": each answer numbers its sources in the order the page lists
    them (its table's rows first)."""
    return re.sub(r"\[\d{1,3}\]", "[n]", text or "")


def forget_chat(chat) -> None:
    """After a test over a shared data dir: wait for the chat's thought jobs, then remove every turn, vote, job and
    thought it left."""
    chat.wait_for_all(timeout=120)
    services = chat.services
    ids = services.store.thoughts.get()["ids"]
    if ids:
        services.store.thoughts.delete(ids=ids)
    with services.db.transaction() as tx:
        for table in ("chat_vote_log", "chat_votes", "chat_judgements", "chat_thought_jobs",
                      "chat_turns", "thought_edges", "thoughts"):
            tx.execute(f"DELETE FROM {table}")
