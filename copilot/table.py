"""The evidence table as a record: what a Chat answer on the tiny profile shows, built once per side per turn
(methods.evidence), stored with the turn (store.chat_log), and read as it is by the page, the downloads, the thought
a preferred answer becomes, the comparison of the two sides and the evaluations. Text is made from it only at the
edge (`methods.evidence_text.render_table`); nothing reads a rendered table back.

A quote is a slice of a stored text: `source` names the text (the abstract, or the body of the paper's full text,
copilot.body), `start`/`end` are offsets into it, and `text` is that slice as it stood when the row was made.
`verbatim` checks the two still agree. A body quote also names its section and the section's anchor on arXiv's
HTML page.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from copilot.tex_text import readable_math

ABSTRACT = "abstract"
BODY = "body"                    # copilot.body.BODY


@dataclass(frozen=True)
class Quote:
    source: str                  # which stored text of the paper: ABSTRACT or BODY
    start: int                   # offsets into that text
    end: int
    text: str                    # the slice text[start:end]
    role: str = ""               # background, objective, method, result, other, limitation
    cut_before: bool = False     # a bounded piece of a longer sentence: the sentence goes on before it
    cut_after: bool = False
    section: str = ""            # a body quote's section as the paper numbers it: "4.2 Ablations"
    anchor: str = ""             # that section's id on arXiv's HTML page: "S4.SS2"

    @property
    def shown(self) -> str:
        """The slice as a reader sees it: white space folded (a line break in an abstract is a space), a short
        formula in characters where all of it is known ("$1,405$" is 1,405; copilot.tex_text)."""
        return readable_math(" ".join(self.text.split()))


@dataclass(frozen=True)
class Row:
    label: str                   # "1", "2", … in the order shown: one rule on both sides of a turn
    paper_id: str                # base arXiv id
    version: str                 # "v2", or "" when the library does not know it
    title: str
    authors: tuple[str, ...]
    date: str                    # YYYY-MM-DD
    quotes: tuple[Quote, ...]    # in the order of the text; two quotes are never contiguous (they would be one)
    score: float
    group: str = ""              # the phrase heading the row's group, when the rows fall into two
    via: str = ""                # the thought the paper was reached through ("" for a retrieved paper)
    absent: tuple[str, ...] = ()  # a chosen paper's: the question's words its full text never uses


@dataclass(frozen=True)
class EvidenceTable:
    rows: tuple[Row, ...] = ()
    textbook: bool = False       # a definition question: the intro says abstracts report research
    chosen: bool = False         # the papers (or own PDFs) the researcher chose: the intro does not say "library"

    def __bool__(self) -> bool:
        return bool(self.rows)

    @property
    def paper_ids(self) -> list[str]:
        return [row.paper_id for row in self.rows]

    def content(self) -> tuple[tuple[str, tuple[tuple[str, int, int], ...]], ...]:
        """What the table says, without its labels: each row's paper and quoted slices, in order (two sides whose
        tables say the same are one answer)."""
        return tuple((row.paper_id, tuple((q.source, q.start, q.end) for q in row.quotes)) for row in self.rows)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> EvidenceTable | None:
        """The stored table; None for a turn stored without one (older turns, failed answers)."""
        if not text:
            return None
        data: dict[str, Any] = json.loads(text)
        rows = tuple(Row(**{**row, "authors": tuple(row["authors"]),
                            "quotes": tuple(Quote(**quote) for quote in row["quotes"]),
                            "absent": tuple(row.get("absent", ()))}) for row in data["rows"])
        return cls(rows=rows, textbook=bool(data.get("textbook")), chosen=bool(data.get("chosen")))


def verbatim(quote: Quote, source_text: str) -> bool:
    """Whether the quote is the slice of `source_text` it says it is."""
    return 0 <= quote.start < quote.end <= len(source_text) and source_text[quote.start:quote.end] == quote.text
