"""`doctor`: where SQLite and Chroma disagree about thoughts, each kind of mismatch made by hand in real stores,
reported, then repaired so that retrieval and the Memory list agree again."""

from __future__ import annotations

import numpy as np
import pytest

from copilot.features.chat import chat_for
from copilot.features.memory import doctor
from tests.conftest import import_papers

TEXTS = {
    "live": "Retrieval-augmented models cite the passages they read before they answer a question.",
    "lost": "Sparse attention lets transformers read long scientific papers with far less memory.",
    "retracted": "Instruction tuning on small data sets makes tiny models follow prompts more reliably.",
}


def test_doctor_reports_then_repairs_each_kind_of_mismatch(services):
    paper = import_papers(services, 3)[0].id
    memory = chat_for(services).memory
    ids = {name: memory.add(text, [(paper, "paper")], origin="test", check_redundant=False)
           for name, text in TEXTS.items()}
    services.store.thoughts.delete(ids=[ids["lost"]])                         # live row, vector lost
    services.db.execute("UPDATE thoughts SET retracted_at = 1 WHERE id = ?", (ids["retracted"],))  # vector left
    services.store.thoughts.upsert(ids=["Torphan0000"], embeddings=np.ones((1, 384), dtype=np.float32),
                                   documents=["written to Chroma, killed before its row"],
                                   metadatas=[{"origin": "chat", "user": "local"}])
    services.db.execute("INSERT INTO thought_edges (thought_id, source_id, source_kind, position)"
                        " VALUES (?, '2999.99999', 'paper', 1)", (ids["live"],))

    report = doctor(services)
    assert report["thoughts"] == {"rows": 3, "live": 2, "hidden": 1, "vectors": 3,
                                  "orphan_vectors": ["Torphan0000"], "hidden_with_vector": [ids["retracted"]],
                                  "missing_vectors": [ids["lost"]], "mismatches": 3}
    assert report["papers"] == {"stored": 3, "sources_of_thoughts": 2, "missing_sources": ["2999.99999"]}
    assert report["mismatches"] == 3 and "after_repair" not in report

    repaired = doctor(services, repair=True)
    assert repaired["after_repair"]["mismatches"] == 0 and repaired["after_repair"]["thoughts"]["vectors"] == 2
    assert sorted(services.store.thoughts.get(include=[])["ids"]) == sorted([ids["live"], ids["lost"]])
    hit = services.store.search("thought", services.embedder.embed_one(TEXTS["lost"]), 1)[0]
    assert hit.id == ids["lost"] and hit.metadata["sources"] == paper                # retrievable again
    assert {t["id"] for t in memory.list()} == {ids["live"], ids["lost"]}
    assert doctor(services)["mismatches"] == 0


def test_migration_keeps_one_current_job_per_turn_and_retracts_the_others(tmp_path):
    """Data from before issue #12: a turn with two thoughts (vote changed), a swept turn later voted both bad."""
    import sqlite3

    from copilot.store import migrations
    from copilot.store.db import Database

    path = tmp_path / "copilot.db"
    index = next(i for i, (name, _) in enumerate(migrations.MIGRATIONS) if name == "chat_0003_one_thought_per_turn")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, statements in migrations.MIGRATIONS[:index]:
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 0)", (name,))
    for turn in ("changed", "bad"):
        conn.execute("INSERT INTO chat_turns (id, user, created_at, question, question_chars, comparison, side_a,"
                     " backend, model, embedder) VALUES (?, 'u', 0, 'q', 1, 'yes', 'raw', 'b', 'm', 'e')", (turn,))
    for n, (turn, answer, thought) in enumerate([("changed", "raw", "T1"), ("changed", "thoughts", "T2"),
                                                 ("bad", "thoughts", "T3")]):
        conn.execute("INSERT INTO thoughts (id, text, origin, level, created_at) VALUES (?, 'x', 'chat', 2, 0)",
                     (thought,))
        conn.execute("INSERT INTO chat_thought_jobs (turn_id, answer, trigger, status, thought_id, queued_at)"
                     " VALUES (?, ?, 'vote', 'stored', ?, ?)", (turn, answer, thought, n))
    conn.execute("INSERT INTO chat_votes (turn_id, user, choice, label, voted_at) VALUES ('bad', 'u', 'bad', 'bad', 9)")
    conn.commit()
    conn.close()

    db = Database(path)
    jobs = db.query("SELECT turn_id, answer, status, superseded_at IS NULL AS current FROM chat_thought_jobs "
                    "ORDER BY id")
    assert [(j["turn_id"], j["answer"], j["status"], j["current"]) for j in jobs] == [
        ("changed", "raw", "retracted", 0), ("changed", "thoughts", "stored", 1), ("bad", "thoughts", "retracted", 0)]
    retracted = {r["id"] for r in db.query("SELECT id FROM thoughts WHERE retracted_at IS NOT NULL")}
    assert retracted == {"T1", "T3"}
    with pytest.raises(sqlite3.IntegrityError):   # one current job per turn, from now on
        db.execute("INSERT INTO chat_thought_jobs (turn_id, answer, trigger, queued_at) VALUES ('changed', 'raw',"
                   " 'vote', 1)")
