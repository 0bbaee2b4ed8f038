"""The large page's cost (issue #58 item 3): `python -m tests.bench_large_body [--rows N] [--json]`.

Three pages: the issue's LaTeXML-shaped page of 400,000 table rows and one sentence (stored and re-read on every
turn before the caps), a page just inside the caps (`--rows` table rows with numbers, which a row may quote, plus 300
paragraphs), and one of as many characters as a body may hold, in paragraphs. For the last two: parse, sentences,
store (vectors are random unit rows: embedding is not what is measured), the file's size, the first read by a new
store (a restart: parsed from the row), a read from memory, and one turn's scoring of every sentence
(body_text.question_bonus plus the cosines). Prints `uptime`'s load with them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from copilot.body import MAX_CHARS, MAX_PASSAGES
from copilot.methods import body_text
from copilot.sources.fulltext_html import parse_html
from copilot.store.fulltext import FILE_NAME, FulltextStore

QUESTION = "What accuracy does the model reach on the held-out split?"


def _page(body: str) -> str:
    return ('<html><body><div class="ltx_page_main"><div class="ltx_page_content"><article class="ltx_document">'
            f'<h1 class="ltx_title ltx_title_document">T</h1>{body}</article></div></div></body></html>')


def _section(n: int, inner: str) -> str:
    return (f'<section id="S{n}" class="ltx_section"><h2 class="ltx_title ltx_title_section"><span class="ltx_tag '
            f'ltx_tag_section">{n} </span>Results {n}</h2>{inner}</section>')


def hostile_page() -> str:
    rows = "".join(f"<tr><td>{n}</td></tr>" for n in range(400_000))
    return _page(_section(1, '<div class="ltx_para"><p class="ltx_p">One sentence.</p></div>'
                          f'<table class="ltx_tabular">{rows}</table>'))


def page_at_the_caps(rows: int) -> str:
    paragraphs = "".join(f'<div class="ltx_para"><p class="ltx_p">We measure the accuracy of model {n} on the held-out '
                         f"split. It reaches {n % 97}.{n % 10} points after {n % 13 + 1} epochs.</p></div>"
                         for n in range(300))
    header = "<tr><td>Model</td><td>Accuracy</td><td>Epochs</td></tr>"
    table = "".join(f"<tr><td>Variant {n} of the model</td><td>{n % 97}.{n % 10}</td><td>{n % 13 + 1}</td></tr>"
                    for n in range(rows))
    return _page(_section(1, paragraphs) + _section(2, f'<table class="ltx_tabular">{header}{table}</table>'))


def text_at_the_caps(passages: int) -> str:
    """As many words as a body may hold, in `passages` paragraphs of one long sentence each."""
    words = " ".join(["results"] * 24)
    paragraphs = "".join(f'<div class="ltx_para"><p class="ltx_p">We report {n} {words} on the split.</p></div>'
                         for n in range(passages))
    return _page(_section(1, paragraphs))


def _timed(call):
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def run(rows: int) -> dict:
    out: dict = {"load_before": os.getloadavg()}
    hostile = hostile_page()
    parsed, seconds = _timed(lambda: parse_html(hostile, "2401.00001"))
    out["hostile"] = {"bytes": len(hostile), "status": parsed.status, "parse_s": round(seconds, 3)}
    out["table_at_the_caps"] = _costs(page_at_the_caps(rows))
    out["text_at_the_caps"] = _costs(text_at_the_caps(MAX_CHARS // 230))
    out["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    out["load_after"] = os.getloadavg()
    return out


def _costs(data: str) -> dict:
    """Parse, sentences, store, first read, read from memory and one turn's scoring of a page."""
    parsed, seconds = _timed(lambda: parse_html(data, "2401.00002"))
    body = parsed.body
    assert body is not None, parsed.message
    result: dict = {"bytes": len(data), "passages": len(body.passages), "chars": len(body.text),
                    "parse_s": round(seconds, 3)}
    sentences, seconds = _timed(lambda: [s for s in body_text.body_sentences(body)
                                         if body_text.may_state_finding(body, s)])
    texts = [" ".join(body.text[s.start:s.end].split()) for s in sentences]
    terms = body_text.sentence_terms(texts)
    result.update(sentences=len(sentences), sentences_s=round(seconds, 3))
    vectors = np.random.default_rng(0).standard_normal((len(sentences), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    spans = [(s.start, s.end, s.passage, s.cut_before, s.cut_after) for s in sentences]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / FILE_NAME
        stored, seconds = _timed(lambda: FulltextStore(path).put(body, spans, "m", vectors, "html", terms))
        assert stored
        result.update(store_s=round(seconds, 3), file_mb=round(sum(p.stat().st_size for p in Path(folder).iterdir())
                                                              / 2 ** 20, 1))
        store = FulltextStore(path)
        got, seconds = _timed(lambda: store.get(["2401.00002"], "m")["2401.00002"])
        result["first_read_s"] = round(seconds, 3)
        _, seconds = _timed(lambda: store.get(["2401.00002"], "m"))
        result["read_from_memory_s"] = round(seconds, 4)
        question = np.random.default_rng(1).standard_normal(384).astype(np.float32)

        def score() -> np.ndarray:
            bonus = body_text.question_bonus(QUESTION, got.body, got.sentences, got.terms, "T")
            return got.vectors @ question + bonus

        _, seconds = _timed(score)
        result["turn_scoring_s"] = round(seconds, 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=MAX_PASSAGES - 400)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.rows)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
