"""Filling the library from the page (issue #20): an uploaded JSON-lines snapshot goes through the CLI's idempotent
import path with a per-line report; a file that is not JSON lines is refused before anything is written; pasted
arXiv ids are fetched from (a loopback) arXiv; the runs are labelled."""

from __future__ import annotations

import json

import pytest

from copilot.errors import UserError
from copilot.features import library
from copilot.services import Services
from tests.conftest import KAGGLE_JSONL, PAPERS_JSONL, make_settings, read_rows
from tests.fake_arxiv import fake_arxiv  # noqa: F401 (fixture)


def test_an_upload_mixing_both_schemas_and_bad_lines_imports_the_good_ones_and_names_the_bad(services, tmp_path):
    listing = read_rows(PAPERS_JSONL, 0, 3)
    kaggle = read_rows(KAGGLE_JSONL, 0, 2)
    lines = [json.dumps(listing[0]), "{not json", json.dumps(kaggle[0]), json.dumps({"id": "2401.00001"}),
             json.dumps(listing[1]), "", json.dumps(kaggle[1]), json.dumps(listing[2])]
    upload = tmp_path / "mixed.jsonl"
    upload.write_text("\n".join(lines) + "\n", encoding="utf-8")
    seen = []

    counts = library.import_upload(services, upload, seen.append)
    assert (counts.added, counts.skipped) == (5, 2)
    assert [bad.line_no for bad in counts.bad_lines] == [2, 4]
    assert "not JSON" in counts.bad_lines[0].reason
    assert seen and seen[-1].added == 5                     # the progress callback saw the batches land
    assert services.store.count("paper") == 5
    [run] = library.ingest_history(services)
    assert run["source"] == "upload:mixed.jsonl" and run["status"] == "ok"

    again = library.import_upload(services, upload)          # re-running is safe: nothing new, nothing doubled
    assert (again.added, again.unchanged) == (0, 5) and services.store.count("paper") == 5


@pytest.mark.parametrize("content, message", [
    ("", "empty"),
    ("id,title,summary\n2401.00001,A,B\n", "not a JSON-lines snapshot"),
    ("[{\"id\": \"2401.00001\"}]\n", "not a JSON-lines snapshot"),
])
def test_a_file_that_is_not_json_lines_is_refused_before_anything_is_written(services, tmp_path, content, message):
    upload = tmp_path / "papers.jsonl"
    upload.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        library.import_upload(services, upload)
    assert library.ingest_history(services) == [] and services.store.count("paper") == 0


def test_pasted_ids_are_fetched_from_arxiv_and_unknown_ones_named(fake_arxiv, tmp_path):  # noqa: F811
    services = Services(make_settings(tmp_path / "data", arxiv_api_url=fake_arxiv.url, arxiv_retries=1))
    counts, notes = library.import_ids(services, "0808.05394, https://arxiv.org/abs/1707.08567 not-an-id")
    assert counts.added == 1 and services.store.get_papers(["1707.08567"])
    assert notes == ["not arXiv ids, ignored: not-an-id", "not found on arXiv: 0808.05394"]
    assert library.ingest_history(services)[0]["source"] == "arxiv:ids (manual)"
    with pytest.raises(UserError, match="no arXiv id"):
        library.import_ids(services, "hello world")


def test_pasted_ids_with_arxiv_down_say_so_and_import_nothing(tmp_path):
    services = Services(make_settings(tmp_path / "data", arxiv_api_url="http://127.0.0.1:9/api/query",
                                      arxiv_retries=1, arxiv_timeout=2.0))
    with pytest.raises(UserError, match="arXiv could not be reached"):
        library.import_ids(services, "1707.08567")
    assert services.store.count("paper") == 0
