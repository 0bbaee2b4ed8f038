"""RAT (methods/rat.py) with a scripted LLM: call order, causality, empty or failed revisions keep the draft."""

from __future__ import annotations

import pytest

from copilot.llm import LLMError
from copilot.methods.rat import run_rat, split_steps
from copilot.records import Evidence
from copilot.store.db import Database
from tests.doubles import scripted_llm

DRAFT = "RAW-ONE alpha.\n\nRAW-TWO beta.\n\nRAW-THREE gamma."


def evidence(item_id: str, kind: str = "paper") -> Evidence:
    return Evidence(id=item_id, kind=kind, title=f"title {item_id}", text=f"text of {item_id}", score=0.5)


@pytest.fixture
def db(tmp_path):
    return Database(tmp_path / "copilot.db")


def recorder(events: list[str], name: str, reply: str):
    def answer(messages):
        events.append(name)
        return reply
    return answer


def test_call_order_is_draft_then_query_retrieve_revise_per_step(db):
    events: list[str] = []
    replies = [recorder(events, "draft", DRAFT)]
    for i in (1, 2, 3):
        revised = "\n\n".join(f"REVISED STEP {n} of the draft." for n in range(1, i + 1))
        replies += [recorder(events, f"query{i}", f"q{i}"), recorder(events, f"revise{i}", revised)]
    llm, backend = scripted_llm(db, replies)

    def retrieve(query):
        events.append(f"retrieve:{query}")
        return [evidence(f"2501.0000{query[-1]}")]

    result = run_rat(llm, "the task", retrieve, max_steps=3)

    assert events == ["draft", "query1", "retrieve:q1", "revise1", "query2", "retrieve:q2", "revise2",
                      "query3", "retrieve:q3", "revise3"]
    assert [c.messages[-1]["content"].split("##Instruction")[0].count("the task") for c in backend.calls] == [1] * 7
    assert result.raw_steps == ["RAW-ONE alpha.", "RAW-TWO beta.", "RAW-THREE gamma."]
    assert result.revised_steps == [f"REVISED STEP {n} of the draft." for n in (1, 2, 3)]
    assert [s.query for s in result.steps] == ["q1", "q2", "q3"]
    assert [s.retrieved_ids for s in result.steps] == [["2501.00001"], ["2501.00002"], ["2501.00003"]]
    # the revision prompt quotes what was retrieved for its own step
    assert '<source id="2501.00002">' in backend.calls[4].text


def test_each_step_sees_revised_earlier_steps_and_raw_current_step_only(db):
    replies = [DRAFT,
               "q1", "REV-ONE",
               "q2", "REV-ONE\n\nREV-TWO",
               "q3", "REV-ONE\n\nREV-TWO\n\nREV-THREE"]
    llm, backend = scripted_llm(db, replies)
    result = run_rat(llm, "task", lambda q: [evidence("2501.00001")], max_steps=3)

    prompts = [c.text for c in backend.calls[1:]]          # query_i and revise_i for i = 1..3
    for i in range(3):
        for prompt in prompts[2 * i: 2 * i + 2]:
            raw_now = ["RAW-ONE", "RAW-TWO", "RAW-THREE"][i]
            assert raw_now in prompt
            for later in ["RAW-ONE", "RAW-TWO", "RAW-THREE"][i + 1:]:
                assert later not in prompt, f"step {i + 1} saw the future step {later}"
            for earlier_raw in ["RAW-ONE", "RAW-TWO", "RAW-THREE"][:i]:
                assert earlier_raw not in prompt, f"step {i + 1} saw unrevised {earlier_raw}"
            for earlier_rev in ["REV-ONE", "REV-TWO"][:i]:
                assert earlier_rev in prompt
    assert result.steps[1].before == "REV-ONE\n\nRAW-TWO beta."
    assert result.steps[2].after == "REV-ONE\n\nREV-TWO\n\nREV-THREE"
    assert result.revised_steps == ["REV-ONE", "REV-TWO", "REV-THREE"]


def test_empty_revision_keeps_the_previous_draft(db):
    llm, _ = scripted_llm(db, [DRAFT, "q1", "REV-ONE", "q2", "   \n ", "q3", "REV-ONE\n\nRAW-TWO beta.\n\nREV-3"])
    result = run_rat(llm, "task", lambda q: [evidence("2501.00001")], max_steps=3)
    assert result.steps[1].kept and result.steps[1].after == result.steps[1].before == "REV-ONE\n\nRAW-TWO beta."
    assert result.steps[2].before == "REV-ONE\n\nRAW-TWO beta.\n\nRAW-THREE gamma."
    assert not result.steps[0].kept


def test_failed_revision_keeps_the_draft_and_records_the_error(db):
    llm, _ = scripted_llm(db, [DRAFT, "q1", LLMError("model crashed"), "q2", "ONE revised.\n\nTWO revised."])
    result = run_rat(llm, "task", lambda q: [evidence("2501.00001")], max_steps=2)
    assert result.steps[0].kept and result.steps[0].error == "model crashed"
    assert result.steps[0].after == "RAW-ONE alpha."
    assert result.text == "ONE revised.\n\nTWO revised."


def test_empty_query_falls_back_to_the_current_step_text(db):
    seen: list[str] = []
    llm, _ = scripted_llm(db, ["only step", "", "revised"])
    run_rat(llm, "task", lambda q: seen.append(q) or [], max_steps=3)
    assert seen == ["only step"]


def test_steps_are_capped_and_embedded_queries_skip_the_query_call(db):
    llm, backend = scripted_llm(db, [DRAFT, "r1 revised.", "r1 revised.\n\nr2 revised."])
    result = run_rat(llm, "task", lambda q: [evidence("x", "thought")], max_steps=2, llm_queries=False)
    assert len(backend.calls) == 3 and len(result.steps) == 2
    # ToQuery without a model: the raw step first, then the task, then the revised steps before it
    assert result.steps[0].query == "RAW-ONE alpha.\n\ntask"
    assert result.steps[1].query == "RAW-TWO beta.\nRAW-THREE gamma.\n\ntask\n\nr1 revised."   # step 3 joined, not lost
    assert [e.id for e in result.retrieved] == ["x"]


@pytest.mark.parametrize("text, steps", [
    ("a\n\nb\n\n\nc", ["a", "b", "c"]),
    ("1. first idea\n2. second idea", ["1. first idea", "2. second idea"]),
    ("Sure, here is the revised draft:\none\n\ntwo", ["one", "two"]),
    ("single paragraph", ["single paragraph"]),
    ("  \n ", []),
])
def test_split_steps(text, steps):
    assert split_steps(text) == steps


@pytest.mark.parametrize("text, cap, steps", [
    ("a\n\nb\n\nc\n\nd", 2, ["a", "b\nc\nd"]),                     # the rest joins the last step
    ("a\n\nb\n\nc", 3, ["a", "b", "c"]),
    ("1. one\n2. two\n3. three", 2, ["1. one", "2. two\n3. three"]),
    ("a\n\nb\n\nc", 1, ["a\nb\nc"]),
])
def test_split_steps_never_drops_text_beyond_the_cap(text, cap, steps):
    split = split_steps(text, cap)
    assert split == steps
    assert split_steps("\n\n".join(split)) == split                # the joined draft splits the same way again


def test_a_draft_longer_than_the_cap_keeps_every_paragraph(db):
    llm, _ = scripted_llm(db, [DRAFT, "q1", "", "q2", ""])        # empty revisions: the draft stays as written
    result = run_rat(llm, "task", lambda q: [evidence("2501.00001")], max_steps=2)
    assert result.raw_steps == ["RAW-ONE alpha.", "RAW-TWO beta.\nRAW-THREE gamma."]
    assert "RAW-THREE gamma." in result.text
