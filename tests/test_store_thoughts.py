"""store/thoughts.py over a real SQLite file and embedded Chroma in a temporary data dir (no models)."""

from __future__ import annotations

import numpy as np
import pytest

from copilot.store.thoughts import PAPER, THOUGHT, ThoughtRow


def vector(seed: int) -> np.ndarray:
    values = np.random.default_rng(seed).normal(size=8).astype(np.float32)
    return values / np.linalg.norm(values)


def thought(thought_id: str, **fields) -> ThoughtRow:
    values = dict(text=f"Thought {thought_id} says something.", origin="test", question="Why?", user="ann",
                  level=2.0, created_at=float(len(thought_id)), private=False)
    values.update(fields)
    return ThoughtRow(id=thought_id, **values)


def test_add_writes_row_edges_and_vector_and_reads_them_back_typed(services):
    store = services.thoughts
    store.add(thought("T1"), [("2501.00001", PAPER), ("2501.00002", PAPER)], vector(1))
    store.add(thought("T2", level=2.5), [("T1", THOUGHT), ("2501.00003", PAPER)], vector(2))
    row = store.get("T2")
    assert isinstance(row, ThoughtRow) and (row.text, row.level, row.state) == ("Thought T2 says something.", 2.5,
                                                                                "live")
    assert store.sources("T2") == [("T1", THOUGHT), ("2501.00003", PAPER)]
    assert store.exists("T1") and not store.exists("T9") and store.level("T1") == 2.0 and store.level("T9") is None
    assert store.vector_ids() == {"T1", "T2"} and store.count_live() == 2
    assert store.source_papers() == ["2501.00001", "2501.00002", "2501.00003"]
    stored = services.store.thoughts.get(ids=["T2"], include=["metadatas", "documents"])
    assert stored["documents"] == ["Thought T2 says something."]
    assert stored["metadatas"][0]["sources"] == "T1 2501.00003" and stored["metadatas"][0]["private"] is False


def test_a_row_that_cannot_be_written_takes_its_vector_with_it(services):
    store = services.thoughts
    store.add(thought("T1"), [], vector(1))
    with pytest.raises(Exception, match="CHECK"):
        store.add(thought("T2"), [("2501.00001", "tweet")], vector(2))   # an edge kind the schema refuses
    assert not store.exists("T2") and store.vector_ids() == {"T1"}


def test_delete_and_retract_keep_row_and_lineage_and_leave_vector_removal_to_the_caller(services):
    store = services.thoughts
    for n in (1, 2, 3):
        store.add(thought(f"T{n}"), [("2501.00001", PAPER)], vector(n))
    assert store.mark_deleted("T1", at=10.0) and not store.mark_deleted("T1")
    assert store.mark_retracted(["T2", "T2", "T9"], at=11.0) == ["T2"]
    assert store.get("T1") is None and store.get("T1", include_hidden=True).state == "deleted"
    assert store.get("T2", include_hidden=True).state == "retracted"
    assert store.sources("T2") == [("2501.00001", PAPER)]
    liveness = store.liveness()
    assert (liveness.live, liveness.hidden) == ({"T3"}, {"T1", "T2"})
    assert store.vector_ids() == {"T1", "T2", "T3"}          # the caller drops them after its commit
    store.drop_vectors(["T1", "T2"])
    assert store.vector_ids() == {"T3"}


def test_retraction_joins_the_callers_transaction(services):
    store = services.thoughts
    store.add(thought("T1"), [], vector(1))
    with pytest.raises(RuntimeError):
        with services.db.transaction():
            assert store.mark_retracted(["T1"]) == ["T1"]
            raise RuntimeError("the caller's write failed")
    assert store.get("T1").state == "live"                    # rolled back with the caller


def test_listing_is_newest_first_filters_text_and_hides_others_private_thoughts(services):
    store = services.thoughts
    store.add(thought("T1", text="Sparse retrieval 100% works.", created_at=1.0), [], vector(1))
    store.add(thought("T2", text="Dense retrieval works.", created_at=2.0), [], vector(2))
    store.add(thought("T3", text="Private retrieval notes.", created_at=3.0, user="bob", private=True), [], vector(3))
    assert [t.id for t in store.list_live()] == ["T3", "T2", "T1"]
    assert [t.id for t in store.list_live(user="ann")] == ["T2", "T1"]
    assert [t.id for t in store.list_live(contains="100%")] == ["T1"]      # LIKE wildcards are taken literally
    assert [t.id for t in store.list_live(limit=1, offset=1)] == ["T2"]
    assert store.get("T3").visible_to("bob") and not store.get("T3").visible_to("ann")
    assert store.get("T3").visible_to(None)
