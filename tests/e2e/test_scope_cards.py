""""Ask about this paper" beyond Search, in Chromium (issue #57 item 2): a Related result and a For you card each set
the Ask box's scope and go to it; a question under the scope is one answer from that paper; a typed follow-up keeps
the scope and is asked as typed; removing it (×) asks the library, whose answer lists its papers under "Ask about
these", which set several papers as the scope at once. History says what a scoped turn was asked of, and reopening
it brings its scope back."""

from __future__ import annotations

import re
import shutil

from playwright.sync_api import expect

from copilot.services import Services
from tests.conftest import make_settings, sample_papers

QUESTION = "What problem does this paper address, and how is it evaluated?"
FOLLOW_UP = "Which datasets do they use?"           # read as a follow-up when no scope is set
LIBRARY = "Which decoding methods use a draft model to speed up generation?"
SCOPED = "Asked about this paper only"
IDS = re.compile(r"\b\d{4}\.\d{5}\b")


def ask(page, question: str) -> None:
    page.locator("#chat-question textarea").fill(question)
    page.locator("#chat-ask").click()


def answered(page, question: str) -> None:
    expect(page.locator("#chat-notice")).to_contain_text(question[:40], timeout=120_000)
    expect(page.locator("#chat-answer-a .chat-answer-time")).to_be_visible(timeout=180_000)


def test_ask_about_a_related_result_a_for_you_card_and_an_answers_papers(app_server, preloaded, tmp_path, page):
    data_dir = tmp_path / "cards-data"
    shutil.copytree(preloaded(80), data_dir)
    papers = sample_papers(80)
    mine = papers[:3]
    Services(make_settings(data_dir)).profiles.save("local", "I study retrieval.", ["retrieval"], [p.id for p in mine])
    url = app_server(env={"COPILOT_DATA_DIR": str(data_dir), "COPILOT_FULLTEXT_READING": "false"})
    page.goto(url)

    page.get_by_role("tab", name="Related").click()                  # a Related result
    page.locator("#related-input textarea, #related-input input").first.fill(papers[10].id)
    page.locator("#related-run").click()
    expect(page.locator("#related-ask-row")).to_be_visible(timeout=180_000)
    chosen = page.locator("#related-chosen input").input_value()
    related_id = IDS.search(chosen).group()
    page.locator("#related-ask").click()
    scope = page.locator("#chat-scope")
    expect(scope).to_be_visible(timeout=30_000)                      # on the Ask box, the paper as its scope
    expect(scope).to_contain_text(f"({related_id})")
    expect(page.locator("#chat-question textarea")).to_be_visible()

    ask(page, QUESTION)
    answered(page, QUESTION)
    notice, answer = page.locator("#chat-notice"), page.locator("#chat-answer-a")
    expect(notice).to_contain_text(SCOPED)
    expect(page.locator("#chat-answer-b")).to_be_hidden()
    assert set(IDS.findall(answer.inner_text())) == {related_id}

    ask(page, FOLLOW_UP)                      # typed under the scope: kept, asked as typed
    answered(page, FOLLOW_UP)
    expect(notice).to_contain_text(SCOPED)
    expect(notice).not_to_contain_text("follow-up to your previous question")
    expect(scope).to_contain_text(related_id)
    assert set(IDS.findall(answer.inner_text())) == {related_id}
    expect(page.locator("#chat-recent")).to_contain_text(f"Asked about {related_id} only")   # History says so

    scope.locator(".token .token-remove").first.click()               # × : the library again
    expect(scope).to_be_hidden(timeout=30_000)
    ask(page, LIBRARY)
    answered(page, LIBRARY)
    expect(notice).not_to_contain_text(SCOPED)
    library_ids = list(dict.fromkeys(IDS.findall(answer.inner_text())))
    assert len(library_ids) > 1, "the library's papers"

    control = page.locator("#chat-answer-papers-row")                 # the answer's papers: "Ask about these"
    expect(control).to_be_visible(timeout=60_000)
    for paper_id in library_ids[:2]:
        page.locator("#chat-answer-papers input").click()
        page.get_by_role("option").filter(has_text=paper_id).first.click()
    page.locator("#chat-ask-these").click()
    expect(scope).to_be_visible(timeout=30_000)
    for paper_id in library_ids[:2]:
        expect(scope).to_contain_text(paper_id)

    page.get_by_role("tab", name="For you").click()                   # a For you card
    cards = page.locator("#feed-list .feed-card")
    expect(cards.first).to_be_visible(timeout=60_000)
    feed_id = cards.first.get_attribute("data-id")
    page.locator(".feed-card-box").filter(has=page.locator(f'.feed-card[data-id="{feed_id}"]')).locator(
        ".feed-ask").click()
    expect(page.locator("#chat-question textarea")).to_be_visible(timeout=30_000)
    expect(scope).to_contain_text(f"({feed_id})")
    for paper_id in library_ids[:2]:                                  # added to those already chosen
        expect(scope).to_contain_text(paper_id)
    page.screenshot(path=str(tmp_path / "scope-cards.png"), full_page=True)

    page.locator("#chat-history input").click()       # the first scoped turn reopened: its scope comes back
    page.get_by_role("option").filter(has_text=QUESTION[:40]).filter(has_text=f"about {related_id}").first.click()
    expect(page.locator("#chat-notice")).to_contain_text(f"Asked about {related_id} only", timeout=30_000)
    expect(scope.locator(".token")).to_have_count(1, timeout=30_000)
    expect(scope).to_contain_text(f"({related_id})")
