"""The Library tab's "Your documents" (issue #57 item 3): the PDFs the visitor uploaded to ask about (the Ask tab's
"Ask about your own PDF", or `fulltext import FILE`), theirs alone: each can be asked about (it joins the Ask box's
scope) or deleted with its sentences and vectors. Callbacks parse, call copilot.features.documents, and format."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import gradio as gr

from copilot.errors import UserError
from copilot.features import documents
from copilot.services import Services
from copilot.ui.chat import scope as scope_ui
from copilot.ui.common import SignInError, current_user, escape

EMPTY = ("No documents of yours. Upload a PDF with \u201cAsk about your own PDF\u201d under the question on the Chat "
         "tab: it is read here, kept for you alone, and can be deleted here.")


@dataclass
class DocumentsPart:
    chosen: gr.Dropdown
    ask: gr.Button
    delete: gr.Button
    listing: gr.HTML
    note: gr.HTML


def _row(document: documents.Document) -> str:
    when = datetime.fromtimestamp(document.uploaded_at, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f'<li class="doc-row"><b>{escape(document.title)}</b> <code>{escape(document.item_id)}</code> \u00b7 '
            f"{escape(document.file_name)} \u00b7 {document.pages} pages, {document.sentences} sentences \u00b7 "
            f"uploaded {when}</li>")


def list_view(services: Services, request: gr.Request | None, note: str = "") -> tuple:
    """The visitor's documents. → (listing, chosen, ask, delete, note)."""
    try:
        found = documents.documents_of(services, current_user(request))
    except (UserError, SignInError) as error:      # a Space's visitor who has not signed in has no documents
        found, note = [], note or str(getattr(error, "message", "") or error)
    listing = (f'<ul class="doc-list">{"".join(_row(d) for d in found)}</ul>' if found
               else f'<p class="doc-empty">{escape(EMPTY)}</p>')
    choices = [(f"{d.title[:80]} ({d.item_id})", d.item_id) for d in found]
    value = choices[0][1] if choices else None
    return (listing, gr.update(choices=choices, value=value, visible=bool(found)), gr.update(visible=bool(found)),
            gr.update(visible=bool(found)), f'<span class="chat-notice">{escape(note)}</span>' if note else "")


def delete_view(services: Services, item_id, request: gr.Request | None) -> tuple:
    """Delete the chosen document (the visitor's only) with its sentences and vectors. → list_view's outputs."""
    if not isinstance(item_id, str) or not item_id:
        return list_view(services, request)
    try:
        said = documents.delete(services, current_user(request), item_id)
    except UserError as error:
        said = str(error)
    return list_view(services, request, said)


def build(services: Services) -> DocumentsPart:
    with gr.Accordion("Your documents", open=True, elem_id="library-documents"):
        listing = gr.HTML(elem_id="doc-listing")
        with gr.Row():
            chosen = gr.Dropdown(label="Document", choices=[], value=None, visible=False, elem_id="doc-chosen",
                                 scale=3)
            ask = gr.Button("Ask about this document", size="sm", visible=False, elem_id="doc-ask", scale=1)
            delete = gr.Button("Delete", size="sm", variant="stop", visible=False, elem_id="doc-delete", scale=1)
        refresh = gr.Button("Refresh the list", size="sm", elem_id="doc-refresh")
        note = gr.HTML(elem_id="doc-note")
    part = DocumentsPart(chosen, ask, delete, listing, note)
    outputs = [listing, chosen, ask, delete, note]

    def show(request: gr.Request):
        return list_view(services, request)

    def remove(item_id, request: gr.Request):
        return delete_view(services, item_id, request)

    refresh.click(show, None, outputs)
    delete.click(remove, [chosen], outputs)
    return part


def connect(services: Services, part: DocumentsPart, library_tab: gr.Tab, target: scope_ui.AskTarget) -> None:
    """"Ask about this document" adds it to the Ask box's scope and goes there, the question left as typed (as a
    paper card's does: ui.chat.scope.connect); the list is made each time the Library tab is opened (it is the
    visitor's own)."""
    def show(request: gr.Request):
        return list_view(services, request)

    scope_ui.connect(services, part.ask, [part.chosen], target)
    library_tab.select(show, None, [part.listing, part.chosen, part.ask, part.delete, part.note])
