"""The evidence table's text: the lines methods.evidence renders a `table.EvidenceTable` into, whether an answer's
text is such a table (`is_table`, a check of its lines' shape: the rows themselves are never read back from text),
and the table as downloads. Nothing here imports methods.quotes, which tells tables apart through `is_table`.

A table is an intro line, then per row a header line — `[label] title · first authors (et al.) · date ·
arXiv:id` — and the row's quotes on the next line, each inside quotation marks, "…" between two and where a
quote is a piece of a longer sentence, a quote from the paper's full text followed by its section and the section's
address on arXiv — `(§4.2 Ablations · arxiv.org/html/<id>#S4.SS2)`; rows of a group follow a line
`Group: “phrase”`. A chosen paper whose full text never uses some of the question's words has a line after its
quotes naming them (`ABSENT_PREFIX`).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator, Sequence

from copilot import table
from copilot.records import is_document

OPEN_QUOTE, CLOSE_QUOTE = "\u201c", "\u201d"
ELLIPSIS = "\u2026"

TABLE_INTRO = "Evidence from {count} paper{s} of the library, most relevant first:"
CHOSEN_INTRO = "Evidence from the {count} paper{s} asked about:"      # a question about chosen papers or own PDFs
TEXTBOOK_LINE = ("The library's abstracts report research; they do not teach textbook material. Papers whose "
                 "abstracts bear on the question:")
GROUP_PREFIX = "Group: "
ABSENT_PREFIX = "Words of the question found nowhere in its full text: "  # then the words, plain (they are no quote)
ABSENT_TAIL = "."
_ARXIV_TAIL = " \u00b7 arXiv:"
DOCUMENT_TAIL = " \u00b7 your PDF "        # a row of an uploaded document: "… · your PDF doc:3"
PAGE_PREFIX = "p. "                         # an uploaded PDF's section names its page (sources.fulltext_pdf)


SECTION_SIGN = "\u00a7"
SECTION_HOST = "arxiv.org/html/"
_ROW = re.compile(rf"^\[[^\[\]\n]{{1,40}}\] [^\n]*{re.escape(_ARXIV_TAIL)}[^\s]+\n"
                  rf"(?:{ELLIPSIS} )?{OPEN_QUOTE}[^\n]*(?:{CLOSE_QUOTE}|{ELLIPSIS}|\))$", re.M)
_GROUP_LINE = re.compile(rf"^{GROUP_PREFIX}{OPEN_QUOTE}[^\n]*{CLOSE_QUOTE}$", re.M)
_ABSENT_LINE = re.compile(rf"^{re.escape(ABSENT_PREFIX)}[^\n{OPEN_QUOTE}{CLOSE_QUOTE}]*{re.escape(ABSENT_TAIL)}$", re.M)


def is_table(text: str) -> bool:
    """Whether an answer is an evidence table and nothing else: its intro line, group headings and rows."""
    text = (text or "").strip()
    first, _, rest = text.partition("\n")
    if not _INTRO.fullmatch(first):
        return False
    return bool(_ROW.search(rest)) and not _ABSENT_LINE.sub("", _GROUP_LINE.sub("", _ROW.sub("", rest))).strip()


_INTRO = re.compile("^(?:" + "|".join(re.escape(intro).replace(re.escape("{count}"), "[0-9]+")
                                       .replace(re.escape("{s}"), "s?") for intro in (TABLE_INTRO, CHOSEN_INTRO))
                    + "|" + re.escape(TEXTBOOK_LINE) + ")$", re.M)


# --- the table as text -----------------------------------------------------------------------------------------
# "What is a transformer?", "Define attention", "What does RLHF stand for?": a subject of at most three words. Each
# word is a whole run of word characters (no way to split one word in two, so no backtracking), and the question is
# at most TEXTBOOK_MAX_CHARS long: "What is " + 900 x's + " in 2503.14421?" took 25 s with "(?:[\w\-]+ ?){1,3}".
_SUBJECT = r"[\w\-]+(?: [\w\-]+){0,2}"
_TEXTBOOK = re.compile(rf"^(?:what (?:is|are) (?:an? |the )?{_SUBJECT} ?\??|(?:define|explain) (?:an? |the )?"
                       rf"{_SUBJECT} ?\.?|what does {_SUBJECT} (?:mean|stand for) ?\??)$", re.I)
TEXTBOOK_MAX_CHARS = 120


def is_textbook(question: str) -> bool:
    """A definition question ("What is a transformer?"): abstracts report research, not textbook material."""
    text = " ".join((question or "")[:4 * TEXTBOOK_MAX_CHARS].split())
    return len(text) <= TEXTBOOK_MAX_CHARS and bool(_TEXTBOOK.match(text))


def quote_text(found: Sequence[table.Quote], marks: bool = True, row: table.Row | None = None) -> str:
    """Quotes as a row shows them: each inside quotation marks, "…" where text of the paper was left out; with
    `row`, a quote of the full text followed by its section (`section_note`)."""
    opening, closing = (OPEN_QUOTE, CLOSE_QUOTE) if marks else ("", "")
    text = ""
    for n, quote in enumerate(found):
        lead = f"{ELLIPSIS} " if n or quote.cut_before else ""
        tail = f" {ELLIPSIS}" if n == len(found) - 1 and quote.cut_after else ""
        note = section_note(quote, row) if row is not None else ""
        text += (" " if n else "") + lead + f"{opening}{quote.shown}{closing}" + tail + note
    return text


def section_address(quote: table.Quote, row: table.Row) -> str:
    """Where a full-text quote's section is on arXiv's HTML page ("" when its page gave no anchor)."""
    return f"{SECTION_HOST}{row.paper_id}{row.version}#{quote.anchor}" if quote.anchor else ""


def section_note(quote: table.Quote, row: table.Row) -> str:
    """After a quote of the paper's full text: " (§4.2 Ablations · arxiv.org/html/<id>#S4.SS2)"; "" for an
    abstract's."""
    if quote.source != table.BODY:
        return ""
    address = section_address(quote, row)
    return f" ({_where(quote)}{' · ' + address if address else ''})"


def _where(quote: table.Quote) -> str:
    """A body quote's place: "§4.2 Ablations", or an uploaded PDF's page "p. 3"; "full text"."""
    if quote.section.startswith(PAGE_PREFIX):
        return quote.section
    return f"{SECTION_SIGN}{quote.section}" if quote.section else "full text"


def row_header(row: table.Row) -> str:
    if is_document(row.paper_id):         # a researcher's own upload: no arXiv id (issue #57 item 3)
        return f"[{row.label}] {row.title} \u00b7 {byline(row)}{DOCUMENT_TAIL}{row.paper_id}"
    return f"[{row.label}] {row.title} \u00b7 {byline(row)}{_ARXIV_TAIL}{row.paper_id}"


def render_table(evidence: table.EvidenceTable) -> Iterator[str]:
    """The table as the answer's text, in pieces (as a model's stream would arrive): an intro line, then per row
    a header line ([label] title · authors · date · arXiv:id) and its quotes' line; group headings where grouped."""
    count = len(evidence.rows)
    intro = TEXTBOOK_LINE if evidence.textbook else CHOSEN_INTRO if evidence.chosen else TABLE_INTRO
    yield intro.format(count=count, s="" if count == 1 else "s")
    group = None
    for row in evidence.rows:
        if row.group and row.group != group:
            group = row.group
            yield f"\n\n{GROUP_PREFIX}{OPEN_QUOTE}{group}{CLOSE_QUOTE}"
        yield f"\n\n{row_header(row)}\n{quote_text(row.quotes, row=row)}{absent_line(row)}"


def absent_line(row: table.Row) -> str:
    """The line after a chosen paper's quotes naming the question's words its full text never uses ("" if none)."""
    return f"\n{ABSENT_PREFIX}{', '.join(row.absent)}{ABSENT_TAIL}" if row.absent else ""


# --- downloads --------------------------------------------------------------------------------------------------
def _quotes(row: table.Row) -> str:
    return f" {ELLIPSIS} ".join(quote.shown + section_note(quote, row) for quote in row.quotes)


def byline(row: table.Row) -> str:
    """First authors ("A, B et al.") and date, as a row shows them."""
    authors = list(row.authors)
    names = ", ".join(authors[:2]) + (" et al." if len(authors) > 2 else "")
    return " \u00b7 ".join(part for part in (names, row.date) if part)


def table_csv(question: str, evidence: table.EvidenceTable) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["question", "label", "group", "title", "authors_date", "arxiv_id", "url", "quote"])
    for row in evidence.rows:
        writer.writerow([question, row.label, row.group, row.title, byline(row), row.paper_id,
                         "" if is_document(row.paper_id) else f"https://arxiv.org/abs/{row.paper_id}", _quotes(row)])
    return out.getvalue()


def table_markdown(question: str, evidence: table.EvidenceTable) -> str:
    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = [f"# {cell(question)}", "", "| # | Paper | What it does or finds |", "|---|---|---|"]
    for row in evidence.rows:
        group = f"*{cell(row.group)}* · " if row.group else ""
        paper = (f"{cell(row.title)} ({row.paper_id}) — {cell(byline(row))}" if is_document(row.paper_id) else
                 f"[{cell(row.title)}](https://arxiv.org/abs/{row.paper_id}) — {cell(byline(row))}")
        quoted = f" {ELLIPSIS} ".join(f"\u201c{cell(quote.shown)}\u201d{_markdown_section(quote, row)}"
                                      for quote in row.quotes)
        lines.append(f"| {row.label} | {group}{paper} | {quoted}{cell(absent_line(row))} |")
    return "\n".join(lines) + "\n"


def _markdown_section(quote: table.Quote, row: table.Row) -> str:
    if quote.source != table.BODY:
        return ""
    where = _where(quote)
    address = section_address(quote, row)
    return f" ([{cell_text(where)}](https://{address}))" if address else f" ({cell_text(where)})"


def cell_text(text: str) -> str:
    """Text inside a Markdown table cell or link label."""
    return " ".join(text.split()).replace("|", "\\|").replace("[", "(").replace("]", ")")
