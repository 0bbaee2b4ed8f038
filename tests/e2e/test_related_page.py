"""The Related tab in Chromium: an arXiv id of a preloaded paper → related papers ranked by the default ranking
(prism-extractive on the local model: no LLM call), each list's rank per paper, the aspect queries, the baseline."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.conftest import sample_papers


def test_related_tab_ranks_papers_with_aspect_ranks(app_server, page):
    # one llama.cpp thread: two threads on two shared cores slow to a crawl when other work competes for them
    url = app_server(preload=40, env={"COPILOT_LOCAL_THREADS": "1"})
    query = sample_papers(40)[2]
    page.goto(url)
    page.get_by_role("tab", name="Related").click()

    box = page.locator("#related-input textarea, #related-input input").first
    box.fill("not an id")
    page.locator("#related-run").click()
    page.locator("#related-status").get_by_text("not an arXiv id or URL").wait_for(timeout=30_000)

    box.fill(f"https://arxiv.org/abs/{query.id}")
    page.locator("#related-run").click()
    table = page.locator("#related-table")
    table.wait_for(state="visible", timeout=480_000)

    status = page.locator("#related-status").inner_text()
    assert query.title[:40] in status and "from the library" in status
    assert "Ranked by prism-extractive" in status                     # the tab says which ranking this is
    rows = table.locator("tbody tr.related-row")
    assert rows.count() == 20
    assert table.locator("thead th").all_inner_texts() == ["#", "Title", "Date"]     # no scores by default (#59)
    expect(page.locator("#related-ranks")).to_be_hidden()
    page.locator("#related-scores summary").click()
    scores = page.locator("#related-ranks")
    expect(scores).to_be_visible()
    headers = scores.locator("thead th").all_inner_texts()
    every = ["Research question rank", "Method rank", "Experiments rank", "Abstract rank", "Title rank",
             "Words (BM25) rank"]
    assert len(headers) > 2 and headers[2:] == [h for h in every if h in headers[2:]]
    score_rows = scores.locator("tbody tr")
    cells = [score_rows.nth(i).locator("td").all_inner_texts()[2:] for i in range(score_rows.count())]
    assert all(any(row[n] != "–" for row in cells) for n in range(len(headers) - 2))   # no column all "–" (#38)
    first = score_rows.nth(0).locator("td").all_inner_texts()
    assert re.fullmatch(r"0\.0\d{3}", first[1])                       # a weighted RRF score: at most 4.5 / 61
    aspect_ranks = [cell for cell in first[2:] if cell != "–"]
    assert aspect_ranks and all(cell.isdigit() for cell in aspect_ranks)
    links = table.locator("a").evaluate_all("els => els.map(e => e.href)")
    assert all(href.startswith("https://arxiv.org/abs/") for href in links)
    assert f"https://arxiv.org/abs/{query.id}" not in links            # the query paper itself is not "related"
    page.screenshot(path="/tmp/related-results.png", full_page=True)

    page.get_by_role("tab", name="Aspect queries").click()
    aspects = page.locator("#related-aspects")
    aspects.get_by_role("heading", name=re.compile("Research question")).wait_for()
    assert aspects.locator("p.aspect-method, p.aspect-research_question, p.aspect-experiments").count() >= 2
    assert "the abstract's own sentences" in aspects.inner_text()
    page.get_by_role("tab", name="Abstract only (baseline)").click()
    assert page.locator("#baseline-table tbody tr").count() == 20
    page.screenshot(path="/tmp/related-aspects.png", full_page=True)
