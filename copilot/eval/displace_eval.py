"""Does a thought row take the place of a more relevant paper? (issue #49, item 3)

  capture   `python -m copilot.eval.displace_eval capture DATA_DIR OUT.json [--no-floor] [--shipped]`:
            `eval thoughts-dev`'s warm-up and dev questions (`thoughts_dev_eval.evaluate`) on the store in
            DATA_DIR (`eval answers`' library), the tables chosen as before the rule (each side's first rows up to
            the budget), and every table's candidate rows of both sides written to OUT.json: per row its paper, the
            thought it came through, its paper's cosine, its best sentence's cosine (`relevance`) and score, its
            place in the table's order and in Search's fused ranking. `--no-floor`: every unvoted answer's thought
            is kept (as before issue #49 item 2), the memory the first measurement of item 3 ran on. `--shipped`:
            the tables chosen by the product's rule (`answers.no_displacing`), so the run's report is `eval
            thoughts-dev`'s figures under it.
  replay    `python -m copilot.eval.displace_eval replay OUT.json [dev|paraphrase|sibling]`: each rule of RULES
            applied to the captured candidates through the product's `answers.no_displacing`, offline; per rule, on
            the dev questions (relevant papers judged by hand; or the warm-up's paraphrases or siblings, judged by
            their dev question's papers): comparisons left (the two sides' papers differ), relevant papers lost and
            gained by the thought side, recall and precision of each side; over every table: thought rows within
            the budget, and those kept.

Memory is held fixed at what the capture's warm-up stored: a rule changes which thought side a warm-up user votes
for, so the figures of the rule finally chosen come from a run under it (`--shipped`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from copilot.eval.answers_eval import read_questions
from copilot.eval.thoughts_dev_eval import evaluate, read_warmups
from copilot.features import answers, chat, chat_thoughts
from copilot.methods import evidence
from copilot.services import Services

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
UNRANKED = 10_000


def _row_record(row: evidence.Row, fused: dict[str, int]) -> dict:
    source = row.source
    return {"paper": source.paper_id, "via": source.via, "paper_cosine": round(source.score, 5),
            "relevance": round(row.relevance, 5), "score": round(row.score, 5), "rank": source.rank,
            "named": source.named, "fused": fused.get(source.paper_id, UNRANKED)}


def capture(services: Services, dev: list[dict], warmups: list[dict], progress=lambda message: None,
            shipped: bool = False) -> dict:
    """The thoughts-dev run with every table's candidates recorded, the tables chosen as before the rule (each
    side's first rows), or by the product's rule (`shipped`: the run's figures are then the rule's own)."""
    tables: list[dict] = []
    local = threading.local()
    real_tables = answers.answer_tables

    def first_rows(rows: Sequence[evidence.Row], budget: int, strength=answers.row_score,
                   margin: float = answers.DISPLACE_MARGIN) -> list[int]:
        local.sides.append(([_row_record(row, local.fused) for row in rows], budget))
        return _shipped_rule(rows, budget, strength, margin) if shipped else list(range(min(budget, len(rows))))

    def recording(services_, question, sides, ranking=None, by_question=False, looks=None):
        if ranking is None:
            vector = services_.embedder.embed_cached([question])[0]
            ranking = answers.question_ranking(services_, question, vector)
        local.sides, local.fused = [], {pid: n for n, (pid, _) in enumerate(ranking)}
        made = real_tables(services_, question, sides, ranking, by_question, looks)
        kinds = ["thoughts" if any(item.kind == "thought" for item in items) else "papers" for items in sides]
        tables.append({"question": question, "sides": [{"kind": kind, "rows": rows, "budget": budget}
                                                        for kind, (rows, budget) in zip(kinds, local.sides)]})
        return made

    answers.no_displacing, chat.answer_tables = first_rows, recording
    try:
        report = evaluate(services, dev, warmups, progress)
    finally:
        answers.no_displacing, chat.answer_tables = _shipped_rule, real_tables
    return {"tables": tables, "report": report}


_shipped_rule = answers.no_displacing


def _rule_row(record: dict) -> evidence.Row:
    source = evidence.Source(record["paper"], "", (), "", "", record["paper_cosine"], record["named"],
                             record["rank"], record["via"])
    return evidence.Row(source, [], record["relevance"], record["score"])


def _fused(fused: dict[str, int]) -> Callable[[evidence.Row], float]:
    return lambda row: -float(fused[row.source.paper_id])


MEASURES: dict[str, Callable[[evidence.Row], float] | str] = {
    "paper cosine": lambda row: row.source.score,
    "relevance": lambda row: row.relevance,
    "row score": lambda row: row.score,
    "relevance + paper cosine": lambda row: row.relevance + row.source.score,
    "fused ranking place": "fused",
}
MARGINS = (0.0, 0.02, 0.04, 0.06, 0.08, 0.10)
# name → (measure, margin): a thought row keeps its place only when its measure is at least the pushed-out row's plus
# the margin; None: no rule (each side's first rows up to the budget, as before)
RULES: dict[str, tuple[Callable[[evidence.Row], float] | str, float] | None] = {"first rows (before)": None}
RULES.update((f"{name}, margin {margin:.2f}", (measure, margin)) for name, measure in MEASURES.items()
             for margin in (MARGINS if measure != "fused" else (0.0,)))


def choose(side: dict, rule) -> list[dict]:
    """The rows a side shows under `rule`, through the product's `no_displacing`."""
    rows, budget = side["rows"], side["budget"]
    if rule is None:
        return rows[:budget]
    measure, margin = rule
    strength = _fused({r["paper"]: r["fused"] for r in rows}) if measure == "fused" else measure
    return [rows[n] for n in answers.no_displacing([_rule_row(r) for r in rows], budget, strength, margin)]


def _side_figures(papers: list[str], relevant: set[str]) -> tuple[float, float | None]:
    hits = sum(p in relevant for p in papers)
    return hits / len(relevant), (hits / len(papers) if papers else None)


def _last_tables(tables: list[dict]) -> dict[str, dict]:
    """Each question's tables as shown last (a turn whose papers were read meanwhile builds them again)."""
    return {t["question"]: t for t in tables}


def _replay_one(table: dict, rule, relevant: set[str] | None) -> dict:
    sides = {side["kind"]: side for side in table["sides"]}
    thoughts = sides.get("thoughts")
    shown = {kind: [r["paper"] for r in choose(side, rule)] for kind, side in sides.items()}
    within = [r for r in thoughts["rows"][:thoughts["budget"]] if r["via"]] if thoughts else []
    kept = [p for p in shown.get("thoughts", []) if p in {r["paper"] for r in within}]
    out: dict[str, object] = {"thought_rows_within": len(within), "thought_rows_kept": len(kept),
           "compared": "papers" in shown and "thoughts" in shown and shown["papers"] != shown["thoughts"]}
    if relevant is not None:
        papers = shown.get("papers", shown.get("thoughts", []))
        memory = shown.get("thoughts", papers)
        out.update(papers=_side_figures(papers, relevant), thoughts=_side_figures(memory, relevant),
                   gained=sorted((set(memory) - set(papers)) & relevant),
                   lost=sorted((set(papers) - set(memory)) & relevant), added=sorted(set(memory) - set(papers)),
                   pushed=sorted(set(papers) - set(memory)))
    return out


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None


def replay(captured: dict, rules: dict = RULES, group: str = "dev") -> dict:
    """Per rule, the figures of one group of questions ("dev", or the warm-up's "paraphrase" or "sibling" ones,
    judged by their dev question's papers) and every table's thought rows kept, from the captured candidates."""
    gold = [set(r["relevant"]) for r in captured["dev"]]
    asked = [(r["question"], gold[n]) for n, r in enumerate(captured["dev"])] if group == "dev" else [
        (w["question"], gold[w["for"]]) for w in captured["report"]["warmup"] if w["kind"] == group]
    tables = _last_tables(captured["tables"])
    found = {}
    for name, rule in rules.items():
        every = [_replay_one(t, rule, None) for t in captured["tables"]]
        per = {q: _replay_one(tables[q], rule, relevant) for q, relevant in asked if q in tables}
        compared = [r for r in per.values() if r["compared"]]
        found[name] = {
            "tables": len(every), "tables_with_thought_row": sum(bool(r["thought_rows_within"]) for r in every),
            "thought_rows_within": sum(r["thought_rows_within"] for r in every),
            "thought_rows_kept": sum(r["thought_rows_kept"] for r in every),
            "dev_questions": len(per), "comparisons": len(compared),
            "relevant_lost": sum(len(r["lost"]) for r in compared),
            "relevant_gained": sum(len(r["gained"]) for r in compared),
            "papers_recall": _mean(r["papers"][0] for r in per.values()),
            "thoughts_recall": _mean(r["thoughts"][0] for r in per.values()),
            "papers_precision": _mean(r["papers"][1] for r in per.values()),
            "thoughts_precision": _mean(r["thoughts"][1] for r in per.values()),
            "adds_relevant_share": _mean(bool(r["gained"]) for r in compared) if compared else None,
            "loses_relevant_share": _mean(bool(r["lost"]) for r in compared) if compared else None,
            "comparisons_detail": {q: {k: r[k] for k in ("added", "pushed", "gained", "lost")}
                                   for q, r in per.items() if r["compared"]}}
    return found


def markdown(found: dict) -> str:
    keys = ["comparisons", "relevant_lost", "relevant_gained", "papers_recall", "thoughts_recall",
            "papers_precision", "thoughts_precision", "adds_relevant_share", "loses_relevant_share",
            "tables_with_thought_row", "thought_rows_within", "thought_rows_kept"]
    lines = ["| rule | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    lines += [f"| {name} | " + " | ".join(str(f[k]) for k in keys) + " |" for name, f in found.items()]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["replay"] and len(argv) in (2, 3):
        found = replay(json.loads(Path(argv[1]).read_text(encoding="utf-8")), group=(argv[2:] or ["dev"])[0])
        print(markdown(found))
        print(json.dumps({name: f["comparisons_detail"] for name, f in found.items()}, indent=1))
        return 0
    if argv[:1] != ["capture"] or len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    from copilot.config import load_settings

    if "--no-floor" in argv:
        chat_thoughts.UNVOTED_FLOOR = 0.0
    services = Services(load_settings().model_copy(update={"data_dir": Path(argv[1])}))
    dev = read_questions(DATA / "answers-dev.jsonl")
    started = time.monotonic()
    captured = capture(services, dev, read_warmups(DATA / "thoughts-warmup.jsonl", len(dev)),
                       progress=lambda message: print(message, file=sys.stderr, flush=True),
                       shipped="--shipped" in argv)
    captured.update(dev=dev, meta={"seconds": round(time.monotonic() - started, 1), "no_floor": "--no-floor" in argv,
                                   "shipped": "--shipped" in argv,
                                   "load_avg": [round(x, 2) for x in os.getloadavg()]})
    Path(argv[2]).write_text(json.dumps(captured), encoding="utf-8")
    print(markdown(replay(captured)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
