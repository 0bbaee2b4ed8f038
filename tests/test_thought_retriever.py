"""Exact tests of the Thought-Retriever method: hand-made vectors in the real Chroma store, a scripted LLM."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from copilot.methods.thought_retriever import ThoughtMemory, merge_check
from copilot.records import Paper

DIM = 384


def unit(*weights: float) -> np.ndarray:
    """A unit vector whose first coordinates are `weights` (the rest zero)."""
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(weights)] = weights
    return vector / np.linalg.norm(vector)


def paper(pid: str, title: str = "A paper") -> Paper:
    return Paper(id=pid, title=title, abstract=f"Abstract of {pid}.", authors=["A. Author"],
                 categories=["cs.CL"], published=date(2025, 1, 2))


@pytest.fixture
def memory(services):
    return ThoughtMemory(services.db, services.store, services.embedder, merge_threshold=0.85)


@pytest.fixture
def three_papers(services):
    services.store.upsert_papers([paper("2501.00001"), paper("2501.00002"), paper("2501.00003")],
                                 np.stack([unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)]))


def test_lineage_edges_root_sources_and_levels_through_two_levels(services, memory, three_papers):
    t1 = memory.add("Thought one.", [("2501.00001", "paper"), ("2501.00002", "paper")], origin="chat",
                    question="q1", embedding=unit(1, 1, 0, 3))
    t2 = memory.add("Thought two.", [(t1, "thought"), ("2501.00003", "paper")], origin="chat", question="q2",
                    embedding=unit(0, 0, 1, 0, 3))
    assert t1 and t2
    edges = services.db.query("SELECT thought_id, source_id, source_kind FROM thought_edges ORDER BY thought_id, position")
    assert sorted((e["thought_id"], e["source_id"], e["source_kind"]) for e in edges) == sorted([
        (t1, "2501.00001", "paper"), (t1, "2501.00002", "paper"), (t2, t1, "thought"), (t2, "2501.00003", "paper")])
    assert memory.root_sources(t2) == ["2501.00001", "2501.00002", "2501.00003"]
    assert memory.level("2501.00001") == 1.0
    assert memory.level(t1) == 2.0                 # 1 + mean(1, 1)
    assert memory.level(t2) == 2.5                 # 1 + mean(2, 1)
    t3 = memory.add("Thought three.", [(t2, "thought"), (t1, "thought")], origin="trends",
                    embedding=unit(0, 0, 0, 0, 0, 1))
    assert memory.level(t3) == pytest.approx(1 + (2.5 + 2.0) / 2)
    assert set(memory.root_sources(t3)) == {"2501.00001", "2501.00002", "2501.00003"}
    stored = services.store.thoughts.get(ids=[t2], include=["metadatas", "documents"])
    assert stored["documents"] == ["Thought two."]
    meta = stored["metadatas"][0]
    assert (meta["origin"], meta["question"], meta["level"], meta["user"]) == ("chat", "q2", 2.5, "local")
    assert meta["created"] > 0


def test_merge_threshold_on_hand_made_vectors(services, memory, three_papers):
    threshold = 0.85
    # cos(unit(1, x), e1) = 1/sqrt(1+x²): 0.86 is redundant with paper 1, 0.84 is not
    x_redundant = np.sqrt(1 / 0.86 ** 2 - 1)
    x_novel = np.sqrt(1 / 0.84 ** 2 - 1)
    check = merge_check(services.store, unit(1, 0, 0, x_redundant), threshold)
    assert check.redundant and check.nearest_id == "2501.00001" and check.similarity == pytest.approx(0.86, abs=1e-4)
    assert memory.add("Too close to a paper.", [("2501.00001", "paper")], origin="chat",
                      embedding=unit(1, 0, 0, x_redundant)) is None
    assert memory.count() == 0
    kept = memory.add("Novel enough.", [("2501.00001", "paper")], origin="chat", embedding=unit(1, 0, 0, x_novel))
    assert kept is not None
    # now a thought is the nearest item: redundancy against thoughts counts too
    near_thought = unit(1, 0, 0, x_novel, 0.05)
    assert merge_check(services.store, near_thought, threshold).nearest_id == kept
    assert memory.add("Same again.", [("2501.00002", "paper")], origin="chat", embedding=near_thought) is None
    # exactly at the threshold is redundant (cos ≥ ε)
    assert merge_check(services.store, unit(0, 1, 0), 1.0).redundant
    # check_redundant=False stores even a duplicate
    assert memory.add("Forced.", [("2501.00002", "paper")], origin="chat", embedding=unit(0, 1, 0),
                      check_redundant=False)


def test_delete_hides_thought_but_keeps_lineage(services, memory, three_papers):
    t1 = memory.add("Base thought.", [("2501.00001", "paper")], origin="chat", embedding=unit(1, 0, 0, 2))
    t2 = memory.add("Derived thought.", [(t1, "thought")], origin="chat", embedding=unit(0, 1, 0, 0, 2))
    assert memory.delete(t1) and not memory.delete(t1)
    assert memory.get(t1) is None
    assert services.store.count("thought") == 1
    assert memory.root_sources(t2) == ["2501.00001"]
    assert memory.level(t2) == 3.0
    assert [t["id"] for t in memory.list()] == [t2]
    assert memory.get(t2)["sources"] == [{"id": t1, "kind": "thought"}]


def test_list_filters_by_substring_and_rejects_bad_kinds(memory, three_papers):
    memory.add("About 100% of_cats.", [("2501.00001", "paper")], origin="chat", question="cats?",
               embedding=unit(1, 0, 0, 3))
    memory.add("About dogs.", [("2501.00002", "paper")], origin="chat", embedding=unit(0, 1, 0, 0, 3))
    assert [t["text"] for t in memory.list(contains="CATS")] == ["About 100% of_cats."]
    assert [t["text"] for t in memory.list(contains="100%")] == ["About 100% of_cats."]
    assert memory.list(contains="0%x") == []
    with pytest.raises(ValueError):
        memory.add("x", [("2501.00001", "book")], origin="chat", embedding=unit(0, 0, 1, 5))
