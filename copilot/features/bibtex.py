"""BibTeX out and in: any paper list the app shows as a .bib, and the arXiv entries of a .bib (a Zotero or Google
Scholar export) as paper ids. Written and read with `bibtexparser` (v2).

An arXiv entry is written as arXiv itself suggests — @misc with eprint, archivePrefix = arXiv, primaryClass — plus
the abs URL with the version, so the exact version is kept. Reading accepts the spellings exporters use: eprint
with archivePrefix/eprinttype arXiv, an arxiv.org URL, the arXiv DOI 10.48550/arXiv.ID, or "arXiv:ID" in journal,
note or howpublished.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from copilot.errors import UserError
from copilot.records import Paper, parse_arxiv_id
from copilot.services import Services

MAX_BIBTEX_BYTES = 2 * 1024 * 1024
MAX_EXPORT = 500
_SPECIAL = re.compile(r"([&%$#_])")
_STOP = {"a", "an", "the", "on", "of", "for", "and", "in", "to", "with", "towards", "toward", "is", "are", "via"}
_ARXIV_IN_TEXT = re.compile(r"arxiv[:\s.]*(?:abs/)?((?:\d{4}\.\d{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?)",
                            re.IGNORECASE)


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


def _surname(author: str) -> str:
    author = author.strip()
    return author.split(",")[0] if "," in author else (author.split() or ["anon"])[-1]


def bibtex_keys(papers: Sequence[Paper]) -> dict[str, str]:
    """surname + year + first word of the title that says something (deguchi2023subset); a clash gets b, c …"""
    keys: dict[str, str] = {}
    used: set[str] = set()
    for paper in papers:
        name = re.sub(r"[^a-z]", "", _ascii(_surname(paper.authors[0]) if paper.authors else "anon").lower()) or "anon"
        words = [w for w in re.findall(r"[a-z0-9]+", _ascii(paper.title).lower()) if w not in _STOP]
        key = base = f"{name}{paper.published.year}{words[0] if words else ''}"
        suffix = ord("b")
        while key in used:
            key, suffix = f"{base}{chr(suffix)}", suffix + 1
        used.add(key)
        keys[paper.id] = key
    return keys


def _value(text: str) -> str:
    """A field value safe inside braces: LaTeX specials escaped, unbalanced braces dropped."""
    text = _SPECIAL.sub(r"\\\1", " ".join(text.split()))
    return text.replace("{", "").replace("}", "") if text.count("{") != text.count("}") else text


def bibtex_entry(paper: Paper, key: str):
    from bibtexparser.model import Entry, Field

    fields = [Field("title", "{" + _value(paper.title) + "}"),
              Field("author", " and ".join(_value(a) for a in paper.authors) or "Anonymous"),
              Field("year", str(paper.published.year))]
    if parse_arxiv_id(paper.id) is not None:
        fields += [Field("eprint", paper.id), Field("archivePrefix", "arXiv")]
        if paper.primary_category:
            fields.append(Field("primaryClass", paper.primary_category))
        fields.append(Field("url", f"{paper.abs_url}v{paper.version}"))
    return Entry("misc", key, fields)


def bibtex_text(papers: Sequence[Paper], keys: dict[str, str] | None = None) -> str:
    """The papers as BibTeX, in the given order."""
    import bibtexparser

    keys = keys or bibtex_keys(papers)
    library = bibtexparser.Library()
    for paper in papers:
        library.add(bibtex_entry(paper, keys[paper.id]))
    return bibtexparser.write_string(library).strip() + "\n" if papers else ""


def bibtex_for_ids(services: Services, ids: Sequence[str]) -> str:
    """BibTeX of library papers by id (versions ignored), in the given order; unknown ids are a UserError."""
    wanted = list(dict.fromkeys(parsed[0] for parsed in (parse_arxiv_id(str(i)) for i in ids) if parsed))
    bad = [str(i)[:40] for i in ids if parse_arxiv_id(str(i)) is None]
    if bad:
        raise UserError(f"not arXiv ids: {', '.join(bad[:5])}")
    if not wanted:
        raise UserError("no papers to export")
    if len(wanted) > MAX_EXPORT:
        raise UserError(f"{len(wanted)} papers; at most {MAX_EXPORT} per export")
    papers = services.store.get_papers(wanted)
    missing = [pid for pid in wanted if pid not in {p.id for p in papers}]
    if missing:
        raise UserError(f"not in the library: {', '.join(missing[:10])}")
    return bibtex_text(papers)


# --- in ----------------------------------------------------------------------------------------------------------
def _entry_arxiv_id(fields: dict[str, str]) -> str | None:
    prefix = (fields.get("archiveprefix") or fields.get("eprinttype") or "").strip().lower()
    eprint = fields.get("eprint", "").strip()
    if eprint and (prefix == "arxiv" or not prefix):
        parsed = parse_arxiv_id(eprint.removeprefix("arXiv:").removeprefix("arxiv:"))
        if parsed:
            return _with_version(parsed)
    for name in ("url", "doi", "journal", "note", "howpublished", "booktitle", "eprint"):
        text = fields.get(name, "")
        if not text:
            continue
        if name == "doi" and "10.48550/arxiv." in text.lower():
            parsed = parse_arxiv_id(text.lower().split("10.48550/arxiv.", 1)[1].strip())
        elif name == "url" and "arxiv.org/" in text:
            parsed = parse_arxiv_id(text.strip().replace("/pdf/", "/abs/").removesuffix(".pdf"))
        else:
            match = _ARXIV_IN_TEXT.search(text)
            parsed = parse_arxiv_id(match.group(1)) if match else None
        if parsed:
            return _with_version(parsed)
    return None


def _with_version(parsed: tuple[str, int | None]) -> str:
    return f"{parsed[0]}v{parsed[1]}" if parsed[1] else parsed[0]


def arxiv_ids_from_bibtex(data: bytes | str) -> tuple[list[str], int]:
    """(the arXiv ids of a BibTeX file's entries, in file order, without duplicates; entries that are not arXiv).
    A file that is too big, not BibTeX, or holds no arXiv entry is a UserError."""
    import bibtexparser

    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    if len(raw) > MAX_BIBTEX_BYTES:
        raise UserError(f"the BibTeX file is {len(raw) / 1e6:.1f} MB; at most {MAX_BIBTEX_BYTES // (1024 * 1024)} MB")
    text = raw.decode("utf-8", "replace")
    if "@" not in text:
        raise UserError("this is not a BibTeX file: it holds no entry (entries start with @article{…, @misc{… )")
    library = bibtexparser.parse_string(text)
    if not library.entries:
        stopped = library.failed_blocks[0].start_line if library.failed_blocks else None
        problem = f" (the parser stopped at line {stopped + 1})" if stopped is not None else ""
        raise UserError(f"no readable BibTeX entry in this file{problem}")
    ids, others, seen = [], 0, set()
    for entry in library.entries:
        found = _entry_arxiv_id({k.lower(): str(v.value) for k, v in entry.fields_dict.items()})
        if found is None:
            others += 1
            continue
        parsed = parse_arxiv_id(found)
        base = parsed[0] if parsed else found
        if base not in seen:
            seen.add(base)
            ids.append(found)
    if not ids:
        raise UserError(f"none of the {len(library.entries)} entries in this BibTeX file is an arXiv paper (no eprint, "
                        "arxiv.org URL or arXiv DOI); export them from arXiv, or paste arXiv ids")
    return ids, others


def arxiv_ids_from_bibtex_file(path) -> tuple[list[str], int]:
    """arxiv_ids_from_bibtex of a file, refused by its size before it is read."""
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        raise UserError(f"no such file: {path}")
    if path.stat().st_size > MAX_BIBTEX_BYTES:
        raise UserError(f"the BibTeX file is {path.stat().st_size / 1e6:.1f} MB; at most "
                        f"{MAX_BIBTEX_BYTES // (1024 * 1024)} MB")
    return arxiv_ids_from_bibtex(path.read_bytes())
