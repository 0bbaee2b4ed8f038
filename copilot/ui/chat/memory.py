"""The Memory sub-tab: the thoughts a user may see, searched by meaning or id, with direct and root sources; a user
deletes thoughts made from their own questions (copilot.features.memory)."""

from __future__ import annotations

import gradio as gr

from copilot.features.memory import THOUGHT_SOURCES, delete_thought, memory_view
from copilot.services import Services
from copilot.ui.chat.ask import on_page_load
from copilot.ui.chat.render import when
from copilot.ui.common import arxiv_link, current_user, escape


def memory_html(thoughts: list[dict]) -> str:
    if not thoughts:
        return "<p>No thoughts stored yet.</p>"
    cards = []
    for t in thoughts:
        direct = []
        for source in t["sources"]:
            if source["kind"] == "paper":
                direct.append(arxiv_link(source["id"], f"{source['id']} {source.get('title', '')}".strip()))
            else:
                direct.append(f'<a href="#thought-{escape(source["id"])}">thought {escape(source["id"])}</a>')
        roots = _roots_line(t)
        similarity = f" · similarity {t['similarity']:.2f}" if "similarity" in t else ""
        cards.append(
            f'<div class="chat-thought" id="thought-{escape(t["id"])}"><div class="chat-thought-meta">'
            f"<code>{escape(t['id'])}</code> · {escape(when(t['created_at']))} · {_made_from(t)} · "
            f"from {escape(t['origin'])}{similarity}</div>"
            f'<div class="chat-thought-text">{escape(t["text"])}</div>'
            f'<div class="chat-thought-question">Question: '
            f'{escape(t["question"]) or ("—" if t.get("own", True) else "<i>another user&#39;s</i>")}</div>'
            f'<div class="chat-thought-sources">Direct sources: {", ".join(direct) or "—"}</div>{roots}</div>')
    return "".join(cards)


def _made_from(thought: dict) -> str:
    """What a thought was made from, in words ("made from 3 papers", "made from 2 papers and 1 thought"), not its
    abstraction level as a number (issue #59: "level 2.00")."""
    papers = sum(1 for s in thought["sources"] if s["kind"] == "paper")
    thoughts = len(thought["sources"]) - papers
    parts = [f"{n} {word}{'s' if n != 1 else ''}" for n, word in ((papers, "paper"), (thoughts, "thought")) if n]
    return "made from " + " and ".join(parts) if parts else "made from no stored source"


def _roots_line(thought: dict) -> str:
    """The root papers, only when they differ from the direct paper sources (a thought made from papers alone has
    the same list twice, issue #38)."""
    direct = {s["id"] for s in thought["sources"] if s["kind"] == "paper"}
    if {p["id"] for p in thought["root_papers"]} == direct and all(s["kind"] == "paper" for s in thought["sources"]):
        return ""
    roots = ", ".join(arxiv_link(p["id"], f"{p['id']} {p['title']}".strip()) for p in thought["root_papers"])
    return f'<div class="chat-thought-roots">Root papers (through the thoughts it was made from): {roots or "—"}</div>'


def search_view(services: Services, query: str, request: gr.Request | None) -> str:
    return memory_html(memory_view(services, query, user=current_user(request)))


def delete_view(services: Services, thought_id: str, query: str, request: gr.Request | None) -> tuple[str, str]:
    user = current_user(request)
    deleted = delete_thought(services, thought_id, user)
    note = (f"Deleted {thought_id.strip()}." if deleted else
            f"No thought {thought_id.strip()!r} that you may delete: you can delete thoughts made from your own "
            "questions.")
    return f"<p>{escape(note)}</p>", memory_html(memory_view(services, query, user=user))


def build(services: Services):
    """The sub-tab; returns (refresh, its inputs, its outputs) for the tab's select events."""
    gr.Markdown(THOUGHT_SOURCES, elem_id="chat-memory-about")
    with gr.Row():
        query = gr.Textbox(label="Search thoughts (meaning) or a thought id", elem_id="chat-memory-query")
        search = gr.Button("Search", elem_id="chat-memory-search")
    with gr.Row():
        delete_id = gr.Textbox(label="Thought id to delete", elem_id="chat-memory-delete-id")
        delete_button = gr.Button("Delete thought", variant="stop", elem_id="chat-memory-delete")
    delete_status, listing = gr.HTML(), gr.HTML(elem_id="chat-memory-list")

    def search_memory(query: str, request: gr.Request):
        return search_view(services, query, request)

    def remove_thought(thought_id: str, query: str, request: gr.Request):
        return delete_view(services, thought_id, query, request)

    def first_memory(request: gr.Request):
        return search_view(services, "", request)

    search.click(search_memory, [query], [listing])
    query.submit(search_memory, [query], [listing])
    delete_button.click(remove_thought, [delete_id, query], [delete_status, listing])
    on_page_load(first_memory, [listing])
    return search_memory, [query], [listing]
