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
    assert html.count("<th>") == 3 + 2 + 2 and "–" not in html
    main, _, scores = html.partition("<details")
    assert "0.1000" not in main and "rank" not in main and "0.1000" in scores      # scores only when opened (#59)
    # the default ranking on the tiny model writes no aspect descriptions: how the LLM would write them is not asked
    assert _block(page, "related-mode").visible is False


@pytest.fixture
def library_services(tmp_path):
    return Services(make_settings(tmp_path / "data"))


def _snapshot(tmp_path, count: int):
    import json

    from tests.conftest import read_rows
    from tests.helpers import PAPERS_JSONL

    path = tmp_path / "snapshot.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in read_rows(PAPERS_JSONL, 0, count)), encoding="utf-8")
    return path


def test_an_upload_is_imported_in_the_background_and_names_its_file(library_services, tmp_path):
    import time

    from copilot.features import library
    from copilot.ui.library import EMPTY_LIBRARY, empty_library_note, upload_html, upload_view

    assert empty_library_note(library_services)["visible"] is True and "Library" in EMPTY_LIBRARY
    bad = tmp_path / "notes.txt"
    bad.write_text("not a snapshot\n", encoding="utf-8")
    assert "notes.txt" in upload_view(library_services, str(bad), None)[0]
    shown, _ = upload_view(library_services, str(_snapshot(tmp_path, 40)), None)
    assert "snapshot.jsonl" in shown and "notes.txt" not in shown and "background" in shown
    job = library.latest_upload("local")
    deadline = time.monotonic() + 300
    while not job.done and time.monotonic() < deadline:
        time.sleep(0.5)
    assert job.done and job.error is None and job.counts.added == 40
    assert "40</b> new" in upload_html(job)
    assert library_services.runs.recent(1)[0].source == "upload:snapshot.jsonl"     # the user's file, not the copy
    assert empty_library_note(library_services)["visible"] is False
    assert not list((library_services.settings.data_dir / "uploads").iterdir())   # the kept copy is removed


def test_the_upload_limit_is_said_with_the_command_for_bigger_files(page):
    from copilot.ui.guard import MAX_UPLOAD_MB
    from copilot.ui.main import MAX_UPLOAD

    said = " ".join(str(getattr(b, "value", "")) for b in page.blocks.values())
    assert MAX_UPLOAD_MB >= 100 and MAX_UPLOAD == f"{MAX_UPLOAD_MB}mb"
    assert f"{MAX_UPLOAD_MB} MB" in said and "python -m copilot import FILE" in said


def test_the_cpu_instruction_sets_are_folded_away(library_services):
    from copilot.ui.library import status_markdown

    shown = status_markdown(library_services, None)
    assert "<details id='library-build'>" in shown
    main_page = shown.split("<details")[0]
    assert not any(name in main_page for name in ("AVX", "SSE3", "FMA", "F16C")), main_page
