"""A researcher's own documents (issue #57 item 3): a PDF a visitor uploaded (the Ask tab) or imported (`fulltext
import FILE`) to ask about, private to that visitor, its owner. The one owner of the record: every read and delete
takes the owner, and a document of another owner is as if it did not exist (no method tells them apart).

A document is its parsed body (copilot.body: passages in sections named by page, "p. 3 · 4.2 Ablations") and one
row per quotable sentence: its span in the body, its page, its word stems and its vector (float32, unit). It lives
in copilot.db (user data, not derived: it cannot be read again from anywhere), and only there: a backup's copy of
the database holds none of its rows (store.backup). Deleting a document deletes its sentences and their vectors in
the same transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from copilot.body import Body
from copilot.records import DOCUMENT_PREFIX
from copilot.store.db import Database
from copilot.store.fulltext import StoredBody

MAX_PER_OWNER = 20            # documents a visitor may keep at once
TABLES = ("document_sentences", "documents")      # what a backup's copy is emptied of


@dataclass(frozen=True)
class Document:
    id: int
    owner: str
    title: str
    file_name: str
    pages: int
    size: int                 # the file's bytes
    uploaded_at: float
    sentences: int

    @property
    def item_id(self) -> str:
        """The document's id where papers have arXiv ids (a question's scope, a table's row): "doc:<n>"."""
        return f"{DOCUMENT_PREFIX}{self.id}"


@dataclass(frozen=True)
class NewSentence:
    start: int
    end: int
    passage: int
    cut_before: bool
    cut_after: bool
    page: int
    terms: tuple[str, ...]


_LIST = ("SELECT d.id, d.owner, d.title, d.file_name, d.pages, d.size, d.uploaded_at, "
         "(SELECT COUNT(*) FROM document_sentences s WHERE s.document_id = d.id) AS sentences FROM documents d")


class DocumentStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, owner: str, title: str, file_name: str, pages: int, size: int, body: Body,
            sentences: Sequence[NewSentence], model: str, vectors: np.ndarray) -> Document:
        """Keep a document with its sentences and vectors, all in one transaction; the document as stored (its body's
        paper_id is its item id)."""
        matrix = np.asarray(vectors, dtype=np.float32)
        if len(matrix) != len(sentences) or (len(sentences) and matrix.ndim != 2):
            raise ValueError("one vector per sentence")
        now = time.time()
        with self.db.transaction() as conn:
            doc_id = conn.execute(
                "INSERT INTO documents (owner, title, file_name, pages, size, uploaded_at, body, model, dim) "
                "VALUES (?, ?, ?, ?, ?, ?, '', ?, ?)",
                (owner, title, file_name, pages, size, now, model, int(matrix.shape[1]) if matrix.ndim == 2 else 0)
            ).lastrowid
            stored = Body(f"{DOCUMENT_PREFIX}{doc_id}", "", body.source, body.text, body.sections, body.passages)
            conn.execute("UPDATE documents SET body = ? WHERE id = ?", (stored.to_json(), doc_id))
            conn.executemany("INSERT INTO document_sentences VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                (doc_id, n, s.start, s.end, s.passage, int(s.cut_before), int(s.cut_after), s.page,
                 json.dumps(sorted(set(s.terms))), matrix[n].tobytes()) for n, s in enumerate(sentences)])
        return Document(int(doc_id or 0), owner, title, file_name, pages, size, now, len(sentences))

    def owned_by(self, owner: str) -> list[Document]:
        """The owner's documents, newest first."""
        rows = self.db.query(f"{_LIST} WHERE d.owner = ? ORDER BY d.uploaded_at DESC, d.id DESC", (owner,))
        return [Document(**row) for row in rows]

    def count(self, owner: str) -> int:
        row = self.db.query_one("SELECT COUNT(*) AS n FROM documents WHERE owner = ?", (owner,))
        return int(row["n"]) if row else 0

    def find(self, doc_id: int, owner: str) -> Document | None:
        """The owner's document `doc_id`; None when there is none or it is another owner's."""
        row = self.db.query_one(f"{_LIST} WHERE d.id = ? AND d.owner = ?", (doc_id, owner))
        return Document(**row) if row else None

    def body(self, doc_id: int, owner: str, model: str) -> StoredBody | None:
        """The owner's document as a stored body (its sentences and their vectors) when its vectors come from
        `model`; None otherwise (another owner's, gone, or embedded by another model)."""
        row = self.db.query_one("SELECT body, dim FROM documents WHERE id = ? AND owner = ? AND model = ?",
                                (doc_id, owner, model))
        if row is None:
            return None
        rows = self.db.query("SELECT start, end, passage, cut_before, cut_after, terms, vector FROM "
                             "document_sentences WHERE document_id = ? ORDER BY position", (doc_id,))
        dim = int(row["dim"])
        vectors = (np.vstack([np.frombuffer(r["vector"], dtype=np.float32) for r in rows]) if rows and dim
                   else np.zeros((0, dim), dtype=np.float32))
        vectors.flags.writeable = False
        spans = tuple((r["start"], r["end"], r["passage"], bool(r["cut_before"]), bool(r["cut_after"])) for r in rows)
        terms = tuple(frozenset(json.loads(r["terms"])) for r in rows)
        return StoredBody(Body.from_json(row["body"]), spans, model, vectors, terms)

    def pages_of(self, doc_id: int, owner: str) -> list[int]:
        """Each stored sentence's page, in order ([] for another owner's document)."""
        rows = self.db.query("SELECT s.page FROM document_sentences s JOIN documents d ON d.id = s.document_id "
                             "WHERE d.id = ? AND d.owner = ? ORDER BY s.position", (doc_id, owner))
        return [int(r["page"]) for r in rows]

    def delete(self, doc_id: int, owner: str) -> bool:
        """Delete the owner's document with its sentences and their vectors; False when there is none of theirs."""
        with self.db.transaction() as conn:
            if not conn.execute("SELECT 1 FROM documents WHERE id = ? AND owner = ?", (doc_id, owner)).fetchone():
                return False
            conn.execute("DELETE FROM document_sentences WHERE document_id = ?", (doc_id,))
            conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
        return True


def empty_private_tables(conn: sqlite3.Connection) -> None:
    """Delete every document row from a copy of the database (a backup's, before it is vacuumed): a visitor's
    uploads never leave the machine."""
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in TABLES:
        if table in present:
            conn.execute(f"DELETE FROM {table}")      # noqa: S608 - a fixed name from TABLES
    conn.commit()
