"""A question about chosen papers in Chromium (issue #57 item 2): Search's "Ask about this paper" sets a visible scope
on the Ask box; a question typed under it is answered from that paper only (one answer, its body read from a loopback
HTTPS arXiv and quoted with its section); a typed follow-up keeps the scope; removing it (×) asks the library again;
an arXiv id typed in the question is offered as the scope."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from playwright.sync_api import expect

from tests.fake_arxiv_html import HTML_DIR, FakeArxivHtml, fake_arxiv_html  # noqa: F401
from tests.helpers import ROOT, app_env
from tests.tls import tls_cert  # noqa: F401 (fixture)

RASST = "2601.22777"
QUESTION = "How many unique terms does the glossary contain after deduplication?"
FOLLOW_UP = "Which optimizer, learning rate and weight decay are used to train the retriever?"
LIBRARY = "Which decoding methods use a draft model to speed up generation?"
SCOPED = "Asked about this paper only"


def test_scope_from_a_search_card_kept_by_a_follow_up_and_removed_to_ask_the_library(
        app_server, preloaded, tmp_path, page, fake_arxiv_html: FakeArxivHtml):
    data_dir = tmp_path / "scope-data"
    shutil.copytree(preloaded(60), data_dir)
    subprocess.run([sys.executable, "-m", "copilot", "import", str(HTML_DIR / "papers.jsonl")], cwd=ROOT,
                   env=app_env(data_dir), check=True, capture_output=True, timeout=600)
    url = app_server(env={"COPILOT_DATA_DIR": str(data_dir), "COPILOT_FULLTEXT_READING": "true",
                          "COPILOT_ARXIV_HTML_URL": fake_arxiv_html.html_url,
                          "COPILOT_ARXIV_PDF_URL": fake_arxiv_html.pdf_url, "COPILOT_FULLTEXT_DELAY": "0"})
    page.goto(url)
    page.get_by_role("tab", name="Search").click()
    page.locator("#search-query textarea, #search-query input").first.fill(f"RASST {RASST}")
    page.locator("#search-run").click()
    expect(page.locator(f'.search-card[data-id="{RASST}"]')).to_be_visible(timeout=120_000)
    page.locator("#search-ask").click()

    scope = page.locator("#chat-scope")
    expect(scope).to_be_visible(timeout=60_000)
    expect(scope).to_contain_text(re.compile(rf"About: .*RASST.*\({RASST}\)"))
    notice, answer = page.locator("#chat-notice"), page.locator("#chat-answer-a")
    ask(page, QUESTION)
    expect(notice).to_contain_text(SCOPED, timeout=120_000)
    expect(page.locator("#chat-answer-b")).to_be_hidden()            # one answer: nothing to compare
    expect(answer).to_contain_text("238 unique terms", timeout=300_000)
    expect(answer.locator(f'a[href^="https://arxiv.org/html/{RASST}"]').first).to_contain_text("\u00a7")
    assert set(re.findall(r"\b\d{4}\.\d{5}\b", answer.inner_text())) == {RASST}, "that paper only"

    ask(page, FOLLOW_UP)                       # typed over the last question: the scope stays
    expect(notice).to_contain_text(FOLLOW_UP[:40], timeout=120_000)
    expect(answer.locator(".chat-answer-time")).to_be_visible(timeout=120_000)
    expect(scope).to_contain_text(RASST)
    expect(notice).to_contain_text(SCOPED)
    assert set(re.findall(r"\b\d{4}\.\d{5}\b", answer.inner_text())) == {RASST}
    page.screenshot(path=str(tmp_path / "scoped-answer.png"), full_page=True)

    scope.locator(".token .token-remove").first.click()   # the chip's ×: the library again
    expect(scope).to_be_hidden(timeout=30_000)
    ask(page, LIBRARY)
    expect(notice).to_contain_text(LIBRARY[:40], timeout=120_000)
    expect(answer.locator(".chat-answer-time")).to_be_visible(timeout=120_000)
    expect(notice).not_to_contain_text(SCOPED)
    assert len(set(re.findall(r"\b\d{4}\.\d{5}\b", answer.inner_text()))) > 1, "the library's papers"

    page.locator("#chat-question textarea").fill(f"What does arXiv:{RASST} find?")   # typed: offered as the scope
    offer = page.locator("#chat-scope-offer")
    expect(offer).to_contain_text(RASST, timeout=30_000)
    offer.click()
    expect(scope).to_contain_text(RASST, timeout=30_000)


def ask(page, question: str) -> None:
    page.locator("#chat-question textarea").fill(question)
    page.locator("#chat-ask").click()
