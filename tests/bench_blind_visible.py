"""Click to answers shown, in Chromium, with and without thought memory (issue #59 item 1).

    python -m tests.bench_blind_visible --store DATA_DIR [--turns 4] [--warm-plain] [--json]

`DATA_DIR`: a library, e.g. 2,000 papers (`COPILOT_DATA_DIR=DIR python -m copilot import
../shared/data/arxiv-cs-2025-2026/papers.jsonl --limit 2000`); copied to a temporary folder first, never changed.
In the copy, each MEMORY question gets a thought that makes it a comparison (tests/comparisons.py; a question for
which no paper does is left out). The real app (`python app.py`, the tiny profile, full-text reading on) runs over
the copy, with a loopback HTTPS arXiv that sends every page one byte a second (so each turn's wait for full text
lasts its 10 s, as arXiv's did in the issue's session). One question warms the app up; then `--turns` turns of each
kind, alternating. Each time is from the click on Ask to the first frame where every answer column of that turn shows
its answer (tests/e2e/test_blind_reading_page.py's `SHOWN`), measured inside the page.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from copilot.services import Services
from tests.comparisons import KEEP_MEMORY_ROWS, tables_differ, thought_with_a_new_row
from tests.conftest import make_settings
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.e2e.test_blind_reading_page import FINISHED, click_to_shown
from tests.fake_arxiv_html import FakeArxivHtml
from tests.helpers import ROOT, app_env, free_port
from tests.tls import make_certificate, trust_env

WARM_UP = "What is retrieval-augmented generation?"
MEMORY = ["How do language models use retrieved documents when they answer questions?",
          "Which methods make reasoning in large language models more efficient?",
          "How are vision-language models evaluated on charts and documents?",
          "How can large language models be defended against jailbreak attacks?",
          "Which methods reduce hallucination in vision-language models?",
          "How do diffusion models generate video?"]
PLAIN = ["Which decoding methods use a draft model to speed up generation?",
         "How are graph neural networks used for molecules?",
         "What benchmarks measure code generation by language models?",
         "How is federated learning protected against poisoning?",
         "Which methods compress the key-value cache of transformers?",
         "How do recommender systems use large language models?"]


class SlowArxiv(FakeArxivHtml):
    """Every page, HTML or PDF, one byte a second."""

    def _answer(self, handler) -> None:
        self._drip(handler, b"<html><body>" + b"slow " * 4096 + b"</body></html>")


def seeded(store: Path, work: Path, warm_plain: bool = False) -> tuple[Path, list[str]]:
    """The copy, its thoughts; seeding builds the MEMORY questions' tables, which stores their papers' sentence
    vectors (store/sentence_vectors.py), so their turns find them warm; `warm_plain` does the same for PLAIN."""
    data_dir = work / "data"
    shutil.copytree(store, data_dir)
    services = Services(make_settings(data_dir, thought_row_margin=KEEP_MEMORY_ROWS))
    kept = [q for q in MEMORY if thought_with_a_new_row(services, q)]
    for question in PLAIN if warm_plain else ():
        tables_differ(services, question)
    return data_dir, kept


def start_app(data_dir: Path, fake: SlowArxiv, log_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = app_env(data_dir)
    env.update(GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1", COPILOT_FULLTEXT_READING="true",
               COPILOT_ARXIV_HTML_URL=fake.html_url, COPILOT_ARXIV_PDF_URL=fake.pdf_url, COPILOT_ARXIV_TIMEOUT="30",
               COPILOT_FULLTEXT_DELAY="0", COPILOT_THOUGHT_ROW_MARGIN=str(KEEP_MEMORY_ROWS))
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log_path.open("w"),
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"app exited early; see {log_path}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("app did not come up in 300 s")


def measure(url: str, memory: list[str], turns: int, shots: Path | None = None) -> list[dict]:
    from playwright.sync_api import sync_playwright

    asked = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.get_by_role("tab", name="Chat").click()
        try:
            click_to_shown(page, WARM_UP)
            page.wait_for_function(FINISHED, timeout=120_000)
            for n in range(turns):
                for kind, questions in (("memory", memory), ("plain", PLAIN)):
                    question = questions[n % len(questions)]
                    shown = click_to_shown(page, question)
                    asked.append({"kind": kind, "question": question, "seconds": round(shown["ms"] / 1000, 3),
                                  "answers": 2 if shown["both"] else 1, "notice": shown["notice"][:200],
                                  "load": os.getloadavg()[0]})
                    # the next question once this turn is finished (its wait for full text over), as a reader
                    # would: asked a second apart, turns still waiting piled up past the page's per-user limit of
                    # events (ui.fairness) and a click was refused
                    page.wait_for_function(FINISHED, timeout=120_000)
                    page.wait_for_timeout(1000)
        except Exception:
            if shots is not None:
                page.screenshot(path=str(shots.with_suffix(".png")), full_page=True)
            raise
        finally:
            browser.close()
    return asked


def summary(asked: list[dict]) -> dict:
    out = {}
    for kind in ("memory", "plain"):
        times = sorted(a["seconds"] for a in asked if a["kind"] == kind)
        if times:
            out[kind] = {"turns": len(times), "median_s": statistics.median(times), "max_s": times[-1],
                         "p95_s": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
                         "two_answers": sum(a["answers"] == 2 for a in asked if a["kind"] == kind)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--warm-plain", action="store_true",
                        help="embed the PLAIN questions' papers' sentences beforehand, as seeding does for MEMORY's")
    parser.add_argument("--app-log", type=Path, help="keep the app's log here (default: dropped with the copy)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-blind-") as tmp:
        work = Path(tmp)
        cert = make_certificate(work / "tls")
        os.environ.update(trust_env(cert))
        data_dir, memory = seeded(args.store, work, args.warm_plain)
        if not memory:
            raise SystemExit("no MEMORY question can be made a comparison on this library")
        with SlowArxiv(cert) as fake:
            proc, url = start_app(data_dir, fake, args.app_log or work / "app.log")
            try:
                asked = measure(url, memory, args.turns, args.app_log)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    result = {"papers_store": str(args.store), "turns": asked, "summary": summary(asked),
              "load_after": os.getloadavg()}
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
