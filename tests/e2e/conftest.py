"""Browser tests: the real app (`python app.py`) on a free loopback port, driven in Debian Chromium."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import PAPERS_JSONL, ROOT, app_env, free_port, temporary_data_dir

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def preloaded(tmp_path_factory):
    """A data dir holding the first N real papers, built once per N and copied per app."""
    built: dict[int, Path] = {}

    def get(count: int) -> Path:
        if count not in built:
            target = tmp_path_factory.mktemp(f"preloaded-{count}")
            subprocess.run([sys.executable, "-m", "copilot", "import", str(PAPERS_JSONL), "--limit", str(count)],
                           cwd=ROOT, env=app_env(target), check=True, capture_output=True, timeout=600)
            built[count] = target
        return built[count]

    return get


@pytest.fixture
def app_server(tmp_path, preloaded):
    """Factory: app_server(preload=N, env={...}) -> base URL of a running app. Stopped after the test."""
    procs: list[subprocess.Popen] = []

    def start(preload: int = 0, env: dict[str, str] | None = None) -> str:
        data_dir = tmp_path / f"app-data-{len(procs)}"
        if preload:
            shutil.copytree(preloaded(preload), data_dir)
        port = free_port()
        full_env = app_env(data_dir)
        full_env.update(GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1")
        full_env.update(env or {})
        full_env["COPILOT_DATA_DIR"] = temporary_data_dir(full_env["COPILOT_DATA_DIR"])
        log = (tmp_path / f"app-{port}.log").open("w")
        proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=full_env, stdout=log,
                                stderr=subprocess.STDOUT)
        procs.append(proc)
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"app exited early; see {log.name}:\n" + Path(log.name).read_text()[-3000:])
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return url
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("app did not come up in 180 s")

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()
