"""The Chat tab."""

from __future__ import annotations

import gradio as gr

from copilot.services import Services


def build(services: Services) -> None:
    gr.Markdown("**Chat** is not available yet in this build (tracked as issue #3).")
