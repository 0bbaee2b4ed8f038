"""The Chat tab, one module per sub-tab: Ask (two blind answers side by side, a vote; Deep answer on the same
page), Adaptive retrieval (SlimPLM), Memory (thoughts with lineage), Statistics. Each module's callbacks only parse
input, call one feature function, and format its output."""

from __future__ import annotations

import gradio as gr

from copilot.services import Services
from copilot.ui.chat import adaptive, ask, memory, stats


def build(services: Services) -> gr.Textbox:
    """The Chat tab's sub-tabs; returns the question box (the Search tab's "Ask about this paper" fills it)."""
    with gr.Tabs(elem_id="chat-tabs"):
        with gr.Tab("Ask", id="chat-ask-tab"):
            question = ask.build(services)
        with gr.Tab("Adaptive retrieval (SlimPLM)", id="chat-slim-tab"):
            adaptive.build(services, ask.asks_at_once(services))
        with gr.Tab("Memory", id="chat-memory-tab"):
            memory.build(services)
        with gr.Tab("Statistics", id="chat-stats-tab"):
            stats.build(services)
    return question
