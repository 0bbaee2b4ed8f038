"""Typed records carried between layers: a paper, and a retrieved piece of evidence."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

_WS = re.compile(r"\s+")
# The one arXiv id pattern: new style (2401.01234) or old style (hep-th/9901001, math.GT/0309136), no version. An
# old-style archive name starts a word and is short: searched over a long word, an open-ended run was tried from
# every letter of it (4,000 characters of one word: 364 ms with the interpreter lock held).
ARXIV_ID_PATTERN = r"\d{4}\.\d{4,5}|(?<![a-zA-Z\-])[a-z][a-z\-]{0,15}(?:\.[A-Z]{2})?/\d{7}"
# An id as written in text: an optional "arXiv:" prefix and version suffix around the base id.
ARXIV_ID = re.compile(rf"(?:arxiv:\s*)?(?P<base>{ARXIV_ID_PATTERN})(?:v(?P<version>\d+))?", re.I)
_ARXIV_URL = re.compile(r"arxiv\.org/(?:abs|pdf|html)/(?P<id>[^?#\s]+?)(?:\.pdf)?/?(?:[?#].*)?$", re.I)


def clean_text(text: str | None) -> str:
    """Collapse hard line wraps and runs of whitespace."""
    return _WS.sub(" ", text or "").strip()


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str | None) -> str:
    """User input made safe to store and embed: lone UTF-16 surrogates (which JSON escapes and undecodable
    command-line bytes can produce, and which SQLite and the tokenizer reject) become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text or "")


def parse_arxiv_id(text: str) -> tuple[str, int | None] | None:
    """'2401.01234v2', 'arXiv:2401.01234', 'https://arxiv.org/abs/2401.01234' or 'hep-th/9901001' → (base id,
    version)."""
    text = (text or "").strip()
    url = _ARXIV_URL.search(text)
    if url:
        text = url.group("id")
    match = ARXIV_ID.fullmatch(text)
    if not match:
        return None
    version = match.group("version")
    return match.group("base"), int(version) if version else None


_VERSION_END = re.compile(r"v\d+$")


# A researcher's own uploaded document (issue #57 item 3, copilot.store.documents): "doc:<n>", private to its owner.
DOCUMENT_PREFIX = "doc:"
_DOCUMENT_ID = re.compile(r"doc:(?P<n>[1-9][0-9]{0,11})")


def document_number(text: str | None) -> int | None:
    """'doc:3' → 3; None for anything else (an arXiv id, a link, text)."""
    match = _DOCUMENT_ID.fullmatch((text or "").strip()) if isinstance(text, str) else None
    return int(match.group("n")) if match else None


def is_document(item_id: str | None) -> bool:
    """Whether an item id names an uploaded document (never on arXiv, never linked there)."""
    return isinstance(item_id, str) and item_id.startswith(DOCUMENT_PREFIX)


def base_id(paper_id: str) -> str:
    """'2503.15484v2' → '2503.15484': the id without its version; anything else stays as it is, stripped."""
    return _VERSION_END.sub("", paper_id.strip())


_ID_TOKEN = re.compile(r"[\s,;]+")


def parse_id_list(text: str) -> tuple[list[str], list[str]]:
    """arXiv ids or links separated by spaces, commas or lines → (ids as given, version kept; unreadable tokens)."""
    ids, seen, bad = [], set(), []
    for token in _ID_TOKEN.split(text or ""):
        if not token:
            continue
        parsed = parse_arxiv_id(token)
        if parsed is None:
            bad.append(token[:60])
        elif parsed[0] not in seen:
            seen.add(parsed[0])
            ids.append(f"{parsed[0]}v{parsed[1]}" if parsed[1] else parsed[0])
    return ids, bad


def date_number(day: date) -> int:
    """A date as a sortable, filterable integer: 2025-03-18 → 20250318."""
    return day.year * 10000 + day.month * 100 + day.day


def number_to_date(value: int) -> date:
    return date(value // 10000, value // 100 % 100, value % 100)


@dataclass
class Paper:
    id: str                       # arXiv id without version
    title: str
    abstract: str
    authors: list[str]
    categories: list[str]         # first = primary
    published: date              # the paper's arXiv date (listing/announcement date where known)
    version: int = 1
    updated: date | None = None
    comment: str = ""

    @property
    def primary_category(self) -> str:
        return self.categories[0] if self.categories else ""

    @property
    def abs_url(self) -> str:
        return f"https://arxiv.org/abs/{self.id}"

    @property
    def pdf_url(self) -> str:
        return f"https://arxiv.org/pdf/{self.id}"

    @property
    def document(self) -> str:
        return f"{self.title}\n\n{self.abstract}"

    def metadata(self) -> dict[str, str | int]:
        return {
            "title": self.title,
            "authors": "; ".join(self.authors),
            "categories": " ".join(self.categories),
            "primary_category": self.primary_category,
            "date": date_number(self.published),
            "updated": date_number(self.updated or self.published),
            "version": self.version,
            "abs_url": self.abs_url,
            "pdf_url": self.pdf_url,
            "comment": self.comment[:500],
        }

    @classmethod
    def from_store(cls, paper_id: str, document: str, metadata: dict) -> Paper:
        title = str(metadata.get("title", ""))
        abstract = document[len(title):].lstrip("\n") if document.startswith(title) else document
        authors = [a for a in str(metadata.get("authors", "")).split("; ") if a]
        return cls(id=paper_id, title=title, abstract=abstract, authors=authors,
                   categories=str(metadata.get("categories", "")).split(),
                   published=number_to_date(int(metadata.get("date", 19700101))),
                   version=int(metadata.get("version", 1)),
                   updated=number_to_date(int(metadata.get("updated", metadata.get("date", 19700101)))),
                   comment=str(metadata.get("comment", "")))


@dataclass
class Evidence:
    """One retrieved item (a paper or a thought) on its way from retrieval to the screen."""

    id: str
    kind: str                     # "paper" | "thought"
    title: str
    text: str
    score: float                  # cosine similarity to the query
    metadata: dict = field(default_factory=dict)

    @property
    def url(self) -> str | None:
        return f"https://arxiv.org/abs/{self.id}" if self.kind == "paper" and not is_document(self.id) else None
