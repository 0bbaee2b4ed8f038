"""What an import accepts (issue #34): dates within arXiv's life, ids, field types; a bad line is reported by number
and skipped; who may change the shared library; a run row no run is behind does not stay 'running'."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from copilot.errors import UserError
from copilot.features.library import check_may_change
from copilot.ingest import Ingestor
from copilot.sources.snapshot import BadLine, SnapshotError, paper_from_row, read_snapshot

GOOD = {"id": "2503.11794", "title": "A title", "summary": "An abstract.", "authors": ["Ann Lee"],
        "categories": ["cs.CL"], "listing_date": "2025-03-14"}


@pytest.mark.parametrize("change,reason", [
    ({"listing_date": "9999-12-31"}, "outside arXiv's life"),
    ({"listing_date": "1970-01-01"}, "outside arXiv's life"),
    ({"id": "2503.11794v999"}, "not a real arXiv version"),
    ({"id": "not-an-id"}, "no valid arXiv id"),
    ({"title": {"x": 1}}, "title is not text"),
    ({"summary": 42}, "summary is not text"),
    ({"authors": [1, 2]}, "authors is not a list"),
    ({"categories": {"cs": 1}}, "categories is not a list"),
    # issue #41: what one row may hold is bounded, and the message says the limit
    ({"summary": "word " * 400_000}, "the abstract has 1,999,999 characters; a paper may hold at most 10,000"),
    ({"title": "T" * 1_001}, "at most 1,000"),
    ({"authors": [f"Author {n}" for n in range(5_001)]}, "5,001 names; a paper may hold at most 5,000"),
    ({"authors": ["x" * 301]}, "an author's name has 301 characters"),
])
def test_a_bad_row_is_refused_with_its_reason(change, reason):
    with pytest.raises(SnapshotError, match=reason):
        paper_from_row({**GOOD, **change})


def test_an_authors_string_is_split_into_names_not_characters():
    assert paper_from_row({**GOOD, "authors": "Ann Lee, Bob Kay and Cy Do"}).authors == ["Ann Lee", "Bob Kay", "Cy Do"]


def test_deep_nesting_and_lone_surrogates_are_one_bad_or_cleaned_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    lines = ["[" * 100_000 + "]" * 100_000, json.dumps({**GOOD, "title": "x\ud800y"}),
             json.dumps({**GOOD, "listing_date": "9999-12-31"}), json.dumps(GOOD)]
    path.write_text("\n".join(lines) + "\n")
    got = list(read_snapshot(path))
    assert isinstance(got[0], BadLine) and got[0].line_no == 1 and "nested" in got[0].reason
    assert got[1].title == "x\ufffdy"
    assert isinstance(got[2], BadLine) and got[2].line_no == 3 and "9999-12-31" in got[2].reason
    assert got[3].id == "2503.11794"


def test_only_admins_change_the_library_when_admins_are_named():
    with_admins = SimpleNamespace(settings=SimpleNamespace(admins=["ann"]))
    check_may_change(with_admins, "ann")
    check_may_change(with_admins, None)                      # the CLI
    with pytest.raises(UserError, match="only an admin"):
        check_may_change(with_admins, "bob")
    check_may_change(SimpleNamespace(settings=SimpleNamespace(admins=[])), "bob")


def test_a_running_row_no_run_is_behind_is_marked_interrupted():
    marked = []
    rows = [SimpleNamespace(id=1, pid=os.getpid()), SimpleNamespace(id=2, pid=2 ** 22 + 7)]
    runs = SimpleNamespace(running=lambda: rows, mark_interrupted=marked.append)
    Ingestor.reconcile(runs)
    assert marked == [1, 2]
