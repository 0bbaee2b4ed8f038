"""A researcher's own PDF (issue #57 item 3), integration tier: the real PDF reader in its child process, the real
embedder, stores, Chat and the CLI. A PDF made here from a real paper's text (tests/document_pdfs.py) becomes a
private document of its uploader: asked about, its quotes name their page and no arXiv address; another visitor can
neither list, scope, ask nor delete it; deleting it deletes its sentences and vectors; a hostile or unreadable file
is refused with a status saying why, within the reader's limits.
"""

from __future__ import annotations

import re
import time

import pytest

from copilot.features import documents
from copilot.features.chat import Chat
from copilot.features.scope import ScopeError
from copilot.methods.evidence_text import render_table, table_csv, table_markdown
from copilot.services import Services
from copilot.sources.fulltext_sandbox import Limits
from copilot.table import BODY, verbatim
from tests.conftest import import_papers, make_settings
from tests.document_pdfs import paper_pdf
from tests.helpers import run_cli_in_process
from tests.test_fulltext_parse import PAPER_LINES, make_pdf
from tests.test_fulltext_sandbox import shared_stream_pdf

RASST = "2601.22777"
QUESTION = "How many unique terms does the glossary contain after deduplication?"
ANSWER = re.compile(r"238\s+unique\s+terms")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """A small library (Chat asks nothing of an empty one) and its data dir."""
    data_dir = tmp_path_factory.mktemp("documents") / "data"
    services = Services(make_settings(data_dir))
    import_papers(services, 20)
    return services


def test_an_uploaded_pdf_is_asked_with_page_numbered_quotes_and_is_its_owners_alone(library):
    services = library
    data, pages = paper_pdf(RASST, title="Glossary-aided speech translation (my draft)")
    done = documents.upload(services, "ann", data, "draft.pdf")
    assert done.status == "ok", done.message
    doc = done.document
    assert doc is not None and doc.title == "Glossary-aided speech translation (my draft)" and doc.pages == pages
    assert "private to you" in done.message
    papers_before = services.store.count("paper")

    chat = Chat(services)
    turn = chat.prepare(QUESTION, "ann", papers=[doc.item_id])
    assert turn.scope == (doc.item_id,) and len(turn.answers) == 1
    assert "Asked about this paper only" in turn.notice and doc.title in turn.notice
    for _ in chat.stream(turn):
        pass
    table = turn.answers[0].table
    assert table is not None and table.paper_ids == [doc.item_id]
    row = table.rows[0]
    body = documents.stored_body(services, "ann", doc.item_id)
    assert body is not None
    assert all(q.source == BODY and verbatim(q, body.body.text) for q in row.quotes)
    answering = [q for q in row.quotes if ANSWER.search(q.shown)]
    assert answering, [q.shown for q in row.quotes]
    assert all(re.fullmatch(r"p\. \d+", q.section) and not q.anchor for q in row.quotes)
    page = int(answering[0].section.split()[1])
    assert 1 <= page <= pages
    shown = "".join(render_table(table))
    assert f"(p. {page}" in shown and "\u00a7p." not in shown and "arXiv:" not in shown
    assert shown.startswith("Evidence from the 1 paper asked about:") and "library" not in shown
    for text in (shown, table_csv(QUESTION, table), table_markdown(QUESTION, table)):
        assert "arxiv.org" not in text
    assert chat.thought_jobs(turn.id) == []                  # thought memory keeps nothing of it
    assert services.store.count("paper") == papers_before    # nor does the library's search

    # another visitor: nothing to list, scope, ask or delete
    assert documents.documents_of(services, "bob") == []
    with pytest.raises(ScopeError, match="No document"):
        chat.prepare(QUESTION, "bob", papers=[doc.item_id])
    with pytest.raises(documents.DocumentError):
        documents.delete(services, "bob", doc.item_id)
    across = chat.prepare(QUESTION, "bob")
    assert doc.item_id not in [item.id for answer in across.answers for item in answer.sources]
    assert [d.item_id for d in documents.documents_of(services, "ann")] == [doc.item_id]

    # deleting it deletes its sentences and their vectors
    assert "Deleted" in documents.delete(services, "ann", doc.item_id)
    left = services.db.query_one("SELECT COUNT(*) AS n FROM document_sentences WHERE document_id = ?", (doc.id,))
    assert left == {"n": 0} and documents.documents_of(services, "ann") == []
    with pytest.raises(ScopeError):
        chat.prepare(QUESTION, "ann", papers=[doc.item_id])


def test_files_that_are_no_readable_pdf_are_refused_with_a_status_saying_why(library, monkeypatch):
    services = library
    refused = {
        "encrypted": (make_pdf(PAPER_LINES, password="secret"), "unreadable", "encrypted"),
        "not a pdf": (b"<html>not a pdf</html>", "unreadable", "not a PDF"),
    }
    from fpdf import FPDF
    from PIL import Image

    scan = FPDF()
    scan.add_page()
    scan.image(Image.new("RGB", (400, 300), "white"), x=10, y=10, w=150)
    refused["image-only"] = (bytes(scan.output()), "empty", "no text layer")
    for name, (data, status, said) in refused.items():
        done = documents.upload(services, "cat", data, f"{name}.pdf")
        assert (done.status, done.document) == (status, None), name
        assert said in done.message and done.message.startswith("Not kept"), done.message
    monkeypatch.setattr(documents, "MAX_PDF_BYTES", 1000)
    done = documents.upload(services, "cat", make_pdf(PAPER_LINES), "big.pdf")
    assert done.status == "too_large" and "at most" in done.message
    assert documents.documents_of(services, "cat") == []


def test_a_hostile_pdf_is_refused_within_its_limits(library):
    limits = Limits(cpu_s=2.0, wall_s=20.0, memory_mb=1024)
    started = time.monotonic()
    done = documents.upload(library, "dan", shared_stream_pdf(40), "slow.pdf", limits)
    elapsed = time.monotonic() - started
    assert done.status == "too_costly" and done.document is None, done.message
    assert "CPU" in done.message or "longer than" in done.message
    assert elapsed < limits.wall_s + 5
    assert documents.documents_of(library, "dan") == []


def test_fulltext_import_of_a_pdf_not_named_by_an_arxiv_id_makes_a_private_document(library, tmp_path, capsys,
                                                                                   monkeypatch):
    monkeypatch.setenv("COPILOT_DATA_DIR", str(library.settings.data_dir))
    path = tmp_path / "my draft.pdf"
    path.write_bytes(make_pdf(PAPER_LINES[:17], pages=2))
    code, out, _ = run_cli_in_process(capsys, "fulltext", "import", str(path), "--user", "eve", "--json")
    assert code == 0 and out is not None and out["status"] == "ok" and out["user"] == "eve"
    item_id = out["document"]["id"]
    assert [d.item_id for d in documents.documents_of(library, "eve")] == [item_id]
    assert documents.documents_of(library, "local") == []
    code, out, _ = run_cli_in_process(capsys, "ask", "What learning rate was used for training?", "--paper", item_id,
                                      "--user", "eve", "--json")
    assert code == 0 and out is not None
    assert "0.0003" in out["answers"][0]["text"] and "(p. " in out["answers"][0]["text"], out["answers"][0]["text"]
    code, out, err = run_cli_in_process(capsys, "ask", "What learning rate?", "--paper", item_id, "--json")
    assert code != 0 and "No document" in err           # the local user is not its owner


def test_a_question_about_a_document_never_asks_arxiv_for_it(library, monkeypatch):
    """With full-text reading on, a scoped question's papers are read from arXiv: an uploaded document is not (it
    is read already, and its id means nothing there)."""
    from copilot.features import fulltext

    services = Services(make_settings(library.settings.data_dir, fulltext_reading=True, fulltext_delay=0.0,
                                      arxiv_html_url="http://127.0.0.1:9/html/", arxiv_pdf_url="http://127.0.0.1:9/pdf/"))
    done = documents.upload(services, "fay", make_pdf(PAPER_LINES[:17], pages=2), "notes.pdf")
    assert done.document is not None
    monkeypatch.setattr(fulltext, "WAIT_S", 2.0)
    chat = Chat(services)
    turn = chat.prepare("What learning rate was used for training?", "fay", papers=[done.document.item_id])
    for _ in chat.stream(turn):
        pass
    assert "Reading the full text" not in turn.notice and "Not read" not in turn.notice, turn.notice
    assert services.fulltext.readings([done.document.item_id]) == {}
