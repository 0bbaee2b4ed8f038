"""An uploaded PDF, measured (issue #57 item 3's target: a 30-page PDF uploaded, parsed and asked in 15 s): a PDF
of N pages made from a shared paper's text (tests/document_pdfs.py) is read in the sandboxed child, embedded, kept
as a private document and asked about through Chat.prepare and Chat.stream, as the page runs them.

    python -m tests.bench_document_upload [--paper 2503.15484] [--pages 30] [--repeat 3] [--json]

Each run uses fresh services over a new data dir holding 20 corpus papers (Chat asks nothing of an empty library);
the embedder is loaded before the clock starts (the app loads it once per process). Prints per run: parse (child
process), embed, store, ask (prepare + stream until the table), total; and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from copilot.features import documents
from copilot.features.chat import Chat
from copilot.services import Services
from tests.conftest import import_papers, make_settings
from tests.document_pdfs import paper_pdf

QUESTION = "What datasets are used in the evaluation, and how large are they?"


def one_run(data: bytes, data_dir: Path) -> dict:
    services = Services(make_settings(data_dir))
    import_papers(services, 20)
    _ = services.embedder.embed(["warm up"])
    started = time.perf_counter()
    done = documents.upload(services, "bench", data, "bench.pdf")
    uploaded = time.perf_counter() - started
    assert done.document is not None, done.message
    chat = Chat(services)
    turn = chat.prepare(QUESTION, "bench", papers=[done.document.item_id])
    for _ in chat.stream(turn):
        pass
    total = time.perf_counter() - started
    table = turn.answers[0].table
    return {"parse_s": round(done.parse_s, 2), "embed_s": round(done.embed_s, 2),
            "upload_s": round(uploaded, 2), "ask_s": round(total - uploaded, 2), "total_s": round(total, 2),
            "sentences": done.document.sentences, "pages": done.document.pages,
            "quotes": len(table.rows[0].quotes) if table else 0,
            "pages_quoted": sorted({q.section for q in table.rows[0].quotes}) if table else []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paper", default="2503.15484")
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data, pages = paper_pdf(args.paper, args.pages)
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-document-") as tmp:
            runs.append(one_run(data, Path(tmp) / "data"))
    report = {"paper": args.paper, "pdf_pages": pages, "pdf_bytes": len(data), "runs": runs,
              "median_total_s": statistics.median(r["total_s"] for r in runs), "load": os.getloadavg()}
    print(json.dumps(report, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
