"""A newcomer's first hour in Chromium (issue #20): fill an empty library by uploading a snapshot on the Library tab
(progress, count rising, bad lines named), then search it with a filter and open a result's related papers; a CLI
import into the running app's data dir is found by search at once."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from copilot.features.bibtex import arxiv_ids_from_bibtex
from tests.conftest import PAPERS_JSONL, read_rows
from tests.helpers import run_cli, subprocess_env


def test_upload_a_snapshot_then_search_and_open_related(app_server, page, tmp_path):
    data_dir = tmp_path / "fresh-data"
    url = app_server(env={"COPILOT_DATA_DIR": str(data_dir)})
    rows = read_rows(PAPERS_JSONL, 0, 60)
    snapshot = tmp_path / "first.jsonl"
    snapshot.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n", encoding="utf-8")

    page.goto(url)
    page.get_by_role("tab", name="Library").click()
    expect(page.locator("#corpus-count")).to_have_text("0")
    page.locator("#library-upload input[type=file]").set_input_files(str(snapshot))
    result = page.locator("#library-import-result")
    expect(result).to_contain_text("Imported: 60 new", timeout=180_000)
    expect(result.locator(".library-bad-lines")).to_contain_text("line 61")
    expect(page.locator("#corpus-count")).to_have_text("60", timeout=30_000)
    expect(page.locator("#library-history")).to_contain_text("upload:first.jsonl")

    # search with a category filter, then the first result's related papers
    target = rows[7]
    page.get_by_role("tab", name="Search").click()
    expect(page.locator("#search-related")).to_be_hidden()       # nothing to pick from before a search
    page.locator("#search-query textarea, #search-query input").first.fill(target["title"])
    page.locator("#search-categories input").fill(target["categories"][0])
    page.locator("#search-categories input").press("Enter")
    page.locator("#search-run").click()
    first = page.locator("#search-results .search-card").first
    expect(first).to_have_attribute("data-id", target["id"], timeout=60_000)
    expect(first.locator(".search-meta")).to_contain_text(target["authors"][0])
    expect(first.locator("a", has_text="PDF")).to_have_attribute("href", f"https://arxiv.org/pdf/{target['id']}")
    with page.expect_download() as download:                      # the results as BibTeX, same ids in order
        page.locator("#search-bibtex a").first.click()
    ids, _ = arxiv_ids_from_bibtex(download.value.path().read_bytes())
    cards = page.locator("#search-results .search-card")
    assert ids == [cards.nth(i).get_attribute("data-id") for i in range(cards.count())]
    page.locator("#search-related").click()
    expect(page.locator("#related-table tbody tr").first).to_be_visible(timeout=120_000)
    expect(page.locator("#related-input textarea, #related-input input").first).to_have_value(target["id"])
    expect(page.locator("#related-table .related-byline").first).not_to_be_empty()     # authors under each title
    expect(page.locator("#related-bibtex a").first).to_be_visible()

    # a CLI import while the app runs: search finds the new paper without a restart
    newcomer = read_rows(PAPERS_JSONL, 900, 1)[0]
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps(newcomer) + "\n", encoding="utf-8")
    done = run_cli(["import", str(more)], subprocess_env(data_dir))
    assert done.returncode == 0, done.stderr[-2000:]
    page.get_by_role("tab", name="Search").click()
    page.locator("#search-categories input").press("Backspace")
    page.locator("#search-query textarea, #search-query input").first.fill(newcomer["title"])
    page.locator("#search-run").click()
    expect(page.locator("#search-results .search-card").first).to_have_attribute("data-id", newcomer["id"],
                                                                                  timeout=60_000)
