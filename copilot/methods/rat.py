"""RAT — Retrieval-Augmented Thoughts (Algorithm 1 of the paper), UI-free and reusable.

1. Draft: zero-shot step-by-step answer to the task, split into steps (paragraphs separated by blank lines; a
   draft with more paragraphs than steps has the rest joined to its last step, never dropped).
2. Causal loop, i = 1..n: the draft so far = revised steps < i + raw step i;
   query_i = ToQuery(task, draft so far) (an LLM-written short query, or the task and the draft so far themselves
   for an embedder: `llm_queries=False`);
   retrieve top-k for query_i; revise the WHOLE draft so far with what was retrieved (an empty revision keeps it).
3. Return the revised draft, with a trace per step: query, retrieved ids, before and after.

Faults never lose text: a step whose retrieval finds nothing stays unrevised (no revision call); a revision that
comes back empty, looping or shorter than half the draft so far leaves the draft as it was; a revision cut by the
token limit keeps the steps it finished and takes the rest from the draft as it was (later steps are never
dropped silently). The trace says which of these happened.

The model and the retriever come in as arguments: `retrieve(query) -> list[Evidence]` may search papers,
thoughts or both. `iter_rat` yields the growing result after every stage, so a caller can stream it and stop it
(closing the generator stops the work between two model calls). Nothing here knows about the UI, the stores or
the feature that calls it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from copilot.grounding import is_loop
from copilot.llm import LLM, LLMError, Usage
from copilot.prompts import RAT_DRAFT, RAT_QUERY, RAT_REVISE, Prompt, source_block
from copilot.records import Evidence

log = logging.getLogger(__name__)

Retriever = Callable[[str], Sequence[Evidence]]
StepListener = Callable[["RevisionStep"], None]
# A feature's checks on a revision: (revision, draft before it) -> the revision as it may be shown
Reviewer = Callable[[str, str], str]
Labeller = Callable[[Evidence], str]

REVISED, KEPT, NOTHING_RETRIEVED, FAILED, PENDING = "revised", "kept", "nothing retrieved", "failed", "pending"

_BLANK_LINES = re.compile(r"\n\s*\n")
_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+", re.M)
_STEP_LABEL = re.compile(r"^\s*step\s*\d+\s*(?:[-:.)–—]\s*)?", re.I)   # "Step 2 - …": the paragraph is the step
_PREAMBLE = re.compile(r"^(?:sure|here(?: is|'s| are)|revised (?:draft|answer)|the revised)[^\n]*:\s*$", re.I)


@dataclass
class RevisionStep:
    """One causal step: the query it asked, what it retrieved, and the draft before and after revision."""

    index: int                    # 1-based step number
    query: str
    retrieved: list[Evidence]
    before: str                   # revised steps < i + raw step i
    after: str                    # the revision (= before when the revision was empty or failed)
    kept: bool = False            # True when the draft so far was kept as it was (see `status` and `note`)
    error: str | None = None
    status: str = REVISED         # revised | kept | nothing retrieved | failed | pending (still running)
    note: str = ""                # why the draft was kept, or which steps a cut revision took from the draft

    @property
    def retrieved_ids(self) -> list[str]:
        return [item.id for item in self.retrieved]

    def as_dict(self) -> dict:
        return {"step": self.index, "query": self.query, "retrieved": self.retrieved_ids,
                "before": self.before, "after": self.after, "kept": self.kept, "error": self.error,
                "status": self.status, "note": self.note}


@dataclass
class RATResult:
    task: str
    draft: str                    # the zero-shot draft as the model wrote it
    raw_steps: list[str]
    text: str                     # the final revised draft
    steps: list[RevisionStep] = field(default_factory=list)
    stage: str = "drafting"       # what runs now, for a streamed view; "done" at the end
    done: bool = False

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

    Beyond `max_steps` nothing is dropped: the extra paragraphs join the last step, one per line (no blank line,
    so the draft so far splits into the same steps again).
    """
    text = clean_output(text)
    if not text:
        return []
    parts = [_STEP_LABEL.sub("", p).strip() for p in _BLANK_LINES.split(text) if p.strip()]
    parts = [p for p in parts if p]
    if len(parts) == 1 and len(_NUMBERED.findall(text)) >= 2:
        parts = [p.strip() for p in re.split(r"\n(?=\s*(?:\d+[.)]|[-*•])\s+)", text) if p.strip()]
    if max_steps and len(parts) > max_steps:
        parts = parts[:max_steps - 1] + ["\n".join(parts[max_steps - 1:])]
    return parts


def join_steps(steps: Sequence[str]) -> str:
    return "\n\n".join(s.strip() for s in steps if s.strip())


def quote_evidence(items: Sequence[Evidence], chars: int = 320, label: Labeller | None = None) -> str:
    """Retrieved items as <source> blocks, each cut to `chars` characters (small models have small contexts),
    each under its id or, with `label`, under the label the caller cites it by."""
    blocks = []
    for item in items:
        body = f"{item.title}\n{item.text}" if item.title and not item.text.startswith(item.title) else item.text
        body = body if len(body) <= chars else body[:chars].rsplit(" ", 1)[0] + " …"
        blocks.append(source_block(label(item) if label else item.id, body))
    return "\n".join(blocks)


def text_query(task: str, text: str) -> str:
    """ToQuery without a model: the draft so far itself, for an embedder to search with. The current (raw) step
    comes first, then the task, then the revised earlier steps: an embedder that reads only a text's beginning
    (MiniLM: 256 tokens) still sees the step being checked."""
    steps = split_steps(text)
    if not steps:
        return task
    return "\n\n".join([steps[-1], task, *steps[:-1]])


def to_query(llm: LLM | None, task: str, text: str, max_tokens: int = 32, grammar: str | None = None) -> str:
    """ToQuery(task, draft so far): a short LLM-written search query; the draft's last step when none comes back."""
    fallback = split_steps(text)[-1] if split_steps(text) else text
    if llm is None:
        return fallback
    try:
        query = clean_output(llm.complete(RAT_QUERY.render(task=task, text=text), max_tokens=max_tokens,
                                          temperature=0.0, grammar=grammar))
    except LLMError as error:
        log.warning("RAT query generation failed (%s); using the text itself", error)
        return fallback
    query = query.splitlines()[0].strip().strip('"').strip() if query else ""
    return query or fallback




def revision_problem(revision: str, before: str) -> str | None:
    """Why a (checked) revision may not replace the draft so far, or None: empty, or shorter than half of it."""
    if not revision.strip():
        return "the revision came back empty"
    if len(revision.strip()) < len(before.strip()) / 2:
        return (f"the revision ({len(revision.strip())} characters) is shorter than half the draft so far "
                f"({len(before.strip())})")
    return None


def restore_cut_revision(revision: str, before: str) -> tuple[str, str]:
    """A revision that stopped at the token limit: its whole steps, then the rest of the draft as it was. Its last
    step is unfinished and goes; the draft's steps from that position on are kept. → (text, note)"""
    revised, previous = split_steps(revision), split_steps(before)
    finished = revised[:-1]
    if not finished:
        return before, "the revision reached its token limit before it finished a step; the draft so far is kept"
    restored = finished + previous[len(finished):]
    note = (f"the revision reached its token limit after {len(finished)} of {len(previous)} step(s); "
            f"step(s) {len(finished) + 1}–{len(previous)} are kept as they were") if len(previous) > len(finished) \
        else "the revision reached its token limit; its unfinished last paragraph was dropped"
    return join_steps(restored), note


def iter_rat(llm: LLM, task: str, retrieve: Retriever, *, context: str = "", max_steps: int = 3,
             draft_tokens: int = 160, query_tokens: int = 32, revise_tokens: int = 192, llm_queries: bool = True,
             evidence_chars: int = 320, draft: str | None = None, draft_grammar: str | None = None,
             revise_grammar: Callable[[Sequence[Evidence], str], str | None] | None = None,
             query_grammar: str | None = None, revise_prompt: Prompt = RAT_REVISE, label: Labeller | None = None,
             review: Reviewer | None = None) -> Iterator[RATResult]:
    """RAT for one task, yielding the one growing RATResult after the draft, after each step's retrieval and after
    each revision (the last yield has done=True). `context` is quoted material for the draft prompt.

    `evidence_chars` cuts each retrieved item quoted to the reviser (prompt length is time on a local model).
    `draft` skips the draft call (a caller that already has one). `draft_grammar` and `revise_grammar` (made from
    the items a step retrieved and the draft so far) bind the output's shape on a backend
    that obeys grammars; `query_grammar` binds the query. `label` names each retrieved item in the revision prompt
    (default: its id); `review` applies the caller's output checks to a revision before it is accepted.
    Raises LLMError only when the draft fails; a failed query or revision keeps the draft so far and records the
    error in its step.
    """
    result = RATResult(task=task, draft=draft or "", raw_steps=[], text="")
    if draft is None:
        yield result
        draft = llm.complete(RAT_DRAFT.render(task=task, context=context), max_tokens=draft_tokens, temperature=0.2,
                             grammar=draft_grammar)
    result.draft = draft
    result.raw_steps = split_steps(draft, max_steps)
    revised = ""
    for index, raw in enumerate(result.raw_steps, start=1):
        before = join_steps([revised, raw])
        step = RevisionStep(index, "", [], before, before, status=PENDING)
        result.steps.append(step)
        result.stage = f"step {index} of {len(result.raw_steps)}: writing a search query"
        yield result
        step.query = (to_query(llm, task, before, query_tokens, query_grammar) if llm_queries
                      else text_query(task, before))
        step.retrieved = list(retrieve(step.query))
        result.stage = f"step {index} of {len(result.raw_steps)}: revising with what was retrieved"
        yield result
        _revise(llm, step, task, revise_tokens=revise_tokens, evidence_chars=evidence_chars,
                revise_grammar=revise_grammar, revise_prompt=revise_prompt, label=label, review=review)
        revised = step.after
        yield result
    result.text = revised
    result.stage, result.done = "done", True
    yield result


def _revise(llm: LLM, step: RevisionStep, task: str, *, revise_tokens: int, evidence_chars: int,
            revise_grammar, revise_prompt: Prompt, label: Labeller | None, review: Reviewer | None) -> None:
    """Revise the draft so far with what the step retrieved; fill in step.after, status and note."""
    if not step.retrieved:
        step.kept, step.status = True, NOTHING_RETRIEVED
        step.note = "nothing relevant was retrieved for this step, so it stays unrevised"
        return
    usage = Usage()
    try:
        output = clean_output(llm.complete(
            revise_prompt.render(task=task, sources=quote_evidence(step.retrieved, evidence_chars, label),
                                 draft=step.before),
            max_tokens=revise_tokens, temperature=0.0, usage=usage,
            grammar=revise_grammar(step.retrieved, step.before) if revise_grammar else None))
    except LLMError as caught:
        step.kept, step.status, step.error = True, FAILED, str(caught)
        step.note = "the revision failed, so the draft so far is kept"
        log.warning("RAT revision %d failed (%s); keeping the draft", step.index, caught)
        return
    notes = []
    if output and usage.completion_tokens and usage.completion_tokens >= revise_tokens:
        output, cut_note = restore_cut_revision(output, step.before)
        notes.append(cut_note)
    problem = "the revision repeats itself (a loop)" if output and is_loop(output) else None
    if not problem:
        output = review(output, step.before) if review and output else output
        problem = revision_problem(output, step.before)
    if problem:
        step.kept, step.status = True, KEPT
        step.note = f"{problem}, so the draft so far is kept"
        return
    step.after, step.note = output, "; ".join(notes)
    step.kept = output == step.before and bool(notes)
    step.status = KEPT if step.kept else REVISED


def run_rat(llm: LLM, task: str, retrieve: Retriever, *, on_step: StepListener | None = None,
            **options) -> RATResult:
    """RAT for one task, to the end (see `iter_rat` for the options); `on_step` hears of each finished step."""
    result = None
    reported = 0
    for result in iter_rat(llm, task, retrieve, **options):
        finished = [s for s in result.steps if s.status != PENDING]
        for step in finished[reported:]:
            if on_step:
                on_step(step)
        reported = len(finished)
    assert result is not None           # iter_rat yields at least once
    return result
