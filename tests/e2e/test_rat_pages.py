"""RAT in Chromium with the packaged local model let write (COPILOT_MODEL_PROFILE=capable; on the tiny default
neither is offered, tests/e2e/test_trends_page.py): a deep answer in Chat with its step trace, and a related-work
draft in Related with checked citations and a BibTeX download."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.conftest import sample_papers

QUESTION = "How can language models reduce hallucination with retrieval?"


def test_deep_answer_streams_a_step_trace(app_server, page):
    url = app_server(preload=80, env={"COPILOT_LOCAL_THREADS": "1", "COPILOT_MODEL_PROFILE": "capable"})
    page.goto(url)
    page.get_by_role("tab", name="Chat").click()
    page.locator("#chat-question textarea").fill(QUESTION)
    page.locator("#chat-deep").click()
    result = page.locator("#chat-deep-answer .rat-result")
    result.wait_for(timeout=60_000)
    page.locator('#chat-deep-answer .rat-result[data-done="true"]').wait_for(timeout=480_000)
    text = page.locator("#chat-deep-answer .rat-text").inner_text()
    assert len(text.split()) >= 15
    sources = page.locator("#chat-deep-answer ol.rat-sources li")
    assert sources.count() >= 1
    cited = [int(n) for n in re.findall(r"\[(\d+)\]", text)]
    assert all(1 <= n <= sources.count() for n in cited)          # only numbers of retrieved items
    links = page.locator("#chat-deep-answer .rat-cite a").evaluate_all("els => els.map(e => e.href)")
    assert all(href.startswith("https://arxiv.org/abs/") for href in links)

    page.get_by_text("Deep answer: step trace").click()
    steps = page.locator("#chat-deep-trace .rat-step")
    expect(steps).to_have_count(3, timeout=15_000)     # the accordion renders its content after it opens
    first = steps.nth(0)
    assert first.locator(".rat-query q").inner_text().strip()
    assert first.locator(".rat-before").inner_text().strip() and first.locator(".rat-retrieved li").count() >= 1
    if first.get_attribute("data-status") != "nothing retrieved":
        assert first.locator(".rat-retrieved a").count() >= 1 and first.locator(".rat-after").count() == 1
    page.locator("#chat-deep-answer .deep-thought").wait_for(timeout=120_000)
    page.screenshot(path="/tmp/deep-answer.png", full_page=True)


def test_related_work_draft_with_checked_citations_and_bibtex(app_server, page, tmp_path):
    url = app_server(preload=80, env={"COPILOT_LOCAL_THREADS": "1", "COPILOT_MODEL_PROFILE": "capable"})
    query = sample_papers(80)[2]
    page.goto(url)
    page.get_by_role("tab", name="Related").click()
    page.locator("#related-input textarea, #related-input input").first.fill(query.id)
    page.get_by_role("tab", name="Related-work draft (RAT)").click()
    page.locator("#related-work-run").click()
    page.locator('#related-work-result .rat-result[data-done="true"]').wait_for(timeout=600_000)

    text = page.locator("#related-work-result .rat-text").inner_text()
    sources = page.locator("#related-work-result ol.rat-sources li")
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", text)}
    assert sources.count() >= 1 and all(1 <= n <= sources.count() for n in cited)
    if not cited:
        # What the tiny model writes differs by CPU (its kernels): on one of the project's machines every citation it
        # wrote for this paper was dropped by the checks. Then the page says so and offers no empty BibTeX.
        expect(page.locator("#related-work-result .rat-notes")).to_contain_text("rests on the model alone")
        expect(page.locator("#related-work-bibtex")).to_be_hidden()
        return
    links = page.locator("#related-work-result .rat-cite a").evaluate_all("els => els.map(e => e.href)")
    assert links and all(href.startswith("https://arxiv.org/abs/") for href in links)
    assert f"https://arxiv.org/abs/{query.id}" not in links       # the paper does not cite itself

    with page.expect_download() as download:
        page.locator("#related-work-bibtex a").first.click()
    path = tmp_path / "cited.bib"
    download.value.save_as(path)
    bibtex = path.read_text()
    assert bibtex.count("@misc{") == len({href for href in links})
    assert all(href.rsplit("/", 1)[1] in bibtex for href in links)
    latex = page.locator("#related-work-latex").inner_text()
    assert "\\cite{" in latex
    page.screenshot(path="/tmp/related-work.png", full_page=True)
