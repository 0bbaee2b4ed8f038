"""The Chat tab, one module per sub-tab: Ask (two blind answers side by side, a vote; Deep answer on the same
page), Adaptive retrieval (SlimPLM), Memory (thoughts with lineage), Statistics. Each module's callbacks only parse
input, call one feature function, and format its output."""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from copilot.services import Services
from copilot.ui.chat import adaptive, ask, memory, stats
from copilot.ui.chat.scope import ASK_TAB, AskTarget


def build(services: Services) -> tuple[AskTarget, Callable[..., None]]:
    """The Chat tab's sub-tabs; returns where a card's "Ask about this paper" goes (the Ask box's question and scope)
    and a function that wires more triggers (the Chat tab's own select) to refresh Memory and Statistics."""
    with gr.Tabs(elem_id="chat-tabs") as chat_tabs:
        with gr.Tab("Ask", id=ASK_TAB):
            target = ask.build(services, chat_tabs)
        with gr.Tab("Adaptive retrieval (SlimPLM)", id="chat-slim-tab"):
            adaptive.build(services, ask.asks_at_once(services))
        with gr.Tab("Memory", id="chat-memory-tab") as memory_tab:
            show_memory, memory_inputs, memory_outputs = memory.build(services)
        with gr.Tab("Statistics", id="chat-stats-tab") as stats_tab:
            show_stats, stats_outputs = stats.build(services)

    def refresh_on(*triggers) -> None:
        """Memory and Statistics are read again whenever they come into view (issue #38: they were read once per
        page): after a turn or a vote on Ask, the user opens them again, and the select event of the tab shows
        the store as it is now."""
        gr.on([t.select for t in triggers], show_memory, memory_inputs, memory_outputs, show_progress="hidden")
        gr.on([t.select for t in triggers], show_stats, None, stats_outputs, show_progress="hidden")

    refresh_on(memory_tab, stats_tab)
    return target, refresh_on
