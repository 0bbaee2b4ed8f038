"""`bench --parts fulltext` (issue #48): per shared LaTeXML page, the time to parse it, to split it into sentences, to
embed them (the configured embedder path, named: `torch bf16`, `torch fp32`, `onnx`, ...; when it is bf16, the same
sentences in fp32 too, so the two are compared in the same minutes) and to keep them, and so how many pages a minute
the background reader gets through; then an ask about a read paper, warm (its body stored) against the same ask
before it was read. The pages are read from a folder of files named by arXiv id (default ../shared/data/arxiv-html)."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from copilot.embed import Embedder
from copilot.features import fulltext
from copilot.features.answers import answer_tables
from copilot.features.chat import Chat
from copilot.features.library import ingestor
from copilot.methods import body_text
from copilot.sources.fulltext_html import parse_html
from copilot.sources.snapshot import paper_from_row

ASKS = 5


def _fp32_twin(embedder: Embedder) -> Embedder | None:
    """The configured embedder in fp32, when it embeds a page in bf16; else None."""
    if embedder.path != "torch bf16":
        return None
    return Embedder(embedder.model_ref, embedder.batch_size, embedder.backend, embedder.models_dir, precision="fp32")


def _page_times(services, pages: Path, paper_id: str, fp32: Embedder | None) -> dict:
    data = (pages / f"{paper_id}.html").read_bytes()
    started = time.perf_counter()
    parsed = parse_html(data, paper_id)
    parse_s = time.perf_counter() - started
    if parsed.body is None:
        return {"paper": paper_id, "status": parsed.status}
    sentences = [s for s in body_text.body_sentences(parsed.body) if body_text.may_state_finding(parsed.body, s)]
    split_s = time.perf_counter() - started - parse_s
    texts = [" ".join(parsed.body.text[s.start:s.end].split()) for s in sentences]
    started = time.perf_counter()
    services.embedder.embed(texts)
    embed_s = time.perf_counter() - started
    compared = {}
    if fp32 is not None:
        started = time.perf_counter()
        fp32.embed(texts)
        compared = {"embed_fp32_s": round(time.perf_counter() - started, 3)}
    started = time.perf_counter()
    outcome = fulltext.keep_parsed(services, parsed, "file")       # embeds again: the reader's whole step
    keep_s = time.perf_counter() - started
    return {"paper": paper_id, "status": outcome.status, "kb": round(len(data) / 1024), "sentences": len(sentences),
            "parse_s": round(parse_s, 3), "split_s": round(split_s, 3), "embed_s": round(embed_s, 3), **compared,
            "read_s": round(parse_s + split_s + keep_s, 3)}


def _asks(services, chat: Chat, question: str) -> list[float]:
    times = []
    for _ in range(ASKS):
        started = time.perf_counter()
        turn = chat.prepare(question, "bench-fulltext")
        answer_tables(services, turn.question, [a.sources for a in turn.answers], turn.ranking)
        times.append(time.perf_counter() - started)
    return times


def fulltext_bench(services, pages: Path, papers_jsonl: Path, question: str, asked_paper: str) -> dict:
    rows = [json.loads(line) for line in papers_jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]
    stored = {p.id for p in services.store.get_papers([r["id"] for r in rows])}
    ingestor(services).run("bench fulltext", [paper_from_row(r) for r in rows if r["id"] not in stored])
    chat = Chat(services)
    services.fulltext.delete(asked_paper)
    before = _asks(services, chat, question)
    fp32 = _fp32_twin(services.embedder)
    per_page = [_page_times(services, pages, r["id"], fp32) for r in rows if (pages / f"{r['id']}.html").is_file()]
    after = _asks(services, chat, question)
    read = [p["read_s"] for p in per_page if "read_s" in p]
    return {"pages": per_page, "embed_path": services.embedder.path, "embed_batch": services.embedder.batch_size,
            "pages_per_minute": round(60 / statistics.mean(read), 1) if read else None,
            "ask_abstracts_s": {"median": round(statistics.median(before), 3), "max": round(max(before), 3)},
            "ask_full_text_s": {"median": round(statistics.median(after), 3), "max": round(max(after), 3)},
            "question": question, "library_papers": services.store.count("paper")}


def markdown(result: dict) -> list[str]:
    path = result.get("embed_path", "?")
    lines = ["## Full text", "", f"Embedder path: {path}, batches of {result.get('embed_batch', '?')}.", "",
             f"| paper | KB | sentences | parse s | split s | embed s ({path}) | embed s (torch fp32) | read s |",
             "|---|---|---|---|---|---|---|---|"]
    for p in result["pages"]:
        lines.append(f"| {p['paper']} | {p.get('kb', '')} | {p.get('sentences', '')} | {p.get('parse_s', '')} | "
                     f"{p.get('split_s', '')} | {p.get('embed_s', '')} | {p.get('embed_fp32_s', '—')} | "
                     f"{p.get('read_s', p['status'])} |")
    embedded = [p for p in result["pages"] if "embed_s" in p]
    if embedded:
        largest = max(embedded, key=lambda p: p["sentences"])
        ratio = f", fp32 / {path} = {largest['embed_fp32_s'] / largest['embed_s']:.2f}" if "embed_fp32_s" in largest \
            else ""
        lines += ["", f"Largest page {largest['paper']} ({largest['sentences']} sentences): parse "
                  f"{largest['parse_s']} s, embed {largest['embed_s']} s ({path}){ratio}."]
    lines += ["", f"Pages a minute (parse, split, embed, store): {result['pages_per_minute']}. Ask, both answers' "
              f"tables, median (max) of {ASKS}: before reading {result['ask_abstracts_s']['median']} "
              f"({result['ask_abstracts_s']['max']}) s, after {result['ask_full_text_s']['median']} "
              f"({result['ask_full_text_s']['max']}) s, over {result['library_papers']} papers.", ""]
    return lines
