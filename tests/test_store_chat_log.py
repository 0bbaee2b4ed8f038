"""store/chat_log.py over a real SQLite file in a temporary data dir."""

from __future__ import annotations

import pytest

from copilot.records import Evidence
from copilot.store.chat_log import (
    RAW,
    THOUGHTS,
    AnswerOutcome,
    ComparisonVote,
    JobOutcome,
    NewTurn,
    SourceRecord,
    StoredTurn,
    ThoughtJob,
    TurnSummary,
)

PAPER = Evidence(id="2501.00001", kind="paper", title="A paper", text="A paper\n\nIts   abstract.", score=0.51234)
THOUGHT_ITEM = Evidence(id="Tabc", kind="thought", title="", text="A thought about papers.", score=0.4)


def new_turn(turn_id: str, user: str = "ann", comparison: str = "pending", created_at: float = 100.0) -> NewTurn:
    return NewTurn(id=turn_id, user=user, created_at=created_at, question="Why?", question_chars=4,
                   comparison=comparison, side_a=THOUGHTS, backend="local", model="m", embedder="e",
                   personalized=False, retrieval_s=0.25, raw_sources=(SourceRecord.of(PAPER),),
                   thoughts_sources=(SourceRecord.of(THOUGHT_ITEM), SourceRecord.of(PAPER)))


def test_source_record_keeps_a_preview_and_a_rounded_score():
    assert SourceRecord.of(PAPER).as_dict() == {"id": "2501.00001", "kind": "paper", "title": "A paper",
                                                "preview": "A paper Its abstract.", "score": 0.5123}
    assert SourceRecord.of(THOUGHT_ITEM).title == "A thought about papers."   # a thought's title is its words


def test_a_turn_is_stored_finished_and_read_back_typed(services):
    log = services.chat_log
    log.add_turn(new_turn("t1"))
    log.finish_turn("t1", "yes", raw=AnswerOutcome("Raw answer.", None, 1.5),
                    thoughts=AnswerOutcome("", "model failed", 0.5), at=200.0)
    turn = log.turn("t1")
    assert isinstance(turn, StoredTurn) and (turn.comparison, turn.finished_at) == ("yes", 200.0)
    assert turn.answer(RAW) == turn.raw and (turn.raw.text, turn.raw.seconds) == ("Raw answer.", 1.5)
    assert (turn.thoughts.error, turn.thoughts.sources[0].id) == ("model failed", "Tabc")
    assert log.turn("nope") is None
    with pytest.raises(ValueError):
        turn.answer("both")


def test_a_turn_with_one_answer_leaves_the_other_columns_empty(services):
    log = services.chat_log
    log.add_turn(new_turn("t1", comparison="same_items"))
    log.finish_turn("t1", "same_items", raw=AnswerOutcome("Only answer.", None, 1.0), thoughts=None)
    turn = log.turn("t1")
    assert turn.raw.text == "Only answer." and (turn.thoughts.text, turn.thoughts.seconds) == (None, None)


def test_votes_change_count_and_log_every_vote(services):
    log = services.chat_log
    log.add_turn(new_turn("t1", comparison="yes"))
    assert log.vote("t1") is None
    assert log.record_vote("t1", "ann", THOUGHTS, "A", at=1.0) is None
    assert log.record_vote("t1", "ann", THOUGHTS, "A", at=2.0) == THOUGHTS     # the same vote: no change
    assert log.record_vote("t1", "ann", RAW, "B", at=3.0) == THOUGHTS
    vote = log.vote("t1")
    assert (vote.choice, vote.label, vote.changes, vote.voted_at) == (RAW, "B", 1, 1.0)
    # the experiment reads the first vote, cast blind; the change decides the thought only (issue #41)
    assert (vote.first_choice, vote.blind) == (THOUGHTS, True)
    assert log.comparison_votes() == [ComparisonVote(choice=THOUGHTS, voted_at=1.0, user="ann", side_a=THOUGHTS)]
    assert services.db.query("SELECT choice, previous FROM chat_vote_log ORDER BY id") == [
        {"choice": THOUGHTS, "previous": None}, {"choice": THOUGHTS, "previous": THOUGHTS},
        {"choice": RAW, "previous": THOUGHTS}]
    assert log.turn_counts() == {"yes": 1}


def test_only_a_turn_without_a_vote_or_a_thought_job_is_forgotten(services):
    log = services.chat_log
    for turn_id in ("asked", "voted", "job"):
        log.add_turn(new_turn(turn_id, comparison="yes"))
    log.record_vote("voted", "ann", RAW, "A", at=1.0)
    log.queue_job("job", RAW, "no_comparison", "thought-1", "local")
    assert [log.forget_turn(turn_id) for turn_id in ("asked", "voted", "job")] == [True, False, False]
    assert log.turn("asked") is None and log.turn("voted") is not None and log.turn("job") is not None


def test_thought_jobs_queue_start_supersede_and_finish(services):
    log = services.chat_log
    log.add_turn(new_turn("t1", comparison="yes"))
    first = log.queue_job("t1", THOUGHTS, "vote", "Tplanned1", "123:abc", at=5.0)
    assert log.current_job("t1").id == first and [j.id for j in log.open_jobs()] == [first]
    started = log.start_job(first, "456:def", "Tother")
    assert isinstance(started, ThoughtJob)
    assert (started.status, started.runner, started.planned_thought_id) == ("running", "456:def", "Tplanned1")
    log.supersede_job(first, "retracted", at=6.0)
    assert log.current_job("t1") is None
    second = log.queue_job("t1", RAW, "vote", "Tplanned2", "123:abc")
    log.finish_job(second, JobOutcome("stored", "Tplanned2", 0.3, None, None))
    jobs = log.jobs_of("t1")
    assert [(j.id, j.status, j.superseded_at) for j in jobs] == [(first, "retracted", 6.0), (second, "stored", None)]
    assert jobs[1].as_dict()["thought_id"] == "Tplanned2" and log.job(999) is None
    assert [j.id for j in log.open_jobs()] == []


def test_recent_turns_and_unvoted_comparisons(services):
    log = services.chat_log
    log.add_turn(new_turn("old", user="bob", comparison="yes", created_at=1.0))
    log.add_turn(new_turn("mine", comparison="yes", created_at=50.0))
    log.add_turn(new_turn("voted", comparison="yes", created_at=60.0))
    log.record_vote("voted", "ann", "tie", "tie")
    assert sorted(log.unvoted_comparisons("ann", created_before=10.0)) == [("mine", "ann"), ("old", "bob")]
    assert log.unvoted_comparisons("carl", created_before=10.0) == [("old", "bob")]
    recent = log.recent_turns("ann")
    assert [r.id for r in recent] == ["voted", "mine"] and isinstance(recent[0], TurnSummary)
    assert (recent[0].choice, recent[0].label, recent[1].choice) == ("tie", "tie", None)
