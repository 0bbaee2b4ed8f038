"""Trends research ideas: RAT over the period's topics, checked and grounded. Off on the tiny model profile (its
ideas were rarely grounded); on by default on the capable one."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from copilot.features.trends_summaries import MIN_PROSE_WORDS, _abstract_block, _paper_text, period_label
from copilot.grounding import (
    IDEA_SUPPORT,
    check,
    grounded_idea,
    ids_to_labels,
    keep_paper_citations,
    labels_to_ids,
    prose_words,
    reattribute,
    tidy,
)
from copilot.methods.rat import RATResult, run_rat, split_steps
from copilot.prompts import RAT_DRAFT, RAT_REVISE, TRENDS_IDEAS_TASK, ideas_grammar
from copilot.records import Evidence, Paper
from copilot.services import Services

NO_IDEA_PASSED = ("No idea is shown: none of the model's ideas passed the checks (an idea must propose something "
                  "found in the period's papers, and cite a retrieved paper that supports it).")


@dataclass
class Idea:
    text: str
    paper_ids: list[str]
    trace: list[dict]
    thought_id: str | None = None

    def as_json(self) -> dict:
        return {"text": self.text, "paper_ids": self.paper_ids, "trace": self.trace}


def retriever(services: Services, k: int, user: str | None = None) -> Callable[[str], list[Evidence]]:
    """Top-k of papers AND thoughts (those `user` may see) for a query, by cosine."""
    from copilot.methods.thought_retriever import ThoughtMemory

    where = ThoughtMemory.visible_where(user)

    def retrieve(query: str) -> list[Evidence]:
        vector = services.embedder.embed_one(query)
        found = services.store.search("paper", vector, k) + services.store.search("thought", vector, k, where=where)
        return sorted(found, key=lambda e: -e.score)[:k]
    return retrieve


def ideas_task(report, profile, count: int) -> str:
    who = "a researcher in this field"
    if profile is not None:
        focus = ", ".join(profile.keywords[:6]) or profile.text[:200]
        who = f"a researcher working on {focus}"
    topics = "; ".join(t.label for t in report.topics[:4])
    return TRENDS_IDEAS_TASK.format(count=count, who=who, period=period_label(report), topics=topics)


def ideas_from_rat(result: RATResult, allowed_papers: dict[str, str], count: int) -> list[Idea]:
    """One idea per revised step when the revision kept one paragraph per step; else one per paragraph,
    each carrying the whole trace. Citations are checked against what the model was given (`allowed_papers`:
    id → text), and a statement's one citation moves to the paper its words come from. An idea whose supporting
    statement repeats an earlier idea's is a copy, and is left out."""
    trace = [step.as_dict() for step in result.steps]
    paragraphs = split_steps(result.text)[:max(count, 1)]
    aligned = len(paragraphs) == len(result.steps)
    ids = sorted(allowed_papers)
    texts = [allowed_papers[i] for i in ids]
    ideas: list[Idea] = []
    supports: set[str] = set()
    for i, paragraph in enumerate(paragraphs):
        step = result.steps[i] if aligned else None
        proposed = paragraph.lstrip().startswith("Idea:")
        paragraph = check(paragraph, allowed=None, instructions=[RAT_DRAFT.user, RAT_REVISE.user, result.task]).text
        if proposed and not paragraph.startswith("Idea:"):   # the checks removed the proposal itself (an echo)
            continue
        text, cited, _ = keep_paper_citations(tidy(paragraph, paragraphs=False), ids)
        labelled, moved = reattribute(ids_to_labels(text, ids), texts)
        if moved:
            text, cited, _ = keep_paper_citations(labels_to_ids(labelled, ids), ids)
        if proposed and not grounded_idea(text, ids, texts):
            continue
        support = text.partition(IDEA_SUPPORT)[2]
        support = " ".join(re.sub(r"\[[^\]]*\]", " ", support).lower().split())
        if prose_words(text) < MIN_PROSE_WORDS or any(text == idea.text for idea in ideas) or support in supports:
            continue
        if support:
            supports.add(support)
        if not cited:  # grounded in what its step retrieved: credit those papers
            grounding = step.retrieved if step else result.retrieved
            cited = [e.id for e in grounding if e.kind == "paper" and e.id in allowed_papers]
        ideas.append(Idea(text=text, paper_ids=cited, trace=[trace[i]] if aligned else trace))
    return ideas


def generate_ideas(services: Services, report, papers: dict[str, Paper], profile,
                   opts) -> list[tuple[Idea, list[tuple[str, str]]]]:
    """RAT over the period's topics. Returns ideas with their lineage sources [(id, kind)]: every item the ideas
    were made from (the context papers and everything RAT retrieved), the ones an idea cites first."""
    context_papers = [papers[t.paper_ids[0]] for t in report.topics[:4]]
    context = "\n".join(_abstract_block(p, opts.quote_chars // 2) for p in context_papers)
    draft_grammar = revise_grammar = None
    if services.llm.obeys_grammar:   # a small local model: "Idea: … Support: [id] shows that …", one per step
        draft_grammar = ideas_grammar(opts.ideas)

        def revise_grammar(retrieved: Sequence[Evidence], draft_so_far: str) -> str:
            return ideas_grammar(opts.ideas, [e.id for e in retrieved if e.kind == "paper"])
    result = run_rat(services.llm, ideas_task(report, profile, opts.ideas),
                     retriever(services, opts.retrieve_k, report.user),
                     context=context, max_steps=opts.ideas, draft_tokens=opts.draft_tokens,
                     query_tokens=opts.query_tokens, revise_tokens=opts.revise_tokens,
                     evidence_chars=opts.quote_chars, draft_grammar=draft_grammar, revise_grammar=revise_grammar)
    allowed = {p.id: _paper_text(p) for p in context_papers}
    allowed.update({e.id: f"{e.title}\n{e.text}" for e in result.retrieved if e.kind == "paper"})
    ideas = ideas_from_rat(result, allowed, opts.ideas)
    report.ideas_trace = [step.as_dict() for step in result.steps]
    out = []
    for idea in ideas:
        sources = ([(pid, "paper") for pid in idea.paper_ids] + [(p.id, "paper") for p in context_papers]
                   + [(e.id, e.kind) for e in result.retrieved])
        out.append((idea, sources))
    return out
