"""Full text through the product (issue #48), integration tier: the real parser, the real embedder, Chat, the
stores and the CLI, against a loopback HTTPS arXiv serving the shared LaTeXML pages (tests/fake_arxiv_html.py).

A question about a paper's body is answered from abstracts at once while the paper is read in the background; asked
again, the paper's row quotes the body sentence that answers, with its section and anchor, a slice of the stored
body. A page that cannot be read leaves a status, no body, and the abstract answer.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import tarfile

import pytest

from copilot.features import fulltext
from copilot.features.answers import answer_tables
from copilot.features.chat import Chat
from copilot.features.library import ingestor
from copilot.methods import evidence, evidence_text
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row
from copilot.store.backup import write_snapshot
from copilot.table import BODY, verbatim
from tests.conftest import make_settings
from tests.fake_arxiv_html import HTML_DIR, FakeArxivHtml, fake_arxiv_html  # noqa: F401
from tests.helpers import PAPERS_JSONL, run_cli_in_process
from tests.tls import tls_cert  # noqa: F401 (fixture)

RASST = "2601.22777"
QUESTION = "How many unique terms does the ACL 60/60 glossary that RASST retrieves from contain?"
ANSWER = re.compile(r"238\s+unique\s+terms")
DISTRACTORS = 120
SEVERAL = "Which simultaneous speech translation systems retrieve terminology, and how large is their glossary?"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The ten shared papers and the corpus's first DISTRACTORS papers, embedded once."""
    data_dir = tmp_path_factory.mktemp("fulltext-library")
    rows = [json.loads(line) for line in (HTML_DIR / "papers.jsonl").read_text(encoding="utf-8").splitlines()]
    with PAPERS_JSONL.open(encoding="utf-8") as lines:
        rows += [json.loads(next(lines)) for _ in range(DISTRACTORS)]
    services = Services(make_settings(data_dir))
    ingestor(services).run("test fulltext", [paper_from_row(row) for row in rows])
    return data_dir


def services_over(library, tmp_path, fake: FakeArxivHtml | None = None, **overrides) -> Services:
    data_dir = tmp_path / "data"
    shutil.copytree(library, data_dir)
    urls = dict(arxiv_html_url=fake.html_url, arxiv_pdf_url=fake.pdf_url) if fake else {}
    return Services(make_settings(data_dir, fulltext_delay=0.0, fulltext_reading=True, **urls, **overrides))


def rasst_row(services: Services, chat: Chat, question: str = QUESTION):
    turn = chat.prepare(question, "ann")
    tables = answer_tables(services, turn.question, [a.sources for a in turn.answers], turn.ranking)
    rows = [row for row in tables[0].rows if row.paper_id == RASST]
    return turn, tables, rows[0] if rows else None


def test_a_question_is_answered_from_abstracts_at_once_then_from_the_body_once_read(library, tmp_path,
                                                                                     fake_arxiv_html, monkeypatch):
    monkeypatch.setattr(fulltext, "WAIT_S", 300.0)     # reading took up to 22 s under load: not a timing test
    services = services_over(library, tmp_path, fake_arxiv_html)
    chat = Chat(services)
    turn = chat.prepare(QUESTION, "ann")
    finished = []                     # (tables, notice) each time both answers are done
    for live in chat.stream(turn):
        if live.done:
            finished.append(([a.table for a in live.answers], live.notice))
    tables, notice = finished[0]       # shown at once: from abstracts, the papers being read
    assert "Reading the full text of" in notice
    assert all(q.source != BODY for table in tables if table for row in table.rows for q in row.quotes)
    assert any(table and RASST in table.paper_ids for table in tables), "the paper is a row from its abstract"
    tables, notice = finished[-1]      # then updated in place, both sides alike
    assert "Read the full text of" in notice, notice
    assert f"/html/{RASST}v" in " ".join(fake_arxiv_html.paths())         # at the library's version
    updated = [row for table in tables if table for row in table.rows if row.paper_id == RASST]
    assert updated and all(any(q.source == BODY and ANSWER.search(q.shown) for q in row.quotes) for row in updated)
    stored_turn = services.chat_log.turn(turn.id)
    assert stored_turn is not None and stored_turn.raw.table is not None
    assert any(q.source == BODY for row in stored_turn.raw.table.rows for q in row.quotes), "the turn keeps it"

    _, tables, row = rasst_row(services, chat)
    assert row is not None
    body_quotes = [q for q in row.quotes if q.source == BODY]
    assert body_quotes and any(ANSWER.search(q.shown) for q in body_quotes), [q.shown for q in row.quotes]
    quote = next(q for q in body_quotes if ANSWER.search(q.shown))
    assert quote.section.startswith("4.1") and quote.anchor.startswith("S4")
    stored = services.fulltext.get([RASST], services.embedder.name)[RASST]
    assert verbatim(quote, stored.body.text)
    text = "".join(evidence_text.render_table(tables[0]))
    assert f"\u00a7{quote.section} \u00b7 arxiv.org/html/{RASST}" in text


def test_a_page_that_cannot_be_read_leaves_a_status_no_body_and_the_abstract_answer(library, tmp_path,
                                                                                      fake_arxiv_html):
    fake_arxiv_html.hostile[RASST] = "failed"           # a failed conversion, and no PDF either
    services = services_over(library, tmp_path, fake_arxiv_html)
    outcome = fulltext.read_paper(services, RASST)
    assert outcome.status != "ok" and outcome.message
    assert services.fulltext.with_text([RASST]) == set()
    assert services.fulltext.readings([RASST])[RASST].status == outcome.status
    assert fulltext.wanted(services, [RASST]) == [], "not asked for again at once"
    _, _, row = rasst_row(services, Chat(services))
    assert row is not None and all(q.source != BODY for q in row.quotes)


def test_import_from_a_folder_status_and_no_full_text_in_backups(library, tmp_path, capsys, monkeypatch):
    services = services_over(library, tmp_path)
    folder = tmp_path / "downloads"
    folder.mkdir()
    shutil.copy(HTML_DIR / f"{RASST}.html", folder / f"{RASST}.html")
    (folder / "2601.00001.pdf").write_bytes(b"%PDF-1.4 not really")
    (folder / "notes.txt").write_text("my notes")
    monkeypatch.setenv("COPILOT_DATA_DIR", str(services.settings.data_dir))
    monkeypatch.setenv("COPILOT_FULLTEXT_READING", "false")
    code, report, _ = run_cli_in_process(capsys, "fulltext", "import", str(folder), "--json")
    assert code == 0 and report is not None
    by_id = {p["id"]: p for p in report["papers"]}
    assert by_id[RASST]["status"] == "ok" and by_id[RASST]["sentences"] > 100
    assert by_id["2601.00001"]["status"] != "ok"
    assert any(p["status"] != "ok" and not p["id"] for p in report["papers"]), "a file not named by an id"
    code, status, _ = run_cli_in_process(capsys, "fulltext", "status", "--json")
    assert status is not None and status["full_text"]["ok"] == 1

    archive = write_snapshot(services.settings.data_dir, tmp_path / "snapshot.tar.gz")
    with tarfile.open(archive) as tar:
        assert not any("fulltext" in name for name in tar.getnames())


def test_each_paper_read_updates_the_answer_without_waiting_for_the_slowest(library, tmp_path, fake_arxiv_html,
                                                                             monkeypatch):
    """The rows quote a paper's body as soon as that paper is read: a paper after it in the queue that arXiv sends
    one byte a second delays only its own row (the page says how many are still being read)."""
    monkeypatch.setattr(fulltext, "WAIT_S", 300.0)
    services = services_over(library, tmp_path, fake_arxiv_html, arxiv_timeout=6.0)
    chat = Chat(services)
    turn = chat.prepare(SEVERAL, "ann")
    tables = answer_tables(services, turn.question, [a.sources for a in turn.answers], turn.ranking)
    queued = list(dict.fromkeys(row.paper_id for table in tables for row in table.rows))
    assert RASST in queued[:-1], queued
    slow = queued[queued.index(RASST) + 1]
    fake_arxiv_html.hostile[slow] = "drip"
    seen = []                         # (RASST's row quotes its body, the notice) at each finished state
    for live in chat.stream(turn):
        if live.done:
            rows = [row for a in live.answers if a.table for row in a.table.rows if row.paper_id == RASST]
            seen.append((any(q.source == BODY for row in rows for q in row.quotes),
                         live.notice))
    early = [notice for quoted, notice in seen if quoted and "Reading 1 more" in notice]
    assert early, seen
    assert seen[-1][0] and "arXiv too slow" in seen[-1][1], seen[-1]


def test_a_waiting_question_quotes_the_body_from_a_first_look_before_the_whole_paper_is_stored(
        library, tmp_path, fake_arxiv_html, monkeypatch):
    """The sentences holding the question's words are embedded first: the row quotes the answering sentence
    while the rest of the paper is still being embedded (nothing stored yet), and the stored body gives the same
    quote."""
    monkeypatch.setattr(fulltext, "WAIT_S", 300.0)
    services = services_over(library, tmp_path, fake_arxiv_html)
    chat = Chat(services)
    turn = chat.prepare(QUESTION, "ann")
    seen = []                 # (the answer quoted from the body, the whole body stored then) at each finished state
    for live in chat.stream(turn):
        if live.done:
            quotes = [(q.shown, q.section) for a in live.answers if a.table for row in a.table.rows
                      if row.paper_id == RASST for q in row.quotes if q.source == BODY and ANSWER.search(q.shown)]
            seen.append((quotes, bool(services.fulltext.with_text([RASST])), live.notice))
    early = [quotes for quotes, stored, _ in seen if quotes and not stored]
    assert early, [(bool(q), stored, notice) for q, stored, notice in seen]
    final, stored, notice = seen[-1]
    assert stored and "Read the full text of 1 paper" in notice
    assert set(final) == set(early[0]), (final, early[0])
    assert "its row quotes the sentences read first" in fulltext.read_line({}, 1, looked=1)


def test_a_first_looked_paper_that_cannot_be_stored_goes_back_to_its_abstract(library, tmp_path, fake_arxiv_html,
                                                                             monkeypatch):
    """The disk refuses the whole body after the first look was quoted: the rows quote the abstract again, as the
    line says, and nothing of the body is kept."""
    monkeypatch.setattr(fulltext, "WAIT_S", 300.0)
    services = services_over(library, tmp_path, fake_arxiv_html)

    def disk_full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(services.fulltext, "put", disk_full)
    chat = Chat(services)
    turn = chat.prepare(QUESTION, "ann")
    seen = []                          # (RASST's row quotes its body, the notice) at each finished state
    for live in chat.stream(turn):
        if live.done:
            seen.append((any(q.source == BODY for a in live.answers if a.table for row in a.table.rows
                             if row.paper_id == RASST for q in row.quotes), live.notice))
    assert any(quoted for quoted, _ in seen), seen                 # the first look was quoted
    quoted, notice = seen[-1]
    assert not quoted and "reading failed" in notice, seen[-1]
    assert not services.fulltext.with_text([RASST])


def test_a_settings_question_only_a_body_sentence_answers_is_not_turned_away(library, tmp_path, fake_arxiv_html):
    """"We optimize with AdamW (learning rate 1×10⁻⁴, weight decay 0.01 …)" is 0.37 from its question, under the
    row floor (0.40) that turns away off-topic questions: a body sentence that close holding most of the question's
    words answers it, where RASST is the only paper retrieved. An off-topic question is still turned away."""
    services = services_over(library, tmp_path, fake_arxiv_html)
    assert fulltext.read_paper(services, RASST).status == "ok"
    paper = services.store.get_papers([RASST])[0]
    source = evidence.Source(RASST, paper.title, tuple(paper.authors), paper.published.isoformat(), paper.abstract,
                             0.5, body=services.fulltext.get([RASST], services.embedder.name)[RASST])

    def rows(question: str):
        return evidence.build_rows(question, services.embedder.embed_one(question), [source],
                                   services.embedder.embed)[0]

    answered = rows("Which optimizer, learning rate and weight decay train the RASST speech-text retriever?")
    assert answered and any("AdamW" in span.text for span in answered[0].spans), answered
    assert not rows("How long should banana bread bake, and at what oven temperature?")


def answers_shown(outputs: tuple) -> bool:
    """Whether the page's outputs show every answer done (its time under its heading)."""
    _, a, b = outputs[:3]
    return "chat-answer-time" in str(a) and (not b.get("visible") or "chat-answer-time" in str(b.get("value")))


def test_a_pages_next_question_ends_the_last_ones_wait_for_full_text(library, tmp_path, fake_arxiv_html,
                                                                      monkeypatch):
    """A page's question is asked even while the last one's answers wait for its papers (the Ask button takes a
    click on a running event: tests/e2e/test_fulltext_page.py); the last one then stops updating its answers at
    once, its turn kept, so a researcher asking away does not hold the quoted answers' few places in the queue
    for the rest of each wait."""
    import gradio as gr

    from copilot.ui.chat.ask import ask_view

    monkeypatch.setattr(fulltext, "WAIT_S", 300.0)
    services = services_over(library, tmp_path, fake_arxiv_html, arxiv_timeout=6.0)
    fake_arxiv_html.hostile[RASST] = "drip"             # the first question's wait would last until the timeout
    page = gr.Request(username="ann", session_hash="page-1")
    first = ask_view(services, QUESTION, False, None, page)
    shown = [next(first) for _ in range(2)]
    while not ("Reading the full text of" in str(shown[-1][0]) and answers_shown(shown[-1])):
        shown.append(next(first))                       # the abstract answer is shown; the paper is being read
    turn_id = shown[-1][5]
    second = list(ask_view(services, SEVERAL, False, turn_id, gr.Request(username="ann", session_hash="page-1")))
    assert SEVERAL in str(second[-1][0])
    rest = list(first)             # one frame that changes nothing: Gradio sends a stream's last frame again at its end
    assert len(rest) == 1 and all(part == gr.update() for part in rest[0]), \
        "the first question's answers updated the page after the next question"
    kept = services.chat_log.turn(turn_id)
    assert kept is not None and kept.finished_at is not None and kept.raw.table is not None


def test_a_failed_embed_or_store_is_that_papers_outcome_not_the_end_of_the_batch(library, tmp_path, monkeypatch):
    """`fulltext import`/`fetch` over many papers (issue #58 item 10): the embedder failing on one paper, or the
    full-text file refusing one, is that paper's outcome; the papers after it are still read."""
    services = services_over(library, tmp_path)
    first, second, third = (tmp_path / f"{pid}.html" for pid in ("2503.17247", RASST, "2605.25931"))
    for path in (first, second, third):
        shutil.copy(HTML_DIR / path.name, path)
    embed = services.embedder.embed
    calls: list[int] = []

    def fails_first(texts, *args, **kwargs):
        calls.append(len(texts))
        if len(calls) == 1:
            raise RuntimeError("the embedder ran out of memory")
        return embed(texts, *args, **kwargs)

    monkeypatch.setattr(services.embedder, "embed", fails_first)
    outcomes = fulltext.import_paths(services, [first, second])
    assert [(o.paper_id, o.status) for o in outcomes] == [("2503.17247", "error"), (RASST, "ok")], outcomes
    monkeypatch.setattr(services.fulltext, "put", lambda *args, **kwargs: False)        # the file refuses it
    refused = fulltext.import_paths(services, [third])[0]
    assert refused.status == "not_stored" and "read again" in refused.message
    assert fulltext.wanted(services, ["2605.25931"]) == ["2605.25931"]        # no failed reading held against it


def test_a_comparison_is_shown_from_abstracts_while_its_papers_are_read(library, tmp_path, fake_arxiv_html,
                                                                         monkeypatch):
    """Issue #59 item 1: with a thought in memory (two blind answers), the page held both answers back behind "they
    are shown together" until the wait for full text was over. Both are shown as soon as both tables exist, blind,
    under the line saying what is being read, and every later update of the page carries both answers."""
    import gradio as gr

    from copilot.ui.chat.ask import ask_view
    from copilot.ui.chat.render import WRITING_BOTH
    from copilot.ui.common import escape
    from tests.comparisons import KEEP_MEMORY_ROWS, thought_with_a_new_row

    monkeypatch.setattr(fulltext, "WAIT_S", 300.0)
    services = services_over(library, tmp_path, fake_arxiv_html, arxiv_timeout=6.0,
                             thought_row_margin=KEEP_MEMORY_ROWS)
    assert thought_with_a_new_row(services, SEVERAL, user="ann")
    fake_arxiv_html.hostile[RASST] = "drip"             # one of its papers, read until its timeout (6 s)
    held = escape(WRITING_BOTH)
    outputs = list(ask_view(services, SEVERAL, False, None, gr.Request(username="ann", session_hash="page-3")))
    notice, a, b, vote_row, *_ = outputs[-1]
    assert vote_row["visible"] and b["visible"], "a comparison, voted on once the wait is over"
    shown = [n for n, (_, a, b, *_) in enumerate(outputs) if held not in str(a) and b.get("visible")
             and "chat-answer-text" in str(a) and "chat-answer-text" in str(b.get("value"))]
    assert shown, "the two answers were never shown"
    first = outputs[shown[0]]
    assert "Reading the full text of" in str(first[0]), "shown only once the reading was over"
    assert shown == list(range(shown[0], len(outputs))), "once shown, both stay shown in every update"
    assert "chat-badge" not in str(first[1]) + str(first[2]) and not first[3].get("visible")   # blind, no vote yet


@pytest.mark.parametrize("papers", [["2502.07870"], None])
def test_a_quote_brings_the_sentence_it_leans_on_from_a_real_page(library, tmp_path, papers):
    """Issue #57 (dev2): why TextAtlas5M's Infinity runs used other GPUs is the sentence before "As a result, we
    ran the Infinity experiments on A5000 GPUs.": asked about the paper and across the library, the quote brings it."""
    services = services_over(library, tmp_path)
    assert fulltext.import_paths(services, [HTML_DIR / "2502.07870.html"])[0].status == "ok"
    question = "Why were the TextAtlas5M Infinity experiments run on A5000 GPUs?"
    turn = Chat(services).prepare(question, "ann", papers=papers)
    tables = answer_tables(services, turn.question, [a.sources for a in turn.answers], turn.ranking)
    row = next(r for r in tables[0].rows if r.paper_id == "2502.07870")
    body = services.fulltext.get({"2502.07870"}, services.embedder.name)["2502.07870"].body.text
    quoted = [q for q in row.quotes if q.source == BODY and "As a result, we ran the Infinity" in q.text]
    assert quoted and "a feature not supported on V100" in quoted[0].text and verbatim(quoted[0], body)


def test_a_question_about_a_real_paper_names_the_words_its_full_text_never_uses(library, tmp_path):
    """Issue #57: asked about TextAtlas5M, a question on protein folding shows the paper's closest passages and says
    that its full text (parsed from the real page) never uses "protein" or "folding"; a question it answers, nothing."""
    services = services_over(library, tmp_path)
    assert fulltext.import_paths(services, [HTML_DIR / "2502.07870.html"])[0].status == "ok"
    for question, absent in (("Can TextAtlas5M predict protein folding?", ("protein", "folding")),
                             ("Why were the TextAtlas5M Infinity experiments run on A5000 GPUs?", ())):
        turn = Chat(services).prepare(question, "ann", papers=["2502.07870"])
        tables = answer_tables(services, turn.question, [a.sources for a in turn.answers], turn.ranking)
        (row,) = tables[0].rows
        text = "".join(evidence_text.render_table(tables[0]))
        assert row.absent == absent and evidence_text.is_table(text)
        assert ("found nowhere in its full text: protein, folding." in text) == bool(absent)


def test_asked_only_for_its_limitations_a_real_paper_is_quoted_from_its_limitations_section(library, tmp_path):
    """Issue #57 item 4: asked of NameRank (the real page), "What are the limitations of NameRank?" quotes its §8.4
    Limitations, not "Limit your response to about 150 words." (a prompt it shows, holding the question's word) nor
    the rate-limited GDELT API."""
    services = services_over(library, tmp_path)
    assert fulltext.import_paths(services, [HTML_DIR / "2607.12520.html"])[0].status == "ok"
    question = "What are the limitations of NameRank?"
    turn = Chat(services).prepare(question, "ann", papers=["2607.12520"])
    (row,) = answer_tables(services, turn.question, [a.sources for a in turn.answers], turn.ranking)[0].rows
    assert row.quotes and {quote.section for quote in row.quotes} == {"8.4 Limitations"}
    assert row.quotes[0].text.startswith("The material caveats")
