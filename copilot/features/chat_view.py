"""What the Chat page and the CLI read of a turn: one typed view, live (still being answered) or stored.

The page never reads a turn's dicts by string keys: it reads these, and `revealed` says whether sides and source
kinds may be shown (after the vote, or when there is nothing to compare).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from copilot.methods.quotes import is_no_answer
from copilot.store.chat_log import THOUGHTS, SourceRecord
from copilot.table import EvidenceTable

SourceView = SourceRecord      # one retrieved item as a turn shows it: id, kind, title, preview, score


# Turns shown with one answer: both retrievals found the same items, or both answers came out the same (the
# thought side's memory added nothing to this question); neither is a comparison, and neither can be voted on.
ONE_ANSWER = ("same_items", "same_answer")


@dataclass(frozen=True)
class AnswerView:
    label: str                     # "A" | "B" as shown
    kind: str                      # THOUGHTS | RAW
    text: str
    error: str | None
    done: bool
    seconds: float | None
    thought_augmented: bool
    sources: tuple[SourceRecord, ...]     # in the order the answer's labels count them (`shown_sources`)
    notes: tuple[str, ...] = ()    # what the output checks removed, trimmed prompts, cut answers
    table: EvidenceTable | None = None

    @property
    def thought_ids(self) -> list[str]:
        return [s.id for s in self.sources if s.kind == "thought"]

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind, "text": self.text, "error": self.error, "done": self.done,
                "seconds": self.seconds, "thought_augmented": self.thought_augmented, "notes": list(self.notes),
                "sources": [s.as_dict() for s in self.sources]}


@dataclass(frozen=True)
class VoteView:
    choice: str                    # THOUGHTS | RAW | "tie" | "bad"
    label: str                     # "A" | "B" | "tie" | "bad"
    changes: int = 0

    @property
    def shown(self) -> str:
        """The vote as the user gave it: a side's letter, or tie / bad."""
        return self.label if self.label in ("A", "B") else self.choice


@dataclass(frozen=True)
class TurnView:
    turn_id: str
    user: str
    question: str
    comparison: str                # "pending" | "yes" | "same_items" | "same_answer" | "failed"
    answers: tuple[AnswerView, ...]
    retrieval_s: float | None
    notice: str = ""
    asked: str = ""                # the user's own words when `question` is their follow-up made standalone
    vote: VoteView | None = None
    created_at: float | None = None
    thought_jobs: tuple[dict, ...] = ()
    models: dict[str, str] = field(default_factory=dict)
    scope: tuple[str, ...] = ()    # the papers a live turn was asked about (features.scope): one answer, said so

    @property
    def done(self) -> bool:
        return all(a.done for a in self.answers)

    @property
    def revealed(self) -> bool:
        """Sides and source kinds are shown once the turn is voted, or when there is nothing to compare."""
        return self.vote is not None or self.comparison in (*ONE_ANSWER, "failed")

    @property
    def votable(self) -> bool:
        return self.comparison == "yes"

    @property
    def total_seconds(self) -> float:
        return (self.retrieval_s or 0.0) + sum(a.seconds or 0.0 for a in self.answers)

    @property
    def thought_ids(self) -> list[str]:
        return sorted({tid for a in self.answers for tid in a.thought_ids})

    @property
    def paper_ids(self) -> list[str]:
        return list(dict.fromkeys(s.id for a in self.answers for s in a.sources if s.kind == "paper"))

    def shown_answer(self) -> AnswerView | None:
        """The answer a follow-up refers to: the voted side if any, else the first shown."""
        if not self.answers:
            return None
        if self.vote and self.vote.label in ("A", "B"):
            return next((a for a in self.answers if a.label == self.vote.label), self.answers[0])
        return self.answers[0]

    def record(self, hide_sides: bool = False) -> dict[str, Any]:
        """The turn in the CLI's JSON shape. With `hide_sides` (an unvoted comparison), only what does not tell the
        sides apart: the answers' words and the whole turn's time; no sources, kinds or per-answer times."""
        if hide_sides:
            return {"turn_id": self.turn_id, "comparison": self.votable, "comparison_state": self.comparison,
                    "sides_hidden": True,
                    "answers": [{"label": a.label, "text": a.text, "error": a.error} for a in self.answers],
                    "timings": {"total_s": _round(self.total_seconds)}, "thought_jobs": [], "models": self.models}
        timings = {"retrieval_s": _round(self.retrieval_s)}
        for answer in self.answers:
            timings[f"answer_{answer.label}_s"] = _round(answer.seconds)
        finished = [j for j in self.thought_jobs if j["finished_at"] and j["started_at"]]
        timings["thought_job_s"] = (_round(sum(j["finished_at"] - j["started_at"] for j in finished)) if finished
                                    else None)
        return {
            "turn_id": self.turn_id, "comparison": self.votable, "comparison_state": self.comparison,
            "answers": [{"label": a.label, "thought_augmented": a.thought_augmented, "text": a.text, "error": a.error,
                         "sources": [{"id": s.id, "kind": s.kind, "title": s.title} for s in a.sources]}
                        for a in self.answers],
            "timings": timings,
            "thought_jobs": [job_record(j) for j in self.thought_jobs],
            "models": self.models, "sides_hidden": False,
            **({"scope": list(self.scope)} if self.scope else {}),
        }

    def as_dict(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "comparison": self.comparison, "question": self.question,
                "user": self.user, "notice": self.notice, "asked": self.asked, "retrieval_s": self.retrieval_s,
                "answers": [a.as_dict() for a in self.answers], "created_at": self.created_at,
                "vote": None if self.vote is None else {"choice": self.vote.choice, "label": self.vote.label,
                                                        "changes": self.vote.changes},
                "thought_jobs": list(self.thought_jobs), "models": dict(self.models), "scope": list(self.scope)}


def job_record(job: dict) -> dict:
    """A thought job in the CLI's JSON shape; `current` is false for a job a later vote superseded."""
    record = {k: job[k] for k in ("answer", "trigger", "status", "thought_id", "error", "reason")}
    record["current"] = job["superseded_at"] is None
    return record


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


def answer_is_thought_side(kind: str, comparison: str) -> bool:
    return kind == THOUGHTS and comparison not in ONE_ANSWER


def shown_sources(table: EvidenceTable | None, sources: tuple[SourceRecord, ...]) -> tuple[SourceRecord, ...]:
    """The sources an answer's labels stand for: its table's papers first, label n for row n, then the other items
    it retrieved (a thought, a paper no row quotes), in retrieval order."""
    if table is None or not table.rows:
        return sources
    rows = tuple(SourceRecord(id=row.paper_id, kind="paper", title=row.title, preview="", score=row.score)
                 for row in table.rows)
    quoted = set(table.paper_ids)
    return rows + tuple(source for source in sources if not (source.kind == "paper" and source.id in quoted))


def same_answer(first: str, second: str, first_table: EvidenceTable | None = None,
                second_table: EvidenceTable | None = None) -> bool:
    """Whether two answers say the same: tables with the same papers quoting the same slices (the rows' order may
    differ between the sides), else the same text (the nearest papers of two no-answer lines alike, whatever their
    labels). Nothing to compare then: a vote would be noise."""
    if first_table and second_table:
        return set(first_table.content()) == set(second_table.content())
    if is_no_answer(first) and is_no_answer(second):
        return _LABELS.sub("", " ".join(first.split())) == _LABELS.sub("", " ".join(second.split()))
    return " ".join(first.split()) == " ".join(second.split())


_LABELS = re.compile(r"\[\d{1,3}\] ?")
