"""Graph of Records' options, scopes and results (the feature itself is gor.py, which re-exports these)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from copilot.methods import gor
from copilot.store.gor_cache import Simulation

GOR, PLAIN = "gor", "plain"
FORMAT = 3                         # part of every key: bump when what a simulation or a network means changes


@dataclass
class GoROptions:
    cap: int = 300                 # most papers of a scope (the Trends cap)
    questions: int = 40            # simulated questions per scope: the first `train_questions` train, the rest
    train_questions: int = 30      # are held out for `eval gor` (paper: 30 per document)
    responses: int = 30            # simulated RAG answers that become response nodes (paper: one per question)
    response_k: int = 3            # records each simulated answer is made from (paper: 6; prompt time locally)
    response_tokens: int = 64
    question_tokens: int = 40
    quote_chars: int = 600         # of a paper quoted to write a question from
    min_nodes: int = 24            # fewer retrievable nodes: plain retrieval, with a notice
    negatives_cap: int = 100       # papers of the previous window: the "other graph" of in-batch negatives
    top_k: int = gor.TOP_K
    train: gor.TrainSettings = field(default_factory=gor.TrainSettings)

    def training_part(self, questions: Sequence) -> tuple[list, list]:
        """(training, held-out) questions: the same share held out however many questions the model managed to
        write (the small one's are often dropped as not about their paper)."""
        count = min(self.train_questions, max(2, round(len(questions) * self.train_questions / self.questions)))
        return list(questions[:count]), list(questions[count:])

    @classmethod
    def from_settings(cls, settings, **overrides) -> GoROptions:
        """COPILOT_GOR_QUESTIONS questions, three quarters of them for training; COPILOT_GOR_RESPONSES answers."""
        train_questions = max(2, round(0.75 * settings.gor_questions))
        values = dict(questions=settings.gor_questions, train_questions=train_questions,
                      responses=min(settings.gor_responses, train_questions))
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class Scope:
    start: date
    end: date
    categories: tuple[str, ...] = ()

    def key(self, opts: GoROptions) -> str:
        return json.dumps(["period", str(self.start), str(self.end), sorted(self.categories), opts.cap, FORMAT])

    @property
    def label(self) -> str:
        return f"{self.start} … {self.end}" if self.start != self.end else str(self.start)


class TooFewNodes(ValueError):
    """The scope is too small to train on."""


@dataclass
class Prepared:
    graph: gor.RecordGraph
    trained: gor.Trained | None
    simulation: Simulation
    token_vectors: list[np.ndarray] | None = None
    meta: dict = field(default_factory=dict)


@dataclass
class ChosenNode:
    id: str
    kind: str
    title: str
    score: float

    def as_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "title": self.title, "score": round(self.score, 4)}


@dataclass
class PeriodAnswer:
    question: str
    answer: str
    citations: list[str]
    nodes: list[ChosenNode]
    chosen_by: str                 # GOR | PLAIN
    notices: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"question": self.question, "answer": self.answer, "citations": self.citations,
                "nodes": [n.as_json() for n in self.nodes], "chosen_by": self.chosen_by, "notices": self.notices,
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()}}
