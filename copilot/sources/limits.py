"""What one paper may hold, whatever source it comes from: a snapshot line, an upload, the arXiv API (the daily
ingestion, pasted ids, a profile's papers). Issue #41: a 1.9 MB abstract made Related take 123 s and send 1.9 MB to
every user; issue #47: papers from the arXiv API had no limits at all, and every text a paper holds reaches the
sentence splitter and the answer's checks. arXiv itself caps an abstract at 1,920 characters; the limits leave room
for other sources and refuse only the absurd.
"""

from __future__ import annotations

from copilot.records import Paper

ROW_LIMITS = {"title": 1_000, "abstract": 10_000, "comment": 2_000, "authors": 5_000, "author": 300,
              "categories": 50}


def limit_problem(paper: Paper) -> str | None:
    """Why `paper` holds more than a paper may (the field, its size and the limit, as a sentence), or None."""
    sizes = {"title": len(paper.title), "abstract": len(paper.abstract), "comment": len(paper.comment or ""),
             "authors": len(paper.authors), "author": max((len(a) for a in paper.authors), default=0),
             "categories": len(paper.categories)}
    for field, size in sizes.items():
        if size > ROW_LIMITS[field]:
            unit = {"authors": "names", "categories": "categories"}.get(field, "characters")
            what = "an author's name" if field == "author" else f"the {field}"
            return f"{what} has {size:,} {unit}; a paper may hold at most {ROW_LIMITS[field]:,}"
    return None
