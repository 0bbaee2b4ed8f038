"""Full text in Chromium (issue #48): the app reads a paper's LaTeXML page from a loopback HTTPS arXiv while it
answers; the answer on the page then quotes the body sentence that answers, with its section, linked to that
section of arXiv's HTML page; Search marks the paper as read and the Library counts it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from playwright.sync_api import expect

from tests.fake_arxiv_html import HTML_DIR, FakeArxivHtml, fake_arxiv_html  # noqa: F401
from tests.helpers import ROOT, app_env
from tests.tls import tls_cert  # noqa: F401 (fixture)

QUESTION = "How many unique terms does the ACL 60/60 glossary that RASST retrieves from contain?"
RASST = "2601.22777"
SECOND = "Which decoding methods use a draft model to speed up generation?"


def test_a_body_quote_with_its_section_and_link(app_server, preloaded, tmp_path, page,
                                                fake_arxiv_html: FakeArxivHtml):
    data_dir = tmp_path / "fulltext-data"
    shutil.copytree(preloaded(60), data_dir)
    subprocess.run([sys.executable, "-m", "copilot", "import", str(HTML_DIR / "papers.jsonl")], cwd=ROOT,
                   env=app_env(data_dir), check=True, capture_output=True, timeout=600)
    url = app_server(env={"COPILOT_DATA_DIR": str(data_dir), "COPILOT_FULLTEXT_READING": "true",
                          "COPILOT_ARXIV_HTML_URL": fake_arxiv_html.html_url,
                          "COPILOT_ARXIV_PDF_URL": fake_arxiv_html.pdf_url, "COPILOT_FULLTEXT_DELAY": "0"})
    page.goto(url)
    ask(page)
    notice = page.locator("#chat-notice")
    # the answer to the question that made the app read the paper quotes its body: read whole within the answer's
    # wait, or (under load) from its first look, the sentences with the question's words embedded first. Asking
    # again once the Library counts the paper would pass with an answer that never waits for its reading (issue #58
    # item 10: the test passed either way)
    expect(notice).to_contain_text(re.compile("Read the full text of|its row quotes the sentences read first"),
                                   timeout=300_000)
    answer = page.locator("#chat-answer-a")
    expect(answer).to_contain_text("238 unique terms", timeout=120_000)
    link = answer.locator(f'a[href^="https://arxiv.org/html/{RASST}"]')
    expect(link.first).to_contain_text("\u00a74.1")
    assert "#S4" in (link.first.get_attribute("href") or "")
    page.screenshot(path=str(tmp_path / "fulltext-answer.png"), full_page=True)

    page.get_by_role("tab", name="Search").click()
    page.locator("#search-query textarea, #search-query input").first.fill("RASST simultaneous speech translation")
    page.locator("#search-run").click()
    card = page.locator(f'.search-card[data-id="{RASST}"]')
    expect(card.locator(".full-text-mark")).to_be_visible(timeout=120_000)

    library_counts_one(page, url)


def test_a_question_asked_while_the_last_one_reads_full_text_is_answered(app_server, preloaded, tmp_path, page,
                                                                         fake_arxiv_html: FakeArxivHtml):
    """The answer shows at once, and then waits up to 10 s for its papers' full text. A researcher who asks the next
    question meanwhile gets it answered: Gradio dropped a click on a running event, so the second question was never
    asked. The page keeps the second question's answers once the first one's wait is over."""
    data_dir = tmp_path / "fulltext-data"
    shutil.copytree(preloaded(60), data_dir)
    subprocess.run([sys.executable, "-m", "copilot", "import", str(HTML_DIR / "papers.jsonl")], cwd=ROOT,
                   env=app_env(data_dir), check=True, capture_output=True, timeout=600)
    fake_arxiv_html.hostile[RASST] = "drip"        # the first question waits for it until its wait ends
    url = app_server(env={"COPILOT_DATA_DIR": str(data_dir), "COPILOT_FULLTEXT_READING": "true",
                          "COPILOT_ARXIV_HTML_URL": fake_arxiv_html.html_url, "COPILOT_ARXIV_TIMEOUT": "30",
                          "COPILOT_ARXIV_PDF_URL": fake_arxiv_html.pdf_url, "COPILOT_FULLTEXT_DELAY": "0"})
    page.goto(url)
    ask(page)
    notice = page.locator("#chat-notice")
    expect(notice).to_contain_text("Reading the full text of", timeout=120_000)
    ask(page, SECOND)
    expect(notice).to_contain_text(SECOND, timeout=120_000)
    expect(page.locator("#chat-answer-a .chat-answer-time")).to_be_visible(timeout=120_000)
    page.wait_for_timeout(12_000)                   # the first question's wait (10 s) is over by now
    expect(notice).to_contain_text(SECOND)
    assert QUESTION not in notice.inner_text()


def ask(page, question: str = QUESTION) -> None:
    page.get_by_role("tab", name="Chat").click()
    page.locator("#chat-question textarea").fill(question)
    page.locator("#chat-ask").click()


def library_counts_one(page, url: str) -> None:
    page.goto(url)                                  # the Library's status as a page load shows it
    page.get_by_role("tab", name="Library").click()
    expect(page.locator("#fulltext-count")).to_have_text("1", timeout=60_000)
