"""Reading a paper's full text (issue #48): arXiv's LaTeXML pages (the ten real pages and two failed conversions in
shared/data/arxiv-html) and PDFs made here with fpdf2, into copilot.body records or a status; hostile input ends in
a status, never an exception."""

from __future__ import annotations

import json
import random
import re
import time
from functools import cache

import lxml.etree
import lxml.html
import pytest

from copilot.body import MAX_SECTIONS, PASSAGE_KINDS, Body, Parsed
from copilot.sources.fulltext_html import MAX_PAGE_BYTES, parse_html
from copilot.sources.fulltext_pdf import MAX_PAGES, parse_pdf
from tests.helpers import DATA

pytestmark = pytest.mark.unit

PAGES = DATA / "arxiv-html"
PAPERS = {json.loads(line)["id"]: json.loads(line) for line in (PAGES / "papers.jsonl").read_text().splitlines()}
IDS = sorted(PAPERS)


@cache
def parsed(paper_id: str) -> Parsed:
    return parse_html((PAGES / f"{paper_id}.html").read_bytes(), paper_id)


def body(paper_id: str) -> Body:
    result = parsed(paper_id)
    assert result.status == "ok", result.message
    assert result.body is not None
    return result.body


def passage_texts(b: Body, kind: str | None = None) -> list[str]:
    return [b.text[p.start:p.end] for p in b.passages if kind is None or p.kind == kind]


def readme_sections() -> dict[str, list[str]]:
    """The top-level section titles the README lists per page ("- **id**: 1 Introduction; 2 ...")."""
    found = {}
    readme = (PAGES / "README.md").read_text()
    block = readme.split("### Sections per page", 1)[1].split("###", 1)[0]
    for line in block.splitlines():
        match = re.match(r"- \*\*(\d{4}\.\d{5})\*\*: (.*)", line)
        if match and match.group(1) in PAPERS:
            found[match.group(1)] = match.group(2).split("; ")
    return found


# --- real pages ---------------------------------------------------------------------------------------------------

def test_the_readme_lists_sections_for_every_page() -> None:
    assert sorted(readme_sections()) == IDS and len(IDS) == 10


@pytest.mark.parametrize("paper_id", IDS)
def test_sections_carry_their_numbered_titles_anchors_and_top(paper_id: str) -> None:
    b = body(paper_id)
    raw = (PAGES / f"{paper_id}.html").read_text()
    titles = [s.title for s in b.sections]
    tops = " ; ".join(s.title for s in b.sections if "." not in s.anchor)
    for listed in readme_sections()[paper_id]:
        # the README's own extraction garbled one title's math; its words before the formula are enough
        assert listed.split("(")[0].strip()[:40] in tops, (listed, tops)
    tops_seen = set()
    for section in b.sections:
        assert section.anchor and f'id="{section.anchor}"' in raw
        assert "  " not in section.title and "\n" not in section.title
        tops_seen.add(section.top)
    assert tops_seen <= set(titles)
    assert b.paper_id == paper_id and b.source == "html"


def test_a_subsection_is_numbered_and_knows_its_top_section() -> None:
    sections = {s.title: s for s in body("2503.15484").sections}
    sub = sections["2.1 Rater Representations"]
    assert (sub.anchor, sub.top) == ("S2.SS1", "2 Modelling Human Annotator Variation")
    assert sections["Appendix A Reproducibility Details"].anchor == "A1"
    ieee = {s.title for s in body("2503.17247").sections}
    assert "III Methodology" in ieee and any(re.match(r"III-A \w", t) for t in ieee)


@pytest.mark.parametrize("paper_id", IDS)
def test_passages_slice_the_text_exactly(paper_id: str) -> None:
    b = body(paper_id)
    slices = passage_texts(b)
    assert "\n\n".join(slices) == b.text
    for p, text in zip(b.passages, slices, strict=True):
        assert text and text == text.strip() and "\n" not in text
        assert p.kind in PASSAGE_KINDS and -1 <= p.section < len(b.sections)
    assert Body.from_json(b.to_json()) == b


@pytest.mark.parametrize("paper_id", IDS)
def test_no_markup_math_glyphs_lexemes_or_raw_errors_in_the_text(paper_id: str) -> None:
    text = body(paper_id).text
    assert "\u2062" not in text and "\u2061" not in text
    assert "ltx_" not in text
    # the lexeme annotation (mathlexemes) and MathML glyph runs never reach the text
    assert not re.search(r"start_(?:FLOAT)?(?:SUPERSCRIPT|SUBSCRIPT)|italic_[a-zα-ω]", text)
    assert "\\printcontents" not in text and "\\definecolor" not in text


def test_inline_math_is_its_tex_once_not_its_glyphs() -> None:
    text = body("2503.15484").text
    tex = r"\mathcal{R}=\{r_{1},r_{2},\ldots,r_{N_{R}}\}"
    assert f"Let {tex} be the raters who we wish to model," in text
    assert text.count(tex) == 1
    # a long inline formula is a marker, not 100 characters of TeX in a quote
    assert "No information about r. In this case, [formula], or the label distribution" in text


@pytest.mark.parametrize("paper_id", IDS)
def test_no_bibliography_entry_in_the_text(paper_id: str) -> None:
    tree = lxml.html.parse(str(PAGES / f"{paper_id}.html"))
    entries = tree.xpath('//li[contains(@class, "ltx_bibitem")]//span[contains(@class, "ltx_bibblock")][1]')
    assert len(entries) > 5
    text = body(paper_id).text
    for entry in entries[:: max(1, len(entries) // 8)]:
        words = " ".join(entry.text_content().split())
        assert words[:60] not in text, words[:60]


@pytest.mark.parametrize("paper_id", IDS)
def test_title_author_block_and_abstract_stay_out(paper_id: str) -> None:
    text = body(paper_id).text
    paper = PAPERS[paper_id]
    assert paper["title"][:45] not in text
    assert paper["summary"][:80] not in text
    authors = lxml.html.parse(str(PAGES / f"{paper_id}.html")).xpath('//div[contains(@class, "ltx_authors")]')[0]
    assert " ".join(authors.text_content().split())[:50] not in text


def test_acl_pages_repeat_the_title_before_section_1_and_it_is_dropped() -> None:
    raw = (PAGES / "2503.15484.html").read_text()
    assert raw.count("Value Profiles for Encoding Human Variation") >= 2   # the page does repeat it
    assert "Value Profiles for Encoding Human Variation" not in body("2503.15484").text
    assert "Google DeepMind" not in body("2503.15484").text


# Whole sentences as the page shows them; each spans a source line break and holds an abbreviation, a number or a
# kept author-year citation.
SENTENCES = [
    ("2311.16119", "Large language models (llms) such as InstructGPT (Ouyang et al., 2022), BLOOM Scao et al. (2022), "
                   "and GPT-4 OpenAI (2023) have been widely deployed in various consumer-facing and interactive "
                   "settings Bommasani et al. (2021)."),
    ("2311.16119", "We use the most deterministic version of the models possible (e.g. for davinci-003, 0 temperature, "
                   "0 top-p) to evaluate the submissions."),
    ("2502.07870", "Even under such complexity, our pretrained model achieves a 3.7% gain in OCR accuracy, "
                   "underscoring the value of diversity data for enhancing long-text image generation."),
    ("2503.15484", "We characterize three approaches to variation modelling: (1) Distributional Population Modelling, "
                   "which directly models the distribution of labels for a given rater population (Zhang et al., "
                   "2024; Siththaranjan et al., 2024)."),
    ("2607.05691", "BPE and Unigram-LM construct their vocabularies in opposite directions (Appendix Fig. 6)."),
    ("2607.05691", "The frequency-weighted overlap J_{\\mathrm{w}} (Eq. 4) is at most 0.05 and falls to 0.002;"),
    ("2605.25931", "Kaelbling et al. provide the formal foundation; Spaan surveys belief-space methods."),
]


@pytest.mark.parametrize(("paper_id", "sentence"), SENTENCES)
def test_known_sentences_are_found_whole(paper_id: str, sentence: str) -> None:
    assert sentence in body(paper_id).text


def test_numeric_citations_leave_the_sentence_author_year_ones_stay() -> None:
    text = body("2605.25931").text
    assert "ReAct interleaves reasoning and acting" in text
    assert not re.search(r"\[\d+(?:, \d+)*\]", text)
    assert "Reasoning models advance every few months" in body("2606.24470").text
    assert "in a race won on coding and agentic tool use, not real-time interaction." in body("2606.24470").text
    assert "Lian et al. quantify the BPE-side fraction" in body("2607.05691").text      # citet: the names stay
    assert "(Aroyo and Welty, 2015; Plank, 2022)" in body("2503.15484").text


def test_a_table_row_is_its_cells_joined() -> None:
    b = body("2503.15484")
    rows = passage_texts(b, "table_row")
    assert "Dataset | Task | Choices | Dem. | Inst. | Raters | Ratings" in rows
    assert "OpinionQA W27 (OQA) | Opinions (US) | 2-6 | 11 | 77 | 10k | 731k" in rows
    assert any(t.startswith("Table 1:") for t in passage_texts(b, "caption"))


def test_a_footnote_is_its_own_passage_after_its_paragraph() -> None:
    b = body("2503.15484")
    note = "At least, to the degree that people are self-consistent (Abercrombie et al., 2023)."
    texts = passage_texts(b)
    i = texts.index(note)
    assert b.passages[i].kind == "footnote"
    assert b.passages[i - 1].kind == "paragraph" and note not in texts[i - 1]
    assert b.passages[i - 1].section == b.passages[i].section
    assert not any(note in t for t in texts[:i] + texts[i + 1:])


def test_a_display_equation_inside_a_sentence_is_one_marker() -> None:
    text = body("2605.25931").text
    assert "is not binding (i.e., A_{E}(\\pi)\\geq H_{E}/1.15). Then [equation] is maximized when" in text
    assert "\\text{RHAE}(\\pi,E)=\\left(" not in text


def test_a_paragraph_laid_out_as_spans_is_read() -> None:
    b = body("2502.07870")
    found = [p for p in b.passages if b.text[p.start:p.end].startswith('"I have a scene description T and OCR text O.')]
    assert len(found) == 1 and found[0].kind == "paragraph"
    assert b.sections[found[0].section].title == "G.3 Template Generation Details"


def test_a_list_item_is_an_item() -> None:
    items = passage_texts(body("2503.15484"), "item")
    assert any(t.startswith("D: Demographic information about r.") for t in items)


# --- statuses ------------------------------------------------------------------------------------------------------

# arXiv's page for a paper without HTML (status 200), as it reads: a heading and one sentence, no LaTeXML document.
NO_HTML_PAGE = """<!DOCTYPE html><html lang="en"><head><title>No HTML for '2401.00001'</title></head><body>
<header><a href="/">arXiv</a></header><main><h1>No HTML for '2401.00001'</h1>
<p>HTML is not available for the source. This could be due to the source files not being HTML, LaTeX, or a conversion
failure.</p></main><footer>About Help</footer></body></html>"""


def page(*sections: str, watermark: str = "") -> str:
    mark = f'<div id="watermark-tr">{watermark}</div>' if watermark else ""
    return (f'<html><body><div class="ltx_page_main">{mark}<div class="ltx_page_content">'
            f'<article class="ltx_document"><h1 class="ltx_title ltx_title_document">T</h1>{"".join(sections)}'
            f"</article></div></div></body></html>")


def section(n: int, *paras: str) -> str:
    return (f'<section id="S{n}" class="ltx_section"><h2 class="ltx_title ltx_title_section"><span class="ltx_tag '
            f'ltx_tag_section">{n} </span>Part {n}</h2>'
            + "".join(f'<div class="ltx_para"><p class="ltx_p">{p}</p></div>' for p in paras) + "</section>")


def test_arxivs_no_html_page_and_a_page_without_a_document_are_no_html() -> None:
    stub = parse_html(NO_HTML_PAGE.encode(), "2401.00001")
    assert (stub.status, stub.body) == ("no_html", None) and "no HTML page" in stub.message
    assert parse_html("<html><body><p>Some other site.</p></body></html>", "2401.00001").status == "no_html"


@pytest.mark.parametrize("name", ["2310.03240.failed.html", "2506.06105.failed.html"])
def test_failed_conversions_are_failed(name: str) -> None:
    result = parse_html((PAGES / name).read_bytes(), name[:10])
    assert (result.status, result.body) == ("failed", None), result.message
    assert "failed" in result.message


def test_a_page_that_says_it_is_another_paper_is_wrong_paper() -> None:
    html = page(section(1, "Text."), watermark="arXiv:2401.00002v3 [cs.CL] 02 Jan 2024")
    result = parse_html(html, "2401.00001")
    assert result.status == "wrong_paper" and "2401.00002" in result.message
    same = parse_html(html, "2401.00002v1")
    assert same.status == "ok" and same.body is not None and same.body.version == "v3"
    assert body("2503.15484").version == ""          # LaTeXML's own pages do not say which paper they are


def test_deep_nesting_finishes_fast_without_recursion_error() -> None:
    def nested(depth: int, tag: str) -> str:
        deep = f"<{tag}>" * depth + "<p class='ltx_p'>Deep.</p>" + f"</{tag}>" * depth
        return page(section(1, "Before the deep part.").replace("</section>", deep + "</section>"),
                    section(2, "After."))

    for tag in ("div", "span"):
        start = time.perf_counter()
        result = parse_html(nested(100_000, tag), "2401.00001")
        assert time.perf_counter() - start < 2.0
        # the parser stops at its depth limit and would keep only the part before: a cut page is not a body
        assert (result.status, result.body) == ("unreadable", None) and "deeper" in result.message
        fine = parse_html(nested(200, tag), "2401.00001")
        assert fine.body is not None and "Deep." in fine.body.text and "After." in fine.body.text


def test_malformed_html_is_read_as_far_as_it_goes() -> None:
    raw = (PAGES / "2503.15484.html").read_bytes()
    cut = raw[: len(raw) // 3] + b"<div><p class='ltx_p'>unclosed <b><i>tags</span></table><<<>>>&&#;"
    result = parse_html(cut, "2503.15484")
    assert result.status == "ok" and result.body is not None
    assert "1 Introduction" in [s.title for s in result.body.sections]
    assert parse_html("<p>unclosed <b><i>tags <div></span></table>", "x").status == "no_html"


def test_a_page_over_the_limit_is_refused_quickly() -> None:
    huge = b"<html><body>" + b"<p>a</p>" * (MAX_PAGE_BYTES // 8 + 1) + b"</body></html>"
    start = time.perf_counter()
    result = parse_html(huge, "2401.00001")
    assert result.status == "unreadable" and "limit" in result.message
    assert time.perf_counter() - start < 0.5
    assert parse_html(huge.decode(), "2401.00001").status == "unreadable"


def test_a_single_huge_text_node_is_not_called_deep_nesting() -> None:
    result = parse_html(page(section(1, "a" * 11_000_000)), "2401.00001")
    assert (result.status, result.body) == ("unreadable", None)
    assert "run of text longer" in result.message and "deeper" not in result.message, result.message


def test_a_page_past_a_bodys_caps_is_too_large_and_stops_reading_there() -> None:
    # issue #58 item 3: 2 million <p>a</p> parsed in 15.6 s (1.1 GB) and were stored as 128 MB of JSON; a LaTeXML
    # page of 400,000 table rows and one sentence was stored (25 MB) and re-read on every turn
    paragraphs = page(section(1, "One sentence.").replace("</section>", "<p>a</p>" * 2_000_000 + "</section>"))
    rows = "".join(f"<tr><td>{n}</td></tr>" for n in range(400_000))
    table = page(section(1, "One sentence.").replace("</section>", f'<table class="ltx_tabular">{rows}</table>'
                                                     "</section>"))
    sections = page(*(section(n, "Text.") for n in range(1, MAX_SECTIONS + 2)))
    chars = page(section(1, *["word " * 200_000] * 4))
    rows = "".join(f"<tr><td>{n}</td></tr>" for n in range(100_000))       # 100,000 rows in 400,000 tags
    within = page(section(1, "One sentence.").replace("</section>", f'<table class="ltx_tabular">{rows}</table>'
                                                      "</section>"))
    for hostile, said in ((paragraphs, "tags"), (table, "tags"), (within, "passages"), (sections, "sections"),
                          (chars, "characters")):
        start = time.perf_counter()
        result = parse_html(hostile, "2401.00001")
        assert (result.status, result.body) == ("too_large", None) and said in result.message, result.message
        assert time.perf_counter() - start < 8.0
    fine = parse_html(page(*(section(n, "Text.") for n in range(1, MAX_SECTIONS))), "2401.00001")
    assert fine.status == "ok"


def test_long_runs_of_space_and_brackets_stay_linear() -> None:
    # a regex that backtracks over a run of white space (" *X" searched where no X follows) takes ~8 s here
    para = ("Text" + " " * 100_000 + "middle" + " " * 100 + '<cite class="ltx_cite">[<a>1</a>]</cite> after. ['
            + "1, " * 300_000)
    start = time.perf_counter()
    result = parse_html(page(section(1, para)), "x")
    assert time.perf_counter() - start < 2.0
    assert result.body is not None and result.body.text.startswith("Text middle after. [1, 1,")


def test_binary_garbage_and_empty_input_are_statuses() -> None:
    noise = random.Random(48).randbytes(200_000)
    assert parse_html(noise, "x").status == "unreadable"
    assert parse_html(b"\x00" * 1000, "x").status == "unreadable"
    assert parse_html(b"", "x").status == "empty"
    assert parse_html("\ud800<html><body><p>lone surrogate</p></body></html>", "x").status == "unreadable"
    assert parse_html("   \n ", "x").status == "empty"
    assert parse_html(page(section(1)), "x").status == "empty"


# --- PDF -----------------------------------------------------------------------------------------------------------

def make_pdf(lines: list[str], *, password: str | None = None, pages: int = 1) -> bytes:
    """A PDF with one text line per entry ("" = a blank line), the lines on each of `pages` pages (a page's number in
    its lines after the first page, so that no line repeats like a running head)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for page in range(pages):
        pdf.add_page()
        for line in lines:
            pdf.cell(0, 5, f"{line} ({page})" if page and line else line, new_x="LMARGIN", new_y="NEXT")
    if password is not None:
        pdf.set_encryption(owner_password="owner", user_password=password)
    return bytes(pdf.output())


PAPER_LINES = [
    "Probing Things at Scale",
    "Jane Doe and John Roe",
    "Abstract",
    "We probe things and report what we find in a short abstract.",
    "1 Introduction",
    "Large language models are widely used for many tasks, e.g. translation and summari-",
    "sation, as shown by Smith et al. (2020) and in Fig. 3 of the state-of-the-",
    "art survey. Their accuracy reached 93.5% on the benchmark of Eq. (2).",
    "",
    "A second paragraph starts here and is about the design of the experiments.",
    "2 Method",
    "2.1 Data",
    "We collected 12,000 examples from the web over three months of crawling.",
    "2.2 Training",
    "Training took 3 days on 8 GPUs with a learning rate of 0.0003.",
    "3 Results",
    "The model improves over the baseline by 4.2 points on average.",
    "References",
    "[1] J. Smith, A. Jones. 2020. A survey of things. Journal of Things 12(3).",
    "A Appendix heading after the references",
    "Text after the references is never part of the body.",
]


def test_a_pdf_gives_paragraphs_in_numbered_sections_without_front_matter_or_references() -> None:
    result = parse_pdf(make_pdf(PAPER_LINES), "2401.00001v2")
    assert result.status == "ok", result.message
    b = result.body
    assert b is not None and (b.paper_id, b.version, b.source) == ("2401.00001", "", "pdf")
    assert [(s.title, s.anchor, s.top) for s in b.sections] == [
        ("1 Introduction", "", "1 Introduction"), ("2 Method", "", "2 Method"), ("2.1 Data", "", "2 Method"),
        ("2.2 Training", "", "2 Method"), ("3 Results", "", "3 Results")]
    texts = passage_texts(b)
    assert "\n\n".join(texts) == b.text
    assert texts[0] == ("Large language models are widely used for many tasks, e.g. translation and summarisation, "
                        "as shown by Smith et al. (2020) and in Fig. 3 of the state-of-the-art survey. Their "
                        "accuracy reached 93.5% on the benchmark of Eq. (2).")
    assert texts[1].startswith("A second paragraph")
    assert [b.sections[p.section].title for p in b.passages][2:] == ["2.1 Data", "2.2 Training", "3 Results"]
    for gone in ("Probing Things", "Jane Doe", "short abstract", "Journal of Things", "never part of the body"):
        assert gone not in b.text


def test_a_numbered_line_out_of_sequence_is_not_a_heading() -> None:
    lines = ["1 Introduction", "We train the model for a long time on many examples and many tokens.",
             "8 GPUs Were Used", "and the run finished in time.", "2 Method", "Text of the method."]
    result = parse_pdf(make_pdf(lines), "x")
    assert result.body is not None
    assert [s.title for s in result.body.sections] == ["1 Introduction", "2 Method"]
    assert "8 GPUs Were Used and the run finished in time." in result.body.text


def test_headings_with_dots_or_questions_and_list_items() -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    rows = [(0, "1 Introduction"), (0, "The main features are:"),
            (0, "- On-line ASN.1 structure management that does not require any generated C code in"),
            (4, "the program that uses it."), (0, "- No limits for integer values."),
            (0, "Text after the list goes on here without a blank line and is long enough to fill."),
            (0, "1.1 What is this spec?"), (0, "It is a short one, v0.21."),
            (0, "2 ASN.1 structure handling"), (0, "The structures are described in a file and read at run time."),
            (0, "3 GPUs were used for the"), (0, "training run of the final model.")]
    for indent, line in rows:
        pdf.set_x(pdf.l_margin + indent)
        pdf.cell(0, 5, line, new_x="LMARGIN", new_y="NEXT")
    result = parse_pdf(bytes(pdf.output()), "x")
    assert result.body is not None
    b = result.body
    assert [s.title for s in b.sections] == ["1 Introduction", "1.1 What is this spec?", "2 ASN.1 structure handling"]
    items = passage_texts(b, "item")
    assert items == ["On-line ASN.1 structure management that does not require any generated C code in the program "
                     "that uses it.", "No limits for integer values."]
    assert "Text after the list goes on here" in passage_texts(b, "paragraph")[1]
    assert "3 GPUs were used for the training run of the final model." in b.text


def test_an_encrypted_pdf_is_unreadable_and_says_so() -> None:
    result = parse_pdf(make_pdf(PAPER_LINES, password="secret"), "2401.00001")
    assert (result.status, result.body) == ("unreadable", None) and "encrypted" in result.message
    # encrypted with an empty user password (permissions only) opens like any PDF
    assert parse_pdf(make_pdf(PAPER_LINES, password=""), "2401.00001").status == "ok"


def test_an_image_only_pdf_is_empty_and_says_so() -> None:
    from fpdf import FPDF
    from PIL import Image

    pdf = FPDF()
    pdf.add_page()
    pdf.image(Image.new("RGB", (400, 300), "white"), x=10, y=10, w=150)
    result = parse_pdf(bytes(pdf.output()), "2401.00001")
    assert (result.status, result.body) == ("empty", None) and "no text layer" in result.message


def test_broken_and_oversized_pdfs_are_statuses_not_exceptions() -> None:
    good = make_pdf(PAPER_LINES)
    for broken in (good[: len(good) // 2], b"%PDF-1.7\n" + random.Random(7).randbytes(5000), b"not a pdf", b""):
        assert parse_pdf(broken, "x").status == "unreadable"
    many = parse_pdf(make_pdf(PAPER_LINES[4:8], pages=MAX_PAGES + 5), "x")
    assert many.status == "ok" and f"first {MAX_PAGES} of {MAX_PAGES + 5} pages" in many.message
    assert many.body is not None and f"({MAX_PAGES - 1})" in many.body.text and f"({MAX_PAGES})" not in many.body.text


def test_an_indented_line_starts_a_paragraph() -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    rows = [(0, "1 Introduction"), (0, "The first paragraph runs over two lines of text and its last line is"),
            (0, "long as well, so that only the indentation can tell where the next one starts here."),
            (6, "The second paragraph is indented by six millimetres, as LaTeX indents paragraphs."),
            (0, "It goes on here.")]
    for indent, line in rows:
        pdf.set_x(pdf.l_margin + indent)
        pdf.cell(0, 5, line, new_x="LMARGIN", new_y="NEXT")
    result = parse_pdf(bytes(pdf.output()), "x")
    assert result.body is not None
    assert passage_texts(result.body) == [
        " ".join(line for _, line in rows[1:3]), " ".join(line for _, line in rows[3:])]


def bomb_pdf(expanded: int) -> bytes:
    """A one-page PDF whose content stream inflates to `expanded` bytes (written by hand: fpdf2 compresses nothing
    this large)."""
    import zlib

    payload = zlib.compress(b"BT /F1 12 Tf 72 720 Td (x) Tj ET\n" + b" " * expanded, 9)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(payload) + payload + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_a_decompression_bomb_is_unreadable_and_quick() -> None:
    small = parse_pdf(bomb_pdf(1000), "x")                          # the same file, small: read
    assert small.body is not None and small.body.text == "x"
    start = time.perf_counter()
    result = parse_pdf(bomb_pdf(80_000_000), "x")                   # inflates past pypdf's 75 MB stream limit
    assert result.status == "unreadable" and "Limit" in result.message
    assert time.perf_counter() - start < 3.0
