"""Checks on every generated text a user sees: citations only of items actually given, no links the sources do
not contain, no repetition loops, no echoed instructions. Each check says what it removed, so the UI can tell.

Small models cite ids they invented, repeat one sentence until their token limit, and copy their instructions
into the answer; capable models rarely do, and pass through unchanged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from copilot.prompts import CANNOT_ANSWER
from copilot.records import ARXIV_ID, ARXIV_ID_PATTERN

# One bracket group such as [2], [1, 3], [2501.01234v2], [hep-th/9901001], [Source 4], [T0a1b2c3d4e].
_BRACKET = re.compile(r"\[([^\[\]\n]{1,80})\]")
_LABEL_WORD = re.compile(r"^(?:source|src|ref|paper|item|no\.?)\s*#?\s*", re.I)
_THOUGHT_ID = re.compile(r"^T[0-9a-f]{10}$")
_NUMBER = re.compile(r"^[1-9]\d{0,2}$")
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'\])]+", re.I)
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

_COPIED_SOURCE_TAG = re.compile(r"</?\s*source\b[^<>]{0,80}>", re.I)
MOVE_FLOOR = 3.0         # a word found in one of 8 sources weighs ln 8 ≈ 2.1: a move needs more than one such word
LOOP_NGRAM = 8            # a run of this many words seen before marks the start of a loop
NEAR_COPY_WORDS = 12      # a sentence this long or longer that mostly copies an earlier one is a loop…
NEAR_COPY_SHARE = 0.6     # …when this share of its (or the earlier one's) 3-word runs is shared
ECHO_NGRAM = 7            # a sentence sharing this many consecutive words with the instructions is an echo
SHORT_ECHO_RUN = 3        # …or, when shorter than that, made mostly of a run of this many instruction words


@dataclass
class Checked:
    text: str
    notes: list[str] = field(default_factory=list)
    dropped_citations: list[str] = field(default_factory=list)
    cut_loop: bool = False
    dropped_urls: list[str] = field(default_factory=list)
    echoed: bool = False
    moved_citations: list[tuple[str, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.dropped_citations or self.cut_loop or self.dropped_urls or self.echoed
                    or self.moved_citations)


def citation_key(token: str) -> str | None:
    """The normal form of one cited token, or None when it does not look like a citation at all."""
    token = _LABEL_WORD.sub("", token.strip().strip("'\"` "))
    if _NUMBER.match(token):
        return str(int(token))
    match = ARXIV_ID.fullmatch(token)
    if match:
        return match.group("base")
    if _THOUGHT_ID.match(token):
        return token
    return None


def cited(text: str) -> list[str]:
    """Citation keys in the text, in order of first appearance."""
    found: list[str] = []
    for group in _BRACKET.finditer(text or ""):
        for part in re.split(r"[,;]", group.group(1)):
            key = citation_key(part)
            if key and key not in found:
                found.append(key)
    return found


def drop_invalid_citations(text: str, allowed: Collection[str]) -> tuple[str, list[str]]:
    """Keep only citations of `allowed` keys; a bracket whose every part is an unknown citation disappears."""
    allowed = {citation_key(a) or a for a in allowed}
    dropped: list[str] = []

    def keep(match: re.Match) -> str:
        parts = [p.strip() for p in re.split(r"[,;]", match.group(1))]
        keys = [citation_key(p) for p in parts]
        if not all(keys):
            return match.group(0)           # not (only) citations, e.g. [sic] or an interval [0, 1]
        good = [k for k in keys if k and k in allowed]
        dropped.extend(p for p, k in zip(parts, keys) if k and k not in allowed)
        return "".join(f"[{k}]" for k in dict.fromkeys(good))

    cleaned = _BRACKET.sub(keep, text)
    return re.sub(r"[ \t]+([.,;:])", r"\1", re.sub(r"[ \t]{2,}", " ", cleaned)), dropped


# Citations written by id, as Trends and Profile ask for them: [id], [id1, id2], (arXiv:id …) or a bare id.
_PAPER_CITATION = re.compile(
    rf"\s?\[(?P<inner>[^\[\]\n]{{0,200}})\]"
    rf"|\s?\((?P<paren>(?:arxiv:\s*)?(?:{ARXIV_ID_PATTERN})[^()\n]{{0,100}})\)"
    rf"|(?:arxiv:\s*)?(?P<bare>{ARXIV_ID_PATTERN})(?:v\d+)?", re.I)
_NUMBERED_ONLY = re.compile(r"\s*(?:(?:paper|source|ref)\s*)?\d+(?:\s*[,;]\s*\d+)*\s*", re.I)


def keep_paper_citations(text: str, allowed: Collection[str]) -> tuple[str, list[str], list[str]]:
    """Citations by arXiv id kept only for `allowed` papers, each written as [id] (several as [id1, id2]);
    other ids and numbered citations ([1], [paper 2]: no numbered sources were given) are removed; brackets
    that are not citations, such as [sic], stay. → (text, cited allowed ids in order, dropped citations)."""
    allowed = set(allowed)
    cited: list[str] = []
    dropped: list[str] = []

    def replace(match: re.Match) -> str:
        inner = match.group("inner") if match.group("inner") is not None else match.group("paren")
        found = ([m.group("base") for m in ARXIV_ID.finditer(inner)] if inner is not None
                 else [match.group("bare")])
        if inner is not None and not found:
            if not _NUMBERED_ONLY.fullmatch(inner):
                return match.group(0)          # an ordinary bracket, not a citation
            dropped.append(inner.strip())
            return ""
        keep = [pid for pid in dict.fromkeys(found) if pid in allowed]
        dropped.extend(pid for pid in dict.fromkeys(found) if pid not in allowed)
        cited.extend(pid for pid in keep if pid not in cited)
        if not keep:
            return ""
        lead = " " if match.group(0)[:1].isspace() else ""
        return f"{lead}[{', '.join(keep)}]"

    cleaned = _PAPER_CITATION.sub(replace, text or "")
    cleaned = re.sub(r"[ \t]+([.,;:])", r"\1", re.sub(r"[ \t]{2,}", " ", cleaned))
    return cleaned.strip(), cited, dropped


_MARKUP_TAG = re.compile(r"</?[a-zA-Z][^<>]{0,200}>")
_CUT_OFF_CITATION = re.compile(r"\[[^\]\n]{0,40}$")


def tidy(text: str, *, paragraphs: bool = True) -> str:
    """A model's prose made presentable: markup tags removed (left-over angle brackets neutralised), a citation
    cut off by the token limit removed, repeated sentences dropped, an unfinished last sentence cut.
    `paragraphs=False` joins everything into one paragraph."""
    text = _MARKUP_TAG.sub("", text or "").replace("<", "‹").replace(">", "›")
    text = _CUT_OFF_CITATION.sub("", text.rstrip())
    seen: set[str] = set()
    kept_paragraphs = []
    for paragraph in re.split(r"\n\s*\n" if paragraphs else r"\n+", text):
        kept = []
        for sentence in _SENTENCE_END.split(" ".join(paragraph.split())):
            key = re.sub(r"\W+", " ", sentence.lower()).strip()
            if key and key not in seen:
                seen.add(key)
                kept.append(sentence.strip())
        if kept:
            kept_paragraphs.append(" ".join(kept))
    text = ("\n\n" if paragraphs else " ").join(kept_paragraphs).strip()
    if text and text[-1] not in ".!?)]\"'":
        cut = max(text.rfind(". "), text.rfind(".\n"), text.rfind("! "), text.rfind("? "))
        text = text[:cut + 1] if cut > 0 else text + "."
    return text


_LEADING_VERB = re.compile(r"^(?:I )?(?:\w+ that|work on|\w+) ")


def close_cut_statements(text: str, max_chars: int) -> str:
    """A grammar ends a statement with "." when its words reach `max_chars`, even in the middle of a word
    ("… which is known as “S."): such a statement is cut back to its last clause, or its last whole word."""
    lines = []
    for line in (text or "").split("\n"):
        body = line.rstrip()
        words = _LEADING_VERB.sub("", body[body.rfind("] ") + 2:] if "] " in body else body)
        if body.endswith(".") and len(words) >= max_chars:
            kept = body[:-1]
            cut = kept.rfind(", ")
            if cut < len(kept) - len(words) + len(words) // 3:     # no clause boundary in the statement's words
                cut = kept.rfind(" ")
            line = kept[:cut].rstrip(" ,;:-–—(\"'“‘") + "."
        lines.append(line)
    return "\n".join(lines)


def repeats_a_statement(text: str, min_words: int = 6) -> bool:
    """Whether the text's last line, so far, opens with the same `min_words` or more words as an earlier line
    (citations aside): a small model copying its first statement under another label. Checked while the text
    streams, so generation can stop before the copy is written out."""
    lines = (text or "").split("\n")
    current = _words(_BRACKET.sub(" ", lines[-1]))
    if len(current) < min_words:
        return False
    return any(_words(_BRACKET.sub(" ", line))[:len(current)] == current for line in lines[:-1])


def drop_unfinished_statement(text: str) -> str:
    """Statements one per line: a last line that never reached its full stop goes when a whole one precedes it."""
    lines = (text or "").rstrip().split("\n")
    if len(lines) > 1 and not lines[-1].rstrip().endswith((".", "!", "?")):
        lines.pop()
    return "\n".join(lines)


def prose_words(text: str) -> int:
    """Words of a text outside its citations: what a reader gets beyond a list of ids."""
    return len(_words(_BRACKET.sub(" ", text or "")))


def ids_to_labels(text: str, ids: Sequence[str]) -> str:
    """[id] citations of the given items (exactly, or by arXiv id without version) become their [n] labels
    (1-based positions in `ids`); any other bracket is left as it is."""
    labels = {item_id: n for n, item_id in enumerate(ids, 1)}

    def replace_id(match: re.Match) -> str:
        inner = match.group(1).strip()
        number = labels.get(inner) or labels.get(citation_key(inner) or "")
        return f"[{number}]" if number else match.group(0)

    return re.sub(r"\[([^\[\]\n]{1,40})\]", replace_id, text or "")


def labels_to_ids(text: str, ids: Sequence[str]) -> str:
    """[n] labels replaced by the ids they stand for (n-th of `ids`); a number beyond them stays as it is."""
    def replace_label(match: re.Match) -> str:
        number = int(match.group(1))
        return f"[{ids[number - 1]}]" if 1 <= number <= len(ids) else match.group(0)

    return re.sub(r"\[(\d{1,3})\]", replace_label, text or "")


def drop_unsourced_urls(text: str, source_texts: Iterable[str]) -> tuple[str, list[str]]:
    """Remove links that appear in none of the sources (small models invent plausible ones)."""
    corpus = " ".join(source_texts).lower()
    dropped: list[str] = []

    def keep(match: re.Match) -> str:
        url = match.group(0).rstrip(".,;:")
        if url.lower() in corpus:
            return match.group(0)
        dropped.append(url)
        return match.group(0)[len(url):]     # the sentence's own full stop stays

    return _URL.sub(keep, text), dropped


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def cut_loop(text: str, n: int = LOOP_NGRAM) -> tuple[str, bool]:
    """Cut the text where it starts repeating itself: at the first sentence that repeats an earlier sentence, or
    that repeats a run of `n` words which the text writes at least three times (twice can be an honest shared
    phrase; three times is a loop). What came before stays."""
    sentences = _split_keeping(text)
    counts: dict[tuple[str, ...], int] = {}
    for sentence in sentences:
        words = _words(sentence)
        for i in range(max(0, len(words) - n + 1)):
            gram = tuple(words[i:i + n])
            counts[gram] = counts.get(gram, 0) + 1
    looping = {gram for gram, count in counts.items() if count >= 3}
    kept: list[str] = []
    seen_sentences: set[str] = set()
    seen_grams: set[tuple[str, ...]] = set()
    long_trigrams: list[set[tuple[str, ...]]] = []     # of the earlier sentences long enough to be copied
    for sentence in sentences:
        words = _words(sentence)
        norm = " ".join(_words(_BRACKET.sub(" ", sentence)))     # the same sentence under another label repeats
        grams = {tuple(words[i:i + n]) for i in range(max(0, len(words) - n + 1))}
        # a run of n words seen before, or repeated within this very sentence
        inner_repeat = len(words) >= 2 * n and len(grams) < len(words) - n + 1
        trigrams = _trigrams(norm.split()) if len(norm.split()) >= NEAR_COPY_WORDS else None
        copied = (norm and norm in seen_sentences and len(words) >= 3) or _near_copy(trigrams, long_trigrams)
        if copied or (grams & seen_grams & looping) or inner_repeat:
            if inner_repeat and not (grams & seen_grams & looping):
                kept.append(_cut_inside(sentence, n))
            return "".join(kept).rstrip(), True
        seen_sentences.add(norm)
        seen_grams |= grams
        if trigrams is not None:
            long_trigrams.append(trigrams)
        kept.append(sentence)
    return text, False


def _trigrams(words: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def _near_copy(trigrams: set[tuple[str, ...]] | None, earlier: Iterable[set[tuple[str, ...]]]) -> bool:
    """Whether a long sentence (its 3-word runs, citations aside; None when too short) mostly copies an earlier one:
    a small model writing its claim again for another source with a verb or two changed ("X [4] show that …" /
    "Y [2] report that …")."""
    return trigrams is not None and any(len(trigrams & other) >= NEAR_COPY_SHARE * min(len(trigrams), len(other))
                                        for other in earlier)


def _cut_inside(sentence: str, n: int) -> str:
    """A sentence cut just before the first repeat of an n-word run inside it."""
    tokens = list(_WORD.finditer(sentence))
    seen: set[tuple[str, ...]] = set()
    for i in range(len(tokens) - n + 1):
        gram = tuple(t.group(0).lower() for t in tokens[i:i + n])
        if gram in seen:
            return sentence[:tokens[i].start()].rstrip() + " …"
        seen.add(gram)
    return sentence


def _split_keeping(text: str) -> list[str]:
    """Sentences with their trailing whitespace, so joining them gives the text back."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        pieces.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


# A sentence about the text itself rather than the subject: "Revised draft with additional information …",
# "Here is the revised version:". The revision instruction asks for a revised draft; a small model announces one.
_ABOUT_THE_DRAFT = re.compile(
    r"^\W*(?:(?:(?:here|this|below) is\s+)?(?:(?:the|a|an|my|our)\s+)?(?:revised|updated|improved|rewritten|final|new)"
    r"\s+draft\b|(?:here|below) is\s+(?:the|a|an|my|our)\s+(?:revised|updated|improved|rewritten|final|new)\s+"
    r"(?:version|text|answer)\b)", re.I)


def drop_echo(text: str, instructions: Iterable[str], n: int = ECHO_NGRAM) -> tuple[str, bool]:
    """Remove sentences that copy a run of `n` words from the instructions the model was given, and sentences that
    announce the text itself ("Revised draft …") when there are instructions to echo."""
    grams: set[tuple[str, ...]] = set()
    short_grams: set[tuple[str, ...]] = set()
    for instruction in instructions:
        words = _words(instruction)
        grams |= {tuple(words[i:i + n]) for i in range(max(0, len(words) - n + 1))}
        short_grams |= {tuple(words[i:i + SHORT_ECHO_RUN]) for i in range(max(0, len(words) - SHORT_ECHO_RUN + 1))}
    if not grams:
        return text, False
    kept, echoed = [], False
    sentinel = _words(CANNOT_ANSWER)
    for sentence in _split_keeping(text):
        words = _words(_BRACKET.sub(" ", sentence))
        if words != sentinel and (any(tuple(words[i:i + n]) in grams for i in range(max(0, len(words) - n + 1)))
                                  or _short_echo(words, n, short_grams) or _ABOUT_THE_DRAFT.match(sentence)):
            echoed = True
            continue
        kept.append(sentence)
    return "".join(kept).strip(), echoed


def _short_echo(words: list[str], n: int, short_grams: set[tuple[str, ...]]) -> bool:
    """A sentence too short for the n-word test whose words are mostly runs of instruction words, such as
    "Cite papers by and." left when the ids of "Cite papers by id [2503.13309] and …" were removed."""
    if not SHORT_ECHO_RUN <= len(words) < n:
        return False
    covered: set[int] = set()
    for i in range(len(words) - SHORT_ECHO_RUN + 1):
        if tuple(words[i:i + SHORT_ECHO_RUN]) in short_grams:
            covered.update(range(i, i + SHORT_ECHO_RUN))
    return len(covered) >= 0.6 * len(words)


def is_loop(text: str, n: int = LOOP_NGRAM) -> bool:
    """Whether cut_loop would cut the text."""
    return cut_loop(text, n)[1]


def echoes(text: str, instructions: Iterable[str], n: int = ECHO_NGRAM) -> bool:
    """Whether drop_echo would remove a sentence of the text."""
    return drop_echo(text, instructions, n)[1]


_STEM_CHARS = 6           # "complexities" and "complexity" meet at "comple": crude, and enough here
_SINGLE_LABEL = re.compile(r"\[(\d{1,3})\]")


def _stems(text: str) -> set[str]:
    return {w[:_STEM_CHARS] for w in _words(text) if len(w) >= 4 and not w.isdigit()}


def overlap_scores(sentence: str, source_texts: Sequence[str]) -> list[float]:
    """How much of the sentence's wording each source holds: shared word stems, each weighted by how rare it is
    among the sources (a stem every source has, such as "language models", counts for nothing)."""
    stems = [_stems(source) for source in source_texts]
    count = len(stems)
    frequency: dict[str, int] = {}
    for group in stems:
        for stem in group:
            frequency[stem] = frequency.get(stem, 0) + 1
    words = _stems(_BRACKET.sub(" ", sentence)) - {"source"}
    return [sum(math.log(count / frequency[w]) for w in words & group) for group in stems]


def reattribute(text: str, source_texts: Sequence[str]) -> tuple[str, list[tuple[str, str]]]:
    """Move a sentence's citation [n] to the source its words come from, when that is clearly another one.

    A small model picks a label and then writes about whichever source it read best. Each sentence that cites
    exactly one label is scored against every source (overlap_scores). The label moves when another source
    scores at least twice as high as the cited one and above MOVE_FLOOR. The 135M model writes its labels in
    order ([1], then [2]) whatever it writes about, so this is where attribution really happens."""
    count = len(source_texts)
    if count < 2:
        return text, []
    moved: list[tuple[str, str]] = []
    pieces = []
    for sentence in _split_keeping(text):
        labels = _SINGLE_LABEL.findall(sentence)
        if len(set(labels)) == 1 and 1 <= int(labels[0]) <= count:
            cited = int(labels[0]) - 1
            scores = overlap_scores(sentence, source_texts)
            best = max(range(count), key=scores.__getitem__)
            if best != cited and scores[best] >= max(MOVE_FLOOR, 2 * scores[cited]):
                sentence = sentence.replace(f"[{cited + 1}]", f"[{best + 1}]")
                moved.append((str(cited + 1), str(best + 1)))
        pieces.append(sentence)
    return "".join(pieces), moved


def check(text: str, *, allowed: Collection[str] | None, source_texts: Iterable[str] = (),
          instructions: Iterable[str] = (), attribute: bool = False) -> Checked:
    """All checks, in the order that keeps the most of a good answer: loops first (a loop may contain bad
    citations many times), then echoes, citations and links. The sentinel passes untouched. `allowed=None`
    leaves citations to the caller (Trends and Profile check theirs against the papers they quoted).
    `attribute` also moves [n] labels to the numbered source a sentence's words come from (see reattribute)."""
    original = (text or "").strip()
    if original == CANNOT_ANSWER:
        return Checked(original)
    result = Checked(original)
    result.text = _COPIED_SOURCE_TAG.sub(" ", result.text).strip()   # the prompt's quoting, copied by a small model
    result.text, result.cut_loop = cut_loop(result.text)
    result.text, result.echoed = drop_echo(result.text, instructions)
    if allowed is not None:
        result.text, result.dropped_citations = drop_invalid_citations(result.text, allowed)
        if attribute:
            result.text, result.moved_citations = reattribute(result.text, list(source_texts))
    result.text, result.dropped_urls = drop_unsourced_urls(result.text, source_texts)
    result.text = result.text.strip()
    if result.cut_loop:
        result.notes.append("A repeated passage was cut.")
    if result.echoed:
        result.notes.append("Text that repeated the instructions was removed.")
    if result.dropped_citations:
        shown = ", ".join(dict.fromkeys(result.dropped_citations))
        result.notes.append(f"Removed citation(s) of sources that were not retrieved: {shown[:120]}.")
    if result.moved_citations:
        shown = ", ".join(f"[{a}] → [{b}]" for a, b in result.moved_citations)
        result.notes.append(f"Citation(s) moved to the source the statement's words come from: {shown}.")
    if result.dropped_urls:
        result.notes.append(f"Removed {len(result.dropped_urls)} link(s) found in none of the sources.")
    return result
