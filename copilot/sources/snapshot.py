"""Bulk import of JSON-lines snapshots. Two schemas are understood:

- daily-listing rows: id, title, summary, authors (list), categories (list), listing_date, comment …
- the Kaggle `arxiv-metadata-oai-snapshot` rows: id, title, abstract, authors (string),
  categories (space-separated), versions [{version, created}], update_date …
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path

from copilot.records import Paper, clean_text, parse_arxiv_id, storable_text
from copilot.sources.limits import limit_problem

FIRST_DAY = date(1991, 8, 14)          # arXiv's first paper; a date before it, or after today, is refused (issue #34:
                                       # one row dated 9999-12-31 broke Trends' ranges and every For-you list)
MAX_VERSION = 100                      # arXiv papers have a few versions; more is a made-up id


def _within_limits(paper: Paper) -> Paper:
    """The paper, or SnapshotError naming the field over its limit and the limit (the same limits as every source)."""
    problem = limit_problem(paper)
    if problem:
        raise SnapshotError(problem)
    return paper


class SnapshotError(ValueError):
    pass


def _text(row: dict, *names: str) -> str:
    """The first present field of `names` as clean text; a field that is not a string is refused."""
    for name in names:
        if name in row and row[name] is not None:
            value = row[name]
            if not isinstance(value, str):
                raise SnapshotError(f"{name} is not text (got {type(value).__name__})")
            return clean_text(storable_text(value))
    return ""


def _names(value: object, field: str) -> list[str]:
    """A list of names: a list of strings, or one string of names separated by commas or ' and ' (never split into
    its characters)."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.replace(" and ", ", ").split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SnapshotError(f"{field} is not a list of names")
    return [n for n in (clean_text(storable_text(v)) for v in value) if n]


def _checked_date(day: date | None, field: str) -> date | None:
    if day is not None and not FIRST_DAY <= day <= date.today() + timedelta(days=1):
        raise SnapshotError(f"{field} {day.isoformat()} is outside arXiv's life ({FIRST_DAY.isoformat()} to today)")
    return day


@dataclass
class BadLine:
    """A line of a snapshot that was skipped, or (`paper_id` set, `line_no` 0) a paper from another source that was
    not stored."""
    line_no: int
    reason: str
    paper_id: str = ""

    @property
    def sentence(self) -> str:
        if self.paper_id:
            return f"paper {self.paper_id} was not stored: {self.reason}"
        return f"line {self.line_no}: {self.reason}"


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
    return _names(row.get("authors"), "authors")


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
    if version_in_id and version_in_id > MAX_VERSION:
        raise SnapshotError(f"version v{version_in_id} of {paper_id} is not a real arXiv version")
    title = _text(row, "title")
    abstract = _text(row, "summary", "abstract")
    if not title or not abstract:
        raise SnapshotError("missing title or abstract")
    categories = row.get("categories") or []
    if isinstance(categories, str):
        categories = categories.split()
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise SnapshotError("categories is not a list of category names")
    if "listing_date" in row or "summary" in row:
        try:
            published = date.fromisoformat(str(row.get("listing_date") or row.get("published", ""))[:10])
        except ValueError:
            raise SnapshotError("missing or bad listing_date") from None
        _checked_date(published, "listing_date")
        return _within_limits(Paper(
            id=paper_id, title=title, abstract=abstract, authors=_names(row.get("authors"), "authors"),
            categories=list(categories), published=published, version=version_in_id or 1, updated=published,
            comment=_text(row, "comment")))
    version, first, last = _kaggle_versions(row)
    try:
        updated: date | None = datetime.strptime(str(row.get("update_date")), "%Y-%m-%d").date()
    except ValueError:
        updated = last
    first_day = _checked_date(first or updated, "first version date")
    if first_day is None:
        raise SnapshotError("no date (versions or update_date)")
    return _within_limits(Paper(id=paper_id, title=title, abstract=abstract, authors=_kaggle_authors(row),
                                categories=list(categories), published=first_day, version=version_in_id or version,
                                updated=_checked_date(last or updated, "update_date"), comment=_text(row, "comments")))


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
            except RecursionError:
                yield BadLine(line_no, "nested too deeply to be a paper")
            except SnapshotError as error:
                yield BadLine(line_no, str(error))
            except (TypeError, ValueError, AttributeError, KeyError) as error:  # a field of the wrong type
                yield BadLine(line_no, f"malformed row ({type(error).__name__})")
