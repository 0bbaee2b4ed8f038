"""The Ask sub-tab: one question, two blind answers side by side, a vote, the turn's papers as BibTeX, and the
user's recent questions to reopen. Callbacks parse, call copilot.features.chat, and format (ui.chat.render)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator

import gradio as gr

from copilot.errors import UserError
from copilot.features.answers import table_exports
from copilot.features.chat import chat_for
from copilot.features.followups import own_words
from copilot.features.memory import thought_lineage
from copilot.features.signin import oauth_writer, picker_shown, sign_in_note, turn_model
from copilot.services import Services
from copilot.ui.chat import answer_papers, deep, judge
from copilot.ui.chat import scope as scope_ui
from copilot.ui.chat.render import (
    ASK_ALONE,
    history_choices,
    notice_html,
    recent_html,
    reopened_outputs,
    turn_outputs,
    vote_recorded_html,
)
from copilot.ui.common import current_user, escape, shown_file, user_within_rate, write_download

VOTE_BUTTONS = [("A is better", "A", "chat-vote-a"), ("B is better", "B", "chat-vote-b"),
                ("Tie", "tie", "chat-vote-tie"), ("Both bad", "bad", "chat-vote-bad")]
STREAM_EVERY_S = 0.15
INTRO = ("Each question is answered twice: once from papers only, once from papers plus the assistant's stored "
         "thoughts, in random order. Until you vote the two answers are shown together and look alike: their "
         "words and citation labels [1], [2]… only, with no sources, links, ids or per-answer times. Judge them by "
         "what they say. Your vote reveals which answer used thoughts, which sources are papers (with arXiv links) "
         "and which are thoughts (with the papers they rest on).")


class LatestTurns:
    """The question each page (browser session) asked last. A question asked while the answers before it are still
    being updated (their papers' full text is read for up to fulltext.WAIT_S) takes the answer boxes over: the turn
    before stops updating them, so it holds no place in the queue for the rest of its wait (`newer`)."""

    SESSIONS = 10_000        # the oldest sessions are forgotten past this

    def __init__(self) -> None:
        self._turns: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, session: str | None, turn_id: str, question: str) -> None:
        if not session:
            return
        with self._lock:
            self._turns[session] = (turn_id, question)
            self._turns.move_to_end(session)
            while len(self._turns) > self.SESSIONS:
                self._turns.popitem(last=False)

    def newer(self, session: str | None, turn_id: str) -> str | None:
        """The question the page asked after `turn_id`, if it has."""
        with self._lock:
            latest = self._turns.get(session or "")
        return latest[1] if latest is not None and latest[0] != turn_id else None


LATEST = LatestTurns()
ASK_OUTPUTS = 7           # what `ask_view` yields: notice, answer A, answer B, vote row, vote status, turn id, recent


def ask_view(services: Services, question: str, personalize: bool, previous_turn: str | None,
             request: gr.Request | None, oauth_token: gr.OAuthToken | None = None,
             model: str | None = None, papers: list[str] | None = None) -> Iterator[tuple]:
    """→ (notice, answer A, answer B, vote row, vote status, turn id, recent) as the turn is answered. A signed-in
    visitor's token (this event's only) has their own model write the answers, the one they picked (`model`, one
    of those offered: features.signin). `papers`: the Ask box's scope (ui.chat.scope), the papers asked about."""
    chat = chat_for(services)
    hidden = gr.update(visible=False)
    try:
        user = user_within_rate(services, request, "asking")
        turn = chat.prepare(question, user, personalize, previous_turn=previous_turn,
                            writer=oauth_writer(services, oauth_token, model), papers=scope_ui.chosen(papers))
    except UserError as error:
        yield notice_html(error), "", "", hidden, "", None, gr.update()
        return
    session = request.session_hash if request is not None else None
    LATEST.start(session, turn.id, turn.question)
    yield *columns(turn_outputs(turn.view(), turn.notice)), hidden, "", turn.id, gr.update()   # retrieved
    last = time.monotonic()
    stream = chat.stream(turn)
    shown = False             # the answers have been yielded done (an API client's result holds them)
    for live in stream:
        newer = LATEST.newer(session, turn.id)
        # the page asked the same again (a double click), or another question once these answers were shown: the
        # boxes are that one's (a client of the API asking several questions at once gets each answered)
        if newer is not None and (newer == turn.question or shown):
            chat.replaced(turn, stream)
            # Gradio ends a stream by sending its last frame again, which put this turn's answers back over the
            # newer question's (up to fulltext.WAIT_S after it was asked): the last frame changes nothing
            yield (gr.update(),) * ASK_OUTPUTS
            return
        if time.monotonic() - last >= STREAM_EVERY_S or live.done:
            last = time.monotonic()
            yield *columns(turn_outputs(live.view(), turn.notice)), hidden, "", turn.id, gr.update()
            shown = live.done
    final = turn.view()
    outputs = columns(turn_outputs(final, turn.notice, thought_lineage(services, final, user)))
    yield *outputs, gr.update(visible=final.votable), "", turn.id, recent_html(chat.recent_turns(user))


def ask_alone_view(services: Services, personalize: bool, turn_id: str | None, request: gr.Request | None,
                   oauth_token: gr.OAuthToken | None = None, model: str | None = None) -> Iterator[tuple]:
    """"Ask it on its own": the shown turn's question in the user's own words, asked again with no previous turn
    (a standalone question the follow-up rule misread). → the outputs of `ask_view`."""
    words = own_words(services, turn_id, current_user(request))
    if not words:
        yield notice_html("Only a question read as a follow-up can be asked on its own."), *([gr.update()] * 6)
        return
    yield from ask_view(services, words, personalize, None, request, oauth_token, model)


def alone_shown(services: Services, turn_id: str | None, request: gr.Request | None) -> dict:
    """The "Ask it on its own" button shows while the turn shown was read as a follow-up."""
    return gr.update(visible=bool(own_words(services, turn_id, current_user(request))))


def columns(outputs: tuple[str, str, str]) -> tuple:
    """(notice, answer A, answer B) for the page: a turn with one answer hides the second column, so the one
    answer takes the page's width."""
    notice, a, b = outputs
    return notice, a, gr.update(value=b, visible=bool(b))


def vote_view(services: Services, choice: str, turn_id: str | None, request: gr.Request | None,
              oauth_token: gr.OAuthToken | None = None) -> tuple:
    """→ (vote status, answer A, answer B, recent). A signed-in voter's model drafts the preferred answer's thought."""
    user = current_user(request)
    if not turn_id:
        return notice_html("Ask a question first."), gr.update(), gr.update(), gr.update()
    chat = chat_for(services)
    shown = chat.view(turn_id, user)       # the thought is drafted by the model that wrote the answers
    try:
        result = chat.vote(turn_id, choice, user,
                           writer=oauth_writer(services, oauth_token, turn_model(services, shown.models) if shown
                                               else None))
    except UserError as error:
        return f'<div class="chat-error">{escape(error)}</div>', gr.update(), gr.update(), gr.update()
    view = chat.view(turn_id, user)
    if view is None:          # the vote was recorded on this user's turn, so it is there; a deleted data dir is not
        return vote_recorded_html(result), gr.update(), gr.update(), recent_html(chat.recent_turns(user))
    _, a, b = columns(turn_outputs(view, lineage=thought_lineage(services, view, user)))
    return vote_recorded_html(result), a, b, recent_html(chat.recent_turns(user))


def recent_view(services: Services, request: gr.Request | None) -> tuple:
    rows = chat_for(services).recent_turns(current_user(request))
    return recent_html(rows), gr.update(choices=history_choices(rows), value=None)


def history_view(services: Services, request: gr.Request | None):
    return gr.update(choices=history_choices(chat_for(services).recent_turns(current_user(request))))


def bibtex_view(services: Services, turn_id: str | None, request: gr.Request | None) -> tuple:
    """The shown answer's evidence table as CSV and Markdown, and its papers as BibTeX — once the sides are
    revealed (the vote, or no comparison): before that, which papers a side used would tell the sides apart. The
    file box shows only with files in it."""
    view = chat_for(services).view(turn_id, current_user(request))
    none = shown_file(None)
    if view is None:
        return '<span class="chat-notice">Ask a question first.</span>', none
    if not view.revealed:
        return '<span class="chat-notice">Vote first: the sources stay blind until then.</span>', none
    shown = view.shown_answer()
    try:
        files = table_exports(services, view.question, shown.table if shown else None, view.paper_ids)
    except UserError as error:
        return f'<span class="chat-notice">{escape(error)}</span>', none
    if not files:
        return '<span class="chat-notice">This turn used no papers.</span>', none
    paths = [write_download(text, f"chat-{view.question[:40]}", kind) for kind, text in files.items()]
    return "", shown_file([p for p in paths if p] or None)


def cleared_bibtex(turn_id: str | None) -> tuple:
    """Another turn is shown (or none yet): the last turn's file goes, and the download is offered once a turn is."""
    return "", shown_file(None), gr.update(visible=bool(turn_id))


def reopen_view(services: Services, turn_id: str | None, request: gr.Request | None) -> tuple:
    """A past turn of this user, shown again with its answers, sources and vote; it becomes the turn a vote or a
    follow-up question refers to. → (notice, answer A, answer B, vote row, vote status, turn id)."""
    user = current_user(request)
    view = chat_for(services).view(turn_id, user)
    if view is None:
        message = "Pick one of your recent questions." if not turn_id else "That question is not in your history."
        return notice_html(message), gr.update(), gr.update(), gr.update(), gr.update(), gr.update()
    # the turn still being answered on this page (its papers' full text) stops updating the boxes, as for a question
    LATEST.start(request.session_hash if request is not None else None, view.turn_id, view.question)
    notice, a, b, status = reopened_outputs(view, thought_lineage(services, view, user))
    _, a, b = columns(("", a, b))
    return notice, a, b, gr.update(visible=view.votable), status, view.turn_id


QUOTED_ASKS_AT_ONCE = 4       # quoted answers at once: each is embedder work only (a few hundred ms of CPU)


def asks_at_once(services: Services) -> int:
    """The local model answers one call at a time; an endpoint takes the configured concurrency."""
    return 1 if services.settings.llm_backend == "local" else services.settings.concurrency


def ask_admission(services: Services) -> tuple[int, str]:
    """(A/B asks run at once, the queue they wait in): admission by what a turn costs. On a profile whose model
    writes nothing shown (tiny), an answer is quotes the embedder chose and calls no model, so several run at once
    in a queue of their own; an answer the model writes waits in the queue the deep and SlimPLM answers share, one
    at a time on the local model. The model itself serves one call at a time either way (its lock)."""
    if not services.model_profile.writes:
        return max(QUOTED_ASKS_AT_ONCE, asks_at_once(services)), "chat-quote"
    return asks_at_once(services), "chat-ask"


def build(services: Services, chat_tabs: gr.Tabs | None = None) -> scope_ui.AskTarget:
    """The Ask sub-tab's layout and events; returns where a card's "Ask about this paper" goes: the question box and
    its scope, in `chat_tabs` (Chat's sub-tabs)."""
    gr.Markdown(INTRO)
    sign_in = gr.Markdown(elem_id="chat-sign-in-note", visible=bool(services.settings.oauth_client_id))
    choices = services.settings.hf_model_choices()     # shown to a signed-in visitor allowed inference (page load)
    model = gr.Dropdown(choices=choices, value=choices[0], label="Model that writes your answers", visible=False,
                        elem_id="chat-hf-model")
    question, scope = _question_box(services)
    with gr.Row():
        personalize = gr.Checkbox(label="Adapt answers to my saved profile", value=False, elem_id="chat-personalize")
        ask_button = gr.Button("Ask", variant="primary", elem_id="chat-ask")
        deep_button = gr.Button("Deep answer (RAT)", visible=services.model_profile.writes, elem_id="chat-deep")
    notice = gr.HTML(elem_id="chat-notice")
    alone = gr.Button(ASK_ALONE, size="sm", visible=False, elem_id="chat-ask-alone")
    with gr.Row(equal_height=False):
        answer_a, answer_b = gr.HTML(elem_id="chat-answer-a"), gr.HTML(elem_id="chat-answer-b")
    papers_parts = answer_papers.layout()
    with gr.Row(visible=False, elem_id="chat-vote-row") as vote_row:
        vote_buttons = [(gr.Button(text, elem_id=elem), value) for text, value, elem in VOTE_BUTTONS]
    vote_status = gr.HTML(elem_id="chat-vote-status")
    judge_parts = judge.layout()
    turn_bib, turn_bib_note, turn_bib_file = _evidence_download()
    deep_parts = deep.layout(services)
    gr.Markdown("#### Your recent questions")
    history = gr.Dropdown(label="Reopen a past question (its answers, sources and your vote)", choices=[],
                          value=None, allow_custom_value=True, elem_id="chat-history")
    recent, turn_state = gr.HTML(elem_id="chat-recent"), gr.State(None)

    def ask(question: str, personalize: bool, previous_turn: str | None, request: gr.Request,
            model: str | None = None,               # the picker's value (Gradio puts the request in by its type)
            papers: list[str] | None = None,        # the scope's papers
            oauth_token: gr.OAuthToken | None = None):      # Gradio passes it by its type; None: not signed in
        yield from ask_view(services, question, personalize, previous_turn, request, oauth_token, model, papers)

    def sign_in_view(oauth_token: gr.OAuthToken | None):
        return sign_in_note(services, oauth_token), gr.update(visible=picker_shown(services, oauth_token))

    def refresh_history(request: gr.Request):
        return history_view(services, request)

    ask_outputs = [notice, answer_a, answer_b, vote_row, vote_status, turn_state, recent]
    at_once, queue = ask_admission(services)
    # "multiple": a question asked while the last one's answers still update (full text) is asked, not dropped
    asked = [trigger(ask, [question, personalize, turn_state, model, scope.box], ask_outputs,
                     concurrency_limit=at_once, concurrency_id=queue, trigger_mode="multiple")
             for trigger in (ask_button.click, question.submit)]
    for event in asked:
        event.then(refresh_history, None, [history])
    _wire_alone(services, alone, [personalize, turn_state, model], ask_outputs, (at_once, queue),
                (refresh_history, history))
    deep.wire(services, deep_button, question, turn_state, deep_parts, asks_at_once(services))
    if services.settings.oauth_client_id:      # what signing in adds, or where a signed-in visitor's words go
        on_page_load(sign_in_view, [sign_in, model])
    reopened, voted = _wire_rest(services, vote_buttons, turn_state, [vote_status, answer_a, answer_b, recent],
                                 (turn_bib, turn_bib_note, turn_bib_file), history, ask_outputs[:-1], recent)
    judge.wire(services, judge_parts, turn_state, [*asked, reopened])
    return _wire_scope(services, scope_ui.AskTarget(question, scope, chat_tabs), papers_parts, turn_state,
                       (asked, reopened, voted))


def _wire_scope(services: Services, target: scope_ui.AskTarget, papers_parts, turn_state, events) -> scope_ui.AskTarget:
    """The answer's papers ("Ask about these"), filled after a turn is answered, voted or reopened; a reopened turn's
    scope back in the box. Returns `target`."""
    asked, reopened, voted = events
    answer_papers.wire(services, papers_parts, turn_state, target, [*asked, reopened, *voted])
    scope_ui.wire_reopened(services, target.scope, turn_state, reopened)
    return target


def _evidence_download() -> tuple[gr.Button, gr.HTML, gr.File]:
    """The turn's evidence as files: the button, a note, the files (hidden until asked for)."""
    with gr.Row():
        button = gr.Button("Download this turn's evidence (CSV, Markdown, BibTeX)", size="sm", elem_id="chat-bib-run",
                           scale=1, visible=False)
        note = gr.HTML(elem_id="chat-bib-note")
        files = gr.File(label="Evidence", elem_id="chat-bibtex", interactive=False, height=72, scale=2, visible=False,
                        file_count="multiple")
    return button, note, files


def _question_box(services: Services) -> tuple[gr.Textbox, scope_ui.ScopeParts]:
    """The question box, with its scope above it (ui.chat.scope: the papers it is asked about)."""
    scope = scope_ui.layout()
    question = gr.Textbox(label="Question", lines=2, elem_id="chat-question",
                          placeholder="e.g. How are retrieval-augmented models evaluated?")
    scope.upload = scope_ui.upload_layout()         # "Ask about your own PDF": a small button, no empty file box
    scope_ui.wire(services, scope, question)
    return question, scope


def _wire_alone(services: Services, alone, inputs, ask_outputs, admission, refresh) -> None:
    """"Ask it on its own": shown while the turn shown was read as a follow-up; asks it as a new question."""
    def ask_alone(personalize: bool, turn_id: str | None, request: gr.Request, model: str | None = None,
                  oauth_token: gr.OAuthToken | None = None):
        yield from ask_alone_view(services, personalize, turn_id, request, oauth_token, model)

    def show_alone(turn_id: str | None, request: gr.Request):
        return alone_shown(services, turn_id, request)

    (at_once, queue), (refresh_history, history) = admission, refresh
    turn_state = inputs[1]
    alone.click(ask_alone, inputs, ask_outputs, concurrency_limit=at_once, concurrency_id=queue,
                trigger_mode="multiple").then(refresh_history, None, [history])
    turn_state.change(show_alone, [turn_state], [alone])


def _wire_rest(services: Services, vote_buttons, turn_state, vote_outputs, bib_parts, history, reopen_outputs,
               recent):
    """Votes, BibTeX, reopening and the page-load refresh, in the order their API names were first given; returns
    the reopening event and the vote events."""
    def turn_bibtex(turn_id: str | None, request: gr.Request):
        return bibtex_view(services, turn_id, request)

    def reopen(turn_id: str | None, request: gr.Request):
        return reopen_view(services, turn_id, request)

    def show_recent(request: gr.Request):
        return recent_view(services, request)

    voted = [button.click(_bind_choice(services, value), [turn_state], vote_outputs) for button, value in vote_buttons]
    turn_bib, turn_bib_note, turn_bib_file = bib_parts
    turn_bib.click(turn_bibtex, [turn_state], [turn_bib_note, turn_bib_file])
    turn_state.change(cleared_bibtex, [turn_state], [turn_bib_note, turn_bib_file, turn_bib])
    reopened = history.input(reopen, [history], reopen_outputs)
    on_page_load(show_recent, [recent, history])
    return reopened, voted


def _bind_choice(services: Services, choice: str):
    def handler(turn_id: str | None, request: gr.Request,     # API name /handler: scripts and tests call it
                oauth_token: gr.OAuthToken | None = None):
        return vote_view(services, choice, turn_id, request, oauth_token)

    return handler


def on_page_load(fn, outputs) -> None:
    """Run `fn` whenever the page (re)loads, from inside a tab module that does not own the page."""
    root = gr.context.Context.root_block
    if root is not None:
        root.load(fn, None, outputs)

