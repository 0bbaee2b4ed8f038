"""The Trends tab in Chromium with the real local model: a bad range gives a message; on the tiny default no
research ideas are offered; on the writing path the last week gives topics, two plots, summaries that link their
papers, and research ideas with a viewable RAT trace."""

from __future__ import annotations

from tests.conftest import sample_papers


def test_trends_tab_shows_topics_plots_summaries_and_ideas(app_server, page):
    page.goto(app_server(preload=40))           # the tiny default: the product writes no ideas, and says so
    page.get_by_role("tab", name="Trends").click()
    page.locator("#trends-summaries").wait_for()
    assert not page.locator("#trends-ideas-count").is_visible()
    hidden_until_topics = ("#trends-timeline", "#trends-movers", "#trends-bib-topic", "#trends-bib-run")
    assert not any(page.locator(part).is_visible() for part in hidden_until_topics)   # no empty plots or pickers
    page.get_by_role("radio", name="Custom").check()
    page.locator("#trends-from textarea, #trends-from input").first.fill("2024-01-01")
    page.locator("#trends-to textarea, #trends-to input").first.fill("2024-01-31")
    page.locator("#trends-run").click()
    page.locator("#trends-status").get_by_text("lies outside the corpus").wait_for(timeout=30_000)
    page.get_by_role("radio", name="Last week").check()
    page.locator("#trends-run").click()
    page.locator("#trends-status").get_by_text("No research ideas with a tiny local model").wait_for(timeout=120_000)
    page.locator("#trends-timeline .js-plotly-plot").wait_for(timeout=30_000)      # topics: plots and picker shown
    assert page.locator("#trends-bib-run").is_visible()
    page.get_by_role("tab", name="Chat").click()                # nor deep answers or related-work drafts (RAT)
    page.locator("#chat-ask").wait_for()
    assert not page.locator("#chat-deep").is_visible() and not page.locator("#chat-deep-stop").is_visible()
    assert not page.locator("#chat-bibtex").is_visible()         # no empty file box before there is a file
    assert not page.locator("#chat-bib-run").is_visible()
    page.get_by_role("tab", name="Related").click()
    page.get_by_role("tab", name="Related-work draft (RAT)").click()
    page.locator("#related-work-off").get_by_text("the product writes no text of its own").wait_for()

    url = app_server(preload=40, env={"COPILOT_MODEL_PROFILE": "capable"})   # the writing path: ideas are offered
    ids = {p.id for p in sample_papers(40)}
    page.goto(url)
    page.get_by_role("tab", name="Trends").click()

    page.get_by_role("radio", name="Last week").check()
    for slider, value in (("#trends-summaries", "1"), ("#trends-ideas-count", "1")):   # keep the LLM work small
        page.locator(f"{slider} input[type=number]").fill(value)
        page.locator(f"{slider} input[type=number]").press("Enter")
    page.locator("#trends-run").click()
    table = page.locator("#trends-topic-table")
    table.wait_for(state="visible", timeout=120_000)
    assert table.locator("tr.trends-topic").count() >= 2
    assert page.locator("#trends-count").inner_text() == "40"
    page.locator("#trends-timeline .js-plotly-plot").wait_for(timeout=30_000)
    page.locator("#trends-movers .js-plotly-plot").wait_for(timeout=30_000)

    # the run streams: summaries and ideas arrive later; the status says when it is done
    page.locator("#trends-status [data-state=done]").wait_for(state="attached", timeout=900_000)  # 5 model calls
    overall = page.locator("#trends-overall")
    assert overall.inner_text().strip()
    links = page.locator("#trends-summary a, #trends-topic-table a").evaluate_all("els => els.map(e => e.href)")
    assert links and all(h.startswith("https://arxiv.org/abs/") for h in links)
    assert {h.rsplit("/", 1)[1] for h in links} <= ids                 # only papers of the analysed range
    # an idea with its RAT trace, or (the packaged 135M model's ideas often fail the grounding checks) the
    # page says no idea passed and still shows what the model wrote
    ideas = page.locator("li.trends-idea")
    shown = ideas.first if ideas.count() else page.locator("#trends-ideas")
    if not ideas.count():
        assert "No idea is shown" in page.locator("#trends-ideas").inner_text()
    shown.locator("summary").first.click()
    shown.get_by_text("query:").first.wait_for()
    page.screenshot(path="/tmp/trends-week.png", full_page=True)
