"""Full text from arXiv (issue #48, items 1 and 7) through a loopback HTTPS arXiv with real TLS
(tests.fake_arxiv_html): a real LaTeXML page with its version in the URL, the User-Agent, the "no HTML" page, a 404
and a failed conversion falling back to the PDF, and the hostile answers (50 MB, a drip, another paper's page, a
500, a connection cut short, redirects), each ending in a status; the polite gap measured by the server; a
researcher's own files imported. The parsers are doubles defined here (the real ones are tested on their own)."""

from __future__ import annotations

import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from copilot.body import Body, Parsed
from copilot.sources.arxiv_fulltext import USER_AGENT, Fetched, FulltextSource, id_from_file_name, sniff
from tests.conftest import make_settings
from tests.fake_arxiv_html import HTML_DIR, OTHER_ID, FakeArxivHtml, fake_arxiv_html, minimal_pdf  # noqa: F401
from tests.tls import tls_cert  # noqa: F401 (fixture)

PAGE_ID = "2601.22777"             # a shared page
NO_HTML_ID = "2609.00001"          # no shared page: the fake answers arXiv's "no HTML" page


class Reader:
    """Parser doubles: an HTML page is the paper's own when it is byte for byte its shared page; the fake's stub
    and LaTeXML's empty "Untitled Document" are told apart by their titles; a PDF's text is its `(…) Tj` strings."""

    def __init__(self) -> None:
        self.html: list[tuple[str, bytes]] = []
        self.pdf: list[tuple[str, bytes]] = []

    def parse_html(self, page: bytes | str, paper_id: str) -> Parsed:
        data = page.encode() if isinstance(page, str) else page
        self.html.append((paper_id, data))
        if b"<title>No HTML for" in data:
            return Parsed("no_html", message=f"arXiv has no HTML page for {paper_id}.")
        if b"<title>Untitled Document</title>" in data:
            return Parsed("failed", message=f"arXiv's conversion of {paper_id} failed.")
        own = HTML_DIR / f"{paper_id}.html"
        if own.is_file() and data != own.read_bytes():
            return Parsed("wrong_paper", message="The page is another paper's.")
        return Parsed("ok", Body(paper_id, "", "html", data[:200].decode("utf-8", "replace"), (), ()))

    def parse_pdf(self, data: bytes, paper_id: str) -> Parsed:
        self.pdf.append((paper_id, data))
        text = b" ".join(re.findall(rb"\(([^()\\]*)\) Tj", data)).decode("latin-1")
        if not text:
            return Parsed("unreadable", message="The PDF holds no text.")
        return Parsed("ok", Body(paper_id, "", "pdf", text, (), ()))


def source(fake: FakeArxivHtml, tmp_path: Path, reader: Reader, **overrides) -> FulltextSource:
    values = dict(arxiv_html_url=fake.html_url, arxiv_pdf_url=fake.pdf_url, fulltext_delay=0.0)
    values.update(overrides)
    return FulltextSource(make_settings(tmp_path / "data", **values), parse_html=reader.parse_html,
                          parse_pdf=reader.parse_pdf)


def timed(call, limit: float) -> tuple[Fetched | None, float]:
    """`call()` on a thread, given `limit` seconds (a planted bug must fail the test, not hang it)."""
    out: list[Fetched] = []
    start = time.monotonic()
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    worker.start()
    worker.join(limit)
    return (out[0] if out else None), time.monotonic() - start


# --- a real page, the stub, the fallback

def test_a_real_page_is_read_with_its_version_and_the_apps_user_agent(fake_arxiv_html, tmp_path):
    reader = Reader()
    got = source(fake_arxiv_html, tmp_path, reader).fetch(f"arXiv:{PAGE_ID}", "v2")
    assert (got.status, got.source, got.paper_id, got.version) == ("ok", "html", PAGE_ID, "v2")
    assert got.parsed is not None and got.parsed.body is not None
    assert fake_arxiv_html.paths() == [f"/html/{PAGE_ID}v2"]
    assert reader.html == [(PAGE_ID, (HTML_DIR / f"{PAGE_ID}.html").read_bytes())]
    assert fake_arxiv_html.seen[0].user_agent == USER_AGENT and "ResearchCopilot/" in USER_AGENT
    assert reader.pdf == []


def test_the_version_inside_the_id_is_used_when_none_is_given(fake_arxiv_html, tmp_path):
    got = source(fake_arxiv_html, tmp_path, Reader()).fetch(f"https://arxiv.org/abs/{PAGE_ID}v3")
    assert got.status == "ok" and fake_arxiv_html.paths() == [f"/html/{PAGE_ID}v3"]


def test_the_no_html_page_falls_back_to_the_pdf(fake_arxiv_html, tmp_path):
    fake_arxiv_html.pdfs[NO_HTML_ID] = minimal_pdf("We train for 30 epochs on 4 GPUs.")
    reader = Reader()
    got = source(fake_arxiv_html, tmp_path, reader).fetch(NO_HTML_ID, "v1")
    assert (got.status, got.source) == ("ok", "pdf")
    assert got.parsed is not None and got.parsed.body is not None
    assert got.parsed.body.text == "We train for 30 epochs on 4 GPUs."
    assert fake_arxiv_html.paths() == [f"/html/{NO_HTML_ID}v1", f"/pdf/{NO_HTML_ID}v1"]
    assert "no HTML page" in got.message and "PDF" in got.message
    assert [ua.user_agent for ua in fake_arxiv_html.seen] == [USER_AGENT, USER_AGENT]


def test_an_old_style_id_keeps_its_archive_in_the_url(fake_arxiv_html, tmp_path):
    fake_arxiv_html.pdfs["hep-th/9901001"] = minimal_pdf("An old paper.")
    got = source(fake_arxiv_html, tmp_path, Reader()).fetch("hep-th/9901001v2")
    assert (got.paper_id, got.status, got.source) == ("hep-th/9901001", "ok", "pdf")
    assert fake_arxiv_html.paths() == ["/html/hep-th/9901001v2", "/pdf/hep-th/9901001v2"]


def test_no_html_and_no_pdf_says_both(fake_arxiv_html, tmp_path):
    got = source(fake_arxiv_html, tmp_path, Reader()).fetch(NO_HTML_ID)
    assert got.status == "not_found" and got.parsed is None
    assert "no HTML page" in got.message and "no PDF" in got.message


@pytest.mark.parametrize("mode", ["missing", "failed"])
def test_a_404_or_a_failed_conversion_falls_back_to_the_pdf(fake_arxiv_html, tmp_path, mode):
    fake_arxiv_html.hostile[PAGE_ID] = mode
    fake_arxiv_html.pdfs[PAGE_ID] = minimal_pdf("Table 2 reports a BLEU of 31.4.")
    got = source(fake_arxiv_html, tmp_path, Reader()).fetch(PAGE_ID)
    assert (got.status, got.source) == ("ok", "pdf")
    assert fake_arxiv_html.paths() == [f"/html/{PAGE_ID}", f"/pdf/{PAGE_ID}"]
    assert ("HTTP 404" if mode == "missing" else "conversion") in got.message


def test_a_pdf_that_is_not_one_or_has_no_text_is_unreadable(fake_arxiv_html, tmp_path):
    fake_arxiv_html.pdfs[NO_HTML_ID] = b"<html>a login page</html>"
    got = source(fake_arxiv_html, tmp_path, Reader()).fetch(NO_HTML_ID)
    assert got.status == "unreadable" and "not a PDF" in got.message
    fake_arxiv_html.pdfs[NO_HTML_ID] = minimal_pdf("").replace(b"() Tj", b"")
    assert source(fake_arxiv_html, tmp_path, Reader()).fetch(NO_HTML_ID).status == "unreadable"


# --- hostile answers

def test_a_50_mb_page_is_refused_quickly_without_reading_it(fake_arxiv_html, tmp_path):
    fake_arxiv_html.hostile[PAGE_ID] = "huge"
    reader = Reader()
    got, took = timed(lambda: source(fake_arxiv_html, tmp_path, reader).fetch(PAGE_ID), 20)
    assert got is not None and got.status == "too_large", got
    assert took < 3 and "20 MB" in got.message
    assert reader.html == [] and fake_arxiv_html.paths() == [f"/html/{PAGE_ID}"]    # no PDF either
    time.sleep(0.2)
    assert fake_arxiv_html.sent[f"/html/{PAGE_ID}"] < 20 * 2 ** 20


def test_a_50_mb_page_without_a_length_is_read_only_to_the_cap(fake_arxiv_html, tmp_path):
    fake_arxiv_html.hostile[PAGE_ID] = "huge_unsized"
    got, took = timed(lambda: source(fake_arxiv_html, tmp_path, Reader(), fulltext_max_mb=2).fetch(PAGE_ID), 20)
    assert got is not None and got.status == "too_large", got
    assert took < 3
    time.sleep(0.2)
    assert fake_arxiv_html.sent[f"/html/{PAGE_ID}"] < 25 * 2 ** 20


def test_a_drip_ends_at_the_deadline(fake_arxiv_html, tmp_path):
    fake_arxiv_html.hostile[PAGE_ID] = "drip"
    got, took = timed(lambda: source(fake_arxiv_html, tmp_path, Reader(), arxiv_timeout=2.0).fetch(PAGE_ID), 8)
    assert got is not None and got.status == "timeout", got
    assert 1.9 < took < 3.0 and "2 s" in got.message
    assert fake_arxiv_html.paths() == [f"/html/{PAGE_ID}"]


def test_a_dripping_pdf_after_the_no_html_page_ends_at_its_deadline_and_says_both(fake_arxiv_html, tmp_path):
    fake_arxiv_html.hostile[NO_HTML_ID] = "drip_pdf"
    fake_arxiv_html.pdfs[NO_HTML_ID] = minimal_pdf("never read in full")
    got, took = timed(lambda: source(fake_arxiv_html, tmp_path, Reader(), arxiv_timeout=1.5).fetch(NO_HTML_ID), 8)
    assert got is not None and (got.status, got.source) == ("timeout", "pdf"), got
    assert 1.4 < took < 2.5
    assert "no HTML page" in got.message and "Its PDF: arXiv did not send it within 1.5 s" in got.message


def test_another_papers_page_is_not_used(fake_arxiv_html, tmp_path):
    fake_arxiv_html.hostile[PAGE_ID] = "other"
    fake_arxiv_html.pdfs[PAGE_ID] = minimal_pdf("never read")
    reader = Reader()
    got = source(fake_arxiv_html, tmp_path, reader).fetch(PAGE_ID)
    assert (got.status, got.source) == ("wrong_paper", "html")
    assert reader.pdf == [] and fake_arxiv_html.paths() == [f"/html/{PAGE_ID}"]


def test_a_redirect_to_another_papers_page_is_not_used(fake_arxiv_html, tmp_path):
    fake_arxiv_html.hostile[NO_HTML_ID] = "redirect_other"
    reader = Reader()
    got = source(fake_arxiv_html, tmp_path, reader).fetch(NO_HTML_ID)
    assert got.status == "wrong_paper" and OTHER_ID in got.message
    assert reader.html == []
    assert fake_arxiv_html.paths() == [f"/html/{NO_HTML_ID}", f"/html/{OTHER_ID}"]


def test_a_redirect_to_another_papers_pdf_is_not_used(fake_arxiv_html, tmp_path):
    fake_arxiv_html.hostile[NO_HTML_ID] = "redirect_other_pdf"
    fake_arxiv_html.pdfs[OTHER_ID] = minimal_pdf("another paper")
    reader = Reader()
    got = source(fake_arxiv_html, tmp_path, reader).fetch(NO_HTML_ID)
    assert (got.status, got.source) == ("wrong_paper", "pdf") and OTHER_ID in got.message, got
    assert reader.pdf == []
    assert fake_arxiv_html.paths() == [f"/html/{NO_HTML_ID}", f"/pdf/{NO_HTML_ID}", f"/pdf/{OTHER_ID}"]


def test_a_paused_route_is_not_asked_and_the_answer_says_which_host(fake_arxiv_html, tmp_path):
    fake_arxiv_html.pdfs[NO_HTML_ID] = minimal_pdf("never read")
    reader = Reader()
    client = source(fake_arxiv_html, tmp_path, reader)
    got = client.fetch(NO_HTML_ID, skip={"pdf": "pdf.example (PDFs) could not be reached a moment ago"})
    assert (got.status, got.source) == ("unreachable", "pdf") and "pdf.example (PDFs)" in got.message, got
    assert fake_arxiv_html.paths() == [f"/html/{NO_HTML_ID}"] and reader.pdf == []
    got = client.fetch(PAGE_ID, skip={"html": "html.example (HTML pages) could not be reached a moment ago"})
    assert (got.status, got.source) == ("unreachable", "html") and "html.example" in got.message
    assert fake_arxiv_html.paths() == [f"/html/{NO_HTML_ID}"]
    assert client.fetch(PAGE_ID, skip={"pdf": "down"}).status == "ok"           # a page with HTML needs no PDF


def test_the_time_spent_parsing_is_kept_apart_from_the_fetch(fake_arxiv_html, tmp_path):
    reader = Reader()

    def slow(page: bytes | str, paper_id: str) -> Parsed:
        time.sleep(0.3)
        return reader.parse_html(page, paper_id)

    client = FulltextSource(make_settings(tmp_path / "data", arxiv_html_url=fake_arxiv_html.html_url,
                                          arxiv_pdf_url=fake_arxiv_html.pdf_url, fulltext_delay=0.0), parse_html=slow)
    got = client.fetch(PAGE_ID)
    assert got.status == "ok" and 0.3 <= got.parse_s < 1.0


def test_a_redirect_to_another_host_is_not_followed(fake_arxiv_html, tmp_path):
    fake_arxiv_html.hostile[PAGE_ID] = "redirect_away"
    got = source(fake_arxiv_html, tmp_path, Reader()).fetch(PAGE_ID)
    assert got.status == "unreachable" and "localhost" in got.message
    assert fake_arxiv_html.paths() == [f"/html/{PAGE_ID}"]


@pytest.mark.parametrize("mode, said", [("error", "HTTP 500"), ("cut", "ended early")])
def test_a_server_error_or_a_cut_connection_is_unreachable(fake_arxiv_html, tmp_path, mode, said):
    fake_arxiv_html.hostile[PAGE_ID] = mode
    reader = Reader()
    got = source(fake_arxiv_html, tmp_path, reader).fetch(PAGE_ID)
    assert got.status == "unreachable" and said in got.message, got
    assert reader.html == [] and fake_arxiv_html.paths() == [f"/html/{PAGE_ID}"]


def test_a_parser_that_raises_is_unreadable_not_an_exception(fake_arxiv_html, tmp_path):
    def broken(page, paper_id):
        raise RecursionError("maximum recursion depth exceeded")
    got = FulltextSource(make_settings(tmp_path / "data", arxiv_html_url=fake_arxiv_html.html_url,
                                       arxiv_pdf_url=fake_arxiv_html.pdf_url, fulltext_delay=0.0),
                         parse_html=broken, parse_pdf=Reader().parse_pdf).fetch(PAGE_ID)
    assert got.status == "not_found" and "RecursionError" in got.message     # fell back; no PDF there


@pytest.mark.parametrize("said", [Parsed("ok"), Parsed("fine", Body(PAGE_ID, "", "html", "x", (), ()))])
def test_a_parser_breaking_its_contract_is_unreadable(tmp_path, said):
    page = tmp_path / f"{PAGE_ID}.html"
    shutil.copy(HTML_DIR / page.name, page)
    fulltext = FulltextSource(make_settings(tmp_path / "data"), parse_html=lambda data, paper_id: said,
                              parse_pdf=Reader().parse_pdf)
    got = fulltext.import_file(page)
    assert (got.status, got.source) == ("unreadable", "html") and got.parsed is not None
    assert got.parsed.body is None


def test_not_an_id_and_an_unreachable_arxiv(tmp_path):
    reader = Reader()
    with_nothing = make_settings(tmp_path / "data", arxiv_html_url="https://127.0.0.1:9/html/",
                                 arxiv_pdf_url="https://127.0.0.1:9/pdf/", fulltext_delay=0.0)
    fulltext = FulltextSource(with_nothing, parse_html=reader.parse_html, parse_pdf=reader.parse_pdf)
    assert fulltext.fetch("../../etc/passwd").status == "not_found"
    got = fulltext.fetch(PAGE_ID)
    assert got.status == "unreachable" and "could not be reached" in got.message


# --- politeness

def test_requests_wait_their_turn_and_the_gap(fake_arxiv_html, tmp_path):
    fulltext = source(fake_arxiv_html, tmp_path, Reader(), fulltext_delay=0.3)
    ids = ["2503.15484", "2605.25931", "2601.22777"]
    workers = [threading.Thread(target=fulltext.fetch, args=(paper_id,)) for paper_id in ids]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(20)
    arrivals = sorted(seen.at for seen in fake_arxiv_html.seen)
    assert len(arrivals) == 3
    gaps = [later - earlier for earlier, later in zip(arrivals, arrivals[1:])]
    assert min(gaps) >= 0.3, gaps


# --- a researcher's own files

def test_import_dir_reads_pages_and_pdfs_by_content_and_reports_the_rest(tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    shutil.copy(HTML_DIR / f"{PAGE_ID}.html", folder / f"{PAGE_ID}.html")
    (folder / "2609.00001v2.pdf").write_bytes(minimal_pdf("Our ablation removes the retriever."))
    (folder / "2609.00002.html").write_bytes(minimal_pdf("A PDF saved under the wrong name."))
    (folder / "hep-th_9901001.pdf").write_bytes(minimal_pdf("An old-style id."))
    (folder / "2609.00003.pdf").write_bytes(b"\x00\x9f garbage \xff" * 100)
    (folder / "2609.00004.pdf").write_bytes(b"")
    (folder / "2609.00005.pdf").write_bytes(b"%PDF-1.4\n" + b"0" * (3 * 2 ** 20))
    (folder / "notes.txt").write_text("my notes")
    (folder / ".hidden.pdf").write_bytes(minimal_pdf("hidden"))
    (folder / "2609.00006v1.html").mkdir()
    reader = Reader()
    fulltext = FulltextSource(make_settings(tmp_path / "data", fulltext_max_mb=2), parse_html=reader.parse_html,
                              parse_pdf=reader.parse_pdf)
    got = {f.file: f for f in fulltext.import_dir(folder)}
    assert set(got) == {f"{PAGE_ID}.html", "2609.00001v2.pdf", "2609.00002.html", "hep-th_9901001.pdf",
                        "2609.00003.pdf", "2609.00004.pdf", "2609.00005.pdf", "notes.txt", "2609.00006v1.html"}
    summary = {name: (f.paper_id, f.version, f.status, f.source) for name, f in got.items()}
    assert summary[f"{PAGE_ID}.html"] == (PAGE_ID, "", "ok", "html")
    assert summary["2609.00001v2.pdf"] == ("2609.00001", "v2", "ok", "pdf")
    assert summary["2609.00002.html"] == ("2609.00002", "", "ok", "pdf")
    assert summary["hep-th_9901001.pdf"] == ("hep-th/9901001", "", "ok", "pdf")
    assert summary["2609.00003.pdf"][2] == "unreadable" and "neither" in got["2609.00003.pdf"].message
    assert summary["2609.00004.pdf"][2] == "empty"
    assert summary["2609.00005.pdf"][2] == "too_large"
    assert summary["notes.txt"] == ("", "", "unreadable", "") and "arXiv id" in got["notes.txt"].message
    assert summary["2609.00006v1.html"][2] == "unreadable"
    assert {paper_id for paper_id, _ in reader.pdf} == {"2609.00001", "2609.00002", "hep-th/9901001"}
    assert [paper_id for paper_id, _ in reader.html] == [PAGE_ID]


def test_import_dir_of_a_missing_folder_says_so(tmp_path):
    fulltext = FulltextSource(make_settings(tmp_path / "data"), parse_html=Reader().parse_html,
                              parse_pdf=Reader().parse_pdf)
    [got] = fulltext.import_dir(tmp_path / "nowhere")
    assert got.status == "not_found" and "nowhere" in got.message


def test_file_names_and_sniffing():
    assert id_from_file_name("2601.22777v2.pdf") == ("2601.22777", "v2")
    assert id_from_file_name("2601.22777.HTML") == ("2601.22777", "")
    assert id_from_file_name("cs.CL_0101001v1.pdf") == ("cs.CL/0101001", "v1")
    assert id_from_file_name("2601.22777.failed.html") is None
    assert id_from_file_name("paper.pdf") is None
    assert sniff(b"\xef\xbb\xbf\n<!DOCTYPE html><html>") == "html"
    assert sniff(b"junk before the header %PDF-1.7") == "pdf"
    assert sniff(b"<?xml version='1.0'?><feed/>") == ""
