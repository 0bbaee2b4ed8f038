"""HTML of the Ask tab's turns (pure functions of a TurnView): the two answer columns, the notice above them, a
reopened turn, the recent questions. Every text that comes from a user, a paper or the LLM is escaped."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timezone

from copilot.features.chat_view import AnswerView, SourceView, TurnView
from copilot.features.followups import asked_words
from copilot.features.signin import written_where
from copilot.grounding import ids_to_labels
from copilot.ui.common import arxiv_link, escape

CHOICE_TEXT = {"thoughts": "the thought-augmented answer was better", "raw": "the papers-only answer was better",
               "tie": "tie", "bad": "both bad"}
THOUGHT_STATUS = {"queued": "queued", "running": "being written", "stored": "stored in memory",
                  "redundant": "not stored (redundant)", "not_an_answer": "not stored (no real answer)",
                  "under_floor": "not stored (unvoted: its quotes are not close enough to the question)",
                  "failed": "failed (see logs)"}
NO_COMPARISON = ("No comparison yet: thought memory holds nothing relevant to this question, so both retrievals "
                 "found the same papers and one answer is shown (not counted in the statistics). Thoughts come from "
                 "Chat answers (the one you vote for, or, unvoted, one whose quotes are close to its question) and, "
                 "with a model that "
                 "writes, Deep answers and Trends reports (the Memory tab lists each way); once memory holds some "
                 "close to a question, it gets two answers to compare.")
SAME_ANSWER = ("Thought memory had nothing new for this question: the answer with thoughts came out the same as the "
               "answer from papers alone, so one is shown (nothing to vote on; not counted in the statistics).")
PREVIEW_CHARS = 150
_LABEL = re.compile(r"\[(\d{1,3})\]")                        # a neutral citation label [i]
# an item's own id in brackets: an arXiv id, a thought id, a long number. Before the vote it would say which kind
# of item an answer drew on, so it is dropped (the same rule on both sides); after the vote it stays.
# the arXiv id that ends an evidence table row's header line (methods.evidence_text.row_header)
_ROW_ID = re.compile(r" \u00b7 arXiv:(?P<id>\d{4}\.\d{4,5}(?:v\d+)?)$", re.M)
# a full-text quote's section address (methods.evidence_text.section_note): a link after the vote, like the row's id
# (a section title may hold parentheses of its own: "§B (Ablations)", issue #59)
_SECTION_ADDRESS = re.compile(r"\((?P<where>(?:[^()\n]|\([^()\n]{0,200}\)){1,300}) \u00b7 "
                              r"(?P<address>arxiv\.org/html/\d{4}\.\d{4,5}(?:v\d+)?#[A-Za-z0-9._-]{1,60})\)")
_RAW_ID = re.compile(r"\s?\[(?:\d{4}\.\d{4,5}(?:v\d+)?|T[0-9a-z]{6,}|\d{5,})\]")
SOURCES_AFTER_VOTE = "Shown when you vote: before it, which sources an answer used would tell the two answers apart."
WRITING_BOTH = "Writing both answers… they are shown together, so that neither one's timing gives it away."
_BADGE_STYLE = ("display:inline-block;padding:0 6px;margin:0 2px;border-radius:8px;font-size:0.8em;"
                "font-weight:600;color:#fff;background:{}")
Lineage = dict[str, list[dict]]     # thought id → its root papers ({id, title})


def seconds_text(seconds: float) -> str:
    """A time as shown: tenths of a second, and "under 0.1 s" below 0.05 s (a table read from stored vectors can be
    that fast, and "0.0 s" reads as not measured)."""
    return "under 0.1 s" if seconds < 0.05 else f"{seconds:.1f} s"


def badge(kind: str, text: str) -> str:
    colour = "#7c3aed" if kind == "thought" else "#2563eb"
    return f'<span class="chat-badge chat-badge-{kind}" style="{_BADGE_STYLE.format(colour)}">{escape(text)}</span>'


def when(timestamp: float | None) -> str:
    if not timestamp:
        return ""
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def answer_text_html(text: str, sources: tuple[SourceView, ...] | list[SourceView], reveal: bool) -> str:
    """Escaped answer. A citation [i] of one of the answer's sources is marked the same way on both sides; after
    the vote a paper's citation links to arXiv. Any other bracketed text stays plain text."""

    def cite(match: re.Match) -> str:
        number = int(match.group(1))
        if not 1 <= number <= len(sources):
            return match.group(0)
        source = sources[number - 1]
        if reveal and source.kind == "paper":
            return f'<span class="chat-cite">{arxiv_link(source.id, f"[{number}]")}</span>'
        return f'<span class="chat-cite">[{number}]</span>'

    # an endpoint may copy a source's id from a thought's text while streaming: shown as that source's label
    neutral = ids_to_labels(text, [source.id for source in sources])
    if not reveal:
        neutral = _RAW_ID.sub("", _ROW_ID.sub("", neutral))    # a table row's paper id: its link comes with the vote
        neutral = _SECTION_ADDRESS.sub(lambda m: f"({m.group('where')})", neutral)
    marked = _LABEL.sub(cite, escape(neutral))
    if reveal:
        marked = _ROW_ID.sub(lambda m: f" \u00b7 {arxiv_link(m.group('id'), 'arXiv:' + m.group('id'))}", marked)
        marked = _SECTION_ADDRESS.sub(lambda m: f'(<a href="https://{m.group("address")}" target="_blank" '
                                                f'rel="noopener">{m.group("where")}</a>)', marked)
    return marked.replace("\n", "<br>")


def numbered_by_use(text: str, sources: tuple[SourceView, ...]) -> tuple[str, tuple[SourceView, ...]]:
    """The answer's sources renumbered in the order the answer first cites them, the uncited after them, and its
    labels to match. The same quote then has the same label on both sides: with retrieval's order, a thought ranked
    first shifted every paper's label by one on its side and gave that side away."""
    text = ids_to_labels(text, [source.id for source in sources])
    order: list[int] = []
    for match in _LABEL.finditer(text):
        number = int(match.group(1))
        if 1 <= number <= len(sources) and number not in order:
            order.append(number)
    order += [n for n in range(1, len(sources) + 1) if n not in order]
    new = {old: position for position, old in enumerate(order, 1)}

    def relabel(match: re.Match) -> str:
        number = int(match.group(1))
        return f"[{new[number]}]" if number in new else match.group(0)

    return _LABEL.sub(relabel, text), tuple(sources[n - 1] for n in order)


def _preview(source: SourceView) -> str:
    text = " ".join((source.preview or source.title or "").split())
    return escape(text[:PREVIEW_CHARS]) + ("…" if len(text) > PREVIEW_CHARS else "")


def _lineage_html(roots: list[dict] | None) -> str:
    if roots is None:
        return '<div class="chat-lineage">Rests on: not known (the thought is no longer in memory)</div>'
    papers = ", ".join(arxiv_link(p["id"], f"{p['id']} {p.get('title') or ''}".strip()) for p in roots)
    return f'<div class="chat-lineage">Rests on: {papers or "no papers"}</div>'


def _source_html(number: int, source: SourceView, lineage: Lineage | None) -> str:
    """A source as the vote reveals it: a paper with its arXiv link, a thought with the papers it rests on."""
    label = f'<span class="chat-source-label">[{number}]</span>'
    if source.kind == "paper":
        link = arxiv_link(source.id, source.title or source.id)
        return (f'<li class="chat-source chat-source-paper">{label} {badge("paper", "paper")} '
                f"{link} <code>{escape(source.id)}</code></li>")
    return (f'<li class="chat-source chat-source-thought">{label} {badge("thought", "thought")} '
            f'<code>{escape(source.id)}</code> <span class="chat-preview">{_preview(source)}</span>'
            f"{'' if lineage is None else _lineage_html(lineage.get(source.id))}</li>")


def _answer_title(answer: AnswerView, reveal: bool) -> str:
    title = f"Answer {escape(answer.label)}"
    if reveal and answer.kind:
        title += " " + (badge("thought", "papers + thoughts") if answer.kind == "thoughts"
                        else badge("paper", "papers only"))
        if answer.seconds:
            title += f' <span class="chat-answer-time">{seconds_text(answer.seconds)}</span>'
    return title


def _answer_body(answer: AnswerView, reveal: bool) -> str:
    body = answer_text_html(answer.text, answer.sources, reveal) if answer.text else ""
    if answer.error:
        body += f'<div class="chat-error">This answer failed: {escape(answer.error)}</div>'
    elif not answer.done:
        body += (' <span class="chat-writing">writing…</span>' if answer.text
                 else '<span class="chat-writing">waiting…</span>')
    if reveal and answer.notes:   # e.g. a trimmed prompt: it depends on the sources, so only after the vote
        body += '<ul class="chat-notes">' + "".join(f"<li>{escape(n)}</li>" for n in answer.notes) + "</ul>"
    return body


def _sources_html(sources: tuple[SourceView, ...], reveal: bool, lineage: Lineage | None) -> str:
    if not reveal:      # not even their number: it can differ between the sides
        return (f'<details open><summary>Sources</summary><p class="chat-sources-hidden">{escape(SOURCES_AFTER_VOTE)}'
                "</p></details>")
    items = "".join(_source_html(i, s, lineage) for i, s in enumerate(sources, 1))
    return (f'<details open><summary>Sources ({len(sources)})</summary>'
            f'<ol class="chat-sources">{items or "<li>no sources found</li>"}</ol></details>')


def answer_html(answer: AnswerView | None, *, reveal: bool, state: str = "", lineage: Lineage | None = None) -> str:
    """One answer column. Unless `reveal`, nothing in it depends on which side used thoughts but the answer's
    words: no sources, ids, kinds, links, counts or times. `lineage`: root papers of each thought source, shown on
    reveal (a thought missing from it is said to be no longer in memory; None: lineage not looked up)."""
    if answer is None:
        return f'<div class="chat-answer chat-empty">{escape(state)}</div>' if state else ""
    text, sources = numbered_by_use(answer.text, answer.sources)
    answer = replace(answer, text=text, sources=sources)
    return (f'<div class="chat-answer" data-label="{escape(answer.label)}"><h3>{_answer_title(answer, reveal)}</h3>'
            f'<div class="chat-answer-text">{_answer_body(answer, reveal)}</div>'
            f"{_sources_html(answer.sources, reveal, lineage)}</div>")


def _writing_html(label: str) -> str:
    return (f'<div class="chat-answer" data-label="{escape(label)}"><h3>Answer {escape(label)}</h3>'
            f'<div class="chat-answer-text"><span class="chat-writing">{escape(WRITING_BOTH)}</span></div></div>')


def _total_time_html(view: TurnView) -> str:
    """The whole turn's time once both answers are done; per-answer times would tell the sides apart."""
    if not view.answers or not view.done:
        return ""
    return f'<div class="chat-time">Answered in {seconds_text(view.total_seconds)}</div>'


ASK_ALONE = "Ask it on its own"
ALONE_HINT = f"Not a follow-up? \u201c{ASK_ALONE}\u201d asks your words alone."


def _question_html(view: TurnView) -> str:
    asked = view.asked or asked_words(view.question)       # a reopened turn keeps the question as answered
    if asked:
        return (f'<div class="chat-question chat-follow-up">You asked <q>{escape(asked)}</q>. It was read as a '
                f"follow-up to your previous question and answered as <q>{escape(view.question)}</q>. "
                f"{escape(ALONE_HINT)}</div>")
    return f'<div class="chat-question">Question: <q>{escape(view.question)}</q></div>'


def turn_outputs(view: TurnView, notice: str = "", lineage: Lineage | None = None) -> tuple[str, str, str]:
    """(notice, answer A, answer B) HTML for a live or stored turn."""
    reveal = view.revealed
    parts = [f'<div class="chat-notice">{escape(notice)}</div>'] if notice else []
    parts.append(_question_html(view))
    if where := written_where(view.models):      # a signed-in visitor's turn: its model and where it ran (#50)
        parts.append(f'<div class="chat-notice chat-written-by">{escape(where)}</div>')
    if view.comparison == "same_items" and not view.scope:    # a scoped turn's notice says why it has one answer
        parts.append(f'<div class="chat-notice chat-no-comparison">{escape(NO_COMPARISON)}</div>')
    elif view.comparison == "same_answer":
        parts.append(f'<div class="chat-notice chat-no-comparison">{escape(SAME_ANSWER)}</div>')
    elif view.comparison == "failed" and view.done:
        parts.append('<div class="chat-notice">One answer failed, so this turn cannot be voted as a comparison.</div>')
    parts.append(_total_time_html(view))
    answers = view.answers
    # a comparison is shown whole once both answers are written (a model writes them one after the other: the first
    # shown alone would give its timing away); then both stand while their papers' full text is read, and are
    # updated together as it comes
    if view.comparison == "pending" and len(answers) == 2 and not view.done:
        return "".join(parts), _writing_html("A"), _writing_html("B")
    a_html = answer_html(answers[0], reveal=reveal, lineage=lineage)
    b_html = answer_html(answers[1], reveal=reveal, lineage=lineage) if len(answers) > 1 else ""
    return "".join(parts), a_html, b_html


CHANGE_KEPT = ("You can change it by clicking another button: a change decides which answer the turn's thought is made "
               "from, but the comparison's statistics keep the first vote, the one cast before the sides were shown.")


def vote_status_html(view: TurnView) -> str:
    if view.vote:
        return (f'<div class="chat-voted">Your vote: {escape(view.vote.shown)} — '
                f'{escape(CHOICE_TEXT[view.vote.choice])}. '
                f"{escape(CHANGE_KEPT)}</div>")
    if view.votable:
        return '<div class="chat-voted">Not voted yet: which answer is better?</div>'
    return ""


def reopened_outputs(view: TurnView, lineage: Lineage | None = None) -> tuple[str, str, str, str]:
    """(notice, answer A, answer B, vote status) of a past turn reopened from the history."""
    notice, a, b = turn_outputs(view, lineage=lineage)
    stamp = when(view.created_at)
    notice = f'<div class="chat-reopened">A past question ({escape(stamp)}), reopened from your history.</div>' + notice
    if view.scope:
        notice += f'<div class="chat-notice chat-scoped">{escape(scoped_text(view.scope))}</div>'
    return notice, a, b, vote_status_html(view)


def vote_recorded_html(result: dict) -> str:
    changed = f" (changed from {CHOICE_TEXT[result['previous']]})" if result["changed"] else ""
    label = result["label"] if result["label"] in ("A", "B") else result["choice"]
    follows = ("No thought is made from this turn." if result["choice"] == "bad" else
               "A thought is being made from the preferred answer in the background.")
    return (f'<div class="chat-voted">Vote recorded: {escape(label)} — {escape(CHOICE_TEXT[result["choice"]])}'
            f"{escape(changed)}. {escape(CHANGE_KEPT)} {follows}</div>")


def scoped_text(scope) -> str:
    """What History and a reopened turn say of a question asked about chosen papers."""
    ids = scope.split() if isinstance(scope, str) else list(scope)
    return (f"Asked about {', '.join(ids)} only: one answer from {'its' if len(ids) == 1 else 'their'} own text "
            "(memory makes no thought of it).") if ids else ""


def history_choices(rows: list[dict]) -> list[tuple[str, str]]:
    """(label, turn id) for the "reopen" selector: when, the question's start, and the papers it was asked about."""
    return [(f"{when(row['created_at'])} · {row['question'][:90]}"
             + (f" · about {', '.join(row['scope'].split())}" if row.get("scope") else ""), row["id"]) for row in rows]


def _recent_vote(row: dict) -> str:
    if row["comparison"] == "same_items":
        return "no comparison"
    if row["comparison"] == "same_answer":
        return "no comparison (same answer)"
    if row["comparison"] == "failed":
        return "an answer failed"
    if not row["choice"]:
        return "not voted"
    shown = row["label"] if row["label"] in ("A", "B") else row["choice"]
    return f"voted: {shown} ({CHOICE_TEXT[row['choice']]})"


def _recent_scope(row: dict) -> str:
    scope = row.get("scope") or ""
    return f'<br><small class="chat-recent-scope">{escape(scoped_text(scope))}</small>' if scope else ""


def recent_html(rows: list[dict]) -> str:
    if not rows:
        return '<p class="chat-recent-empty">No questions yet.</p>'
    lines = []
    for row in rows:
        thought = THOUGHT_STATUS.get(row.get("thought") or "", row.get("thought") or "—")
        lines.append(f'<tr data-turn="{escape(row["id"])}"><td>{escape(when(row["created_at"]))}</td>'
                     f"<td>{escape(row['question'][:200])}{_recent_scope(row)}</td><td class=\"chat-recent-vote\">"
                     f"{escape(_recent_vote(row))}</td><td>{escape(thought)}</td></tr>")
    return ('<table class="chat-recent"><thead><tr><th>When</th><th>Question</th><th>Vote</th>'
            "<th>Thought (background)</th></tr></thead>"
            f"<tbody>{''.join(lines)}</tbody></table>")


def notice_html(error: object) -> str:
    return f'<div class="chat-notice">{escape(error)}</div>'
