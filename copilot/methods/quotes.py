"""Extractive answers: every sentence a reader sees is a quote of a retrieved source, chosen by the embedder.

On the tiny model profile the model writes nothing a reader sees (a 135M model's sentences read as grounded and
are not). An answer is instead a few quoted sentences (or bounded spans) of the retrieved titles, abstracts and
thoughts, each under its neutral label: `[2] “We propose …”`.

  1. split every source into sentences (`split_sentences`); a sentence too long to quote (an abstract without
     sentence punctuation) is cut into bounded spans at clause marks, else at word counts;
  2. drop candidates that only restate the question (a title the question names) or are too short to say much;
  3. embed all candidates in one batch; relevance = cosine to the question, plus a share of the cosine of the
     whole source (a sentence of the paper the question is about beats a similar sentence elsewhere);
  4. pick by maximal marginal relevance (MMR) — relevance minus similarity to what is already picked, and a
     penalty for a source already quoted — while relevance clears the floor and stays near the best;
  5. no candidate clears the floor: one sentence says none of the retrieved papers answers, and lists the nearest.

Thought texts may hold raw ids ("[2503.16965]", "[T0a1b2c3d4e]") from older thoughts: they are stripped, so a
quote never shows an id that could tell the blinded sides apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from copilot.methods.evidence_text import CLOSE_QUOTE, OPEN_QUOTE, is_table
from copilot.records import ARXIV_ID_PATTERN

MAX_SPAN_WORDS = 45          # a longer "sentence" is cut into spans of at most this many words
MAX_SENTENCE_FACTOR = 2      # … unless a piece would lose its subject: then a sentence this many times longer is whole
MIN_QUOTE_WORDS = 5          # shorter candidates say too little to answer anything
RESTATES_SHARE = 0.8         # a candidate whose content words are this much in the question only restates it
MAX_QUOTES = 3
SOURCE_WEIGHT = 0.3          # share of the whole source's cosine added to a sentence's own
MMR_LAMBDA = 0.7             # relevance vs novelty in MMR
SAME_SOURCE_PENALTY = 0.05   # a second quote of one source must beat a first quote of another by this much
# Relevance floor (cosine of question and sentence, before the source share): measured with the packaged MiniLM on
# 2,055 real abstracts, top 8 papers per question (docs/extractive.md): the best sentence scored 0.59-0.92 for the
# 20 bench research questions and 0.51-0.92 for the 55 dev paper questions; for 12 questions about cooking, sport,
# gardening and the like 0.20-0.55 (8 of 12 below 0.45; the two above quote a paper on dwarf tomatoes and one
# on trained dogs).
RELEVANCE_FLOOR = 0.45
KEEP_WITHIN = 0.15           # a further quote must score at least the best one minus this

NO_SOURCE_ANSWERS = "None of the retrieved papers answers this"

# an abbreviation or an initial before a full stop does not end a sentence; searched in a bounded tail only
_ABBREVIATION_END = re.compile(r"\b(?:e\.g|i\.e|et al|etc|vs|cf|Fig|Eq|Sec|Tab|approx|resp|w\.r\.t)\.$", re.I)
_INITIAL_END = re.compile(r"\b[A-Z]\.$")
_ABBREVIATION_TAIL = 12       # longer than the longest abbreviation ("approx.")
# a sentence ends at . ! or ? and the closing marks after it ('…(called FastDec.) Experiments' keeps its ")"),
# before white space and what may open the next one
_SENTENCE_END = re.compile(r"(?<=[.!?])(?P<close>[\"')\]]*)\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"\S+")
_BRACKET = re.compile(r"[()\[\]]")
_CLAUSE_MARKS = ";:,"         # where a sentence too long to quote is cut; a piece never ends on one
BRACKET_REACH = 300           # a sentence end this far inside an open bracket ends the sentence (it was never closed)
# An id mark: a bracket of citations only (labels 1-999, arXiv or thought ids; "[0, 1]" or "[sic]" are not), an
# arXiv id in parentheses or after "arXiv:", a thought id. A quote keeps every other character as it was written.
# Each mark takes the blanks before it, starting where their run starts (tried from every tab of a long run of tabs,
# the run was read again from each).
_CITED = rf"(?:(?:{ARXIV_ID_PATTERN})(?:v\d+)?|T[0-9a-f]{{10}}|[1-9]\d{{0,2}})"
_ID_MARK = re.compile(rf"(?<![ \t])[ \t]*\[\s*{_CITED}(?:\s*[,;]\s*{_CITED})*\s*\]"
                      rf"|(?<![ \t])[ \t]*\((?:arxiv:\s*)?(?:{ARXIV_ID_PATTERN})(?:v\d+)?\)"
                      rf"|(?<![ \t])[ \t]*arxiv:\s*(?:{ARXIV_ID_PATTERN})(?:v\d+)?"
                      r"|(?<![ \t])[ \t]*\bT[0-9a-f]{10}\b", re.I)
_QUOTE_MARKS = re.compile("[\u201c\u201d]")
_STOP = frozenset("a an the of in on for to and or with by from as at is are was were be this that these those "
                  "what which how does do did can paper papers propose proposes study studies".split())


@dataclass(frozen=True)
class Quote:
    source: int                 # index of the item quoted (its label is source + 1)
    text: str
    relevance: float            # cosine of question and sentence

    @property
    def label(self) -> str:
        return str(self.source + 1)

    def shown(self) -> str:
        return f"[{self.label}] {OPEN_QUOTE}{self.text}{CLOSE_QUOTE}"


def drop_ids(text: str) -> str:
    """The text without citation brackets and raw arXiv or thought ids (a thought outlives the turn's labels);
    nothing else of it changes (an interval "[0, 1]" stays)."""
    return _ID_MARK.sub("", text or "")


def strip_ids(text: str) -> str:
    """The text without citation brackets and raw arXiv or thought ids, trimmed."""
    return drop_ids(text).strip()


def _word_depths(text: str, words: Sequence[tuple[int, int]]) -> list[int]:
    """How many brackets are open after each word (a close without its open counts for nothing: "1) first")."""
    depths, depth = [], 0
    for a, b in words:
        for mark in _BRACKET.finditer(text, a, b):
            depth = depth + 1 if mark.group() in "([" else max(0, depth - 1)
        depths.append(depth)
    return depths


def _outside_cut(depths: list[int], first: int, last: int) -> int:
    """Where a piece of words[first:last] too long for a clause ends: after the latest word of its second half that
    leaves no bracket open, else at `last`."""
    for end in range(last, first + (last - first) // 2, -1):
        if depths[end - 1] == 0:
            return end
    return last


def bounded_bounds(text: str, start: int, end: int, max_words: int) -> list[tuple[int, int]]:
    """(start, end) offsets into `text` of the spans of its sentence text[start:end]: the sentence itself when it has
    at most `max_words` words, else pieces cut after clause marks (; : ,) outside brackets, a clause too long cut by
    word count (where no bracket is open, if its second half has such a place). A piece never ends on its clause mark
    (issue #49: "(CAPTURe),"). Linear in the sentence's length."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text, start, end)]
    if len(words) <= max_words:
        return [(words[0][0], words[-1][1])] if words else []
    depths = _word_depths(text, words)
    pieces: list[tuple[int, int]] = []          # word index ranges [first, last)
    first = clause_start = 0
    for n in range(len(words)):
        if n < len(words) - 1 and (text[words[n][1] - 1] not in _CLAUSE_MARKS or depths[n]):
            continue
        clause_end = n + 1                       # the clause is words[clause_start:clause_end]
        if clause_start > first and clause_end - first > max_words:
            pieces.append((first, clause_start))
            first = clause_start
        while clause_end - first > max_words:
            cut = _outside_cut(depths, first, first + max_words)
            pieces.append((first, cut))
            first = cut
        clause_start = clause_end
    if first < len(words):
        pieces.append((first, len(words)))
    bounds = []
    for a, b in pieces:
        begin, stop = words[a][0], words[b - 1][1]
        if text[stop - 1] in _CLAUSE_MARKS and stop - 1 > begin:
            stop = begin + len(text[begin:stop - 1].rstrip())
        bounds.append((begin, stop))
    return bounds


# A piece cut out of a longer sentence is quoted on its own only when it reads as a statement: it opens with a subject
# (a name, a number, or one of these words) and holds a verb after it. "where reasoning continues …", "specifically
# designed to determine …" and "and (2) a hierarchical evaluation pipeline" lost their subject (issue #59).
_SUBJECT_OPENERS = frozenset("we it they this these those our its their the a an each every both all most many some "
                             "such one he she there i".split())
_ENUMERATION = re.compile(r"\(?[0-9ivx]{1,4}[).]\s+", re.I)
_VERB = re.compile(r"\b(?:is|are|was|were|be|been|being|has|have|had|can|could|will|would|may|might|must|should|"
                   r"shall|does|do|did|[a-z]{3,}(?:s|ed))\b")


def reads_alone(piece: str) -> bool:
    """Whether a piece of a sentence reads as a statement on its own: subject first (a capitalised word, a number, or
    a pronoun or determiner such as "we", "the", "this"), then a verb."""
    text = _ENUMERATION.sub("", piece.strip(), count=1) if piece.strip().startswith("(") else piece.strip()
    first, _, rest = text.partition(" ")
    first = first.strip("\"'([")
    if not first or not rest:
        return False
    opens = first[0].isupper() or first[0].isdigit() or first.lower() in _SUBJECT_OPENERS
    return opens and first.lower() not in _NOT_SUBJECTS and bool(_VERB.search(rest))


# capitalised, yet not a subject: a piece opening with these continues the sentence before it
_NOT_SUBJECTS = frozenset("and or but nor so yet then which who whom whose where when while whereas although though "
                          "because since if unless until as than that to for of in on at by with from into via "
                          "without within through after before during including specifically".split())


def statement_pieces(text: str, start: int, end: int, max_words: int) -> list[tuple[int, int, bool, bool]]:
    """(start, end, cut_before, cut_after) of the quotable pieces of the sentence text[start:end]: its bounded pieces
    (`bounded_bounds`) when each one after the first reads alone (`reads_alone`); else the whole sentence when it
    holds at most MAX_SENTENCE_FACTOR × `max_words` words; else the first piece and the others that read alone
    (issue #59: "… “where reasoning continues even after reaching a confident answer.”")."""
    pieces = bounded_bounds(text, start, end, max_words)
    last = len(pieces) - 1
    flagged = [(a, b, n > 0, n < last) for n, (a, b) in enumerate(pieces)]
    if all(reads_alone(text[a:b]) for a, b in pieces[1:]):
        return flagged
    if len(text[pieces[0][0]:pieces[-1][1]].split()) <= MAX_SENTENCE_FACTOR * max_words:
        return [(pieces[0][0], pieces[-1][1], False, False)]
    return [piece for piece in flagged if not piece[2] or reads_alone(text[piece[0]:piece[1]])]


def statements(text: str, max_words: int = MAX_SPAN_WORDS) -> list[str]:
    """`split_sentences`, keeping only pieces that can be quoted on their own (`statement_pieces`), white space
    folded: what an extractive answer quotes."""
    text = text or ""
    return [" ".join(text[a:b].split()) for start, end in sentence_bounds(text)
            for a, b, _, _ in statement_pieces(text, start, end, max_words)]


def _bounded(sentence: str, max_words: int) -> list[str]:
    """A sentence of at most `max_words` words as it is; a longer one cut at clause marks, then by word count."""
    return [" ".join(sentence[a:b].split()) for a, b in bounded_bounds(sentence, 0, len(sentence), max_words)]


def sentence_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets into `text` (as given: its white space kept) of its sentences, trimmed. A sentence ends
    at . ! or ? and any closing marks after it, before white space and a capital, digit or opening mark, but not
    after an abbreviation ("e.g.", "et al.") or an initial, nor inside a bracket opened at most BRACKET_REACH
    characters before ("(CheckThat! 2024)", issue #49; a bracket never closed is a typo). Linear: each character is
    read for brackets once, and only a bounded tail before each candidate end for an abbreviation (a text of 3,300
    "A. " took 14 s when the whole head was searched at each)."""
    found: list[tuple[int, int]] = []
    start = read = depth = opened = 0
    for match in _SENTENCE_END.finditer(text):
        stop = match.start()
        end = stop + len(match.group("close"))
        for mark in _BRACKET.finditer(text, read, end):
            if mark.group() in "([":
                opened = mark.start() if depth == 0 else opened
                depth += 1
            else:
                depth = max(0, depth - 1)
        read = end
        tail = text[max(start, stop - _ABBREVIATION_TAIL):stop]
        if _ABBREVIATION_END.search(tail) or _INITIAL_END.search(tail) or (depth and end - opened <= BRACKET_REACH):
            continue
        found.append((start, end))
        start = read = match.end()
        depth = 0
    found.append((start, len(text)))
    trimmed = []
    for a, b in found:
        words = _WORD.search(text, a, b)
        if words:
            while text[b - 1].isspace():
                b -= 1
            trimmed.append((words.start(), b))
    return trimmed


def split_sentences(text: str, max_words: int = MAX_SPAN_WORDS) -> list[str]:
    """Sentences of a text (abbreviations such as "e.g." and "et al." do not end one), each at most `max_words`
    words, white space folded: a text without sentence punctuation comes back as bounded spans, never as one
    endless quote."""
    text = text or ""
    return [" ".join(text[a:b].split()) for start, end in sentence_bounds(text)
            for a, b in bounded_bounds(text, start, end, max_words)]


def _content(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 1}


def restates(candidate: str, question: str) -> bool:
    """Whether a candidate's content words are (almost) all in the question: the title a question names."""
    words = _content(candidate)
    return bool(words) and len(words & _content(question)) / len(words) >= RESTATES_SHARE


def candidates(question: str, texts: Sequence[str]) -> list[tuple[int, str, bool]]:
    """(source index, sentence, whether it is the source's title) for every quotable sentence of the sources: ids
    stripped, not only restating the question, long enough, not a duplicate."""
    found: list[tuple[int, str, bool]] = []
    seen: set[str] = set()
    for index, text in enumerate(texts):
        title, _, body = (text or "").partition("\n")     # a title ends at its line; an abstract's lines are wrapped
        for part, is_title in ((title, True), (body, False)):
            for sentence in statements(_QUOTE_MARKS.sub("", strip_ids(part))):
                key = sentence.lower()
                if (len(re.findall(r"[A-Za-z]{2,}", sentence)) >= MIN_QUOTE_WORDS and key not in seen
                        and not (is_title and restates(sentence, question))):
                    seen.add(key)
                    found.append((index, sentence, is_title))
    return found


@dataclass
class Selection:
    quotes: list[Quote]
    best_relevance: float | None     # of any candidate; None when there was none

    @property
    def answers(self) -> bool:
        return bool(self.quotes)


def select_quotes(question_vector: np.ndarray, question: str, texts: Sequence[str], embed,
                  source_scores: Sequence[float] | None = None, max_quotes: int = MAX_QUOTES,
                  floor: float = RELEVANCE_FLOOR) -> Selection:
    """The quotes that answer the question best, most relevant first (see the module doc).
    `embed(list[str]) -> np.ndarray` (unit-normalised rows); `source_scores`: each source's cosine to the question."""
    found = candidates(question, texts)
    if not found:
        return Selection([], None)
    vectors = np.asarray(embed([sentence for _, sentence, _ in found]), dtype=np.float32)
    relevance = vectors @ np.asarray(question_vector, dtype=np.float32)
    boost = np.array([(source_scores[i] if source_scores else 0.0) for i, _, _ in found], dtype=np.float32)
    ranking = relevance + SOURCE_WEIGHT * boost
    best = float(relevance.max())
    picked: list[int] = []
    while len(picked) < max_quotes:
        scores = []
        for n in range(len(found)):
            if n in picked or relevance[n] < floor or relevance[n] < best - KEEP_WITHIN:
                scores.append(-np.inf)
                continue
            overlap = max((float(vectors[n] @ vectors[p]) for p in picked), default=0.0)
            same = any(found[p][0] == found[n][0] for p in picked)
            if same and found[n][2]:           # a title adds nothing beside a quote of its own abstract
                scores.append(-np.inf)
                continue
            scores.append(MMR_LAMBDA * ranking[n] - (1 - MMR_LAMBDA) * overlap - SAME_SOURCE_PENALTY * same)
        choice = int(np.argmax(scores))
        if scores[choice] == -np.inf:
            break
        picked = [p for p in picked if not (found[p][2] and found[p][0] == found[choice][0])]   # the title gives way
        picked.append(choice)
    quotes = [Quote(found[n][0], found[n][1], float(relevance[n])) for n in picked]
    return Selection(quotes, best)


def nearest_line(titles: Sequence[str], scores: Sequence[float] | None = None, listed: int = 3) -> str:
    """The one sentence shown when no quote clears the floor, with the nearest sources listed by label."""
    order = sorted(range(len(titles)), key=lambda i: -(scores[i] if scores else 0.0))[:listed]
    shown = "; ".join(f"[{i + 1}] {OPEN_QUOTE}{strip_ids(titles[i])}{CLOSE_QUOTE}" for i in order if titles[i])
    return f"{NO_SOURCE_ANSWERS}; the nearest are {shown}." if shown else f"{NO_SOURCE_ANSWERS}."


def render(selection: Selection, titles: Sequence[str], scores: Sequence[float] | None = None) -> Iterator[str]:
    """The answer in pieces, a quote per paragraph (as a stream of model output would arrive)."""
    if not selection.quotes:
        yield nearest_line(titles, scores)
        return
    for n, quote in enumerate(selection.quotes):
        yield ("\n\n" if n else "") + quote.shown()


# a label and its quote, on one line or (an evidence table's row) a header line then the quote line; the header and
# the quote are bounded, so a text of many labels and no closing mark is read in linear time ("[a]" x 1,000 took 0.7 s)
_QUOTED = re.compile(rf"\[(?P<label>[^\[\]\n]{{1,40}})\][^\n{OPEN_QUOTE}{CLOSE_QUOTE}]{{0,600}}\n?[ \t]*{OPEN_QUOTE}"
                     rf"(?P<text>[^{CLOSE_QUOTE}\n]{{0,3000}}){CLOSE_QUOTE}")


def parse_quotes(text: str) -> list[tuple[str, str]]:
    """(label or id, quoted text) of every quote in an answer made by `render`."""
    return [(m.group("label"), m.group("text")) for m in _QUOTED.finditer(text or "")]


def is_quoted_answer(text: str) -> bool:
    """Whether an answer is made of quotes only (or is the no-answer sentence): nothing outside them but labels."""
    text = (text or "").strip()
    if text.startswith(NO_SOURCE_ANSWERS) or is_table(text):
        return True
    rest = _QUOTED.sub("", text)
    return bool(parse_quotes(text)) and not rest.strip()


def is_no_answer(text: str) -> bool:
    return (text or "").strip().startswith(NO_SOURCE_ANSWERS)


# keep(sentences of one text, in order, and their vectors) -> whether each may be quoted
KeepSentences = Callable[[list[str], np.ndarray], Sequence[bool]]


def key_sentences(targets: np.ndarray, texts: Sequence[str], embed, skip_title: bool = True,
                  keep: KeepSentences | None = None) -> list[str | None]:
    """For each text, its sentence nearest to its target vector (e.g. the paper's own embedding: its key sentence;
    or a topic's centre). `skip_title`: the first line of each text (a paper's title) is not a candidate. `keep`
    leaves out sentences by what they say (methods.evidence.key_findings: no background). One embedding batch for
    all texts; None for a text without a quotable sentence."""
    owned: list[tuple[int, str]] = []
    for index, text in enumerate(texts):
        lines = (text or "").split("\n")
        body = " ".join(lines[1:]) if skip_title and len(lines) > 1 else " ".join(lines)
        owned += [(index, s) for s in statements(strip_ids(body))
                  if len(re.findall(r"[A-Za-z]{2,}", s)) >= MIN_QUOTE_WORDS]
    best: list[str | None] = [None] * len(texts)
    if not owned:
        return best
    vectors = np.asarray(embed([s for _, s in owned]), dtype=np.float32)
    allowed = [True] * len(owned)
    if keep is not None:
        by_text: dict[int, list[int]] = {}
        for n, (index, _) in enumerate(owned):
            by_text.setdefault(index, []).append(n)
        for mine in by_text.values():
            for n, kept in zip(mine, keep([owned[n][1] for n in mine], vectors[mine])):
                allowed[n] = bool(kept)
    scores = [-np.inf] * len(texts)
    targets = np.asarray(targets, dtype=np.float32)
    for (index, sentence), vector, ok in zip(owned, vectors, allowed):
        score = float(vector @ targets[index])
        if ok and score > scores[index]:
            scores[index], best[index] = score, sentence
    return best
