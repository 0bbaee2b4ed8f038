"""The whole page: one tab per feature. Callbacks only parse input, call a feature, and format output."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from copilot.ratelimit import PasswordGate
from copilot.scheduler import IngestScheduler
from copilot.services import Services
from copilot.ui import chat, documents, feed, library, profile, related, search, trends
from copilot.ui.chat import scope as scope_ui
from copilot.ui.fairness import FairShare
from copilot.ui.feed import FeedRoute
from copilot.ui.guard import MAX_UPLOAD_MB, RequestGuard

ASSETS = Path(__file__).resolve().parents[2] / "assets"
MAX_UPLOAD = f"{MAX_UPLOAD_MB}mb"    # the Library's snapshot upload; Gradio's route took files of any size (issue #19)


def build_ui(services: Services, scheduler: IngestScheduler | None = None) -> gr.Blocks:
    with gr.Blocks(title="Research Copilot") as page:
        with gr.Row():
            gr.Markdown("# Research Copilot\nYour research assistant over arXiv: profile, trends, chat, related "
                        "papers.", elem_id="app-header")
            if services.settings.oauth_client_id:   # a Space with sign-in enabled
                gr.LoginButton(scale=0)
        with gr.Tabs() as tabs:
            with gr.Tab("Profile", id="profile"):
                empty_note = gr.Markdown(visible=False, elem_id="library-empty-note")
                profile.build(services)
            with gr.Tab("For you", id="for-you") as for_you:
                (show_feed, feed_inputs, feed_outputs), (show_feed_url, feed_url), feed_asks = feed.build(services)
            with gr.Tab("Trends", id="trends"):
                trends.build(services)
            with gr.Tab("Chat", id="chat") as chat_tab:
                ask_target, refresh_chat_views = chat.build(services)
            with gr.Tab("Search", id="search"):
                search_tab = search.build(services)
            with gr.Tab("Related", id="related"):
                related_reference, related_run, related_ask = related.build(services)
            with gr.Tab("Library", id="library") as library_tab:
                show, status, history = library.build(services, scheduler)
                documents_part = documents.build(services)
        refresh_chat_views(chat_tab)      # back on Chat with Memory or Statistics open
        ask_target = replace(ask_target, tabs=tabs)
        search.connect(services, search_tab, tabs, related_reference, related_run, ask_target)
        connect_asks(services, ask_target, related_ask, feed_asks)
        documents.connect(services, documents_part, library_tab, ask_target)
        page.load(show, outputs=[status, history])
        page.load(lambda: library.empty_library_note(services), outputs=empty_note)
        for_you.select(show_feed, feed_inputs, feed_outputs).then(show_feed_url, None, feed_url)
    return page


def connect_asks(services: Services, target: scope_ui.AskTarget, related_ask: tuple, feed_asks: tuple) -> None:
    """"Ask about this paper" on Related's results and on each card of For you: the paper joins the Ask box's scope
    and the page goes there (ui.chat.scope; Search's is wired by search.connect)."""
    button, chosen = related_ask
    scope_ui.connect(services, button, [chosen], target)
    cards, asks = feed_asks
    for slot, ask in enumerate(asks):
        scope_ui.connect(services, ask, [cards], target, pick=partial(feed.slot_paper, slot=slot))


def launch_options(services: Services) -> dict:
    s = services.settings
    css_file = ASSETS / "style.css"
    pairs = s.auth_pairs()
    return {
        "server_name": s.server_name,
        "server_port": s.server_port,
        "css": css_file.read_text(encoding="utf-8") if css_file.is_file() else None,
        "theme": gr.themes.Soft(),
        "show_error": False,
        "max_file_size": MAX_UPLOAD,
        # request size, session ids and their users, no API schema before sign-in (copilot/ui/guard.py); no
        # FastAPI route list either (Gradio's own API description needs a login); then each user's share of the
        # queue (copilot/ui/fairness.py); then the Atom feeds' route
        "app_kwargs": {"middleware": [Middleware(RequestGuard), Middleware(FairShare, per_user=s.user_pending),
                                      Middleware(FeedRoute, services=services)],
                       "openapi_url": None},
        "auth": PasswordGate(pairs) if pairs else None,
        "auth_message": "Research Copilot: log in with the account your administrator gave you." if s.auth else None,
    }
