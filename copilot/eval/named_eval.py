"""Does a question that names a paper find it? (issue #57, item 1) `python -m copilot eval named`.

The library is `eval answers`' (the corpus's first 2,000 papers in file order, plus the slim-dev gold papers),
imported once into the same store. Each question of the dev set (tests/data/named-dev.jsonl: {question, paper,
names_by}, the paper named by its coined name, title, arXiv id or first author and year, the rest a generic
research ask) goes through the product's own paths:

  Chat     `Chat.prepare` (retrieval as a turn does it) and the papers-only side's evidence table
           (`answers.answer_tables`): does the named paper head the table (first row), is it in the table, was it
           retrieved (the pool the table is made from)?
  Search   `search_papers` over the question as typed (cut to Search's MAX_QUERY_CHARS, as Chat's own search cuts
           it): is the named paper the first hit, or in the first SEARCH_DEPTH?

Overall shares, and by how the paper is named. The turn's notice is kept (a name that fits several papers).
Only the product's public paths are used, so the same module measures an older commit (the "before").
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from copilot.eval.question_files import read_rows
from copilot.eval.report_files import json_text, write_files
from copilot.features.answers import answer_tables
from copilot.features.chat import Chat
from copilot.features.search import MAX_QUERY_CHARS, search_papers
from copilot.services import Services
from copilot.store.chat_log import RAW

SEARCH_DEPTH = 10
KINDS = ("name", "title", "id", "author")


class NamedDataError(ValueError):
    pass


def read_questions(path: Path, limit: int | None = None) -> list[dict]:
    def check(row: dict) -> None:
        assert isinstance(row["question"], str) and isinstance(row["paper"], str)
        assert row.get("names_by", "name") in KINDS
    return read_rows(path, check, NamedDataError, f'{{"question": ..., "paper": arXiv id, "names_by": one of '
                     f'{", ".join(KINDS)}}}', limit)


def ask_row(services: Services, chat: Chat, row: dict) -> dict:
    """One question through Chat's table and Search."""
    started = time.perf_counter()
    turn = chat.prepare(row["question"], "eval-named")
    answer = next(a for a in turn.answers if a.kind == RAW)
    table = answer_tables(services, turn.question, [answer.sources], turn.ranking)[0]
    seconds = time.perf_counter() - started
    rows = [r.paper_id for r in table.rows]
    query = " ".join(row["question"].split())[:MAX_QUERY_CHARS]
    hits = [hit.paper.id for hit in search_papers(services, query, limit=SEARCH_DEPTH).hits]
    paper = row["paper"]
    return {"question": row["question"], "paper": paper, "names_by": row.get("names_by", "name"),
            "heads_table": bool(rows) and rows[0] == paper, "in_table": paper in rows,
            "retrieved": any(item.id == paper for item in answer.sources),
            "search_first": bool(hits) and hits[0] == paper, "in_search": paper in hits,
            "table": rows, "search": hits, "notice": turn.notice, "seconds": round(seconds, 3)}


def _share(rows: Sequence[dict], key: str) -> float | None:
    return round(sum(bool(r[key]) for r in rows) / len(rows), 4) if rows else None


FIGURES = ("heads_table", "in_table", "retrieved", "search_first", "in_search")


def summarise(rows: Sequence[dict]) -> dict:
    summary: dict = {"questions": len(rows)}
    summary.update((key, _share(rows, key)) for key in FIGURES)
    summary.update((f"{key}_count", sum(bool(r[key]) for r in rows)) for key in FIGURES)
    summary["by_kind"] = {kind: {"questions": len(part), **{key: _share(part, key) for key in FIGURES}}
                          for kind in KINDS if (part := [r for r in rows if r["names_by"] == kind])}
    seconds = sorted(r["seconds"] for r in rows)
    summary["table_s_p50"] = round(seconds[len(seconds) // 2], 3) if seconds else None
    summary["table_s_max"] = round(seconds[-1], 3) if seconds else None
    return summary


def evaluate(services: Services, questions: Sequence[dict],
             progress: Callable[[str], None] = lambda message: None) -> dict:
    chat = Chat(services)
    services.embedder.embed_one("warm up")      # the model loads once, outside the timings
    rows = []
    for n, row in enumerate(questions, 1):
        rows.append(ask_row(services, chat, row))
        last = rows[-1]
        progress(f"[{n}/{len(questions)}] table first {last['heads_table']} in {last['in_table']} · search first "
                 f"{last['search_first']}: {row['question'][:60]}")
    return {"summary": summarise(rows), "per_question": rows,
            "meta": {"papers_in_library": services.store.count("paper"), "top_k": services.settings.top_k,
                     "model_profile": services.model_profile.name,
                     "load_avg": [round(x, 2) for x in os.getloadavg()]}}


LABELS = [("heads_table", "named paper heads Chat's table"), ("in_table", "named paper in the table"),
          ("retrieved", "named paper retrieved (the table's pool)"), ("search_first", "Search's first hit"),
          ("in_search", f"in Search's first {SEARCH_DEPTH}")]


def markdown(report: dict) -> str:
    s, meta = report["summary"], report["meta"]
    kinds = list(s["by_kind"])
    lines = [f"Named papers on {meta['papers_in_library']} papers, {s['questions']} questions, profile "
             f"{meta['model_profile']}, load {', '.join(str(x) for x in meta['load_avg'])}", "",
             "| figure | all | " + " | ".join(f"{k} ({s['by_kind'][k]['questions']})" for k in kinds) + " |",
             "|---|---|" + "---|" * len(kinds)]
    for key, label in LABELS:
        lines.append(f"| {label} | {s[key]} ({s[key + '_count']}) | "
                     + " | ".join(str(s["by_kind"][k][key]) for k in kinds) + " |")
    lines += ["", f"Table made in {s['table_s_p50']} s p50, {s['table_s_max']} s at most.", "",
              "| question | named by | heads table | in table | Search first |", "|---|---|---|---|---|"]
    for r in report["per_question"]:
        shown = " ".join(r["question"].split())
        shown = shown if len(shown) <= 100 else shown[:99] + "…"
        lines.append(f"| {shown.replace('|', '/')} | {r['names_by']} | {r['heads_table']} | {r['in_table']} | "
                     f"{r['search_first']} |")
    return "\n".join(lines) + "\n"


def write_outputs(report: dict, out_dir: Path, name: str) -> dict[str, Path]:
    return write_files(out_dir, {"json": (f"{name}.json", json_text(report)), "md": (f"{name}.md", markdown(report))})
