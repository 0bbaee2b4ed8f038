"""SlimPLM (methods.md §4): a small proxy model decides when and what to retrieve, then the main model answers once.

    question ──timeliness rule fires──────────────────────────────► retrieve with the question itself
        │
        proxy writes a heuristic answer â ──proxy fails, or no â─────► retrieve with the question itself
        │
        judge(question, â): known ──────────────────────────────────► no retrieval
        │ unknown, or anything unclear
        proxy decomposes â into (claim, verification query) pairs ──none/garbage──► retrieve with the question
        │
        judge(query, claim) for each pair; retrieve with the question and the queries of the pairs not judged
        known; dedupe the items
        │
    main model answers exactly once, with the references or without

The paper fine-tunes the judge and the rewriter (Llama2-7B); we prompt the proxy model for both (prompts.py,
"SlimPLM") and hold a grammar-obeying proxy to one word for the judge and to bounded "Claim: … Query: …" lines
for the decomposition. Every reading of the proxy's output fails safe: what is not clearly "known" retrieves.

The paper's judge is a trained classifier. A prompted 135M model is not one: it writes "known" for nearly every
question, recent papers it cannot know included, yet its probability of "unknown" is higher for those
(docs/slim-eval.md). So when the proxy can weigh its two words (the local model), the judge's verdict is
P(unknown) against a threshold (`SlimOptions.unknown_threshold`; the default 0.14 is the best over the dev set's
questions, picked on them; cross-validated folds chose 0.109-0.159, docs/slim-eval.md). An endpoint proxy keeps the
written word.

The paper's query rewriter returns queries drawn from the question itself beside those of the claims,
QR(x, â) = {q_x…, q_c…}, and the claim filter drops only claim queries. We have no trained rewriter for q_x, so the
question itself is that query: a question judged unknown is always searched with, and the claims add what the
draft suggests. (Searching with the claims alone missed the paper a question named whenever the draft was invented
around its title.)

Models and the retriever come in as arguments; nothing here knows about the UI, the stores or the settings.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

from copilot import grounding, prompts
from copilot.grounding import Checked
from copilot.llm import LLM, LLMError, Usage
from copilot.methods.thought_retriever import fit_budget
from copilot.prompts import SLIM_KNOWN, SLIM_UNKNOWN, RenderedPrompt, source_block
from copilot.records import ARXIV_ID, Evidence

# A retriever: (query, how many) → items, best first, each scored by its closeness to the query; called as
# (query, how many, question) for a query the proxy wrote when `SlimOptions.query_floor` is set: the items the query
# finds, each scored by its closeness to the question instead.
Retriever = Callable[..., list[Evidence]]

UNCLEAR = "unclear"             # a judge output that is neither word: treated as unknown (retrieve)
JUDGE_TOKENS = 8                # room for "unknown" in any tokenizer (SmolLM2 spends more than 4 tokens on it)
PROXY, REWRITE, JUDGE, MAIN = "proxy", "rewrite", "judge", "main"   # the roles whose cost is counted
ROLES = (PROXY, REWRITE, JUDGE, MAIN)

# Why a question was or was not answered with retrieval (SlimTrace.reason)
JUDGED_KNOWN = "judge: known"
# after "judge: unknown; " or "judge: unclear; " (an unclear verdict is read as unknown)
CLAIMS_ALL_KNOWN = "every claim judged known, retrieved with the question alone"
CLAIMS_UNKNOWN = "retrieved with the question and the claims not judged known"
NO_CLAIMS = "no usable claims, retrieved with the question"
FORCED = "forced by the timeliness rule"
BASELINE = "fixed by the options: {} retrieve (a baseline, the proxy not asked)"
PROXY_FAILED = "the proxy failed: always-retrieve with the question"
NO_DRAFT = "the proxy wrote no draft answer: always-retrieve with the question"


# --- the timeliness rule --------------------------------------------------------------------------------------
# The paper's rewriter marks a question "timely" when its answer depends on the current date, and a timely question
# is searched. A language model's knowledge stops at its training data, and this library exists to read papers
# newer than that, so we force retrieval, without asking the proxy, when the question
#   1. names an arXiv id or an arxiv.org link,
#   2. names a year (1990-2099) or a date (2025-03-18, "March 2025", "18 March"),
#   3. asks about recent work ("recent", "latest", "newest", "new papers", "this week", "last month", "today",
#      "state of the art", "SOTA", "currently", "nowadays", "so far"),
#   4. names a paper ("the paper", "this paper", "a paper titled/called/named", a quoted title of two or more
#      words, "et al.").
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
TIMELINESS_RULES: list[tuple[str, re.Pattern]] = [
    ("arxiv id", re.compile(rf"arxiv\.org/\S+|\barxiv:\s*\S+|(?<![\w.])(?:{ARXIV_ID.pattern})(?![\w.])", re.I)),
    ("date", re.compile(rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b{_MONTH}\.?\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?"
                        rf"(?:19|20)\d{{2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\b", re.I)),
    ("year", re.compile(r"(?<![\w.])(?:199\d|20\d\d)(?![\w.])")),
    ("recent work", re.compile(r"\b(?:recent(?:ly)?|latest|newest|new(?:ly published)? papers?|this (?:week|month|"
                               r"year)|last (?:week|month|year)|past (?:week|month|year)|today|yesterday|"
                               r"state[- ]of[- ]the[- ]art|sota|currently|nowadays|so far|up to date|"
                               r"up-to-date)\b", re.I)),
    ("named paper", re.compile(r"\b(?:the|this|that|a|an) (?:paper|preprint|article)\b|"
                               r"\b(?:titled|entitled|called|named)\s+[\"'“‘]|\bet al\b|"
                               r"[\"“][^\"”\n]{3,}?\s[^\"”\n]{2,}?[\"”]", re.I)),
]


def timeliness(question: str) -> tuple[str, str] | None:
    """(rule name, the words that matched) when the question must be answered from the library, else None."""
    for name, pattern in TIMELINESS_RULES:
        match = pattern.search(question or "")
        if match:
            return name, match.group(0).strip()
    return None


# --- reading the proxy's output, fail-safe ----------------------------------------------------------------------
_KNOWN_FORMS = {SLIM_KNOWN: SLIM_KNOWN, "known true": SLIM_KNOWN, "true": SLIM_KNOWN,
                SLIM_UNKNOWN: SLIM_UNKNOWN, "known false": SLIM_UNKNOWN, "false": SLIM_UNKNOWN}


def read_verdict(output: str) -> str:
    """SLIM_KNOWN or SLIM_UNKNOWN when the judge said exactly that word (or the paper's "Known (True/False)"),
    else UNCLEAR, which retrieves."""
    words = " ".join(re.findall(r"[a-z]+", (output or "").lower()))
    return _KNOWN_FORMS.get(words, UNCLEAR)


@dataclass
class Claim:
    text: str
    query: str
    verdict: str = ""              # SLIM_KNOWN | SLIM_UNKNOWN | UNCLEAR; "" while not judged
    judge_output: str = ""
    p_unknown: float | None = None  # the judge's probability of "unknown", when it was weighed
    retrieved_ids: list[str] = field(default_factory=list)

    @property
    def needs_retrieval(self) -> bool:
        return self.verdict != SLIM_KNOWN


_CLAIM_LINE = re.compile(r"^[\W\d_]*claim\s*\d*\s*[:.)\-]?\s*(?P<claim>.+?)\s*[;,|]?\s*\bquery\s*\d*\s*[:.)\-]?\s*"
                         r"(?P<query>.+?)\s*$", re.I)


_PLACEHOLDER = re.compile(r"<\s*(?:the\s+)?(?:claim|search\s+query|query)\s*>", re.I)


def _usable(text: str) -> bool:
    """At least two words of letters, and not the format's unfilled placeholder ("<the claim>")."""
    return len(re.findall(r"[A-Za-z]{2,}", text)) >= 2 and not _PLACEHOLDER.search(text)


def read_claims(output: str, max_claims: int = prompts.SLIM_MAX_CLAIMS) -> list[Claim]:
    """The (claim, query) pairs of the decomposition, one per "Claim: … Query: …" line; lines that are not of that
    shape, or hold fewer than two words on either side, are skipped; a query seen before is not repeated."""
    claims: list[Claim] = []
    seen: set[str] = set()
    for line in (output or "").splitlines():
        match = _CLAIM_LINE.match(line.strip())
        if not match:
            continue
        if not (_usable(match.group("claim")) and _usable(match.group("query"))):
            continue
        text, query = match.group("claim").strip(" .;<>"), match.group("query").strip(" .;<>")
        key = " ".join(query.lower().split())
        if key not in seen:
            seen.add(key)
            claims.append(Claim(text, query))
        if len(claims) == max_claims:
            break
    return claims


# --- the trace ----------------------------------------------------------------------------------------------------
@dataclass
class RoleCost:
    """Tokens and time one role spent on a question (the paper's Table 4 counts the same roles)."""
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def add(self, usage: Usage, seconds: float) -> None:
        self.calls += 1
        self.prompt_tokens += usage.prompt_tokens or 0
        self.completion_tokens += usage.completion_tokens or 0
        self.seconds += seconds


@dataclass
class SlimTrace:
    """Everything SlimPLM decided for one question, in the order it decided it."""
    question: str
    step: str = "started"              # the last step done: started, proxy, judge, claims, retrieved, answered
    retrieved: bool = False            # whether the main model got references
    decided_by: str = ""               # "judge" | "forced" | "proxy failure" | "always" | "never"
    reason: str = ""
    forced_rule: str = ""              # "<rule>: <matched words>" when the timeliness rule fired
    heuristic_answer: str = ""
    judge_output: str = ""
    verdict: str = ""                  # the question-level judgment: known | unknown | unclear | "" (not asked)
    p_unknown: float | None = None     # the question-level judge's probability of "unknown", when weighed
    decomposition: str = ""            # the rewriter's raw output
    claims: list[Claim] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)   # the queries actually retrieved with
    items: list[Evidence] = field(default_factory=list)
    proxy_error: str = ""
    answer: str = ""
    notes: list[str] = field(default_factory=list)
    costs: dict[str, RoleCost] = field(default_factory=lambda: {role: RoleCost() for role in ROLES})
    log_id: int | None = None          # set by whoever stores the finished trace

    @property
    def skipped(self) -> bool:
        """True when the main model answered without retrieval."""
        return not self.retrieved

    @property
    def main_calls(self) -> int:
        return self.costs[MAIN].calls

    def as_dict(self) -> dict:
        return {"question": self.question, "step": self.step, "skipped": self.skipped, "retrieved": self.retrieved,
                "decided_by": self.decided_by, "reason": self.reason, "forced_rule": self.forced_rule,
                "heuristic_answer": self.heuristic_answer, "judge_output": self.judge_output,
                "verdict": self.verdict, "p_unknown": self.p_unknown, "decomposition": self.decomposition,
                "claims": [asdict(claim) for claim in self.claims], "queries": self.queries,
                "items": [{"label": n, "id": item.id, "kind": item.kind, "title": item.title,
                           "score": round(item.score, 4), "query": item.metadata.get("slim_query", "")}
                          for n, item in enumerate(self.items, 1)],
                "proxy_error": self.proxy_error, "answer": self.answer, "notes": self.notes,
                "main_calls": self.main_calls, "log_id": self.log_id,
                "costs": {role: {**asdict(cost), "seconds": round(cost.seconds, 3)}
                          for role, cost in self.costs.items()}}


@dataclass(frozen=True)
class SlimOptions:
    top_k: int = 8                     # most references the main model gets
    per_query_k: int = 4               # items retrieved per query
    budget_tokens: int = 2000          # token budget of the references (thought_retriever.fit_budget)
    item_tokens: int | None = None     # each reference cut to this many tokens first
    proxy_tokens: int = 80             # most tokens of the heuristic answer
    claims_tokens: int = 160           # most tokens of the decomposition
    answer_tokens: int = 400           # most tokens of the main answer
    max_claims: int = prompts.SLIM_MAX_CLAIMS
    retrieval: str = "adaptive"        # "adaptive" (the method) | "always" | "never": the baselines of `eval slim`
    # A proxy that weighs its words says "unknown" when P(unknown) reaches this; None: the word it writes
    unknown_threshold: float | None = None
    # An item a query made from the proxy's draft finds is kept only when its closeness to the question reaches
    # this (issue #49: a garbled draft's query brought papers of other topics); None keeps what the queries find
    query_floor: float | None = None


# --- the steps ------------------------------------------------------------------------------------------------
def _call(llm: LLM, prompt: RenderedPrompt, cost: RoleCost, max_tokens: int, grammar: str | None) -> str:
    usage = Usage()
    started = time.perf_counter()
    try:
        return llm.complete(prompt, max_tokens=max_tokens, temperature=0.1,
                            grammar=grammar if llm.obeys_grammar else None, usage=usage)
    finally:
        cost.add(usage, time.perf_counter() - started)


def heuristic_answer(proxy: LLM, question: str, trace: SlimTrace, options: SlimOptions) -> str:
    return _call(proxy, prompts.SLIM_PROXY_ANSWER.render(question=question), trace.costs[PROXY],
                 options.proxy_tokens, prompts.plain_sentences_grammar()).strip()


@dataclass(frozen=True)
class Verdict:
    verdict: str                       # SLIM_KNOWN | SLIM_UNKNOWN | UNCLEAR
    output: str                        # what the judge wrote, or how its probability compared with the threshold
    p_unknown: float | None = None


def judge(proxy: LLM, question: str, answer: str, trace: SlimTrace, threshold: float | None = None) -> Verdict:
    """The judge on (question, answer); also used on (query, claim). With a threshold and a proxy that weighs its
    words, the verdict is P(unknown) ≥ threshold; otherwise the word the proxy writes."""
    prompt = prompts.SLIM_JUDGE.render(question=question, answer=answer)
    if threshold is None or not proxy.scores_options:
        output = _call(proxy, prompt, trace.costs[JUDGE], JUDGE_TOKENS, prompts.slim_judge_grammar())
        return Verdict(read_verdict(output), output.strip())
    usage, started = Usage(), time.perf_counter()
    try:
        scores = proxy.option_logprobs(prompt, (SLIM_KNOWN, SLIM_UNKNOWN), usage=usage)
    finally:
        trace.costs[JUDGE].add(usage, time.perf_counter() - started)
    p_unknown = 1.0 / (1.0 + math.exp(scores[SLIM_KNOWN] - scores[SLIM_UNKNOWN]))
    unknown = p_unknown >= threshold
    return Verdict(SLIM_UNKNOWN if unknown else SLIM_KNOWN,
                   f"P(unknown) {p_unknown:.3f} {'≥' if unknown else '<'} threshold {threshold:.3f}", p_unknown)


def decompose(proxy: LLM, question: str, answer: str, trace: SlimTrace, options: SlimOptions) -> list[Claim]:
    output = _call(proxy, prompts.SLIM_DECOMPOSE.render(question=question, answer=answer,
                                                        max_claims=options.max_claims),
                   trace.costs[REWRITE], options.claims_tokens, prompts.slim_claims_grammar(options.max_claims))
    trace.decomposition = output.strip()
    return read_claims(output, options.max_claims)


def retrieve(retriever: Retriever, queries: Sequence[str], options: SlimOptions,
             question: str | None = None) -> list[Evidence]:
    """Items of every query, deduplicated (an item found by several queries keeps its best score and the query
    that found it so), best first, at most `top_k`, within the token budget. Each item's metadata records the
    query under "slim_query". With `options.query_floor`, items are scored by their closeness to `question`, and
    an item of another query (one the proxy wrote) under the floor is left out."""
    best: dict[str, Evidence] = {}
    floor = options.query_floor if question else None
    for query in queries:
        proxied = floor is not None and query != question       # a query the proxy wrote
        found = retriever(query, options.per_query_k, question) if proxied else retriever(query, options.per_query_k)
        for item in found:
            if proxied and item.score < (floor or 0.0):
                continue
            if item.id not in best or item.score > best[item.id].score:
                best[item.id] = Evidence(item.id, item.kind, item.title, item.text, item.score,
                                         {**item.metadata, "slim_query": query})
    ranked = sorted(best.values(), key=lambda item: item.score, reverse=True)[:options.top_k]
    return fit_budget(ranked, options.budget_tokens, item_tokens=options.item_tokens)


def decide(question: str, proxy: LLM, retriever: Retriever, options: SlimOptions,
           trace: SlimTrace | None = None) -> Iterator[SlimTrace]:
    """Everything before the main model: yields the trace after each step; at the end `trace.items` holds the
    references (empty when retrieval was skipped)."""
    trace = trace or SlimTrace(question)
    forced = timeliness(question)
    if options.retrieval in ("always", "never"):
        trace.decided_by, trace.reason = options.retrieval, BASELINE.format(options.retrieval)
        queries = [question] if options.retrieval == "always" else []
    elif forced:
        trace.decided_by, trace.reason, trace.forced_rule = "forced", FORCED, f"{forced[0]}: {forced[1]}"
        queries = [question]
    else:
        try:
            queries = yield from _queries_from_proxy(question, proxy, trace, options)
        except LLMError as error:
            trace.proxy_error = str(error)[:300]
            trace.decided_by, trace.reason = "proxy failure", PROXY_FAILED
            queries = [question]
    trace.queries = list(dict.fromkeys(queries))
    trace.retrieved = bool(trace.queries)
    if trace.queries:
        trace.items = retrieve(retriever, trace.queries, options, question)
        by_query: dict[str, list[str]] = {}
        for item in trace.items:
            by_query.setdefault(item.metadata["slim_query"], []).append(item.id)
        for claim in trace.claims:
            claim.retrieved_ids = by_query.get(claim.query, []) if claim.needs_retrieval else []
    trace.step = "retrieved"
    yield trace


def _queries_from_proxy(question: str, proxy: LLM, trace: SlimTrace, options: SlimOptions):
    """The proxy's part: heuristic answer → judge → (unknown) claims → per-claim judge. Returns the queries to
    retrieve with: none when the question is judged known, else the question and the claims not judged known."""
    trace.heuristic_answer = heuristic_answer(proxy, question, trace, options)
    trace.step = "proxy"
    yield trace
    if not trace.heuristic_answer:          # nothing to judge: a judge asked about nothing could still say known
        trace.decided_by, trace.reason = "proxy failure", NO_DRAFT
        return [question]
    verdict = judge(proxy, question, trace.heuristic_answer, trace, options.unknown_threshold)
    trace.verdict, trace.judge_output, trace.p_unknown = verdict.verdict, verdict.output, verdict.p_unknown
    trace.decided_by = "judge"
    trace.step = "judge"
    yield trace
    if trace.verdict == SLIM_KNOWN:
        trace.reason = JUDGED_KNOWN
        return []
    trace.claims = decompose(proxy, question, trace.heuristic_answer, trace, options)
    judged = f"judge: {trace.verdict}; "
    if not trace.claims:
        trace.reason = judged + NO_CLAIMS
        return [question]
    for claim in trace.claims:
        verdict = judge(proxy, claim.query, claim.text, trace, options.unknown_threshold)
        claim.verdict, claim.judge_output, claim.p_unknown = verdict.verdict, verdict.output, verdict.p_unknown
    trace.step = "claims"
    yield trace
    unknown = [claim.query for claim in trace.claims if claim.needs_retrieval]
    trace.reason = judged + (CLAIMS_UNKNOWN if unknown else CLAIMS_ALL_KNOWN)
    return [question, *unknown]


# --- the main model, once ------------------------------------------------------------------------------------------
def main_prompt(question: str, items: Sequence[Evidence]) -> RenderedPrompt:
    if not items:
        return prompts.SLIM_ANSWER_DIRECT.render(question=question)
    blocks = "\n".join(source_block(str(n), item.text) for n, item in enumerate(items, 1))
    return prompts.SLIM_ANSWER_WITH_REFERENCES.render(question=question, sources=blocks)


def stream_main_answer(main: LLM, question: str, items: Sequence[Evidence], max_tokens: int,
                       usage: Usage) -> Iterator[str]:
    """The one main-model call. A grammar-obeying (small) model is held to statements that open with the
    reference they use ("Source [2] shows that …"), or to plain sentences when it has none."""
    grammar = None
    if main.obeys_grammar:
        grammar = prompts.answer_grammar(len(items)) if items else prompts.plain_sentences_grammar(3)
    text = ""
    for piece in main.stream(main_prompt(question, items), max_tokens=max_tokens, temperature=0.1,
                             grammar=grammar, usage=usage):
        text += piece
        yield piece
        if grammar and items and grounding.repeats_a_statement(text):   # a small model copying its first line
            return


def check_main_answer(text: str, items: Sequence[Evidence], quoted: bool = False) -> Checked:
    """The shared output checks (copilot.grounding.check): citations only of the references given, no loop, no
    echoed instructions, no invented links; a statement's label moves to the reference its words come from.
    `quoted`: the caller's answer writer quoted the references (the tiny profile), so no label moves."""
    system = (prompts.SLIM_ANSWER_WITH_REFERENCES if items else prompts.SLIM_ANSWER_DIRECT).system
    ids = [item.id for item in items]
    if quoted:                           # quotes (an evidence table) are attributed by construction: labels stay
        return grounding.check(grounding.ids_to_labels(text, ids), allowed=[str(n) for n in range(1, len(ids) + 1)],
                               source_texts=[item.text for item in items], instructions=[system])
    return grounding.check_chat_answer(text, ids, [item.text for item in items], [system])


AnswerWriter = Callable[[str, Sequence[Evidence], Usage], Iterator[str]]


def stream(question: str, *, proxy: LLM, main: LLM, retriever: Retriever,
           options: SlimOptions = SlimOptions(), answer_writer: AnswerWriter | None = None) -> Iterator[SlimTrace]:
    """SlimPLM for one question, yielding the trace after every step and every piece of the answer. The main
    model is called exactly once; its failure raises LLMError (the trace is then incomplete: do not store it).
    `answer_writer` (question, retrieved items, usage) replaces the main model's answer (the tiny profile quotes)."""
    trace = SlimTrace(question)
    yield from decide(question, proxy, retriever, options, trace)
    usage = Usage()
    started = time.perf_counter()
    write = answer_writer or (lambda text, items, used: stream_main_answer(main, text, items, options.answer_tokens,
                                                                           used))
    try:
        for piece in write(question, trace.items, usage):
            trace.answer += piece
            yield trace
    finally:
        if answer_writer is None:
            trace.costs[MAIN].add(usage, time.perf_counter() - started)
        else:                              # no model call: only the time it took
            trace.costs[MAIN].seconds += time.perf_counter() - started
    checked = check_main_answer(trace.answer.strip(), trace.items, quoted=answer_writer is not None)
    trace.answer = checked.text or prompts.CANNOT_ANSWER
    trace.notes = usage.notices + checked.notes + ([] if checked.text else ["Nothing was left after the checks."])
    trace.step = "answered"
    yield trace


def run(question: str, *, proxy: LLM, main: LLM, retriever: Retriever,
        options: SlimOptions = SlimOptions()) -> SlimTrace:
    """`stream` to the end: the finished trace, its answer checked."""
    trace = SlimTrace(question)
    for trace in stream(question, proxy=proxy, main=main, retriever=retriever, options=options):  # noqa: B007 - drained to its last value
        pass
    return trace
