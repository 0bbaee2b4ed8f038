"""The Chat tab in Chromium. With the real local model: a first question (no thought yet: one answer) leaves a
thought; asking again shows two blind answers; the vote survives a reload; HTML in a question stays text.
With a real thought in memory and a loopback LLM: both answer columns have the same structure until the vote,
and the vote reveals the sides, the kinds of the sources and the thought's lineage."""

from __future__ import annotations

import re
import shutil

from playwright.sync_api import expect

from copilot.features.chat import Chat
from copilot.services import Services
from tests.conftest import make_settings
from tests.test_secrets import FakeOpenAI

ANSWER_TIMEOUT_MS = 900_000  # the local model on a shared 2-core box can be very slow
QUESTION = "How are large language models evaluated on reasoning benchmarks?"
SCRIPT = "<script>window.__chat_xss = 1</script><b>bold?</b>"


def ask(page, question: str) -> None:
    page.locator("#chat-question textarea").fill(question)
    page.locator("#chat-ask").click()


def reopen(page, question_start: str) -> None:
    page.locator("#chat-history input").click()
    page.get_by_role("option").filter(has_text=question_start).first.click()


def open_chat(page, url: str) -> None:
    page.goto(url)
    page.get_by_role("tab", name="Chat").click()
    expect(page.locator("#chat-question textarea")).to_be_visible()


def test_ask_vote_reload_and_escaping(app_server, preloaded, tmp_path, page):
    from tests.comparisons import KEEP_MEMORY_ROWS
    from tests.e2e.test_blind_guessers import thought_with_a_new_row

    # memory holds, besides what this test's turns leave, one thought on another topic resting on a paper the plain
    # retrieval of its question leaves out: asking that question is a real comparison (a thought that re-quotes the
    # papers the plain retrieval finds gives one answer, issue #40)
    data_dir = tmp_path / "chat-data"
    shutil.copytree(preloaded(60), data_dir)
    compared = "How are vision-language models evaluated on charts and documents?"
    assert thought_with_a_new_row(Services(make_settings(data_dir, top_k=3, thought_row_margin=KEEP_MEMORY_ROWS)),
                                  compared, top_k=3)
    url = app_server(env={"COPILOT_DATA_DIR": str(data_dir), "COPILOT_ANSWER_MAX_TOKENS": "32",
                          "COPILOT_THOUGHT_ROW_MARGIN": str(KEEP_MEMORY_ROWS),
                          "COPILOT_CONTEXT_TOKENS": "400", "COPILOT_TOP_K": "3", "COPILOT_LLM_TIMEOUT": "900",
                                      # one thread: two spin-waiting threads on a busy 2-core box are far slower
                                      "COPILOT_LOCAL_THREADS": "1"})
    open_chat(page, url)
    expect(page.locator("#chat-bib-run")).to_be_hidden()          # no download offered before there is a turn

    ask(page, "   ")
    expect(page.locator("#chat-notice")).to_contain_text("Type a question first.", timeout=120_000)

    # 1) no thought yet: one answer, said so, no vote buttons; the script in the question is shown as text
    ask(page, f"{QUESTION} {SCRIPT}")
    expect(page.locator("#chat-notice")).to_contain_text(SCRIPT, timeout=120_000)  # shown before the answer
    expect(page.locator("#chat-notice .chat-time")).to_be_visible(timeout=ANSWER_TIMEOUT_MS)  # answer done
    # (the prepared thought may be retrieved too; its answer then comes out the same, also shown as one answer)
    expect(page.locator("#chat-notice")).to_contain_text(re.compile("No comparison yet|Thought memory had nothing new"))
    expect(page.locator("#chat-answer-b")).to_be_hidden()          # one answer takes the page's width (issue #39)
    expect(page.locator("#chat-answer-a .chat-sources li").first).to_be_visible()
    expect(page.locator("#chat-bib-run")).to_be_visible()         # a turn is shown: its evidence can be downloaded
    assert page.evaluate("window.__chat_xss") is None
    assert page.locator("#chat-notice b").count() == 0
    expect(page.locator("#chat-vote-row")).to_be_hidden()
    expect(page.locator("#chat-judge-row")).to_be_visible()       # no vote: judged instead (#59 item 11)

    # the same question without the markup: its answer quotes papers (the one with a script in it may fall below the
    # relevance floor and get "None of the retrieved papers answers this", which makes no thought)
    ask(page, QUESTION)
    expect(page.locator("#chat-notice")).not_to_contain_text(SCRIPT, timeout=120_000)
    expect(page.locator("#chat-notice .chat-time")).to_be_visible(timeout=ANSWER_TIMEOUT_MS)

    # the turn's thought job runs in the background: nobody voted and its quotes are not close enough to the question
    # (issue #49: an unvoted answer needs UNVOTED_FLOOR), so it keeps no thought, and the history says so
    for _ in range(36):
        open_chat(page, url)
        if "not stored" in page.locator("#chat-recent tbody tr").first.inner_text():
            break
        page.wait_for_timeout(5000)
    expect(page.locator("#chat-recent tbody tr").first).to_contain_text("not stored")
    page.get_by_role("tab", name="Memory").click()
    memory = page.locator("#chat-memory-list")
    page.locator("#chat-memory-search").click()
    expect(memory.locator(".chat-thought")).to_have_count(1, timeout=60_000)     # the prepared one only
    expect(memory.locator(".chat-thought-sources a").first).to_have_attribute("href", re.compile(r"arxiv\.org/abs/"))
    # made from papers alone: its root papers are its direct sources, not listed twice (issue #38)
    expect(memory.locator(".chat-thought").first.locator(".chat-thought-roots")).to_have_count(0)

    # 2) a question whose thought reaches a paper its plain retrieval misses: two blind answers that differ
    page.get_by_role("tab", name="Ask").click()
    ask(page, compared)
    expect(page.locator("#chat-notice .chat-question")).to_contain_text(compared[:60], timeout=120_000)
    expect(page.locator("#chat-vote-row")).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
    for side in ("a", "b"):
        expect(page.locator(f"#chat-answer-{side} .chat-answer-text")).not_to_be_empty()
        expect(page.locator(f"#chat-answer-{side} .chat-sources-hidden")).to_be_visible()   # sources after the vote
    assert page.locator("#chat-answer-a .chat-badge").count() == 0  # blind until the vote
    page.screenshot(path="/tmp/chat-two-answers.png", full_page=True)

    page.locator("#chat-vote-a").click()
    expect(page.locator("#chat-vote-status")).to_contain_text("Vote recorded: A")
    expect(page.locator("#chat-answer-a .chat-badge").first).to_be_visible()   # sides revealed
    for side in ("a", "b"):
        expect(page.locator(f"#chat-answer-{side} .chat-sources li").first).to_be_visible()
    page.locator("#chat-vote-b").click()
    expect(page.locator("#chat-vote-status")).to_contain_text("changed from")
    page.screenshot(path="/tmp/chat-voted.png", full_page=True)

    # 3) reload: the vote is still recorded
    open_chat(page, url)
    latest = page.locator("#chat-recent tbody tr").first
    expect(latest).to_contain_text(compared[:40])
    expect(latest.locator(".chat-recent-vote")).to_contain_text("voted: B")
    expect(page.locator("#chat-recent")).to_contain_text(SCRIPT)

    # 4) reopen past turns from the history: the first one (one answer, the script still text), then the voted one
    reopen(page, "<script>window")       # the first question, the one with markup in it
    expect(page.locator("#chat-notice")).to_contain_text("reopened from your history")
    expect(page.locator("#chat-notice")).to_contain_text(SCRIPT)
    expect(page.locator("#chat-answer-a .chat-sources li").first).to_be_visible()
    expect(page.locator("#chat-answer-b")).to_be_hidden()
    assert page.evaluate("window.__chat_xss") is None
    reopen(page, " ".join(compared.split()[:4]))
    expect(page.locator("#chat-vote-status")).to_contain_text("Your vote: B")
    expect(page.locator("#chat-vote-row")).to_be_visible()
    expect(page.locator("#chat-judge-row")).to_be_hidden()
    expect(page.locator("#chat-answer-a .chat-badge").first).to_be_visible()   # voted: sides shown
    page.get_by_role("tab", name="Statistics").click()
    expect(page.locator("#chat-stats")).to_contain_text("Decisive votes")
    page.screenshot(path="/tmp/chat-stats.png", full_page=True)

    # 5) a one-answer turn reopened is judged: "Remember this answer" makes its thought, apart from the votes
    page.get_by_role("tab", name="Ask").click()
    reopen(page, QUESTION[:40])
    expect(page.locator("#chat-judge-row")).to_be_visible(timeout=60_000)
    expect(page.locator("#chat-vote-row")).to_be_hidden()
    page.locator("#chat-judge-keep").click()
    expect(page.locator("#chat-judge-status")).to_contain_text("Remembered")


# --- blinding -----------------------------------------------------------------------------------------------
BLIND_QUESTION = "How can vision-language models keep only the visual details a question needs?"
THOUGHT_TEXT = ("Vision-language models answer a question better and faster when they keep only the image regions "
                "the question needs: semantic-guided visual selection picks those details before the language model "
                "reads them.")
THOUGHT_SOURCES = [("2503.11794", "paper"), ("2503.12446", "paper")]
# neutral labels; "{n}" (the request's number) makes the two sides' answers differ, as a model's would
BLIND_REPLY = "Selecting the relevant regions helps [1][2]. Both sources agree on this in answer {n} [1]."
SHAPE = """(column) => {
  const answer = column.querySelector('.chat-answer');
  const elements = [answer, ...answer.querySelectorAll('*')];
  return {
    shape: elements.map(el => [el.tagName, el.children.length,
      [...el.attributes].map(a => a.name + '=' + (a.name === 'data-label' ? '?' : a.value)).sort().join(' ')]),
    links: answer.querySelectorAll('a').length,
    sources: answer.querySelectorAll('.chat-sources li').length,
    html: answer.outerHTML,
  };
}"""


def data_dir_with_a_thought(preloaded, tmp_path) -> tuple[str, str]:
    data_dir = tmp_path / "blind-data"
    shutil.copytree(preloaded(20), data_dir)
    memory = Chat(Services(make_settings(data_dir))).memory
    thought_id = memory.add(THOUGHT_TEXT, THOUGHT_SOURCES, origin="chat", question=BLIND_QUESTION, user="local",
                            check_redundant=False)
    return str(data_dir), thought_id


def test_answers_are_blind_until_the_vote(app_server, preloaded, tmp_path, page):
    data_dir, thought_id = data_dir_with_a_thought(preloaded, tmp_path)
    with FakeOpenAI(reply=BLIND_REPLY) as llm:
        url = app_server(env={"COPILOT_DATA_DIR": data_dir, "COPILOT_LLM": "openai", "OPENAI_API_KEY": "sk-test-blind",
                              "OPENAI_BASE_URL": llm.url("reply"), "COPILOT_LLM_MODEL": "fake", "COPILOT_TOP_K": "4"})
        open_chat(page, url)
        ask(page, BLIND_QUESTION)
        expect(page.locator("#chat-notice .chat-time")).to_be_visible(timeout=120_000)   # both answers done
        expect(page.locator("#chat-vote-row")).to_be_visible()      # a real comparison: the thought was retrieved

        a = page.locator("#chat-answer-a").evaluate(SHAPE)
        b = page.locator("#chat-answer-b").evaluate(SHAPE)
        assert a["shape"] == b["shape"]
        assert a["links"] == b["links"] == 0
        assert a["sources"] == b["sources"] == 0         # sources, and their number, only after the vote
        for column in (a, b):
            hidden = (thought_id, "2503.11794", "arxiv.org", "href", "chat-badge", "chat-source-paper",
                      "chat-source-thought")
            assert [h for h in hidden if h in column["html"]] == []
        assert "[1]" in page.locator("#chat-answer-a .chat-answer-text").inner_text()
        page.screenshot(path="/tmp/chat-blind-before-vote.png", full_page=True)

        page.locator("#chat-vote-a").click()
        expect(page.locator("#chat-vote-status")).to_contain_text("Vote recorded: A")
        augmented = page.locator(".chat-answer", has_text="papers + thoughts")
        papers_only = page.locator(".chat-answer", has_text="papers only")
        expect(augmented).to_have_count(1)
        expect(papers_only).to_have_count(1)
        expect(augmented.locator(".chat-source-thought code")).to_have_text(thought_id)
        expect(augmented.locator(".chat-lineage a[href='https://arxiv.org/abs/2503.11794']")).to_have_count(1)
        expect(papers_only.locator(".chat-source-thought")).to_have_count(0)
        assert papers_only.locator(".chat-source-paper a[href^='https://arxiv.org/abs/']").count() >= 2
        expect(page.locator(".chat-answer-time")).to_have_count(2)
        page.screenshot(path="/tmp/chat-blind-after-vote.png", full_page=True)
