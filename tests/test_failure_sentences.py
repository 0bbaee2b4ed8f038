"""Failures talk to people (issue #38): an arXiv or model failure reads as a sentence saying what failed and what
still works, never Python's exception text; the details go to the log. Real stores in a temporary data dir; arXiv
is a double that fails the way the HTTPS bug of issue #38 did."""

from __future__ import annotations

import re

import pytest

from copilot.errors import plain_reason
from copilot.features import library, profile_lookup
from copilot.features.profile import ProfileError
from copilot.ingest import IngestCounts
from copilot.scheduler import IngestScheduler
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSourceError
from copilot.ui.library import history_frame, status_markdown
from tests.conftest import make_settings

SEEN = ("arXiv response could not be read (TypeError: super(type, obj): obj must be an instance or subtype of "
        "type)")
PYTHON_TEXT = re.compile(r"TypeError|super\(|Error:|Traceback")


class BrokenArxiv:
    """Every request fails as issue #38's did, before any paper arrives."""

    def by_ids(self, ids):
        raise ArxivSourceError(SEEN)

    def by_author(self, query, max_results=None):
        raise ArxivSourceError(SEEN)
        yield  # pragma: no cover - a generator, like the real one

    def by_categories(self, categories, days, max_papers):
        raise ArxivSourceError(SEEN)
        yield  # pragma: no cover


@pytest.fixture
def broken(tmp_path):
    services = Services(make_settings(tmp_path / "data"))
    services.arxiv = BrokenArxiv()
    return services


def _readable(text: str) -> None:
    assert not PYTHON_TEXT.search(text), text
    assert "arXiv" in text


@pytest.mark.parametrize(("raw", "plain"), [
    (SEEN, "arXiv response could not be read"),
    ("cannot reach arXiv at https://export.arxiv.org/api/query (ConnectionError)",
     "cannot reach arXiv at https://export.arxiv.org/api/query"),
    ("arXiv answered HTTP 503 (after 3 tries)", "arXiv answered HTTP 503 (after 3 tries)"),
    ("TypeError: 'NoneType' object is not iterable", ""),
])
def test_the_plain_reason_drops_pythons_words(raw, plain):
    assert plain_reason(raw) == plain


def test_fetch_these_papers_says_what_failed_and_what_still_works(broken):
    with pytest.raises(library.UserError) as caught:
        library.import_ids(broken, "2401.01234")
    message = str(caught.value)
    _readable(message)
    assert "nothing was fetched" in message and "still work" in message


def test_run_ingestion_now_and_its_history_read_as_sentences(broken):
    scheduler = IngestScheduler(lambda trigger: library.ingest_from_arxiv(broken, trigger=trigger), "0 6 * * *")
    scheduler._guard.acquire()
    scheduler._run_locked("manual")
    _readable(scheduler.last_error or "")
    run = broken.runs.recent(1)[0]
    assert run.status == "failed"
    _readable(run.error or "")
    page = status_markdown(broken, scheduler)
    assert not PYTHON_TEXT.search(page), page
    assert "Last manual run failed" in page and "unchanged" in page
    assert not any(PYTHON_TEXT.search(str(error)) for error in history_frame(broken)["error"])


def test_old_runs_holding_pythons_text_are_shown_plainly(broken):
    run_id = broken.runs.start("arxiv:cs.CL (scheduled)", 1234)
    broken.runs.finish(run_id, "failed", IngestCounts().totals(), f"ArxivSourceError: {SEEN}")
    assert not any(PYTHON_TEXT.search(str(error)) for error in history_frame(broken)["error"])


def test_a_profile_lookup_with_arxiv_down_says_so_plainly(broken):
    with pytest.raises(ProfileError) as caught:
        profile_lookup.lookup_author(broken, "Xqzzyv Blorptenheimer")
    message = str(caught.value)
    _readable(message)
    assert "No papers found" in message and "profile is unchanged" in message


def test_a_failed_lookup_clears_the_previous_lookups_papers(broken):
    """Issue #38: after "Xqzzyv Blorptenheimer" the previous lookup's three papers stayed listed and checked."""
    from copilot.ui.profile import lookup_view

    message, groups, papers, state = lookup_view(broken, "Xqzzyv Blorptenheimer")
    assert "No papers found" in message
    assert (papers["choices"], papers["value"]) == ([], []) and groups["visible"] is False
    assert state["papers"] == {}
