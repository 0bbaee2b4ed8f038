"""Cold ask, measured: how long a question waits for its papers' full text (issue #48's "cold ask reading three new
papers from a loopback arXiv").

    python -m tests.bench_cold_ask --store DATA_DIR [--questions FILE] [--json]

`DATA_DIR`: a library holding the ten shared LaTeXML papers, e.g. the one `python -m copilot eval fulltext` leaves in
`<data dir>/eval/fulltext-answers-store-first2000-…` (copied to a temporary folder first; never changed). For each
body question of FILE (default: every third of tests/data/fulltext-questions.jsonl, one per paper), the first three
papers of the turn's tables lose any stored body and are served by a loopback HTTPS arXiv (tests/fake_arxiv_html.py):
the question's own paper its real page, another paper one of the other shared pages under its id (only ten real pages
exist), so each ask reads three real pages; the rest of the table's papers are not found. Each question runs on fresh
services (no reading left over from the one before). Times from the ask, through Chat.stream as the page runs it: the
abstract answer, the first table quoting a body, the table once each of the three papers has a first look or has
been read, the end of the wait (fulltext.WAIT_S at most).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from copilot.features import fulltext
from copilot.features.answers import answer_tables
from copilot.features.chat import Chat
from copilot.services import Services
from copilot.table import BODY
from tests.conftest import make_settings
from tests.fake_arxiv_html import HTML_DIR, FakeArxivHtml, _split
from tests.tls import make_certificate, trust_env

QUESTIONS = Path(__file__).parent / "data" / "fulltext-questions.jsonl"
READ = 3


class AliasedArxiv(FakeArxivHtml):
    """The fake arXiv serving `alias[id]`'s shared page under `id` (its ids rewritten), 404 for any other id."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.alias: dict[str, str] = {}

    def _answer(self, handler) -> None:
        kind, base, _ = _split(handler.path)
        source = self.alias.get(base)
        if source is None or kind != "html":
            self._send(handler, 404, b"<html><body>Not found (fake arXiv)</body></html>", "text/html")
            return
        page = (HTML_DIR / f"{source}.html").read_bytes().replace(source.encode(), base.encode())
        self._send(handler, 200, page, "text/html; charset=utf-8")


def ask_cold(services: Services, fake: AliasedArxiv, question: str, pages: list[str], turn_no: int) -> dict:
    for pid in [*pages, *fake.alias]:     # no body left from an earlier question: the tables are the cold ones
        services.fulltext.delete(pid)
    chat = Chat(services)
    turn = chat.prepare(question, "bench")
    tables = answer_tables(services, turn.question, [a.sources for a in turn.answers], turn.ranking)
    papers = list(dict.fromkeys(row.paper_id for table in tables for row in table.rows))
    read = papers[:READ]
    others = [p for p in pages if p not in read]
    fake.alias = {pid: pid if pid in pages else others[(turn_no + n) % len(others)] for n, pid in enumerate(read)}
    reader = fulltext.reader_for(services)
    turn = chat.prepare(question, "bench")
    started = time.perf_counter()
    abstract_s = body_s = all_s = None
    end_s = 0.0
    for live in chat.stream(turn):
        if not live.done:
            continue
        end_s = time.perf_counter() - started
        abstract_s = abstract_s if abstract_s is not None else end_s
        if body_s is None and any(q.source == BODY for a in live.answers if a.table for row in a.table.rows
                                  for q in row.quotes):
            body_s = end_s
        if all_s is None and set(reader.looks(read)) | set(reader.wait(read, 0.0)) >= set(read):
            all_s = end_s
    reader.wait(read, 120.0)            # the rest of each paper, before the next question's fresh services
    return {"question": question, "read": read, "pages": [fake.alias[p] for p in read],
            "abstract_s": round(abstract_s or 0.0, 3), "first_body_s": body_s and round(body_s, 3),
            "all_read_s": all_s and round(all_s, 3), "end_s": round(end_s, 3), "load": round(os.getloadavg()[0], 2)}


def _summary(rows: list[dict]) -> dict:
    out = {}
    for key in ("abstract_s", "first_body_s", "all_read_s", "end_s"):
        values = sorted(r[key] for r in rows if r[key] is not None)
        out[key] = {"n": len(values), "p50": round(statistics.median(values), 3) if values else None,
                    "max": values[-1] if values else None}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="a data dir holding the ten shared papers (copied first)")
    parser.add_argument("--questions", default=str(QUESTIONS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.questions).read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = [r["question"] for r in rows if r.get("kind", "body") == "body"]
    if args.questions == str(QUESTIONS):
        questions = questions[::3]
    pages = sorted(p.stem for p in HTML_DIR.glob("*.html") if not p.name.endswith(".failed.html"))
    work = Path(tempfile.mkdtemp(prefix="cold-ask-"))
    try:
        cert = make_certificate(work)
        os.environ.update(trust_env(cert))
        data = work / "data"
        shutil.copytree(args.store, data)
        results = []
        with AliasedArxiv(cert) as fake:
            for n, question in enumerate(questions):
                services = Services(make_settings(data, fulltext_delay=0.0, fulltext_reading=True,
                                                  arxiv_html_url=fake.html_url, arxiv_pdf_url=fake.pdf_url))
                services.embedder.embed(["warm up"] * 20)
                results.append(ask_cold(services, fake, question, pages, n))
                if not args.json:
                    print(json.dumps(results[-1]), flush=True)
        report = {"summary": _summary(results), "asks": results}
        if args.json:
            print(json.dumps(report, indent=1))
        print("\n| | n | p50 s | max s |\n|---|---|---|---|")
        for key, row in report["summary"].items():
            print(f"| {key} | {row['n']} | {row['p50']} | {row['max']} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
