"""Thought-Retriever's confidence step, UI-free: from (question, answer) to a thought T and its confidence c.

A capable model's answer is summarised by the thought prompt and its output read fail-safe (`judge_thought`); an
answer made of quotes (the tiny profile) becomes the quotes relevant to the question, without a model
(`quoted_thought`); an evidence table (the tiny profile's answer) becomes its rows, each paper's title and quote
(`table_thought`), searched by the vector of `vector_text`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from copilot import grounding, prompts
from copilot.llm import LLM
from copilot.methods import evidence_text, quotes
from copilot.prompts import CANNOT_ANSWER, source_block, strip_quoting_tags
from copilot.records import Evidence
from copilot.table import EvidenceTable


def is_cannot_answer(answer: str) -> bool:
    text = " ".join((answer or "").split()).lower()
    sentinel = CANNOT_ANSWER.lower().rstrip(".")
    if text.startswith(quotes.NO_SOURCE_ANSWERS.lower()):
        return True
    return not text or text.startswith(sentinel) or (sentinel in text and len(text) < len(sentinel) + 40)


# --- thought + confidence ----------------------------------------------------------------------------------
# The confidence step fails safe: the output of the thought prompt becomes a thought only when it is clearly a
# real passage. A small model mixes the two steps of the prompt, so "0" may come in any position or after any
# label ("Step 1: 0\nStep 2: N/A"), and it may echo the instructions, loop, or write almost nothing.
MIN_THOUGHT_WORDS = 8          # words of two or more letters: less cannot state a question and what was found
LOOP_NGRAM = 4                 # stricter than for a shown answer (grounding.LOOP_NGRAM): a thought is reused
ECHO_NGRAM = 6                 # this many words in a row from the prompt's own instructions is an echo

_NEGATIVE = r"(?:0|n/?a|none|no|false|invalid|nothing)"
_LABEL = r"(?:step\s*\d+|confidence|score|output|result|answer|label|c)"
_NEGATIVE_STEP = re.compile(   # a negative value at a line start or right after a label, as a whole value
    rf"(?:^|\b{_LABEL}\s*[:=)\-–—.]\s*)[\s\"'(\[]*{_NEGATIVE}[\"')\]]*"
    rf"(?=\s*$|[ \t]*(?:[.,;:!)–—]|-(?!\w))(?!\d)|\s+(?:step\b|[-–—]))", re.I | re.M)
_NOT_APPLICABLE = re.compile(r"(?<![\w/])n/a(?![\w/])", re.I)
_TRAILING_ZERO = re.compile(r"(?<![\w.,])0[\"')\]]*\s*[.!]?\s*$")
_CANNOT = re.compile(r"\b(?:cannot|can ?not|can't|unable to)\s+(?:be\s+)?answer|\b(?:not enough|insufficient|no)"
                     r"\s+(?:relevant\s+)?information\b|\bsources?\s+do(?:es)?\s+not\s+(?:answer|contain|say)", re.I)
_STEP_TWO = re.compile(r"\bstep\s*2\s*[:.)\-–—]?", re.I)
_STEP_LABEL = re.compile(r"^\s*(?:step\s*[12]\s*[:.)-]?|thought\s*:|knowledge(?: point)?\s*:|passage\s*:"
                         r"|summary\s*:)\s*",
                         re.I)
_LEADING_ONE = re.compile(r"^\s*[\"'`*]*1[\"'`*]*\s*(?:[\n.:)\-–—]|$)\s*")
_PREAMBLE = re.compile(r"^\s*here is (?:a|the|my)\b[^:\n]{0,50}:\s*", re.I)
_MARKUP = re.compile(r"[*`#]+")


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def instruction_text(prompt: prompts.Prompt | str) -> str:
    """A prompt's own wording, without the material filled into its placeholders."""
    text = prompt if isinstance(prompt, str) else f"{prompt.system}\n{prompt.user}"
    return re.sub(r"\{[^{}]*\}", " ", text)


def passage_problem(text: str, instructions: Sequence[str] = (), question: str = "",
                    min_words: int = MIN_THOUGHT_WORDS) -> str | None:
    """Why `text` is not a passage worth keeping in memory, or None when it is. Used for chat thoughts and for
    Trends summaries and ideas alike."""
    text = " ".join((text or "").split())
    if not text:
        return "too short"
    if is_cannot_answer(text) or _CANNOT.search(text):
        return "says the question cannot be answered"
    if _NOT_APPLICABLE.search(text) or _NEGATIVE_STEP.search(text) or _TRAILING_ZERO.search(text):
        return "a step answers 0 or N/A"
    if len(re.findall(r"[A-Za-z]{2,}", text)) < min_words:
        return "too short"
    if grounding.is_loop(text, LOOP_NGRAM):
        return "repeats itself (a loop)"
    if grounding.echoes(text, instructions, ECHO_NGRAM):
        return "echoes the prompt's instructions"
    if (question and _words(text) == _words(question)) or (text.endswith("?") and not re.search(r"[.!]\s", text)):
        return "only restates the question"
    return None


@dataclass
class ThoughtDraft:
    confidence: int                # 1: a real answer, summarised into `text`; 0: no thought
    text: str
    raw_output: str
    llm_called: bool
    reason: str = ""               # why confidence is 0


def judge_thought(output: str, question: str = "") -> ThoughtDraft:
    """Read the thought prompt's output (Fig. 13's two steps) and keep a thought only when it is clearly one."""
    whole = _MARKUP.sub("", strip_quoting_tags(output))
    rejected = ThoughtDraft(0, "", output, llm_called=True)
    if _NEGATIVE_STEP.search(whole) or _NOT_APPLICABLE.search(whole) or _TRAILING_ZERO.search(whole):
        rejected.reason = "a step answers 0 or N/A"
        return rejected
    if grounding.echoes(whole, [instruction_text(prompts.CHAT_THOUGHT)], ECHO_NGRAM):
        rejected.reason = "echoes the prompt's instructions"
        return rejected
    steps = _STEP_TWO.split(whole)
    text = steps[-1] if len(steps) > 1 else whole
    for _ in range(3):
        text = _LEADING_ONE.sub("", text, count=1)
        text = _STEP_LABEL.sub("", text, count=1)
        text = _PREAMBLE.sub("", text, count=1)
    text = " ".join(text.split())
    problem = passage_problem(text, question=question)
    if problem:
        rejected.reason = problem
        return rejected
    return ThoughtDraft(1, text, output, llm_called=True)


def parse_thought(output: str, question: str = "") -> tuple[int, str]:
    """(confidence, thought text) from the thought prompt's output; (0, "") unless it is clearly a passage."""
    draft = judge_thought(output, question)
    return draft.confidence, draft.text


def draft_thought(llm: LLM, question: str, answer: str, max_tokens: int = 160) -> ThoughtDraft:
    """(T, c) = LLM(Q, A). An answer that is the cannot-answer sentinel, or a loop, gets c = 0 without an LLM call."""
    if is_cannot_answer(answer):
        return ThoughtDraft(0, "", "", llm_called=False, reason="the answer says it cannot answer")
    if grounding.is_loop(answer, LOOP_NGRAM):
        return ThoughtDraft(0, "", "", llm_called=False, reason="the answer repeats itself (a loop)")
    rendered = prompts.CHAT_THOUGHT.render(question=question, answer=source_block("answer", answer))
    output = llm.complete(rendered, max_tokens=max_tokens, temperature=0.1)
    return judge_thought(output, question)


# --- thoughts from quotes (the tiny profile) ---------------------------------------------------------------------
# Cosine of the question and a quote below which the quote does not go into a thought: the answers' own relevance
# floor (measured in quotes.py). A thought quoted from an answer to another question falls below it.
THOUGHT_QUOTE_FLOOR = quotes.RELEVANCE_FLOOR
# Text that talks about itself or the exchange, not about the research: "The answer is not a real answer, but …".
_SELF_DESCRIBING = re.compile(
    r"\b(?:the|this|my|your|that) (?:answer|response|reply|question|thought|passage|summary)s? "
    r"(?:is|are|was|were|does|did|do|has|have|provides?|gives?|says?|contains?|seems?|cannot|can't)\b"
    r"|\bnot a (?:real|valid|proper|good) (?:answer|response)\b|\bas an ai\b|\bI (?:cannot|can't|don't know)\b",
    re.I)


def describes_itself(text: str) -> bool:
    return bool(_SELF_DESCRIBING.search(text or ""))


def quoted_thought(embed, question: str, answer: str, sources: Sequence[Evidence],
                   floor: float = THOUGHT_QUOTE_FLOOR) -> tuple[ThoughtDraft, list[tuple[str, str]]]:
    """(T, c) for an answer made of quotes, without a model: T is the quotes relevant to the question (their text,
    no labels or ids), c = 1 only when at least one is. → (draft, the direct sources of the quotes kept)."""
    rejected = ThoughtDraft(0, "", answer, llm_called=False)
    kinds = {item.id: item.kind for item in sources}
    by_label = {str(n): item for n, item in enumerate(sources, 1)}
    found = []
    for key, text in quotes.parse_quotes(answer):
        item_id = by_label[key].id if key in by_label else key
        text = quotes.strip_ids(text)
        if item_id in kinds and text and not describes_itself(text):
            found.append((item_id, text))
    if not found:
        rejected.reason = "no quote of a retrieved source (or only text about itself)"
        return rejected, []
    vectors = np.asarray(embed([question] + [text for _, text in found]), dtype=np.float32)
    kept = [pair for pair, vector in zip(found, vectors[1:]) if float(vector @ vectors[0]) >= floor]
    if not kept:
        rejected.reason = "its quotes are not relevant to the question"
        return rejected, []
    text = " ".join(f"{quotes.OPEN_QUOTE}{t}{quotes.CLOSE_QUOTE}" for _, t in kept)
    lineage = list(dict.fromkeys((item_id, kinds[item_id]) for item_id, _ in kept))
    return ThoughtDraft(1, text, answer, llm_called=False), lineage


# --- a thought made of an evidence table's rows (the tiny profile) -------------------------------------------
# One line per row: the paper's title, then its quoted sentences. The question is not in the text (a shared
# thought never shows another user's question); it is in the thought's row, and in what its vector is made of.
_ROW_LINE = re.compile(rf"^[^\n{quotes.OPEN_QUOTE}{quotes.CLOSE_QUOTE}]+: {quotes.OPEN_QUOTE}[^\n{quotes.CLOSE_QUOTE}]+"
                       rf"{quotes.CLOSE_QUOTE}$")
# What a row thought is embedded as. `eval thoughts-dev` measured the three (docs/thoughts-eval.md): its own text
# (titles and quotes) reached the thought from its dev question in 27 of 28 (question + text 26, the question alone
# 24), and its vector then holds nobody's question.
VECTOR_MODES = ("question", "question+quotes", "quotes")
ROW_THOUGHT_VECTOR = "quotes"


def is_row_thought(text: str) -> bool:
    """Whether a thought's text is an evidence table's rows (`table_thought`)."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return bool(lines) and all(_ROW_LINE.match(line) for line in lines)


def vector_text(question: str, text: str, mode: str = ROW_THOUGHT_VECTOR) -> str:
    """The text a thought's vector is made from: a row thought's per `mode`, any other thought's own text."""
    if not is_row_thought(text) or not (question or "").strip() or mode == "quotes":
        return text
    if mode == "question":
        return question
    if mode == "question+quotes":
        return f"{question}\n{text}"
    raise ValueError(f"a row thought is embedded as one of {', '.join(VECTOR_MODES)}, not {mode!r}")


# A row goes into the thought only when its quote is this close to the question (cosine, packaged MiniLM): the
# table's own floor is 0.40; a preferred table is preferred as a whole, and its weakest rows are mostly another
# topic's (eval thoughts-dev, docs/thoughts-eval.md).
ROW_THOUGHT_FLOOR = 0.45


def table_thought(table: EvidenceTable, answer: str, sources: Sequence[Evidence], embed=None, question: str = "",
                  floor: float = ROW_THOUGHT_FLOOR) -> tuple[ThoughtDraft, list[tuple[str, str]]]:
    """(T, c) for an evidence table, without a model: T is the table's rows (title: “quote”) whose quote is at least
    `floor` close to `question` (all rows without `embed`); c = 1 when a row is kept that quotes a paper of the
    retrieved items or one reached through a retrieved thought. → (draft, direct sources: each row's paper, or the
    thought it was reached through, in row order). `answer`: the table's text, kept as the draft's answer."""
    kinds = {item.id: item.kind for item in sources}
    found = []
    for row in table.rows:
        source = row.via or row.paper_id
        quote = f" {evidence_text.ELLIPSIS} ".join(quotes.strip_ids(q.shown) for q in row.quotes)
        if source in kinds and quote and not describes_itself(quote):
            found.append((f"{' '.join(row.title.split())}: {quotes.OPEN_QUOTE}{quote}{quotes.CLOSE_QUOTE}",
                          (source, kinds[source]), quote))
    if found and embed is not None and question.strip():
        vectors = np.asarray(embed([question] + [quote for _, _, quote in found]), dtype=np.float32)
        found = [row for row, vector in zip(found, vectors[1:]) if float(vector @ vectors[0]) >= floor]
    if not found:
        return ThoughtDraft(0, "", answer, llm_called=False, reason="no row quotes a retrieved source closely"), []
    return (ThoughtDraft(1, "\n".join(line for line, _, _ in found), answer, llm_called=False),
            list(dict.fromkeys(source for _, source, _ in found)))
