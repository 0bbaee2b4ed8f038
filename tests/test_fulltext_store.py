"""The full-text store fails soft like the sentence vectors' store (issue #58 item 9) and parses a stored body once,
not on every turn (item 3): WAL, so a write does not wait behind a long read; a locked file makes a write return
False, never raise; a body read twice is the same object until it is stored anew. Real SQLite in a temporary dir."""

from __future__ import annotations

import sqlite3
import time

import numpy as np
import pytest

from copilot.body import Body, BodyText, Section
from copilot.store.fulltext import FulltextStore

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
    return FulltextStore(tmp_path / "fulltext.sqlite3", write_busy_s=0.5)


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
    writer = sqlite3.connect(store.path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")                     # another process writing, for longer than a write waits
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
