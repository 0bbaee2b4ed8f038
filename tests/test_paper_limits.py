"""Every source's papers get the same limits (issue #47): the daily ingestion and pasted ids (the arXiv API, through
the loopback fake arXiv), a profile's papers and an uploaded snapshot. A paper over a limit is not stored, and the
run says which paper and why in one sentence (the import report, the CLI, the run's history). Before the fix only a
snapshot's rows had limits; a 12,000-character abstract from the API was stored and split at every retrieval."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import pytest

from copilot.features import library
from copilot.features import profile as P
from copilot.services import Services
from copilot.ui.library import import_report
from tests.conftest import ARXIV_RESPONSES, make_settings
from tests.fake_arxiv import Canned, fake_arxiv  # noqa: F401 (fixture)

RECORDED = ARXIV_RESPONSES / "arxiv.py_2026_recorded"
LISTING = "q_testing_s0_m10_bc5a6c384fe9.json"       # ten recorded papers
ONE_PAPER = "id_1707.08567_s0_m100_6a1afebfc6a3.json"
LONG_ABSTRACT = "A. " * 4_000                          # 11,999 characters once cleaned: within no limit
REFUSED = re.compile(r"paper (\S+) was not stored: the abstract has 11,999 characters; "
                     r"a paper may hold at most 10,000")


def with_long_first_abstract(name: str) -> tuple[str, bytes, str]:
    """The recorded answer `name` with its first entry's abstract replaced: (query, body, that entry's id)."""
    record = json.loads((RECORDED / name).read_text(encoding="utf-8"))
    body = re.sub(r"<summary>.*?</summary>", f"<summary>{LONG_ABSTRACT}</summary>", record["body"], count=1,
                  flags=re.S)
    first = re.search(r"<entry>\s*<id>https?://arxiv\.org/abs/([^<]+?)(?:v\d+)?</id>", body).group(1)
    return urlsplit(record["url"]).query, body.encode("utf-8"), first


@pytest.fixture
def services(fake_arxiv, tmp_path):
    return Services(make_settings(tmp_path / "data", arxiv_api_url=fake_arxiv.url, ingest_max_papers=10,
                                  arxiv_retries=0))


def test_the_daily_ingestion_leaves_out_a_paper_over_the_limits_and_says_so(fake_arxiv, services):
    _, body, refused = with_long_first_abstract(LISTING)
    fake_arxiv.listing = Canned(200, body, "listing with one long abstract")
    counts = library.ingest_from_arxiv(services, trigger="manual")
    assert (counts.added, counts.skipped) == (9, 1)
    assert services.store.count("paper") == 9 and not services.store.get_papers([refused])
    [bad] = counts.bad_lines
    assert REFUSED.fullmatch(bad.sentence).group(1) == refused
    [run] = library.ingest_history(services)
    assert run["status"] == "ok" and run["skipped"] == 1
    assert run["error"] == f"1 paper not stored: {bad.sentence}"


def test_pasted_ids_leave_out_a_paper_over_the_limits_and_the_report_names_it(fake_arxiv, services):
    query, body, refused = with_long_first_abstract(ONE_PAPER)
    fake_arxiv.add_response(query, body)
    counts, notes = library.import_ids(services, "https://arxiv.org/abs/1707.08567")
    assert (refused, counts.added, counts.skipped, notes) == ("1707.08567", 0, 1, [])
    assert services.store.count("paper") == 0
    report = import_report(counts, notes)
    assert "Not stored (too large" in report
    assert REFUSED.search(report).group(1) == "1707.08567"


def test_a_profiles_papers_from_arxiv_get_the_same_limits(fake_arxiv, services):
    query, body, _ = with_long_first_abstract(ONE_PAPER)
    fake_arxiv.add_response(query, body)
    assert P.upsert_selected(services, "ann", ["1707.08567"]) == 0
    assert services.store.count("paper") == 0


def test_an_uploaded_row_over_the_limits_is_named_by_line(services, tmp_path):
    rows = [{"id": "2503.11794", "title": "Long", "summary": LONG_ABSTRACT, "authors": ["Ann Lee"],
             "categories": ["cs.CL"], "listing_date": "2025-03-14"},
            {"id": "2503.11795", "title": "Short", "summary": "An abstract.", "authors": ["Ann Lee"],
             "categories": ["cs.CL"], "listing_date": "2025-03-14"}]
    path = tmp_path / "upload.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    counts = library.import_upload(services, path)
    assert (counts.added, counts.skipped) == (1, 1)
    assert [bad.sentence for bad in counts.bad_lines] == [
        "line 1: the abstract has 11,999 characters; a paper may hold at most 10,000"]
    assert "Skipped lines (fix them" in import_report(counts)
