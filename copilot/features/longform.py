"""Long-form writing with RAT (issue #15): what deep answers (Chat) and related-work drafts (Related) share.

One run = the zero-shot draft, then RAT's causal loop (methods/rat.py) over a retriever the caller gives. Every
item retrieved in the run gets a number [1], [2] … the first time it is found, kept for the whole run, so a
revision can cite earlier steps' sources and a small model copies a short number, not an arXiv id. On a
grammar-obeying (small, local) model the draft and each revision are held to grammars (prompts.steps_grammar,
prompts.revision_grammar): a fixed number of short paragraphs, citations only of numbers it was given. Every
revision then passes the one set of output checks (copilot/grounding.py) before it may replace the draft.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from copilot import grounding
from copilot.llm import LLM
from copilot.methods.rat import RATResult, iter_rat, split_steps
from copilot.methods.thought_retriever import MIN_ANSWERABLE_SCORE
from copilot.prompts import RAT_DRAFT, RAT_QUERY, RAT_REVISE_NUMBERED, revision_grammar, steps_grammar
from copilot.records import Evidence

_BARE_SOURCE = re.compile(r"\bSource (\d{1,3})\b")



def needs_a_writer(what: str) -> str:
    """Why `what` (written by the model step by step, RAT) is not offered on the tiny profile."""
    return (f"{what} is written by the model step by step, and with the tiny local model the product writes no text "
            "of its own (its drafts invented names and claims). Ask on the Ask tab for quoted sources, or configure "
            "a larger local model (COPILOT_LOCAL_MODEL) or an OpenAI-compatible endpoint (README \"A bigger model: "
            "the ladder\").")

@dataclass
class LongformOptions:
    steps: int = 3                   # paragraphs of the draft = RAT steps
    retrieve_k: int = 3              # items retrieved per step
    min_score: float = MIN_ANSWERABLE_SCORE   # below this cosine an item is not relevant: "nothing retrieved"
    draft_tokens: int = 200
    query_tokens: int = 32           # a capable model writes each step's query; a small one's are copies of the
                                     # draft's first words, so the draft so far itself is embedded instead
    revise_tokens: int = 400         # room for `steps` paragraphs of two bounded sentences (see grammars)
    evidence_chars: int = 360        # characters of each retrieved item quoted to the reviser

    @classmethod
    def from_settings(cls, settings, **overrides) -> LongformOptions:
        values = dict(retrieve_k=min(3, settings.top_k))
        values.update(overrides)
        return cls(**values)


class Numbering:
    """The numbers [1], [2] … of the items retrieved in one run, in order of first retrieval."""

    def __init__(self) -> None:
        self.items: list[Evidence] = []
        self._numbers: dict[str, int] = {}

    def add(self, items: Sequence[Evidence]) -> None:
        for item in items:
            if item.id not in self._numbers:
                self.items.append(item)
                self._numbers[item.id] = len(self.items)

    def label(self, item: Evidence) -> str:
        return str(self._numbers[item.id])

    @property
    def labels(self) -> list[str]:
        return [str(n) for n in range(1, len(self.items) + 1)]

    @property
    def texts(self) -> list[str]:
        return [f"{item.title}\n{item.text}" for item in self.items]


def own_questions_only(items: Sequence[Evidence], user: str | None) -> list[Evidence]:
    """`items` with every thought's title — the question it was made from — kept only when `user` asked it (the
    Memory tab's rule, issue #34: Deep answer and Related-work traces, and the RAT prompt, showed other users'
    questions). None (the CLI, an admin tool) sees all."""
    if user is None:
        return list(items)
    return [replace(item, title="") if item.kind == "thought" and item.metadata.get("user") != user else item
            for item in items]


def numbered_retriever(search: Callable[[str], Sequence[Evidence]], numbering: Numbering, k: int,
                       min_score: float) -> Callable[[str], list[Evidence]]:
    """The top-k of `search(query)` at or above `min_score` that no earlier step retrieved (each step brings its own
    sources; earlier ones stay citable), numbered on first sight. A deviation from the paper, which retrieves
    top-k afresh each step: docs/related-work-eval.md says why and what it costs."""
    def retrieve(query: str) -> list[Evidence]:
        seen = {item.id for item in numbering.items}
        found = [item for item in search(query) if item.score >= min_score and item.id not in seen][:k]
        numbering.add(found)
        return found
    return retrieve


def checked_text(text: str, numbering: Numbering, task: str) -> grounding.Checked:
    """The one checker on a revision or the final text: no loop, no echo of the RAT prompts or the task, citations
    only of numbers given in this run (each moved to the source its sentence's words come from), no unsourced
    link, repeated sentences dropped."""
    instructions = [RAT_DRAFT.system, RAT_DRAFT.user, RAT_QUERY.user, RAT_REVISE_NUMBERED.system,
                    RAT_REVISE_NUMBERED.user, task]
    text = _BARE_SOURCE.sub(r"Source [\1]", text)     # "Source 1 shows …": a citation without its brackets
    return grounding.check_longform(text, numbering.labels, numbering.texts, instructions)


@dataclass
class Longform:
    """A run as it grows: the RAT result, the numbered items, and once done the checked text and its citations."""

    task: str
    rat: RATResult | None = None
    numbering: Numbering = field(default_factory=Numbering)
    text: str = ""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    llm_calls: int = 0
    done: bool = False

    @property
    def stage(self) -> str:
        return "done" if self.done else (self.rat.stage if self.rat else "drafting")

    @property
    def cited(self) -> list[Evidence]:
        keys = grounding.cited(self.text)
        items = self.numbering.items
        return [items[int(k) - 1] for k in keys if k.isdigit() and 0 < int(k) <= len(items)]

    def trace(self) -> list[dict]:
        """Per step: query, retrieved items (number, id, kind, title, url, score), text before and after, status."""
        steps = []
        for step in (self.rat.steps if self.rat else []):
            record = step.as_dict()
            record["retrieved"] = [item_record(item, self.numbering) for item in step.retrieved]
            steps.append(record)
        return steps

    def as_dict(self) -> dict:
        return {"task": self.task, "text": self.text, "done": self.done, "stage": self.stage,
                "draft": self.rat.draft if self.rat else "",
                "citations": [item_record(item, self.numbering) for item in self.cited],
                "sources": [item_record(item, self.numbering) for item in self.numbering.items],
                "trace": self.trace(), "notes": self.notes, "seconds": round(self.seconds, 2),
                "llm_calls": self.llm_calls}


def item_record(item: Evidence, numbering: Numbering) -> dict:
    return {"label": int(numbering.label(item)), "id": item.id, "kind": item.kind, "title": item.title,
            "url": item.url, "score": round(item.score, 4)}


def stream_longform(llm: LLM, task: str, search: Callable[[str], Sequence[Evidence]], opts: LongformOptions,
                    context: str = "") -> Iterator[Longform]:
    """RAT with numbered citations over `search`, yielding the growing run after every stage; the last yield has
    done=True and the checked final text. Closing the generator stops the run between two model calls."""
    started = time.perf_counter()
    run = Longform(task)
    bound = llm.obeys_grammar
    draft_grammar = steps_grammar(opts.steps) if bound else None

    def revise_grammar(retrieved: Sequence[Evidence], draft_so_far: str) -> str | None:
        if not bound:
            return None
        earlier = split_steps(draft_so_far)[:-1]
        kept = [[k for k in grounding.cited(step) if k in run.numbering.labels] for step in earlier]
        return revision_grammar(run.numbering.labels, kept, [run.numbering.label(e) for e in retrieved])

    def review(revision: str, before: str) -> str:
        return checked_text(revision, run.numbering, task).text

    retrieve = numbered_retriever(search, run.numbering, opts.retrieve_k, opts.min_score)
    for run.rat in iter_rat(  # noqa: B020 - each step's result is kept on the run
                            llm, task, retrieve, context=context, max_steps=opts.steps,
                            draft_tokens=opts.draft_tokens, query_tokens=opts.query_tokens,
                            revise_tokens=opts.revise_tokens, evidence_chars=opts.evidence_chars,
                            llm_queries=not bound, draft_grammar=draft_grammar, revise_grammar=revise_grammar,
                            revise_prompt=RAT_REVISE_NUMBERED, label=run.numbering.label, review=review):
        run.seconds = time.perf_counter() - started
        if not run.rat.done:
            yield run
    assert run.rat is not None          # iter_rat yields at least once
    final = checked_text(run.rat.text, run.numbering, task)
    run.text, run.notes = final.text, final.notes
    if not run.cited:
        run.notes.append("No sentence of the final text cites a retrieved item: it rests on the model alone.")
    run.seconds = time.perf_counter() - started
    run.llm_calls = model_calls(run.rat, queries=not bound)
    run.done = True
    yield run



def model_calls(rat: RATResult, queries: bool) -> int:
    """Calls a finished run made: the draft, a query per step (when the model writes them), a revision per step
    that retrieved something."""
    return 1 + (len(rat.steps) if queries else 0) + sum(1 for step in rat.steps if step.retrieved)
