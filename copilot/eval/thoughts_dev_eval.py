"""Does thought memory add relevant papers to a related question's table? (issue #40, item 4)
`python -m copilot eval thoughts-dev`.

The library is `eval answers`' (the corpus's first 2,000 papers and the paper questions' gold papers), in a store of
its own whose thought memory is emptied first (every live thought deleted). Then, through the product's chat path
(`features.chat.Chat`: both retrievals, both answers, the same-answer test, the vote, the thought job):

  warm-up   every question of tests/data/thoughts-warmup.jsonl (for each dev question a paraphrase and a sibling,
            written by hand) is asked; a comparison is voted for the thought side (a user who liked it), a turn
            with one answer makes its thought from that answer, as Chat does; the thought jobs are awaited;
  asking    every dev question of tests/data/answers-dev.jsonl (relevant papers judged by hand) is asked once by a
            user of its own; the turn makes no thought (a comparison is voted "both bad", a one-answer turn's
            thought job is withdrawn), so each dev question meets the warm-up's memory and nothing else.

With `trends` "first", Trends runs on every calendar month of the library holding at least TRENDS_MIN_PAPERS papers
(the field sampled evenly, the default number of summaries) and its summaries are stored as thoughts before the
warm-up, as a Trends run on every profile did before issue #40 item 3; "only" stores them and skips the warm-up.

Per dev question, both answers are read back (`answers_eval.answer_rows`: the table's papers). Figures:

  recall / precision    relevant papers in the table / relevant papers; / papers in the table (per side)
  comparison share      turns shown as two answers to vote on ("yes")
  same_answer share     turns whose retrievals differed but whose two answers came out the same
  adds relevant         comparisons whose thought side holds a relevant paper the papers-only side lacks
  longer side           comparisons where the thought side has more rows, fewer, as many (a blind guesser who
                        picks the longer answer is right in more / (more + fewer))
  reached               dev questions whose thought side retrieved a thought of their own warm-up questions
  from memory           papers of the thought side's table that were not among the papers-only side's items
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path

from copilot.eval.answers_eval import AnswersDataError, answer_rows
from copilot.eval.report_files import json_text, write_files
from copilot.features.chat import Chat
from copilot.features.trends import TrendsOptions, run_trends
from copilot.methods.thought_drafts import ROW_THOUGHT_VECTOR, is_row_thought, vector_text
from copilot.records import Evidence, number_to_date
from copilot.services import Services
from copilot.store.chat_log import RAW, THOUGHTS
from copilot.table import EvidenceTable

WARMUP_USER = "warmup"
TRENDS_USER = "trends"
TRENDS_MODES = ("none", "first", "only")
TRENDS_MIN_PAPERS = 50


def read_warmups(path: Path, dev_count: int) -> list[dict]:
    """The warm-up questions: JSON lines {for: dev line, kind, question}; a line {about: …} says how they were
    written and is skipped."""
    if not path.is_file():
        raise AnswersDataError(f"no warm-up question file at {path}")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if "about" in row:
            continue
        if not isinstance(row.get("question"), str) or not isinstance(row.get("for"), int):
            raise AnswersDataError(f"{path}:{number} needs {{\"for\": dev line, \"question\": ...}}")
        if 0 <= row["for"] < dev_count:
            rows.append(row)
    return rows


def clear_memory(services: Services) -> int:
    """Delete every live thought (rows and lineage stay, as a user's delete leaves them); returns how many."""
    memory = services.thought_memory
    cleared = 0
    while True:
        live = memory.thoughts.list_live(limit=500)
        if not live:
            return cleared
        for row in live:
            cleared += memory.delete(row.id)


def _run_turn(chat: Chat, question: str, user: str):
    turn = chat.prepare(question, user)
    for _ in chat.stream(turn):
        pass
    return turn


def warm_up(services: Services, warmups: Sequence[dict], progress=lambda message: None) -> list[dict]:
    """Ask every warm-up question; a comparison is voted for the thought side. Returns each turn's outcome."""
    chat = Chat(services)
    done = []
    for n, row in enumerate(warmups, 1):
        turn = _run_turn(chat, row["question"], WARMUP_USER)
        if turn.comparison == "yes":
            chat.vote(turn.id, THOUGHTS, WARMUP_USER)
        jobs = [job for job in chat.wait_for_thoughts(turn.id) if job["superseded_at"] is None]
        job = jobs[-1] if jobs else {}
        done.append({"for": row["for"], "kind": row.get("kind", ""), "question": row["question"],
                     "comparison": turn.comparison, "thought": job.get("status", "none"),
                     "thought_id": job.get("thought_id"), "reason": job.get("reason")})
        progress(f"warm-up {n}/{len(warmups)}: {turn.comparison}, thought {done[-1]['thought']}")
    return done


def trends_thoughts(services: Services, progress=lambda message: None) -> list[str]:
    """Run Trends on each calendar month of the library holding TRENDS_MIN_PAPERS papers or more, its summaries
    stored as thoughts whatever the profile; returns their ids."""
    months: dict[date, int] = {}
    for row in services.catalog.rows():
        day = number_to_date(row.date)
        months[day.replace(day=1)] = months.get(day.replace(day=1), 0) + 1
    stored: list[str] = []
    for first in sorted(m for m, count in months.items() if count >= TRENDS_MIN_PAPERS):
        last = (first + timedelta(days=32)).replace(day=1) - timedelta(days=1)
        opts = TrendsOptions.for_writer(services.generation, store_thoughts=True, use_cache=False)
        report = run_trends(services, first, last, user=TRENDS_USER, opts=opts)
        stored += report.thought_ids
        progress(f"Trends {first:%Y-%m}: {len(report.topics)} topics, {len(report.thought_ids)} thoughts stored")
    return stored


def _side(text: str, items: Sequence[Evidence], relevant: set[str], table: EvidenceTable | None) -> dict:
    papers = list(dict.fromkeys(row.paper for row in answer_rows(text, items, table) if row.paper))
    hits = [p for p in papers if p in relevant]
    return {"papers": papers, "rows": len(papers), "relevant": hits,
            "recall": round(len(hits) / len(relevant), 4) if relevant else None,
            "precision": round(len(hits) / len(papers), 4) if papers else None}


def _as_items(sources) -> list[Evidence]:
    return [Evidence(id=s.id, kind=s.kind, title=s.title, text="", score=s.score) for s in sources]


def ask_dev(services: Services, n: int, row: dict, own_thoughts: set[str]) -> dict:
    """One dev question through Chat by a user of its own; the turn leaves no thought behind."""
    chat = Chat(services)
    user = f"eval-dev-{n}"
    turn = _run_turn(chat, row["question"], user)
    if turn.comparison == "yes":
        chat.vote(turn.id, "bad", user)
    else:
        chat.request_thought(turn.id, None, "eval")
    chat.wait_for_all()
    stored = chat.log.turn(turn.id)
    assert stored is not None
    raw_items = _as_items(stored.raw.sources)
    thought_items = _as_items(stored.thoughts.sources) if stored.thoughts.sources else raw_items
    relevant = set(row["relevant"])
    raw = _side(stored.raw.text or "", raw_items, relevant, stored.raw.table)
    memory_side = stored.thoughts if stored.thoughts.text else stored.raw
    with_memory = _side(memory_side.text or "", thought_items, relevant, memory_side.table)
    raw_ids = {item.id for item in raw_items}
    thoughts_used = [item.id for item in thought_items if item.kind == "thought"]
    return {"question": row["question"], "comparison": turn.comparison, "relevant": len(relevant),
            "papers": raw, "thoughts": with_memory, "thoughts_retrieved": thoughts_used,
            "reached_own": bool(own_thoughts & set(thoughts_used)),
            "from_memory": [p for p in with_memory["papers"] if p not in raw_ids],
            "adds_relevant": sorted(set(with_memory["relevant"]) - set(raw["relevant"])),
            "loses_relevant": sorted(set(raw["relevant"]) - set(with_memory["relevant"])),
            "answers": {RAW: stored.raw.text, THOUGHTS: stored.thoughts.text}}


def _mean(values) -> float | None:
    values = [float(v) for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None


def _share(count: int, total: int) -> float | None:
    return round(count / total, 4) if total else None


def summarise(rows: list[dict], warmup: list[dict]) -> dict:
    compared = [r for r in rows if r["comparison"] == "yes"]
    differed = [r for r in rows if r["comparison"] in ("yes", "same_answer")]
    longer = sum(r["thoughts"]["rows"] > r["papers"]["rows"] for r in compared)
    shorter = sum(r["thoughts"]["rows"] < r["papers"]["rows"] for r in compared)
    return {
        "questions": len(rows),
        "papers_recall": _mean(r["papers"]["recall"] for r in rows),
        "thoughts_recall": _mean(r["thoughts"]["recall"] for r in rows),
        "papers_precision": _mean(r["papers"]["precision"] for r in rows),
        "thoughts_precision": _mean(r["thoughts"]["precision"] for r in rows),
        "papers_rows": _mean(r["papers"]["rows"] for r in rows),
        "thoughts_rows": _mean(r["thoughts"]["rows"] for r in rows),
        "comparison_share": _share(len(compared), len(rows)),
        "same_answer_share": _share(sum(r["comparison"] == "same_answer" for r in differed), len(differed)),
        "same_items_share": _share(sum(r["comparison"] == "same_items" for r in rows), len(rows)),
        "adds_relevant_share": _share(sum(bool(r["adds_relevant"]) for r in compared), len(compared)),
        "loses_relevant_share": _share(sum(bool(r["loses_relevant"]) for r in compared), len(compared)),
        "thought_side_longer": longer, "thought_side_shorter": shorter,
        "same_length": len(compared) - longer - shorter,
        "longer_guesser_right": _share(longer, longer + shorter),
        "reached_own_share": _share(sum(r["reached_own"] for r in rows), len(rows)),
        "reached_trends_share": _share(sum(r.get("reached_trends", False) for r in rows), len(rows)),
        "from_memory_rows": _mean(len(r["from_memory"]) for r in rows),
        "warmup_turns": len(warmup),
        "warmup_comparisons": sum(w["comparison"] == "yes" for w in warmup),
        "warmup_thoughts_stored": sum(w["thought"] == "stored" for w in warmup),
        "warmup_thoughts_redundant": sum(w["thought"] == "redundant" for w in warmup),
    }


def embed_thoughts_as(services: Services, mode: str) -> int:
    """Give every live row thought the vector `mode` makes (thought_drafts.vector_text); returns how many."""
    memory = services.thought_memory
    rows = [row for row in memory.thoughts.list_live(limit=100_000) if is_row_thought(row.text)]
    if rows:
        vectors = services.embedder.embed([vector_text(row.question, row.text, mode) for row in rows])
        for row, vector in zip(rows, vectors):
            memory.thoughts.put_vector(row, memory.direct_sources(row.id), vector)
    return len(rows)


def ask_all(services: Services, dev: list[dict], own: dict[int, set[str]], progress) -> list[dict]:
    rows = []
    for n, row in enumerate(dev):
        rows.append(ask_dev(services, n, row, own.get(n, set())))
        r = rows[-1]
        progress(f"[{n + 1}/{len(dev)}] {r['comparison']}: recall {r['papers']['recall']} → "
                 f"{r['thoughts']['recall']}, memory rows {len(r['from_memory'])}")
    return rows


def evaluate(services: Services, dev: list[dict], warmups: list[dict], progress=lambda message: None,
             vector_modes: Sequence[str] = (), trends: str = "none") -> dict:
    """The warm-up, then the dev questions against its memory; with `vector_modes`, the dev questions again with
    the row thoughts re-embedded each way (the warm-up itself ran with the product's way); with `trends` "first"
    or "only", Trends summaries are stored as thoughts before the warm-up or instead of it."""
    started = time.monotonic()
    cleared = clear_memory(services)
    services.embedder.embed_one("warm up")
    from_trends = set(trends_thoughts(services, progress)) if trends != "none" else set()
    warmup = warm_up(services, warmups if trends != "only" else [], progress)
    own: dict[int, set[str]] = {}
    for w in warmup:
        if w["thought_id"] and w["thought"] == "stored":
            own.setdefault(w["for"], set()).add(w["thought_id"])
    rows = ask_all(services, dev, own, progress)
    for row in rows:
        row["reached_trends"] = bool(from_trends & set(row["thoughts_retrieved"]))
    by_vector = {}
    for mode in vector_modes:
        progress(f"row thoughts embedded as {mode}: {embed_thoughts_as(services, mode)}")
        by_vector[mode] = summarise(ask_all(services, dev, own, progress), warmup)
    if vector_modes:
        embed_thoughts_as(services, ROW_THOUGHT_VECTOR)
    return {"summary": summarise(rows, warmup), "per_question": rows, "warmup": warmup, "by_vector": by_vector,
            "meta": {"model_profile": services.model_profile.name, "papers_in_library": services.store.count("paper"),
                     "thoughts_cleared_first": cleared, "trends": trends, "trends_thoughts": len(from_trends),
                     "thoughts_in_memory": services.thought_memory.count(),
                     "top_k": services.settings.top_k, "seconds": round(time.monotonic() - started, 1),
                     "load_avg": [round(x, 2) for x in os.getloadavg()]}}


SUMMARY_ROWS = [
    ("dev questions", "questions"),
    ("recall, papers only", "papers_recall"), ("recall, papers + thoughts", "thoughts_recall"),
    ("precision, papers only", "papers_precision"), ("precision, papers + thoughts", "thoughts_precision"),
    ("rows, papers only", "papers_rows"), ("rows, papers + thoughts", "thoughts_rows"),
    ("turns with a comparison", "comparison_share"),
    ("identical answers (same_answer) of turns whose items differed", "same_answer_share"),
    ("turns whose retrievals were the same", "same_items_share"),
    ("comparisons where the thought side holds a relevant paper papers-only lacks", "adds_relevant_share"),
    ("comparisons where papers-only holds a relevant paper the thought side lacks", "loses_relevant_share"),
    ("comparisons: thought side longer", "thought_side_longer"),
    ("comparisons: thought side shorter", "thought_side_shorter"), ("comparisons: same length", "same_length"),
    ("blind 'pick the longer answer' guesser right", "longer_guesser_right"),
    ("dev questions whose thought side retrieved their own warm-up thought", "reached_own_share"),
    ("dev questions whose thought side retrieved a Trends thought", "reached_trends_share"),
    ("rows from memory per answer (papers not among papers-only's items)", "from_memory_rows"),
    ("warm-up turns", "warmup_turns"), ("warm-up comparisons (voted for the thought side)", "warmup_comparisons"),
    ("warm-up thoughts stored", "warmup_thoughts_stored"), ("warm-up thoughts redundant", "warmup_thoughts_redundant"),
]


def markdown(report: dict) -> str:
    s, meta = report["summary"], report["meta"]
    lines = [f"Thought memory on the answers dev set: {meta['papers_in_library']} papers, profile "
             f"{meta['model_profile']}, {meta['thoughts_in_memory']} thoughts after the warm-up, "
             f"{meta['seconds']} s, load {', '.join(str(x) for x in meta['load_avg'])}", "",
             "| figure | value |", "|---|---|"]
    lines += [f"| {label} | {s.get(key)} |" for label, key in SUMMARY_ROWS]
    if report.get("by_vector"):
        modes = list(report["by_vector"])
        lines += ["", "The same dev questions with the warm-up's row thoughts re-embedded each way:", "",
                  "| figure | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
        lines += [f"| {label} | " + " | ".join(str(report["by_vector"][m].get(key)) for m in modes) + " |"
                  for label, key in SUMMARY_ROWS[:19]]
    lines += ["", "| question | comparison | recall papers → thoughts | precision | rows | memory rows | adds |",
              "|---|---|---|---|---|---|---|"]
    for r in report["per_question"]:
        p, t = r["papers"], r["thoughts"]
        lines.append(f"| {r['question']} | {r['comparison']} | {p['recall']} → {t['recall']} | {p['precision']} → "
                     f"{t['precision']} | {p['rows']} → {t['rows']} | {len(r['from_memory'])} | "
                     f"{' '.join(r['adds_relevant'])} |")
    return "\n".join(lines) + "\n"


def write_outputs(report: dict, out_dir: Path, name: str) -> dict[str, Path]:
    return write_files(out_dir, {"json": (f"{name}.json", json_text(report)), "md": (f"{name}.md", markdown(report))})
