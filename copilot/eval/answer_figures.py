"""Two figures for every answer (issue #29): is it *supported*, and does it *answer the question*?

Supported — the one-line test: a sentence is supported when every word of it (lower-cased letters and digits;
citation labels, quote marks and the local grammar's "Source [n] <verb> that" opening left out) occurs in the
whole text (title + abstract) of a source it cites; a sentence that cites nothing is unsupported. The no-answer
and cannot-answer sentences are not counted. The answer's share of supported sentences is its figure.

Answers the question (dev questions built from one paper, `eval slim`): token-F1 against the reference (that
paper's proposal sentence), and whether the answer quotes that key sentence — it holds the whole sentence, or a
quote of it that covers at least KEY_COVER of its words in order.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from copilot.features.answers import answer_tables, full_texts, table_text
from copilot.methods import quotes
from copilot.methods.slim import Retriever, SlimTrace
from copilot.prompts import CANNOT_ANSWER
from copilot.services import Services
from copilot.table import EvidenceTable, verbatim

KEY_COVER = 0.6
_LABEL = re.compile(r"\[([^\[\]\n]{1,40})\]")
_OPENING = re.compile(r"\bsource \[[^\]]+\] (?:\w+ that|\w+)\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\[])")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", (text or "").lower())


def answer_sentences(text: str, table: EvidenceTable | None = None) -> list[str]:
    """An evidence table's rows (each quote under its paper's id); a quoted answer's quotes (one per line, with
    their label); otherwise the answer's sentences."""
    text = (text or "").strip()
    if table:
        return [f"[{row.paper_id}] " + " ".join(f"{quotes.OPEN_QUOTE}{q.shown}{quotes.CLOSE_QUOTE}" for q in row.quotes)
                for row in table.rows]
    if quotes.is_quoted_answer(text):
        return [line.strip() for line in text.split("\n") if line.strip()]
    return [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if s.strip()]


def sentence_supported(sentence: str, sources: dict[str, str]) -> bool:
    """The one-line test above; `sources`: label or id → that source's whole text."""
    cited = [key.strip() for group in _LABEL.findall(sentence) for key in re.split(r"[,;]", group)]
    texts = [sources[key] for key in cited if key in sources]
    if not texts:
        return False
    body = _LABEL.sub(" ", _OPENING.sub(" ", sentence))
    vocabulary = set(words(" ".join(texts)))
    return all(word in vocabulary for word in words(body))


def supported_share(answer: str, sources: dict[str, str], table: EvidenceTable | None = None) -> float | None:
    """Share of the answer's counted sentences that are supported; None when none is counted."""
    counted = [s for s in answer_sentences(answer, table)
               if not s.startswith(quotes.NO_SOURCE_ANSWERS) and CANNOT_ANSWER not in s]
    if not counted:
        return None
    return sum(sentence_supported(s, sources) for s in counted) / len(counted)


def label_sources(texts: Sequence[str], ids: Sequence[str] = ()) -> dict[str, str]:
    """Labels 1..n (and the ids, when given) → whole texts, for `supported_share`."""
    found = {str(n): text for n, text in enumerate(texts, 1)}
    found.update({item_id: text for item_id, text in zip(ids, texts)})
    return found


def row_papers(services: Services, table: EvidenceTable | None) -> dict[str, str]:
    """The papers an evidence table's rows quote: id → title and abstract (a row reached through a thought quotes
    a paper that is not itself among the retrieved items)."""
    ids = table.paper_ids if table else []
    return {p.id: f"{' '.join(p.title.split())}\n{p.abstract}" for p in services.store.get_papers(ids)}


def verbatim_quotes(services: Services, table: EvidenceTable | None) -> list[tuple[str, str, bool]]:
    """(paper id, quote, whether each of its quotes is still the slice of that paper's stored abstract it says it
    is) for every row."""
    if not table:
        return []
    abstracts = {p.id: p.abstract for p in services.store.get_papers(table.paper_ids)}
    return [(row.paper_id, " \u2026 ".join(q.shown for q in row.quotes),
             all(verbatim(q, abstracts.get(row.paper_id, "")) for q in row.quotes)) for row in table.rows]


def quotes_key(answer: str, key: str) -> bool:
    """Whether the answer holds the key sentence, or a quote covering KEY_COVER of its words in order."""
    key_words = words(key)
    if not key_words:
        return False
    joined = " " + " ".join(words(answer)) + " "
    if " " + " ".join(key_words) + " " in joined:
        return True
    key_joined = " " + " ".join(key_words) + " "
    for _, quote in quotes.parse_quotes(answer):
        quoted = words(quote)
        if quoted and " " + " ".join(quoted) + " " in key_joined and len(quoted) >= KEY_COVER * len(key_words):
            return True
    return False


def quoted_trace(services: Services, question: str, retriever: Retriever,
                 k: int) -> tuple[SlimTrace, EvidenceTable]:
    """The extractive strategy: the question's top-k papers, answered by their evidence table (features.answers)."""
    items = retriever(question, k)
    table = answer_tables(services, question, [items])[0]
    answer = table_text(table, items)
    return (SlimTrace(question, step="answered", retrieved=True, decided_by="always", items=items, answer=answer),
            table)


def answer_figures(services: Services, row: dict, trace: SlimTrace, table: EvidenceTable | None = None) -> dict:
    """The two figures: supported share, and (paper questions) whether the key sentence is quoted. `table`: the
    evidence table the answer is, when it is one."""
    texts = full_texts(services, trace.items)
    sources = label_sources(texts, [e.id for e in trace.items]) | row_papers(services, table)
    return {"supported": supported_share(trace.answer, sources, table),
            "key_quoted": quotes_key(trace.answer, row["answer"]) if row["gold"] else None}


# --- token-F1 ---------------------------------------------------------------------------------------------------
_STATEMENT_OPENING = re.compile(r"\bsource \[\d+\] \w+ that\b", re.I)     # the local model's "Source [2] shows that"
_ARTICLES = {"a", "an", "the"}


def answer_tokens(text: str) -> list[str]:
    """Lower-case words and numbers of a text, without articles, citation labels "[n]" and the local model's
    "Source [n] … that" openings."""
    text = re.sub(r"\[\d+\]", " ", _STATEMENT_OPENING.sub(" ", text or ""))
    return [word for word in re.findall(r"[a-z0-9]+", text.lower()) if word not in _ARTICLES]


def token_f1(prediction: str, reference: str) -> float:
    """Harmonic mean of token precision and recall, tokens counted with multiplicity (SQuAD's answer F1)."""
    predicted, expected = answer_tokens(prediction), answer_tokens(reference)
    if not predicted or not expected:
        return float(predicted == expected)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def mean_or_none(values: Sequence) -> float | None:
    values = [float(v) for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None
