"""Related-work drafts (RAT, issue #15): for a paper (an arXiv id in the library, or a pasted title and abstract),
a related-work section that cites papers of the library.

Retrieval is by the paper's PRISM aspects: the Related ranking (features/related.find_related: three aspect
descriptions and the abstract, fused) gives the pool of candidate papers; each RAT step then takes the pool's
papers nearest to its own query (and, when asked, the stored thoughts nearest to it). The draft is zero-shot
(the paper's own title and abstract, no retrieved abstract), then revised step by step (features/longform.py).
The cited papers come with BibTeX, and the draft with a LaTeX copy that cites them by key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from copilot.errors import failure_sentence
from copilot.features import related
from copilot.features.bibtex import bibtex_keys, bibtex_text
from copilot.features.longform import (
    Longform,
    LongformOptions,
    needs_a_writer,
    own_questions_only,
    stream_longform,
)
from copilot.llm import LLMError
from copilot.methods.thought_retriever import ThoughtMemory
from copilot.prompts import RELATED_WORK_TASK, source_block
from copilot.records import Evidence, Paper
from copilot.services import Services

POOL = 20                 # papers of the PRISM ranking the draft may cite
ABSTRACT_CHARS = 900      # of the query paper's abstract, quoted to the draft
PLURAL = {"shows that": "show that", "reports that": "report that", "finds that": "find that",
          "proposes": "propose", "introduces": "introduce", "studies": "study", "describes": "describe"}


@dataclass
class RelatedWorkDraft:
    query: related.QueryInfo
    run: Longform
    pool: list[str] = field(default_factory=list)      # ids of the PRISM-ranked candidate papers
    stage: str = "ranking the library by the paper's aspects (PRISM)"
    papers: dict[str, Paper] = field(default_factory=dict)
    text: str = ""                                       # the final text, "Source [n]" written as its authors
    bibtex: str = ""
    latex: str = ""
    keys: dict[str, str] = field(default_factory=dict)  # paper id → BibTeX key

    @property
    def done(self) -> bool:
        return self.run.done

    def as_dict(self) -> dict:
        record = self.run.as_dict()
        record.update(query=self.query.as_dict(), draft_text=self.text, latex=self.latex, bibtex=self.bibtex,
                      pool=self.pool, stage=self.stage if not self.done else "done")
        for citation in record["citations"]:
            citation["bibtex_key"] = self.keys.get(citation["id"])
        record["text"] = self.text
        return record


def pool_search(services: Services, pool: Sequence[Evidence], user: str | None, thoughts: bool,
                k: int) -> Callable[[str], list[Evidence]]:
    """A step's query → the pool's papers by cosine (and the nearest thoughts `user` may see), best first."""
    ids = [item.id for item in pool]
    vectors = services.store.paper_embeddings(ids)
    ids = [i for i in ids if i in vectors]
    matrix = np.stack([vectors[i] for i in ids]) if ids else np.zeros((0, 1), np.float32)
    by_id = {item.id: item for item in pool}
    where = ThoughtMemory.visible_where(user)

    def search(query: str) -> list[Evidence]:
        vector = services.embedder.embed_one(query)
        scores = matrix @ vector if len(ids) else np.zeros(0)
        found = [Evidence(i, "paper", by_id[i].title, by_id[i].text, float(s), by_id[i].metadata)
                 for i, s in zip(ids, scores)]
        if thoughts:
            found += own_questions_only(services.store.search("thought", vector, k, where=where), user)
        return sorted(found, key=lambda item: -item.score)
    return search


def stream_related_work(services: Services, query: related.QueryInfo, *, user: str | None = "local",
                        thoughts: bool = False, opts: LongformOptions | None = None,
                        progress: Callable[[str], None] | None = None) -> Iterator[RelatedWorkDraft]:
    """The draft as it grows (the last yield has done=True). Raises related.RelatedError on an empty library or a
    failed draft, or when the model profile does not write."""
    if not services.model_profile.writes:
        raise related.RelatedError(needs_a_writer("A related-work draft"))
    opts = opts or LongformOptions.from_settings(services.settings, min_score=0.2)
    task = RELATED_WORK_TASK.format(title=query.paper.title or "(untitled)", steps=opts.steps)
    draft = RelatedWorkDraft(query, Longform(task))
    yield draft
    ranked = related.find_related(services, query, limit=POOL, progress=progress)
    draft.pool = [row["id"] for row in ranked.results]
    draft.papers = {p.id: p for p in services.store.get_papers(draft.pool)}
    pool = [Evidence(p.id, "paper", p.title, p.abstract, 0.0, p.metadata()) for p in
            (draft.papers[i] for i in draft.pool if i in draft.papers)]
    context = source_block("paper", f"{query.paper.title}\n{shorten(query.paper.abstract, ABSTRACT_CHARS)}")
    try:
        for draft.run in stream_longform(services.llm, task, pool_search(services, pool, user, thoughts,
                                                                         opts.retrieve_k), opts, context=context):
            draft.stage = draft.run.stage
            yield draft
    except LLMError as error:
        raise related.RelatedError(failure_sentence("The model failed while drafting", error,
                                                    "The related papers are still listed.")) from None
    finish(draft)
    yield draft


def finish(draft: RelatedWorkDraft) -> None:
    """The shown text (each "Source [n] …" opener written as the paper's authors), the BibTeX of the cited papers
    and a LaTeX copy citing them by key."""
    items = draft.run.numbering.items
    cited = [item for item in draft.run.cited if item.kind == "paper" and item.id in draft.papers]
    draft.keys = bibtex_keys([draft.papers[item.id] for item in cited])
    draft.text = with_authors(draft.run.text, items, draft.papers)
    draft.bibtex = bibtex_text([draft.papers[item.id] for item in cited], draft.keys)
    draft.latex = as_latex(draft.text, items, draft.keys)


def with_authors(text: str, items: Sequence[Evidence], papers: dict[str, Paper]) -> str:
    """"Source [3] proposes …" → "Deguchi et al. [3] propose …" for a paper ("Earlier work [3] proposes …" when it
    has no author on record); a thought stays "Source [n]"."""
    def replace(match: re.Match) -> str:
        number, verb = int(match.group(1)), match.group(2) or ""
        if not 0 < number <= len(items) or items[number - 1].id not in papers:
            return match.group(0)
        authors = papers[items[number - 1].id].authors
        who = author_phrase(authors)
        if not who:       # no author on record: still no "Source" in a related-work section
            return f"Earlier work [{number}]{verb}"
        plural = len(authors) > 1 and verb.strip() in PLURAL
        return f"{who} [{number}]{' ' + PLURAL[verb.strip()] if plural else verb}"
    verbs = "|".join(re.escape(v) for v in PLURAL)
    return re.sub(rf"\bSource \[(\d+)\](\s+(?:{verbs}))?", replace, text)


def author_phrase(authors: Sequence[str]) -> str:
    names = [surname(a) for a in authors if surname(a)]
    if not names:
        return ""
    if len(names) == 1:
        return names[0]
    return f"{names[0]} and {names[1]}" if len(names) == 2 else f"{names[0]} et al."


def surname(author: str) -> str:
    author = author.strip()
    if "," in author:
        return author.split(",", 1)[0].strip()
    return author.split()[-1] if author.split() else ""


def shorten(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " …"


def as_latex(text: str, items: Sequence[Evidence], keys: dict[str, str]) -> str:
    """The draft with [n] citations of papers written as \\cite{key}."""
    def replace(match: re.Match) -> str:
        number = int(match.group(1))
        item = items[number - 1] if 0 < number <= len(items) else None
        return f"~\\cite{{{keys[item.id]}}}" if item is not None and item.id in keys else match.group(0)
    return re.sub(r"\s?\[(\d+)\]", replace, text)


def draft_related_work(services: Services, query: related.QueryInfo, *, user: str | None = "local",
                       thoughts: bool = False, opts: LongformOptions | None = None,
                       progress: Callable[[str], None] | None = None) -> RelatedWorkDraft:
    """The whole draft without a UI."""
    draft = None
    for draft in stream_related_work(services, query, user=user, thoughts=thoughts, opts=opts,  # noqa: B007
                                     progress=progress):      # drained to its last value
        pass
    assert draft is not None            # stream_related_work yields at least once or raises
    return draft
