"""The store of uploaded documents (issue #57 item 3), unit tier: a document is its owner's alone (another owner can
neither list, find, read nor delete it); deleting it deletes its sentences and their vectors in one transaction; a
backup's copy of the database holds none of its rows; a scope's "doc:<n>" id is told from an arXiv id."""

from __future__ import annotations

import sqlite3
import tarfile

import numpy as np
import pytest

from copilot.body import Body, Passage, Section
from copilot.features.scope import ScopeError, scope_ids
from copilot.records import document_number, is_document
from copilot.store.backup import write_snapshot
from copilot.store.db import Database
from copilot.store.documents import DocumentStore, NewSentence

TEXT = "Our method reaches 93.5% accuracy.\n\nIt was trained on 8 GPUs."


def body() -> Body:
    sections = (Section("p. 1", "", ""), Section("p. 2", "", ""))
    return Body("", "", "pdf", TEXT, sections, (Passage(0, 34, 0, "paragraph"), Passage(36, 61, 1, "paragraph")))


def add(store: DocumentStore, owner: str, title: str = "My draft"):
    sentences = [NewSentence(0, 34, 0, False, False, 1, ("method", "accuraci")),
                 NewSentence(36, 61, 1, False, False, 2, ("train", "gpu"))]
    vectors = np.eye(2, 4, dtype=np.float32)
    return store.add(owner, title, "draft.pdf", 2, 1234, body(), sentences, "minilm", vectors)


@pytest.fixture
def store(tmp_path):
    return DocumentStore(Database(tmp_path / "copilot.db"))


def test_a_document_is_its_owners_alone_and_deleting_it_deletes_its_sentences_and_vectors(store):
    doc = add(store, "ann")
    other = add(store, "bob", "Bob's")
    assert doc.item_id == f"doc:{doc.id}" and doc.sentences == 2 and doc.pages == 2
    assert [d.id for d in store.owned_by("ann")] == [doc.id] and [d.id for d in store.owned_by("bob")] == [other.id]
    assert store.find(doc.id, "bob") is None and store.body(doc.id, "bob", "minilm") is None
    assert store.pages_of(doc.id, "bob") == [] and store.pages_of(doc.id, "ann") == [1, 2]
    stored = store.body(doc.id, "ann", "minilm")
    assert stored is not None and stored.body.paper_id == doc.item_id and stored.body.text == TEXT
    assert stored.sentences == ((0, 34, 0, False, False), (36, 61, 1, False, False))
    assert np.array_equal(stored.vectors, np.eye(2, 4, dtype=np.float32))
    assert stored.terms[1] == frozenset({"train", "gpu"})
    assert store.body(doc.id, "ann", "another-embedder") is None
    assert store.delete(doc.id, "bob") is False and store.find(doc.id, "ann") is not None
    assert store.delete(doc.id, "ann") is True
    db = store.db
    assert db.query_one("SELECT COUNT(*) AS n FROM document_sentences WHERE document_id = ?", (doc.id,)) == {"n": 0}
    assert db.query_one("SELECT COUNT(*) AS n FROM documents WHERE id = ?", (doc.id,)) == {"n": 0}
    assert store.owned_by("ann") == [] and [d.id for d in store.owned_by("bob")] == [other.id]
    assert store.delete(doc.id, "ann") is False


def test_a_backup_snapshot_holds_no_document_row(store, tmp_path):
    add(store, "ann")
    archive = write_snapshot(store.db.path.parent, tmp_path / "snapshot.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extract("copilot.db", tmp_path / "out", filter="data")
    conn = sqlite3.connect(tmp_path / "out" / "copilot.db")
    try:
        counts = [conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                  for table in ("documents", "document_sentences")]
        kept = conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0]
    finally:
        conn.close()
    assert counts == [0, 0] and kept > 0          # the rest of the database is there
    raw = (tmp_path / "out" / "copilot.db").read_bytes()
    assert b"93.5% accuracy" not in raw            # vacuumed: no free page keeps the text
    assert len(store.owned_by("ann")) == 1            # the live database keeps it


def test_a_scope_takes_document_ids_beside_arxiv_ids():
    assert scope_ids(["doc:3", "2501.01234v2", " doc:3 "]) == ["doc:3", "2501.01234"]
    assert document_number("doc:12") == 12 and document_number("doc:0") is None and document_number("doc:x") is None
    assert is_document("doc:1") and not is_document("2501.01234")
    with pytest.raises(ScopeError):
        scope_ids(["doc:"])
