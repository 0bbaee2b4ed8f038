"""A scoped turn in the Chat's history (issues #57 item 2, #59 item 8), integration tier: the real embedder, stores
and Chat over real corpus papers.

A question about chosen papers is one answer and makes no thought (none queued, none swept, none kept by a
judgement); its scope is stored with the turn and shown in History; a follow-up typed under a scope keeps it and is
asked as typed. A follow-up that filters the previous answer ("And which of them need no fine-tuning?") is asked of
that answer's papers and says which of them state the property, quoting, and which do not.
"""

from __future__ import annotations

import json
import shutil

import pytest

from copilot.features.chat import Chat
from copilot.features.chat_votes import ChatError
from copilot.features.library import ingestor
from copilot.features.scope import STATES, STATES_NOT
from copilot.methods import filters
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row
from copilot.ui.chat.render import recent_html, reopened_outputs
from tests.conftest import make_settings
from tests.helpers import PAPERS_JSONL

DISTRACTORS = 150
ECD = "2504.12137"            # "does not require additional LVLM training": states it needs no fine-tuning
QUESTION = "How do methods mitigate object hallucination in large vision-language models?"
FILTER = "And which of them need no fine-tuning?"


def _hallucination_rows(rows: list[dict]) -> list[dict]:
    return [row for row in rows if "hallucinat" in (row["title"] + row["summary"]).lower()]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The corpus's first DISTRACTORS papers and its papers on hallucination among the first 2,000, embedded once."""
    data_dir = tmp_path_factory.mktemp("scope-turns")
    with PAPERS_JSONL.open(encoding="utf-8") as lines:
        rows = [json.loads(next(lines)) for _ in range(2000)]
    chosen = {row["id"]: row for row in rows[:DISTRACTORS] + _hallucination_rows(rows)}
    services = Services(make_settings(data_dir))
    ingestor(services).run("test scope turns", [paper_from_row(row) for row in chosen.values()])
    return data_dir


def chat_over(library, tmp_path) -> Chat:
    data_dir = tmp_path / "data"
    shutil.copytree(library, data_dir)
    return Chat(Services(make_settings(data_dir, fulltext_reading=False)))


def test_a_scoped_turn_makes_no_thought_and_keeps_its_scope_in_the_history(library, tmp_path):
    chat = chat_over(library, tmp_path)
    record = chat.ask(QUESTION, "ann", papers=[ECD])          # waits for any thought job the turn queued
    turn_id = record["turn_id"]
    assert record["scope"] == [ECD] and record["comparison_state"] == "same_items"
    assert chat.thought_jobs(turn_id) == [], "a question about chosen papers queues no thought"
    assert chat.log.turn(turn_id).scope == (ECD,)
    chat.ask("What do vision-language models hallucinate?", "ann")      # the next turn sweeps nothing of it
    chat.wait_for_all(120)
    assert chat.thought_jobs(turn_id) == []
    with pytest.raises(ChatError, match="chosen papers"):
        chat.judge(turn_id, "keep", "ann")
    assert chat.thought_jobs(turn_id) == []
    view = chat.view(turn_id, "ann")
    assert view is not None and view.scope == (ECD,)
    notice, *_ = reopened_outputs(view)
    assert f"Asked about {ECD} only" in notice
    history = recent_html(chat.recent_turns("ann"))
    assert f"Asked about {ECD} only" in history


def test_a_follow_up_under_a_scope_keeps_it_and_is_asked_as_typed(library, tmp_path):
    chat = chat_over(library, tmp_path)
    first = chat.prepare(QUESTION, "ann", papers=[ECD])
    for _ in chat.stream(first):
        pass
    follow_up = "What datasets did they evaluate it on?"     # read as a follow-up without a scope
    unscoped = chat.prepare(follow_up, "ann", previous_turn=first.id)
    assert unscoped.asked == follow_up and unscoped.question != follow_up
    turn = chat.prepare(follow_up, "ann", previous_turn=first.id, papers=[ECD])
    assert turn.scope == (ECD,) and turn.question == follow_up and turn.asked == ""
    assert [item.id for item in turn.answers[0].sources] == [ECD]


def test_a_follow_up_filtering_the_previous_answer_says_which_of_its_papers_state_it(library, tmp_path):
    chat = chat_over(library, tmp_path)
    first = chat.prepare(QUESTION, "ann")
    for _ in chat.stream(first):
        pass
    shown = chat.view(first.id, "ann").shown_answer()
    earlier = shown.table.paper_ids
    assert ECD in earlier and len(earlier) >= 3, "the library's answer holds the contrastive decoding paper"

    turn = chat.prepare(FILTER, "ann", previous_turn=first.id)
    assert turn.scope == tuple(earlier), "asked of the previous answer's papers, all of them"
    assert turn.question == FILTER and turn.asked == "", "asked as typed, not rewritten"
    assert "need no fine-tuning" in turn.notice and "previous answer" in turn.notice
    assert turn.notice.count("Asked about") == 1 and "only. One answer" in turn.notice, "the papers named once"
    for _ in chat.stream(turn):
        pass
    table = turn.answers[0].table
    assert table is not None and set(table.paper_ids) <= set(earlier)
    wanted = filters.filter_of(FILTER)
    groups = {row.paper_id: row.group for row in table.rows}
    assert groups[ECD] == STATES + "need no fine-tuning"
    assert STATES_NOT in groups.values(), "the papers that do not state it are said so"
    stating = [row for row in table.rows if row.group.startswith(STATES)]
    assert table.rows[:len(stating)] == tuple(stating), "those that state it come first"
    for row in stating:
        assert any(filters.states(wanted, quote.text) for quote in row.quotes)
    ecd = next(row for row in table.rows if row.paper_id == ECD)
    assert any("does not require additional LVLM training" in quote.text for quote in ecd.quotes)
    assert "states it: need no fine-tuning" in turn.answers[0].text
    assert chat.thought_jobs(turn.id) == [], "a filtering follow-up is one answer from those papers"
