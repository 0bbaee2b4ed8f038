"""A one-answer turn's judgement on the Ask sub-tab (#59 item 11): when memory changed nothing there is no blind
pair to vote on, so the researcher says whether the answer is worth remembering. "Remember this answer" makes its
thought as a preferred answer's is; "Not useful" makes none. Judgements are not blind votes:
no statistic counts them."""

from __future__ import annotations

import gradio as gr

from copilot.errors import UserError
from copilot.features.chat import ONE_ANSWER, chat_for
from copilot.features.signin import oauth_writer, turn_model
from copilot.services import Services
from copilot.ui.common import current_user, escape

JUDGE_BUTTONS = [("Remember this answer", "keep", "chat-judge-keep"), ("Not useful", "dismiss", "chat-judge-dismiss")]
HINT = ("One answer this time (memory added nothing to compare), so there is no vote. Should the assistant remember "
        "it? A remembered answer becomes a thought that later questions can be answered with.")
JUDGED = {"keep": "Remembered: this answer becomes a thought (made in the background).",
          "dismiss": "Noted: this answer is not remembered."}


def layout() -> tuple:
    """(row, [(button, choice)], status), hidden until a finished one-answer turn is shown."""
    with gr.Column(visible=False, elem_id="chat-judge-row") as row:
        gr.Markdown(HINT)
        with gr.Row():
            buttons = [(gr.Button(text, size="sm", elem_id=elem), value) for text, value, elem in JUDGE_BUTTONS]
    status = gr.HTML(elem_id="chat-judge-status")
    return row, buttons, status


def judged_html(choice: str | None) -> str:
    return f'<span class="chat-notice">{escape(JUDGED[choice])}</span>' if choice in JUDGED else ""


def judge_shown(services: Services, turn_id: str | None, request: gr.Request | None) -> tuple:
    """→ (row, status): the row shows for this user's finished one-answer turn whose answer did not fail, with the
    judgement already given, if any."""
    chat = chat_for(services)
    view = chat.view(turn_id, current_user(request)) if turn_id else None
    judgeable = (view is not None and view.comparison in ONE_ANSWER and bool(view.answers) and not view.scope
                 and all(a.done and not a.error and a.text for a in view.answers))
    if not judgeable or view is None:
        return gr.update(visible=False), ""
    return gr.update(visible=True), judged_html(chat.judgement(view.turn_id))


def judge_view(services: Services, choice: str, turn_id: str | None, request: gr.Request | None,
               oauth_token: gr.OAuthToken | None = None) -> str:
    """→ the status line. A signed-in visitor's model drafts the kept answer's thought, as it does a vote's."""
    if not turn_id:
        return '<span class="chat-notice">Ask a question first.</span>'
    user = current_user(request)
    chat = chat_for(services)
    shown = chat.view(turn_id, user)
    try:
        writer = oauth_writer(services, oauth_token, turn_model(services, shown.models) if shown else None)
        result = chat.judge(turn_id, choice, user, writer=writer)
    except UserError as error:
        return f'<div class="chat-error">{escape(error)}</div>'
    return judged_html(result["judgement"])


def wire(services: Services, parts: tuple, turn_state, after: list) -> None:
    """The buttons, and the row read again from the store whenever the turn shown changes (a new turn is unfinished:
    hidden) and after each event in `after` (an ask, a reopened turn) ends, so the order they end in does not
    matter."""
    row, buttons, status = parts

    def show(turn_id: str | None, request: gr.Request):
        return judge_shown(services, turn_id, request)

    for button, choice in buttons:
        button.click(_bound(services, choice), [turn_state], [status])
    turn_state.change(show, [turn_state], [row, status], show_progress="hidden")
    for event in after:
        event.then(show, [turn_state], [row, status], show_progress="hidden")


def _bound(services: Services, choice: str):
    def judge(turn_id: str | None, request: gr.Request, oauth_token: gr.OAuthToken | None = None):
        return judge_view(services, choice, turn_id, request, oauth_token)

    return judge
