"""Two blind answers are shown as soon as both tables exist, while their papers' full text is read (issue #59
item 1): with a thought in memory (a comparison) the page held both answers back behind "Writing both answers…
they are shown together" for the whole wait for full text (10 s), where a turn with one answer showed in about a
second. The real app in Chromium over real papers, a real thought that makes the question a comparison, and a
loopback HTTPS arXiv that sends one of the turn's papers one byte a second, so the wait lasts.

The click-to-visible time of each turn is written to this test's log (not asserted: it is a measurement;
tests/bench_blind_visible.py measures it at 2,000 papers)."""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import expect

from copilot.services import Services
from tests.comparisons import KEEP_MEMORY_ROWS, thought_with_a_new_row
from tests.conftest import make_settings
from tests.fake_arxiv_html import HTML_DIR, FakeArxivHtml, fake_arxiv_html  # noqa: F401
from tests.helpers import ROOT, app_env
from tests.tls import tls_cert  # noqa: F401 (fixture)

log = logging.getLogger(__name__)

# a paper of the first 120 makes this question a comparison (on the first 60, none does); RASST is among its papers
COMPARED = "Which simultaneous speech translation systems retrieve terminology, and how large is their glossary?"
RASST = "2601.22777"
PLAIN = "Which decoding methods use a draft model to speed up generation?"
# Both columns of the turn asking `question` show an answer, not the hold ("shown together") nor "waiting…"; a
# turn with one answer hides the second column. → the time since the click on Ask, what the notice says, and
# whether the second column is shown; null until then.
SHOWN = """(question) => {
  const notice = document.querySelector('#chat-notice');
  if (!notice || !notice.innerText.includes(question)) return null;
  const columns = ['#chat-answer-a', '#chat-answer-b'].map(id => document.querySelector(id));
  const shown = columns.filter(c => c && c.checkVisibility() && c.querySelector('.chat-answer'));
  if (!shown.length || !columns[0].querySelector('.chat-answer-text')) return null;
  if (shown.some(c => !c.querySelector('.chat-answer-text') || c.querySelector('.chat-writing'))) return null;
  return {ms: performance.now() - window.__askedAt, notice: notice.innerText, both: shown.length === 2};
}"""
FINISHED = """() => !!document.querySelector('#chat-notice .chat-no-comparison')
  || !!(document.querySelector('#chat-vote-row') || {checkVisibility: () => false}).checkVisibility()"""
ARM = """() => {
  window.__askedAt = null;
  document.querySelector('#chat-ask').addEventListener('click', () => { window.__askedAt = performance.now(); },
                                                       {capture: true, once: true});
}"""


def click_to_shown(page, question: str, timeout_ms: int = 300_000) -> dict:
    """Ask `question` on the Chat tab; → {ms, notice, both} at the first frame its answers are shown."""
    page.locator("#chat-question textarea").fill(question)
    page.evaluate(ARM)
    page.locator("#chat-ask").click()
    return page.wait_for_function(SHOWN, arg=question[:60], polling="raf", timeout=timeout_ms).json_value()


def warmed_up(app_log: Path, timeout: float = 300.0) -> None:
    """Wait for the app's warm-up at start (app.py) to end: a first question asked before waits for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = app_log.read_text(errors="replace") if app_log.exists() else ""
        if "warmed up for the first question" in text or "warming up at start failed" in text:
            return
        time.sleep(0.5)
    raise AssertionError(f"the app did not finish warming up in {timeout:.0f} s")


def library_with_a_thought(preloaded, tmp_path, question: str, count: int = 120) -> str:
    """The first `count` real papers, the shared LaTeXML papers, and a thought that makes `question` a comparison."""
    data_dir = tmp_path / "blind-reading-data"
    shutil.copytree(preloaded(count), data_dir)
    subprocess.run([sys.executable, "-m", "copilot", "import", str(HTML_DIR / "papers.jsonl")], cwd=ROOT,
                   env=app_env(data_dir), check=True, capture_output=True, timeout=600)
    services = Services(make_settings(data_dir, thought_row_margin=KEEP_MEMORY_ROWS))
    assert thought_with_a_new_row(services, question), "no paper of the library makes the question a comparison"
    return str(data_dir)


def test_both_blind_answers_show_while_their_papers_are_read(app_server, preloaded, tmp_path, page,
                                                             fake_arxiv_html: FakeArxivHtml):
    data_dir = library_with_a_thought(preloaded, tmp_path, COMPARED)
    fake_arxiv_html.hostile[RASST] = "drip"          # read until its 30 s timeout: the answers' 10 s wait lasts
    url = app_server(env={"COPILOT_DATA_DIR": data_dir, "COPILOT_FULLTEXT_READING": "true",
                          "COPILOT_ARXIV_HTML_URL": fake_arxiv_html.html_url, "COPILOT_ARXIV_TIMEOUT": "30",
                          "COPILOT_ARXIV_PDF_URL": fake_arxiv_html.pdf_url, "COPILOT_FULLTEXT_DELAY": "0",
                          "COPILOT_THOUGHT_ROW_MARGIN": str(KEEP_MEMORY_ROWS)})
    warmed_up(tmp_path / f"app-{url.rstrip('/').rsplit(':', 1)[1]}.log")
    page.goto(url)
    page.get_by_role("tab", name="Chat").click()
    expect(page.locator("#chat-question textarea")).to_be_visible()

    plain = click_to_shown(page, PLAIN)
    # once finished (a vote, or one answer and why): as many answers as were shown at first; memory's thought is
    # retrieved here too, and two answers alike were shown as two, then folded into one after the wait
    page.wait_for_function(FINISHED, timeout=120_000)
    assert page.locator("#chat-answer-b").is_visible() == plain["both"], plain
    compared = click_to_shown(page, COMPARED)
    for name, shown in (("plain", plain), ("compared", compared)):
        message = (f"click to answers shown, {name} turn ({'two answers' if shown['both'] else 'one answer'}): "
                   f"{shown['ms'] / 1000:.2f} s")
        log.warning(message)
        print(message)
    assert compared["both"], "the thought made no comparison: nothing to hold back"
    # shown while the slow paper is still being read, not after the wait for it (10 s) is over
    assert re.search(r"Reading the full text of|Reading \d+ more", compared["notice"]), compared["notice"]
    assert "shown together" not in page.locator("#chat-answer-a").inner_text()
    for side in ("a", "b"):     # blind: the words only until the vote
        expect(page.locator(f"#chat-answer-{side} .chat-sources-hidden")).to_be_visible()
        assert page.locator(f"#chat-answer-{side} .chat-badge").count() == 0
    # the wait ends (the paper not read in it): the same two answers, now to vote on
    expect(page.locator("#chat-vote-row")).to_be_visible(timeout=120_000)
    expect(page.locator("#chat-notice")).to_contain_text("still being read")
    expect(page.locator("#chat-answer-b")).to_be_visible()
    page.screenshot(path=str(tmp_path / "blind-reading.png"), full_page=True)


class EveryPage(dict):
    """`FakeArxivHtml.hostile` for every paper: each page one byte a second."""

    def get(self, key, default=None):
        return "drip"


# the notice and first column as they are now, and whether the notice ever named `stale` since `watch_notice`
WATCH_NOTICE = """(stale) => {
  window.__staleSeen = false;
  const notice = document.querySelector('#chat-notice');
  new MutationObserver(() => { if (notice.innerText.includes(stale)) window.__staleSeen = true; })
    .observe(notice, {childList: true, subtree: true, characterData: true});
}"""


def test_the_answers_before_never_come_back_over_a_newer_question(app_server, page, tmp_path,
                                                                   fake_arxiv_html: FakeArxivHtml):
    """A question asked while the turn before still waits for its papers' full text: when that wait ends, Gradio
    sent the earlier turn's last frame again, and the page showed the earlier question and its answers under the
    newer one (seen for up to 10 s in tests/bench_blind_visible.py)."""
    fake_arxiv_html.hostile = EveryPage()     # every turn waits its full fulltext.WAIT_S for its papers
    url = app_server(preload=60, env={"COPILOT_FULLTEXT_READING": "true", "COPILOT_FULLTEXT_DELAY": "0",
                                      "COPILOT_ARXIV_HTML_URL": fake_arxiv_html.html_url,
                                      "COPILOT_ARXIV_PDF_URL": fake_arxiv_html.pdf_url, "COPILOT_ARXIV_TIMEOUT": "30"})
    warmed_up(tmp_path / f"app-{url.rstrip('/').rsplit(':', 1)[1]}.log")
    page.goto(url)
    page.get_by_role("tab", name="Chat").click()
    first = "How are large language models evaluated on reasoning?"
    asked = time.monotonic()
    shown = click_to_shown(page, first)
    assert "Reading the full text" in shown["notice"], shown["notice"]      # its wait for full text goes on
    assert time.monotonic() - asked < 8, "the first turn's wait was nearly over before the second was asked"
    newer = click_to_shown(page, PLAIN)
    page.evaluate(WATCH_NOTICE, first[:40])
    time.sleep(max(0.0, asked + 14 - time.monotonic()))         # past the first turn's 10 s wait and its end
    assert not page.evaluate("window.__staleSeen"), "the earlier turn came back over the newer one"
    expect(page.locator("#chat-notice")).to_contain_text(PLAIN)
    assert newer["ms"] < 10_000, newer
