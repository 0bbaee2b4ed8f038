"""The Chat tab in Chromium with the real local model: a first question (no thought yet: one answer) leaves a
thought; asking again shows two blind answers; the vote survives a reload; HTML in a question stays text."""

from __future__ import annotations

import re

from playwright.sync_api import expect

ANSWER_TIMEOUT_MS = 900_000  # the local model on a shared 2-core box can be very slow
QUESTION = "How are large language models evaluated on reasoning benchmarks?"
SCRIPT = "<script>window.__chat_xss = 1</script><b>bold?</b>"


def ask(page, question: str) -> None:
    page.locator("#chat-question textarea").fill(question)
    page.locator("#chat-ask").click()


def open_chat(page, url: str) -> None:
    page.goto(url)
    page.get_by_role("tab", name="Chat").click()
    expect(page.locator("#chat-question textarea")).to_be_visible()


def test_ask_vote_reload_and_escaping(app_server, page):
    url = app_server(preload=60, env={"COPILOT_ANSWER_MAX_TOKENS": "32", "COPILOT_CONTEXT_TOKENS": "400",
                                      "COPILOT_TOP_K": "3", "COPILOT_LLM_TIMEOUT": "900",
                                      # one thread: two spin-waiting threads on a busy 2-core box are far slower
                                      "COPILOT_LOCAL_THREADS": "1"})
    open_chat(page, url)

    ask(page, "   ")
    expect(page.locator("#chat-notice")).to_contain_text("Type a question first.", timeout=120_000)

    # 1) no thought yet: one answer, said so, no vote buttons; the script in the question is shown as text
    ask(page, f"{QUESTION} {SCRIPT}")
    expect(page.locator("#chat-notice")).to_contain_text(SCRIPT, timeout=120_000)  # shown before the answer
    expect(page.locator("#chat-answer-a .chat-time")).to_be_visible(timeout=ANSWER_TIMEOUT_MS)  # answer done
    expect(page.locator("#chat-notice")).to_contain_text("No comparison this time")
    expect(page.locator("#chat-answer-a .chat-sources li").first).to_be_visible()
    assert page.evaluate("window.__chat_xss") is None
    assert page.locator("#chat-notice b").count() == 0
    expect(page.locator("#chat-vote-row")).to_be_hidden()

    # the thought job runs in the background; the Memory tab shows its thought when it is done
    page.get_by_role("tab", name="Memory").click()
    memory = page.locator("#chat-memory-list")
    for _ in range(150):
        page.locator("#chat-memory-search").click()
        page.wait_for_timeout(5000)
        if memory.locator(".chat-thought").count():
            break
    expect(memory.locator(".chat-thought").first).to_be_visible()
    expect(memory.locator(".chat-thought-roots a").first).to_have_attribute("href", re.compile(r"arxiv\.org/abs/"))

    # 2) the same question again: the thought is retrieved, so two blind answers
    page.get_by_role("tab", name="Ask").click()
    ask(page, QUESTION)
    expect(page.locator("#chat-vote-row")).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
    for side in ("a", "b"):
        expect(page.locator(f"#chat-answer-{side} .chat-answer-text")).not_to_be_empty()
        expect(page.locator(f"#chat-answer-{side} .chat-sources li").first).to_be_visible()
    assert page.locator("#chat-answer-a .chat-badge").count() == 0  # blind until the vote
    page.screenshot(path="/tmp/chat-two-answers.png", full_page=True)

    page.locator("#chat-vote-a").click()
    expect(page.locator("#chat-vote-status")).to_contain_text("Vote recorded: A")
    expect(page.locator("#chat-answer-a .chat-badge").first).to_be_visible()   # sides revealed
    page.locator("#chat-vote-b").click()
    expect(page.locator("#chat-vote-status")).to_contain_text("changed from")
    page.screenshot(path="/tmp/chat-voted.png", full_page=True)

    # 3) reload: the vote is still recorded
    open_chat(page, url)
    latest = page.locator("#chat-recent tbody tr").first
    expect(latest).to_contain_text(QUESTION)
    expect(latest.locator(".chat-recent-vote")).to_contain_text("voted: B")
    expect(page.locator("#chat-recent")).to_contain_text(SCRIPT)
    page.get_by_role("tab", name="Statistics").click()
    expect(page.locator("#chat-stats")).to_contain_text("Decisive votes")
    page.screenshot(path="/tmp/chat-stats.png", full_page=True)
