"""Which library papers a question names (issue #57): by arXiv id or link, by its title, by the coined name its
title starts with ("AgentRxiv", "BrowseComp", "Fin-R1"), or by first author and year ("Besta et al. 2025").

A name is looked up, not ranked: `NameIndex` maps every name to the papers it fits, and `mentions` reads a question
once, word by word, with bounded work per word (dictionary look-ups over at most MAX_NAME_WORDS or TITLE_KEY words,
look-backs of a few words; the only patterns are linear), so a long or hostile question costs time in proportion
to its length.

Coined names: the words before the title's colon (at most MAX_NAME_WORDS), or the title's first word when it looks
made up (a digit, or a capital inside it: "Qwen2.5-Omni Technical Report"). A name is kept only when it is rare
among the library's titles (in at most MAX_NAME_TITLES of them), so "LLMs: …" or "Position: …" name nothing. A name
of ordinary words or capitals ("Chameleon", "Open Deep Search", "MADE") must be written with the title's capitals; a
made-up one ("AgentRxiv", "fin-r1") in any case. A name inside a longer hyphenated word ("GRPO-style") is not that name.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from copilot.methods.authors import AuthorNameError, fold, parse_author_name
from copilot.records import ARXIV_ID

ID, TITLE, NAME, AUTHOR = "id", "title", "name", "author"
MAX_NAME_WORDS = 5         # a coined name before a title's colon: at most this many words ("Qwen2.5-Omni": 3)
MAX_NAME_TITLES = 4        # … and in at most this many titles of the library (else it is a common term)
MIN_TITLE_WORDS = 4        # a whole title (or the part after its colon) this long is looked for word for word
TITLE_KEY = 3              # titles are found by their first words
MAX_MENTIONS = 12          # a question naming more stops being read for names
MAX_GAP = 3                # characters between two words of one name ("Fin-R1", "Open Deep Search")
_WORD = re.compile(r"[^\W_]+")
_YEAR = re.compile(r"(?:19|20)\d\d")
_SENTENCE_MARK = re.compile(r"[,;:!?()\[\]\"\u201c\u201d]")
_COMMON = {"a", "an", "the", "on", "in", "of", "for", "to", "and", "or", "is", "are", "do", "does", "can", "how",
           "what", "why", "when", "which", "who", "towards", "toward", "beyond", "survey", "review", "position",
           "paper", "note", "report", "benchmark", "dataset", "model", "models", "llm", "llms", "ai"}


@dataclass(frozen=True)
class Entry:
    """What the index knows of one paper."""
    id: str
    title: str
    authors: tuple[str, ...]
    year: int


@dataclass(frozen=True)
class Mention:
    """Words of the question that name papers of the library."""
    text: str                  # as written: "AgentRxiv", "Besta et al. 2025", "2503.18102"
    kind: str                  # ID | TITLE | NAME | AUTHOR
    ids: tuple[str, ...]       # the papers it fits, in library order (none: an id the library does not hold)
    start: int                 # where it is in the question

    @property
    def ambiguous(self) -> bool:
        return len(self.ids) > 1


@dataclass(frozen=True)
class _Word:
    text: str                  # as written
    key: str                   # folded: lower case, no accents
    start: int
    end: int


def _fold(word: str) -> str:
    return word.lower() if word.isascii() else fold(word)


def words_of(text: str) -> list[_Word]:
    return [_Word(m.group(0), _fold(m.group(0)), m.start(), m.end()) for m in _WORD.finditer(text)]


def keys_of(text: str) -> tuple[str, ...]:
    """The folded words of a text (what names and titles are matched by)."""
    return tuple(_WORD.findall(text.lower() if text.isascii() else fold(text)))


def looks_made_up(token: str) -> bool:
    """'AgentRxiv', 'Fin-R1', 'Qwen2.5-Omni', 'MKG-Rank': a digit beside letters, a capital inside a word, or a
    word of capitals only; not 'Vision-Language' or 'Risk-Based'."""
    if sum(ch.isalpha() for ch in token) < 2:
        return False
    if any(ch.isdigit() for ch in token):
        return True
    for part in _WORD.findall(token):
        if any(ch.isupper() for ch in part[1:]) and (any(ch.islower() for ch in part) or len(part) >= 3):
            return True
    return False


def _any_case(name: str) -> bool:
    """Whether a name is made up enough to be matched in any case: a digit ('Fin-R1') or a capital inside a word of
    small letters ('AgentRxiv'); a name of capitals only ('MADE', 'LIFT') is also a word, so it must be written so."""
    return any(ch.isdigit() for ch in name) or any(
        any(ch.isupper() for ch in part[1:]) and any(ch.islower() for ch in part) for part in _WORD.findall(name))


def coined_name(title: str) -> str:
    """The name a title starts with ("" when none): the words before its colon, or a made-up first word."""
    title = " ".join(title.split())
    head, colon, _ = title.partition(":")
    if colon and 0 < len(words_of(head)) <= MAX_NAME_WORDS and not _SENTENCE_MARK.search(head):
        return head.strip()
    first = title.split(" ", 1)[0].strip(".,;!?()[]\"'") if title else ""
    return first if looks_made_up(first) else ""


def _joined(words: Sequence[_Word], text: str) -> bool:
    """Whether consecutive words are one run of the text (short gaps, no sentence punctuation between them)."""
    return all(b.start - a.end <= MAX_GAP and not _SENTENCE_MARK.search(text, a.end, b.start)
               for a, b in zip(words, words[1:]))


def _compound_edge(text: str, start: int, end: int) -> bool:
    """Whether the span text[start:end] is part of a longer hyphenated word ("GRPO" in "GRPO-style")."""
    before = start >= 2 and text[start - 1] == "-" and text[start - 2].isalnum()
    after = end + 1 < len(text) and text[end] == "-" and text[end + 1].isalnum()
    return before or after


class NameIndex:
    """Every name of the library's papers, built once per library (`entries` in library order)."""

    def __init__(self, entries: Iterable[Entry]) -> None:
        self.ids: set[str] = set()
        self.titles: dict[tuple[str, ...], list[tuple[int, str, str]]] = {}    # first words → (words, joined, id)
        self.names: dict[tuple[str, ...], list[tuple[tuple[str, ...] | None, str]]] = {}
        self.authors: dict[str, list[tuple[int, str, tuple[str, ...]]]] = {}
        title_words: list[tuple[str, ...]] = []
        for entry in entries:
            self.ids.add(entry.id)
            self._add_titles(entry)
            self._add_author(entry)
            title_words.append(keys_of(entry.title))
            name = coined_name(entry.title)
            if name:
                found = words_of(name)
                exact = None if _any_case(name) else tuple(w.text for w in found)
                key = tuple(w.key for w in found)
                if key and not (len(key) == 1 and key[0] in _COMMON):
                    self.names.setdefault(key, []).append((exact, entry.id))
        self._drop_common_names(title_words)

    def _add_titles(self, entry: Entry) -> None:
        _, colon, tail = " ".join(entry.title.split()).partition(":")
        for text, least in ((entry.title, MIN_TITLE_WORDS), (tail if colon else "", MIN_TITLE_WORDS + 1)):
            words = keys_of(text)
            if len(words) >= least:
                bucket = self.titles.setdefault(tuple(sys.intern(w) for w in words[:TITLE_KEY]), [])
                held = (len(words), " ".join(words), entry.id)      # one string: a title's words take 7× the memory
                if held not in bucket:
                    bucket.append(held)

    def _add_author(self, entry: Entry) -> None:
        if not entry.authors:
            return
        try:
            first = parse_author_name(entry.authors[0])
        except AuthorNameError:
            return
        others = tuple(fold(a.split()[-1]) for a in entry.authors[1:2] if a.split())
        self.authors.setdefault(" ".join(first.last), []).append((entry.year, entry.id, others))

    def _drop_common_names(self, title_words: Sequence[tuple[str, ...]]) -> None:
        """A name in more than MAX_NAME_TITLES titles is a term of the field, not a paper's name."""
        counts = dict.fromkeys(self.names, 0)
        for words in title_words:
            seen = {words[i:i + n] for n in range(1, MAX_NAME_WORDS + 1) for i in range(len(words) - n + 1)}
            for key in seen:
                if key in counts:
                    counts[key] += 1
        for key, count in counts.items():
            if count > MAX_NAME_TITLES:
                del self.names[key]

    # --- reading a question
    def mentions(self, question: str) -> list[Mention]:
        """The names in `question`, in the order written (at most MAX_MENTIONS)."""
        found = self._ids(question)
        words = words_of(question)
        i = 0
        while i < len(words) and len(found) < MAX_MENTIONS:
            mention, used = self._title_at(question, words, i) or self._name_at(question, words, i) or (None, 1)
            if mention is None:
                mention, used = self._author_at(question, words, i) or (None, 1)
            if mention is not None:
                found.append(mention)
            i += used
        return sorted(found, key=lambda m: m.start)[:MAX_MENTIONS]

    def _ids(self, question: str) -> list[Mention]:
        found: list[Mention] = []
        seen: set[str] = set()
        for match in ARXIV_ID.finditer(question):
            start, end = match.start("base"), match.end()
            if (start and (question[start - 1].isalnum() or question[start - 1] == ".")) or \
                    (end < len(question) and question[end].isdigit()):
                continue
            paper_id = match.group("base")
            if paper_id not in seen:
                seen.add(paper_id)
                found.append(Mention(match.group(0), ID, (paper_id,) if paper_id in self.ids else (), start))
            if len(found) >= MAX_MENTIONS:
                break
        return found

    def _title_at(self, question: str, words: Sequence[_Word], i: int) -> tuple[Mention, int] | None:
        bucket = self.titles.get(tuple(w.key for w in words[i:i + TITLE_KEY]))
        if not bucket:
            return None
        best = 0
        ids: list[str] = []
        for n, title, paper_id in bucket:
            if n >= best and i + n <= len(words) and " ".join(w.key for w in words[i:i + n]) == title:
                if n > best:
                    best, ids = n, []
                if paper_id not in ids:
                    ids.append(paper_id)
        if not ids:
            return None
        span = words[i:i + best]
        return Mention(question[span[0].start:span[-1].end], TITLE, tuple(ids), span[0].start), best

    def _name_at(self, question: str, words: Sequence[_Word], i: int) -> tuple[Mention, int] | None:
        for n in range(min(MAX_NAME_WORDS, len(words) - i), 0, -1):
            span = words[i:i + n]
            entries = self.names.get(tuple(w.key for w in span))
            if not entries or not _joined(span, question) or \
                    _compound_edge(question, span[0].start, span[-1].end):
                continue
            written = tuple(w.text for w in span)
            ids = tuple(dict.fromkeys(pid for exact, pid in entries if exact is None or exact == written))
            if ids:
                return Mention(question[span[0].start:span[-1].end], NAME, ids, span[0].start), n
        return None

    def _author_at(self, question: str, words: Sequence[_Word], i: int) -> tuple[Mention, int] | None:
        """'Besta et al. 2025', 'Besta et al. (2025)', 'Besta et al.', 'Besta and Smith 2025', 'Besta (2025)':
        `i` is the word after the surname's last word."""
        after = words[i + 1] if i + 1 < len(words) else None
        second = ""
        if words[i].key == "et" and after is not None and after.key == "al" and after.start - words[i].end <= 2:
            year_at, needs_capital = i + 2, False
        elif words[i].key == "and" and after is not None and after.text[:1].isupper():
            year_at, second, needs_capital = i + 2, after.key, True
        elif i and _YEAR.fullmatch(words[i].text) and "(" in question[words[i - 1].end:words[i].start]:
            year_at, needs_capital = i, True      # "Besta (2025)"
        else:
            return None
        year = None
        if year_at < len(words) and _YEAR.fullmatch(words[year_at].text) and \
                not re.search(r"[A-Za-z]", question[words[year_at - 1].end:words[year_at].start]) and \
                words[year_at].start - words[year_at - 1].end <= 4:
            year = int(words[year_at].text)
        if year is None and needs_capital:
            return None                      # "X and Y" or "X (…)" without a year is no citation
        for n in (3, 2, 1):
            span = words[max(0, i - n):i]
            if len(span) < n or not _joined(span, question) or (needs_capital and not span[0].text[:1].isupper()):
                continue
            papers = self.authors.get(" ".join(w.key for w in span))
            if not papers:
                continue
            ids = tuple(pid for y, pid, others in papers
                        if (year is None or y == year) and (not second or second in others))
            if not ids:
                return None
            end = words[year_at].end if year is not None else words[min(i + 1, len(words) - 1)].end
            end += question[end:end + 1] == ")" or question[end:end + 1] == "."
            return Mention(question[span[0].start:end], AUTHOR, ids, span[0].start), 1
        return None
