"""A paper's body from arXiv's HTML page (LaTeXML): sections, paragraphs, list items, captions, table rows and
footnotes as one plain text cut into passages (copilot.body), or a status saying why there is none (issue #48).

The walk over the tree is iterative (an explicit stack), so no nesting depth can overflow Python's stack; libxml2
parses in linear time, and a page nested past its depth limit (where it stops reading) is refused, not stored cut.
Math never reaches the text as MathML glyphs: a short inline formula becomes its TeX, in characters where every part
of it is known (copilot.tex_text: "1×10⁻⁴"), a long one a marker; display
equations are skipped. Whether a page is the paper asked for can only be checked where arXiv's watermark
("arXiv:2402.08954v1 [cs.DL] ...") names it; LaTeXML's own output carries no id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import lxml.etree

from copilot.body import BodyText, Parsed, Section, TooLarge
from copilot.records import ARXIV_ID_PATTERN, base_id
from copilot.tex_text import readable_tex

MAX_PAGE_BYTES = 20 * 1024 * 1024
# Tags a page may open, counted before it is parsed: libxml2's tree of 2 million <p> took 0.9 GB before the walk
# could refuse it (issue #58 item 3). The largest real page here (2604.24827) has 45,774 "<".
MAX_TAGS = 1_000_000
MAX_INLINE_TEX = 60                 # longer inline TeX reads as noise in a quote: "[formula]" instead
FAILED_PARA_SHARE = 0.12            # LaTeXML errors in this share of body paragraphs: the conversion failed
FAILED_CITE_ERRORS = 3              # or this many undefined \cite commands: the bibliography machinery failed

_SECTION_CLASSES = frozenset({"ltx_section", "ltx_subsection", "ltx_subsubsection", "ltx_appendix", "ltx_paragraph",
                              "ltx_subparagraph", "ltx_chapter", "ltx_part", "ltx_acknowledgements", "ltx_index"})
_DROP_TAGS = frozenset({"script", "style", "svg", "img", "nav", "header", "footer", "button", "annotation",
                        "annotation-xml", "noscript", "template", "iframe", "object", "canvas", "input", "form"})
_DROP_CLASSES = frozenset({"ltx_bibliography", "ltx_abstract", "ltx_authors", "ltx_title_document", "ltx_ERROR",
                           "ltx_page_header", "ltx_page_footer", "ltx_page_navbar", "ltx_TOC", "ltx_dates",
                           "ltx_keywords", "ltx_classification", "ltx_pagination", "ltx_rdf", "ltx_listing",
                           "ltx_missing_image", "ltx_equation", "ltx_equationgroup", "ltx_note_mark",
                           "ltx_tag_note", "ltx_tag_item", "ltx_role_footnotemark"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CELL_CLASSES = frozenset({"ltx_td", "ltx_th", "ltx_tr"})
_EQUATION_CLASSES = frozenset({"ltx_equation", "ltx_equationgroup"})
# A numeric bracket citation as LaTeXML prints it inside <cite>: "[12]", "[3, 4]", "[5–7]".
_NUMERIC_CITE = re.compile(r"\[\s*\d+(?:\s*[,;\u2013-]\s*\d+)*\s*\]")
_INVISIBLE = dict.fromkeys(map(ord, "\u2061\u2062\u2063\u2064\u00ad\u200b\ufeff"), None)
_WATERMARK_ID = re.compile(rf"arXiv:\s*({ARXIV_ID_PATTERN})(v\d+)?")
_NOT_TEXT = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\ufffd]")
_NO_HTML_SIGNS = ("No HTML for", "HTML is not available for the source")


@dataclass
class _Inline:
    """Text gathered from one block element's subtree, the footnotes found in it, and the LaTeXML errors seen."""
    parts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class _Doc(BodyText):
    paragraphs: int = 0
    error_paragraphs: int = 0
    cite_errors: int = 0

    def add_block(self, found: _Inline, section: int, kind: str) -> None:
        """A block's text, then its footnotes, each its own passage right after it."""
        if kind == "paragraph":
            self.paragraphs += 1
            self.error_paragraphs += bool(found.errors)
        self.cite_errors += sum(e.startswith("\\cite") for e in found.errors)
        self.add(_fold("".join(found.parts)), section, kind)
        for note in found.notes:
            self.add(note, section, "footnote")


def _fold(text: str) -> str:
    return " ".join(text.translate(_INVISIBLE).split())


_NO_CLASS: frozenset[str] = frozenset()
_CLASS_SETS: dict[str, frozenset[str]] = {}


def _classes(el: lxml.etree._Element) -> frozenset[str]:
    value = el.get("class")
    if not value:
        return _NO_CLASS
    found = _CLASS_SETS.get(value)
    if found is None:
        found = frozenset(value.split())
        if len(_CLASS_SETS) < 4096:       # a page of random class names must not grow this without bound
            _CLASS_SETS[value] = found
    return found


def _math_text(el: lxml.etree._Element) -> str:
    tex = " ".join((el.get("alttext") or "").split())
    return readable_tex(tex) if 0 < len(tex) <= MAX_INLINE_TEX else "[formula]"


def _inline(root: lxml.etree._Element) -> _Inline:
    """The running text of `root`'s subtree in document order: math as TeX or a marker, numeric citations and
    footnotes taken out of the sentence (footnotes kept apart), dropped elements skipped. Iterative."""
    found = _Inline()
    out = found.parts
    stack: list[object] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        if isinstance(item, tuple):
            _close(found, item[0], item[1])
            continue
        assert isinstance(item, lxml.etree._Element)
        if item is not root and item.tail:
            stack.append(item.tail)
        tag = item.tag
        if not isinstance(tag, str):
            continue
        classes = _classes(item)
        if classes & _EQUATION_CLASSES:                 # a display equation inside a sentence ("Then [equation]
            out.append(" [equation] ")                  # is maximized"); between paragraphs it is skipped
            continue
        if tag in _DROP_TAGS or classes & _DROP_CLASSES:
            if "ltx_ERROR" in classes:
                found.errors.append((item.text or "").strip())
            continue
        if tag == "math":
            out.append(_math_text(item))
            continue
        if tag == "br" or classes & _CELL_CLASSES:
            stack.append(" ")
        if tag == "cite":
            stack.append(("cite", len(out)))
        elif "ltx_note" in classes:
            stack.append(("note" if "ltx_role_footnote" in classes else "drop", len(out)))
        if item.text:
            out.append(item.text)
        stack.extend(reversed(item))
    return found


def _close(found: _Inline, kind: str, start: int) -> None:
    """The end of a <cite> or a note: a numeric citation leaves the sentence, a footnote moves to its own passage."""
    text = "".join(found.parts[start:])
    del found.parts[start:]
    if kind == "note":
        note = _fold(text)
        if note:
            found.notes.append(note)
    elif kind == "cite":
        kept = _NUMERIC_CITE.sub("", text) if len(text) <= 2000 else text
        if kept.strip():
            found.parts.append(kept)
            return
        # the citation leaves with the white space before it: "use [31], not" reads "use, not"
        while found.parts and not found.parts[-1].strip():
            found.parts.pop()
        if found.parts:
            found.parts[-1] = found.parts[-1].rstrip()


def _heading(section: lxml.etree._Element) -> lxml.etree._Element | None:
    for child in section:
        if isinstance(child.tag, str) and child.tag in _HEADINGS and "ltx_title" in _classes(child):
            return child
    return None


def _add_section(doc: _Doc, el: lxml.etree._Element, parent: int) -> int:
    head = _heading(el)
    title = _fold("".join(_inline(head).parts)) if head is not None else ""
    top = doc.sections[parent].top if parent >= 0 else title
    return doc.add_section(Section(title=title, anchor=el.get("id") or "", top=top))


def _table_rows(doc: _Doc, table: lxml.etree._Element, section: int) -> None:
    """Each row of a tabular as its non-empty cells joined by " | "; a tabular nested in a cell stays in that cell."""
    for row in table.iter("tr"):
        owner = next(row.iterancestors("table"), None)
        if owner is not table:
            continue
        cells, notes = [], []
        for cell in row:
            if isinstance(cell.tag, str) and cell.tag in ("td", "th"):
                found = _inline(cell)
                text = _fold("".join(found.parts))
                if text:
                    cells.append(text)
                notes.extend(found.notes)
        doc.add(" | ".join(cells), section, "table_row")
        for note in notes:
            doc.add(note, section, "footnote")


def _walk(doc: _Doc, start: list[lxml.etree._Element], section: int) -> None:
    """Block-level reading order over the given elements and everything under them, without recursion."""
    stack: list[tuple[lxml.etree._Element, int, str]] = [(el, section, "paragraph") for el in reversed(start)]
    while stack:
        el, sec, kind = stack.pop()
        tag = el.tag
        if not isinstance(tag, str):
            continue
        classes = _classes(el)
        if tag in _DROP_TAGS or tag == "math" or classes & _DROP_CLASSES:
            continue
        if tag == "section" and classes & _SECTION_CLASSES:
            sec = _add_section(doc, el, sec)
        elif tag in _HEADINGS and "ltx_title" in classes:
            continue
        elif tag == "figcaption":
            doc.add_block(_inline(el), sec, "caption")
            continue
        elif tag == "table" and "ltx_tabular" in classes:
            _table_rows(doc, el, sec)
            continue
        elif tag == "p" or "ltx_p" in classes:
            doc.add_block(_inline(el), sec, kind)
            continue
        elif tag == "li":
            kind = "item"
        stack.extend((child, sec, kind) for child in reversed(el))


def _body_start(article: lxml.etree._Element) -> list[lxml.etree._Element]:
    """The article's children from the first section on; a paper with no section at all starts at its top."""
    children = [c for c in article if isinstance(c.tag, str)]
    for i, child in enumerate(children):
        if child.tag == "section" and "ltx_bibliography" not in _classes(child):
            return [c for c in children[i:] if c.tag == "section"]
    return children


def _decode(page: bytes | str) -> str | None:
    """The page as text, or None when it is not text at all (binary bytes, another encoding's garbage)."""
    text = page if isinstance(page, str) else page.decode("utf-8", errors="replace")
    sample = text[:65536]
    if not sample.strip() and not text.strip():
        return ""
    if len(_NOT_TEXT.findall(sample)) > len(sample) // 100:
        return None
    return text.replace("\x00", "")


def _page_id(tree: lxml.etree._Element) -> tuple[str, str]:
    """The arXiv id and version the page says it is (arXiv's watermark "arXiv:2402.08954v1 [cs.DL] ..."); ("", "")
    when it does not say, as LaTeXML's own output does not."""
    for el in tree.xpath('//*[@id="watermark-tr"]'):
        match = _WATERMARK_ID.search(" ".join(el.itertext())[:500])
        if match:
            return match.group(1), match.group(2) or ""
    return "", ""


def _find_article(tree: lxml.etree._Element) -> lxml.etree._Element | None:
    for el in tree.iter("article", "div"):
        if "ltx_document" in _classes(el):
            return el
    return None


def _no_document(tree: lxml.etree._Element, paper_id: str) -> Parsed:
    """A page without a LaTeXML document: arXiv's "no HTML" page, LaTeXML's empty output, or anything else."""
    text = " ".join(" ".join(tree.itertext()).split())
    if any(sign in text for sign in _NO_HTML_SIGNS):
        return Parsed("no_html", message=f"arXiv has no HTML page for {paper_id}.")
    latexml = any("ltx_page_main" in _classes(el) for el in tree.iter("div"))
    if latexml:
        return Parsed("failed", message=f"The HTML conversion of {paper_id} failed: LaTeXML wrote an empty document.")
    return Parsed("no_html", message=f"The page for {paper_id} holds no LaTeXML document.")


def _verdict(doc: _Doc, paper_id: str) -> Parsed | None:
    """The status of a page whose document was walked, when it is not a readable body."""
    if doc.paragraphs and (doc.error_paragraphs >= FAILED_PARA_SHARE * doc.paragraphs
                           or doc.cite_errors >= FAILED_CITE_ERRORS):
        return Parsed("failed", message=(f"The HTML conversion of {paper_id} failed: LaTeXML errors in "
                                         f"{doc.error_paragraphs} of {doc.paragraphs} paragraphs, "
                                         f"{doc.cite_errors} undefined citation commands."))
    if not doc.passages:
        if doc.error_paragraphs:
            return Parsed("failed", message=f"The HTML conversion of {paper_id} failed: only LaTeXML errors.")
        return Parsed("empty", message=f"The HTML page of {paper_id} has no readable body text.")
    return None


def parse_html(page: bytes | str, paper_id: str) -> Parsed:
    """Read one arXiv HTML page of `paper_id` into a Body, or say why not. Never raises on what a page holds."""
    size = len(page) if isinstance(page, bytes) or len(page) > MAX_PAGE_BYTES else len(page.encode("utf-8", "replace"))
    if size > MAX_PAGE_BYTES:
        return Parsed("unreadable", message=(f"The HTML page of {paper_id} is {size / 2**20:.1f} MiB, over the "
                                             f"{MAX_PAGE_BYTES // 2**20} MiB limit; not read."))
    text = _decode(page)
    if text is None:
        return Parsed("unreadable", message=f"The page for {paper_id} is not HTML text (binary or garbled bytes).")
    if not text:
        return Parsed("empty", message=f"The page for {paper_id} is empty.")
    if text.count("<") > MAX_TAGS:
        return Parsed("too_large", message=f"The HTML page of {paper_id} holds more than {MAX_TAGS:,} tags, more "
                      "than a paper; not read.")
    try:
        parser = lxml.etree.HTMLParser(remove_comments=True, remove_pis=True, no_network=True, encoding="utf-8")
        tree = lxml.etree.fromstring(text.encode("utf-8"), parser=parser)
    except (lxml.etree.LxmlError, ValueError) as exc:
        return Parsed("unreadable", message=f"The page for {paper_id} could not be parsed as HTML ({exc}).")
    if tree is None:
        return Parsed("empty", message=f"The page for {paper_id} holds no HTML elements.")
    limit = next((e.message for e in parser.error_log if e.type_name == "ERR_RESOURCE_LIMIT"), None)
    if limit is not None:
        # libxml2 stops at 256 levels of nesting, or at a text run past its buffer limit (10 MB), and keeps only
        # what came before: a cut page is not stored
        why = ("nests elements deeper than the HTML parser's limit" if "depth" in limit.lower() else
               "holds a run of text longer than the HTML parser's limit")
        return Parsed("unreadable", message=f"The page for {paper_id} {why}; not read.")
    return _read_tree(tree, paper_id)


def _read_tree(tree: lxml.etree._Element, paper_id: str) -> Parsed:
    page_id, version = _page_id(tree)
    wanted = base_id(paper_id)
    if page_id and page_id != wanted:
        return Parsed("wrong_paper", message=f"The page asked for {wanted} is the page of {page_id}.")
    article = _find_article(tree)
    if article is None:
        return _no_document(tree, wanted)
    doc = _Doc()
    try:
        _walk(doc, _body_start(article), -1)
    except TooLarge as large:
        return Parsed("too_large", message=f"The HTML page of {wanted} holds {large.what}, more than a paper; not "
                      "read.")
    bad = _verdict(doc, wanted)
    if bad is not None:
        return bad
    return Parsed("ok", body=doc.body(wanted, version, "html"),
                  message=f"{len(doc.passages)} passages in {len(doc.sections)} sections.")
