"""Bulk import of JSON-lines snapshots. Two schemas are understood:

- daily-listing rows: id, title, summary, authors (list), categories (list), listing_date, comment …
- the Kaggle `arxiv-metadata-oai-snapshot` rows: id, title, abstract, authors (string),
  categories (space-separated), versions [{version, created}], update_date …
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

from copilot.records import Paper, clean_text, parse_arxiv_id


class SnapshotError(ValueError):
    pass


@dataclass
class BadLine:
    line_no: int
    reason: str


def _kaggle_authors(row: dict) -> list[str]:
    parsed = row.get("authors_parsed")
    if isinstance(parsed, list) and parsed:
        names = []
        for parts in parsed:
            if isinstance(parts, list) and parts:
                last, first = str(parts[0]).strip(), str(parts[1]).strip() if len(parts) > 1 else ""
                names.append(clean_text(f"{first} {last}"))
        if names:
            return names
    return [clean_text(a) for a in str(row.get("authors", "")).replace(" and ", ", ").split(",") if a.strip()]


def _kaggle_versions(row: dict) -> tuple[int, date | None, date | None]:
    versions = row.get("versions") or []
    created = []
    for item in versions:
        try:
            created.append(parsedate_to_datetime(item["created"]).date())
        except (KeyError, TypeError, ValueError):
            continue
    number = len(versions) or 1
    return number, (created[0] if created else None), (created[-1] if created else None)


def paper_from_row(row: dict) -> Paper:
    """Build a Paper from a row of either schema; raises SnapshotError saying what is wrong."""
    if not isinstance(row, dict):
        raise SnapshotError("not a JSON object")
    parsed = parse_arxiv_id(str(row.get("id", "")))
    if not parsed:
        raise SnapshotError(f"no valid arXiv id (got {str(row.get('id'))[:40]!r})")
    paper_id, version_in_id = parsed
    title = clean_text(row.get("title"))
    abstract = clean_text(row.get("summary") if "summary" in row else row.get("abstract"))
    if not title or not abstract:
        raise SnapshotError("missing title or abstract")
    if "listing_date" in row or "summary" in row:
        categories = row.get("categories") or []
        if isinstance(categories, str):
            categories = categories.split()
        authors = [clean_text(a) for a in row.get("authors") or [] if clean_text(a)]
        try:
            published = date.fromisoformat(str(row.get("listing_date") or row.get("published", ""))[:10])
        except ValueError:
            raise SnapshotError("missing or bad listing_date") from None
        return Paper(id=paper_id, title=title, abstract=abstract, authors=authors, categories=list(categories),
                     published=published, version=version_in_id or 1, updated=published,
                     comment=clean_text(row.get("comment")))
    version, first, last = _kaggle_versions(row)
    try:
        updated = datetime.strptime(str(row.get("update_date")), "%Y-%m-%d").date()
    except ValueError:
        updated = last
    published = first or updated
    if published is None:
        raise SnapshotError("no date (versions or update_date)")
    return Paper(id=paper_id, title=title, abstract=abstract, authors=_kaggle_authors(row),
                 categories=str(row.get("categories", "")).split(), published=published,
                 version=version_in_id or version, updated=last or updated, comment=clean_text(row.get("comments")))


def read_snapshot(path: Path, limit: int | None = None) -> Iterator[Paper | BadLine]:
    """Yield a Paper per good line and a BadLine (with its 1-based number) per malformed one."""
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(f"no such file: {path}")
    taken = 0
    with path.open("r", encoding="utf-8", errors="replace") as lines:
        for line_no, line in enumerate(lines, start=1):
            if limit is not None and taken >= limit:
                return
            if not line.strip():
                continue
            try:
                yield paper_from_row(json.loads(line))
                taken += 1
            except json.JSONDecodeError as error:
                yield BadLine(line_no, f"not JSON ({error.msg})")
            except SnapshotError as error:
                yield BadLine(line_no, str(error))
            except (TypeError, ValueError, AttributeError, KeyError) as error:  # a field of the wrong type
                yield BadLine(line_no, f"malformed row ({type(error).__name__})")
