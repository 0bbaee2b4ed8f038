"""A paper's body from its PDF, for a paper arXiv has no HTML page for (issue #48): the text layer read with pypdf,
cut into paragraphs, placed in the sections its numbered heading lines open; the references and all after them
dropped. A PDF has no element ids, so a section's anchor is "".

pypdf: pure Python (no native code to build or to crash the process), BSD-licensed, actively released, and it reads
the text layer without rendering. Its text has no layout, so paragraphs come from heuristics (blank lines, a short
line ending a sentence) and a heading is a numbered line whose number follows the last one; an unusual layout (two
columns read across, tables) gives rougher passages than the HTML page does. The work is bounded by the file size
and page caps below and by pypdf's own cap on an inflated stream (75 MB), so a decompression bomb is "unreadable".
"""

from __future__ import annotations

import io
import logging
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import partial

from copilot.body import BodyText, Parsed, Section, TooLarge
from copilot.records import base_id

MAX_PDF_BYTES = 50 * 1024 * 1024
MAX_PAGES = 80
MAX_PAGE_CHARS = 200_000            # a page's text beyond this is not a paper's page

# "4.2 Ablations", "3. Method", "A.1 Prompts": a number (or appendix letter), a title that starts with a capital.
_HEADING = re.compile(r"(?:(\d{1,2}(?:\.\d{1,2}){0,3})|([A-H](?:\.\d{1,2}){1,3}))\.?\s+([A-Z].{0,90})")
# A numbered line that ends like a sentence or mid-phrase ("3 GPUs were used for the") is text, not a heading.
_NOT_A_TITLE_END = re.compile(r"(?:[.,;:]|\b(?:the|a|an|and|or|of|to|in|for|with|on|by|is|are|we))$")
_BULLETS = ("\u2022", "\u25e6", "\u25aa", "\u2023", "\u2013 ", "- ", "* ")
_UNNUMBERED = frozenset({"introduction", "conclusion", "conclusions", "related work", "limitations",
                         "acknowledgements", "acknowledgments", "discussion", "ethics statement",
                         "ethical considerations", "appendix"})
_END = frozenset({"references", "bibliography", "reference"})
_SENTENCE_END = (".", "!", "?", ":", ".\u201d", ".\"")
_HYPHEN_BREAK = re.compile(r"(?<![-\w])([a-z]{2,})-$")

logging.getLogger("pypdf").setLevel(logging.ERROR)


@dataclass
class _Doc(BodyText):
    number: tuple[int, ...] = ()        # the last heading's number, to accept only the next one
    pages: list[int] = field(default_factory=list)     # each passage's page (1-based): where its first line is
    page: int = 0                       # the page of the first line waiting to become a passage

    def add_lines(self, lines: list[str], section: int) -> None:
        text = " ".join(" ".join(lines).split())
        lines.clear()
        kind = "paragraph"
        for bullet in _BULLETS:
            if text.startswith(bullet):
                text, kind = text[len(bullet):].strip(), "item"
                break
        before = len(self.passages)
        self.add(text, section, kind)
        if len(self.passages) > before:
            self.pages.append(self.page)


def _page_texts(data: bytes) -> tuple[list[list[tuple[str, bool]]], int, str]:
    """Each page's lines (up to MAX_PAGES) with whether a paragraph starts there, the page count, and an error message
    instead when the file is unreadable."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        # An owner-password-only PDF (empty user password) opens for reading; any other is "encrypted".
        if reader.is_encrypted and not reader.decrypt(""):
            return [], 0, "encrypted"
        count = len(reader.pages)
        pages = []
        for page in reader.pages[:MAX_PAGES]:
            starts: list[tuple[float, float]] = []
            text = page.extract_text(visitor_text=partial(_line_start, starts)) or ""
            pages.append(_paragraph_starts(text[:MAX_PAGE_CHARS].splitlines(), starts))
    except Exception as exc:  # noqa: BLE001 - any failure inside a hostile file is "unreadable", never a crash
        return [], 0, f"{type(exc).__name__}: {exc}"[:200]
    return pages, count, ""


def _line_start(starts: list[tuple[float, float]], text: str, cm: list[float], tm: list[float], *_: object) -> None:
    """Where each text line begins on the page (x, y): a fragment whose baseline differs from the last one's."""
    if text.strip():
        x, y = tm[4] * cm[0] + cm[4], tm[5] * cm[3] + cm[5]
        if not starts or abs(starts[-1][1] - y) > 1.0:
            starts.append((x, y))


def _paragraph_starts(lines: list[str], starts: list[tuple[float, float]]) -> list[tuple[str, bool]]:
    """Lines marked where a paragraph starts: after a blank line, or (when the line positions match the lines) after
    a gap taller than 1.4 lines or at an indented line."""
    lines = [" ".join(line.split()) for line in lines]
    kept = [line for line in lines if line]
    geometry = len(starts) == len(kept)
    gaps = sorted(a[1] - b[1] for a, b in zip(starts, starts[1:]) if a[1] > b[1]) if geometry else []
    step = gaps[len(gaps) // 2] if gaps else 0.0
    out, blank, k, item_x = [], False, 0, None
    for line in lines:
        if not line:
            blank = True
            continue
        bullet = line.startswith(_BULLETS)
        new = blank or bullet
        if geometry and k > 0 and step:
            (px, py), (x, y) = starts[k - 1], starts[k]
            new = new or py - y > 1.4 * step
            if item_x is not None and not bullet:       # a list item's wrapped lines sit right of its bullet
                new, item_x = (new, item_x) if x > item_x + 3.0 else (True, None)
            elif not bullet:
                new = new or 3.0 < x - px < 40.0
            item_x = x if bullet else item_x
        out.append((line, new))
        blank, k = False, k + 1
    return out


def _clean_lines(pages: list[list[tuple[str, bool]]]) -> list[tuple[str, bool, int]]:
    """All pages' lines in order with their page (1-based), without page numbers and running heads (a line on at
    least half of 3+ pages)."""
    seen = Counter(line for lines in pages for line in {line for line, _ in lines})
    repeated = {line for line, n in seen.items() if len(pages) >= 3 and n >= max(3, len(pages) // 2)}
    return [(line, new, page) for page, lines in enumerate(pages, 1) for line, new in lines
            if not line.isdigit() and line not in repeated]


def _heading(line: str, last: tuple[int, ...]) -> tuple[str, tuple[int, ...], bool] | None:
    """(title, number, top-level?) when `line` is a heading that can follow heading number `last`, else None; the
    references heading gives an empty title."""
    lowered = line.lower().rstrip(":")
    if lowered in _END:
        return "", (), True
    if lowered in _UNNUMBERED:
        return line, last, True
    match = _HEADING.fullmatch(line)
    if (not match or len(match.group(3).split()) > 12 or sum(ch.isdigit() for ch in match.group(3)) > 4
            or _NOT_A_TITLE_END.search(match.group(3))):
        return None
    if match.group(2):                                  # "A.1 ...": an appendix subsection keeps the numbering
        return line, last, False
    number = tuple(int(n) for n in match.group(1).split("."))
    if not _follows(number, last):
        return None
    title = " ".join(line.replace(match.group(1) + ".", match.group(1), 1).split())
    return title, number, len(number) == 1


def _follows(number: tuple[int, ...], last: tuple[int, ...]) -> bool:
    """Whether `number` may come after `last`: the next top-level number, or a child or next sibling below it."""
    if len(number) == 1:
        return number[0] == (last[0] + 1 if last else 1) or (not last and number[0] <= 2)
    if not last or number[:-1] != last[: len(number) - 1]:
        return False
    below = last[len(number) - 1] if len(last) >= len(number) else 0
    return number[-1] == below + 1


def _join(prev: str, line: str) -> tuple[str, str]:
    """A word broken at a line end ("exam-" + "ple ...") joins without a space; its hyphen goes only when safe: a
    lowercase word that is no compound ("state-of-the-" + "art" keeps it), continued in lowercase."""
    if not prev.endswith("-") or not line[:1].isalnum():
        return prev, line
    word, _, rest = line.partition(" ")
    match = _HYPHEN_BREAK.search(prev[-64:])
    if match and word[:1].islower():
        return prev[:-1] + word, rest
    return prev + word, rest


def _typical_width(lines: list[str]) -> int:
    widths = sorted(len(line) for line in lines if len(line) > 20)
    return widths[len(widths) * 3 // 4] if widths else 80


def _assemble(lines: list[tuple[str, bool, int]], keep_lead: bool = False) -> _Doc:
    """Lines into sections and paragraphs; nothing from the references on, and nothing before the first heading
    unless `keep_lead` (a researcher's own document: its title page and abstract are theirs to ask about)."""
    doc = _Doc()
    lead = doc if keep_lead else _Doc()
    width = _typical_width([line for line, _, _ in lines])
    section, top, buffer = -1, "", list[str]()
    for line, new, page in lines:
        target = doc if section >= 0 else lead
        found = _heading(line, doc.number) if len(line) < 120 else None
        if found is not None:
            target.add_lines(buffer, section)
            title, number, is_top = found
            if not title:                                       # the references: the body ends here
                break
            top = title if is_top or not top else top
            doc.number = number
            section = doc.add_section(Section(title=title, anchor="", top=top))
            continue
        if new:
            target.add_lines(buffer, section)
        if buffer:
            buffer[-1], line = _join(buffer[-1], line)
        if line:
            if not buffer:
                target.page = page
            buffer.append(line)
        if line.endswith(_SENTENCE_END) and len(line) < 0.8 * width:
            target.add_lines(buffer, section)
    (doc if section >= 0 else lead).add_lines(buffer, section)
    return doc if doc.sections else lead


def parse_pdf(data: bytes, paper_id: str) -> Parsed:
    """Read a paper's PDF into a Body, or say why not (encrypted, no text layer, broken). Never raises on a file."""
    wanted = base_id(paper_id)
    if len(data) > MAX_PDF_BYTES:
        return Parsed("unreadable", message=(f"The PDF of {wanted} is {len(data) / 2**20:.1f} MiB, over the "
                                             f"{MAX_PDF_BYTES // 2**20} MiB limit; not read."))
    if b"%PDF-" not in data[:1024]:
        return Parsed("unreadable", message=f"The file for {wanted} is not a PDF.")
    pages, count, error = _page_texts(data)
    if error == "encrypted":
        return Parsed("unreadable", message=f"The PDF of {wanted} is encrypted; its text cannot be read.")
    if error:
        return Parsed("unreadable", message=f"The PDF of {wanted} could not be read ({error}).")
    if not any(lines for lines in pages):
        return Parsed("empty", message=(f"The PDF of {wanted} has no text layer (image-only or scanned pages); "
                                        f"nothing to read without OCR."))
    try:
        doc = _assemble(_clean_lines(pages))
    except TooLarge as large:
        return Parsed("too_large", message=f"The PDF of {wanted} holds {large.what}, more than a paper; not read.")
    if not doc.passages:
        return Parsed("empty", message=f"The PDF of {wanted} has no body text before its references.")
    body = doc.body(wanted, "", "pdf")
    capped = f" (first {MAX_PAGES} of {count} pages)" if count > MAX_PAGES else ""
    return Parsed("ok", body=body, message=f"{len(doc.passages)} passages in {len(doc.sections)} sections{capped}.")


def _paged(doc: _Doc) -> BodyText:
    """The document's passages placed in one section per page, titled "p. 3" (no top-level title): a researcher's
    own document is quoted by page, and its headings, guessed from a text layer, decide nothing (one heading missed
    would make the rest of a document its introduction, whose sentences a table quotes only in the paper's own
    voice, methods.body_text.may_state_finding). The text and passages' offsets are the document's own."""
    paged = BodyText(parts=doc.parts, end=doc.end)
    opened: dict[int, int] = {}
    for passage, page in zip(doc.passages, doc.pages):
        if page not in opened:
            opened[page] = paged.add_section(Section(title=f"p. {page}", anchor="", top=""))
        paged.passages.append(replace(passage, section=opened[page]))
    return paged


def _title(data: bytes, lines: list[tuple[str, bool, int]]) -> str:
    """A document's title: the PDF's own (its metadata), else its first line of text."""
    from pypdf import PdfReader

    try:
        meta = PdfReader(io.BytesIO(data), strict=False).metadata
        title = " ".join(str(meta.title or "").split()) if meta is not None else ""
    except Exception:  # noqa: BLE001 - a title is a nicety: a broken info dictionary has none
        title = ""
    return (title or (lines[0][0] if lines else ""))[:200]


def parse_document(data: bytes, name: str) -> tuple[Parsed, str]:
    """A researcher's own PDF (issue #57 item 3): its body, every passage in a section naming its page (`_paged`),
    from its first line on (a title page and an abstract are kept), and its title; or why there is none. `name`:
    what the messages call it (the file's name). Never raises on a file."""
    said = " ".join(name.split())[:80] or "the file"
    if len(data) > MAX_PDF_BYTES:
        return Parsed("too_large", message=(f"{said} is {len(data) / 2**20:.1f} MiB, over the "
                                            f"{MAX_PDF_BYTES // 2**20} MiB limit; not read.")), ""
    if b"%PDF-" not in data[:1024]:
        return Parsed("unreadable", message=f"{said} is not a PDF."), ""
    pages, count, error = _page_texts(data)
    if error == "encrypted":
        return Parsed("unreadable", message=f"{said} is encrypted (password-protected); its text cannot be "
                      "read. Save a copy without a password and upload that."), ""
    if error:
        return Parsed("unreadable", message=f"{said} could not be read as a PDF ({error})."), ""
    if not any(lines for lines in pages):
        return Parsed("empty", message=(f"{said} has no text layer (image-only or scanned pages); nothing to read "
                                        "without OCR.")), ""
    try:
        lines = _clean_lines(pages)
        doc = _assemble(lines, keep_lead=True)
        body = _paged(doc).body("", "", "pdf")
    except TooLarge as large:
        return Parsed("too_large", message=f"{said} holds {large.what}, more than a paper; not read."), ""
    if not doc.passages:
        return Parsed("empty", message=f"{said} has no text to quote."), ""
    capped = f" (its first {MAX_PAGES} of {count} pages)" if count > MAX_PAGES else ""
    return Parsed("ok", body=body, message=f"{len(doc.passages)} passages on {len(pages)} pages{capped}."), \
        _title(data, lines)
