"""`doctor`: where SQLite and Chroma disagree about thoughts, each kind of mismatch made by hand in real stores,
reported, then repaired so that retrieval and the Memory list agree again."""

from __future__ import annotations

import numpy as np

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
