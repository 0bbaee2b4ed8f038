"""Profile use cases: a researcher's saved research profile (versioned, per user).

Shared interface (Trends and Chat import it): `Profile`, `load_profile`, `save_profile`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from copilot.errors import UserError
from copilot.features.library import ingestor
from copilot.grounding import check, close_cut_statements, keep_paper_citations, tidy
from copilot.llm import LLMError
from copilot.methods.authors import (AuthorName, AuthorNameError, NamesakeGroup, author_queries, fold,
                                     full_name_query, group_namesakes, matching_author, parse_author_name)
from copilot.prompts import PROFILE_DRAFT, PROFILE_STATEMENT_CHARS, profile_grammar, source_block
from copilot.records import Paper, date_number, parse_arxiv_id, parse_id_list, storable_text
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSourceError
from copilot.store.profiles import BrokenProfile, Profile   # Trends, Chat and the Profile tab import them here

log = logging.getLogger(__name__)

MAX_KEYWORDS = 10
MAX_PROFILE_CHARS = 20000
DEFAULT_USER = "local"        # the single local user; equals copilot.ui.common.LOCAL_USER
PROFILE_UNREADABLE = "profile_unreadable"                  # failure kinds counted in `status --json`
PROFILE_PAPERS_NOT_STORED = "profile_papers_not_stored"


class ProfileError(UserError, ValueError):
    """Bad input or a fault the user can act on; the message says what to do."""


def _check_user(user: str) -> str:
    user = (user or "").strip()
    if not user:
        raise ProfileError("no user given")
    return user


def load_profile(services: Services, user: str) -> Profile | None:
    """The latest saved version of `user`'s profile, None if they never saved one (BrokenProfile: unreadable)."""
    return services.profiles.latest(_check_user(user))


def profile_for_personalizing(services: Services, user: str) -> tuple[Profile | None, str]:
    """(profile, notice) for adapting answers to `user`. A profile that cannot be read is not used: the notice
    says so, and the failure is logged and counted (`status --json`)."""
    try:
        return load_profile(services, user), ""
    except Exception as error:
        reason = f"{type(error).__name__}: {error}"
        log.warning("profile of %s not read, so not used: %s", user, reason)
        services.failures.record(PROFILE_UNREADABLE, f"user {user}: {reason}")
        return None, "Your saved profile could not be read, so this is not personalized. Save your profile again."


def reader_text(services: Services, user: str, max_chars: int = 600) -> tuple[str, str]:
    """(the profile text a chat answer is adapted to, notice)."""
    profile, notice = profile_for_personalizing(services, user)
    return (" ".join(profile.text.split())[:max_chars] if profile else ""), notice


def saved_papers(services: Services, profile: Profile) -> list[Paper]:
    """The stored papers of a saved profile (those not in the library are left out)."""
    return services.store.get_papers(profile.paper_ids)


def _clean_keywords(keywords: Sequence[str] | str) -> list[str]:
    if isinstance(keywords, str):
        keywords = keywords.replace("\n", ",").split(",")
    seen: dict[str, str] = {}
    for word in keywords:
        word = " ".join(storable_text(str(word)).split()).strip(" .;:-*\"'")
        if word and word.lower() not in seen and len(word) <= 80:
            seen[word.lower()] = word
    return list(seen.values())[:MAX_KEYWORDS]


def _paper_ids(papers: Sequence[str | Paper]) -> tuple[list[str], dict[str, Paper]]:
    ids, given = [], {}
    for item in papers:
        if isinstance(item, Paper):
            pid = item.id
            given[pid] = item
        else:
            parsed = parse_arxiv_id(str(item))
            if not parsed:
                raise ProfileError(f"not an arXiv id: {str(item)[:60]!r}")
            pid = parsed[0]
        if pid not in ids:
            ids.append(pid)
    return ids, given


def upsert_selected(services: Services, user: str, ids: Sequence[str], given: dict[str, Paper] | None = None) -> int:
    """Put the selected papers into the paper store (those not already there) through the ingestion pipeline
    (its lock and its run record); returns how many were added.

    Papers given as objects are used as they are; missing ids are fetched from arXiv (ArxivSourceError
    propagates; IngestBusy when another ingestion is running). Stored papers are left alone: the scheduled
    ingestion keeps them current.
    """
    given = given or {}
    stored = services.store.paper_versions(list(ids))
    missing = [pid for pid in ids if pid not in stored]
    if not missing:
        return 0
    papers = [given[pid] for pid in missing if pid in given]
    to_fetch = [pid for pid in missing if pid not in given]
    if to_fetch:
        papers += services.arxiv.by_ids(to_fetch)
    if not papers:
        return 0
    return ingestor(services).run(f"profile:{user}", papers).added


def save_profile(services: Services, user: str, text: str, keywords: Sequence[str] | str,
                 paper_ids: Sequence[str | Paper]) -> Profile:
    """Save a new version of `user`'s profile and upsert the selected papers into the paper store. Papers that
    cannot be stored now do not stop the save: the returned profile's `notice` says so, and the failure is
    logged and counted (`status --json`)."""
    user = _check_user(user)
    text = storable_text(text).strip()
    if not text:
        raise ProfileError("the profile text is empty; write or generate it first")
    if len(text) > MAX_PROFILE_CHARS:
        raise ProfileError(f"the profile text is too long ({len(text)} characters; at most {MAX_PROFILE_CHARS})")
    ids, given = _paper_ids(paper_ids)
    words = _clean_keywords(keywords)
    notice = ""
    if ids:
        try:
            upsert_selected(services, user, ids, given)
        except Exception as error:  # the profile is still worth saving; the papers can come later
            reason = f"{type(error).__name__}: {error}"
            log.warning("selected papers of %s not stored: %s", user, reason)
            services.failures.record(PROFILE_PAPERS_NOT_STORED, f"user {user}: {reason}"[:500])
            notice = (f"Saved, but your papers could not be added to the library now ({error}). They stay listed "
                      "in your profile; save again later to add them.")
    profile = services.profiles.save(user, text, words, ids)
    return replace(profile, notice=notice)


# --- lookup by author name ------------------------------------------------------------------------------------
@dataclass
class Candidate:
    paper: Paper
    group: int                  # NamesakeGroup.number
    written_as: str             # how the looked-up name is spelled on this paper
    found_in: str = "arxiv"     # "library", "arxiv" or "both"

    def as_dict(self) -> dict:
        p = self.paper
        return {"id": p.id, "title": p.title, "date": p.published.isoformat(), "authors": list(p.authors),
                "primary_category": p.primary_category, "group": self.group, "found_in": self.found_in}


@dataclass
class Lookup:
    name: str                   # the parsed name, displayed
    query: str                  # the arXiv query whose results are shown ('' when none was sent)
    candidates: list[Candidate]
    groups: list[NamesakeGroup]
    dropped: int = 0            # papers arXiv returned whose authors do not match the name
    message: str = ""

    def as_dict(self) -> dict:
        return {"name": self.name, "query": self.query, "candidates": [c.as_dict() for c in self.candidates],
                "groups": [{"group": g.number, "label": g.label(), "paper_ids": g.paper_ids} for g in self.groups],
                "message": self.message}


NOT_FOUND_HINT = "You can also paste arXiv ids or links, or paste a text about your research."
# The full name's own results are read to the end (up to this many): a common surname's other authors must not
# crowd the person's papers out of a list cut at the newest N (issue #18: "chen, muhao" found 5 of 10).
MAX_OWN_PAPERS = 300


def parse_name(name: str) -> AuthorName:
    """The name as an AuthorName, or ProfileError (and no arXiv query) when it is not usable."""
    try:
        return parse_author_name(name)
    except AuthorNameError as error:
        raise ProfileError(str(error)) from None


def _fetch(services: Services, query: str, limit: int,
           progress: Callable[[int], None] | None, done: int = 0) -> tuple[list[Paper], str]:
    """Papers for one author query; a failure after some pages keeps those pages and says so."""
    papers: list[Paper] = []
    try:
        for paper in services.arxiv.by_author(query, max_results=limit):
            papers.append(paper)
            if progress:
                progress(done + len(papers))
    except ArxivSourceError as error:
        if not papers:
            raise ArxivDown(str(error)) from None
        return papers, f"arXiv stopped answering after {len(papers)} papers ({error}); showing those."
    return papers, ""


class ArxivDown(Exception):
    """arXiv could not be searched at all (the library's papers may still answer the lookup)."""


def _matching(papers: Sequence[Paper], target: AuthorName) -> tuple[list[tuple[Paper, str]], int]:
    kept, dropped = [], 0
    for paper in papers:
        written = matching_author(target, paper.authors)
        if written is None:
            dropped += 1
        else:
            kept.append((paper, written))
    return kept, dropped


def _from_arxiv(services: Services, target: AuthorName, limit: int,
                progress: Callable[[int], None] | None) -> tuple[list[tuple[Paper, str]], str, int, str]:
    """(papers with the name as written, the query that found them, dropped, warning). The full name first, read
    to the end; only when it finds nothing, the broader queries (surname and initial, then the surname)."""
    kept, dropped, warning, query = [], 0, "", ""
    full = full_name_query(target)
    if full:
        found, warning = _fetch(services, full, MAX_OWN_PAPERS, progress)
        kept, dropped = _matching(found, target)
        query = full
    if not kept:
        for query in author_queries(target):
            found, warning = _fetch(services, query, limit, progress)
            kept, more = _matching(found, target)
            dropped += more
            if kept:
                if len(found) >= limit:
                    warning = (warning + f" Showing the newest {limit} arXiv results for {query}.").strip()
                break
    return kept, query, dropped, warning


def _from_library(services: Services, target: AuthorName) -> list[tuple[Paper, str]]:
    """The library's papers with an author of this name (same normalisation as the arXiv path)."""
    ids = [row.id for row in services.catalog.rows() if matching_author(target, row.authors) is not None]
    papers = services.store.get_papers(ids[:MAX_OWN_PAPERS])
    return [(paper, matching_author(target, paper.authors)) for paper in papers]


def lookup_author(services: Services, name: str, max_results: int | None = None,
                  progress: Callable[[int], None] | None = None) -> Lookup:
    """Papers by `name` from the library and from arXiv (when reachable), merged by id and grouped by likely
    identity. On arXiv the full name is asked first and read to the end; the surname with its initial, then the
    surname alone, only when the full name finds nothing — keeping authors whose first names fit."""
    target = parse_name(name)
    limit = max_results or services.settings.profile_max_papers
    local = _from_library(services, target)
    try:
        remote, query, dropped, warning = _from_arxiv(services, target, limit, progress)
    except ArxivDown as error:
        if not local:
            raise ProfileError(f"arXiv could not be searched: {error}. Your saved profile is unchanged. "
                               + NOT_FOUND_HINT) from None
        remote, query, dropped = [], "", 0
        warning = f"arXiv could not be searched ({error}); showing the papers in this library."
    where: dict[str, str] = {}
    merged: dict[str, tuple[Paper, str]] = {}
    for paper, written in remote:
        merged[paper.id], where[paper.id] = (paper, written), "arxiv"
    for paper, written in local:
        where[paper.id] = "both" if paper.id in merged else "library"
        merged.setdefault(paper.id, (paper, written))
    if not merged:
        others = f" (arXiv had {dropped} by authors with other first names)" if dropped else ""
        return Lookup(target.display(), query, [], [], dropped,
                      f"No papers found for {target.display()} on arXiv or in this library{others}. "
                      + NOT_FOUND_HINT)
    papers = [paper for paper, _ in merged.values()]
    groups = group_namesakes(papers, target)
    group_of = {pid: g.number for g in groups for pid in g.paper_ids}
    candidates = [Candidate(p, group_of[p.id], written, where[p.id]) for p, written in merged.values()]
    candidates.sort(key=lambda c: (c.group, -date_number(c.paper.published)))
    in_library = sum(1 for c in candidates if c.found_in != "arxiv")
    message = (f"{len(candidates)} papers found for {target.display()} in {len(groups)} group(s)"
               f" ({in_library} of them in this library).")
    if len(groups) > 1:
        message += " Groups may be different people with the same name: uncheck the ones that are not you."
    if warning:
        message += " " + warning
    return Lookup(target.display(), query, candidates, groups, dropped, message)


# --- papers by id ---------------------------------------------------------------------------------------------
def papers_from_ids(services: Services, text: str, limit: int | None = None) -> tuple[list[Paper], str]:
    """The papers for pasted ids/links (from the paper store, else arXiv), and a message about what is missing."""
    wanted, bad = parse_id_list(text)
    limit = limit or services.settings.profile_max_papers
    if not wanted:
        raise ProfileError("no arXiv id or link found; paste ids like 2401.01234 or https://arxiv.org/abs/2401.01234")
    notes = [f"not arXiv ids, ignored: {', '.join(bad[:5])}"] if bad else []
    if len(wanted) > limit:
        notes.append(f"only the first {limit} ids are used")
        wanted = wanted[:limit]
    base = {token: parse_arxiv_id(token)[0] for token in wanted}
    found = {p.id: p for p in services.store.get_papers(list(base.values()))}
    missing = [token for token in wanted if base[token] not in found]
    if missing:
        try:
            found.update({p.id: p for p in services.arxiv.by_ids(missing)})
        except ArxivSourceError as error:
            raise ProfileError(f"arXiv could not be reached: {error}. Your saved profile is unchanged.") from None
    not_found = [token for token in wanted if base[token] not in found]
    if not_found:
        notes.append(f"not found on arXiv: {', '.join(not_found[:5])}")
    papers = [found[base[token]] for token in wanted if base[token] in found]
    if not papers:
        raise ProfileError("none of these ids was found on arXiv; check them, or look up your name or paste a text")
    return papers, "; ".join(notes)


# --- generation -----------------------------------------------------------------------------------------------
MIN_WORDS, MAX_WORDS = 150, 300
MIN_KEYWORDS, TARGET_KEYWORDS = 5, 8
PROMPT_ABSTRACT_CHARS = 240
DRAFT_NOTICE = "This is a draft written by a small language model: check it, edit it, then save."
TEXT_SOURCE_ID = "text"
_KEYWORDS_LINE = re.compile(r"^[\s*#_\-]*key\s*-?\s*words?\s*[*_]*\s*:?[*_]*\s*(?P<rest>.*)$", re.I | re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_STOP = {"paper", "papers", "propose", "proposed", "proposes", "results", "result", "show", "shows", "approach",
         "approaches", "method", "methods", "using", "based", "novel", "new", "study", "work", "present",
         "presents", "demonstrate", "use", "used", "also", "however", "well", "two", "one", "first", "via",
         "research", "researcher", "keywords", "keyword", "profile", "arxiv", "et", "al", "state", "art"}


@dataclass
class Draft:
    text: str
    keywords: list[str]
    paper_ids: list[str]
    notes: list[str]          # what validation changed, for the UI
    raw: str = ""             # the model's output as it came

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


def keyword_terms(docs: Sequence[str], count: int = TARGET_KEYWORDS) -> list[str]:
    """Terms (1–2 words) with the highest TF-IDF summed over the documents; a bigram hides its own words."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

    docs = [d for d in docs if d and d.strip()]
    if not docs:
        return []
    vectorizer = TfidfVectorizer(stop_words=sorted(ENGLISH_STOP_WORDS | _STOP), ngram_range=(1, 2),
                                 token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z\-]{2,}\b", sublinear_tf=True)
    try:
        matrix = vectorizer.fit_transform(docs)
    except ValueError:        # nothing but stop words
        return []
    scores = np.asarray(matrix.sum(axis=0)).ravel()
    terms = vectorizer.get_feature_names_out()
    chosen: list[str] = []
    for index in np.argsort(-scores, kind="stable"):
        term = str(terms[index])
        if any(term in c.split() or c in term.split() or term == c for c in chosen):
            continue
        if " " in term and any(word in c.split() for word in term.split() for c in chosen):
            continue
        chosen.append(term)
        if len(chosen) >= count:
            break
    return chosen


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
        added = []
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
    """Yield the model's text as it grows, then the validated Draft (last item)."""
    if not papers and not (pasted or "").strip():
        raise ProfileError("select at least one paper or paste a text about your research. " + NOT_FOUND_HINT)
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
        raise ProfileError(f"the language model failed ({error}); your saved profile is unchanged") from None
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
