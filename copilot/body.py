"""A paper's full text as the copilot keeps it (issue #48): its body as one plain text, cut into passages, each in a
section. Made by copilot.sources.fulltext_html (arXiv's LaTeXML pages) or fulltext_pdf (the PDF, when a paper has no
HTML), split into sentences by the methods layer, kept by copilot.store.fulltext. A body quote is a slice of `text`
(copilot.table.Quote with source BODY), so `text` is never edited once stored.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

BODY = "body"
PASSAGE_KINDS = ("paragraph", "item", "caption", "table_row", "footnote")
# What a paper's body may hold (issue #58 item 3). The largest of the real pages in shared/data/arxiv-html reads
# into 955 passages (2604.24827), 108 sections (2311.16119) and 185,478 characters; each cap is 16-21 times that. A
# page past any cap is no paper's and is refused whole ("too_large") as it is read: no walk goes on past a cap.
MAX_PASSAGES = 20_000
MAX_SECTIONS = 2_000
MAX_CHARS = 3_000_000


class TooLarge(Exception):
    """Raised by BodyText as soon as a body goes past a cap; `what` says which, in words."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@dataclass(frozen=True)
class Section:
    title: str        # as the paper numbers it: "4.2 Ablations", "Appendix B Prompts", "Limitations"
    anchor: str       # the element id on arXiv's HTML page ("S4.SS2"), "" when there is none (a PDF)
    top: str          # its top-level section's title ("4 Experiments"): what the role rules read


@dataclass(frozen=True)
class Passage:
    start: int        # offsets into Body.text
    end: int
    section: int      # index into Body.sections; -1 before the first section
    kind: str         # one of PASSAGE_KINDS; a table row is its cells joined by " | "


@dataclass(frozen=True)
class Body:
    paper_id: str     # base arXiv id
    version: str      # "v2", "" when the page did not say
    source: str       # "html" or "pdf"
    text: str         # the passages in reading order, "\n\n" between them
    sections: tuple[Section, ...]
    passages: tuple[Passage, ...]

    def section_of(self, passage: Passage) -> Section | None:
        return self.sections[passage.section] if 0 <= passage.section < len(self.sections) else None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Body:
        data = json.loads(text)
        return cls(data["paper_id"], data["version"], data["source"], data["text"],
                   tuple(Section(**s) for s in data["sections"]), tuple(Passage(**p) for p in data["passages"]))


@dataclass
class BodyText:
    """A body being read (the HTML and PDF parsers): passages appended in reading order, "\n\n" between them."""
    parts: list[str] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    end: int = 0

    def add(self, text: str, section: int, kind: str) -> None:
        if not text:
            return
        start = self.end + 2 if self.parts else 0
        if len(self.passages) >= MAX_PASSAGES:
            raise TooLarge(f"more than {MAX_PASSAGES:,} passages")
        if start + len(text) > MAX_CHARS:
            raise TooLarge(f"more than {MAX_CHARS:,} characters of text")
        self.parts.append(text)
        self.end = start + len(text)
        self.passages.append(Passage(start, self.end, section, kind))

    def add_section(self, section: Section) -> int:
        """Open a section; its index."""
        if len(self.sections) >= MAX_SECTIONS:
            raise TooLarge(f"more than {MAX_SECTIONS:,} sections")
        self.sections.append(section)
        return len(self.sections) - 1

    def body(self, paper_id: str, version: str, source: str) -> Body:
        return Body(paper_id=paper_id, version=version, source=source, text="\n\n".join(self.parts),
                    sections=tuple(self.sections), passages=tuple(self.passages))


@dataclass(frozen=True)
class Parsed:
    """What reading one page or file gave: a body, or why there is none."""
    status: str               # "ok", "no_html" (arXiv's page for a paper without HTML), "failed" (the conversion
                              # failed), "wrong_paper", "empty", "unreadable" (malformed, encrypted, image-only, …),
                              # "too_large" (past a cap above), "too_costly" (a PDF reader stopped at its limits)
    body: Body | None = None
    message: str = ""         # for a reader: what happened, in a sentence
