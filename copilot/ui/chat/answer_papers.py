"""A Chat answer's papers as one compact control under the answers (issue #57 item 2): once the sides are shown (one
answer, or after the vote) the papers of the answers' rows are listed; choosing one or several (up to
features.scope.MAX_PAPERS) and "Ask about these" makes them the Ask box's scope, the question left as typed. Before
the vote it stays hidden: which papers an answer holds would tell the sides apart."""

from __future__ import annotations

import gradio as gr

from copilot.features.chat import chat_for
from copilot.features.chat_view import TurnView
from copilot.features.scope import MAX_PAPERS
from copilot.services import Services
from copilot.ui.chat import scope as scope_ui
from copilot.ui.common import current_user

LABEL = f"Ask about papers of this answer (up to {MAX_PAPERS}; they join the papers the next question is about)"


def layout() -> tuple[gr.Row, gr.Dropdown, gr.Button]:
    with gr.Row(visible=False, elem_id="chat-answer-papers-row") as row:
        papers = gr.Dropdown(choices=[], value=[], multiselect=True, max_choices=MAX_PAPERS, label=LABEL,
                             elem_id="chat-answer-papers", scale=4)
        button = gr.Button("Ask about these", size="sm", elem_id="chat-ask-these", scale=1)
    return row, papers, button


def answer_choices(view: TurnView) -> list[tuple[str, str]]:
    """(label, arXiv id) of each paper the shown answers quote, in the order shown, each once: "A2 · title (id)"."""
    found: dict[str, str] = {}
    for answer in view.answers:
        side = answer.label if len(view.answers) > 1 else ""
        rows = [(row.label, row.title, row.paper_id) for row in answer.table.rows] if answer.table else [
            (str(n), source.title, source.id) for n, source in enumerate(answer.sources, start=1)
            if source.kind == "paper"]
        for label, title, paper_id in rows:
            found.setdefault(paper_id, f"{side}{label} · {' '.join(title.split())[:80]} ({paper_id})")
    return [(label, paper_id) for paper_id, label in found.items()]


def shown_choices(view: TurnView | None) -> list[tuple[str, str]]:
    """The papers the control lists: none before the sides are shown (a comparison not voted on) or while the turn is
    being answered."""
    return answer_choices(view) if view is not None and view.revealed and view.done else []


def papers_view(services: Services, turn_id: str | None, request: gr.Request | None) -> tuple:
    """→ (row, papers): shown for this user's turn once its sides are shown, listing its answers' papers."""
    choices = shown_choices(chat_for(services).view(turn_id, current_user(request)) if turn_id else None)
    return gr.update(visible=bool(choices)), gr.update(choices=choices, value=[])


def wire(services: Services, parts: tuple, turn_state, target: scope_ui.AskTarget, after: list) -> None:
    """The control is filled after each of `after` (a turn answered, a vote, a turn reopened) and emptied when
    another turn is shown."""
    row, papers, button = parts

    def answer_papers(turn_id: str | None, request: gr.Request):
        return papers_view(services, turn_id, request)

    for event in after:
        event.then(answer_papers, [turn_state], [row, papers], show_progress="hidden")
    turn_state.change(lambda _: (gr.update(visible=False), gr.update(choices=[], value=[])), [turn_state],
                      [row, papers], show_progress="hidden")
    scope_ui.connect(services, button, [papers], target)
