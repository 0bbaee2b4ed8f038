"""The sentences of a paper's full text (copilot.body) that a table row may quote, and the rule for which of them may
stand for the paper's own work (issue #48).

A paragraph, list item or footnote is split like an abstract (quotes.sentence_bounds: "et al.", "e.g.", "Fig. 3",
"Eq. (2)" and decimals do not end a sentence), a sentence too long to quote cut into bounded spans; a table row or a
caption is one span (bounded the same way). What the related work or the background says is other papers' work,
never this paper's finding: those sections are not quoted, nor the introduction's sentences that do not speak in
the paper's own voice.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from copilot.body import Body, Section
from copilot.methods import quotes
from copilot.store import lexical

MIN_WORDS = quotes.MIN_QUOTE_WORDS
# a table row states its numbers in few words ("Submissions Dataset | 41,596 | 34,641 | 83.2%"), and so does a list
# item ("Years: Years from 1776 to 2050"): one with a number is a span from this many words
TABLE_MIN_WORDS = 2
MAX_SENTENCES = 4000          # a body's spans kept at most (a 30-page paper has ~600)

# sections that report other work, the setting, or no finding at all
_NOT_FINDINGS = re.compile(r"\b(?:related\s+work|prior\s+work|previous\s+work|literature|background|preliminar\w*"
                           r"|acknowledge?ments?|funding|competing\s+interests|ethic\w*|impact\s+statement"
                           r"|author\s+contributions?|table\s+of\s+contents|references|bibliography"
                           r"|broader\s+impacts?|datasheet)\b", re.I)
_INTRODUCTION = re.compile(r"\bintroduction\b", re.I)
# a section title that carries its number: "4.2 Ablations", "III-B3 Training", "A Proofs", "Appendix B Prompts"
_NUMBERED = re.compile(r"^(?:Appendix\s+)?(?:\d+|[A-Z]|[IVXLC]+)(?:[.\-]\w+)*\s")
_OWN_VOICE = re.compile(r"\b(?:we|our|us|this\s+(?:paper|work|study|article))\b", re.I)
# a sentence that only says what a part of the paper does ("In this section, we first analyze the statistics of X.",
# "Section 4 describes the setup."): no finding, unless it states one (a "that" clause, a number)
_PART = r"(?:sub)?(?:section|chapter|appendix|part)"
_ANNOUNCES = (r"(?:\w+\s+)?(?:describes?|presents?|introduces?|details?|discuss(?:es)?|gives?|reports?|provides?"
              r"|outlines?|analy[sz]es?|summari[sz]es?|shows?|explains?|covers?|lists?)\b")
_SIGNPOST = re.compile(rf"^\W*(?:(?:in|within)\s+(?:this|the\s+(?:following|next|present))\s+{_PART}\b"
                       rf"|in\s+what\s+follows\b|(?:this|the\s+(?:following|next))\s+{_PART}\s+{_ANNOUNCES}"
                       rf"|(?:{_PART}|sec\.)\s*[A-Z0-9][\w.]*\s+{_ANNOUNCES})", re.I)
_STATES_SOMETHING = re.compile(r"\bthat\b|(?<![\w.])\d")


# a sentence that leans on the one before it is quoted with it: "As a result, we ran the Infinity experiments on A5000
# GPUs." does not say why without "An exception is the evaluation of the Infinity model, which requires
# FlashAttention, a feature not supported on V100." (anchored at the sentence's start: linear)
_LEANS_BACK = re.compile(r"^\W*(?:as\s+(?:a\s+(?:result|consequence)|such)|thus|therefore|hence|consequently"
                         r"|accordingly|for\s+(?:this|that)\s+reason|to\s+this\s+end|because\s+of\s+(?:this|that)"
                         r"|this|these|that|those|such|it|they|however|instead|in\s+contrast|in\s+particular"
                         r"|specifically|nevertheless|nonetheless)\b", re.I)
# for a question that asks why, the sentence after one that explains it ("… AERA's LLM chose ACTION1 on every run,
# missing the win. This identifies a concrete failure mode: …")
_EXPLAINS_BACK = re.compile(r"^\W*(?:(?:this|that|it)\s+(?:is|was)\s+(?:because|due\s+to|since|why)"
                            r"|(?:this|that)\s+(?:identifies|suggests|indicates|shows|means|reflects|explains"
                            r"|happens|occurs|arises|stems|comes)\b|because|the\s+(?:main\s+)?reasons?\b"
                            r"|due\s+to\s+(?:this|that))", re.I)
MAX_CONTEXT_CHARS = 700       # a quote with the sentence it leans on (or that explains it) is at most this long


@dataclass(frozen=True)
class BodySentence:
    start: int                # offsets into Body.text
    end: int
    passage: int              # index into Body.passages
    cut_before: bool = False  # a bounded piece of a longer sentence
    cut_after: bool = False


def body_sentences(body: Body) -> list[BodySentence]:
    """Every span of the body a quote may be, in reading order (offsets into `body.text`)."""
    found: list[BodySentence] = []
    text = body.text
    for index, passage in enumerate(body.passages):
        if passage.kind in ("table_row", "caption"):
            bounds = [(passage.start, passage.end)]
        else:
            bounds = [(passage.start + a, passage.start + b)
                      for a, b in quotes.sentence_bounds(text[passage.start:passage.end])]
        least = MIN_WORDS
        if passage.kind == "table_row" and re.search(r"\d", text[passage.start:passage.end]):
            least = TABLE_MIN_WORDS
        for start, end in bounds:
            for a, b, cut_before, cut_after in quotes.statement_pieces(text, start, end, quotes.MAX_SPAN_WORDS):
                fewest = TABLE_MIN_WORDS if passage.kind == "item" and re.search(r"\d", text[a:b]) else least
                if len(re.findall(r"[A-Za-z]{2,}", text[a:b])) >= fewest:
                    found.append(BodySentence(a, b, index, cut_before, cut_after))
                if len(found) >= MAX_SENTENCES:
                    return found
    return found


def quote_bounds(body: Body, start: int, end: int, passage: int, cut_before: bool,
                 cut_after: bool) -> tuple[int, int, bool, bool, int] | None:
    """Where a stored sentence may be quoted: (start, end, cut_before, cut_after, the fewest words it needs). A
    sentence holding curly quote marks (a “phrase”: shown inside quotation marks it would end the quote) is quoted
    as its first piece between them that is long enough, or not at all; a table row or list item with a number
    needs TABLE_MIN_WORDS words."""
    text = body.text
    least = TABLE_MIN_WORDS if body.passages[passage].kind in ("table_row", "item") and re.search(
        r"\d", text[start:end]) else MIN_WORDS
    if not re.search("[\u201c\u201d]", text[start:end]):
        return start, end, cut_before, cut_after, least
    for piece in re.finditer("[^\u201c\u201d]+", text[start:end]):
        a = start + piece.start() + len(piece.group()) - len(piece.group().lstrip())
        b = start + piece.start() + len(piece.group().rstrip())
        if len(re.findall(r"[A-Za-z]{2,}", text[a:b])) >= MIN_WORDS:
            return a, b, cut_before or a > start, cut_after or b < end, MIN_WORDS
    return None


def with_context(body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]], n: int,
                 why: bool = False) -> tuple[int, int]:
    """The first and last of `sentences` a quote of sentence `n` spans: the one before it too when `n` leans on it
    ("As a result, …", "However, …", "This …"), and for a why-question the one after it when that one explains it
    ("This is because …"); only within one paragraph, at most MAX_CONTEXT_CHARS, and never across curly quote
    marks (quote_bounds)."""
    text = body.text

    def joins(a: int, b: int) -> bool:
        first, last = sentences[a], sentences[b]
        return (first[2] == last[2] and body.passages[first[2]].kind not in ("table_row", "caption")
                and last[1] - first[0] <= MAX_CONTEXT_CHARS
                and not re.search("[\u201c\u201d]", text[first[0]:last[1]]))

    first = last = n
    if n > 0 and _LEANS_BACK.match(text[sentences[n][0]:sentences[n][1]]) and joins(n - 1, n):
        first = n - 1
    if why and n + 1 < len(sentences) and _EXPLAINS_BACK.match(
            text[sentences[n + 1][0]:sentences[n + 1][1]]) and joins(first, n + 1):
        last = n + 1
    return first, last


def may_state_finding(body: Body, sentence: BodySentence) -> bool:
    """Whether the sentence may be quoted as what the paper does or finds: not from related work, background,
    acknowledgements and the like; from the introduction only in the paper's own voice ("we show …")."""
    section = body.section_of(body.passages[sentence.passage])
    if section is None:
        return False          # before the first section: title and author blocks
    top = section.top or section.title
    if _NOT_FINDINGS.search(top) or _NOT_FINDINGS.search(section.title):
        return False
    if _INTRODUCTION.search(top):
        return bool(_OWN_VOICE.search(body.text[sentence.start:sentence.end]))
    return True


def is_signpost(text: str) -> bool:
    """Whether a sentence only announces what a part of the paper does ("In this section, we first analyze …"): such
    a sentence is never quoted as what the paper finds."""
    announced = _SIGNPOST.search(text)
    return announced is not None and not _STATES_SOMETHING.search(text, announced.end())


def section_label(body: Body, section: Section) -> str:
    """A section as a quote names it: its numbered title ("4.2 Ablations", "Appendix E.1 Prompting Strategy"), or for
    an unnumbered heading (LaTeX's \\paragraph) the numbered section it sits in first: "4.1 Datasets › Evaluation"."""
    if not section.anchor:
        return section.title
    own = _numbered_title(section)
    if own:
        return own
    parts = section.anchor.split(".")
    by_anchor = {s.anchor: s for s in body.sections if s.anchor}
    for n in range(len(parts) - 1, 0, -1):
        parent = by_anchor.get(".".join(parts[:n]))
        if parent is not None and (label := _numbered_title(parent)):
            return f"{label} \u203a {section.title}"
    return section.title


_APPENDIX_ANCHOR = re.compile(r"^A(\d{1,3})((?:\.S{2,3}\d{1,3})*)$")


def _numbered_title(section: Section) -> str:
    """The section's title with its number as a reader writes it, "" when it has none. LaTeXML's anchor says what
    the number is: a paragraph ("…Px1") has none, whatever its title begins with ("A component-level circuit."); an
    appendix ("A5.SS1") is "Appendix E.1", however its heading spelled the number (issue #59: "§-E1")."""
    anchor, title = section.anchor, section.title
    if anchor.rsplit(".", 1)[-1].startswith("Px"):
        return ""
    appendix = _APPENDIX_ANCHOR.match(anchor)
    if appendix is None:
        return title if _NUMBERED.match(title + " ") else ""
    top = int(appendix.group(1))
    number = (chr(ord("A") + top - 1) if top <= 26 else str(top)) + "".join(
        f".{int(part.lstrip('S'))}" for part in appendix.group(2).split(".")[1:] if int(part.lstrip("S")))
    lead = re.match(r"(?:Appendix\s+)?(\S+)\s*", title)
    if lead and re.sub(r"[^A-Za-z0-9]", "", lead.group(1)) == number.replace(".", ""):
        title = title[lead.end():]
    return f"Appendix {number} {title}".strip()


def sentence_terms(texts: Sequence[str]) -> list[list[str]]:
    """Each text's word stems without stop words (the library's BM25 tokens), kept with a body's sentences."""
    return lexical.tokenize(texts) if texts else []


# the stems of a question's asking words: rare in a paper's sentences, so they would weigh most, but they say what
# is asked, not about what ("How many epochs …": "epoch" is the word to find, not "how" or "mani")
ASKING = frozenset("how mani much what which who whom whose where when whi doe do did is are was were be been can "
                   "could would should will may might".split())
# the thing a how-much / what question asks for: "how many [unique terms]", "for how many [epochs]", "how large
# are the [molecule corpora]", "what [learning rate]", "which [model] serves …" (up to three words, cut at the first
# verb or preposition; its head noun, the last word, is the unit: "terms", "corpora", "rate")
_ASKED_UNIT = re.compile(r"\b(?:how\s+(?:many|much|large|big|long)(?:\s+(?:is|are|was|were|does|do|did))?"
                         r"(?:\s+(?:the|a|an|each|its|their))?|number\s+of|what|which)"
                         r"\s+((?:[A-Za-z][\w-]{0,40}\s+){0,2}[A-Za-z][\w-]{0,40})", re.I)
_UNIT_ENDS = re.compile(r"\b(?:is|are|was|were|does|do|did|has|have|in|on|of|for|to|by|with|at|from|that|and|or|"
                        r"the|a|an)\b.*", re.I | re.S)
_TOKEN = re.compile(r"\w+")
_NUMBER_TOKEN = re.compile(r"\b\d")
_HOW_WHAT = re.compile(r"\bhow\s+(large|big|long|short|small|high|low|fast|slow|quick|quickly|well|good|bad|often|far"
                       r"|deep|wide|strong|accurate|close|old|heavy|expensive|costly|frequent|frequently)\b", re.I)
CAPTION_PENALTY = 0.1         # a figure's caption describes the figure; the text states what it shows
WORDS_WEIGHT = 1.0            # a sentence's bonus for holding all of the question's words (weighted by rarity)
KNOWN_WEIGHT = 0.5            # a question word of the paper's title or abstract names the paper, not the answer
SECTION_WEIGHT = 0.2          # …and for its section path holding them
UNIT_BONUS = 0.1              # …and for stating a number beside what the question asks the amount of
NUMBER_NEAR = 3               # words between a number and the asked unit: "8,700 diverse font types", "epochs: 4"


@functools.lru_cache(maxsize=1)
def _stemmer():
    # the library index's stemmer (store.lexical), so a word stems as in `terms`
    import Stemmer

    return Stemmer.Stemmer("english")


def asked_units(question: str) -> frozenset[str]:
    """The stems of what a question asks the amount or name of ("How many epochs …" → {"epoch"})."""
    words = " ".join((_UNIT_ENDS.sub("", m.group(1)).split() or [""])[-1]      # the phrase's head: its last word
                     for m in _ASKED_UNIT.finditer(question[:2000]))
    return frozenset(sentence_terms([words])[0]) - ASKING if words.strip() else frozenset()


def unit_numbers(question: str, texts: Sequence[str], terms: Sequence[frozenset[str]],
                 headers: Sequence[frozenset[str]] = ()) -> np.ndarray:
    """For each sentence, 1 when it states a number within NUMBER_NEAR words of what the question asks the amount
    of ("2 million samples", "trained for 4 epochs", "learning rate: 1e-7"), or is a table row with a number under
    a header that names it (`headers`: header_terms), else 0."""
    units = asked_units(question)
    found = np.zeros(len(texts), dtype=np.float32)
    if not units:
        return found
    stem = _stemmer().stemWord
    for n, (text, held) in enumerate(zip(texts, terms)):
        if n < len(headers) and headers[n] & units and not held & units and _NUMBER_TOKEN.search(text):
            found[n] = 1.0
        if not held & units:
            continue
        tokens = _TOKEN.findall(text)
        numbers = [i for i, token in enumerate(tokens) if token[0].isdigit()]
        if numbers and any(stem(token.lower()) in units and any(0 < abs(i - j) <= NUMBER_NEAR for j in numbers)
                           for i, token in enumerate(tokens)):
            found[n] = 1.0
    return found


def question_bonus(question: str, body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]],
                   terms: Sequence[frozenset[str]], known: str = "") -> np.ndarray:
    """Each stored sentence's bonus over its cosine to the question: WORDS_WEIGHT × its share of the question's
    words (an embedding of a long question misses the sentence that states "learning rate 1e-4, weight decay
    0.01"; a table row holds its header's words too), SECTION_WEIGHT × the share its section path holds (the
    words of `known`, the paper's title and abstract, weigh KNOWN_WEIGHT in both: they name the paper, not the
    answer), UNIT_BONUS when it states a number beside what the question asks the amount of ("for how many epochs"
    → "4 epochs"), less CAPTION_PENALTY for a caption."""
    bonus = np.zeros(len(sentences), dtype=np.float32)
    if len(terms) == len(sentences):
        headers = header_terms(body, sentences)
        named = frozenset(sentence_terms([known[:5000]])[0]) if known.strip() else frozenset()
        bonus += WORDS_WEIGHT * word_shares(question, [t | h for t, h in zip(terms, headers)], named)
        bonus += SECTION_WEIGHT * word_shares(question, section_terms(body, sentences), named)
        bonus += UNIT_BONUS * unit_numbers(question, [body.text[s[0]:s[1]] for s in sentences], terms, headers)
    return bonus - CAPTION_PENALTY * np.array([body.passages[s[2]].kind == "caption" for s in sentences],
                                              dtype=np.float32)


def section_terms(body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]]) -> list[frozenset[str]]:
    """Each sentence's section path as word stems ("5.9 Model Capability × Exploration › The counter-intuitive
    result" under "5 Experiments"): a question about "the model-size by exploration ablation" names the section
    its answer is in more often than the answer's own words."""
    keys = list(dict.fromkeys(body.passages[s[2]].section for s in sentences))
    paths = [f"{section.top} {section_label(body, section)}"[:1000] if (section := body.sections[key]
             if 0 <= key < len(body.sections) else None) else "" for key in keys]
    stems = dict(zip(keys, (frozenset(t) for t in sentence_terms(paths)))) if keys else {}
    return [stems[body.passages[s[2]].section] for s in sentences]


def header_terms(body: Body, sentences: Sequence[tuple[int, int, int, bool, bool]]) -> list[frozenset[str]]:
    """For a sentence that is a table row, the word stems of its table's header (the first row of its run of rows,
    when that row states no number): "Playground Dataset | 560,161 | 43,295 | 7.7%" is about "Total Prompts |
    Successful Prompts | Success Rate"; an empty set for any other sentence."""
    passages = body.passages
    header: dict[int, int] = {}               # a table row's passage → its header row's passage (or -1)
    first = -1
    for n, passage in enumerate(passages):
        if passage.kind != "table_row":
            first = -1
            continue
        if first < 0:
            first = n if not re.search(r"\d", body.text[passage.start:passage.end]) else -2
        header[n] = first if first != n else -1
    texts = {h: body.text[passages[h].start:passages[h].end][:1000] for h in set(header.values()) if h >= 0}
    stems = dict(zip(texts, (frozenset(t) for t in sentence_terms(list(texts.values()))))) if texts else {}
    return [stems.get(header.get(s[2], -1), frozenset()) for s in sentences]


def asked_words(question: str) -> frozenset[str]:
    """The stems of a question's words that say what it is about: not its asking words, nor the word that says
    what kind of amount it asks ("how *large* are the corpora": "large" is in every "the gap is large")."""
    if not question.strip():
        return frozenset()
    kinds = " ".join(m.group(1) for m in _HOW_WHAT.finditer(question[:2000]))
    return frozenset(sentence_terms([question[:2000]])[0]) - ASKING - (
        frozenset(sentence_terms([kinds])[0]) if kinds else frozenset())


def word_shares(question: str, terms: Sequence[frozenset[str]], known: frozenset[str] = frozenset()) -> np.ndarray:
    """For each sentence, the share of the question's words it holds, each word weighted by how rare it is in the
    body (its inverse sentence frequency): "weight decay" counts for more than the paper's own name, which most of
    its sentences hold. 0 for all when the body holds none of the question's words. Linear in the body's terms (a
    set intersection per sentence), however long the question."""
    asked = asked_words(question)
    shares = np.zeros(len(terms), dtype=np.float32)
    if not asked or not terms:
        return shares
    held = [t & asked for t in terms]
    counts: dict[str, int] = {}
    for words in held:
        for word in words:
            counts[word] = counts.get(word, 0) + 1
    weights = {word: math.log((len(terms) + 1) / (n + 0.5)) * (KNOWN_WEIGHT if word in known else 1.0)
               for word, n in counts.items()}
    total = sum(weights.values())
    if total <= 0:
        return shares
    for n, words in enumerate(held):
        shares[n] = sum(weights[word] for word in words) / total
    return shares


def best_quotes(ranked: Sequence[int], scores: Sequence[float], relevance: np.ndarray, vectors: np.ndarray,
                most: int, floor: float, on_scores: bool) -> list[int]:
    """Of a row's body spans (`ranked`, best score first), the best and up to `most` - 1 more whose score
    (`on_scores`) or cosine to the question clears `floor`, none a near copy (cosine 0.9) of one chosen."""
    chosen = [ranked[0]]
    for n in ranked[1:]:
        if len(chosen) >= most:
            break
        if (scores[n] if on_scores else relevance[n]) >= floor and all(
                float(vectors[n] @ vectors[m]) < 0.9 for m in chosen):
            chosen.append(n)
    return chosen
