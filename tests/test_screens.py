"""The screens a newcomer's hour tripped on (issue #38), checked below the browser: what each view returns and how
the page is wired. Real stores in a temporary data dir."""

from __future__ import annotations

import pytest

from copilot.services import Services
from tests.conftest import make_settings


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from copilot.ui.main import build_ui

    services = Services(make_settings(tmp_path_factory.mktemp("screens") / "data"))
    return build_ui(services)


def _select_outputs(page, tab_id: str) -> set[str]:
    """elem_ids of what the select event of the tab with `id` tab_id refreshes."""
    import gradio as gr

    tab = next(b for b in page.blocks.values() if isinstance(b, gr.Tab) and b.id == tab_id)
    outputs = set()
    for fn in page.fns.values():
        if (tab._id, "select") in [tuple(t) for t in fn.targets]:
            outputs |= {o.elem_id for o in fn.outputs}
    return outputs


@pytest.mark.parametrize("tab_id", ["chat-memory-tab", "chat-stats-tab", "chat"])
def test_memory_and_statistics_are_read_again_when_they_come_into_view(page, tab_id):
    """Issue #38: both were read once per page load (7 thoughts listed while the store held 18)."""
    assert {"chat-memory-list", "chat-stats"} <= _select_outputs(page, tab_id)


def _thought(sources, roots):
    return {"id": "T1", "created_at": 0.0, "level": 0.0, "origin": "chat", "text": "t", "question": "q",
            "sources": [{"id": i, "kind": k, "title": ""} for i, k in sources],
            "root_papers": [{"id": i, "title": ""} for i in roots]}


def test_a_thought_card_shows_root_papers_only_when_they_differ():
    from copilot.ui.chat.memory import memory_html

    from_papers = memory_html([_thought([("2401.00001", "paper"), ("2401.00002", "paper")],
                                        ["2401.00002", "2401.00001"])])
    assert "Direct sources" in from_papers and "Root papers" not in from_papers
    from_thoughts = memory_html([_thought([("T0", "thought"), ("2401.00001", "paper")],
                                          ["2401.00001", "2401.00009"])])
    assert "Root papers" in from_thoughts and "2401.00009" in from_thoughts


def test_the_memory_page_names_every_source_of_thoughts():
    from copilot.features.memory import THOUGHT_SOURCES

    for origin in ("vote", "do not vote", "Deep", "Trends"):
        assert origin in THOUGHT_SOURCES


def _block(page, elem_id: str):
    return next(b for b in page.blocks.values() if getattr(b, "elem_id", None) == elem_id)


def test_related_shows_no_column_that_is_all_dashes_and_no_unused_control(page):
    from copilot.ui.related import results_html

    rows = [{"id": f"2501.0000{n}", "title": "t", "authors": [], "date": "2025-01-01", "score": 0.1,
             "ranks": {"abstract": n, "title": n + 1}} for n in (1, 2)]
    html = results_html(rows)
    assert html.count("<th>") == 4 + 2 and "–" not in html
    # the default ranking on the tiny model writes no aspect descriptions: how the LLM would write them is not asked
    assert _block(page, "related-mode").visible is False

