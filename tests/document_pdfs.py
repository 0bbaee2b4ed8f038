"""PDFs made here (fpdf2) from the real papers' text in ../shared/data/arxiv-html, for the uploaded-document tests
(issue #57 item 3): a researcher's own PDF, its headings and paragraphs laid out on numbered pages."""

from __future__ import annotations

from copilot.sources.fulltext_html import parse_html
from tests.fake_arxiv_html import HTML_DIR


def latin(text: str) -> str:
    """fpdf's core fonts write Latin-1: other characters become "?" (the PDF's text is what the test quotes)."""
    return " ".join(text.split()).encode("latin-1", "replace").decode("latin-1")


def paper_pdf(paper_id: str, max_pages: int | None = None, title: str | None = None) -> tuple[bytes, int]:
    """A PDF of a shared paper's body (its section headings, then its passages), cut after `max_pages`; (the
    file, its page count). `title`: the PDF's metadata title (None: none, so its first line names it)."""
    from fpdf import FPDF

    body = parse_html((HTML_DIR / f"{paper_id}.html").read_text(encoding="utf-8"), paper_id).body
    assert body is not None
    pdf = FPDF()
    pdf.set_auto_page_break(True, margin=15)
    if title is not None:
        pdf.set_title(title)
    pdf.add_page()
    pdf.set_font("Helvetica", size=14)
    pdf.multi_cell(0, 7, latin(f"My draft on {paper_id}"), new_x="LMARGIN", new_y="NEXT")
    section = None
    for passage in body.passages:
        if max_pages is not None and pdf.page_no() >= max_pages and pdf.get_y() > 250:
            break
        if passage.section != section and passage.section >= 0:
            section = passage.section
            pdf.set_font("Helvetica", "B", size=11)
            pdf.ln(3)
            pdf.multi_cell(0, 6, latin(body.sections[section].title), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=10)
        pdf.ln(2)
        pdf.multi_cell(0, 5, latin(body.text[passage.start:passage.end]), new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output()), pdf.page_no()
