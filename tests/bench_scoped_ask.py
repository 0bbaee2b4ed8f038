"""A question about one chosen paper, measured (issue #57's targets): the table of a scoped question on a paper
already read (target: 1 s at the 95th percentile), and on a paper not read yet, served by a loopback HTTPS arXiv,
the first table that quotes its body (target: 6 s at the 95th percentile).

    python -m tests.bench_scoped_ask --store DATA_DIR [--questions FILE] [--repeat N] [--json]

`DATA_DIR`: a library holding the ten shared LaTeXML papers (e.g. the corpus's first 2,000 plus `papers.jsonl` of
../shared/data/arxiv-html), copied to a temporary folder first, never changed. Each body question of FILE (default
tests/data/fulltext-questions.jsonl) is asked about its own paper through Chat.prepare and Chat.stream as the page
runs them: warm (the paper's body stored from its shared page: the time from the ask to the first table shown) and
cold (every `--cold-every`th question; no body, fresh services, the page served by the loopback arXiv: the time to
the first table quoting the body; the abstract table before it). Each ask checks whether a quote matches the
question's answer patterns.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from copilot.features import fulltext
from copilot.features.chat import Chat
from copilot.services import Services
from copilot.table import BODY
from tests.conftest import make_settings
from tests.fake_arxiv_html import HTML_DIR, FakeArxivHtml
from tests.tls import make_certificate, trust_env

QUESTIONS = Path(__file__).parent / "data" / "fulltext-questions.jsonl"


def quoted(table, patterns: list[str]) -> bool:
    text = " ".join(q.shown for row in (table.rows if table else ()) for q in row.quotes)
    return any(re.search(p, text) for p in patterns)


def ask(chat: Chat, row: dict) -> dict:
    """One scoped ask through Chat.stream: seconds to the first table, to the first table quoting a body, and
    whether the last table quotes the answer."""
    started = time.perf_counter()
    turn = chat.prepare(row["question"], "bench", papers=[row["paper"]])
    first_s = body_s = None
    table = None
    for live in chat.stream(turn):
        if not live.done:
            continue
        table = live.answers[0].table
        now = time.perf_counter() - started
        first_s = first_s if first_s is not None else now
        if body_s is None and table and any(q.source == BODY for r in table.rows for q in r.quotes):
            body_s = now
    return {"paper": row["paper"], "question": row["question"][:80], "first_table_s": round(first_s or 0.0, 3),
            "first_body_s": body_s and round(body_s, 3), "answered": quoted(table, row["patterns"]),
            "quotes": sum(len(r.quotes) for r in table.rows) if table else 0, "load": round(os.getloadavg()[0], 2)}


def p95(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else None


def summary(rows: list[dict], key: str) -> dict:
    values = [r[key] for r in rows if r[key] is not None]
    return {"n": len(values), "of": len(rows), "p50": round(statistics.median(values), 3) if values else None,
            "p95": p95(values), "max": max(values) if values else None}


def run(store: Path, rows: list[dict], repeat: int, work: Path, cold_every: int = 3) -> dict:
    cert = make_certificate(work)
    os.environ.update(trust_env(cert))
    data = work / "data"
    shutil.copytree(store, data)
    warm, cold = [], []
    with FakeArxivHtml(cert) as fake:
        settings = dict(fulltext_delay=0.0, fulltext_reading=True, arxiv_html_url=fake.html_url,
                        arxiv_pdf_url=fake.pdf_url)
        services = Services(make_settings(data, **settings))
        services.embedder.embed(["warm up"] * 20)
        papers = sorted({r["paper"] for r in rows})
        fulltext.import_paths(services, [HTML_DIR / f"{pid}.html" for pid in papers])
        chat = Chat(services)
        for _ in range(repeat):
            warm += [ask(chat, row) for row in rows]
        for row in rows[::cold_every]:     # cold: fresh services, the paper's body gone
            services.fulltext.delete(row["paper"])
            services = Services(make_settings(data, **settings))
            services.embedder.embed(["warm up"] * 20)
            cold.append(ask(Chat(services), row))
            fulltext.reader_for(services).wait([row["paper"]], 120.0)
    return {"warm": {"first_table_s": summary(warm, "first_table_s"),
                     "answered": sum(r["answered"] for r in warm), "asks": len(warm)},
            "cold": {"first_table_s": summary(cold, "first_table_s"), "first_body_s": summary(cold, "first_body_s"),
                     "answered": sum(r["answered"] for r in cold), "asks": len(cold)},
            "rows": {"warm": warm, "cold": cold}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="a data dir holding the ten shared papers (copied first)")
    parser.add_argument("--questions", default=str(QUESTIONS))
    parser.add_argument("--repeat", type=int, default=2, help="warm asks per question")
    parser.add_argument("--cold-every", type=int, default=3, help="cold asks: every Nth question")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.questions).read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r.get("kind", "body") == "body" and (HTML_DIR / f"{r['paper']}.html").is_file()]
    work = Path(tempfile.mkdtemp(prefix="scoped-ask-"))
    try:
        report = run(Path(args.store), rows, args.repeat, work, args.cold_every)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=1))
    for kind in ("warm", "cold"):
        part = report[kind]
        for key in ("first_table_s", "first_body_s"):
            if key in part:
                s = part[key]
                print(f"{kind} {key}: n {s['n']}/{s['of']} p50 {s['p50']} p95 {s['p95']} max {s['max']}")
        print(f"{kind} answered: {part['answered']} of {part['asks']}")


if __name__ == "__main__":
    main()
