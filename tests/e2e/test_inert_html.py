"""HTML and JavaScript in a question, in a paper's title and abstract, in profile text and keywords, in a thought
and in the LLM's output are shown as text in Chromium: no injected script runs (each payload would set
window.__pwned) and no live handler, script, javascript: link or iframe from a payload reaches the DOM.

The LLM is an OpenAI-compatible loopback server that streams the payload as its answer.
"""

from __future__ import annotations

import shutil
from datetime import date

from playwright.sync_api import expect

from copilot.features.chat import Chat
from copilot.features.library import ingestor
from copilot.features.profile import save_profile
from copilot.records import Paper
from copilot.services import Services
from tests.conftest import make_settings
from tests.test_secrets import FakeOpenAI

PAYLOAD = ("<img src=x onerror=\"window.__pwned='img'\"><script>window.__pwned='script'</script>"
           "<svg onload=\"window.__pwned='svg'\"></svg><iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\">"
           "</iframe><a href=\"javascript:window.__pwned='link'\">x</a> [md](javascript:window.__pwned='md') ")
HOSTILE_ID = "2599.04242"
SCAN = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      if (attr.name.startsWith('on') && attr.value.includes('__pwned')) bad.push(el.tagName + ' ' + attr.name);
      if (['href', 'src', 'srcdoc'].includes(attr.name) && attr.value.includes('__pwned'))
        bad.push(el.tagName + ' ' + attr.name);
    }
    if (el.tagName === 'SCRIPT' && el.textContent.includes('__pwned')) bad.push('SCRIPT');
  }
  return bad;
}"""


def hostile_dir(preloaded, tmp_path):
    data_dir = tmp_path / "inert-data"
    shutil.copytree(preloaded(20), data_dir)
    services = Services(make_settings(data_dir))
    paper = Paper(id=HOSTILE_ID, title="Retrieval-augmented generation " + PAYLOAD,
                  abstract="We study retrieval-augmented generation for question answering. " + PAYLOAD,
                  authors=["Mallory <b onmouseover=\"window.__pwned='author'\">M</b>"], categories=["cs.CL"],
                  published=date(2025, 3, 3))
    ingestor(services).run("hostile", [paper])
    Chat(services).memory.add("Retrieval-augmented generation answers questions from papers. " + PAYLOAD,
                              [(HOSTILE_ID, "paper")], origin="test", user="local", check_redundant=False)
    # a Markdown image in a keyword loaded an external image before (issue #19): the scan finds its src
    save_profile(services, "local", "I study retrieval. " + PAYLOAD,
                 ["retrieval", PAYLOAD[:60], "![t](http://127.0.0.1:9/__pwned.png)"], [])
    return data_dir


def assert_inert(page, where: str) -> None:
    assert page.evaluate("() => window.__pwned") is None, f"an injected script ran ({where})"
    assert page.evaluate(SCAN) == [], f"live payload in the DOM ({where})"


def test_hostile_html_is_shown_as_text(app_server, preloaded, tmp_path, page):
    data_dir = hostile_dir(preloaded, tmp_path)
    with FakeOpenAI(reply="Retrieval helps [2599.04242] (answer {n}). " + PAYLOAD) as llm:
        url = app_server(env={"COPILOT_DATA_DIR": str(data_dir), "COPILOT_LLM": "openai",
                              "OPENAI_API_KEY": "sk-test-inert", "OPENAI_BASE_URL": llm.url("reply"),
                              "COPILOT_LLM_MODEL": "fake", "COPILOT_TOP_K": "4"})
        page.add_init_script("window.__pwned = undefined;")
        page.goto(url)
        page.get_by_role("tab", name="Chat").click()
        page.locator("#chat-question textarea").fill("What is retrieval-augmented generation? " + PAYLOAD)
        page.locator("#chat-ask").click()
        answer = page.locator("#chat-answer-a")
        expect(answer).to_contain_text("window.__pwned='img'", timeout=120_000)   # the payload, as text
        expect(page.locator(".chat-writing")).to_have_count(0, timeout=120_000)
        expect(page.locator("#chat-notice")).to_contain_text("<script>window.__pwned='script'</script>")
        page.locator("#chat-vote-a").click()          # sources are neutral until the vote (blind A/B)
        expect(answer.locator("a[href*='arxiv.org/abs/2599.04242']").first).to_be_attached(timeout=30_000)
        shown = page.locator("#chat-answer-a").inner_text() + page.locator("#chat-answer-b").inner_text()
        assert "Retrieval-augmented generation <img" in shown      # the hostile paper's title, as text
        assert_inert(page, "chat answers")

        page.get_by_role("tab", name="Memory").click()
        page.locator("#chat-memory-search").click()
        expect(page.locator("#chat-memory-list")).to_contain_text("onerror=", timeout=60_000)
        assert_inert(page, "memory")

        page.get_by_role("tab", name="Related").click()
        page.locator("#related-input textarea").fill(HOSTILE_ID)
        page.locator("#related-run").click()
        expect(page.locator("#related-status")).to_contain_text("Query paper: Retrieval-augmented generation <img",
                                                                timeout=180_000)
        page.get_by_role("tab", name="Aspect queries").click()
        # the LLM's descriptions, as text (their short tags such as <img …> are stripped as residue; the rest shows)
        expect(page.locator("#related-aspects")).to_contain_text("<iframe srcdoc=")
        assert_inert(page, "related")

        page.get_by_role("tab", name="Profile").click()
        expect(page.locator("#profile-text textarea")).to_have_value(
            "I study retrieval. " + PAYLOAD.strip(), timeout=30_000)
        assert_inert(page, "profile")
        page.screenshot(path="/tmp/reliability-inert-html.png", full_page=True)
        page.get_by_role("tab", name="Chat").click()
        page.wait_for_timeout(500)
        page.screenshot(path="/tmp/reliability-inert-html-chat.png", full_page=True)
        assert_inert(page, "end")
