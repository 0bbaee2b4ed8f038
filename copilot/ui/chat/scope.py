"""The scope of the Ask box (issue #57): the papers a question is asked about, shown above the question as
"About: <title> (arXiv id) ×", kept while the researcher types and asks follow-ups, each removed with one click (its
×; with none left the library is asked). A card's "Ask about this paper" (Search, Related, For you, a document of
Library's) and a Chat answer's "Ask about these" add their papers (`add_view`, `ask_about_view`), up to
features.scope.MAX_PAPERS, and go to the Ask box with the question left as typed; an arXiv id or link typed or pasted
in the question is offered as the scope (`offer_view`). A small "Ask about your own PDF" button uploads a PDF as a
private document of the visitor (features.documents), which joins the scope as "doc:<n>" (`upload_view`).
Callbacks parse, call copilot.features.scope, and format."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from copilot.errors import UserError
from copilot.features import documents
from copilot.features.chat import chat_for
from copilot.features.scope import MAX_PAPERS, ids_in, scope_choices, with_paper
from copilot.services import Services
from copilot.ui.common import SignInError, current_user, escape, user_within_rate

LABEL = (f"Asking about these papers only (up to {MAX_PAPERS}): one answer from their own text. "
         "× removes a paper; with none left, the whole library is asked")


@dataclass
class ScopeParts:
    box: gr.Dropdown          # the chosen papers; its value: their arXiv ids
    offer: gr.Button          # "Ask about … only": shown while the question holds ids not chosen
    offered: gr.State         # the ids the offer would add
    note: gr.HTML             # a scope that is full; an upload's status
    upload: gr.UploadButton | None = None     # "Ask about your own PDF" (upload_layout), placed under the question


def layout() -> ScopeParts:
    box = gr.Dropdown(choices=[], value=[], multiselect=True, max_choices=MAX_PAPERS, label=LABEL,
                      elem_id="chat-scope", visible=False, interactive=True)
    offer = gr.Button(visible=False, size="sm", elem_id="chat-scope-offer")
    return ScopeParts(box, offer, gr.State([]), gr.HTML(elem_id="chat-scope-note"))


def chosen(value) -> list[str]:
    """The box's value as ids (Gradio gives a list of the chosen values; a lone string from an API client)."""
    if isinstance(value, str):
        value = [value]
    return [item for item in value or [] if isinstance(item, str) and item.strip()] if isinstance(value, list) else []


def upload_layout() -> gr.UploadButton:
    """The small button that uploads a PDF to ask about (no empty file box on the page)."""
    return gr.UploadButton("Ask about your own PDF", file_types=[".pdf"], file_count="single", type="filepath",
                           size="sm", variant="secondary", elem_id="chat-upload")


def _visitor(request: gr.Request | None) -> str:
    """The visitor a scope's documents are looked up for ("" when not known: a document then shows by its id)."""
    try:
        return current_user(request)
    except (UserError, SignInError):
        return ""


def box_update(services: Services, ids: list[str], user: str = "") -> dict:
    return gr.update(choices=scope_choices(services, ids, user), value=ids, visible=bool(ids))


def note_html(note: str) -> str:
    return f'<span class="chat-notice">{escape(note)}</span>' if note else ""


def add_view(services: Services, paper_id, scope, request: gr.Request | None = None) -> tuple:
    """A card's "Ask about this paper" (or a document's "Ask about this document"): it joins the scope. → (box,
    note)."""
    if not isinstance(paper_id, str) or not paper_id.strip():
        return gr.update(), ""
    ids, note = with_paper(chosen(scope), [paper_id.strip()])
    return box_update(services, ids, _visitor(request)), note_html(note)


def upload_view(services: Services, path, scope, request: gr.Request | None) -> tuple:
    """"Ask about your own PDF": the file read into a private document of the visitor (features.documents.upload),
    which joins the scope; or the sentence saying why it was refused. → (box, note)."""
    if not isinstance(path, str) or not path:
        return gr.update(), ""
    try:
        user = user_within_rate(services, request, "importing")
        file = Path(path)
        size = file.stat().st_size
        if size > documents.MAX_PDF_BYTES:
            return gr.update(), note_html(f"Not kept: the file is {size / 2 ** 20:.1f} MiB; a document may be at "
                                          f"most {documents.MAX_PDF_BYTES // 2 ** 20} MiB.")
        done = documents.upload(services, user, file.read_bytes(), file.name)
    except (UserError, SignInError, OSError) as error:
        return gr.update(), note_html("The file could not be read." if isinstance(error, OSError)
                                      else str(getattr(error, "message", "") or error))
    if done.document is None:
        return gr.update(), note_html(done.message)
    ids, note = with_paper(chosen(scope), [done.document.item_id])
    return box_update(services, ids, user), note_html(" ".join(part for part in (done.message, note) if part))


@dataclass
class AskTarget:
    """Where an "Ask about this paper" goes: the Ask box's question and scope, the Chat tab's sub-tabs, and the page's
    tabs (ui.main sets them once the page is built)."""
    question: gr.Textbox
    scope: ScopeParts
    chat_tabs: gr.Tabs | None = None
    tabs: gr.Tabs | None = None


ASK_TAB, CHAT_TAB = "chat-ask-tab", "chat"       # the ids of the Ask sub-tab and of the Chat tab


def ask_about_view(services: Services, papers, scope, user: str = "") -> tuple:
    """A card's "Ask about this paper" (one id) or an answer's "Ask about these" (several): they join the scope and
    the page goes to the Ask box; the question is left as typed. → (box, note, page tabs, Chat's sub-tabs)."""
    wanted = chosen(papers)
    if not wanted:
        return gr.update(), note_html("Choose a paper first."), gr.Tabs(), gr.Tabs()
    ids, note = with_paper(chosen(scope), wanted)
    return box_update(services, ids, user), note_html(note), gr.Tabs(selected=CHAT_TAB), gr.Tabs(selected=ASK_TAB)


def connect(services: Services, button: gr.Button, papers: list, target: AskTarget, pick=None) -> None:
    """`button` adds the papers `pick(*inputs)` gives (default: the first input's value, one id or several) to the
    scope of `target`, and goes there."""
    tabs = [(n, t) for n, t in ((2, target.tabs), (3, target.chat_tabs)) if t is not None]

    def ask_about(request: gr.Request, *values):     # Gradio gives the request to a leading parameter only
        *inputs, scope = values
        shown = ask_about_view(services, pick(*inputs) if pick else inputs[0], scope, _visitor(request))
        return (*shown[:2], *(shown[n] for n, _ in tabs))

    button.click(ask_about, [*papers, target.scope.box], [target.scope.box, target.scope.note, *(t for _, t in tabs)])


def offer_view(services: Services, question, scope) -> tuple:
    """While the question holds arXiv ids or links not in the scope: the button that makes them the scope.
    → (offer button, offered ids)."""
    ids = [pid for pid in ids_in(question if isinstance(question, str) else "") if pid not in chosen(scope)]
    if not ids:
        return gr.update(visible=False), []
    labels = [label.removeprefix("About: ") for label, _ in scope_choices(services, ids[:1])]
    text = (f"Ask about this paper only: {labels[0]}" if len(ids) == 1
            else f"Ask about these {len(ids)} papers only: {', '.join(ids)}")
    return gr.update(value=text, visible=True), ids


def take_offer_view(services: Services, offered, scope, request: gr.Request | None = None) -> tuple:
    """The offer taken: its ids join the scope. → (box, offer button, offered ids, note)."""
    ids, note = with_paper(chosen(scope), chosen(offered))
    return box_update(services, ids, _visitor(request)), gr.update(visible=False), [], note_html(note)


def reopened_view(services: Services, turn_id: str | None, user: str, scope) -> dict:
    """A past turn reopened from the history: a turn asked about chosen papers brings its scope back to the Ask box,
    so a follow-up typed under it is asked of them again; another leaves the box as it is."""
    view = chat_for(services).view(turn_id, user) if isinstance(turn_id, str) and turn_id else None
    if view is None or not view.scope:
        return gr.update()
    return box_update(services, list(view.scope), user) if list(view.scope) != chosen(scope) else gr.update()


def shown_view(scope) -> dict:
    """The box hides once its last paper is removed (× on each)."""
    return gr.update(visible=bool(chosen(scope)))


def wire_reopened(services: Services, parts: ScopeParts, turn_state, reopened) -> None:
    """After a past turn is reopened: its scope back in the box (`reopened_view`)."""
    def restore(turn_id: str | None, scope, request: gr.Request):
        return reopened_view(services, turn_id, current_user(request), scope)

    reopened.then(restore, [turn_state, parts.box], [parts.box], show_progress="hidden")


def wire(services: Services, parts: ScopeParts, question: gr.Textbox) -> None:
    def offer(text, scope):
        return offer_view(services, text, scope)

    def take(offered, scope, request: gr.Request):
        return take_offer_view(services, offered, scope, request)

    def upload(path, scope, request: gr.Request):
        return upload_view(services, path, scope, request)

    question.change(offer, [question, parts.box], [parts.offer, parts.offered], show_progress="hidden",
                   trigger_mode="always_last")
    parts.offer.click(take, [parts.offered, parts.box], [parts.box, parts.offer, parts.offered, parts.note])
    parts.box.input(shown_view, [parts.box], [parts.box], show_progress="hidden")
    if parts.upload is not None:
        parts.upload.upload(upload, [parts.upload, parts.box], [parts.box, parts.note], concurrency_limit=1,
                            concurrency_id="document-upload")
