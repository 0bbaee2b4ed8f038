"""RAT — Retrieval-Augmented Thoughts (Algorithm 1 of the paper), UI-free and reusable.

1. Draft: zero-shot step-by-step answer to the task, split into steps (paragraphs separated by blank lines).
2. Causal loop, i = 1..n: the draft so far = revised steps < i + raw step i;
   query_i = ToQuery(task, draft so far) (an LLM-written short query; the text itself when the model gives none);
   retrieve top-k for query_i; revise the WHOLE draft so far with what was retrieved (an empty revision keeps it).
3. Return the revised draft, with a trace per step: query, retrieved ids, before and after.

The model and the retriever come in as arguments: `retrieve(query) -> list[Evidence]` may search papers,
thoughts or both. Nothing here knows about the UI, the stores or the feature that calls it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from copilot.llm import LLM, LLMError
from copilot.prompts import RAT_DRAFT, RAT_QUERY, RAT_REVISE, source_block
from copilot.records import Evidence

log = logging.getLogger(__name__)

Retriever = Callable[[str], Sequence[Evidence]]
StepListener = Callable[["RevisionStep"], None]

_BLANK_LINES = re.compile(r"\n\s*\n")
_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+", re.M)
_PREAMBLE = re.compile(r"^(?:sure|here(?: is|'s| are)|revised (?:draft|answer)|the revised)[^\n]*:\s*$", re.I)


@dataclass
class RevisionStep:
    """One causal step: the query it asked, what it retrieved, and the draft before and after revision."""

    index: int                    # 1-based step number
    query: str
    retrieved: list[Evidence]
    before: str                   # revised steps < i + raw step i
    after: str                    # the revision (= before when the revision was empty or failed)
    kept: bool = False            # True when the revision was empty or failed and the draft was kept
    error: str | None = None

    @property
    def retrieved_ids(self) -> list[str]:
        return [item.id for item in self.retrieved]

    def as_dict(self) -> dict:
        return {"step": self.index, "query": self.query, "retrieved": self.retrieved_ids,
                "before": self.before, "after": self.after, "kept": self.kept, "error": self.error}


@dataclass
class RATResult:
    task: str
    draft: str                    # the zero-shot draft as the model wrote it
    raw_steps: list[str]
    text: str                     # the final revised draft
    steps: list[RevisionStep] = field(default_factory=list)

    @property
    def revised_steps(self) -> list[str]:
        return split_steps(self.text)

    @property
    def retrieved(self) -> list[Evidence]:
        """Every item retrieved over all steps, first occurrence first."""
        seen: dict[str, Evidence] = {}
        for step in self.steps:
            for item in step.retrieved:
                seen.setdefault(item.id, item)
        return list(seen.values())


def clean_output(text: str) -> str:
    """Strip a small model's preambles ("Sure, here is the revised draft:") and surrounding whitespace."""
    lines = (text or "").strip().splitlines()
    while lines and _PREAMBLE.match(lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines).strip()


def split_steps(text: str, max_steps: int | None = None) -> list[str]:
    """Paragraphs separated by blank lines; else numbered/bulleted lines; else the text as one step.

    Extra steps beyond `max_steps` are dropped (the draft is capped, not merged).
    """
    text = clean_output(text)
    if not text:
        return []
    parts = [p.strip() for p in _BLANK_LINES.split(text) if p.strip()]
    if len(parts) == 1 and len(_NUMBERED.findall(text)) >= 2:
        parts = [p.strip() for p in re.split(r"\n(?=\s*(?:\d+[.)]|[-*•])\s+)", text) if p.strip()]
    return parts[:max_steps] if max_steps else parts


def join_steps(steps: Sequence[str]) -> str:
    return "\n\n".join(s.strip() for s in steps if s.strip())


def quote_evidence(items: Sequence[Evidence], chars: int = 320) -> str:
    """Retrieved items as <source> blocks, each cut to `chars` characters (small models have small contexts)."""
    blocks = []
    for item in items:
        body = f"{item.title}\n{item.text}" if item.title and not item.text.startswith(item.title) else item.text
        body = body if len(body) <= chars else body[:chars].rsplit(" ", 1)[0] + " …"
        blocks.append(source_block(item.id, body))
    return "\n".join(blocks)


def to_query(llm: LLM | None, task: str, text: str, max_tokens: int = 32) -> str:
    """ToQuery(task, draft so far): a short LLM-written search query; the draft's last step when none comes back."""
    fallback = split_steps(text)[-1] if split_steps(text) else text
    if llm is None:
        return fallback
    try:
        query = clean_output(llm.complete(RAT_QUERY.render(task=task, text=text), max_tokens=max_tokens,
                                          temperature=0.0))
    except LLMError as error:
        log.warning("RAT query generation failed (%s); using the text itself", error)
        return fallback
    query = query.splitlines()[0].strip().strip('"').strip() if query else ""
    return query or fallback


def run_rat(llm: LLM, task: str, retrieve: Retriever, *, context: str = "", max_steps: int = 3,
            draft_tokens: int = 160, query_tokens: int = 32, revise_tokens: int = 192, llm_queries: bool = True,
            evidence_chars: int = 320, on_step: StepListener | None = None, draft: str | None = None,
            draft_grammar: str | None = None,
            revise_grammar: Callable[[Sequence[Evidence]], str | None] | None = None) -> RATResult:
    """Run RAT for one task. `context` is quoted material for the draft prompt (e.g. source blocks).

    `evidence_chars` cuts each retrieved item quoted to the reviser (prompt length is time on a local model).
    `draft` skips the draft call (a caller that already has one). `draft_grammar` and `revise_grammar` (made
    from the items a step retrieved) bind the output's shape on a backend that obeys grammars; the query is
    never bound. Raises LLMError only when the draft fails;
    a failed query or revision step keeps the draft so far and records the error in its step.
    """
    if draft is None:
        draft = llm.complete(RAT_DRAFT.render(task=task, context=context), max_tokens=draft_tokens, temperature=0.2,
                             grammar=draft_grammar)
    raw_steps = split_steps(draft, max_steps)
    result = RATResult(task=task, draft=draft, raw_steps=raw_steps, text="")
    revised = ""
    for index, raw in enumerate(raw_steps, start=1):
        before = join_steps([revised, raw])
        query = to_query(llm if llm_queries else None, task, before, query_tokens)
        retrieved = list(retrieve(query))
        after, error = before, None
        try:
            output = clean_output(llm.complete(
                RAT_REVISE.render(task=task, sources=quote_evidence(retrieved, evidence_chars) or "(nothing retrieved)",
                                  draft=before), max_tokens=revise_tokens, temperature=0.0,
                grammar=revise_grammar(retrieved) if revise_grammar else None))
        except LLMError as caught:
            output, error = "", str(caught)
            log.warning("RAT revision %d failed (%s); keeping the draft", index, caught)
        if output:
            after = output
        step = RevisionStep(index, query, retrieved, before, after, kept=not output, error=error)
        result.steps.append(step)
        revised = after
        if on_step:
            on_step(step)
    result.text = revised
    return result
