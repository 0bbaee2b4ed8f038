"""The "For you" tab — new papers ranked for the user, with "more like this" / "not interested" — and the route of
each user's private Atom feed, /feed/<token>.atom (an ASGI middleware: the token, not a login, opens it, so a feed
reader can fetch it; a wrong or missing token gets 404 and nothing else)."""

from __future__ import annotations

import re

import anyio
import gradio as gr
from starlette.responses import Response

from copilot.errors import UserError
from copilot.features import feed as feature
from copilot.features.bibtex import bibtex_text
from copilot.features.feed import MORE, NOT_INTERESTED
from copilot.readable import readable
from copilot.services import Services
from copilot.ui.common import current_user, escape, shown_file, write_bibtex

FEED_PATH = re.compile(r"/feed/([A-Za-z0-9_-]{16,64})\.atom")
AUTHORS_SHOWN = 5


def head_html(feed: feature.Feed) -> str:
    counted = f"{feed.candidates:,} papers" if feed.close is None else f"{feed.close:,} close to your profile"
    head = (f'<p class="feed-since">New for you: {escape(feed.since)} — {counted}'
            + (f", {feed.hidden} hidden as not interesting" if feed.hidden else "") + ".</p>")
    if feed.message:
        head += f'<p class="feed-message">{escape(feed.message)}</p>'
    return head


def card_of(item: feature.FeedItem, marks: dict[str, str]) -> dict:
    """What one card shows, kept in the page's state so each card's buttons know their paper."""
    p = item.paper
    why = item.reason
    abstract = readable(p.abstract)
    return {"id": p.id, "title": readable(p.title), "url": p.abs_url, "liked": marks.get(p.id) == MORE, "why": why,
            "closeness": round(item.closeness, 4),
            "meta": " · ".join([", ".join(p.authors[:AUTHORS_SHOWN]) + (" et al." if len(p.authors) > AUTHORS_SHOWN
                                                                          else ""),
                                p.published.isoformat(), " ".join(p.categories[:3])]),
            "snippet": abstract[:300] + ("…" if len(abstract) > 300 else "")}


def card_html(card: dict) -> str:
    mark = ' <span class="feed-liked">★ you asked for more like this</span>' if card["liked"] else ""
    return (f'<div class="feed-card" data-id="{escape(card["id"])}" data-closeness="{card.get("closeness", 0):.3f}">'
            f'<a href="{escape(card["url"])}" target="_blank" '
            f'rel="noopener">{escape(card["title"])}</a>{mark}<div class="feed-meta">{escape(card["meta"])}'
            + (f" · {escape(card['why'])}" if card["why"] else "") + "</div>"
            f'<div class="feed-snippet">{escape(card["snippet"])}</div></div>')


def feed_url(request: gr.Request | None, token: str) -> str:
    headers = getattr(request, "headers", None) or {}
    host = headers.get("x-forwarded-host") or headers.get("host") or "127.0.0.1:7860"
    scheme = headers.get("x-forwarded-proto") or ("https" if ".hf.space" in host else "http")
    return f"{scheme}://{host}/feed/{token}.atom"


def url_html(url: str) -> str:
    return (f'<p>Your private feed: <code id="feed-url">{escape(url)}</code> — add it to a feed reader. Anyone with '
            "this link can read this list (nothing else); make a new link to stop the old one.</p>")


def feed_view(services: Services, user: str, since_text, visit: bool = True) -> tuple:
    """→ (the list's head, the cards, the list's BibTeX file)."""
    try:
        result = feature.feed_for(services, user, since_text if isinstance(since_text, str) else None, visit=visit)
    except UserError as error:
        return f'<p class="feed-message">{escape(error)}</p>', [], shown_file(None)
    marks = feature.feedback_of(services, user)
    file = write_bibtex(bibtex_text([item.paper for item in result.items]), "for-you") if result.items else None
    return head_html(result), [card_of(item, marks) for item in result.items], shown_file(file)


def feedback_view(services: Services, user: str, verdict: str, card: dict | None, since_text) -> tuple:
    """"More like this", "not interested" or undo on one paper, then the list again (not counted as a visit).
    → (the confirmation naming the paper, the paper the Undo button undoes, head, cards, file)."""
    card = card or {}
    named = f"“{card.get('title', '')}” ({card.get('id', '')})"
    try:
        if verdict == "undo":
            if not card:
                raise UserError("nothing to undo yet")
            feature.undo_feedback(services, user, card["id"])
            message, undoable = f"Feedback on {named} removed.", None
        else:
            feature.give_feedback(services, user, card.get("id", ""), verdict)
            message = (f"More like {named}: the list is re-ranked." if verdict == MORE else
                       f"{named} hidden; similar papers move down.")
            undoable = card
    except UserError as error:
        return f'<p class="feed-message">{escape(error)}</p>', gr.update(), gr.update(), gr.update(), gr.update()
    return (f"<p>{escape(message)}</p>", undoable, *feed_view(services, user, since_text, visit=False))


def slot_paper(cards: list[dict] | None, slot: int) -> str | None:
    """The arXiv id of the card in `slot`, None when the slot is empty."""
    return cards[slot]["id"] if isinstance(cards, list) and slot < len(cards) and isinstance(cards[slot], dict) \
        else None


def slot_updates(cards: list[dict] | None) -> list:
    """For each of the FEED_LIMIT card slots: shown or hidden, and its card."""
    updates = []
    for n in range(feature.FEED_LIMIT):
        card = cards[n] if cards and n < len(cards) else None
        updates += [gr.update(visible=card is not None), card_html(card) if card else ""]
    return updates


def _with_slots(result: tuple) -> tuple:
    """A view's outputs, then the slots filled from its cards (left as they are when the view changed nothing)."""
    cards = result[-2]
    return (*result, *(slot_updates(cards) if isinstance(cards, list) else [gr.update()] * 2 * feature.FEED_LIMIT))


def _card_slots() -> tuple[list, list, list]:
    """One slot per card the feed can list, each with its own two buttons (issue #38: the feedback went through a
    dropdown below 30 cards) and its "Ask about this paper" (#57, wired by ui.main). Fixed slots, not gr.render: every
    event of the page is known when it is built."""
    slots, buttons, asks = [], [], []
    for n in range(feature.FEED_LIMIT):
        with gr.Group(visible=False, elem_classes=["feed-card-box"]) as box:
            html = gr.HTML()
            with gr.Row(elem_classes=["feed-card-actions"]):
                more = gr.Button("More like this", size="sm", elem_classes=["feed-more"], scale=0, min_width=130)
                not_interested = gr.Button("Not interested", size="sm", elem_classes=["feed-not"], scale=0,
                                           min_width=130)
                asks.append(gr.Button("Ask about this paper", size="sm", elem_classes=["feed-ask"], scale=0,
                                      min_width=150))
        slots += [box, html]
        buttons += [(n, more, MORE), (n, not_interested, NOT_INTERESTED)]
    return slots, buttons, asks


def _reaction(services: Services, verdict: str, slot: int):
    def on_feedback(cards, since_text, request: gr.Request):
        card = cards[slot] if cards and slot < len(cards) else None
        return _with_slots(feedback_view(services, current_user(request), verdict, card, since_text))
    return on_feedback


def build(services: Services):
    gr.Markdown("Papers new since your previous visit (or since a day you choose), ranked by your saved profile and "
                "by your feedback: **More like this** adds a paper to what the ranking looks for, **Not interested** "
                "hides it and pushes similar papers down.")
    with gr.Row():
        since = gr.Textbox(label="Since (YYYY-MM-DD; empty: since your previous visit)", elem_id="feed-since",
                           scale=3)
        refresh = gr.Button("Show", variant="primary", elem_id="feed-show", scale=1)
    with gr.Row():
        note = gr.HTML(elem_id="feed-note")
        undo = gr.Button("Undo", size="sm", elem_id="feed-undo", scale=0)
    last_feedback, cards_state = gr.State(None), gr.State([])
    with gr.Column(elem_id="feed-list"):
        listing = gr.HTML(elem_id="feed-head")
        slots, buttons, asks = _card_slots()
    bib_file = gr.File(label="BibTeX of this list", elem_id="feed-bibtex", interactive=False, height=72,
                       visible=False)
    outputs = [listing, cards_state, bib_file, *slots]
    with gr.Accordion("Your private Atom feed", open=False):
        url = gr.HTML(elem_id="feed-url-box")
        renew = gr.Button("Make a new feed link", size="sm", elem_id="feed-renew")

    def show(since_text, request: gr.Request, visit: bool = True):
        return _with_slots(feed_view(services, current_user(request), since_text, visit))

    def undo_last(card, since_text, request: gr.Request):
        return _with_slots(feedback_view(services, current_user(request), "undo", card, since_text))

    def show_url(request: gr.Request, renew_now: bool = False):
        return url_html(feed_url(request, feature.feed_token(services, current_user(request), renew=renew_now)))

    gr.on([refresh.click, since.submit], show, [since], outputs)
    for slot, button, verdict in buttons:
        button.click(_reaction(services, verdict, slot), [cards_state, since], [note, last_feedback, *outputs])
    undo.click(undo_last, [last_feedback, since], [note, last_feedback, *outputs])

    def renew_url(request: gr.Request):
        return show_url(request, True)

    renew.click(renew_url, None, url)
    return (show, [since], outputs), (show_url, url), (cards_state, asks)


class FeedRoute:
    """ASGI middleware serving GET /feed/<token>.atom from the feature; every other request goes on to Gradio."""

    def __init__(self, app, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/feed/"):
            return await self.app(scope, receive, send)
        match = FEED_PATH.fullmatch(scope["path"])
        body = None
        if match and scope["method"] in ("GET", "HEAD"):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
            base = f"{headers.get('x-forwarded-proto', scope.get('scheme', 'http'))}://{headers.get('host', '')}"
            body = await anyio.to_thread.run_sync(feature.atom_for_token, self.services, match.group(1), base)
        if body is None:
            response = Response("No such feed. Copy the link again from the For you tab.", status_code=404,
                                media_type="text/plain")
        else:
            response = Response(body, media_type="application/atom+xml; charset=utf-8",
                                headers={"Cache-Control": "private, max-age=300"})
        await response(scope, receive, send)
