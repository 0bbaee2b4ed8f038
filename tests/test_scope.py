"""A question about chosen papers (issue #57 item 2), integration tier: the real embedder, parser, stores, Chat and
the CLI, a loopback HTTPS arXiv serving the shared LaTeXML pages (tests/fake_arxiv_html.py) and a loopback arXiv API
(tests/fake_arxiv.py).

A scoped question is answered from the chosen papers only, as one answer that says so: the abstract rows at once,
then the body's passages once it is read, several per paper, each with its section, slices of the stored text.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from copilot.features import fulltext
from copilot.features.chat import Chat
from copilot.features.library import ingestor
from copilot.features.scope import ScopeError
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row
from copilot.table import ABSTRACT, BODY, verbatim
from tests.conftest import make_settings
from tests.fake_arxiv import fake_arxiv  # noqa: F401 (fixture)
from tests.fake_arxiv_html import HTML_DIR, FakeArxivHtml, fake_arxiv_html  # noqa: F401 (fixture)
from tests.helpers import PAPERS_JSONL, run_cli_in_process
from tests.tls import tls_cert  # noqa: F401 (fixture)

RASST = "2601.22777"
OTHER = "2503.15484"
# asked across the library, this question's table is other papers' (terminology and glossaries in general)
QUESTION = "How many unique terms does the glossary contain after deduplication?"
ANSWER = re.compile(r"238\s+unique\s+terms")
DISTRACTORS = 120


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The ten shared papers and the corpus's first DISTRACTORS papers, embedded once."""
    data_dir = tmp_path_factory.mktemp("scope-library")
    rows = [json.loads(line) for line in (HTML_DIR / "papers.jsonl").read_text(encoding="utf-8").splitlines()]
    with PAPERS_JSONL.open(encoding="utf-8") as lines:
        rows += [json.loads(next(lines)) for _ in range(DISTRACTORS)]
    services = Services(make_settings(data_dir))
    ingestor(services).run("test scope", [paper_from_row(row) for row in rows])
    return data_dir


def services_over(library, tmp_path, fake: FakeArxivHtml | None = None, **overrides) -> Services:
    data_dir = tmp_path / "data"
    shutil.copytree(library, data_dir)
    urls = dict(arxiv_html_url=fake.html_url, arxiv_pdf_url=fake.pdf_url) if fake else {}
    return Services(make_settings(data_dir, **{"fulltext_delay": 0.0, "fulltext_reading": True, **urls, **overrides}))


def test_a_scoped_question_is_one_answer_from_its_paper_at_once_then_from_its_body(library, tmp_path,
                                                                                   fake_arxiv_html, monkeypatch):
    monkeypatch.setattr(fulltext, "WAIT_S", 300.0)     # reading took up to 22 s under load: not a timing test
    services = services_over(library, tmp_path, fake_arxiv_html)
    chat = Chat(services)
    across = chat.prepare(QUESTION, "ann")
    assert RASST not in [item.id for item in across.answers[0].sources[:1]], "the library's answer is another's"

    turn = chat.prepare(QUESTION, "ann", papers=[f"https://arxiv.org/abs/{RASST}v1"])
    assert turn.scope == (RASST,) and len(turn.answers) == 1 and turn.comparison == "same_items"
    assert [item.id for item in turn.answers[0].sources] == [RASST]
    assert "Asked about this paper only" in turn.notice and "thought memory" in turn.notice
    finished = []
    for live in chat.stream(turn):
        if live.done:
            finished.append((live.answers[0].table, live.notice))
    first, notice = finished[0]           # at once: the paper's abstract, and it is being read
    assert first is not None and first.paper_ids == [RASST]
    assert all(q.source == ABSTRACT for q in first.rows[0].quotes)
    assert "Reading the full text of 1 paper" in notice and "Asked about this paper only" in notice
    table, notice = finished[-1]          # then its body's passages that answer it, with their sections
    assert table is not None and table.paper_ids == [RASST]
    quotes = table.rows[0].quotes
    body = [q for q in quotes if q.source == BODY]
    assert len(quotes) >= 2 and body, [q.shown for q in quotes]
    assert any(ANSWER.search(q.shown) for q in body), [q.shown for q in quotes]
    assert all(q.section and q.anchor for q in body)
    stored = services.fulltext.get([RASST], services.embedder.name)[RASST]
    assert all(verbatim(q, stored.body.text) for q in body)
    assert services.chat_log.turn(turn.id).comparison == "same_items"


def test_ask_paper_on_the_command_line_answers_from_the_chosen_papers_in_order(library, tmp_path, capsys,
                                                                               monkeypatch):
    services = services_over(library, tmp_path)
    folder = tmp_path / "pages"
    folder.mkdir()
    shutil.copy(HTML_DIR / f"{RASST}.html", folder / f"{RASST}.html")
    monkeypatch.setenv("COPILOT_DATA_DIR", str(services.settings.data_dir))
    monkeypatch.setenv("COPILOT_FULLTEXT_READING", "false")
    code, report, _ = run_cli_in_process(capsys, "fulltext", "import", str(folder), "--json")
    assert code == 0 and report is not None and report["papers"][0]["status"] == "ok"

    code, record, _ = run_cli_in_process(capsys, "ask", QUESTION, "--paper", OTHER, "--paper",
                                         f"arXiv:{RASST}", "--json")
    assert code == 0 and record is not None
    assert record["scope"] == [OTHER, RASST] and "these 2 papers only" in record["notice"]
    assert len(record["answers"]) == 1
    answer = record["answers"][0]
    assert [source["id"] for source in answer["sources"]] == [OTHER, RASST]
    text = answer["text"]
    assert text.index(RASST) > text.index(OTHER), "the rows in the order chosen"
    assert ANSWER.search(text[text.index(RASST):]) and f"arxiv.org/html/{RASST}" in text, text

    code, _, err = run_cli_in_process(capsys, "ask", QUESTION, *sum((["--paper", f"2601.0000{n}"]
                                                                    for n in range(6)), []), "--json")
    assert code != 0 and "at most 5 papers" in err


def test_a_chosen_paper_the_library_lacks_is_fetched_from_arxiv_and_an_unknown_one_is_refused(library, tmp_path,
                                                                                            fake_arxiv):
    services = services_over(library, tmp_path, arxiv_api_url=fake_arxiv.url, fulltext_reading=False)
    chat = Chat(services)
    assert services.store.get_papers(["1605.08386"]) == []
    turn = chat.prepare("What does this paper measure?", "ann", papers=["1605.08386"])
    assert turn.scope == ("1605.08386",) and "Added to the library from arXiv: 1605.08386" in turn.notice
    assert [item.id for item in turn.answers[0].sources] == ["1605.08386"]
    with pytest.raises(ScopeError, match="arXiv has no paper 0000.0000"):
        chat.prepare("What does this paper measure?", "ann", papers=["0000.0000"])
