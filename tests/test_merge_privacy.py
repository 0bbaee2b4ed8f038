"""The merge test weighs only thoughts the writing user could retrieve (issue #30), with given vectors over real
SQLite and Chroma (no model): another user's private thought never makes a thought redundant; one's own, a shared
one or a paper does. The same through the real embedder: tests/test_users.py."""

from __future__ import annotations

import numpy as np

from copilot.methods.thought_retriever import ThoughtMemory


def unit(seed: int) -> np.ndarray:
    values = np.random.default_rng(seed).normal(size=8).astype(np.float32)
    return values / np.linalg.norm(values)


def test_two_users_with_private_thoughts(services):
    memory = ThoughtMemory(services.db, services.store, embedder=None, private=True)
    same = unit(1)
    bobs = memory.add("Bob's private note on retrieval.", [], origin="test", user="bob", embedding=same)
    alices, merge = memory.add_checked("Alice's note on retrieval.", [], origin="test", user="alice", embedding=same)
    assert bobs and alices and merge.nearest_id is None and not merge.redundant        # nothing she can see
    again, merge = memory.add_checked("Alice again.", [], origin="test", user="alice", embedding=same)
    assert again is None and merge.redundant and merge.nearest_id == alices
    bob_again, merge = memory.add_checked("Bob again.", [], origin="test", user="bob", embedding=same)
    assert bob_again is None and merge.nearest_id == bobs

    shared = ThoughtMemory(services.db, services.store, embedder=None, private=False)
    carols = shared.add("Carol's shared note.", [], origin="test", user="carol", embedding=unit(2))
    from_shared, merge = memory.add_checked("Alice on Carol's point.", [], origin="test", user="alice",
                                            embedding=unit(2))
    assert from_shared is None and merge.nearest_id == carols and merge.similarity >= 0.85
