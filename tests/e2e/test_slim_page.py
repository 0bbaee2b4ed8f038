"""Chat's "Adaptive retrieval (SlimPLM)" tab in Chromium, end to end: the packaged local model is the proxy (in the
app's process) and a real OpenAI-compatible loopback server (`llama_cpp.server` serving the same packaged model) is
the main model. Per question: exactly one request reaches the server, the decision trace is streamed into the page
(the proxy's draft is shown before the answer is done) and matches the log, and the log row is complete."""

from __future__ import annotations

from playwright.sync_api import expect

from copilot.llm import packaged_gguf
from copilot.store.db import Database
from copilot.store.slim_log import SlimLog
from tests.conftest import read_rows
from tests.helpers import PAPERS_JSONL, llama_server

KEY = "sk-slim-e2e-0914"
ALIAS = "smollm2-main"
PRELOAD = 60
ANSWER_TIMEOUT_MS = 900_000        # the local proxy on a shared 2-core box can be very slow
GENERAL = "What is a hash table?"  # no timeliness rule fires: the proxy drafts and its judge decides
MAIN_PROMPTS = ("slim_answer_direct", "slim_answer_with_references")
PROXY_PROMPTS = {"slim_proxy_answer": "proxy", "slim_judge": "judge", "slim_decompose": "rewrite"}

# Records every distinct state of the trace panel, so the test can see what was shown before the answer was done.
WATCH_TRACE = """() => {
  window.__slimStates = [];
  const panel = document.querySelector('#slim-trace');
  new MutationObserver(() => {
    const done = !!panel.querySelector('.slim-costs');
    window.__slimStates.push({draft: panel.innerText.includes('Proxy draft'), done: done});
  }).observe(panel, {childList: true, subtree: true, characterData: true});
}"""


# This question's trace is finished: a state without the cost line (the trace being decided: the previous one, if
# any, is gone) was followed by one with it.
NEW_TRACE_DONE = """() => {
  const states = window.__slimStates, deciding = states.findIndex(s => !s.done);
  return deciding >= 0 && states.slice(deciding).some(s => s.done);
}"""


def main_requests(log_path) -> int:
    """Chat-completion requests the server answered, from its access log."""
    return log_path.read_text(errors="replace").count("POST /v1/chat/completions")


def ask_slim(page, question: str) -> None:
    page.evaluate(WATCH_TRACE)
    page.locator("#slim-question textarea").fill(question)
    page.locator("#slim-ask").click()
    page.wait_for_function(NEW_TRACE_DONE, timeout=ANSWER_TIMEOUT_MS)
    expect(page.locator("#slim-trace .slim-costs")).to_be_visible()
    expect(page.locator("#slim-answer .chat-writing")).to_have_count(0)


def assert_logged_whole(db: Database, record, page) -> None:
    """The log row holds the decision, claims, items and each role's cost, and the page shows the same trace."""
    roles = {r.role: r for r in record.roles}
    assert set(roles) == {"proxy", "rewrite", "judge", "main"} and record.main_calls == 1
    main = roles["main"]
    main_call = db.query("SELECT backend, prompt_tokens, completion_tokens FROM llm_calls WHERE prompt_name IN "
                         "(?,?) AND started_at >= ? ORDER BY id LIMIT 1", (*MAIN_PROMPTS, record.asked_at))[0]
    assert main_call["backend"] == "openai" and main.seconds > 0
    assert main.completion_tokens == main_call["completion_tokens"] > 1       # every streamed token, not the first
    assert main.prompt_tokens == (main_call["prompt_tokens"] or 0)           # llama_cpp.server reports none: 0
    assert record.answer.strip() and record.reason and record.main_model == ALIAS
    assert record.proxy_model != ALIAS                       # the proxy is the local model, not the endpoint
    proxy_calls = db.query("SELECT prompt_name, backend, prompt_tokens, completion_tokens FROM llm_calls "
                           "WHERE prompt_name IN (?,?,?) AND started_at >= ?", (*PROXY_PROMPTS, record.asked_at))
    assert {c["backend"] for c in proxy_calls} <= {"local"}
    for role in ("proxy", "judge", "rewrite"):
        calls = [c for c in proxy_calls if PROXY_PROMPTS[c["prompt_name"]] == role]
        assert roles[role].calls == len(calls)
        assert roles[role].prompt_tokens == sum(c["prompt_tokens"] for c in calls)
        assert roles[role].completion_tokens == sum(c["completion_tokens"] for c in calls)
        assert (roles[role].seconds > 0) == bool(calls)
    trace = page.locator("#slim-trace")
    expect(trace.locator(".slim-decision")).to_contain_text(
        f"Retrieval {'retrieved' if record.retrieved else 'skipped'}: {record.reason}")
    for claim in record.claims:
        assert claim.query and claim.verdict in ("known", "unknown", "unclear")
        expect(trace.locator(".slim-claims")).to_contain_text(claim.query)
    for item in record.items:
        assert item.query
        expect(trace.locator(f'.chat-sources a[href*="arxiv.org/abs/{item.item_id}"]')).to_be_visible()
        expect(trace.locator(".slim-queries")).to_contain_text(item.query)     # each query with what it found
    assert trace.locator(".chat-sources li").count() == len(record.items)


def test_adaptive_tab_with_a_local_proxy_and_a_loopback_main_model(app_server, page, tmp_path):
    titled = next(row for row in read_rows(PAPERS_JSONL, 0, PRELOAD) if '"' not in row["title"])
    title = " ".join(titled["title"].split())
    named = f'What does the paper "{title}" propose?'        # the timeliness rule: a named paper
    server_log = tmp_path / "llama-server.log"
    with llama_server(packaged_gguf(), server_log, ALIAS, KEY) as base:
        url = app_server(preload=PRELOAD, env={
            "COPILOT_LLM": "openai", "OPENAI_BASE_URL": base, "OPENAI_API_KEY": KEY, "COPILOT_LLM_MODEL": ALIAS,
            "COPILOT_ANSWER_MAX_TOKENS": "48", "COPILOT_CONTEXT_TOKENS": "400", "COPILOT_SOURCE_TOKENS": "60",
            "COPILOT_TOP_K": "3", "COPILOT_LLM_TIMEOUT": "900"})
        data_dir = next(tmp_path.glob("app-data-*"))
        db = Database(data_dir / "copilot.db")
        log = SlimLog(db)
        page.goto(url)
        page.get_by_role("tab", name="Chat").click()
        page.get_by_role("tab", name="Adaptive retrieval (SlimPLM)").click()
        expect(page.locator("#slim-question textarea")).to_be_visible()
        before = main_requests(server_log)

        # 1) a general question: the local proxy drafts and judges; the trace streams in before the answer
        ask_slim(page, GENERAL)
        assert main_requests(server_log) == before + 1
        states = page.evaluate("window.__slimStates")
        assert any(s["draft"] and not s["done"] for s in states), states   # the draft was shown while deciding
        [first] = log.recent("local", limit=5)
        assert first.question == GENERAL and first.decided_by == "judge" and first.heuristic_answer
        assert first.verdict in ("known", "unknown", "unclear") and first.judge_output
        assert {r.role: r.calls for r in first.roles}["judge"] == 1 + len(first.claims)
        trace = page.locator("#slim-trace")
        expect(trace).to_contain_text("Proxy draft and claims: the proxy model's own words")   # folded, not facts
        trace.locator(".slim-draft summary").click()
        expect(trace.locator(".slim-draft q")).to_have_text(first.heuristic_answer)
        expect(trace).to_contain_text(f"Judge: {first.verdict}")
        assert_logged_whole(db, first, page)
        if not first.retrieved:
            expect(page.locator("#slim-answer")).to_contain_text("without sources")

        # 2) a question naming a stored paper: forced to retrieve without the proxy, the paper among the references
        ask_slim(page, named)
        assert main_requests(server_log) == before + 2
        second = log.recent("local", limit=5)[0]
        assert second.question == named and second.retrieved and second.decided_by == "forced"
        assert second.forced_rule.startswith("named paper:") and second.heuristic_answer == ""
        assert {r.role: r.calls for r in second.roles} == {"proxy": 0, "rewrite": 0, "judge": 0, "main": 1}
        assert titled["id"] in [item.item_id for item in second.items]
        expect(page.locator("#slim-trace .slim-decision")).to_contain_text(f"({second.forced_rule})")
        assert_logged_whole(db, second, page)
        page.screenshot(path="/tmp/slim-adaptive-tab.png", full_page=True)

        main_logged = db.query("SELECT backend, model, error FROM llm_calls WHERE prompt_name IN (?,?)", MAIN_PROMPTS)
        assert main_logged == [{"backend": "openai", "model": ALIAS, "error": None}] * 2
    assert main_requests(server_log) == before + 2
