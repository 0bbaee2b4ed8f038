"""The evidence table as text (methods.evidence writes it): its lines, how to read them back, how to check a
quote, and the table as downloads. Nothing here imports methods.quotes, which reads tables through `is_table`.

A table is an intro line, then per row a header line — `[label] title · first authors (et al.) · date ·
arXiv:id` — and the row's quote on the next line inside quotation marks; rows of a group follow a line
`Group: “phrase”`. A quote's parts are verbatim text of the one paper, joined by "…" where text was left out.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

OPEN_QUOTE, CLOSE_QUOTE = "\u201c", "\u201d"
ELLIPSIS = "\u2026"

TABLE_INTRO = "Evidence from {count} paper{s} of the library, most relevant first:"
TEXTBOOK_LINE = ("The library's abstracts report research; they do not teach textbook material. Papers whose "
                 "abstracts bear on the question:")
GROUP_PREFIX = "Group: "
_ARXIV_TAIL = " \u00b7 arXiv:"


_ROW = re.compile(rf"^\[(?P<label>[^\[\]\n]{{1,40}})\] (?P<title>[^\n]*?) \u00b7 (?P<byline>[^\n]*?)"
                  rf"{re.escape(_ARXIV_TAIL)}(?P<id>[^\s]+)\n{OPEN_QUOTE}(?P<quote>[^\n]*){CLOSE_QUOTE}$",
                  re.M)


@dataclass(frozen=True)
class ShownRow:
    label: str
    title: str
    byline: str
    paper_id: str
    quote: str
    group: str = ""


def parse_table(text: str) -> list[ShownRow]:
    """The rows of an answer made by `render_table` (empty for any other text)."""
    rows, group = [], ""
    for line_match in re.finditer(rf"^{GROUP_PREFIX}{OPEN_QUOTE}(?P<g>[^\n]*){CLOSE_QUOTE}$|"
                                  rf"{_ROW.pattern}", text or "", re.M):
        if line_match.group("g") is not None:
            group = line_match.group("g")
            continue
        rows.append(ShownRow(line_match.group("label"), line_match.group("title"), line_match.group("byline"),
                             line_match.group("id"), line_match.group("quote"), group))
    return rows


def is_table(text: str) -> bool:
    """Whether an answer is an evidence table and nothing else: its intro line, group headings and rows."""
    text = (text or "").strip()
    first, _, rest = text.partition("\n")
    if not _INTRO.fullmatch(first):
        return False
    left = re.sub(rf"^{GROUP_PREFIX}{OPEN_QUOTE}[^\n]*{CLOSE_QUOTE}$", "", _ROW.sub("", rest), flags=re.M)
    return bool(parse_table(text)) and not left.strip()


_INTRO = re.compile("^(?:" + re.escape(TABLE_INTRO).replace(re.escape("{count}"), "[0-9]+")
                    .replace(re.escape("{s}"), "s?") + "|" + re.escape(TEXTBOOK_LINE) + ")$", re.M)


def split_table(text: str) -> tuple[str, str]:
    """(the text before an evidence table, the table): a writing profile's synthesis and the table under it.
    ("", text) for a table alone; (text, "") for text without one."""
    found = _INTRO.search(text or "")
    if found is None:
        return text or "", ""
    return text[:found.start()].rstrip(), text[found.start():]


def quote_parts(quote: str) -> list[str]:
    """The verbatim parts of a shown quote: the text between its "…" marks."""
    return [part.strip() for part in quote.split(ELLIPSIS) if part.strip()]


def is_verbatim(quote: str, source_text: str) -> bool:
    """Whether every part of a quote is a substring of the one source text, in order (whitespace normalised)."""
    text = " ".join((source_text or "").split())
    at = 0
    for part in quote_parts(quote):
        found = text.find(" ".join(part.split()), at)
        if found < 0:
            return False
        at = found + len(part)
    return bool(quote_parts(quote))


# --- downloads --------------------------------------------------------------------------------------------------
def table_csv(question: str, rows: Sequence[ShownRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["question", "rank", "group", "title", "authors_date", "arxiv_id", "url", "quote"])
    for rank, row in enumerate(rows, 1):
        writer.writerow([question, rank, row.group, row.title, row.byline, row.paper_id,
                         f"https://arxiv.org/abs/{row.paper_id}", row.quote])
    return out.getvalue()


def table_markdown(question: str, rows: Sequence[ShownRow]) -> str:
    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = [f"# {cell(question)}", "", "| # | Paper | What it does or finds |", "|---|---|---|"]
    for rank, row in enumerate(rows, 1):
        group = f"*{cell(row.group)}* · " if row.group else ""
        paper = f"[{cell(row.title)}](https://arxiv.org/abs/{row.paper_id}) — {cell(row.byline)}"
        lines.append(f"| {rank} | {group}{paper} | \u201c{cell(row.quote)}\u201d |")
    return "\n".join(lines) + "\n"
