"""Which unvoted answers may become thoughts? (issue #49, item 2) `python -m copilot.eval.thoughts_floor_eval
DATA_DIR [OUT.json]`, DATA_DIR holding `eval answers`' store (its library: the corpus's first 2,000 papers and the
dev questions' gold papers).

Every question of tests/data/answers-dev.jsonl (relevant papers judged by hand) and every warm-up question of
tests/data/thoughts-warmup.jsonl (a paraphrase or sibling of a dev question, judged by that question's papers) gets
the papers-only table Chat shows (`answers_eval.ask`, memory unused). Per table, what its thought would hold
(`thought_drafts.table_thought`: the rows whose quote is ROW_THOUGHT_FLOOR close to the question) and
`chat_thoughts.table_quality` (the measure the unvoted rule reads); per row, whether its paper is relevant. For each
candidate floor of that measure: the tables an unvoted turn would keep and drop, and the share of their thought rows
that are relevant.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from copilot.eval.answers_eval import ask, read_questions
from copilot.eval.thoughts_dev_eval import read_warmups
from copilot.features.chat import Chat
from copilot.features.chat_thoughts import UNVOTED_FLOOR, table_quality
from copilot.methods.thought_drafts import ROW_THOUGHT_FLOOR
from copilot.services import Services

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
FLOORS = (0.0, 0.40, 0.45, 0.50, 0.52, 0.55, 0.58, 0.60, 0.65)


def table_record(services: Services, chat: Chat, question: str, relevant: set[str], kind: str) -> dict:
    _, table, _, seconds = ask(services, chat, question)
    rows = []
    if table.rows:
        texts = [" ".join(q.shown for q in row.quotes) for row in table.rows]
        vectors = np.asarray(services.embedder.embed([question] + texts), dtype=np.float32)
        for row, vector in zip(table.rows, vectors[1:]):
            cosine = float(vector @ vectors[0])
            rows.append({"paper": row.paper_id, "score": row.score, "quote_cosine": round(cosine, 4),
                         "in_thought": cosine >= ROW_THOUGHT_FLOOR, "relevant": row.paper_id in relevant})
    return {"question": question, "kind": kind, "rows": rows, "seconds": round(seconds, 3),
            "quality": round(table_quality(services.embedder.embed, question, table), 4)}


def by_floor(tables: list[dict], floor: float) -> dict:
    def thought_rows(group: list[dict]) -> list[dict]:
        return [r for t in group for r in t["rows"] if r["in_thought"]]

    makes = [t for t in tables if any(r["in_thought"] for r in t["rows"])]     # a table whose thought is not empty
    kept = [t for t in makes if t["quality"] >= floor]
    dropped = [t for t in makes if t["quality"] < floor]
    out: dict = {"floor": floor, "tables_kept": len(kept), "tables_dropped": len(dropped)}
    for name, group in (("kept", kept), ("dropped", dropped)):
        rows = thought_rows(group)
        out[f"{name}_rows"] = len(rows)
        out[f"{name}_relevant_share"] = round(sum(r["relevant"] for r in rows) / len(rows), 4) if rows else None
    return out


def evaluate(services: Services, progress=lambda message: None) -> dict:
    started = time.monotonic()
    dev = read_questions(DATA / "answers-dev.jsonl")
    warmups = read_warmups(DATA / "thoughts-warmup.jsonl", len(dev))
    chat = Chat(services)
    services.embedder.embed_one("warm up")
    asked = [(row["question"], set(row["relevant"]), "dev") for row in dev]
    asked += [(w["question"], set(dev[w["for"]]["relevant"]), w.get("kind", "")) for w in warmups]
    tables = []
    for n, (question, relevant, kind) in enumerate(asked, 1):
        tables.append(table_record(services, chat, question, relevant, kind))
        progress(f"[{n}/{len(asked)}] quality {tables[-1]['quality']}: {question}")
    return {"floors": {kind: [by_floor([t for t in tables if t["kind"] in kinds], f) for f in FLOORS]
                       for kind, kinds in (("dev", ("dev",)), ("dev+paraphrase", ("dev", "paraphrase")),
                                           ("all", ("dev", "paraphrase", "sibling")))},
            "unvoted_floor": UNVOTED_FLOOR, "tables": tables,
            "meta": {"papers_in_library": services.store.count("paper"), "model_profile": services.model_profile.name,
                     "seconds": round(time.monotonic() - started, 1),
                     "load_avg": [round(x, 2) for x in os.getloadavg()]}}


if __name__ == "__main__":
    from copilot.config import load_settings

    settings = load_settings()
    services = Services(settings.model_copy(update={"data_dir": Path(sys.argv[1])}))
    report = evaluate(services, progress=lambda message: print(message, file=sys.stderr))
    text = json.dumps(report, indent=1)
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(text, encoding="utf-8")
    print(json.dumps({"floors": report["floors"], "meta": report["meta"]}, indent=1))
