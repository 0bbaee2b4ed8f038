"""When arXiv cannot be reached, answers stop waiting for full text (issue #48), integration tier: the real fetch
client against a loopback port nothing listens on, the real embedder, Chat.

The first answer tries to read its papers and says they were not read; for OFFLINE_PAUSE_S after that, an answer
queues nothing, waits for nothing and says why its rows quote abstracts; then reading is tried again.
"""

from __future__ import annotations

import json
import time

from copilot.features import fulltext
from copilot.features.chat import Chat
from copilot.features.library import ingestor
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row
from tests.conftest import make_settings
from tests.fake_arxiv_html import HTML_DIR
from tests.helpers import free_port

QUESTION = "How many unique terms does the ACL 60/60 glossary that RASST retrieves from contain?"
OTHER = "Which datasets does the glossary retrieval of simultaneous speech translation use?"


def ask(chat: Chat, question: str) -> tuple[str, float]:
    started = time.monotonic()
    turn = chat.prepare(question, "ann")
    for _ in chat.stream(turn):
        pass
    return turn.notice, time.monotonic() - started


def test_an_unreachable_arxiv_pauses_reading_and_answers_stop_waiting(tmp_path):
    nowhere = f"https://127.0.0.1:{free_port()}"
    services = Services(make_settings(tmp_path / "data", fulltext_reading=True, fulltext_delay=0.0,
                                      arxiv_html_url=f"{nowhere}/html/", arxiv_pdf_url=f"{nowhere}/pdf/"))
    rows = [json.loads(line) for line in (HTML_DIR / "papers.jsonl").read_text(encoding="utf-8").splitlines()]
    ingestor(services).run("test", [paper_from_row(row) for row in rows])
    chat = Chat(services)
    reader = fulltext.reader_for(services)

    ids = [row["id"] for row in rows]

    notice, _ = ask(chat, QUESTION)
    assert "arXiv unreachable" in notice, notice
    assert reader.paused()
    tried = [pid for pid, reading in services.fulltext.readings(ids).items() if reading.status == "unreachable"]
    assert len(tried) == 1, "the papers queued behind the failed one are not tried"

    assert fulltext.read_soon(services, ids) == []
    notice, seconds = ask(chat, OTHER)
    assert f"{nowhere[8:]} (HTML pages) could not be reached" in notice, notice      # which host, which route
    assert "Reading the full text" not in notice, notice
    assert seconds < fulltext.WAIT_S

    reader.pauses.clear()                # the pause is over: the papers never tried are queued again
    assert set(fulltext.read_soon(services, ids)) == set(ids) - set(tried)
    later = time.time() + fulltext.OFFLINE_PAUSE_S + 1     # unreachable is no fault of the paper's: tried again soon
    assert fulltext.wanted(services, tried, now=later) == tried
