"""Do answers quote what a paper's body says? (issue #48, item 6) `python -m copilot eval fulltext`.

Each question names a paper of the library, and patterns that match the sentence (or table row) stating its answer;
`kind` "body" when only the body states it, "abstract" for a control the abstract answers. Per paper: its stored
body is removed, its questions are asked (the answer from abstracts, as a question meets a paper not yet read),
the paper is read cold (fetched from `COPILOT_ARXIV_HTML_URL`, or imported from `--pages`, a folder of files named
by id: parse, sentences, embedding), and its questions are asked again (warm). An ask is Chat's own path for both
sides of a turn: retrieval (`Chat.prepare`) and the two evidence tables (`answer_tables`); on the tiny profile that
is the answer.

  quoted          the paper's row quotes a sentence matching a pattern (warm)
  section_named   …and that quote names its section as the question file does ("4.2", "A")
  quoted_cold     the same, before the paper was read (a body question should miss; a control should not)
  quoted_scoped   the same, the question asked about its paper only (issue #57: `ask --paper ID`), after reading
  type            the question's kind (methods.question_kinds): the summary's `by_type` counts each kind apart
  verbatim        every quote of every row is the slice of its paper's text it says it is
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from copilot.eval.question_files import read_rows
from copilot.eval.report_files import json_text, write_files
from copilot.features import fulltext
from copilot.features.answers import answer_tables
from copilot.features.chat import Chat
from copilot.methods.question_kinds import KINDS, question_kind
from copilot.services import Services
from copilot.table import BODY, EvidenceTable, verbatim

MAX_PATTERN = 300


class FulltextDataError(ValueError):
    pass


def read_questions(path: Path, limit: int | None = None) -> list[dict]:
    def check(row: dict) -> None:
        assert isinstance(row["paper"], str) and isinstance(row["question"], str)
        assert row.get("kind", "body") in ("body", "abstract")
        assert row["patterns"] and all(isinstance(p, str) and len(p) <= MAX_PATTERN for p in row["patterns"])
        row["compiled"] = [re.compile(p, re.I) for p in row["patterns"]]
    return read_rows(path, check, FulltextDataError, '{"paper", "question", "patterns": [regex, …], "kind": '
                     '"body"|"abstract", "section"}', limit)


def ask_both(services: Services, chat: Chat, question: str,
             papers: Sequence[str] | None = None) -> tuple[list[EvidenceTable], float]:
    """Both sides' tables for a question, as Chat makes them, and the seconds it took; with `papers`, the one table
    of the question asked about those papers (issue #57)."""
    started = time.perf_counter()
    turn = chat.prepare(question, "eval-fulltext", papers=papers)
    tables = answer_tables(services, turn.question, [a.sources for a in turn.answers], turn.ranking)
    return tables, time.perf_counter() - started


def judge(services: Services, row: dict, tables: Sequence[EvidenceTable]) -> dict:
    """Whether the paper's row quotes a sentence matching the question's patterns, and with which section."""
    quoted = named = False
    sections = []
    for table in tables[:1]:                       # the papers-only side; both sides read the same stored text
        for table_row in table.rows:
            if table_row.paper_id != row["paper"]:
                continue
            for quote in table_row.quotes:
                if any(p.search(quote.shown) for p in row["compiled"]):
                    quoted = True
                    sections.append(quote.section)
                    named = named or _same_section(quote.section, row.get("section", "")) and quote.source == BODY
    return {"quoted": quoted, "section_named": named, "sections": sections}


def _same_section(shown: str, expected: str) -> bool:
    if not expected:
        return False
    words = shown.split()[:2]
    return any(w == expected or w.startswith(expected + ".") for w in words) or (
        "." not in expected and bool(words) and words[0].split(".")[0] == expected)


def all_verbatim(services: Services, tables: Sequence[EvidenceTable]) -> tuple[int, int]:
    """(quotes that are slices of their text, quotes)."""
    ids = {r.paper_id for t in tables for r in t.rows}
    abstracts = {p.id: p.abstract for p in services.store.get_papers(list(ids))}
    bodies = services.fulltext.get(ids, services.embedder.name)
    good = total = 0
    for table in tables:
        for table_row in table.rows:
            for quote in table_row.quotes:
                total += 1
                text = (bodies[table_row.paper_id].body.text if table_row.paper_id in bodies else "") \
                    if quote.source == BODY else abstracts.get(table_row.paper_id, "")
                good += verbatim(quote, text)
    return good, total


def read_cold(services: Services, paper_id: str, pages: Path | None) -> fulltext.Outcome:
    services.fulltext.delete(paper_id)
    if pages is None:
        return fulltext.read_paper(services, paper_id)
    files = [p for p in sorted(pages.glob(f"{paper_id}*")) if p.is_file() and not p.name.endswith(".failed.html")]
    if not files:
        return fulltext.Outcome(paper_id, "not_found", "file", f"no file for {paper_id} in {pages}")
    started = time.perf_counter()
    outcomes = fulltext.import_paths(services, files[:1])
    outcome = outcomes[0]
    if outcome.status == "ok":
        return outcome
    return fulltext.Outcome(paper_id, outcome.status, "file", outcome.message, fetch_s=time.perf_counter() - started)


def evaluate(services: Services, questions: list[dict], pages: Path | None,
             progress: Callable[[str], None] = lambda message: None) -> dict:
    chat = Chat(services)
    per_question: list[dict] = []
    readings: list[dict] = []
    for paper_id in dict.fromkeys(row["paper"] for row in questions):
        mine = [row for row in questions if row["paper"] == paper_id]
        services.fulltext.delete(paper_id)
        cold = []
        for row in mine:
            tables, seconds = ask_both(services, chat, row["question"])
            cold.append((judge(services, row, tables), seconds))
        outcome = read_cold(services, paper_id, pages)
        readings.append({"paper": paper_id, "status": outcome.status, "message": outcome.message,
                         "sentences": outcome.sentences, "fetch_s": round(outcome.fetch_s, 3),
                         "parse_s": round(outcome.parse_s, 3), "embed_s": round(outcome.embed_s, 3)})
        progress(f"{paper_id}: {outcome.status} {outcome.message}")
        for row, (before, cold_s) in zip(mine, cold):
            tables, seconds = ask_both(services, chat, row["question"])
            good, total = all_verbatim(services, tables)
            scoped, scoped_s = ask_both(services, chat, row["question"], [paper_id])
            scoped_good, scoped_total = all_verbatim(services, scoped)
            per_question.append({"paper": paper_id, "kind": row.get("kind", "body"), "question": row["question"],
                                 "type": question_kind(row["question"]), "quoted_cold": before["quoted"],
                                 **judge(services, row, tables),
                                 "quoted_scoped": judge(services, row, scoped)["quoted"],
                                 "verbatim": good + scoped_good, "quotes": total + scoped_total,
                                 "ask_cold_s": round(cold_s, 3), "ask_warm_s": round(seconds, 3),
                                 "ask_scoped_s": round(scoped_s, 3)})
    return {"summary": summarise(per_question, readings), "readings": readings, "per_question": per_question,
            "meta": {"papers": services.store.count("paper"), "embedder": services.embedder.name,
                     "profile": services.model_profile.name}}


def _share(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def _counts(rows: Sequence[dict]) -> dict:
    return {"questions": len(rows), "quoted": _share([r["quoted"] for r in rows]),
            "section_named": _share([r["section_named"] for r in rows]),
            "quoted_cold": _share([r["quoted_cold"] for r in rows]),
            "quoted_scoped": _share([r["quoted_scoped"] for r in rows])}


def summarise(rows: list[dict], readings: list[dict]) -> dict:
    out: dict = {}
    for kind in ("body", "abstract"):
        mine = [r for r in rows if r["kind"] == kind]
        out[kind] = _counts(mine)
    out["by_type"] = {f"{kind} · {kind_of}": _counts(mine) for kind in ("body", "abstract") for kind_of in KINDS
                      if (mine := [r for r in rows if r["kind"] == kind and r["type"] == kind_of])}
    warm = [r["ask_warm_s"] for r in rows]
    cold = [r["ask_cold_s"] for r in rows]
    scoped = [r["ask_scoped_s"] for r in rows]
    read = [r["fetch_s"] + r["parse_s"] + r["embed_s"] for r in readings if r["status"] == "ok"]
    out["verbatim"] = {"quotes": sum(r["quotes"] for r in rows), "verbatim": sum(r["verbatim"] for r in rows)}
    out["seconds"] = {"ask_warm_p50": _pct(warm, 0.5), "ask_warm_p95": _pct(warm, 0.95),
                      "ask_abstracts_p50": _pct(cold, 0.5), "ask_abstracts_p95": _pct(cold, 0.95),
                      "ask_scoped_p50": _pct(scoped, 0.5), "ask_scoped_p95": _pct(scoped, 0.95),
                      "read_p50": _pct(read, 0.5), "read_max": _pct(read, 1.0),
                      "parse_max": _pct([r["parse_s"] for r in readings], 1.0),
                      "embed_max": _pct([r["embed_s"] for r in readings], 1.0)}
    out["read"] = {status: sum(1 for r in readings if r["status"] == status) for status in
                   dict.fromkeys(r["status"] for r in readings)}
    return out


def markdown(report: dict) -> str:
    s = report["summary"]
    lines = ["| questions | n | quoted (warm) | section named | quoted before reading | asked about its paper |",
             "|---|---|---|---|---|---|"]
    for kind, k in [(kind, s[kind]) for kind in ("body", "abstract")] + list(s["by_type"].items()):
        lines.append(f"| {kind} | {k['questions']} | {k['quoted']} | {k['section_named']} | {k['quoted_cold']} | "
                     f"{k['quoted_scoped']} |")
    v, t = s["verbatim"], s["seconds"]
    lines += ["", f"Quotes verbatim: {v['verbatim']} of {v['quotes']}. Papers read: {s['read']}.", "",
              "| seconds | p50 | p95 / max |", "|---|---|---|",
              f"| ask, both answers, full text stored | {t['ask_warm_p50']} | {t['ask_warm_p95']} |",
              f"| ask, both answers, abstracts only | {t['ask_abstracts_p50']} | {t['ask_abstracts_p95']} |",
              f"| ask about its paper, full text stored | {t['ask_scoped_p50']} | {t['ask_scoped_p95']} |",
              f"| read one paper (fetch + parse + embed) | {t['read_p50']} | {t['read_max']} |",
              f"| parse / embed one paper (max) | {t['parse_max']} | {t['embed_max']} |"]
    return "\n".join(lines) + "\n"


def write_outputs(report: dict, out_dir: Path, name: str) -> dict[str, Path]:
    return write_files(out_dir, {"json": (f"{name}.json", json_text(report)), "md": (f"{name}.md", markdown(report))})
