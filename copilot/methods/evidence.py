"""The evidence table: for a question, the library papers that bear on it, each with the one or two sentences of
its abstract that say what it does or finds about the question (issue #39).

  1. every abstract is split into sentences (quotes.split_sentences; an endless sentence into bounded spans, shown
     with "…" where it was cut), and every sentence gets a role: background, objective, method, result or other
     (`roles_of`: the trained classifier of methods.sentence_roles over MiniLM's vectors, else cue phrases and
     position). Background is never quoted, nor a bare title;
  2. one embedding batch for all sentences; a sentence's score is its cosine to the question plus a bonus for its
     role, and, when the question asks how much or how well, for a number;
  3. when the best quotable sentence of any paper clears the relevance floor, the papers whose own cosine clears the
     paper floor, or whose best sentence clears the relevance floor, become rows, in the retrieval's order (Search's
     fused ranking), up to MAX_ROWS; else there are no rows (the no-answer line). A paper the question names by
     title or arXiv id comes first, whatever its scores;
  4. a row quotes its best sentence, and a second one when it is a result close behind; two sentences that are
     not adjacent are joined with "…" (each part is a verbatim substring of the one abstract). A question about
     what goes wrong ("What are the limits of …?") or why gets the paper's sentence that states a limitation or a
     cause, even from its setting, when one is close enough to the question (`limit_cue`);
  5. rows that fall into clearly separate groups are grouped (evidence_groups.group_rows), each group headed by a
     phrase that occurs verbatim in its rows and in no other group's;
  6. a paper whose full text the library holds (issue #48) also offers its body sentences closest to the question
     (`body_candidates`), scored alike, quoted with their section.

Nothing here writes a sentence of its own: the table is the papers' own words under their titles.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from copilot import table
from copilot.body import Body
from copilot.methods import body_text, quotes, sentence_roles
from copilot.methods.evidence_text import (  # is_textbook re-exported: Chat and the tests ask it here
    is_textbook,
    quote_text,
)
from copilot.methods.question_cues import (  # re-exported: passages and the tests ask them here
    asks_contribution,
    asks_how_much,
    asks_reason,
    limit_cue,
    states,
)
from copilot.store.fulltext import StoredBody

log = logging.getLogger(__name__)

MAX_ROWS = 6
# Gate on the best row's best quotable sentence (cosine to the question): below it, the no-answer line. On 2,000 real
# abstracts (docs/evidence.md) research questions' best rows scored 0.42-0.84, off-topic ones (banana bread) 0.14-0.37.
ROW_FLOOR = 0.40
# Floor on each further row's paper (its title and abstract's cosine to the question: it tells relevant rows better than
# a sentence's), chosen with MAX_ROWS on half of the answers dev set (docs/answers-eval.md); a paper under it is still
# a row when its best sentence clears ROW_FLOOR (or BODY_WORDS_CLEAR).
PAPER_FLOOR = 0.35
SECOND_WITHIN = 0.08          # a second sentence of a row must score at least its first minus this
MAX_QUOTE_WORDS = quotes.MAX_SPAN_WORDS
ROLE_BONUS = {"result": 0.05, "method": 0.04, "objective": 0.03, "other": 0.0}
# a question about what a paper proposes or how it works: what the paper does first, then what it finds
CONTRIBUTION_BONUS = {"objective": 0.06, "method": 0.06, "result": 0.02, "other": 0.0}
NUMBER_BONUS = 0.06           # for a how-much / how-well question, a sentence that states a number
ROLES = ("background", "objective", "method", "result", "other")
MAX_SPANS_PER_PAPER = 6       # spans of one abstract embedded at most (results, methods, objectives first)
_ROLE_ORDER = {"result": 0, "method": 1, "objective": 2, "other": 3}

_BACKGROUND = re.compile(
    r"^(?:(?:additionally|moreover|furthermore|also|yet|but),? )?(?:while|although|though|despite|during inference|"
    r"recent (?:advances|advancements|progress|work|studies|"
    r"developments|breakthroughs))\b|\boverlook|\b(?:prior|previous|existing) (?:works?|studies|methods) (?:have|has) "
    r"not\b|\b(?:has|have) (?:become|emerged|gained|attracted|drawn|been widely|shown (?:great|remarkable|impressive|"
    r"strong|significant))|^(?:recently|in recent years|nowadays|over the past|with the (?:rapid|rise|growing|"
    r"advent|success|increasing|emergence))|\b(?:remains?|remained) (?:a |an )?(?:challenge|challenging|open|"
    r"unclear|limited|underexplored|difficult|elusive|largely)|^however\b|\b(?:is|are) (?:a |an |the )?(?:"
    r"fundamental|key|critical|crucial|popular|promising|powerful|widely|increasingly|important|central|essential)"
    r"|\bgrowing (?:interest|attention|demand)|\b(?:existing|current|prior|previous|conventional) (?:methods|"
    r"approaches|work|studies|models|systems|techniques)\b.{0,60}\b(?:suffer|fail|struggle|often|typically|rely|"
    r"are limited|lack|overlook)|\bsuffers? from\b|\bhave been (?:widely|extensively)", re.I)
_RESULT = re.compile(
    r"(?<![\d.])\d+(?:\.\d+)?\s?(?:%|x\b|\u00d7|times\b|-fold)|\boutperform|\bstate-of-the-art (?:results|performance)"
    r"|\b(?:results|experiments|evaluations?|analysis|analyses|findings) (?:show|demonstrate|reveal|indicate|"
    r"suggest|confirm)|\bwe (?:find|found|show|observe|demonstrate|reveal)\b|\b(?:achieves?|achieving|reduces?|"
    r"reducing|improves?|improving|speeds? up|saves?|saving|surpass(?:es)?|matches|yields?)\b.{0,80}\b(?:by|up to|"
    r"over|than)\b|\b(?:achieves?|achieving|reduces?|reducing|improves?|improving|saves?|saving)\b.{0,80}\d", re.I)
_METHOD = re.compile(
    r"\b(?:we|this (?:paper|work|study)|our (?:method|approach|framework|model|system))\b.{0,40}\b(?:propose|"
    r"introduce|present|develop|design|build|construct|formulate|leverage|employ|adapt|extend|train)|\bconsists of"
    r"|\bcalled\b|\bdubbed\b|\bnamed\b", re.I)
_OBJECTIVE = re.compile(
    r"\b(?:we|this (?:paper|work|study)|our (?:work|study))\b.{0,30}\b(?:aim|investigate|study|explore|examine|"
    r"ask|address|analy[sz]e|evaluate|tackle|focus|seek|revisit|benchmark|assess|characteri[sz]e|compare)", re.I)
# the sentence that states a paper's contribution: "We propose X", "In this paper, we introduce X", "This work presents"
_CONTRIBUTES = re.compile(r"\b(?:we|this (?:paper|work|study|article)|our (?:paper|work))\b[^.;]{0,40}?"
                          r"\b(?:propose|introduce|present)[sd]?\b", re.I)
_NUMBER = re.compile(r"\d")
_OWN_VOICE = re.compile(r"\b(?:we|our|this (?:paper|work|study|article))\b", re.I)
MAX_LIMIT_SPANS = 2           # background spans that state a limitation, kept per paper for such a question
# for such a question a row quotes its paper's sentence that states a limitation or cause, when one is at least this
# close to the question (MiniLM ranks "RAG systems often struggle to handle multi-hop question-answering …" at 0.39
# for "What are the limits of RAG for multi-hop QA?", under the paper's result sentences)
LIMIT_FLOOR = 0.30
# a paper's full text (issue #48): its sentences closest to the question that are scanned, and kept as candidates
BODY_SCAN = 60
BODY_CANDIDATES = 4
BODY_POSITIONS = 1_000_000    # body spans' positions start here: never adjacent to an abstract's
# a row of a paper with full text also quotes its best body sentence when that is this close to the row's best
# sentence's score and at least BODY_FLOOR close to the question (a named paper's row: whenever it clears the floor)
BODY_WITHIN = 0.12
BODY_FLOOR = 0.30
BODY_WORDS_CLEAR = 0.5        # a body sentence BODY_FLOOR close holding this share of the question's words answers
BODY_SECOND_WITHIN = 0.06     # a second body sentence is quoted when it scores at least the first's minus this
BODY_LEAD_QUOTES = 3          # body sentences the row of the paper a question is most about may quote
_CITATION_BRACKET = re.compile(r"\[\s*\d{1,3}(?:\s*[,;\u2013-]\s*\d{1,3})*\s*\]")


def cue_role(sentence: str, opens_abstract: bool) -> str:
    """A sentence's role from cue phrases; an unmarked sentence that opens an abstract is background (abstracts
    open with their setting)."""
    if _RESULT.search(sentence):
        return "result"
    if _METHOD.search(sentence):
        return "method"
    if _OBJECTIVE.search(sentence):
        return "objective"
    if _BACKGROUND.search(sentence) or opens_abstract:
        return "background"
    return "other"


def cue_roles(sentences: Sequence[str]) -> list[str]:
    """Roles of an abstract's sentences, in order, from cue phrases and position (the first of three or more)."""
    return [cue_role(sentence, n == 0 and len(sentences) >= 3) for n, sentence in enumerate(sentences)]


def roles_of(sentences: Sequence[str], vectors: np.ndarray | None = None,
             positions: Sequence[float] | None = None) -> list[str]:
    """Each sentence's role. Without `positions` the sentences are one abstract, in order. The trained classifier
    decides where it is installed and `vectors` (the sentences' embeddings) are given; a sentence its cues call
    background stays background either way (quoting the setting instead of the finding is the failure to avoid),
    unless it states a result."""
    cues = cue_roles(sentences) if positions is None else [cue_role(s, p == 0) for s, p in zip(sentences, positions)]
    if vectors is None or not sentences or not sentence_roles.fits(vectors):
        return cues
    learned = [role if role in ROLES else "other"
               for role in sentence_roles.classify(list(sentences), vectors=vectors, positions=positions)]
    # the cues' background stays background unless it states a result; a sentence that says what the paper does
    # ("we propose …", "this paper presents …") is never dropped as background (the classifier's weakest role)
    return ["background" if cue == "background" and not _RESULT.search(s)
            else cue if role == "background" and cue in ("method", "objective") else role
            for s, cue, role in zip(sentences, cues, learned)]


def key_findings(targets: np.ndarray, texts: Sequence[str], embed, learned_roles: bool = True) -> list[str | None]:
    """`quotes.key_sentences` among the sentences that say what a paper does or finds: a paper's background ("LLMs
    have achieved remarkable success …") is never its key sentence. `learned_roles`: the sentence-role classifier may
    read `embed`'s vectors (they come from its embedder); otherwise the cue phrases decide."""
    def keep(sentences: list[str], vectors: np.ndarray) -> list[bool]:
        roles = roles_of(sentences, vectors if learned_roles else None)
        # an abstract that opens with its finding ("We show that …") is not opening with its setting
        return [role != "background" or (cue_role(s, False) == "result" and bool(_OWN_VOICE.search(s)))
                for s, role in zip(sentences, roles)]

    return quotes.key_sentences(targets, texts, embed, keep=keep)


@dataclass(frozen=True)
class Source:
    """One paper that may become a row."""
    paper_id: str
    title: str
    authors: tuple[str, ...]
    date: str                 # YYYY-MM-DD
    abstract: str
    score: float              # the item's cosine to the question
    named: bool = False       # the question names it by its arXiv id
    rank: float = 0.0         # its place in the retrieval's order (Search's fused ranking); rows keep that order
    via: str = ""             # the retrieved thought it was reached through ("" for a retrieved paper)
    version: str = ""         # "v2", when the library knows it
    body: StoredBody | None = None     # its full text, when the library holds it (issue #48)


@dataclass
class Span:
    text: str                 # white space folded
    cut_before: bool          # a bounded span of a longer sentence: text precedes it in that sentence
    cut_after: bool
    position: int             # its index among the abstract's spans; a body span's is BODY_POSITIONS + 2 × its index
    start: int = 0            # offsets into the abstract (or the body) as stored
    end: int = 0
    origin: str = table.ABSTRACT      # which text: table.ABSTRACT or table.BODY
    section: str = ""         # a body span's section ("4.2 Ablations") and its anchor on arXiv's page
    anchor: str = ""


@dataclass
class Row:
    source: Source
    spans: list[Span]         # one or two, in abstract order
    relevance: float          # cosine of the question and the best span
    score: float
    roles: list[str] = field(default_factory=list)
    group: str = ""

    def quotes(self) -> list[table.Quote]:
        """The row's quotes: slices of the abstract or the body, adjacent spans of the abstract as one slice,
        others apart."""
        found: list[table.Quote] = []
        for n, span in enumerate(self.spans):
            role = self.roles[n] if n < len(self.roles) else ""
            text = source_text(self.source, span.origin)
            if found and span.position == self.spans[n - 1].position + 1:     # only white space between them
                last = found.pop()
                found.append(replace(last, end=span.end, text=text[last.start:span.end],
                                     cut_after=span.cut_after))
                continue
            found.append(table.Quote(span.origin, span.start, span.end, text[span.start:span.end], role,
                                     span.cut_before, span.cut_after, span.section, span.anchor))
        return found

    @property
    def quote(self) -> str:
        """The row's quoted words, "…" where text of the abstract was left out (no quotation marks)."""
        return quote_text(self.quotes(), marks=False)


def source_text(source: Source, origin: str) -> str:
    """The stored text a quote of `source` slices."""
    return (source.body.body.text if source.body is not None else "") if origin == table.BODY else source.abstract


def spans_of(abstract: str) -> list[Span]:
    """An abstract's quotable spans: its sentences, a sentence too long to quote cut into bounded spans that read on
    their own (`quotes.statement_pieces`)."""
    found: list[Span] = []
    for start, end in quotes.sentence_bounds(abstract):
        for a, b, cut_before, cut_after in quotes.statement_pieces(abstract, start, end, MAX_QUOTE_WORDS):
            found.append(Span(" ".join(abstract[a:b].split()), cut_before, cut_after, len(found), a, b))
    return found


def quotable(span: Span, min_words: int = quotes.MIN_QUOTE_WORDS, links: bool = False) -> bool:
    """Long enough to say something, and safe to show inside quotation marks verbatim: no curly quote marks (they
    would end the quote), no numbered citation brackets (the answer's checks treat those as citations) and no link
    (the checks drop a link the item's cut text lacks), but with `links` (a chosen paper's row: no check edits it)."""
    text = span.text
    return (len(re.findall(r"[A-Za-z]{2,}", text)) >= min_words
            and not re.search("[\u201c\u201d]", text) and not _CITATION_BRACKET.search(text)
            and (links or not re.search(r"https?://|www\.", text, re.I)))


def names_paper(question: str, source: Source) -> bool:
    """Whether the question names the paper: by its arXiv id, or by its title (most of the title's content words
    are in the question)."""
    return source.named or (len(quotes._content(source.title)) >= 2 and quotes.restates(source.title, question))


def candidate_spans(abstract: str, limits: re.Pattern | None = None) -> list[tuple[Span, str, float]]:
    """The spans of an abstract a row may quote, with their cue role and relative place in the abstract (0 first, 1
    last): quotable, not background by their cues, at most MAX_SPANS_PER_PAPER (objective, method, result first)
    and its first contribution sentence ("we propose …") beyond them. With `limits` (`limit_cue` of a question that
    asks what goes wrong or why), also up to MAX_LIMIT_SPANS background spans it matches, role "limitation".
    Their vectors are what a table embeds, so `python -m copilot sentences` stores these (without `limits`) in
    advance."""
    spans = spans_of(abstract)
    roles = cue_roles([s.text for s in spans])
    kept = [(span, role) for span, role in zip(spans, roles) if role != "background" and quotable(span)]
    ordered = sorted(kept, key=lambda pair: (_ROLE_ORDER.get(pair[1], 3), pair[0].position))
    kept = ordered[:MAX_SPANS_PER_PAPER] + [pair for pair in ordered[MAX_SPANS_PER_PAPER:]
                                            if _CONTRIBUTES.search(pair[0].text)][:1]   # and what it proposes
    if limits:
        kept += [(span, "limitation") for span, role in zip(spans, roles)
                 if role == "background" and quotable(span) and states(limits, span.text)][:MAX_LIMIT_SPANS]
    places = sentence_roles.relative_positions(len(spans))        # a lone sentence is not an opening one
    return [(span, role, places[span.position]) for span, role in kept]


def span_bonus(question: str, span: Span, role: str) -> float:
    """A candidate span's bonus over its cosine to the question: for its role (what the paper does first when the
    question asks what it proposes), and for a number when the question asks how much."""
    numbers = asks_how_much(question)
    bonus = CONTRIBUTION_BONUS if asks_contribution(question) and not numbers else ROLE_BONUS
    return bonus.get(role, 0.0) + (NUMBER_BONUS if numbers and _NUMBER.search(span.text) else 0.0)


def _body_span(body: Body, n: int, sentence: tuple[int, int, int, bool, bool], links: bool = False) -> Span | None:
    """Body sentence `n` as a quotable span with its section (body_text.quote_bounds), or None."""
    bounds = body_text.quote_bounds(body, *sentence)
    if bounds is None:
        return None
    start, end, cut_before, cut_after, least = bounds
    section = body.section_of(body.passages[sentence[2]])
    label, anchor = (body_text.section_label(body, section), section.anchor) if section else ("", "")
    span = Span(" ".join(body.text[start:end].split()), cut_before, cut_after, BODY_POSITIONS + 2 * n, start, end,
                table.BODY, label, anchor)
    return span if quotable(span, least, links) else None


def in_context(source: Source, spans: Sequence[Span], roles: Sequence[str],
               question: str) -> tuple[list[Span], list[str]]:
    """A row's quotes, in reading order, each body sentence with its context (body_text.with_context): the sentence
    it leans on ("As a result, …") and, for a why-question, the one after that explains it. Quotes of one paragraph
    that then overlap, or follow each other with nothing between them, become one. Only what is shown grows: every
    quote was chosen on its own sentence's score."""
    stored = source.body
    if stored is None:
        return list(spans), list(roles)
    why = asks_reason(question)
    sentences, text = stored.sentences, stored.body.text
    shown: list[Span] = []
    kept: list[str] = []
    last_passage = -1             # the paragraph of the last quote shown (-1: an abstract's)
    for span, role in zip(spans, roles):
        n = (span.position - BODY_POSITIONS) // 2
        passage = sentences[n][2] if span.origin == table.BODY and 0 <= n < len(sentences) else -1
        if passage >= 0:
            first, last = body_text.with_context(stored.body, sentences, n, why)
            start = sentences[first][0] if first < n else span.start
            end = sentences[last][1] if last > n else span.end
            if (start, end) != (span.start, span.end):
                span = replace(span, text=" ".join(text[start:end].split()), start=start, end=end,
                               cut_before=sentences[first][3] if start < span.start else span.cut_before,
                               cut_after=sentences[last][4] if end > span.end else span.cut_after)
            if shown and passage == last_passage and (span.start < shown[-1].end
                                                      or not text[shown[-1].end:span.start].strip()):
                before = shown[-1]
                end = max(before.end, span.end)
                shown[-1] = replace(before, text=" ".join(text[before.start:end].split()), end=end,
                                    cut_after=span.cut_after if end == span.end else before.cut_after)
                continue
        shown.append(span)
        kept.append(role)
        last_passage = passage
    return shown, kept


def body_candidates(source: Source, question: str, question_vector: np.ndarray, limits: re.Pattern | None = None,
                    count: int = BODY_CANDIDATES, prior: Callable[[np.ndarray], np.ndarray] | None = None,
                    links: bool = False) -> list[tuple[Span, str, np.ndarray, float]]:
    """A paper's body spans a row may quote for the question, with cue role, stored vector and bonus (question_bonus;
    title and abstract name the paper; plus `prior(bonus)`, a scoped question's): of its BODY_SCAN best by cosine and
    bonus (of a first look: with a vector), the `count` best as a row scores them, that may state its finding."""
    stored = source.body
    if stored is None or not len(stored.vectors) or stored.vectors.shape[1] != len(question_vector):
        return []
    body = stored.body
    bonus = body_text.question_bonus(question, body, stored.sentences, stored.terms,
                                     f"{source.title}\n{source.abstract}")
    bonus = bonus + prior(bonus) if prior is not None else bonus
    cosines = stored.vectors @ np.asarray(question_vector, dtype=np.float32)
    with_vector = np.ones(len(cosines), dtype=bool) if stored.embedded is None else stored.embedded
    found: list[tuple[float, Span, str, np.ndarray, float]] = []
    for n in np.argsort(-np.where(with_vector, cosines + bonus, -np.inf))[:min(BODY_SCAN, int(with_vector.sum()))]:
        sentence = stored.sentences[int(n)]
        span = _body_span(body, int(n), sentence, links) if body_text.may_state_finding(
            body, body_text.BodySentence(*sentence)) and not body_text.is_signpost(
            body.text[sentence[0]:sentence[1]]) else None
        if span is None:
            continue
        role = cue_role(span.text, False)
        if role == "background":          # the section rules decide what is background in a body ("Despite
            role = "limitation" if limits and states(limits, span.text) else "other"   # converging, v1 failed …")
        score = float(cosines[int(n)] + bonus[int(n)]) + span_bonus(question, span, role)
        found.append((score, span, role, stored.vectors[int(n)], float(bonus[int(n)])))
    found.sort(key=lambda c: -c[0])
    return [(span, role, vector, extra) for _, span, role, vector, extra in found[:count]]


def _abstract_spans(sources: Sequence[Source], limits: re.Pattern | None, embed: Callable[[list[str]], np.ndarray],
                    learned_roles: bool) -> tuple[list[tuple[int, Span, str]], np.ndarray]:
    """The abstracts' candidate spans (source index, span, role) and their vectors, background dropped by the
    learned roles where they may be read."""
    owned: list[tuple[int, Span, str]] = []
    places: list[float] = []
    for index, source in enumerate(sources):
        for span, role, place in candidate_spans(source.abstract, limits):
            owned.append((index, span, role))
            places.append(place)
    if not owned:
        return [], np.zeros((0, 0), dtype=np.float32)
    vectors = np.asarray(embed([span.text for _, span, _ in owned]), dtype=np.float32)
    if learned_roles and sentence_roles.fits(vectors):      # the learned roles, from the vectors just made
        learned = roles_of([span.text for _, span, _ in owned], vectors, places)
        learned = ["limitation" if role == "limitation" else learned[n] for n, (_, _, role) in enumerate(owned)]
        keep = [n for n, role in enumerate(learned) if role != "background"]
        owned = [(owned[n][0], owned[n][1], learned[n]) for n in keep]
        vectors = vectors[keep]
    return owned, vectors


def _abstract_choice(question: str, source: Source, mine: list[int], owned: list[tuple[int, Span, str]],
                     scores: list[float], relevance: np.ndarray, vectors: np.ndarray,
                     limits: re.Pattern | None) -> list[int]:
    """Which of a paper's abstract spans (`mine`, best score first) its row quotes: for a paper the question names,
    what it does and then what it finds; for a question about limits or causes, the sentence that states one; else
    the best, and a result close behind it."""
    best = mine[0]
    if names_paper(question, source):     # the paper asked about: what it does, then what it finds
        does = (sorted((n for n in mine if _CONTRIBUTES.search(owned[n][1].text)),
                       key=lambda n: owned[n][1].position)[:1]      # its first "we propose …" sentence
                or [n for n in mine if owned[n][2] in ("objective", "method")][:1])
        return (does + [n for n in mine if owned[n][2] == "result" and n not in does][:1]) or [best]
    if limits and (says := [n for n in mine if relevance[n] >= LIMIT_FLOOR and states(limits, owned[n][1].text)]):
        return says[:1]         # what goes wrong, or why: the sentence that says so
    return [best] + [n for n in mine[1:2] if owned[n][2] == "result" and owned[best][2] != "result"
                     and scores[n] >= scores[best] - SECOND_WITHIN and float(vectors[n] @ vectors[best]) < 0.9]


def build_rows(question: str, question_vector: np.ndarray, sources: Sequence[Source],
               embed: Callable[[list[str]], np.ndarray], max_rows: int = MAX_ROWS,
               floor: float = ROW_FLOOR, learned_roles: bool = True,
               paper_floor: float = PAPER_FLOOR) -> tuple[list[Row], np.ndarray | None]:
    """The table's rows, best first (see the module doc), and each row's best-span vector (for grouping).
    `learned_roles`: the sentence-role classifier may read `embed`'s vectors (they come from its embedder)."""
    unique = list({s.paper_id: s for s in reversed(sources)}.values())[::-1]     # a paper's first place wins
    limits = limit_cue(question)
    owned, vectors = _abstract_spans(unique, limits, embed, learned_roles)
    body_owned: list[tuple[int, Span, str]] = []
    body_vectors: list[np.ndarray] = []
    word_bonus: dict[int, float] = {}         # a body span's place in `owned` → its WORDS_WEIGHT bonus
    for index, source in enumerate(unique):
        for span, role, vector, extra in body_candidates(source, question, question_vector, limits):
            word_bonus[len(owned) + len(body_owned)] = extra
            body_owned.append((index, span, role))
            body_vectors.append(vector)
    if body_owned:
        owned = owned + body_owned
        vectors = np.vstack([vectors, np.vstack(body_vectors)]) if len(vectors) else np.vstack(body_vectors)
    if not owned:
        return [], None
    relevance = vectors @ np.asarray(question_vector, dtype=np.float32)
    scores = [float(r) + span_bonus(question, span, role) + word_bonus.get(n, 0.0)
              for n, (r, (_, span, role)) in enumerate(zip(relevance, owned))]
    rows, row_vectors, clears = [], [], []
    closest = max(range(len(owned)), key=lambda n: (owned[n][1].origin == table.BODY, scores[n]))   # a body's best
    lead = {min(range(len(unique)), key=lambda i: unique[i].rank), owned[closest][0] if body_owned else -1}
    for index, source in enumerate(unique):
        ranked = sorted((n for n, (i, _, _) in enumerate(owned) if i == index), key=lambda n: -scores[n])
        mine = [n for n in ranked if owned[n][1].origin == table.ABSTRACT]
        body = [n for n in ranked if owned[n][1].origin == table.BODY]
        if not mine and not body:
            continue
        chosen = _abstract_choice(question, source, mine, owned, scores, relevance, vectors, limits) if mine else []
        best = mine[0] if mine else body[0]
        if body and relevance[body[0]] >= BODY_FLOOR and (
                not mine or names_paper(question, source) or scores[body[0]] >= scores[best] - BODY_WITHIN):
            # its best body sentence, a second nearly as close; a paper the question is most about (named, `lead`) up
            # to BODY_LEAD_QUOTES clearing the floor: a body's answer is often among its closest few, not first
            most = BODY_LEAD_QUOTES if index in lead or names_paper(question, source) else 2
            chosen += body_text.best_quotes(body, scores, relevance, vectors, most,
                                            BODY_FLOOR if most > 2 else scores[body[0]] - BODY_SECOND_WITHIN,
                                            on_scores=most == 2)
            if scores[body[0]] > scores[best]:
                best = body[0]
        if not chosen:
            continue
        chosen.sort(key=lambda n: owned[n][1].position)
        quoted, roles = in_context(source, [owned[n][1] for n in chosen], [owned[n][2] for n in chosen], question)
        rows.append(Row(source, quoted, float(relevance[best]), scores[best], roles))
        row_vectors.append(vectors[best])
        clears.append(relevance[best] >= floor or (owned[best][1].origin == table.BODY and relevance[best] >= BODY_FLOOR
                                                   and word_bonus.get(best, 0.0) >= BODY_WORDS_CLEAR))
    named = [names_paper(question, row.source) for row in rows]
    if not any(named) and not any(clears):
        return [], None       # nothing in the pool says anything close to the question: the no-answer line
    # a named paper first, then the retrieval's order (meaning and words fused beat any one sentence's cosine)
    order = sorted(range(len(rows)), key=lambda n: (not named[n], rows[n].source.rank, -rows[n].score))
    # a row: its paper is near the question, or (a short question embeds poorly against a whole abstract) its best
    # sentence is
    order = [n for n in order if named[n] or rows[n].source.score >= paper_floor or clears[n]]
    order = order[:max_rows]
    return [rows[n] for n in order], (np.vstack([row_vectors[n] for n in order]) if order else None)


# --- the answer's text ------------------------------------------------------------------------------------------
def _clean_title(title: str) -> str:
    return " ".join(re.sub(r"[\[\]]", lambda m: "(" if m.group(0) == "[" else ")",
                           re.sub("[\u201c\u201d]", '"', title or "")).split())


def make_table(rows: Sequence[Row], question: str, chosen: bool = False) -> table.EvidenceTable:
    """The table record of chosen rows, in their order: labels 1, 2, … as shown (the same rule on both sides of a
    turn, so no side repeats a label or numbers differently), each quote checked against its abstract; a row whose
    quote is not a slice of it is dropped and logged, never shown."""
    made: list[table.Row] = []
    for row in rows:
        found = row.quotes()
        if not found or not all(table.verbatim(quote, source_text(row.source, quote.source)) for quote in found):
            log.error("evidence row for %s dropped: a quote is not a slice of its text", row.source.paper_id)
            continue
        source = row.source
        made.append(table.Row(str(len(made) + 1), source.paper_id, source.version, _clean_title(source.title),
                              tuple(source.authors), source.date, tuple(found), round(row.score, 4), row.group,
                              source.via))
    return table.EvidenceTable(tuple(made), textbook=is_textbook(question) and not chosen, chosen=chosen)
