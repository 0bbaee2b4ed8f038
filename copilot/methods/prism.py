"""PRISM (paper-to-paper retrieval): aspect queries written by the LLM, one ranked list each, fused by RRF.

From a query paper the LLM writes three aspect descriptions (research question, method, experiments), each
by its own prompt that says the other two aspects are covered elsewhere; the abstract is the fourth query.
Every query ranks candidates on its own; Reciprocal Rank Fusion (k=60) merges the lists. A single-call
JSON variant writes all three descriptions at once (cheaper, a little worse in the paper).

UI-free: the LLM, the embedding function, the search function and the cache are passed in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from copilot import prompts
from copilot.llm import LLM, LLMError
from copilot.methods.fusion import RRF_K, reciprocal_rank_fusion
from copilot.store.caches import AspectCache   # re-exported: callers build prism.AspectCache(db)

log = logging.getLogger(__name__)

ABSTRACT = "abstract"
ASPECTS = ("research_question", "method", "experiments")
ASPECT_LABELS = {"research_question": "Research question", "method": "Method", "experiments": "Experiments",
                 ABSTRACT: "Abstract"}
SEPARATE = "separate"     # one LLM call per aspect (the paper's multi-agent setting)
JSON = "json"             # one LLM call, three JSON keys (the paper's base-agent variant)
MODES = (SEPARATE, JSON)
ASPECT_MAX_TOKENS = 96
_JSON_KEY_ALIASES = {
    "research_question": ("research_question", "research_question_query", "research question", "motivation"),
    "method": ("method", "method_query", "methods", "methodology"),
    "experiments": ("experiments", "experiment_query", "experiment", "results", "experiments_query"),
}

Embed = Callable[[list[str]], np.ndarray]
Search = Callable[[np.ndarray], Sequence[str]]


@dataclass(frozen=True)
class QueryPaper:
    title: str
    abstract: str
    full_text: str = ""
    id: str | None = None

    @property
    def content_hash(self) -> str:
        text = "\x1f".join((self.title.strip(), self.abstract.strip(), self.full_text.strip()))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @property
    def abstract_query(self) -> str:
        """The fourth PRISM query, in the same shape as stored paper documents (title, blank line, abstract)."""
        return f"{self.title.strip()}\n\n{self.abstract.strip()}" if self.title.strip() else self.abstract.strip()


@dataclass
class AspectSet:
    """Aspect descriptions of one paper; `missing` maps an aspect to why it has no description."""

    descriptions: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    llm_calls: int = 0
    from_cache: list[str] = field(default_factory=list)


class AspectParseError(ValueError):
    """The JSON variant's output held no usable JSON object."""


def paper_block(paper: QueryPaper, max_chars: int = 6000) -> str:
    parts = [f"Title: {paper.title.strip()}" if paper.title.strip() else "", f"Abstract: {paper.abstract.strip()}"]
    if paper.full_text.strip():
        parts.append(f"Full text (excerpt): {paper.full_text.strip()}")
    text = "\n".join(p for p in parts if p)
    return prompts.source_block("query-paper", text[:max_chars])


def clean_description(text: str) -> str:
    """One paragraph: drop chat preambles, markdown headings and bullets, collapse whitespace."""
    text = re.sub(r"^\s*(sure|here is|here's)[^\n:]*:\s*", "", text.strip(), flags=re.I)
    text = re.sub(r"^\s*#+\s*", "", text, flags=re.M)
    text = re.sub(r"^\s*[-*•]\s+", "", text, flags=re.M)
    return re.sub(r"\s+", " ", text).strip()


def parse_aspect_json(text: str) -> dict[str, str]:
    """The JSON variant's reply → {aspect: description}. Tolerates fences and prose around the object and the
    paper's key names; raises AspectParseError when no JSON object with at least one aspect can be read."""
    candidates = re.findall(r"\{.*\}", text, flags=re.S) or [text]
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict):
            continue
        lowered = {str(key).strip().lower(): value for key, value in data.items()}
        found = {}
        for aspect, aliases in _JSON_KEY_ALIASES.items():
            value = next((lowered[a] for a in aliases if a in lowered), None)
            if isinstance(value, str) and clean_description(value):
                found[aspect] = clean_description(value)
        if found:
            return found
    raise AspectParseError("the model's reply held no JSON object with research_question/method/experiments keys")


def _prompt_fingerprint(mode: str) -> str:
    """Changes when the prompt texts change, so cached descriptions from older prompts are not reused."""
    used = prompts.PRISM_ASPECT_PROMPTS.values() if mode == SEPARATE else [prompts.PRISM_ASPECTS_JSON]
    text = "\x1f".join(f"{p.system}\x1e{p.user}" for p in used)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _model_key(llm: LLM) -> str:
    info = llm.info
    return f"{info['backend']}/{info['model']}"


Progress = Callable[[str], None]


def _write_separately(llm: LLM, paper: QueryPaper, aspects: Sequence[str], max_tokens: int,
                      result: AspectSet, progress: Progress | None) -> dict[str, str]:
    written = {}
    block = paper_block(paper)
    for n, aspect in enumerate(aspects, start=1):
        if progress:
            progress(f"writing the {ASPECT_LABELS[aspect].lower()} description ({n}/{len(aspects)})")
        prompt = prompts.PRISM_ASPECT_PROMPTS[aspect].render(paper=block)
        result.llm_calls += 1
        try:
            text = clean_description(llm.complete(prompt, max_tokens=max_tokens, temperature=0.0))
        except LLMError as error:
            result.missing[aspect] = f"LLM failed: {error}"
            continue
        if text:
            written[aspect] = text
        else:
            result.missing[aspect] = "the model returned an empty description"
    return written


def _write_as_json(llm: LLM, paper: QueryPaper, aspects: Sequence[str], max_tokens: int,
                   result: AspectSet, progress: Progress | None) -> dict[str, str]:
    if progress:
        progress("writing the three aspect descriptions (one JSON call)")
    prompt = prompts.PRISM_ASPECTS_JSON.render(paper=paper_block(paper))
    result.llm_calls += 1
    try:
        parsed = parse_aspect_json(llm.complete(prompt, max_tokens=max_tokens * 3, temperature=0.0))
    except (LLMError, AspectParseError) as error:
        reason = f"LLM failed: {error}" if isinstance(error, LLMError) else f"malformed JSON reply: {error}"
        for aspect in aspects:
            result.missing[aspect] = reason
        return {}
    for aspect in aspects:
        if aspect not in parsed:
            result.missing[aspect] = "the JSON reply had no such key"
    return {a: parsed[a] for a in aspects if a in parsed}


def describe_aspects(llm: LLM, paper: QueryPaper, cache: AspectCache | None = None, mode: str = SEPARATE,
                     max_tokens: int = ASPECT_MAX_TOKENS, progress: Progress | None = None) -> AspectSet:
    """Write (or read from the cache) the three aspect descriptions of `paper`, at temperature 0.

    A failed aspect is listed in `missing` and not cached, so a later call tries it again."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    result = AspectSet()
    variant = f"{mode}:{max_tokens}:{_prompt_fingerprint(mode)}"
    key = (paper.content_hash, _model_key(llm), variant)
    cached = cache.get(*key) if cache else {}
    result.descriptions.update({a: cached[a] for a in ASPECTS if a in cached})
    result.from_cache = [a for a in ASPECTS if a in cached]
    todo = [a for a in ASPECTS if a not in cached]
    if not todo:
        return result
    writer = _write_separately if mode == SEPARATE else _write_as_json
    written = writer(llm, paper, todo, max_tokens, result, progress)
    result.descriptions.update(written)
    if cache and written:
        cache.put(*key, written)
    result.descriptions = {a: result.descriptions[a] for a in ASPECTS if a in result.descriptions}
    return result


def prism_queries(paper: QueryPaper, aspects: AspectSet | Mapping[str, str]) -> dict[str, str]:
    """The query texts by name: each available aspect description, then the abstract."""
    descriptions = aspects.descriptions if isinstance(aspects, AspectSet) else aspects
    queries = {a: descriptions[a] for a in ASPECTS if descriptions.get(a)}
    queries[ABSTRACT] = paper.abstract_query
    return queries


@dataclass
class Ranking:
    """One fused ranking: (id, RRF score, {query name: rank}) best first, and every query's own list."""

    fused: list[tuple[str, float, dict[str, int]]]
    lists: dict[str, list[str]]


def rank_with_queries(queries: Mapping[str, str], embed: Embed, search: Search, k: int = RRF_K) -> Ranking:
    """Embed every query, let `search` rank candidates for each, and fuse the lists with RRF."""
    names = list(queries)
    vectors = embed([queries[name] for name in names])
    lists = {name: list(search(vector)) for name, vector in zip(names, vectors)}
    return Ranking(reciprocal_rank_fusion(lists, k=k), lists)


def rank_candidates(query_vector: np.ndarray, candidate_ids: Sequence[str], candidate_vectors: np.ndarray) -> list[str]:
    """All candidates by cosine to the query (vectors unit-normalised), best first; ties keep input order."""
    scores = np.asarray(candidate_vectors, dtype=np.float32) @ np.asarray(query_vector, dtype=np.float32)
    order = np.argsort(-scores, kind="stable")
    return [candidate_ids[i] for i in order]
