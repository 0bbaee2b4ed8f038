"""Author names → arXiv author queries, and namesake grouping of the papers found. Pure functions.

A name is parsed into (first names, surname), accents and case folded, so "Yoshua Bengio", "bengio, yoshua"
and "Y. Bengio" become the same person key. arXiv's author syntax is `au:surname_initial` (words of a
surname joined by `_`), e.g. `au:del_maestro_a`; `au:del_maestro` matches every first name.

Namesakes: papers are linked when they share a co-author (full name; initials only match initials), then
small groups join the group sharing a category whose text (TF-IDF of title and abstract) is most similar,
above a threshold, never when the target's spelled-out first names conflict. The largest group comes first:
it is most likely the person looked up.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from copilot.records import Paper

MAX_NAME_CHARS = 100
SMALL_GROUP = 2          # groups this small join a group sharing their categories …
TEXT_LINK = 0.1          # … whose most similar paper has at least this TF-IDF cosine to one of theirs
RARE_NAME = 0.1          # fewer people than this expected to share the full name by chance: one person
MIN_FIELD_NAMES = 500    # distinct author names needed to estimate that
PARTICLES = {"da", "das", "de", "del", "della", "der", "den", "di", "do", "dos", "du", "la", "le", "van",
             "von", "ter", "ten", "st", "bin", "ibn", "al", "el", "mac", "zu", "af", "av"}
# Without a first name left over, only these unambiguous particles start a surname ('Del Maestro'), so that
# given names such as Le, Di or Da ('Le Song') stay first names.
LEADING_PARTICLES = {"de", "del", "della", "der", "den", "dos", "das", "du", "van", "von", "ter", "ten"}
SUFFIXES = {"jr", "sr", "ii", "iii", "iv"}
_FOLD = str.maketrans({"ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "ß": "ss", "æ": "ae", "œ": "oe",
                       "ı": "i", "’": "'", "‘": "'", "`": "'"})
_MARKUP = re.compile(r"[<>&{}\[\]\\/@#$%*=;:\"|^~+()]|https?", re.I)
_PUNCT = set(" .,'-")


class AuthorNameError(ValueError):
    """The text is not usable as an author name; the message says why. No query is sent for it."""


@dataclass(frozen=True)
class AuthorName:
    first: tuple[str, ...]     # folded first/middle names or initials, e.g. ("yoshua",) or ("a", "j")
    last: tuple[str, ...]      # folded surname words, e.g. ("del", "maestro")

    @property
    def initial(self) -> str:
        return self.first[0][0] if self.first else ""

    @property
    def surname(self) -> str:
        return " ".join(self.last)

    @property
    def key(self) -> str:
        """Surname plus first initial: 'sachdev s'. Equal keys are treated as one co-author."""
        return f"{self.surname} {self.initial}".strip()

    @property
    def given(self) -> str:
        """The spelled-out first name ('' when only initials are known)."""
        return self.first[0] if self.first and len(self.first[0]) > 1 else ""

    def display(self) -> str:
        firsts = " ".join(f.capitalize() if len(f) > 1 else f.upper() + "." for f in self.first)
        return f"{firsts} {' '.join(w.capitalize() for w in self.last)}".strip()


def fold(text: str) -> str:
    """Lower case, accents removed: 'Müller' → 'muller', 'Łukasz' → 'lukasz'."""
    text = unicodedata.normalize("NFKD", text.lower().translate(_FOLD))
    return "".join(ch for ch in text if not unicodedata.combining(ch)).translate(_FOLD)


def _words(text: str) -> list[str]:
    spaced = fold(text).replace(".", ". ").replace("'", "")
    return [w.strip(".-") for w in spaced.split() if w.strip(".-")]


def parse_author_name(raw: str) -> AuthorName:
    """'Yoshua Bengio' | 'bengio, yoshua' | 'Y. Bengio' | 'Adrian Del Maestro' | 'del maestro' → AuthorName."""
    text = " ".join((raw or "").split())
    if not text:
        raise AuthorNameError("type an author name, e.g. 'Yoshua Bengio' or 'Bengio, Y.'")
    if len(text) > MAX_NAME_CHARS:
        raise AuthorNameError(f"that name is too long ({len(text)} characters; at most {MAX_NAME_CHARS})")
    if _MARKUP.search(text):
        raise AuthorNameError("a name may hold only letters, spaces, hyphens, apostrophes, periods and one comma"
                              " (no HTML, links or query syntax)")
    if text.count(",") > 1 or not all(ch.isalpha() or ch in _PUNCT for ch in text.translate(_FOLD)) \
            or not any(ch.isalpha() for ch in text):
        raise AuthorNameError("a name may hold only letters, spaces, hyphens, apostrophes, periods and one comma")
    if "," in text:
        last_part, first_part = text.split(",", 1)
        first, last = _words(first_part), _words(last_part)
    else:
        words = _words(text)
        while len(words) > 1 and words[-1] in SUFFIXES:
            words.pop()
        start = len(words) - 1
        while start > 0 and words[start - 1] in PARTICLES:
            start -= 1
        if start == 0 and len(words) > 1 and words[0] not in LEADING_PARTICLES:
            start = 1
        first, last = words[:start], words[start:]
    first = [w for w in first if w not in SUFFIXES]
    last = [part for word in last for part in word.split("-") if part]
    if not last or sum(len(w) for w in last) < 2:
        raise AuthorNameError("give at least a surname of two letters or more")
    return AuthorName(first=tuple(first), last=tuple(last))


def full_name_query(name: AuthorName) -> str | None:
    """The arXiv query for the whole name as a phrase, 'au:"muhao chen"'; None when no first name is spelled out
    (an initial alone would match every namesake with that initial)."""
    if not name.given:
        return None
    return f'au:"{" ".join((name.given, *name.last))}"'


def author_queries(name: AuthorName) -> list[str]:
    """The broader arXiv author queries, most precise first: ['au:del_maestro_a', 'au:del_maestro']."""
    surname = "_".join(name.last)
    queries = [f"au:{surname}_{name.initial}"] if name.initial else []
    return queries + [f"au:{surname}"]


def _given_compatible(a: str, b: str) -> bool:
    """Spelled-out first names fit when either is unknown (an initial only) or they are the same name, hyphens aside
    ('Qi-Xiang' = 'Qixiang'). A name never fits a longer one it begins (issue #59: 'Qi Zhang' took in Qiang, Qian and
    Qiuhong Zhang)."""
    return not a or not b or a.replace("-", "") == b.replace("-", "")


def name_matches(target: AuthorName, author: str) -> bool:
    """Is the paper author `author` possibly the person `target`? Same surname, compatible first names."""
    try:
        other = parse_author_name(author)
    except AuthorNameError:
        return False
    if other.last != target.last:
        return False
    if not target.initial or not other.initial:
        return True
    return target.initial == other.initial and _given_compatible(target.given, other.given)


def matching_author(target: AuthorName, authors: Sequence[str]) -> str | None:
    return next((a for a in authors if name_matches(target, a)), None)


def written_as_typed(target: AuthorName, author: str) -> bool:
    """Is `author` the name as the user typed it: the same spelled-out first name (or, when only an initial was
    typed, the same initial), not merely an initial that fits it ('Q. Zhang' for 'Qi Zhang')?"""
    try:
        other = parse_author_name(author)
    except AuthorNameError:
        return False
    if other.last != target.last or (target.initial and other.initial != target.initial):
        return False
    return not target.given or (bool(other.given) and _given_compatible(target.given, other.given))


@dataclass
class NamesakeGroup:
    number: int                           # 1 = largest group
    paper_ids: list[str]
    coauthors: list[str]                  # most frequent first, as spelled on the papers
    categories: list[str]                 # most frequent primary categories first
    spellings: list[str] = field(default_factory=list)   # how the target's name is written on these papers

    def label(self) -> str:
        parts = [f"Group {self.number}: {len(self.paper_ids)} paper{'s' if len(self.paper_ids) != 1 else ''}"]
        if self.spellings:
            parts.append("as " + " / ".join(self.spellings[:3]))
        if self.categories:
            parts.append(", ".join(self.categories[:3]))
        parts.append("with " + ", ".join(self.coauthors[:4]) if self.coauthors else "no co-authors")
        return " · ".join(parts)


def _author_key(author: str) -> str | None:
    """'Subir Sachdev' → 'sachdev subir'; 'S. Sachdev' → 'sachdev s' (initials link only to initials: common
    surname+initial keys such as 'wang y' would join strangers)."""
    try:
        name = parse_author_name(author)
    except AuthorNameError:
        return None
    return f"{name.surname} {name.given or name.initial}".strip()


def _given_of(target: AuthorName, authors: Sequence[str]) -> str:
    spelled = matching_author(target, authors)
    if spelled is None:
        return ""
    try:
        return parse_author_name(spelled).given
    except AuthorNameError:
        return ""


class _Groups:
    """Union-find over paper indexes that refuses to join groups whose spelled first names conflict."""

    def __init__(self, givens: list[str]) -> None:
        self.parent = list(range(len(givens)))
        self.givens = [{g} - {""} for g in givens]

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def conflict(self, a: int, b: int) -> bool:
        return any(not _given_compatible(x, y) for x in self.givens[a] for y in self.givens[b])

    def union(self, a: int, b: int) -> bool:
        a, b = self.find(a), self.find(b)
        if a == b or self.conflict(a, b):
            return False
        self.parent[b] = a
        self.givens[a] |= self.givens[b]
        return True

    def members(self) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for i in range(len(self.parent)):
            groups.setdefault(self.find(i), []).append(i)
        return groups


def _text_similarity(papers: Sequence[Paper]) -> np.ndarray:
    """Cosine similarity of the papers' TF-IDF vectors (title and abstract); zeros when there is no text."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    n = len(papers)
    try:
        matrix = TfidfVectorizer(stop_words="english", sublinear_tf=True).fit_transform(
            [f"{p.title} {p.abstract}" for p in papers])
    except ValueError:                                # no words at all
        return np.zeros((n, n))
    return (matrix @ matrix.T).toarray()


def _join_unlinked(groups: _Groups, papers: Sequence[Paper]) -> None:
    """When no two papers were linked, one group per paper would say nothing (issue #38: a one-person lookup split
    into a group per paper): papers sharing a category are taken as one person. Namesakes in other fields, or with a
    conflicting first name, stay apart."""
    for i in range(len(papers)):
        for j in range(i):
            if set(papers[i].categories) & set(papers[j].categories):
                groups.union(j, i)


def expected_namesakes(target: AuthorName, names: Iterable[str]) -> float | None:
    """How many people of a field would carry the target's first name and surname by chance: (field's distinct names
    with that first name) × (with that surname) / (distinct names), first and surname taken as independent. Below
    RARE_NAME the name is taken as one person's. None when the target's first name is not spelled out or the field
    is too small to say."""
    if not target.given:
        return None
    distinct = {fold(name) for name in names}
    if len(distinct) < MIN_FIELD_NAMES:
        return None
    surname = target.last[-1]
    given = sum(1 for name in distinct if name.split(" ", 1)[0] == target.given)
    same_surname = sum(1 for name in distinct if name.rsplit(" ", 1)[-1] == surname)
    return given * same_surname / len(distinct)


def group_namesakes(papers: Sequence[Paper], target: AuthorName, small_group: int = SMALL_GROUP,
                    text_link: float = TEXT_LINK, rare_name: bool = False) -> list[NamesakeGroup]:
    """Group the papers by likely identity of `target`; every paper lands in exactly one group. With `rare_name`
    (a first name and surname few people of the field share: `expected_namesakes`), a small group sharing a category
    joins its most similar group however little their words overlap (issue #49: Mohit Bansal's story-evaluation paper,
    with co-authors of its own, was shown as a namesake's)."""
    if rare_name:
        text_link = 0.0
    target_key = target.key
    coauthor_keys: list[set[str]] = []
    for paper in papers:
        named = {_author_key(a) for a in paper.authors if not name_matches(target, a)}
        coauthor_keys.append({k for k in named if k and k != target_key})
    groups = _Groups([_given_of(target, p.authors) for p in papers])
    first_with: dict[str, int] = {}
    for i, keys in enumerate(coauthor_keys):          # 1) shared co-authors
        for key in sorted(keys):
            if key in first_with:
                groups.union(first_with[key], i)
            else:
                first_with[key] = i
    similarity = _text_similarity(papers)
    for _ in range(2):                                # 2) small groups join the most similar group in their field
        for root, idx in sorted(groups.members().items(), key=lambda kv: len(kv[1])):
            if len(idx) > small_group or groups.find(root) != root:
                continue
            cats = {c for i in idx for c in papers[i].categories}
            best, best_score = None, text_link
            for other, other_idx in groups.members().items():
                if other == root or len(other_idx) < len(idx) or groups.conflict(root, other) or \
                        not cats & {c for i in other_idx for c in papers[i].categories}:
                    continue
                score = float(similarity[np.ix_(idx, other_idx)].max())
                if score >= best_score:
                    best, best_score = other, score
            if best is not None:
                groups.union(best, root)
    if all(len(idx) == 1 for idx in groups.members().values()):
        _join_unlinked(groups, papers)
    ordered = sorted(groups.members().values(), key=lambda idx: (-len(idx), idx[0]))
    result = []
    for number, idx in enumerate(ordered, start=1):
        coauthors: Counter[str] = Counter()
        spellings: Counter[str] = Counter()
        for i in idx:
            for author in papers[i].authors:
                if name_matches(target, author):
                    spellings[author] += 1
                else:
                    coauthors[author] += 1
        result.append(NamesakeGroup(
            number=number, paper_ids=[papers[i].id for i in idx],
            coauthors=[a for a, _ in coauthors.most_common()],
            categories=[c for c, _ in Counter(papers[i].primary_category for i in idx).most_common()],
            spellings=[s for s, _ in spellings.most_common()]))
    return result
