"""`python -m copilot bench --parts hostile [--json]`: nothing a user or a paper writes stalls the server (issue #47).

Hostile inputs (the issue's and more: long words, 10,000 characters of abbreviations and initials, a 4,000-character
question, a 2 MB abstract) go through every path a question or a paper's text reaches: the text functions themselves
(`is_textbook`, `split_sentences`), a Chat turn (ask), Search, Related, Trends and an upload, on a small real library
(the first papers of the shared corpus plus hostile rows). Each call is timed while a ticker thread ticks every 50 ms;
the ticker's longest delay is how long the call held the interpreter lock, i.e. froze every other user's request.

Targets: a text function ≤ 50 ms per call; any call's ticker stall ≤ 100 ms; a path's hostile call (ask, Search,
Related, Trends, upload) within 2 s of the same path's ordinary call. Every regular expression of the product is also
swept with adversarial texts (bench_hostile_regex); those whose time grows faster than their input are listed.

Each call runs in a worker process with a time limit, so a stall costs the limit, not half an hour: a call over it is
reported "over N s" and its worker replaced.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from copilot.eval.bench_hostile_regex import FLAG_EXPONENT, FLAG_MS, LARGE, LIMIT_CHARS, SMALL

ROOT = Path(__file__).resolve().parents[2]
PAPERS_JSONL = ROOT.parent / "shared" / "data" / "arxiv-cs-2025-2026" / "papers.jsonl"
TICK_S = 0.05
CALL_TARGET_MS, STALL_TARGET_MS, PATH_SLACK_S = 50, 100, 2.0
NAMED = "2503.14421"                                # a corpus paper: naming it guarantees an evidence row
HOSTILE_DAY = "2025-03-24"                          # the hostile rows' date: the last day of the first 300 papers

# --- inputs ------------------------------------------------------------------------------------------------
INITIALS = "A. " * 3300                                                   # the abstract: 9,900 characters
ABBREVIATIONS = ("e.g. J. R. R. Tolkien et al. and i.e. Fig. 3 vs. Sec. 2 cf. Eq. 4 approx. Dr. S. T. Ng Jr. "
                 * 120)[:10_000]
LONG_WORD = "x" * 10_000
LONG_WORDS = ("x" * 499 + " ") * 20
QUESTION_LONG_WORD = f"What is {'x' * 900} in {NAMED}?"                   # the question
QUESTION_4000 = f"What is {'x' * (4000 - 13 - len(NAMED))} in {NAMED}?"
QUESTION_ABBREVIATIONS = f"What does {NAMED} say about " + ABBREVIATIONS[:3900] + "?"
ABSTRACT_2MB = "Tokens. " * 262_144

HOSTILE_ROWS = {                      # id → (title, abstract); dated HOSTILE_DAY, cs.CL
    "2503.99001": ("Initials", INITIALS),
    "2503.99002": ("Abbreviations and initials", ABBREVIATIONS),
    "2503.99003": ("A long word", LONG_WORD[:9_990] + " ends."),
    "2503.99004": ("Long words", LONG_WORDS),
    "2503.99005": ("x" * 999, "A title that is one long word. " * 10),
    "2503.99006": ("Two megabytes", ABSTRACT_2MB),                        # refused: over the abstract's limit
}
ORDINARY_QUESTION = "How do vision-language models choose which visual tokens to keep?"
ORDINARY_NAMED = f"What does {NAMED} propose?"


def hostile_rows() -> list[dict]:
    return [{"id": pid, "title": title, "summary": abstract, "authors": ["Ann Hostile"], "categories": ["cs.CL"],
             "listing_date": HOSTILE_DAY} for pid, (title, abstract) in HOSTILE_ROWS.items()]


def ordinary_rows(count: int) -> list[dict]:
    with PAPERS_JSONL.open(encoding="utf-8") as lines:
        return [json.loads(line) for _, line in zip(range(count), lines)]


# --- cases -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    path: str                 # text | ask | search | related | trends | upload | regex
    what: str                 # the input, for the table
    call: Callable            # (context) -> str: a note (what came back)
    baseline: str = ""        # the ordinary case of the same path


def _text_cases() -> list[Case]:
    from copilot.methods.evidence import is_textbook
    from copilot.methods.quotes import split_sentences

    def text(fn, value):
        return lambda ctx: f"{fn(value) if fn is is_textbook else len(fn(value))}"
    return [
        Case("textbook_long_word", "text", "is_textbook: 'What is ' + 900 × x + ' in <id>?' (issue)",
             text(is_textbook, QUESTION_LONG_WORD)),
        Case("textbook_4000", "text", "is_textbook: the same at 4,000 characters", text(is_textbook, QUESTION_4000)),
        Case("split_initials", "text", "split_sentences: 'A. ' × 3,300 (issue)", text(split_sentences, INITIALS)),
        Case("split_abbreviations", "text", "split_sentences: 10,000 characters of abbreviations and initials",
             text(split_sentences, ABBREVIATIONS)),
        Case("split_long_word", "text", "split_sentences: one 10,000-character word", text(split_sentences, LONG_WORD)),
        Case("split_long_words", "text", "split_sentences: twenty 499-character words",
             text(split_sentences, LONG_WORDS)),
    ]


def _ask(question: str) -> Callable:
    def call(ctx) -> str:
        record = ctx["chat"].ask(question, "bench-hostile", wait=False)
        return f"{len(record['answers'])} answers" + (f"; {record['notice'][:60]}" if record.get("notice") else "")
    return call


def _search(query: str) -> Callable:
    def call(ctx) -> str:
        from copilot.errors import UserError
        from copilot.features.search import search_papers
        try:
            return f"{len(search_papers(ctx['services'], query).hits)} hits"
        except UserError as error:
            return f"refused: {str(error)[:60]}"
    return call


def _related(reference: str = "", abstract: str = "") -> Callable:
    def call(ctx) -> str:
        from copilot.features.related import find_related, parse_query
        query = parse_query(ctx["services"], reference, "Pasted" if abstract else "", abstract)
        return f"{len(find_related(ctx['services'], query).results)} related"
    return call


def _trends(last_day: str) -> Callable:
    def call(ctx) -> str:
        from copilot.features.trends import TrendsOptions, run_trends
        opts = TrendsOptions(summarized_topics=0, ideas=0, use_cache=False, store_thoughts=False)
        report = run_trends(ctx["services"], date(2025, 3, 18), date.fromisoformat(last_day), None, "bench", opts)
        return f"{report.papers} papers, {len(report.topics)} topics"
    return call


def _upload(rows: Callable[[], list[dict]]) -> Callable:
    def call(ctx) -> str:
        from copilot.features.library import import_upload
        counts = import_upload(ctx["fresh"](), ctx["file"](rows()))
        return f"{counts.added} added, {counts.skipped} refused"
    return call


def _path_cases() -> list[Case]:
    named = {pid: f"What does {pid} find?" for pid in HOSTILE_ROWS}
    return [
        Case("ask_ordinary", "ask", f"ordinary: {ORDINARY_QUESTION[:40]}…", _ask(ORDINARY_QUESTION)),
        Case("ask_named", "ask", f"ordinary, naming a paper: {ORDINARY_NAMED}", _ask(ORDINARY_NAMED)),
        Case("ask_long_word", "ask", "question: 'What is ' + 900 × x + ' in <id>?' (issue)", _ask(QUESTION_LONG_WORD),
             "ask_named"),
        Case("ask_4000", "ask", "question: the same at 4,000 characters", _ask(QUESTION_4000), "ask_named"),
        Case("ask_abbreviations", "ask", "question: 3,900 characters of abbreviations, naming a paper",
             _ask(QUESTION_ABBREVIATIONS), "ask_named"),
        Case("ask_initials_paper", "ask", "naming the paper whose abstract is 'A. ' × 3,300",
             _ask(named["2503.99001"]), "ask_named"),
        Case("ask_abbreviations_paper", "ask", "naming the paper of 10,000 characters of abbreviations",
             _ask(named["2503.99002"]), "ask_named"),
        Case("ask_long_word_paper", "ask", "naming the paper of one 9,990-character word", _ask(named["2503.99003"]),
             "ask_named"),
        Case("search_ordinary", "search", "ordinary query", _search(ORDINARY_QUESTION)),
        Case("search_long_word", "search", "query: 490 × x (Search takes 500 characters)", _search("x" * 490),
             "search_ordinary"),
        Case("search_question", "search", "query: 'What is ' + x … + ' in <id>?' at 500 characters",
             _search(f"What is {'x' * (500 - 13 - len(NAMED))} in {NAMED}?"), "search_ordinary"),
        Case("search_abbreviations", "search", "query: 490 characters of abbreviations and initials",
             _search(ABBREVIATIONS[:490]), "search_ordinary"),
        Case("search_4000", "search", "query: the 4,000-character question (refused)", _search(QUESTION_4000),
             "search_ordinary"),
        Case("related_ordinary", "related", f"ordinary: by id {NAMED}", _related(NAMED)),
        Case("related_initials_paper", "related", "by id: the 'A. ' × 3,300 paper", _related("2503.99001"),
             "related_ordinary"),
        Case("related_abbreviations_paper", "related", "by id: the abbreviations paper", _related("2503.99002"),
             "related_ordinary"),
        Case("related_pasted_2mb", "related", "pasted: a 2 MB abstract", _related(abstract=ABSTRACT_2MB),
             "related_ordinary"),
        Case("related_pasted_initials", "related", "pasted: 'A. ' × 3,300", _related(abstract=INITIALS),
             "related_ordinary"),
        Case("trends_ordinary", "trends", "ordinary: 2025-03-18 … 03-23 (no hostile rows)", _trends("2025-03-23")),
        Case("trends_hostile", "trends", "2025-03-18 … 03-24 (with the hostile rows)", _trends(HOSTILE_DAY),
             "trends_ordinary"),
        Case("upload_ordinary", "upload", "ordinary: six corpus rows", _upload(lambda: ordinary_rows(306)[300:])),
        Case("upload_hostile", "upload", "the six hostile rows (one 2 MB abstract)", _upload(hostile_rows),
             "upload_ordinary"),
    ]


def all_cases() -> dict[str, Case]:
    return {case.name: case for case in _text_cases() + _path_cases()}


# --- the worker: runs cases, one at a time, with the ticker -------------------------------------------------
class Ticker:
    """A thread that wakes every TICK_S; `worst` is its longest delay past that since `reset` (seconds)."""

    def __init__(self) -> None:
        self.worst = 0.0
        threading.Thread(target=self._tick, name="bench-ticker", daemon=True).start()

    def reset(self) -> None:
        self.worst = 0.0

    def _tick(self) -> None:
        while True:
            before = time.perf_counter()
            time.sleep(TICK_S)
            self.worst = max(self.worst, time.perf_counter() - before - TICK_S)


def _library_context(library: Path) -> dict:
    from copilot.config import load_settings
    from copilot.features.chat import chat_for
    from copilot.services import Services

    services = Services(load_settings(data_dir=library, scheduler=False))
    scratch = Path(tempfile.mkdtemp(prefix="hostile-", dir=library.parent))

    def fresh() -> Services:          # an empty library sharing the embedder: an upload's work, not its setup
        other = Services(load_settings(data_dir=Path(tempfile.mkdtemp(dir=scratch)), scheduler=False))
        other.embedder = services.embedder   # type: ignore[misc]
        other.store.count("paper")
        return other

    def file(rows: list[dict]) -> Path:
        path = Path(tempfile.mkstemp(suffix=".jsonl", dir=scratch)[1])
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        return path
    return {"services": services, "chat": chat_for(services), "fresh": fresh, "file": file}


def worker(group: str, library: str) -> None:
    """`python -m copilot.eval.bench_hostile worker GROUP LIBRARY`: reads case names (or `regex N`) from stdin,
    answers one JSON line each."""
    ticker = Ticker()
    cases = all_cases()
    context: dict = _library_context(Path(library)) if group == "library" else {}
    patterns: list = []
    if group == "regex":
        from copilot.eval.bench_hostile_regex import find_patterns
        patterns = find_patterns()
    print(json.dumps({"ready": [found["where"] for found in patterns]}), flush=True)
    for line in sys.stdin:
        name = line.strip()
        ticker.reset()
        started = time.perf_counter()
        if name.startswith("regex "):
            from copilot.eval.bench_hostile_regex import sweep_one
            found = patterns[int(name.split()[1])]
            note = {"where": found["where"], "name": found["name"], "pattern": found["pattern"].pattern[:120],
                    **sweep_one(found["pattern"])}
        else:
            note = cases[name].call(context)
        seconds = time.perf_counter() - started
        time.sleep(TICK_S * 1.5)                # the ticker wakes and records the stall, if there was one
        print(json.dumps({"seconds": seconds, "stall_ms": ticker.worst * 1000, "note": note},
                         default=str), flush=True)


def build_library(library: Path, papers: int) -> None:
    """`… build LIBRARY N`: the first N corpus papers and the hostile rows (the 2 MB one is refused), once."""
    from copilot.config import load_settings
    from copilot.features.library import import_snapshot
    from copilot.services import Services

    services = Services(load_settings(data_dir=library, scheduler=False))
    if services.store.count("paper") >= papers + len(HOSTILE_ROWS) - 1:
        return
    path = library / "hostile-library.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ordinary_rows(papers) + hostile_rows()),
                    encoding="utf-8")
    counts = import_snapshot(services, path)
    print(json.dumps(counts.as_dict()), file=sys.stderr)


# --- the runner: workers with a time limit per call ---------------------------------------------------------
READY_LIMIT_S = 240.0          # a worker's start: imports, the library, the regex patterns


class _Worker:
    def __init__(self, group: str, library: Path, log_path: Path) -> None:
        with log_path.open("a") as log_file:
            self.proc = subprocess.Popen([sys.executable, "-m", "copilot.eval.bench_hostile", "worker", group,
                                          str(library)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log_file, text=True, cwd=ROOT)
        self.warmed: set[str] = set()
        self.ready = self._read(READY_LIMIT_S)

    def call(self, line: str, limit: float) -> dict | None:
        """The worker's answer to `line`, or None when it did not come within `limit` seconds (or it died)."""
        try:
            self.proc.stdin.write(line + "\n")          # type: ignore[union-attr]
            self.proc.stdin.flush()                      # type: ignore[union-attr]
        except OSError:
            return None
        return self._read(limit)

    def _read(self, limit: float) -> dict | None:
        stdout = self.proc.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], limit)
        line = stdout.readline() if ready else ""
        return json.loads(line) if line else None

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _run_group(group: str, names: list[str], library: Path, limit: float, log_path: Path,
               log: Callable[[str], None]) -> dict[str, dict]:
    """Each case's answer, or {"over_s": limit}; a worker that overran is replaced for the next case."""
    cases, results = all_cases(), {}  # type: tuple[dict[str, Case], dict[str, dict]]
    worker: _Worker | None = None
    for name in names:
        if worker is None:
            worker = _Worker(group, library, log_path)
            if worker.ready is None:
                worker.stop()
                return {**results, **{n: {"error": f"the worker did not start (see {log_path})"}
                                      for n in names if n not in results}}
        case = cases[name]
        if group == "library" and case.path not in worker.warmed:     # first use of a path loads its parts: untimed
            worker.call(case.baseline or case.name, READY_LIMIT_S)
            worker.warmed.add(case.path)
        got = worker.call(name, limit)
        results[name] = got if got is not None else {"over_s": limit}
        log(f"{name}: " + (f"{got['seconds']:.3f} s, stall {got['stall_ms']:.0f} ms" if got else f"over {limit:g} s"))
        if got is None:
            worker.stop()
            worker = None
    if worker is not None:
        worker.stop()
    return results


def _sweep(library: Path, limit: float, log_path: Path, log: Callable[[str], None]) -> dict:
    worker = _Worker("regex", library, log_path)
    if worker.ready is None:
        worker.stop()
        return {"checked": 0, "flagged": [], "error": f"the sweep did not start (see {log_path})"}
    wheres = worker.ready["ready"]
    log(f"regex sweep: {len(wheres)} patterns")
    flagged: list[dict] = []
    for index, where in enumerate(wheres):
        got = worker.call(f"regex {index}", limit)
        if got is None:
            flagged.append({"where": where, "over_s": limit})
            worker.stop()
            worker = _Worker("regex", library, log_path)
            continue
        note = got["note"]
        if note["flagged"] or note["ms_at_limit"] > CALL_TARGET_MS or got["stall_ms"] > STALL_TARGET_MS:
            flagged.append({**note, "stall_ms": got["stall_ms"]})
    worker.stop()
    return {"checked": len(wheres), "flagged": flagged}


# --- the result --------------------------------------------------------------------------------------------
def _row(case: Case, got: dict, results: dict[str, dict]) -> dict:
    row = {"case": case.name, "path": case.path, "input": case.what, "seconds": got.get("seconds"),
           "stall_ms": got.get("stall_ms"), "note": got.get("note") or got.get("error", "")}
    if "over_s" in got:
        row.update(passed=False, target=f"over the {got['over_s']:g} s limit")
        return row
    if row["seconds"] is None:
        row.update(passed=False, target="failed")
        return row
    stall_ok = row["stall_ms"] <= STALL_TARGET_MS
    if case.path == "text":
        row.update(passed=stall_ok and row["seconds"] * 1000 <= CALL_TARGET_MS,
                   target=f"≤ {CALL_TARGET_MS} ms, stall ≤ {STALL_TARGET_MS} ms")
        return row
    base = results.get(case.baseline, {}).get("seconds") if case.baseline else None
    row["baseline_seconds"] = base
    within = base is None or row["seconds"] <= base + PATH_SLACK_S
    row.update(passed=stall_ok and within and not (case.baseline and base is None),
               target=(f"≤ {case.baseline} + {PATH_SLACK_S:g} s, stall ≤ {STALL_TARGET_MS} ms" if case.baseline
                       else f"the ordinary call; stall ≤ {STALL_TARGET_MS} ms"))
    return row


def run(data_dir: Path, call_limit: float = 8.0, papers: int = 300, only: list[str] | None = None,
        sweep: bool = True, log: Callable[[str], None] = print) -> dict:
    """The whole benchmark; the library and the worker log live under `data_dir`/bench."""
    started = time.perf_counter()
    out = data_dir / "bench"
    library = out / f"hostile-library-{papers}"
    library.mkdir(parents=True, exist_ok=True)
    log_path = out / "hostile-workers.log"
    result: dict = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": _machine(),
                    "call_limit_s": call_limit, "papers": papers,
                    "targets": {"text_call_ms": CALL_TARGET_MS, "stall_ms": STALL_TARGET_MS,
                                "path_slack_s": PATH_SLACK_S}}
    cases = all_cases()
    chosen = [name for name in cases if not only or any(name.startswith(prefix) for prefix in only)]
    for case in list(chosen):                      # a hostile case's ordinary one runs too
        if case in cases and cases[case].baseline and cases[case].baseline not in chosen:
            chosen.insert(chosen.index(case), cases[case].baseline)
    results: dict[str, dict] = {}
    text = [name for name in chosen if cases[name].path == "text"]
    if text:
        results.update(_run_group("text", text, library, call_limit, log_path, log))
    on_library = [name for name in chosen if cases[name].path != "text"]
    if on_library:
        log(f"library: {papers} corpus papers and the hostile rows")
        subprocess.run([sys.executable, "-m", "copilot.eval.bench_hostile", "build", str(library), str(papers)],
                       cwd=ROOT, check=True, timeout=1800, stdout=subprocess.DEVNULL)
        results.update(_run_group("library", on_library, library, call_limit, log_path, log))
    result["rows"] = [_row(cases[name], results[name], results) for name in chosen]
    result["regex"] = _sweep(library, call_limit, log_path, log) if sweep else {"checked": 0, "flagged": []}
    result["machine"]["load_avg_end"] = list(os.getloadavg())
    result["seconds"] = round(time.perf_counter() - started, 1)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for name in (f"hostile-{stamp}", "hostile-latest"):
        (out / f"{name}.json").write_text(json.dumps(result, indent=1))
        (out / f"{name}.md").write_text(to_markdown(result))
    return result


def _machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "")
    return {"cpus": os.cpu_count(), "cpu": cpu, "load_avg_start": list(os.getloadavg())}


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:,.0f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def to_markdown(result: dict) -> str:
    m = result["machine"]
    lines = [f"Hostile input {result['created']}: {m['cpus']} CPUs ({m['cpu']}), load average "
             f"{m['load_avg_start'][0]:.2f} at start, {m.get('load_avg_end', [0])[0]:.2f} at end; "
             f"{result['papers']} corpus papers + hostile rows; each call limited to {result['call_limit_s']:g} s; "
             f"{result.get('seconds', 0):.0f} s in all", "",
             "| path | input | time | ordinary | ticker stall | target | pass | what came back |",
             "|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        time_text = f"over {result['call_limit_s']:g} s" if row["target"].startswith("over") else _ms(row["seconds"])
        stall = "—" if row["stall_ms"] is None else f"{row['stall_ms']:,.0f} ms"
        lines.append(f"| {row['path']} | {row['input']} | {time_text} | {_ms(row.get('baseline_seconds'))} | "
                     f"{stall} | {row['target']} | {'pass' if row['passed'] else '**FAIL**'} | "
                     f"{str(row['note'])[:60]} |")
    sweep = result["regex"]
    if not sweep["checked"] and not sweep.get("error"):
        return "\n".join(lines) + "\n"
    lines += ["", f"Regex sweep: {sweep['checked']} patterns of the product, each on adversarial texts of "
              f"{SMALL:,} and {LARGE:,} characters; listed: time at {LARGE:,} ≥ {FLAG_MS:g} ms growing faster "
              f"than length^{FLAG_EXPONENT:g}, or more than {CALL_TARGET_MS} ms at {LIMIT_CHARS:,} characters "
              "(extrapolated) " + (f"— {sweep['error']}" if sweep.get("error") else ""), "",
              "| where | pattern | worst text | ms at 1,200 chars | growth exponent | ms at 10,000 (extrapolated) |",
              "|---|---|---|---|---|---|"]
    for item in sweep["flagged"]:
        if "over_s" in item:
            lines.append(f"| {item['where']} | — | — | over {item['over_s']:g} s | — | — |")
            continue
        pattern = item["pattern"][:50].replace("|", "\\|")
        lines.append(f"| {item['where']} {item['name']} | `{pattern}` | {item['text'][:40]} | {item['ms']:,.1f} | "
                     f"{item['exponent']:.1f} | {item['ms_at_limit']:,.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "build":
        build_library(Path(sys.argv[2]), int(sys.argv[3]))
