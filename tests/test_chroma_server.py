"""Chroma server mode: `chroma run` on loopback, ingestion and queries through COPILOT_CHROMA_HOST/PORT."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from copilot.features.library import status
from copilot.services import Services
from copilot.store.vectors import VectorStoreError
from tests.conftest import import_papers, make_settings, stop_process
from tests.helpers import free_port


def chroma_command() -> list[str]:
    found = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    return [found]


@pytest.fixture
def chroma_server(tmp_path):
    port = free_port()
    path = tmp_path / "chroma-server"
    log_path = tmp_path / "chroma-server.log"
    log = log_path.open("wb")  # a file, not a pipe: a full pipe would block the server
    proc = subprocess.Popen([*chroma_command(), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError("chroma run exited: " + log_path.read_text(errors="replace")[-2000:])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("chroma run did not answer in 90 s")
            time.sleep(0.2)
        yield port, path
    finally:
        stop_process(proc)
        log.close()


def test_ingest_and_query_through_a_chroma_server(chroma_server, tmp_path):
    port, server_path = chroma_server
    settings = make_settings(tmp_path / "data", chroma_host="127.0.0.1", chroma_port=port)
    services = Services(settings)
    papers = import_papers(services, 40)
    assert services.store.count("paper") == 40
    assert status(services)["papers"] == 40

    target = papers[7]
    [hit, *_] = services.store.search("paper", services.embedder.embed_one(target.document), 3)
    assert hit.id == target.id and hit.score > 0.99 and hit.title == target.title
    window = services.store.papers_between(20250101, 20991231, limit=100)
    assert {p.id for p in window} == {p.id for p in papers}

    # a second client (another process in real life) sees the same data; nothing went to the local dir
    other = Services(make_settings(tmp_path / "other", chroma_host="127.0.0.1", chroma_port=port))
    assert other.store.count("paper") == 40
    assert other.store.get_papers([target.id])[0].abstract == target.abstract
    assert not settings.chroma_path.exists()
    assert any(server_path.iterdir()), "the server did not persist under its --path"


def test_unreachable_chroma_server_is_a_clear_error(tmp_path):
    services = Services(make_settings(tmp_path / "data", chroma_host="127.0.0.1", chroma_port=free_port()))
    with pytest.raises(VectorStoreError, match="cannot reach the Chroma server"):
        services.store.count("paper")
