"""The page opens in Chromium with the five tabs, and the Library tab shows the corpus count."""

from __future__ import annotations

import re

from playwright.sync_api import expect


def test_page_shows_tabs_and_corpus_count(app_server, page):
    url = app_server(preload=40)
    page.goto(url)
    for tab in ("Profile", "Trends", "Chat", "Related", "Library"):
        expect(page.get_by_role("tab", name=tab)).to_be_visible()
    page.get_by_role("tab", name="Library").click()
    count = page.locator("#corpus-count")
    expect(count).to_have_text("40")
    assert re.search(r"Next ingestion:\*?\*?\s*\d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d UTC",   # a readable time (#49)
                     page.locator("#library-status").inner_text())
    page.screenshot(path="/tmp/library-tab.png", full_page=True)
