"""The background full-text reader's queue and pauses (issue #58 item 6, issue #59 item 2), with the reading itself
scripted (`_step` returns a given outcome; fetching and parsing are tested in test_arxiv_fulltext and
test_fulltext_parse) over a real, empty full-text store in a temporary dir."""

from __future__ import annotations

import threading
from pathlib import Path

from copilot.features.fulltext import AHEAD, NOW, SOON, FulltextReader, Outcome
from copilot.store.fulltext import FulltextStore
from tests.conftest import make_settings


class Parts:
    """What the reader touches outside its reading: the settings (arXiv's URLs) and the full-text store."""

    def __init__(self, tmp_path: Path) -> None:
        self.settings = make_settings(tmp_path / "data", arxiv_html_url="https://html.example/html/",
                                      arxiv_pdf_url="https://pdf.example/pdf/")
        self.fulltext = FulltextStore(tmp_path / "fulltext.sqlite3")


class Scripted(FulltextReader):
    """A reader whose readings end as scripted (`ends[paper] = (status, route)`; "ok" otherwise), and whose thread,
    once it has found the queue empty, stops right there (before it ends) until `go_on` is set, the first time."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(Parts(tmp_path))  # type: ignore[arg-type]
        self.ends: dict[str, tuple[str, str]] = {}
        self.at_exit, self.go_on = threading.Event(), threading.Event()
        self.hold_at_exit = False

    def _step(self, pid: str, priority: int) -> Outcome | None:
        status, route = self.ends.get(pid, ("ok", "html"))
        return Outcome(pid, status, route, f"scripted: {status}")

    def _next(self) -> tuple[str, int] | None:
        item = super()._next()
        if item is None and self.hold_at_exit and not self.at_exit.is_set():
            self.at_exit.set()
            self.go_on.wait(5.0)
        return item


def test_a_paper_asked_for_while_the_thread_is_ending_is_read(tmp_path):
    reader = Scripted(tmp_path)
    reader.hold_at_exit = True
    assert reader.request(["2601.00001"], NOW) == ["2601.00001"]
    assert reader.at_exit.wait(5.0), "the thread found its queue empty"
    # the thread has decided to end but has not ended: a new paper must not wait for a request that may never come
    assert reader.request(["2601.00002"], NOW) == ["2601.00002"]
    reader.go_on.set()
    assert set(reader.wait(["2601.00001", "2601.00002"], 5.0)) == {"2601.00001", "2601.00002"}


def test_a_failed_pdf_read_ahead_pauses_only_pdfs_and_only_read_ahead(tmp_path):
    reader = Scripted(tmp_path)
    reader.ends["2601.00001"] = ("unreachable", "pdf")
    reader.request(["2601.00001"], AHEAD)
    assert "2601.00001" in reader.wait(["2601.00001"], 5.0)
    assert reader.pauses.routes(AHEAD) == {"pdf"} and reader.pauses.routes(NOW) == set()
    assert reader.paused(AHEAD) is None and reader.paused(NOW) is None        # HTML pages are still read
    assert reader.request(["2601.00002"], AHEAD) == ["2601.00002"]
    assert reader.request(["2601.00003"], NOW) == ["2601.00003"]
    assert set(reader.wait(["2601.00002", "2601.00003"], 5.0)) == {"2601.00002", "2601.00003"}


def test_a_failed_html_read_ahead_never_pauses_a_questions_reading(tmp_path):
    reader = Scripted(tmp_path)
    reader.ends["2601.00001"] = ("unreachable", "html")
    reader.request(["2601.00001"], AHEAD)
    reader.wait(["2601.00001"], 5.0)
    pause = reader.paused(AHEAD)
    assert pause is not None and pause.said() == "html.example (HTML pages)"
    assert reader.request(["2601.00002"], AHEAD) == [] and reader.request(["2601.00003"], SOON) == ["2601.00003"]
    assert reader.paused(NOW) is None
    assert reader.request(["2601.00004"], NOW) == ["2601.00004"]
    assert set(reader.wait(["2601.00003", "2601.00004"], 5.0)) == {"2601.00003", "2601.00004"}


def test_a_questions_failed_html_pauses_every_reading_and_says_which_host(tmp_path):
    reader = Scripted(tmp_path)
    reader.ends["2601.00001"] = ("unreachable", "html")
    reader.request(["2601.00001"], NOW)
    reader.wait(["2601.00001"], 5.0)
    pause = reader.paused(NOW)
    assert pause is not None and "html.example" in pause.said()
    assert reader.request(["2601.00002"], NOW) == [] and reader.request(["2601.00003"], AHEAD) == []
    assert reader.pauses.routes(NOW) == {"html"}         # the PDFs were never found unreachable
