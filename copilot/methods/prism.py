"""PRISM (paper-to-paper retrieval): aspect queries written by the LLM, one ranked list each, fused by RRF.

From a query paper the LLM writes three aspect descriptions (research question, method, experiments), each
by its own prompt that says the other two aspects are covered elsewhere; the abstract is the fourth query.
Every query ranks candidates on its own; Reciprocal Rank Fusion (k=60) merges the lists. A single-call
JSON variant writes all three descriptions at once (cheaper, a little worse in the paper).

Beside the paper's method (`RANKINGS["prism"]`), rankings that a weak aspect writer cannot drag down
(docs/related-eval.md measures them): the title as a query of its own, a lexical (BM25) list, aspect queries made of
the abstract's own sentences (`extractive_aspects`, no LLM), a gate that drops an LLM description that is
off-topic, loops or echoes its instructions (`gate_descriptions`), and weighted RRF.

UI-free: the LLM, the embedding function, the search functions and the cache are passed in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from copilot import grounding, prompts
from copilot.llm import LLM, LLMError
from copilot.methods.fusion import RRF_K, reciprocal_rank_fusion
from copilot.store.caches import AspectCache  # the product passes services.aspect_cache; tests build one here

log = logging.getLogger(__name__)

ABSTRACT = "abstract"
TITLE = "title"
LEXICAL = "lexical"
ASPECTS = ("research_question", "method", "experiments")
ASPECT_LABELS = {"research_question": "Research question", "method": "Method", "experiments": "Experiments",
                 ABSTRACT: "Abstract", TITLE: "Title", LEXICAL: "Words (BM25)"}
SEPARATE = "separate"     # one LLM call per aspect (the paper's multi-agent setting)
JSON = "json"             # one LLM call, three JSON keys (the paper's base-agent variant)
MODES = (SEPARATE, JSON)
ASPECT_MAX_TOKENS = 96
DETAILED_ASPECT_MAX_TOKENS = 224      # a detailed paragraph of 4-6 sentences (a capable writer)
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
    text = re.sub(r"</?[A-Za-z][^<>]{0,40}>", " ", text)          # the small model's stray <p>, </pre>
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


def aspect_prompts(detailed: bool) -> dict[str, prompts.Prompt]:
    return prompts.PRISM_DETAILED_ASPECT_PROMPTS if detailed else prompts.PRISM_ASPECT_PROMPTS


def _prompt_fingerprint(mode: str, detailed: bool = False) -> str:
    """Changes when the prompt texts change, so cached descriptions from older prompts are not reused."""
    used = aspect_prompts(detailed).values() if mode == SEPARATE else [prompts.PRISM_ASPECTS_JSON]
    text = "\x1f".join(f"{p.system}\x1e{p.user}" for p in used)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _model_key(llm: LLM) -> str:
    info = llm.info
    return f"{info['backend']}/{info['model']}"


Progress = Callable[[str], None]


def _write_separately(llm: LLM, paper: QueryPaper, aspects: Sequence[str], max_tokens: int,
                      result: AspectSet, progress: Progress | None, detailed: bool = False) -> dict[str, str]:
    written = {}
    block = paper_block(paper)
    for n, aspect in enumerate(aspects, start=1):
        if progress:
            progress(f"writing the {ASPECT_LABELS[aspect].lower()} description ({n}/{len(aspects)})")
        prompt = aspect_prompts(detailed)[aspect].render(paper=block)
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
                     max_tokens: int | None = None, progress: Progress | None = None,
                     detailed: bool = False) -> AspectSet:
    """Write (or read from the cache) the three aspect descriptions of `paper`, at temperature 0: short ones, or
    with `detailed` (one call per aspect) a detailed paragraph each.

    A failed aspect is listed in `missing` and not cached, so a later call tries it again."""
    detailed = detailed and mode == SEPARATE
    if max_tokens is None:
        max_tokens = DETAILED_ASPECT_MAX_TOKENS if detailed else ASPECT_MAX_TOKENS
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    result = AspectSet()
    variant = f"{mode}:{max_tokens}:{_prompt_fingerprint(mode, detailed)}"
    key = (paper.content_hash, _model_key(llm), variant)
    cached = cache.get(*key) if cache else {}
    result.descriptions.update({a: clean_description(cached[a]) for a in ASPECTS if a in cached})
    result.from_cache = [a for a in ASPECTS if a in cached]
    todo = [a for a in ASPECTS if a not in cached]
    if not todo:
        return result
    if mode == SEPARATE:
        written = _write_separately(llm, paper, todo, max_tokens, result, progress, detailed)
    else:
        written = _write_as_json(llm, paper, todo, max_tokens, result, progress)
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


# --- rankings a weak aspect writer cannot drag down -------------------------------------------------------------
LLM_ASPECTS = "llm"                  # aspect queries: the LLM's descriptions, gated; the extractive one stands in
EXTRACTIVE_ASPECTS = "extractive"    # aspect queries: the title plus the abstract's sentences of that aspect
GATE_MIN_SIMILARITY = 0.5            # an LLM description less similar to the abstract than this is off-topic
ASPECT_WEIGHT = 0.5                  # each aspect list's RRF weight in the hybrid rankings (abstract, title, words: 1)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class RankingMethod:
    """Which ranked lists a ranking fuses, with their RRF weights, and where its aspect queries come from."""

    name: str
    label: str
    weights: Mapping[str, float]              # list name (ABSTRACT, TITLE, LEXICAL or an aspect) → RRF weight
    aspects: str | None = None                # LLM_ASPECTS, EXTRACTIVE_ASPECTS or None
    gate: bool = False                        # LLM descriptions pass gate_descriptions; extractive ones stand in

    @property
    def stand_ins(self) -> bool:
        """Whether an aspect without an (accepted) LLM description searches with its extractive query."""
        return self.gate or self.aspects == EXTRACTIVE_ASPECTS

    @property
    def uses_llm(self) -> bool:
        return self.aspects == LLM_ASPECTS

    @property
    def lists(self) -> tuple[str, ...]:
        return tuple(self.weights)


_HYBRID = {ABSTRACT: 1.0, TITLE: 1.0, LEXICAL: 1.0}
_ASPECTS_HALF = {a: ASPECT_WEIGHT for a in ASPECTS}
RANKINGS = {method.name: method for method in (
    RankingMethod("abstract", "abstract similarity (the baseline)", {ABSTRACT: 1.0}),
    RankingMethod("lexical", "shared words (BM25)", {LEXICAL: 1.0}),
    RankingMethod("hybrid", "abstract, title and shared words (BM25), fused by RRF", _HYBRID),
    RankingMethod("prism", "PRISM as published: the LLM's three aspect descriptions and the abstract, fused by RRF",
                  {**{a: 1.0 for a in ASPECTS}, ABSTRACT: 1.0}, LLM_ASPECTS),
    RankingMethod("prism-hybrid", "PRISM with the LLM's aspect descriptions (gated) plus abstract, title and "
                  "shared words, weighted RRF", {**_ASPECTS_HALF, **_HYBRID}, LLM_ASPECTS, gate=True),
    RankingMethod("prism-extractive", "PRISM with aspect queries taken from the abstract's own sentences plus "
                  "abstract, title and shared words, weighted RRF", {**_ASPECTS_HALF, **_HYBRID}, EXTRACTIVE_ASPECTS),
)}


# An abstract states its aspects in a few sentences (the shared corpus: at most 21); each one is embedded, so a text
# of thousands of one-letter "sentences" ("A. " * 3,300, within the row limits) took 5 s of a Related request.
MAX_ASPECT_SENTENCES = 40


def abstract_sentences(abstract: str) -> list[str]:
    """The abstract's first MAX_ASPECT_SENTENCES sentences."""
    found = [s.strip() for s in _SENTENCE_END.split((abstract or "").strip()) if s.strip()]
    return found[:MAX_ASPECT_SENTENCES]


def extractive_aspects(paper: QueryPaper, embed: Embed) -> dict[str, str]:
    """Aspect queries without an LLM: every sentence of the abstract goes to the aspect whose description
    (prompts.PRISM_ASPECT_PROTOTYPES) it is most similar to; an aspect's query is the title and its sentences.
    An aspect no sentence went to has no query."""
    sentences = abstract_sentences(paper.abstract)
    if not sentences:
        return {}
    vectors = np.asarray(embed([*(prompts.PRISM_ASPECT_PROTOTYPES[a] for a in ASPECTS), *sentences]))
    prototypes, sentence_vectors = vectors[:len(ASPECTS)], vectors[len(ASPECTS):]
    nearest = (sentence_vectors @ prototypes.T).argmax(axis=1)
    title = paper.title.strip()
    queries = {}
    for index, aspect in enumerate(ASPECTS):
        chosen = " ".join(s for s, n in zip(sentences, nearest) if n == index)
        if chosen:
            queries[aspect] = f"{title}. {chosen}" if title else chosen
    return queries


def gate_descriptions(aspects: AspectSet, paper: QueryPaper, embed: Embed,
                      min_similarity: float = GATE_MIN_SIMILARITY) -> dict[str, str]:
    """Move every description that loops, echoes its instructions or is off-topic (cosine to the title and abstract
    below `min_similarity`) from `aspects.descriptions` to `aspects.missing`; returns {aspect: why} of those."""
    rejected: dict[str, str] = {}
    texts = dict(aspects.descriptions)
    if not texts:
        return rejected
    vectors = np.asarray(embed([paper.abstract_query, *texts.values()]))
    for (aspect, text), vector in zip(texts.items(), vectors[1:]):
        short, long = prompts.PRISM_ASPECT_PROMPTS[aspect], prompts.PRISM_DETAILED_ASPECT_PROMPTS[aspect]
        similarity = float(vector @ vectors[0])
        if grounding.is_loop(text):
            rejected[aspect] = "the description repeats itself"
        elif grounding.echoes(text, [short.system, short.user, long.user, prompts.PRISM_ASPECTS_JSON.system]):
            rejected[aspect] = "the description repeats its instructions"
        elif similarity < min_similarity:
            rejected[aspect] = f"the description is off-topic (similarity {similarity:.2f} to the abstract)"
    for aspect, why in rejected.items():
        del aspects.descriptions[aspect]
        aspects.missing[aspect] = why
    return rejected


def ranking_queries(method: RankingMethod, paper: QueryPaper, llm_aspects: Mapping[str, str] | None = None,
                    extractive: Mapping[str, str] | None = None) -> dict[str, str]:
    """The text of each dense list `method` fuses (the lexical list is searched with the abstract query). Where the
    method has stand-ins, an aspect without an LLM description takes its extractive query."""
    queries: dict[str, str] = {}
    for name in method.lists:
        if name == ABSTRACT:
            queries[name] = paper.abstract_query
        elif name == TITLE and paper.title.strip():
            queries[name] = paper.title.strip()
        elif name in ASPECTS:
            text = (llm_aspects or {}).get(name) if method.aspects == LLM_ASPECTS else None
            if not text and method.stand_ins:
                text = (extractive or {}).get(name)
            if text:
                queries[name] = text
    return queries


LexicalSearch = Callable[[str], Sequence[str]]


def rank_with_method(method: RankingMethod, paper: QueryPaper, queries: Mapping[str, str], embed: Embed,
                     search: Search, lexical: LexicalSearch | None, k: int = RRF_K) -> Ranking:
    """One list per dense query (embedded together) and, when the method fuses it, the lexical list of the
    abstract query; weighted RRF. A list the method names but that could not be made (no title, no lexical
    index) is left out of the fusion."""
    names = [name for name in method.lists if name in queries]
    vectors: np.ndarray | list = embed([queries[name] for name in names]) if names else []
    lists = {name: list(search(vector)) for name, vector in zip(names, vectors)}
    if LEXICAL in method.weights and lexical is not None:
        lists[LEXICAL] = list(lexical(paper.abstract_query))
    return Ranking(reciprocal_rank_fusion(lists, k=k, weights=method.weights), lists)
