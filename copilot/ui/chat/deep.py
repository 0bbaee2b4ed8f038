"""Deep answer (RAT) on the Ask sub-tab: the question typed, or the turn shown, answered step by step with a live
trace; a finished answer goes to the thought step in the background (copilot.features.deep)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import gradio as gr

from copilot.errors import UserError
from copilot.features.chat import chat_for
from copilot.features.deep import keep_and_report, stream_deep
from copilot.services import Services
from copilot.ui.chat.render import notice_html
from copilot.ui.common import current_user, escape, user_within_rate
from copilot.ui.longform import result_html, trace_html

STREAM_EVERY_S = 0.15
ABOUT = ("A deep answer drafts the answer step by step without sources, then for each step searches papers and "
         "stored thoughts with the draft so far and revises the whole draft with what it found (RAT). Each step "
         "shows its query, what it retrieved, and the text before and after. A finished answer may become a "
         "thought; a stopped one never does.")


@dataclass
class DeepParts:
    answer: gr.HTML
    stop: gr.Button
    trace: gr.HTML


def deep_view(services: Services, question: str, turn_id: str | None, request: gr.Request | None) -> Iterator[tuple]:
    """→ (answer, trace, stop button) as the deep answer grows, then with the thought step's outcome; the stop
    button shows only while the answer is being written."""
    running, stopped = gr.update(visible=True), gr.update(visible=False)
    user = current_user(request)
    if not (question or "").strip() and turn_id:
        shown = chat_for(services).view(turn_id, user)
        question = shown.question if shown else ""
    live = None
    try:
        user_within_rate(services, request, "asking")
        last = 0.0
        for live in stream_deep(services, question, user):
            if time.monotonic() - last >= STREAM_EVERY_S or live.done:
                last = time.monotonic()
                record = live.as_dict()
                yield (result_html(record, "answer", f"Deep answer (RAT): {record['question']}"), trace_html(record),
                       stopped if live.done else running)
    except UserError as error:
        yield notice_html(error), "", stopped
        return
    if live is None or not live.run.text:
        yield gr.update(), gr.update(), stopped
        return
    status = keep_and_report(services, live, user)
    record = live.as_dict()
    yield (result_html(record, "answer", f"Deep answer (RAT): {record['question']}")
           + f'<div class="deep-thought">{escape(status)}</div>', trace_html(record), stopped)


def stop_view() -> dict:
    """The stop button hides once pressed (the answer it stopped stores nothing)."""
    return gr.update(visible=False)


def layout(services: Services) -> DeepParts:
    """Hidden on the tiny profile: a deep answer is written by the model (features.deep says why)."""
    writes = services.model_profile.writes
    answer = gr.HTML(elem_id="chat-deep-answer", visible=writes)
    stop = gr.Button("Stop the deep answer", size="sm", visible=False, elem_id="chat-deep-stop")
    with gr.Accordion("Deep answer: step trace", open=False, visible=writes, elem_id="chat-deep-trace-box"):
        gr.Markdown(ABOUT)
        trace = gr.HTML(elem_id="chat-deep-trace")
    return DeepParts(answer, stop, trace)


def wire(services: Services, button: gr.Button, question: gr.Textbox, turn_state: gr.State, parts: DeepParts,
         at_once: int) -> None:
    def ask_deep(question: str, turn_id: str | None, request: gr.Request):
        yield from deep_view(services, question, turn_id, request)

    event = button.click(ask_deep, [question, turn_state], [parts.answer, parts.trace, parts.stop],
                         concurrency_limit=at_once, concurrency_id="chat-ask")
    parts.stop.click(stop_view, None, [parts.stop], cancels=[event])
