"""The full-text store fails soft by the sentence vectors' store's mechanism (store.derived_file, issue #58 item 9)
and parses a stored body once, not on every turn (item 3): WAL, so a write does not wait behind a long read; a
locked file makes a write return False, never raise, recorded once, and writes rest a while; a corrupt file is made
anew; a body the locked file could not keep is neither marked failed nor embedded again; a body read twice is the
same object until it is stored anew. Real SQLite in a temporary dir; the reader's test reads a real page from a
loopback arXiv with the real embedder."""

from __future__ import annotations

import sqlite3
import time

import numpy as np
import pytest

from copilot.body import Body, BodyText, Section
from copilot.features.fulltext import NOW, FulltextReader, wanted
from copilot.services import Services
from copilot.store.fulltext import FILE_NAME, FulltextStore
from tests.conftest import make_settings
from tests.fake_arxiv_html import fake_arxiv_html  # noqa: F401 (fixture)
from tests.tls import tls_cert  # noqa: F401 (fixture)

MODEL = "test-model"


def body(paper_id: str, words: str = "We measure it.") -> Body:
    text = BodyText()
    text.add_section(Section("1 Introduction", "S1", "1 Introduction"))
    text.add(words, 0, "paragraph")
    return text.body(paper_id, "v1", "html")


def put(store: FulltextStore, paper: Body) -> bool:
    vectors = np.ones((1, 4), dtype=np.float32) / 2
    return store.put(paper, [(0, len(paper.text), 0, False, False)], MODEL, vectors, "html", [["measur"]])


@pytest.fixture
def store(tmp_path) -> FulltextStore:
    return FulltextStore(tmp_path / "fulltext.sqlite3", write_busy_s=0.5, rest_s=0.0)


def held_write_lock(path) -> sqlite3.Connection:
    """Another process writing the file, for longer than a write waits."""
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    return writer


def test_a_write_does_not_wait_behind_a_long_read(store):
    assert put(store, body("2601.00001"))
    reader = sqlite3.connect(store.path)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COUNT(*) FROM bodies").fetchone() == (1,)      # a read transaction held open
    started = time.monotonic()
    assert put(store, body("2601.00002"))
    assert time.monotonic() - started < 0.4
    reader.rollback()
    reader.close()
    assert set(store.get(["2601.00001", "2601.00002"], MODEL)) == {"2601.00001", "2601.00002"}


def test_a_locked_file_makes_writes_return_false_not_raise(store):
    assert put(store, body("2601.00001"))
    writer = held_write_lock(store.path)
    try:
        assert put(store, body("2601.00002")) is False
        assert store.note("2601.00003", "timeout", "html", "slow") is False
        assert set(store.get(["2601.00001", "2601.00002"], MODEL)) == {"2601.00001"}    # reads go on
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert put(store, body("2601.00002")) is True


def test_a_body_is_parsed_once_until_it_is_stored_anew(store):
    assert put(store, body("2601.00001", "First words."))
    first = store.get(["2601.00001"], MODEL)["2601.00001"]
    assert store.get(["2601.00001", "2601.09999"], MODEL)["2601.00001"] is first
    assert not first.vectors.flags.writeable          # shared by every turn: nobody may change it
    assert put(store, body("2601.00001", "Second words."))
    again = store.get(["2601.00001"], MODEL)["2601.00001"]
    assert again is not first and again.body.text == "Second words."
    assert store.get(["2601.00001"], "another-model") == {}
    assert store.delete("2601.00001") and store.get(["2601.00001"], MODEL) == {}


def test_a_lock_is_recorded_once_and_writes_rest_then_try_again(tmp_path):
    failures: list[tuple[str, str]] = []
    store = FulltextStore(tmp_path / FILE_NAME, write_busy_s=0.2, rest_s=0.6,
                          on_failure=lambda *failure: failures.append(failure))
    assert put(store, body("2601.00001"))
    writer = held_write_lock(store.path)
    assert put(store, body("2601.00002")) is False and put(store, body("2601.00003")) is False
    writer.execute("ROLLBACK")
    writer.close()
    started = time.monotonic()
    assert put(store, body("2601.00002")) is False            # resting: no wait at all
    assert time.monotonic() - started < 0.1
    assert [kind for kind, _ in failures] == ["locked"]
    time.sleep(0.6)
    assert put(store, body("2601.00002")) is True
    assert store.with_text(["2601.00001", "2601.00002", "2601.00003"]) == {"2601.00001", "2601.00002"}


def test_a_corrupt_file_is_moved_aside_and_made_anew(tmp_path):
    path = tmp_path / FILE_NAME
    path.write_bytes(b"this is not a database" * 100)
    failures: list[tuple[str, str]] = []
    store = FulltextStore(path, on_failure=lambda *failure: failures.append(failure))
    assert store.get(["2601.00001"], MODEL) == {}
    assert put(store, body("2601.00001"))
    assert set(store.get(["2601.00001"], MODEL)) == {"2601.00001"}
    assert (tmp_path / f"{FILE_NAME}.corrupt").exists() and [kind for kind, _ in failures] == ["corrupt"]


def test_a_body_the_locked_store_could_not_keep_is_stored_later_without_reading_it_again(fake_arxiv_html, tmp_path,
                                                                                         monkeypatch):
    """A lock timeout is the file's, not the paper's: the paper is not marked failed (it is wanted again at once),
    and its body, read and embedded, is kept to be stored when asked for again (no fetch, no embedding)."""
    paper = "2503.17247"
    services = Services(make_settings(tmp_path / "data", arxiv_html_url=fake_arxiv_html.html_url,
                                      arxiv_pdf_url=fake_arxiv_html.pdf_url, fulltext_delay=0.0))
    services.__dict__["fulltext"] = FulltextStore(tmp_path / "data" / FILE_NAME, write_busy_s=0.3, rest_s=0.0)
    embedded: list[str] = []
    real = services.embedder.embed
    monkeypatch.setattr(services.embedder, "embed", lambda texts: embedded.extend(texts) or real(texts))
    assert services.fulltext.note("2601.00000", "no_html", "html", "made the file")
    reader = FulltextReader(services)
    writer = held_write_lock(services.fulltext.path)
    try:
        reader.request([paper], NOW)
        assert reader.wait([paper], 120.0)[paper].status == "not_stored"
        assert wanted(services, [paper]) == [paper]
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    fetched, embeds = list(fake_arxiv_html.paths()), len(embedded)
    assert embeds > 0 and fetched == [f"/html/{paper}"]
    assert reader.request([paper], NOW) == [paper]
    assert reader.wait([paper], 60.0)[paper].status == "ok"
    assert fake_arxiv_html.paths() == fetched and len(embedded) == embeds
    assert services.fulltext.with_text([paper]) == {paper}
