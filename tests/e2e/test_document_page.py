"""A researcher's own PDF in Chromium (issue #57 item 3): two visitors signed in (COPILOT_AUTH). Ann uploads a PDF
with the small "Ask about your own PDF" button under the question; it joins the Ask box's scope, and her question is
answered from it with page-numbered quotes and no arXiv link. Bob, in another browser context, sees nothing of it
(his Library lists no document, his question is not answered from it); Ann deletes it from her Library."""

from __future__ import annotations

import re
import shutil

from playwright.sync_api import expect

from tests.document_pdfs import paper_pdf

RASST = "2601.22777"
TITLE = "Glossary-aided speech translation (my draft)"
QUESTION = "How many unique terms does the glossary contain after deduplication?"
AUTH = {"ann": "ann's long password", "bob": "bob's long password"}


def signed_in(browser, url: str, user: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    answer = context.request.post(url + "login", form={"username": user, "password": AUTH[user]})
    assert answer.ok, answer.status
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(url)
    return context, page


def ask(page, question: str) -> None:
    page.locator("#chat-question textarea").fill(question)
    page.locator("#chat-ask").click()


def test_an_uploaded_pdf_is_asked_with_page_quotes_and_is_its_uploaders_alone(app_server, preloaded, tmp_path,
                                                                             browser):
    data_dir = tmp_path / "doc-data"
    shutil.copytree(preloaded(30), data_dir)
    url = app_server(env={"COPILOT_DATA_DIR": str(data_dir),
                          "COPILOT_AUTH": ",".join(f"{user}:{password}" for user, password in AUTH.items())})
    pdf = tmp_path / "my-draft.pdf"
    pdf.write_bytes(paper_pdf(RASST, title=TITLE)[0])

    ann_context, ann = signed_in(browser, url, "ann")
    ann.get_by_role("tab", name="Chat").click()
    expect(ann.locator("#chat-upload")).to_be_visible()
    expect(ann.locator("#chat-upload")).to_contain_text("Ask about your own PDF")
    with ann.expect_file_chooser() as chooser:
        ann.locator("#chat-upload").click()
    chooser.value.set_files(str(pdf))
    scope = ann.locator("#chat-scope")
    expect(scope).to_contain_text(TITLE, timeout=120_000)
    expect(ann.locator("#chat-scope-note")).to_contain_text("private to you")
    ask(ann, QUESTION)
    answer = ann.locator("#chat-answer-a")
    expect(answer).to_contain_text("238 unique terms", timeout=180_000)
    expect(answer).to_contain_text(re.compile(r"\(p\. \d+\)"))
    expect(ann.locator("#chat-notice")).to_contain_text("Asked about this paper only")
    assert answer.locator('a[href*="arxiv.org"]').count() == 0, "a private document links nowhere"
    ann.screenshot(path=str(tmp_path / "document-answer.png"), full_page=True)
    ann.get_by_role("tab", name="Library").click()
    expect(ann.locator("#doc-listing")).to_contain_text(TITLE, timeout=60_000)

    bob_context, bob = signed_in(browser, url, "bob")
    bob.get_by_role("tab", name="Library").click()
    expect(bob.locator("#doc-listing")).to_contain_text("No documents of yours", timeout=60_000)
    expect(bob.locator("#doc-listing")).not_to_contain_text(TITLE)
    bob.get_by_role("tab", name="Chat").click()
    ask(bob, QUESTION)
    expect(bob.locator("#chat-notice")).to_contain_text(QUESTION[:30], timeout=180_000)
    expect(bob.locator("#chat-answer-a .chat-answer-time")).to_be_visible(timeout=180_000)
    shown = " ".join(bob.locator("#chat-answer-a, #chat-answer-b").all_inner_texts())
    assert "238 unique terms" not in shown and TITLE not in shown and "doc:" not in shown
    bob_context.close()

    ann.locator("#doc-delete").click()
    expect(ann.locator("#doc-note")).to_contain_text("Deleted", timeout=60_000)
    expect(ann.locator("#doc-listing")).to_contain_text("No documents of yours")
    ann_context.close()
