"""Do Chat's answers answer? (issue #39, item 6) `python -m copilot eval answers`.

The library: the first N papers (default 2,000) of the corpus, in file order (as `bench --parts answers`), plus the
gold papers of the paper questions. Each question goes through the product's own path: Chat's retrieval
(`Chat.prepare`, papers-only side) and the answer the model profile gives (`features.answers.stream_reply`), with
the output checks. No thought is made, so every question meets the same library.

From the shown answer, `answer_rows` takes the (paper id, quoted sentence) pairs: an evidence table's rows as the
table record holds them; in any other answer, each quote in curly quotation
marks belongs to the source its line names — a label `[n]` of the retrieved items or an arXiv id or link — or to
the last source named on an earlier line (a paper's heading above its quotes); a line that names no source and
opens with `#` or bold (a group heading, even inside a table row) quotes none. This reads the three-quote answer and a
table of papers alike. A row is a paper quoted. Per question:

  recall          relevant papers quoted / relevant papers (judged by hand, tests/data/answers-dev.jsonl)
  recall@page     relevant papers quoted / min(relevant papers, PAGE): a page shows at most PAGE rows
  precision       quoted papers that are relevant / quoted papers (None when nothing is quoted)
  background      share of quotes that are a background sentence (methods.sentence_roles) or the bare title (also
                  apart: bare titles); and share of rows (papers) with at least one such quote
  retrieved       relevant papers among the retrieved items (what the answer could have quoted)

Paper questions (tests/data/slim-dev.jsonl rows with a gold paper): whether the key sentence (the reference) is
quoted, over all and over those whose gold paper was retrieved (`answer_figures.quotes_key`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from copilot.eval.answer_figures import quotes_key
from copilot.eval.report_files import json_text, write_files
from copilot.features.answers import answer_tables, stream_reply, with_table
from copilot.features.chat import Chat
from copilot.features.library import ingestor
from copilot.features.signin import Writer
from copilot.methods import quotes, sentence_roles
from copilot.methods.thought_retriever import check_answer
from copilot.records import ARXIV_ID_PATTERN, Evidence
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row
from copilot.store.chat_log import RAW
from copilot.table import EvidenceTable

PAGE = 8
_LABEL = re.compile(r"\[(\d{1,3})\]")
_ARXIV = re.compile(rf"(?:arxiv\.org/(?:abs|pdf)/|arxiv:\s*|\[)({ARXIV_ID_PATTERN})", re.I)
_HEADING = re.compile(r"^[\s|]*(?:#|\*\*|__)")
_QUOTE = re.compile(f"{quotes.OPEN_QUOTE}([^{quotes.CLOSE_QUOTE}]*){quotes.CLOSE_QUOTE}")


class AnswersDataError(ValueError):
    pass


@dataclass(frozen=True)
class Row:
    """One quote of an answer and the source it belongs to (a paper's row of a table may hold several)."""
    paper: str | None          # arXiv id (or thought id) of the quoted source; None when the line names none
    quote: str


def _source_named(line: str, items: Sequence[Evidence]) -> str | None:
    """The source a line of an answer names first: a retrieved item's label, or an arXiv id / link."""
    found = []
    for match in _LABEL.finditer(line):
        number = int(match.group(1))
        if 1 <= number <= len(items):
            found.append((match.start(), items[number - 1].id))
    found += [(m.start(), m.group(1)) for m in _ARXIV.finditer(line)]
    return min(found)[1] if found else None


def answer_rows(text: str, items: Sequence[Evidence], table: EvidenceTable | None = None) -> list[Row]:
    """Every (source, quote) of an answer (see the module doc); none for the no-answer line. `table`: the evidence
    table the answer shows, read as it is (a row reached through a thought included)."""
    if quotes.is_no_answer(text):
        return []
    if table:
        return [Row(row.paper_id, quote.shown) for row in table.rows for quote in row.quotes]
    rows: list[Row] = []
    current: str | None = None
    for line in (text or "").splitlines():
        named = _source_named(line, items)
        if not named and _HEADING.match(line):     # a group's heading (a phrase of its rows) quotes no source
            current = None
            continue
        if named:
            current = named
        for quoted in _QUOTE.findall(line):
            rows.append(Row(current, " ".join(quoted.split())))
    return rows


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", (text or "").lower())


def quote_positions(quoted: Sequence[Row], abstracts: dict[str, tuple[str, str]]) -> list[tuple[bool, float]]:
    """(is the bare title, relative position in its abstract) per quote; a quote not found in its paper's abstract
    is placed mid-abstract."""
    found = []
    for row in quoted:
        title, abstract = abstracts.get(row.paper or "", ("", ""))
        if _words(row.quote) and _words(row.quote) == _words(title):
            found.append((True, 0.0))
            continue
        sentences = quotes.split_sentences(abstract)
        key = " ".join(_words(row.quote))
        spots = [n for n, s in enumerate(sentences) if key and key in " ".join(_words(s))]
        position = 0.5 if not spots else (spots[0] / (len(sentences) - 1) if len(sentences) > 1 else 0.0)
        found.append((False, position))
    return found


@dataclass
class Figures:
    rows: list[Row] = field(default_factory=list)
    background: list[bool] = field(default_factory=list)     # per quote: background sentence or bare title
    titles: list[bool] = field(default_factory=list)         # per quote: the bare title

    def flagged_papers(self) -> int:
        """Papers with at least one background or bare-title quote."""
        return len({row.paper for row, flagged in zip(self.rows, self.background) if flagged})


def judge_rows(services: Services, rows: list[Row]) -> Figures:
    """Each quote's role by the sentence-role classifier (bare titles count as background)."""
    papers = {p.id: (p.title, p.abstract) for p in services.store.get_papers(sorted({r.paper for r in rows
                                                                                    if r.paper}))}
    placed = quote_positions(rows, papers)
    texts = [row.quote for row in rows]
    roles = sentence_roles.classify(texts, positions=[p for _, p in placed], embed=services.embedder.embed)
    return Figures(rows, [title or sentence_roles.is_background(role) for (title, _), role in zip(placed, roles)],
                   [title for title, _ in placed])


def ask(services: Services, chat: Chat, question: str,
        writer: Writer | None = None) -> tuple[str, EvidenceTable, list[Evidence], float]:
    """The shown papers-only answer to `question` (retrieval as Chat does it, the answer the profile gives, the
    output checks on a model's words), its table, its retrieved items and the seconds it took. `writer`: a signed-in
    visitor's model writes it (features.signin); its failure (a sentence) is raised."""
    started = time.perf_counter()
    turn = chat.prepare(question, "eval-answers", writer=writer)
    answer = next(a for a in turn.answers if a.kind == RAW)
    table = answer_tables(services, turn.question, [answer.sources], turn.ranking)[0]
    text = "".join(stream_reply(services, turn.question, answer.sources, table, writes=turn.writes, writer=writer))
    if turn.writes and text.strip():
        text = with_table(check_answer(text, answer.sources).text, table)
    return text.strip(), table, list(answer.sources), time.perf_counter() - started


def read_questions(path: Path, limit: int | None = None, key: str = "relevant") -> list[dict]:
    if not path.is_file():
        raise AnswersDataError(f"no question file at {path}")
    rows = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                    assert isinstance(row["question"], str) and isinstance(row[key], list)
                except (ValueError, KeyError, AssertionError):
                    raise AnswersDataError(f"{path}:{number} needs {{\"question\": ..., \"{key}\": [...]}}") from None
                rows.append(row)
    return rows[:limit]


def library_name(count: int, gold: Sequence[str]) -> str:
    digest = hashlib.sha1(" ".join(sorted(gold)).encode("utf-8")).hexdigest()[:8]
    return f"answers-store-first{count}-{digest}"


def prepare_library(services: Services, corpus: Path, count: int, gold: Sequence[str]) -> int:
    """The corpus's first `count` papers and the `gold` ones, imported through the product's ingestion (papers
    already stored are not embedded again). Returns the papers stored."""
    wanted, rows = set(gold), []
    with corpus.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            row = json.loads(line)
            if number < count or row["id"] in wanted:
                rows.append(row)
    stored = {p.id for p in services.store.get_papers([r["id"] for r in rows])}
    todo = [paper_from_row(r) for r in rows if r["id"] not in stored]
    if todo:
        ingestor(services).run("eval answers", todo)
    return services.store.count("paper")


def survey_row(services: Services, chat: Chat, row: dict, writer: Writer | None = None) -> dict:
    text, table, items, seconds = ask(services, chat, row["question"], writer)
    figures = judge_rows(services, answer_rows(text, items, table))
    relevant = set(row["relevant"])
    papers = list(dict.fromkeys(r.paper for r in figures.rows))
    hits = [p for p in papers if p in relevant]
    return {"question": row["question"], "relevant": len(relevant), "rows": len(papers), "quotes": len(figures.rows),
            "relevant_quoted": len(hits), "recall": round(len(hits) / len(relevant), 4),
            "recall_at_page": round(len(hits) / min(len(relevant), PAGE), 4),
            "precision": round(len(hits) / len(papers), 4) if papers else None,
            "background_quotes": sum(figures.background), "title_quotes": sum(figures.titles),
            "background_rows": figures.flagged_papers(),
            "relevant_retrieved": sum(1 for item in items if item.id in relevant), "retrieved": len(items),
            "no_answer": quotes.is_no_answer(text), "seconds": round(seconds, 3), "answer": text,
            "quoted": [{"paper": r.paper, "quote": r.quote, "background_or_title": b}
                       for r, b in zip(figures.rows, figures.background)]}


def paper_row(services: Services, chat: Chat, row: dict, writer: Writer | None = None) -> dict:
    text, table, items, seconds = ask(services, chat, row["question"], writer)
    figures = judge_rows(services, answer_rows(text, items, table))
    gold = set(row["gold"])
    return {"question": row["question"], "gold_retrieved": any(item.id in gold for item in items),
            "gold_quoted": any(r.paper in gold for r in figures.rows), "key_quoted": quotes_key(text, row["answer"]),
            "quotes": len(figures.rows), "background_quotes": sum(figures.background),
            "seconds": round(seconds, 3), "answer": text}


def _mean(values: Sequence) -> float | None:
    values = [float(v) for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None


def _pct(values: Sequence[float], q: float) -> float | None:
    import numpy as np

    return round(float(np.percentile(values, q)), 3) if values else None


def summarise(survey: list[dict], papers: list[dict]) -> dict:
    quotes_seen = sum(r["quotes"] for r in survey)
    seconds = [r["seconds"] for r in survey + papers]
    return {
        "survey_questions": len(survey),
        "recall": _mean([r["recall"] for r in survey]), "recall_at_page": _mean([r["recall_at_page"] for r in survey]),
        "precision": _mean([r["precision"] for r in survey]),
        "rows_per_answer": _mean([r["rows"] for r in survey]),
        "background_or_title_share": round(sum(r["background_quotes"] for r in survey) / quotes_seen, 4)
        if quotes_seen else None,
        "bare_title_share": round(sum(r["title_quotes"] for r in survey) / quotes_seen, 4) if quotes_seen else None,
        "background_or_title_rows_share": round(sum(r["background_rows"] for r in survey)
                                                / max(sum(r["rows"] for r in survey), 1), 4),
        "retrieved_recall": _mean([r["relevant_retrieved"] / r["relevant"] for r in survey]),
        "no_answer_share": _mean([r["no_answer"] for r in survey]),
        "paper_questions": len(papers),
        "key_quoted": _mean([r["key_quoted"] for r in papers]),
        "key_quoted_when_retrieved": _mean([r["key_quoted"] for r in papers if r["gold_retrieved"]]),
        "gold_retrieved": _mean([r["gold_retrieved"] for r in papers]),
        "paper_background_or_title_share": round(sum(r["background_quotes"] for r in papers)
                                                 / max(sum(r["quotes"] for r in papers), 1), 4) if papers else None,
        "answer_s_p50": _pct(seconds, 50), "answer_s_p95": _pct(seconds, 95),
    }


def evaluate(services: Services, survey: list[dict], papers: list[dict], progress=lambda message: None,
             writer: Writer | None = None) -> dict:
    """Every question through the product's path; the figures of the module doc, per question and overall.
    `writer`: the answers are written by a signed-in visitor's model, as on the page (`--hf-token-env`)."""
    chat = Chat(services)
    services.embedder.embed_one("warm up")      # the model loads once, outside the timings
    survey_rows, paper_rows = [], []
    for n, row in enumerate(survey, 1):
        survey_rows.append(survey_row(services, chat, row, writer))
        progress(f"[{n}/{len(survey)}] recall {survey_rows[-1]['recall']} precision {survey_rows[-1]['precision']}: "
                 f"{row['question'][:70]}")
    for n, row in enumerate(papers, 1):
        paper_rows.append(paper_row(services, chat, row, writer))
        progress(f"[paper {n}/{len(papers)}] key quoted {paper_rows[-1]['key_quoted']}")
    return {"summary": summarise(survey_rows, paper_rows), "survey": survey_rows, "papers": paper_rows,
            "meta": {"model_profile": services.model_profile.name, "written_by": writer.info if writer else None,
                     "page": PAGE,
                     "papers_in_library": services.store.count("paper"), "top_k": services.settings.top_k,
                     "load_avg": [round(x, 2) for x in os.getloadavg()]}}


SUMMARY_ROWS = [
    ("survey questions", "survey_questions"), ("recall of relevant papers", "recall"),
    (f"recall@page (of min(relevant, {PAGE}))", "recall_at_page"), ("precision of rows", "precision"),
    ("rows (papers quoted) per answer", "rows_per_answer"),
    ("quotes that are background or a bare title", "background_or_title_share"),
    ("of which bare titles (share of all quotes)", "bare_title_share"),
    ("rows with a background or bare-title quote", "background_or_title_rows_share"),
    ("relevant papers retrieved (the ceiling)", "retrieved_recall"), ("no-answer share", "no_answer_share"),
    ("paper questions", "paper_questions"), ("key sentence quoted", "key_quoted"),
    ("key sentence quoted, gold retrieved", "key_quoted_when_retrieved"), ("gold paper retrieved", "gold_retrieved"),
    ("paper answers: background or title quotes", "paper_background_or_title_share"),
    ("answer s p50", "answer_s_p50"), ("answer s p95", "answer_s_p95"),
]


def markdown(report: dict) -> str:
    s, meta = report["summary"], report["meta"]
    written = f", written by {meta['written_by']['model']}" if meta.get("written_by") else ""
    lines = [f"Answers on {meta['papers_in_library']} papers, profile {meta['model_profile']}{written}, load "
             f"{', '.join(str(x) for x in meta['load_avg'])}", "", "| figure | value |", "|---|---|"]
    lines += [f"| {label} | {s.get(key)} |" for label, key in SUMMARY_ROWS]
    lines += ["", "| question | relevant | rows | recall | precision | background quotes | retrieved relevant |",
              "|---|---|---|---|---|---|---|"]
    for r in report["survey"]:
        lines.append(f"| {r['question']} | {r['relevant']} | {r['rows']} | {r['recall']} | {r['precision']} | "
                     f"{r['background_quotes']}/{r['quotes']} | {r['relevant_retrieved']}/{r['retrieved']} |")
    return "\n".join(lines) + "\n"


def write_outputs(report: dict, out_dir: Path, name: str) -> dict[str, Path]:
    return write_files(out_dir, {"json": (f"{name}.json", json_text(report)), "md": (f"{name}.md", markdown(report))})
