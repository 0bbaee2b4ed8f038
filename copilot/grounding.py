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

from copilot.prompts import ANSWER_STATEMENT_CHARS, CANNOT_ANSWER
from copilot.records import ARXIV_ID, ARXIV_ID_PATTERN
from copilot.repetition import BRACKET, cut_loop, drop_echo, lower_words, split_keeping
from copilot.repetition import echoes as echoes  # re-exported: the loop and echo detectors, reached here
from copilot.repetition import is_loop as is_loop  # re-exported, with the other output checks

_LABEL_WORD = re.compile(r"^(?:source|src|ref|paper|item|no\.?)\s*#?\s*", re.I)
_THOUGHT_ID = re.compile(r"^T[0-9a-f]{10}$")
_NUMBER = re.compile(r"^[1-9]\d{0,2}$")
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'\])]+", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

_COPIED_SOURCE_TAG = re.compile(r"</?\s*source\b[^<>]{0,80}>", re.I)
MOVE_FLOOR = 3.0         # a word found in one of 8 sources weighs ln 8 ≈ 2.1: a move needs more than one such word


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
    for group in BRACKET.finditer(text or ""):
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
        return "".join(f"[{k}]" for k in dict.fromkeys(good)) or _GAP

    return close_gaps(BRACKET.sub(keep, text)), dropped


_GAP = "\ue000"      # where a citation was removed (a private-use character: never in text we are given)


def close_gaps(text: str) -> str:
    """The text with each removed citation's place closed: the spaces around it become one, or none before
    punctuation or a line's end. Only those places change: a quote elsewhere in the text keeps its spacing
    ("Token Choice ;and" stays as its paper wrote it)."""
    pieces = text.split(_GAP)
    out = [pieces[0]]
    for piece in pieces[1:]:
        before = out[-1].rstrip(" \t")
        after = piece.lstrip(" \t")
        joined = not after or after[0] in ".,;:\n" or not before or before.endswith("\n")
        out[-1] = before
        out.append(after if joined else " " + after)
    return "".join(out)


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
            return (" " if match.group(0)[:1].isspace() else "") + _GAP
        keep = [pid for pid in dict.fromkeys(found) if pid in allowed]
        dropped.extend(pid for pid in dict.fromkeys(found) if pid not in allowed)
        cited.extend(pid for pid in keep if pid not in cited)
        lead = " " if match.group(0)[:1].isspace() else ""
        if not keep:
            return lead + _GAP
        return f"{lead}[{', '.join(keep)}]"

    return close_gaps(_PAPER_CITATION.sub(replace, text or "")).strip(), cited, dropped


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
    current = lower_words(BRACKET.sub(" ", lines[-1]))
    if len(current) < min_words:
        return False
    return any(lower_words(BRACKET.sub(" ", line))[:len(current)] == current for line in lines[:-1])


def drop_unfinished_statement(text: str) -> str:
    """Statements one per line: a last line that never reached its full stop goes when a whole one precedes it."""
    lines = (text or "").rstrip().split("\n")
    if len(lines) > 1 and not lines[-1].rstrip().endswith((".", "!", "?")):
        lines.pop()
    return "\n".join(lines)


def prose_words(text: str) -> int:
    """Words of a text outside its citations: what a reader gets beyond a list of ids."""
    return len(lower_words(BRACKET.sub(" ", text or "")))


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


_STEM_CHARS = 6           # "complexities" and "complexity" meet at "comple": crude, and enough here
_SINGLE_LABEL = re.compile(r"\[(\d{1,3})\]")


def _stems(text: str) -> set[str]:
    return {w[:_STEM_CHARS] for w in lower_words(text) if len(w) >= 4 and not w.isdigit()}


def overlap_scores(sentence: str, source_texts: Sequence[str]) -> list[float]:
    """How much of the sentence's wording each source holds: shared word stems, each weighted by how rare it is
    among the sources (a stem every source has, such as "language models", counts for nothing)."""
    stems = [_stems(source) for source in source_texts]
    count = len(stems)
    frequency: dict[str, int] = {}
    for group in stems:
        for stem in group:
            frequency[stem] = frequency.get(stem, 0) + 1
    words = _stems(BRACKET.sub(" ", sentence)) - {"source"}
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
    for sentence in split_keeping(text):
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
          instructions: Iterable[str] = (), attribute: bool = False, loops: bool = True) -> Checked:
    """All checks, in the order that keeps the most of a good answer: loops first (a loop may contain bad
    citations many times), then echoes, citations and links. The sentinel passes untouched. `allowed=None`
    leaves citations to the caller (Trends and Profile check theirs against the papers they quoted).
    `attribute` also moves [n] labels to the numbered source a sentence's words come from (see reattribute);
    `loops=False` skips the loop check (an evidence table's header line holds the title its quote may restate)."""
    original = (text or "").strip()
    if original == CANNOT_ANSWER:
        return Checked(original)
    result = Checked(original)
    result.text = _COPIED_SOURCE_TAG.sub(" ", result.text).strip()   # the prompt's quoting, copied by a small model
    if loops:
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


# --- the check each kind of output passes, called whole --------------------------------------------------------------
IDEA_SUPPORT = " Support:"         # where an idea's supporting statement begins (prompts.ideas_grammar)
THOUGHT_LOOP_NGRAM = 4             # stricter than for a shown answer: a thought is reused in later prompts
THOUGHT_ECHO_NGRAM = 6


@dataclass
class PaperChecked:
    """A text citing papers by id (a summary, an idea, a profile draft) after its checks."""
    text: str
    cited: list[str]                                      # given papers it cites, in order of first citation
    dropped: list[str] = field(default_factory=list)      # citations of papers that were not given
    notes: list[str] = field(default_factory=list)        # what the checks removed, for the reader


def check_chat_answer(text: str, ids: Sequence[str], source_texts: Sequence[str], instructions: Iterable[str],
                      statements: bool | None = None) -> Checked:
    """An answer citing numbered sources ([n] is the n-th of `ids`): an [id] of a given item becomes its label, then
    `check` with only labels 1..n, each statement's label moved to the source its words come from. `statements`:
    written as answer_grammar's statements, so an unfinished last one goes and one the length cap cut ends at its
    last clause (None: told by the text's opening "Source [")."""
    if text.startswith("Source [") if statements is None else statements:
        text = close_cut_statements(drop_unfinished_statement(text), ANSWER_STATEMENT_CHARS)
    return check(ids_to_labels(text, ids), allowed=[str(n) for n in range(1, len(ids) + 1)],
                 source_texts=list(source_texts), instructions=instructions, attribute=bool(ids))


def check_longform(text: str, labels: Collection[str], source_texts: Sequence[str],
                   instructions: Iterable[str]) -> Checked:
    """A deep answer or a related-work draft: `check` with citations only of `labels`, each moved to the source its
    sentence's words come from, then tidied (repeated sentences dropped)."""
    checked = check(text, allowed=labels, source_texts=source_texts, instructions=instructions, attribute=True)
    checked.text = tidy(checked.text) if checked.text else ""
    return checked


def _cite_papers(checked: Checked, given: Sequence[str], source_texts: Sequence[str]) -> PaperChecked:
    """Citations only of the `given` papers; with their texts, each statement's one citation moved to the paper its
    words come from."""
    text, cited, dropped = keep_paper_citations(tidy(checked.text, paragraphs=False), given)
    labelled, moved = reattribute(ids_to_labels(text, given), source_texts)
    if moved:
        text, cited, _ = keep_paper_citations(labels_to_ids(labelled, given), given)
    return PaperChecked(text, cited, dropped, checked.notes)


def check_summary(text: str, given: Sequence[str], source_texts: Sequence[str] = (), instructions: Iterable[str] = (),
                  cut_at: int | None = None) -> PaperChecked:
    """A summary of papers (a topic's, a period's): no loop, no echo, no link, citations only of the given papers,
    moved by their words when `source_texts` (the given papers' texts, in order) show it. `cut_at`: written under
    statements_grammar, whose length cap (this many characters) may have cut the last statement."""
    if cut_at:
        text = close_cut_statements(text, cut_at)
    return _cite_papers(check(text, allowed=None, instructions=instructions), given, source_texts)


def check_idea(text: str, given: Sequence[str], source_texts: Sequence[str],
               instructions: Iterable[str]) -> PaperChecked | None:
    """A research idea (an "Idea: … Support: [id] …" paragraph, or a plain one), checked like a summary; None when
    the checks removed the proposal itself (an echo) or a proposal shares no distinctive words with its papers."""
    proposed = text.lstrip().startswith("Idea:")
    checked = check(text, allowed=None, instructions=instructions)
    if proposed and not checked.text.startswith("Idea:"):
        return None
    result = _cite_papers(checked, given, source_texts)
    if proposed and not grounded_idea(result.text, given, source_texts):
        return None
    return result


def grounded_idea(text: str, ids: Sequence[str], texts: Sequence[str]) -> bool:
    """An idea of the ideas grammar counts only when its proposal shares distinctive words with the papers it was
    made from, and its support with the paper it cites (a 135M model may propose a slogan and support it with a
    sentence in another language)."""
    if len(texts) < 2:
        return True
    proposal, _, support = text.partition(IDEA_SUPPORT)
    if max(overlap_scores(proposal, texts)) < MOVE_FLOOR:
        return False
    if not support:
        return True
    supported = [list(ids).index(pid) for pid in keep_paper_citations(support, ids)[1]]
    scores = overlap_scores(support, texts)
    return any(scores[i] >= MOVE_FLOOR for i in supported)


def check_profile_draft(text: str, given: Collection[str], source_texts: Sequence[str],
                        instructions: Iterable[str]) -> PaperChecked:
    """A profile draft: no loop, no echo, no link the papers or pasted text lack, citations only of the selected
    papers, tidied."""
    checked = check(text, allowed=None, source_texts=source_texts, instructions=instructions)
    kept, cited, dropped = keep_paper_citations(checked.text, given)
    return PaperChecked(tidy(kept), cited, dropped, checked.notes)


def check_thought(text: str, instructions: Iterable[str] = ()) -> str | None:
    """Why a passage may not be kept as a thought on the grounds of the output checks (a loop, an echo of the
    instructions), stricter than for a shown answer; None when it passes them."""
    if is_loop(text, THOUGHT_LOOP_NGRAM):
        return "repeats itself (a loop)"
    if echoes(text, instructions, THOUGHT_ECHO_NGRAM):
        return "echoes the prompt's instructions"
    return None
