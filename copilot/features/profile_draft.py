"""Profile: a draft of the research profile from the researcher's papers (and a pasted text), with keywords.

On the tiny model profile the draft has no model words: a first-person template the app fills with noun phrases cut
from the papers' titles (methods.phrases) and each paper's own key sentence, quoted and cited (`quoted_draft`). On
the capable profile the model writes it, and `finalize_draft` checks citations, length, person and keywords.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from copilot.errors import failure_sentence
from copilot.features.profile import (
    MAX_KEYWORDS,
    NOT_FOUND_HINT,
    Profile,
    ProfileError,
    _clean_keywords,
    papers_from_ids,
    save_profile,
)
from copilot.grounding import check, close_cut_statements, keep_paper_citations, tidy
from copilot.llm import LLMError
from copilot.methods import evidence, phrases, quotes, sentence_roles
from copilot.methods.authors import fold
from copilot.prompts import PROFILE_DRAFT, PROFILE_STATEMENT_CHARS, profile_grammar, source_block
from copilot.records import Paper
from copilot.services import Services

MIN_WORDS, MAX_WORDS = 150, 300
MIN_KEYWORDS, TARGET_KEYWORDS = 5, 8
PROMPT_ABSTRACT_CHARS = 240
DRAFT_NOTICE = "This is a draft written by a small language model: check it, edit it, then save."
TEXT_SOURCE_ID = "text"
CANDIDATE_TERMS = 30      # the statistical weight's best terms, of which meaning keeps the keywords
GENERIC_SHARE = 0.05       # a term used by more of the field's papers than this names no one's topic
_KEYWORDS_LINE = re.compile(r"^[\s*#_\-]*key\s*-?\s*words?\s*[*_]*\s*:?[*_]*\s*(?P<rest>.*)$", re.I | re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_STOP = {"paper", "papers", "propose", "proposed", "proposes", "results", "result", "show", "shows", "approach",
         "approaches", "method", "methods", "using", "based", "novel", "new", "study", "work", "present",
         "presents", "demonstrate", "use", "used", "also", "however", "well", "two", "one", "first", "via",
         "research", "researcher", "keywords", "keyword", "profile", "arxiv", "et", "al", "state", "art",
         # words every abstract of the field uses: they say nothing about whose papers these are
         "model", "models", "data", "large", "performance", "task", "tasks", "framework", "experiments",
         "experimental", "significant", "significantly", "existing", "achieve", "achieves", "improve", "improves",
         "improved", "improvement", "improvements", "effective", "effectively", "extensive", "various", "different",
         "challenge", "challenges", "challenging", "key", "address", "introduce", "leverage", "leveraging", "enable",
         "enables", "capabilities", "ability", "abilities", "high", "better", "superior", "outperforms", "while"}
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")


@dataclass
class Draft:
    text: str
    keywords: list[str]
    paper_ids: list[str]
    notes: list[str]          # what validation changed, for the UI
    raw: str = ""             # the model's output as it came
    quoted: bool = False      # made by `quoted_draft` (the tiny profile): no model words

    @property
    def notice(self) -> str:
        return QUOTED_NOTICE if self.quoted else DRAFT_NOTICE

    @property
    def words(self) -> int:
        return len(self.text.split())


def _material(papers: Sequence[Paper], pasted: str) -> list[str]:
    docs = [p.document for p in papers]
    if pasted.strip():
        docs += [part for part in re.split(r"\n\s*\n", pasted) if part.strip()] or [pasted]
    return docs


def draft_prompt(papers: Sequence[Paper], pasted: str = "", max_input_chars: int = 4000, max_papers: int = 5):
    """Short on purpose: a 135M model writes better from little, and prompt evaluation is the slow part."""
    blocks = [source_block(p.id, f"{p.title}. {p.abstract[:PROMPT_ABSTRACT_CHARS]}") for p in papers[:max_papers]]
    if pasted.strip():
        blocks.append(source_block(TEXT_SOURCE_ID, pasted.strip()[:max_input_chars]))
    example = papers[0].id if papers else "2401.01234"
    return PROFILE_DRAFT.render(sources="\n".join(blocks), min_words=MIN_WORDS, max_words=MAX_WORDS,
                                example_id=example)


def keyword_terms(docs: Sequence[str], count: int = TARGET_KEYWORDS, field: Sequence[str] = (),
                  embed: Callable[[list[str]], np.ndarray] | None = None) -> list[str]:
    """Terms (1–2 words) that name the documents' topics, best first; a bigram hides its own words.

    The weight is a term's TF-IDF summed over the documents. With `field` (other papers of the library) the IDF is
    the field's, a term more than GENERIC_SHARE of the field uses is left out, and terms two or more of the
    documents use come before terms of one (with three documents or more): "video reasoning" in several of a
    researcher's papers, not "noise" said often in one of them, nor "multiple", which the whole field says
    (issue #49); with `embed` too, of the CANDIDATE_TERMS best the ones nearest in meaning to the documents are
    kept. Without a field the IDF is the documents' own."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

    docs = [_LATEX_COMMAND.sub(" ", d) for d in docs if d and d.strip()]      # "\\textbf{X}" is not a keyword
    if not docs:
        return []
    background = [_LATEX_COMMAND.sub(" ", d) for d in field if d and d.strip()]
    vectorizer = TfidfVectorizer(stop_words=sorted(ENGLISH_STOP_WORDS | _STOP), ngram_range=(1, 2),
                                 token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z\-]{2,}\b", sublinear_tf=True)
    try:
        matrix = vectorizer.fit_transform(docs + background)
    except ValueError:        # nothing but stop words
        return []
    own = matrix[:len(docs)]
    scores = np.asarray(own.sum(axis=0)).ravel()
    if background:
        field_share = np.asarray((matrix[len(docs):] > 0).sum(axis=0)).ravel() / len(background)
        scores = np.where(field_share > GENERIC_SHARE, 0.0, scores)
        if len(docs) >= 3:
            recurs = np.asarray((own > 0).sum(axis=0)).ravel() >= 2
            scores = np.where(recurs & (scores > 0), scores + scores.max(), scores)
    terms = vectorizer.get_feature_names_out()
    if embed is not None and background:
        return _nearest_terms(_distinct_terms(terms, scores, CANDIDATE_TERMS), docs, embed, count)
    return _distinct_terms(terms, scores, count)


def _nearest_terms(candidates: list[str], docs: Sequence[str], embed: Callable[[list[str]], np.ndarray],
                   count: int) -> list[str]:
    """The candidates whose meaning is nearest the documents' mean (unit vectors): a topic the papers are about
    ("video reasoning") before a word they merely use ("adopt", "handle")."""
    if not candidates:
        return []
    centre = np.asarray(embed(list(docs)), dtype=np.float32).mean(axis=0)
    near = np.asarray(embed(candidates), dtype=np.float32) @ centre
    return [candidates[i] for i in np.argsort(-near, kind="stable")[:count]]


def _distinct_terms(terms, scores: np.ndarray, count: int) -> list[str]:
    chosen: list[str] = []
    for index in np.argsort(-scores, kind="stable"):
        if scores[index] <= 0:
            break
        term = str(terms[index])
        if any(term in c.split() or c in term.split() or term == c or _same_word(term, c) for c in chosen):
            continue
        if " " in term and any(word in c.split() for word in term.split() for c in chosen):
            continue
        chosen.append(term)
        if len(chosen) >= count:
            break
    return chosen


def _same_word(a: str, b: str) -> bool:
    """"token" and "tokens", "query" and "queries": one keyword."""
    def stem(word: str) -> str:
        return word[:-3] + "y" if word.endswith("ies") else word[:-1] if word.endswith("s") else word
    return stem(a) == stem(b)


def _source_words(docs: Sequence[str]) -> set[str]:
    words = set(re.findall(r"[a-z0-9][a-z0-9\-]*", fold(" ".join(docs))))
    return words | {w.rstrip("s") for w in words}


def _usable_keyword(word: str, vocabulary: set[str]) -> bool:
    folded = fold(word)
    if not 2 <= len(folded) <= 40 or not re.fullmatch(r"[a-z0-9][a-z0-9 \-+/.]*", folded):
        return False
    parts = [p for p in re.split(r"[\s/]+", folded) if p]
    if not 1 <= len(parts) <= 4 or all(p in _STOP or p.isdigit() for p in parts):
        return False
    return all(p in vocabulary or p.rstrip("s") in vocabulary for p in parts if len(p) > 2)


def split_keywords(raw: str) -> tuple[str, list[str]]:
    """The model output → (text without the keyword line, keyword strings as written)."""
    matches = list(_KEYWORDS_LINE.finditer(raw))
    if not matches:
        return raw, []
    last = matches[-1]
    tail = raw[last.start("rest"):]
    tail = re.split(r"\n\s*\n", tail, maxsplit=1)[0]
    items = re.split(r"[,;\n]|\s[•·]\s", tail)
    words = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", w).strip(" .*_#\"'") for w in items]
    return raw[:last.start()].rstrip(), [w for w in words if w]


def _sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def _limit_words(text: str, max_words: int) -> str:
    if len(text.split()) <= max_words:
        return text
    out, count = [], 0
    for paragraph in text.split("\n\n"):
        kept = []
        for sentence in _sentences(paragraph):
            n = len(sentence.split())
            if count + n > max_words:
                break
            kept.append(sentence)
            count += n
        if kept:
            out.append(" ".join(kept))
        if count >= max_words or len(kept) < len(_sentences(paragraph)):
            break
    return "\n\n".join(out) if out else " ".join(text.split()[:max_words]) + "…"


def finalize_draft(raw: str, papers: Sequence[Paper], pasted: str = "") -> Draft:
    """Validate what the model wrote: citations only of the selected papers, 150–300 words grounded in them,
    5–10 keywords that occur in the material (TF-IDF terms fill in when the model's list is unusable)."""
    notes: list[str] = []
    allowed = {p.id for p in papers}
    body, model_words = split_keywords(raw or "")
    checked = check(body, allowed=None, source_texts=[f"{p.title} {p.abstract}" for p in papers] + [pasted],
                    instructions=[PROFILE_DRAFT.system, PROFILE_DRAFT.user])
    notes += [note[0].lower() + note[1:].rstrip(".") for note in checked.notes]
    text, cited_ids, dropped = keep_paper_citations(checked.text, allowed)
    cited = set(cited_ids)
    if dropped:
        notes.append(f"removed {len(dropped)} citation(s) of papers that are not among the selected ones")
    text = _limit_words(tidy(text), MAX_WORDS)
    if text and not re.search(r"\b(I|my|me|My)\b", text):
        notes.append("the model's text is not in the first person; please rewrite it")
    if len(text.split()) < MIN_WORDS and papers:
        added: list[str] = []
        for paper in sorted(papers, key=lambda p: p.id in cited):
            if len(text.split()) + sum(len(s.split()) for s in added) >= MIN_WORDS:
                break
            added.append(f"In [{paper.id}] I worked on {paper.title.rstrip('.')}.")
            cited.add(paper.id)
        if added:
            text = (text + "\n\n" + " ".join(added)).strip()
            notes.append(f"the model's text was short: added {len(added)} sentence(s) naming selected papers")
        text = _limit_words(text, MAX_WORDS)
    if papers and not cited:
        named = [p.id for p in papers[:3]]
        text = (text + f"\n\nThis profile draws on my papers [{', '.join(named)}].").strip()
        notes.append("the model cited no selected paper: added a line naming them")
    docs = _material(papers, pasted)
    vocabulary = _source_words(docs)
    keywords = [w for w in dict.fromkeys(model_words) if _usable_keyword(w, vocabulary)][:MAX_KEYWORDS]
    if len(keywords) < MIN_KEYWORDS:
        from_model = len(keywords)
        for term in keyword_terms(docs, TARGET_KEYWORDS + 5):
            if len(keywords) >= TARGET_KEYWORDS:
                break
            if not any(term.lower() in k.lower() or k.lower() in term.lower() for k in keywords):
                keywords.append(term)
        notes.append(f"keywords: {from_model} usable from the model, the rest are TF-IDF terms of the material")
    return Draft(text=text, keywords=_clean_keywords(keywords), paper_ids=[p.id for p in papers], notes=notes,
                 raw=raw or "")


def stream_draft(services: Services, papers: Sequence[Paper], pasted: str = "",
                 max_tokens: int | None = None) -> Iterator[str | Draft]:
    """Yield the text as it grows, then the validated Draft (last item). Quoted on the tiny profile."""
    if not papers and not (pasted or "").strip():
        raise ProfileError("select at least one paper or paste a text about your research. " + NOT_FOUND_HINT)
    if services.model_profile.tiny:
        draft = quoted_draft(services, papers, pasted or "")
        yield draft.text
        yield draft
        return
    prompt = draft_prompt(papers, pasted or "", services.settings.max_input_chars,
                          services.settings.profile_prompt_papers)
    quoted = [p.id for p in papers[:services.settings.profile_prompt_papers]]
    grammar = profile_grammar(quoted) if services.llm.obeys_grammar else None
    raw = ""
    try:
        for piece in services.llm.stream(prompt, max_tokens=max_tokens or services.settings.profile_max_tokens,
                                         temperature=0.3, grammar=grammar):
            raw += piece
            yield raw
    except LLMError as error:
        raise ProfileError(failure_sentence("The language model failed while drafting", error,
                                            "Your saved profile is unchanged; you can write the text "
                                            "yourself.")) from None
    if grammar:   # the grammar's length cap may have cut a statement in the middle of a word
        raw = close_cut_statements(raw, PROFILE_STATEMENT_CHARS)
    yield finalize_draft(raw, papers, pasted or "")


def generate_draft(services: Services, papers: Sequence[Paper], pasted: str = "",
                   max_tokens: int | None = None) -> Draft:
    result = None
    for item in stream_draft(services, papers, pasted, max_tokens):
        result = item
    assert isinstance(result, Draft)
    return result


def build_profile(services: Services, user: str, ids: str = "", text: str = "",
                  max_tokens: int | None = None) -> tuple[Profile, Draft]:
    """Papers from ids and/or a pasted text → generated, validated draft → saved as the user's new version."""
    papers = papers_from_ids(services, ids)[0] if (ids or "").strip() else []
    draft = generate_draft(services, papers, text, max_tokens)
    if not draft.text:
        raise ProfileError("the model wrote nothing usable; write the profile yourself")
    return save_profile(services, user, draft.text, draft.keywords, papers), draft


FIELD_PAPERS = 1000      # the library's papers whose words tell a topic from what every abstract says …
MIN_FIELD_PAPERS = 200   # … when it holds enough of them to tell (5% of 20 papers would be one paper)


def field_documents(services: Services, leave_out: set[str], most: int = FIELD_PAPERS) -> list[str]:
    """Up to `most` of the library's papers, spread evenly over it (not the researcher's own): the field against
    which a keyword must stand out. [] for a library under MIN_FIELD_PAPERS."""
    ids = [row.id for row in services.catalog.rows() if row.id not in leave_out]
    if len(ids) < MIN_FIELD_PAPERS:
        return []
    step = max(1, len(ids) // most)
    return [p.document for p in services.store.get_papers(ids[::step][:most])]


# --- the tiny profile: a template the app fills with quotes ------------------------------------------------------
QUOTED_NOTICE = ("This draft quotes your papers' key sentences under a template; no model wrote it. Put it in your "
                 "own words, then save.")
PASTED_LABEL = "From the text you pasted"


def _key_sentences(services: Services, papers: Sequence[Paper], pasted: str) -> list[tuple[str, str]]:
    """(paper id or "", key sentence): each paper's sentence nearest its own embedding among those that say what
    it does or finds (never its background); the pasted text's sentence nearest to the whole text (the user's own
    words: all of it may be quoted)."""
    texts = [f"{p.title}\n{p.abstract}" for p in papers]
    stored = services.store.paper_embeddings([p.id for p in papers])
    missing = [n for n, p in enumerate(papers) if p.id not in stored]
    fresh = dict(zip(missing, services.embedder.embed([texts[n] for n in missing]))) if missing else {}
    targets = [stored[p.id] if p.id in stored else fresh[n] for n, p in enumerate(papers)]
    found = evidence.key_findings(np.vstack(targets), texts, services.embedder.embed,
                                  sentence_roles.trained_for(services.embedder.name)) if texts else []
    pairs = [(p.id, sentence) for p, sentence in zip(papers, found) if sentence]
    if pasted.strip():
        mine = quotes.key_sentences(services.embedder.embed_one(pasted)[None, :], ["\n" + " ".join(pasted.split())],
                                    services.embedder.embed)[0]
        pairs += [("", mine)] if mine else []
    return pairs


SENTENCE_PHRASES = 6      # the opening sentence names this many of the phrases; the keywords keep them all


def draft_phrases(services: Services, papers: Sequence[Paper], pasted: str = "") -> list[str]:
    """Noun phrases of the papers' titles (then abstracts, then the pasted text), as the researcher would write
    them: "object hallucinations", "retrospective replay" (methods.phrases), never a lone frequent word."""
    texts = [f"{p.title}. {p.abstract}" for p in papers] + ([pasted] if pasted.strip() else [])
    return phrases.research_phrases([p.title for p in papers], texts,
                                    field_documents(services, {p.id for p in papers}), services.embedder.embed,
                                    TARGET_KEYWORDS)


def quoted_draft(services: Services, papers: Sequence[Paper], pasted: str = "") -> Draft:
    """The first-person template: "I work on <terms>." then, per paper, "In [id] we wrote: “<its key sentence>”"."""
    every = list(papers)
    papers = every[:services.settings.profile_prompt_papers]
    keywords = draft_phrases(services, every, pasted)                    # keywords: every checked paper's
    named = keywords[:SENTENCE_PHRASES]
    lines = [f"I work on {', '.join(named[:-1])} and {named[-1]}." if len(named) > 1
             else f"I work on {named[0]}." if named else "My research:"]
    for pid, sentence in _key_sentences(services, papers, pasted):
        opening = f"In [{pid}] we wrote:" if pid else f"{PASTED_LABEL}:"
        lines.append(f"{opening} {quotes.OPEN_QUOTE}{sentence}{quotes.CLOSE_QUOTE}")
    return Draft(text="\n\n".join(lines), keywords=_clean_keywords(keywords), paper_ids=[p.id for p in papers],
                 notes=["quoted: each paper's own key sentence under a template, no model words"], quoted=True)
