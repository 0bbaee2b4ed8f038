"""Graph of Records' records (issue #16), in SQLite: a scope's simulated questions with the answers the LLM wrote
to them, and the trained network of a scope, each keyed by scope and corpus version (a corpus update makes a new
key, so nothing older is reused). The feature builds the keys; the method serializes the weights."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from copilot.store.db import Database


@dataclass(frozen=True)
class SimulatedQuestion:
    question: str
    source_id: str                 # the paper it was written from


@dataclass(frozen=True)
class SimulatedResponse:
    id: str                        # "R<n>": a record of the graph only, never a thought
    question: str
    text: str
    sources: tuple[str, ...]       # the records it was made from


@dataclass(frozen=True)
class Simulation:
    questions: list[SimulatedQuestion]
    responses: list[SimulatedResponse]


@dataclass(frozen=True)
class StoredNetwork:
    weights: bytes
    meta: dict
    created_at: float


class GoRCache:
    def __init__(self, db: Database) -> None:
        self.db = db

    # --- simulated questions and responses
    def simulation(self, scope: str, corpus_version: str, model: str) -> Simulation | None:
        row = self.db.query_one("SELECT questions, responses FROM gor_simulations WHERE scope = ? AND"
                                " corpus_version = ? AND model = ?", (scope, corpus_version, model))
        if row is None:
            return None
        questions = [SimulatedQuestion(**q) for q in json.loads(row["questions"])]
        responses = [SimulatedResponse(id=r["id"], question=r["question"], text=r["text"],
                                       sources=tuple(r["sources"])) for r in json.loads(row["responses"])]
        return Simulation(questions, responses)

    def put_simulation(self, scope: str, corpus_version: str, model: str, simulation: Simulation) -> None:
        self.db.execute("INSERT OR REPLACE INTO gor_simulations (scope, corpus_version, model, questions, responses,"
                        " created_at) VALUES (?,?,?,?,?,?)",
                        (scope, corpus_version, model, json.dumps([asdict(q) for q in simulation.questions]),
                         json.dumps([asdict(r) for r in simulation.responses]), time.time()))

    # --- trained networks
    def network(self, scope: str, corpus_version: str, variant: str) -> StoredNetwork | None:
        row = self.db.query_one("SELECT weights, meta, created_at FROM gor_models WHERE scope = ? AND"
                                " corpus_version = ? AND variant = ?", (scope, corpus_version, variant))
        if row is None:
            return None
        return StoredNetwork(bytes(row["weights"]), json.loads(row["meta"]), float(row["created_at"]))

    def put_network(self, scope: str, corpus_version: str, variant: str, weights: bytes, meta: dict) -> None:
        """One statement: the network is there whole, or not at all."""
        self.db.execute("INSERT OR REPLACE INTO gor_models (scope, corpus_version, variant, weights, meta, created_at)"
                        " VALUES (?,?,?,?,?,?)", (scope, corpus_version, variant, weights, json.dumps(meta),
                                                  time.time()))

    def drop_stale(self, scope: str, corpus_version: str) -> int:
        """Remove a scope's networks and simulations of other corpus versions; returns the rows removed."""
        with self.db.transaction() as tx:
            removed = tx.execute("DELETE FROM gor_models WHERE scope = ? AND corpus_version != ?",
                                 (scope, corpus_version)).rowcount
            removed += tx.execute("DELETE FROM gor_simulations WHERE scope = ? AND corpus_version != ?",
                                  (scope, corpus_version)).rowcount
        return removed
