"""Small helpers shared by the tabs: who the user is, and text made safe for HTML."""

from __future__ import annotations

import html

import gradio as gr

LOCAL_USER = "local"


def current_user(request: gr.Request | None) -> str:
    """The logged-in user (COPILOT_AUTH password login, or Hugging Face OAuth), else the single local user."""
    if request is None:
        return LOCAL_USER
    username = getattr(request, "username", None)
    if username:
        return str(username)
    oauth_name = _oauth_username(request)
    return f"hf:{oauth_name}" if oauth_name else LOCAL_USER


def _oauth_username(request: gr.Request) -> str | None:
    """The Hugging Face account of a session logged in through gr.LoginButton, if any."""
    try:
        from gradio.oauth import _get_valid_oauth_info_from_session

        info = _get_valid_oauth_info_from_session(request.session)
    except Exception:  # no session middleware: the app runs without OAuth
        return None
    userinfo = (info or {}).get("userinfo") or {}
    return userinfo.get("preferred_username")


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def arxiv_link(paper_id: str, title: str | None = None) -> str:
    label = escape(title or paper_id)
    return f'<a href="https://arxiv.org/abs/{escape(paper_id)}" target="_blank" rel="noopener">{label}</a>'
