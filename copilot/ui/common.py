"""Small helpers shared by the tabs: who the user is, and text made safe for HTML."""

from __future__ import annotations

import html

import gradio as gr

LOCAL_USER = "local"


def current_user(request: gr.Request | None) -> str:
    """The logged-in user (Hugging Face OAuth or COPILOT_AUTH), else the single local user."""
    username = getattr(request, "username", None) if request is not None else None
    return str(username) if username else LOCAL_USER


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def arxiv_link(paper_id: str, title: str | None = None) -> str:
    label = escape(title or paper_id)
    return f'<a href="https://arxiv.org/abs/{escape(paper_id)}" target="_blank" rel="noopener">{label}</a>'
