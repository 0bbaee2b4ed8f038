"""The passages of chosen papers that answer a question (issue #57, "a question about chosen papers").

A question asked about papers the researcher chose does not compete with the library: every chosen paper is a row,
and the row quotes that paper's passages closest to the question, several of them, from its abstract and (once
read) its body, each body passage with its section. Candidates and scores are the evidence table's
(methods.evidence): an abstract's quotable spans, a body's closest sentences (`evidence.body_candidates`, more of
them here), each scored by its cosine to the question plus its role's bonus, a number's for a how-much question, and
a body sentence's share of the question's words. A row quotes its best passage and the next ones that score within
`WITHIN` of it (not near-copies of one already quoted), at most `MAX_QUOTES` (`_chosen`); once the body is read, its
best sentence is among them when it is at least `evidence.BODY_FLOOR` close, and so is the passage closest to the
question by meaning alone. One paper in scope allows more than the library's scores (`scoped_prior`, issue #57 item
4): a body sentence in the section where the question's kind is written, one stating a number when numbers answer
that kind, and a fragment continuing a sentence that holds the question's words score higher (methods.question_kinds).

A paper whose full text never uses some of the question's words ("protein" asked of a paper on LLM recognition) says
which (`absent_words`): its passages are then only its closest, not its answer.

A question asking whether or where the code is available (the `code` kind) may quote a sentence holding a link
("Code: https://github.com/…"), which no other row does: a chosen paper's table is never edited by a check.

A body quote is shown with the sentence it leans on and, for a why-question, the one that explains it
(`evidence.in_context`), as in the library's table.

Nothing here writes a sentence of its own: every quote is a slice of the stored abstract or body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from copilot import table
from copilot.methods import body_text, evidence, question_kinds
from copilot.store.fulltext import StoredBody

# Chosen on the dev questions (tests/data/fulltext-questions.jsonl, each asked about its paper, body stored): 3-6
# quotes, WITHIN 0.2-0.8, FLOOR 0.3/0.4, 8 or 12 body candidates. A body sentence's score holds its share of the
# question's words (up to ~1), an abstract's does not, so the next relevant passages are well behind the best. 5,
# 0.35, 0.30 and at least MIN_QUOTES = 3: 25 of 30 body questions quote the answer, 4.1 quotes a row; 5 of 10 abstract
# controls. Then (issue #57 item 4, a store of the ten papers alone) with the priors of `scoped_prior`
# (methods.question_kinds: section 0.08, number 0.12, neighbour 0.3) and MIN_QUOTES 3/4/5: 25/26/27 of 30 (without
# the priors 25/26/27 too: the dev answers left are ranked past the 5th either way), 4 of 10 controls (a body sentence
# holding the question's words outscores every abstract sentence); with the abstract's best always among them, 26 and
# 6 of 10; six quotes with the abstract's best: 27 and 6.
MAX_QUOTES = 6                # passages a chosen paper's row quotes at most
MIN_QUOTES = 6                # and at least, of those FLOOR close, however far behind the best (a question about a
#                               paper asks for its passages, and the best one is not always the answer)
BODY_CANDIDATES = 8           # body sentences of a chosen paper scored (the library's table scores 4)
WITHIN = 0.35                 # a further passage scores at least the row's best minus this
FLOOR = 0.30                  # and is at least this close to the question (cosine)
SAME = 0.92                   # two passages whose vectors are this close say the same thing: one is quoted


def _candidates(question: str, question_vector: np.ndarray, source: evidence.Source,
                embed: Callable[[list[str]], np.ndarray],
                learned_roles: bool) -> list[tuple[evidence.Span, str, np.ndarray, float]]:
    """A chosen paper's candidate passages: (span, role, vector, score), best score first."""
    limits = evidence.limit_cue(question)
    spans = evidence.candidate_spans(source.abstract, limits)
    found: list[tuple[evidence.Span, str, np.ndarray, float]] = []
    if spans:
        vectors = np.asarray(embed([span.text for span, _, _ in spans]), dtype=np.float32)
        roles = [role for _, role, _ in spans]
        if learned_roles:
            learned = evidence.roles_of([span.text for span, _, _ in spans], vectors, [p for _, _, p in spans])
            roles = [role if role == "limitation" else new for role, new in zip(roles, learned)]
        for (span, _, _), role, vector in zip(spans, roles, vectors):
            if role != "background":
                score = float(vector @ question_vector) + evidence.span_bonus(question, span, role)
                found.append((span, role, vector, score))
    for span, role, vector, extra in evidence.body_candidates(source, question, question_vector, limits,
                                                              count=BODY_CANDIDATES,
                                                              prior=scoped_prior(question, source.body,
                                                                                 f"{source.title} {source.abstract}"),
                                                              links=question_kinds.question_kind(question) == "code"):
        score = float(np.asarray(vector, dtype=np.float32) @ question_vector) + extra
        found.append((span, role, np.asarray(vector, dtype=np.float32), score + evidence.span_bonus(question, span,
                                                                                                     role)))
    found.sort(key=lambda c: -c[3])
    return found


def scoped_prior(question: str, stored: StoredBody | None,
                 known: str = "") -> Callable[[np.ndarray], np.ndarray] | None:
    """What one paper in scope allows over the library's scores (methods.question_kinds): given a body's sentence
    bonuses (evidence.body_candidates), each sentence's further bonus for its section, where the question's kind is
    written, and for continuing a sentence that holds the question's words. A question that asks only its kind of
    the paper ("What are the limitations of NameRank?": nothing but the kind's word and the paper's own, `known`, its
    title and abstract) is answered in the section given over to that kind, when the paper has one ("8.4
    Limitations"): its sentences come first (its kind's word alone would pick "the rate-limited GDELT API")."""
    if stored is None:
        return None
    kind = question_kinds.question_kind(question)
    sentences = stored.sentences
    dedicated = asks_only(kind, question, known)

    def prior(bonus: np.ndarray) -> np.ndarray:
        found = (question_kinds.section_prior(kind, stored.body, sentences)
                 + question_kinds.number_prior(kind, stored.body, sentences)
                 + question_kinds.neighbour_prior(bonus, stored.body, sentences))
        return found + question_kinds.dedicated_prior(kind, stored.body, sentences) if dedicated else found

    return prior


def dedicated_positions(question: str, source: evidence.Source) -> frozenset[int]:
    """The span positions (evidence.Span.position) of the body sentences in the section given over to what the
    question asks, when it asks only that of the paper (`scoped_prior`); empty otherwise."""
    stored = source.body
    kind = question_kinds.question_kind(question)
    if stored is None or not asks_only(kind, question, f"{source.title} {source.abstract}"):
        return frozenset()
    prior = question_kinds.dedicated_prior(kind, stored.body, stored.sentences)
    return frozenset(evidence.BODY_POSITIONS + 2 * int(n) for n in np.flatnonzero(prior))


def asks_only(kind: str, question: str, known: str) -> bool:
    """Whether a question asks only its kind of the paper: no word of it but the kind's own, the paper's (its title
    and abstract, `known`) and those naming a paper or the kind of answer."""
    cues = question_kinds.cue_words(kind, question)
    if not cues:
        return False
    others = body_text.asked_words(question) - frozenset(body_text.sentence_terms([_NOT_ASKED])[0])
    return not others - set(body_text.sentence_terms([" ".join(cues)])[0]) - set(
        body_text.sentence_terms([known])[0] if known.strip() else [])


def _chosen(found: Sequence[tuple[evidence.Span, str, np.ndarray, float]],
            question_vector: np.ndarray, placed: frozenset[int] = frozenset()) -> list[int]:
    """Which candidates a row quotes (indices into `found`, best first): the best; the next ones FLOOR close to the
    question, not near-copies of one chosen, while within WITHIN of the best or fewer than MIN_QUOTES; the best body
    sentence when it is evidence.BODY_FLOOR close; the passage closest to the question by meaning alone and the
    abstract's best passage, each when FLOOR close (an abstract's sentence that states the answer scores no word share,
    so body sentences holding the question's words would outscore every one of them). A sentence of the section given
    over to what the question asks (`placed`, positions: `dedicated_positions`) needs no FLOOR and may be far behind
    the best (which may hold the kind's word: "only *weakly* conditioned" for "Which weaknesses …"), and a row led by
    one takes no passage from elsewhere to make up MIN_QUOTES, for its meaning or for its abstract: "What are the
    limitations?" is answered by that section's sentences, which may share no word with it ("We tested only 12
    episodes per cell."), not by "Limit your response to about 150 words." elsewhere."""
    best = found[0][3]
    cosines = [float(vector @ question_vector) for _, _, vector, _ in found]
    chosen = [0]
    enough = 1 if found[0][0].position in placed else MIN_QUOTES   # the section's sentences, not a filling
    for n, (span, _, vector, score) in enumerate(found[1:], start=1):
        if len(chosen) >= MAX_QUOTES or (score < best - WITHIN and len(chosen) >= enough
                                         and span.position not in placed):
            break
        if (cosines[n] >= FLOOR or span.position in placed) and all(float(vector @ found[m][2]) < SAME
                                                                      for m in chosen):
            chosen.append(n)
    if found[0][0].position in placed:
        return chosen
    body = next((n for n, c in enumerate(found) if c[0].origin == table.BODY), None)
    closest = max(range(len(found)), key=lambda n: cosines[n])
    abstract = next((n for n, c in enumerate(found) if c[0].origin == table.ABSTRACT), None)
    for wanted, floor in ((body, evidence.BODY_FLOOR), (closest, FLOOR), (abstract, FLOOR)):
        if wanted is not None and wanted not in chosen and cosines[wanted] >= floor:
            chosen = chosen[:MAX_QUOTES - 1] + [wanted]
    return chosen


def passage_rows(question: str, question_vector: np.ndarray, sources: Sequence[evidence.Source],
                 embed: Callable[[list[str]], np.ndarray], learned_roles: bool = True) -> list[evidence.Row]:
    """One row per chosen paper, in the order chosen, quoting its passages that answer the question (see the module
    doc). A paper with no quotable passage has no row."""
    question_vector = np.asarray(question_vector, dtype=np.float32)
    rows = []
    for source in sources:
        found = _candidates(question, question_vector, source, embed, learned_roles)
        if not found:
            continue
        chosen = _chosen(found, question_vector, dedicated_positions(question, source))
        ordered = sorted(chosen, key=lambda n: found[n][0].position)
        best = found[chosen[0]]
        quoted, roles = evidence.in_context(source, [found[n][0] for n in ordered], [found[n][1] for n in ordered],
                                            question)
        rows.append(evidence.Row(source, quoted, float(best[2] @ question_vector), best[3], roles))
    return rows


_WORD = re.compile(r"[^\W_]+")
# a question's words that name the paper or its authors, ask for a kind of answer, or ask what it says, not what is
# asked of the paper ("Did the authors measure …", "this approach", "Summarize …", "the key idea", "does it admit",
# "Where can I find …")
_NOT_ASKED = ("author authors paper study work article approach method summarize summarise summary explain describe "
               "tell list give show key main idea ideas say says state states mention mentions discuss discusses "
               "admit admits acknowledge acknowledges find get access obtain download")
MAX_ABSENT = 5                # words named at most
ABSENT_SHARE = 0.5            # and only when at least this share of the question's words is absent


def absent_words(question: str, source: evidence.Source) -> tuple[str, ...]:
    """The question's words (as typed, at most MAX_ABSENT) that the paper never uses, not in its title, abstract or
    read body, when they are at least ABSENT_SHARE of the words it asks about: asked of a paper on LLM recognition,
    "Does it work for protein folding?" → ("protein", "folding"), while one word a paper happens not to use ("expect",
    "polite") is not worth a line. Nothing before its body is read: an abstract alone cannot say what a paper lacks.
    A word counts as used when its stem is one of the text's stems or when the word, or the word without a plural
    ending, occurs anywhere in the text ("GPUs" in "GPU", "fold" in "10-fold"): in doubt, nothing is said. Linear in
    the question and the text."""
    stored = source.body
    question = question[:2000]
    if stored is None or not question.strip():
        return ()
    asked = body_text.asked_words(question) - frozenset(body_text.sentence_terms([_NOT_ASKED])[0])
    if not asked:
        return ()
    text = " ".join((source.title, source.abstract, stored.body.text)).lower()
    used = set(body_text.sentence_terms([f"{source.title} {source.abstract}"])[0])
    if stored.terms:
        used.update(*stored.terms)
    else:                           # a body still being read (features.fulltext.first_look) has no stems yet
        used.update(body_text.sentence_terms([stored.body.text])[0])
    absent: dict[str, set[str]] = {}
    for word in dict.fromkeys(_WORD.findall(question)):
        stems = set(body_text.sentence_terms([word])[0])
        lower = word.lower()
        forms = {lower, lower[:-1] if lower.endswith("s") else lower, lower[:-2] if lower.endswith("es") else lower}
        if stems and stems <= asked and not stems & used and not any(form in text for form in forms if form):
            absent[word] = stems
    missing = set().union(*absent.values()) if absent else set()
    return tuple(list(absent)[:MAX_ABSENT]) if len(missing) >= ABSENT_SHARE * len(asked) else ()
