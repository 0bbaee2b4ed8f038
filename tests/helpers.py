"""Helpers the test modules share: where the data is, a clean environment, running the CLI, a free port."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

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


def subprocess_env(data_dir: Path, strip: tuple[str, ...] = PROJECT_PREFIXES, **values: str) -> dict[str, str]:
    """This process's environment without variables starting with `strip`, then COPILOT_DATA_DIR and `values`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(strip)}
    env.update(COPILOT_DATA_DIR=str(data_dir), **values)
    return env


def app_env(data_dir: Path) -> dict[str, str]:
    """The environment of the app or CLI in a child process as the browser tests run it: the local model with short
    answers, no Gradio settings from outside, and no real arXiv (an unused loopback port unless a test overrides it)."""
    return subprocess_env(data_dir, strip=(*PROJECT_PREFIXES, "GRADIO_"), COPILOT_LLM="local",
                          COPILOT_ANSWER_MAX_TOKENS="64", COPILOT_LOCAL_THREADS="1",
                          COPILOT_ARXIV_API_URL=f"http://127.0.0.1:{free_port()}/api/query",
                          GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")


def run_cli(args: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m copilot ARGS` in a child process, from the repository root, output captured as text."""
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
