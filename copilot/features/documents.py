"""A researcher's own PDF (issue #57 item 3): uploaded on the Ask tab or imported with `fulltext import FILE`, read
in a child process with limits (sources.fulltext_sandbox.read_document: CPU, wall time, memory), split into the
sentences a quote may be, embedded, and kept as a private document of the visitor who gave it (store.documents).

Private means: every function here takes the visitor, and a document of another visitor is as if it did not exist:
never listed, scoped, quoted or searched for anyone else. A document never enters the library's search (Chroma, the
word index), thought memory (a turn that quotes one makes no thought: features.chat_thoughts) or a backup
(store.backup). A question is asked of it by putting it in the Ask box's scope ("doc:<n>", features.scope); its
quotes name their page ("p. 3"), never an arXiv address.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from copilot.errors import UserError
from copilot.features.fulltext import WHY_NOT_READ
from copilot.methods import body_text, evidence
from copilot.records import Evidence, document_number, is_document
from copilot.services import Services
from copilot.sources.fulltext_pdf import MAX_PAGES, MAX_PDF_BYTES
from copilot.sources.fulltext_sandbox import LIMITS, Limits, read_document
from copilot.store.documents import MAX_PER_OWNER, Document, NewSentence
from copilot.store.fulltext import StoredBody

DOCUMENT = "document"          # an item's metadata key: the item is an uploaded document (its owner's)
OWNER = "owner"                # and whose it is
EMBED_BATCH = 64


class DocumentError(UserError, ValueError):
    """An upload that was refused, or a document that is not the visitor's; the message says why."""


@dataclass(frozen=True)
class Upload:
    """What became of an uploaded file: the document kept, or the status and sentence saying why none was."""
    status: str                        # "ok", or why not: "unreadable", "empty", "too_large", "too_costly", …
    message: str
    document: Document | None = None
    parse_s: float = 0.0
    embed_s: float = 0.0


def _page(body_title: str) -> int:
    """A sentence's page from its section's title ("p. 3" → 3; fulltext_pdf.parse_document)."""
    head = body_title.removeprefix("p. ").split(" ", 1)[0]
    return int(head) if head.isdigit() else 0


def _refused(status: str, message: str, parse_s: float = 0.0) -> Upload:
    why = WHY_NOT_READ.get(status, status.replace("_", " "))
    return Upload(status, f"Not kept ({why}): {message}", parse_s=parse_s)


def upload(services: Services, owner: str, data: bytes, file_name: str, limits: Limits = LIMITS) -> Upload:
    """Read a PDF into a private document of `owner`; never raises for the file's sake (the Upload says why it was
    refused: not a PDF, encrypted, image-only, too big, over the reader's limits). A DocumentError when the visitor
    keeps MAX_PER_OWNER documents already."""
    if not owner:
        raise DocumentError("Sign in first: an uploaded document is kept for its owner only.")
    if services.documents.count(owner) >= MAX_PER_OWNER:
        raise DocumentError(f"You keep {MAX_PER_OWNER} documents already: delete one (Library tab, Your documents) "
                            "to upload another.")
    name = " ".join(str(file_name or "document.pdf").replace("\\", "/").rsplit("/", 1)[-1].split())[:120]
    if len(data) > MAX_PDF_BYTES:
        return _refused("too_large", f"{name} is {len(data) / 2 ** 20:.1f} MiB; a document may be at most "
                        f"{MAX_PDF_BYTES // 2 ** 20} MiB.")
    started = time.perf_counter()
    parsed, title = read_document(data, name, limits)
    parse_s = time.perf_counter() - started
    if parsed.status != "ok" or parsed.body is None:
        return _refused(parsed.status, parsed.message, parse_s)
    body = parsed.body
    # every sentence, related work and introduction too: it is the researcher's own document, and its headings are
    # guessed from a text layer (a paper's table keeps only what may state its findings, body_text.may_state_finding)
    sentences = body_text.body_sentences(body)
    if not sentences:
        return _refused("empty", f"{name} holds no sentence to quote.", parse_s)
    texts = [" ".join(body.text[s.start:s.end].split()) for s in sentences]
    started = time.perf_counter()
    vectors = np.vstack([services.embedder.embed(texts[n:n + EMBED_BATCH]) for n in range(0, len(texts), EMBED_BATCH)])
    embed_s = time.perf_counter() - started
    terms = body_text.sentence_terms(texts)
    rows = [NewSentence(s.start, s.end, s.passage, s.cut_before, s.cut_after,
                        _page(body.sections[body.passages[s.passage].section].title), tuple(t))
            for s, t in zip(sentences, terms)]
    pages = max((row.page for row in rows), default=0)
    document = services.documents.add(owner, title or name, name, pages, len(data), body, rows,
                                      services.embedder.name, vectors)
    capped = f" (its first {MAX_PAGES} pages)" if "first" in parsed.message else ""
    return Upload("ok", f"Kept {document.title!r}: {len(rows)} sentences from {pages} pages{capped}, private to you.",
                  document, parse_s, embed_s)


def documents_of(services: Services, owner: str) -> list[Document]:
    """The visitor's own documents, newest first (nobody else's)."""
    return services.documents.owned_by(owner) if owner else []


def owned(services: Services, owner: str, item_id: str) -> Document:
    """The visitor's document named by "doc:<n>"; a DocumentError (as for a document that never was) otherwise."""
    number = document_number(item_id)
    found = services.documents.find(number, owner) if number is not None and owner else None
    if found is None:
        raise DocumentError(f"No document {str(item_id)[:40]!r} of yours: it was deleted, or belongs to another "
                            "visitor. Upload it again on the Ask tab.")
    return found


def delete(services: Services, owner: str, item_id: str) -> str:
    """Delete the visitor's document with its sentences and vectors; the sentence the page shows."""
    document = owned(services, owner, item_id)
    services.documents.delete(document.id, owner)
    return f"Deleted {document.title!r} with its {document.sentences} sentences and their vectors."


def stored_body(services: Services, owner: str, item_id: str) -> StoredBody | None:
    """The visitor's document as a body to quote (its vectors from the current embedder), or None."""
    number = document_number(item_id)
    if number is None or not owner:
        return None
    return services.documents.body(number, owner, services.embedder.name)


def scoped_item(services: Services, owner: str, document: Document, question_vector: np.ndarray,
                marks: dict) -> Evidence:
    """The document as a scoped turn's retrieved item: its score the cosine of its closest sentence."""
    body = stored_body(services, owner, document.item_id)
    vector = np.asarray(question_vector, dtype=np.float32)
    score = float(np.max(body.vectors @ vector)) if body is not None and len(body.vectors) else 0.0
    return Evidence(document.item_id, "paper", document.title, document.title, score,
                    {**marks, DOCUMENT: True, OWNER: owner})


def source_of(services: Services, item: Evidence, rank: float) -> evidence.Source | None:
    """A scoped item that is a document, as a table's source (no abstract: its body is all it has); None when it is
    no longer its owner's."""
    owner = str(item.metadata.get(OWNER) or "")
    if not is_document(item.id) or not item.metadata.get(DOCUMENT):
        return None
    number = document_number(item.id)
    document = services.documents.find(number, owner) if number is not None and owner else None
    body = stored_body(services, owner, item.id) if document is not None else None
    if document is None or body is None:
        return None
    day = time.strftime("%Y-%m-%d", time.gmtime(document.uploaded_at))
    return evidence.Source(item.id, document.title, (), day, "", item.score, True, rank, "", "", body)


def in_items(items: list[Evidence] | tuple[Evidence, ...]) -> bool:
    """Whether any of a turn's items is an uploaded document."""
    return any(is_document(item.id) for item in items)
