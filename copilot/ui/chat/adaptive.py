"""The Adaptive retrieval (SlimPLM) sub-tab: one answer; the small model decides whether and what to look up, and
the decision trace shows why (copilot.features.adaptive)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import gradio as gr

from copilot.errors import UserError
from copilot.features.adaptive import NOT_LOOKED_UP, stream_adaptive
from copilot.features.chat_view import SourceView
from copilot.services import Services
from copilot.ui.chat.render import answer_text_html, notice_html, numbered_by_use
from copilot.ui.common import arxiv_link, escape, user_within_rate

STREAM_EVERY_S = 0.15
ABOUT = ("One answer. First the small local model drafts an answer and judges whether it can be trusted; only what "
         "it judges unknown is looked up in the papers (questions about recent papers, named papers, arXiv ids or "
         "dates always are). The main model answers once. The decision trace below shows what was decided and why.")
ABOUT_QUOTING = ("One answer. First the small local model drafts an answer and judges whether it can be trusted; only "
                 "what it judges unknown is looked up in the papers (questions about recent papers, named papers, "
                 "arXiv ids or dates always are). The answer quotes the papers looked up: the tiny local model writes "
                 "no text of its own. The decision trace below shows what was decided and why.")


SLIM_NO_SOURCES = ("Answered from the model's own knowledge, without sources: the judge decided no retrieval was "
                   "needed. Check it, or ask again naming a paper.")


def slim_html(trace: dict) -> tuple[str, str]:
    """(answer, decision trace) HTML of an adaptive-retrieval (SlimPLM) question, live or finished."""
    done = trace["step"] == "answered"
    # labelled in the order the answer cites them (the table ranks its rows by the question, not by retrieval)
    text, sources = numbered_by_use(trace["answer"], _as_sources(trace["items"]))
    by_id = {item["id"]: item for item in trace["items"]}
    items = [{**by_id[source.id], "label": n} for n, source in enumerate(sources, 1)]
    body = answer_text_html(text, sources, reveal=True) if trace["answer"] else ""
    if not done:
        body += ' <span class="chat-writing">writing…</span>' if trace["answer"] else \
            f'<span class="chat-writing">deciding… ({escape(trace["step"])})</span>'
    notes = list(trace.get("notes") or [])
    if done and trace["answer"] and not trace["retrieved"] and trace["answer"] != NOT_LOOKED_UP:
        notes.insert(0, SLIM_NO_SOURCES)
    if notes:
        body += '<ul class="chat-notes">' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"
    answer = f'<div class="chat-answer slim-answer"><h3>Answer</h3><div class="chat-answer-text">{body}</div></div>'
    steps = []
    if trace["step"] in ("retrieved", "answered"):         # decided: the references are known
        used = "retrieved" if trace["retrieved"] else "skipped"
        steps.append(f'<li class="slim-decision">Retrieval <b>{used}</b>: {escape(trace["reason"])}'
                     + (f" ({escape(trace['forced_rule'])})" if trace["forced_rule"] else "") + "</li>")
    if trace["proxy_error"]:
        steps.append(f'<li class="slim-proxy-error">The proxy failed: {escape(trace["proxy_error"])}</li>')
    if trace["verdict"]:
        said = "weighed its two words:" if trace.get("p_unknown") is not None else "it wrote"
        steps.append(f'<li>Judge: <b>{escape(trace["verdict"])}</b> ({said} <code>{escape(trace["judge_output"])}'
                     "</code>)</li>")
    if trace["queries"]:
        steps.append(_queries_html(trace))
    if trace["heuristic_answer"] or trace["claims"]:
        steps.append(_proxy_words_html(trace))
    if items:
        refs = "".join(f'<li>[{i["label"]}] {arxiv_link(i["id"], i["title"] or i["id"])} <span class="slim-score">'
                       f'{i["score"]:.2f} · {escape(i["query"])}</span></li>' for i in items)   # papers only
        steps.append(f'<li>References:<ol class="chat-sources">{refs}</ol></li>')
    if done:
        # a prompt has tokens: 0 means the endpoint did not report them (llama_cpp.server when streaming)
        costs = " · ".join(f"{role}: {c['calls']} call(s), {c['prompt_tokens'] or '?'}+{c['completion_tokens']} "
                           f"tokens, {c['seconds']:.1f} s" for role, c in trace["costs"].items() if c["calls"])
        steps.append(f'<li class="slim-costs">Cost by role — {escape(costs)}</li>')
    return answer, f'<ul class="slim-trace">{"".join(steps)}</ul>'


def _queries_html(trace: dict) -> str:
    """Each query retrieved with, where it came from, and the papers it brought."""
    found: dict[str, list[dict]] = {}
    for item in trace["items"]:
        found.setdefault(item["query"], []).append(item)
    rows = []
    for query in trace["queries"]:
        origin = "your question" if query == trace["question"] else "made from the proxy's unchecked draft"
        papers = ", ".join(arxiv_link(i["id"], i["title"] or i["id"]) for i in found.get(query, [])) or "none kept"
        rows.append(f"<li><code>{escape(query)}</code> <small>({origin})</small> → {papers}</li>")
    return f'<li>Queries:<ol class="slim-queries">{"".join(rows)}</ol></li>'


def _proxy_words_html(trace: dict) -> str:
    """The proxy's draft and the claims it split it into: folded, and named as what they are (a 135M model's
    invented sentences, issue #38), never a table of facts."""
    parts = [f'<p>Draft: <q>{escape(trace["heuristic_answer"])}</q></p>'] if trace["heuristic_answer"] else []
    if trace["claims"]:
        claims = "".join(f"<li><q>{escape(c['text'])}</q> → query <code>{escape(c['query'])}</code> · judge: "
                         f"{escape(c['verdict'] or '—')}{_weight(c.get('p_unknown'))}</li>" for c in trace["claims"])
        parts.append(f'<p>Claims it split the draft into:</p><ul class="slim-claims">{claims}</ul>')
    return ('<li><details class="slim-draft"><summary>Proxy draft and claims: the proxy model\'s own words (written '
            "only to decide what to look up; not checked, often wrong, not facts)</summary>" + "".join(parts)
            + "</details></li>")


def _as_sources(items: list[dict]) -> tuple[SourceView, ...]:
    return tuple(SourceView(id=i["id"], kind=i.get("kind", "paper"), title=i.get("title") or "", preview="",
                            score=0.0) for i in items)


def _weight(p_unknown: float | None) -> str:
    return "" if p_unknown is None else f" (P(unknown) {p_unknown:.2f})"


def adaptive_view(services: Services, question: str, request: gr.Request | None) -> Iterator[tuple]:
    """→ (notice, answer, trace) as the adaptive answer is decided and written."""
    try:
        user = user_within_rate(services, request, "asking")
        last = 0.0
        for live in stream_adaptive(services, question, user):
            if time.monotonic() - last >= STREAM_EVERY_S or live.step == "answered":
                last = time.monotonic()
                answer, trace = slim_html(live.as_dict())
                yield "", answer, trace
    except UserError as error:     # MainModelFailed is a ChatError
        yield notice_html(error), gr.update(), gr.update()


def build(services: Services, at_once: int) -> None:
    gr.Markdown(ABOUT if services.model_profile.writes else ABOUT_QUOTING)
    question = gr.Textbox(label="Question", lines=2, elem_id="slim-question")
    button = gr.Button("Ask", variant="primary", elem_id="slim-ask")
    notice, answer = gr.HTML(elem_id="slim-notice"), gr.HTML(elem_id="slim-answer")
    trace = gr.HTML(elem_id="slim-trace")

    def ask_slim(question: str, request: gr.Request):
        yield from adaptive_view(services, question, request)

    for trigger in (button.click, question.submit):
        trigger(ask_slim, [question], [notice, answer, trace], concurrency_limit=at_once, concurrency_id="chat-ask")
