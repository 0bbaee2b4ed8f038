"""The Chat tab: Ask (two blind answers side by side, vote), Memory (thoughts with lineage), Statistics.

Callbacks only parse input, call copilot.features.chat / memory / stats, and format output. Every text that
comes from a user, a paper or the LLM is escaped before it becomes HTML.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

import gradio as gr

from copilot.errors import UserError
from copilot.features.adaptive import stream_adaptive
from copilot.features.bibtex import bibtex_for_ids
from copilot.features.chat import ChatError, chat_for
from copilot.features.deep import keep_in_background, stream_deep
from copilot.features.limits import RateLimited, check_rate
from copilot.features.memory import delete_thought, memory_view
from copilot.features.stats import vote_stats
from copilot.services import Services
from copilot.grounding import ids_to_labels
from copilot.ui.common import arxiv_link, current_user, escape, rate_scope, write_bibtex
from copilot.ui.longform import result_html, trace_html

VOTE_BUTTONS = [("A is better", "A", "chat-vote-a"), ("B is better", "B", "chat-vote-b"),
                ("Tie", "tie", "chat-vote-tie"), ("Both bad", "bad", "chat-vote-bad")]
CHOICE_TEXT = {"thoughts": "the thought-augmented answer was better", "raw": "the papers-only answer was better",
               "tie": "tie", "bad": "both bad"}
_LABEL = re.compile(r"\[(\d{1,3})\]")                        # a neutral citation label [i]
PREVIEW_CHARS = 150
_STREAM_EVERY_S = 0.15
THOUGHT_STATUS = {"queued": "queued", "running": "being written", "stored": "stored in memory",
                  "redundant": "not stored (redundant)", "not_an_answer": "not stored (no real answer)",
                  "failed": "failed (see logs)"}
_BADGE_STYLE = ("display:inline-block;padding:0 6px;margin:0 2px;border-radius:8px;font-size:0.8em;"
                "font-weight:600;color:#fff;background:{}")


def _badge(kind: str, text: str) -> str:
    colour = "#7c3aed" if kind == "thought" else "#2563eb"
    return f'<span class="chat-badge chat-badge-{kind}" style="{_BADGE_STYLE.format(colour)}">{escape(text)}</span>'


# --- formatting (pure) ---------------------------------------------------------------------------------------
def _when(timestamp: float | None) -> str:
    if not timestamp:
        return ""
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _answer_text_html(text: str, sources: list[dict], reveal: bool) -> str:
    """Escaped answer. A citation [i] of one of the answer's sources is marked the same way on both sides; after
    the vote a paper's citation links to arXiv. Any other bracketed text stays plain text."""

    def cite(match: re.Match) -> str:
        number = int(match.group(1))
        if not 1 <= number <= len(sources):
            return match.group(0)
        source = sources[number - 1]
        if reveal and source["kind"] == "paper":
            return f'<span class="chat-cite">{arxiv_link(source["id"], f"[{number}]")}</span>'
        return f'<span class="chat-cite">[{number}]</span>'

    # an endpoint may copy a source's id from a thought's text while streaming: shown as that source's label
    neutral = ids_to_labels(text, [source["id"] for source in sources])
    return _LABEL.sub(cite, escape(neutral)).replace("\n", "<br>")


def _preview(source: dict) -> str:
    text = " ".join((source.get("preview") or source.get("title") or "").split())
    return escape(text[:PREVIEW_CHARS]) + ("…" if len(text) > PREVIEW_CHARS else "")


def _lineage_html(roots: list[dict] | None) -> str:
    if roots is None:
        return '<div class="chat-lineage">Rests on: not known (the thought is no longer in memory)</div>'
    papers = ", ".join(arxiv_link(p["id"], f"{p['id']} {p.get('title') or ''}".strip()) for p in roots)
    return f'<div class="chat-lineage">Rests on: {papers or "no papers"}</div>'


def _source_html(number: int, source: dict, reveal: bool, lineage: dict[str, list[dict]] | None) -> str:
    """Before the vote every source has one form: its label and the start of its text (no link, id or kind)."""
    label = f'<span class="chat-source-label">[{number}]</span>'
    if not reveal:
        return f'<li class="chat-source">{label} <span class="chat-preview">{_preview(source)}</span></li>'
    if source["kind"] == "paper":
        link = arxiv_link(source["id"], source.get("title") or source["id"])
        return (f'<li class="chat-source chat-source-paper">{label} {_badge("paper", "paper")} '
                f"{link} <code>{escape(source['id'])}</code></li>")
    return (f'<li class="chat-source chat-source-thought">{label} {_badge("thought", "thought")} '
            f'<code>{escape(source["id"])}</code> <span class="chat-preview">{_preview(source)}</span>'
            f"{'' if lineage is None else _lineage_html(lineage.get(source['id']))}</li>")


def answer_html(answer: dict | None, *, reveal: bool, state: str = "",
                lineage: dict[str, list[dict]] | None = None) -> str:
    """One answer column. Unless `reveal`, nothing in it depends on which side used thoughts but the answer's
    words and its sources' text. `lineage`: root papers ({id, title}) of each thought source, shown on reveal
    (a thought missing from it is said to be no longer in memory; None: lineage not looked up)."""
    if answer is None:
        return f'<div class="chat-answer chat-empty">{escape(state)}</div>' if state else ""
    sources = answer["sources"]
    title = f"Answer {escape(answer['label'])}"
    if reveal and answer.get("kind"):
        title += " " + (_badge("thought", "papers + thoughts") if answer["kind"] == "thoughts"
                        else _badge("paper", "papers only"))
        if answer.get("seconds"):
            title += f' <span class="chat-answer-time">{answer["seconds"]:.1f} s</span>'
    body = _answer_text_html(answer["text"], sources, reveal) if answer["text"] else ""
    if answer.get("error"):
        body += f'<div class="chat-error">This answer failed: {escape(answer["error"])}</div>'
    elif not answer.get("done"):
        body += ' <span class="chat-writing">writing…</span>' if answer["text"] else '<span class="chat-writing">waiting…</span>'
    if reveal and answer.get("notes"):   # e.g. a trimmed prompt: it depends on the sources, so only after the vote
        body += '<ul class="chat-notes">' + "".join(f"<li>{escape(n)}</li>" for n in answer["notes"]) + "</ul>"
    items = "".join(_source_html(i, s, reveal, lineage) for i, s in enumerate(sources, 1))
    return (f'<div class="chat-answer" data-label="{escape(answer["label"])}"><h3>{title}</h3>'
            f'<div class="chat-answer-text">{body}</div>'
            f'<details open><summary>Sources ({len(sources)})</summary>'
            f'<ol class="chat-sources">{items or "<li>no sources found</li>"}</ol></details></div>')


def _total_time_html(view: dict) -> str:
    """The whole turn's time once both answers are done; per-answer times would tell the sides apart."""
    if not view["answers"] or not all(a["done"] for a in view["answers"]):
        return ""
    total = (view.get("retrieval_s") or 0.0) + sum(a.get("seconds") or 0.0 for a in view["answers"])
    return f'<div class="chat-time">Answered in {total:.1f} s</div>'


def reveals(view: dict) -> bool:
    """Sides and source kinds are shown once the turn is voted, or when there is nothing to compare."""
    return view.get("vote") is not None or view["comparison"] in ("same_items", "failed")


def turn_outputs(view: dict, notice: str = "", lineage: dict[str, list[dict]] | None = None) -> tuple[str, str, str]:
    """(notice, answer A, answer B) HTML for a live or stored turn."""
    reveal = reveals(view)
    parts = []
    if notice:
        parts.append(f'<div class="chat-notice">{escape(notice)}</div>')
    if view.get("asked"):
        parts.append(f'<div class="chat-question">You asked: <q>{escape(view["asked"])}</q> — a follow-up, '
                     f'answered as: <q>{escape(view["question"])}</q></div>')
    else:
        parts.append(f'<div class="chat-question">Question: <q>{escape(view["question"])}</q></div>')
    if view["comparison"] == "same_items":
        parts.append(f'<div class="chat-notice chat-no-comparison">{escape(NO_COMPARISON)}</div>')
    elif view["comparison"] == "failed" and all(a["done"] for a in view["answers"]):
        parts.append('<div class="chat-notice">One answer failed, so this turn cannot be voted as a comparison.</div>')
    parts.append(_total_time_html(view))
    answers = view["answers"]
    a_html = answer_html(answers[0], reveal=reveal, lineage=lineage)
    b_html = answer_html(answers[1], reveal=reveal, lineage=lineage) if len(answers) > 1 else ""
    if view["comparison"] == "same_items" and len(answers) == 1:
        b_html = f'<div class="chat-answer chat-empty chat-no-comparison-side">{escape(NO_COMPARISON_SIDE)}</div>'
    return "".join(parts), a_html, b_html


def reopened_outputs(view: dict, lineage: dict[str, list[dict]] | None = None) -> tuple[str, str, str, str]:
    """(notice, answer A, answer B, vote status) of a past turn reopened from the history."""
    notice, a, b = turn_outputs(view, lineage=lineage)
    when = _when(view["created_at"]) if view.get("created_at") else ""
    notice = f'<div class="chat-reopened">A past question ({escape(when)}), reopened from your history.</div>' + notice
    vote = view.get("vote")
    if vote:
        label = vote["label"] if vote["label"] in ("A", "B") else vote["choice"]
        status = (f'<div class="chat-voted">Your vote: {escape(label)} — {escape(CHOICE_TEXT[vote["choice"]])}. '
                  "You can change it by clicking another button.</div>")
    elif view["comparison"] == "yes":
        status = '<div class="chat-voted">Not voted yet: which answer is better?</div>'
    else:
        status = ""
    return notice, a, b, status


def history_choices(rows: list[dict]) -> list[tuple[str, str]]:
    """(label, turn id) for the "reopen" selector: when, and the question's start."""
    return [(f"{_when(row['created_at'])} · {row['question'][:90]}", row["id"]) for row in rows]


NO_COMPARISON = ("No comparison yet: thought memory holds nothing relevant to this question, so both retrievals "
                 "found the same papers and one answer is shown (not counted in the statistics). Thoughts come from "
                 "answers you vote on; once memory holds some close to a question, it gets two answers to compare.")
NO_COMPARISON_SIDE = ("No second answer: it would use the same papers as the first. Vote on compared answers to grow "
                      "the thought memory that makes the second answer differ.")


def recent_html(rows: list[dict]) -> str:
    if not rows:
        return '<p class="chat-recent-empty">No questions yet.</p>'
    lines = []
    for row in rows:
        if row["comparison"] == "same_items":
            vote = "no comparison"
        elif row["comparison"] == "failed":
            vote = "an answer failed"
        elif row["choice"]:
            vote = f"voted: {row['label'] if row['label'] in ('A', 'B') else row['choice']}"
            vote += f" ({CHOICE_TEXT[row['choice']]})"
        else:
            vote = "not voted"
        thought = THOUGHT_STATUS.get(row.get("thought") or "", row.get("thought") or "—")
        lines.append(f'<tr data-turn="{escape(row["id"])}"><td>{escape(_when(row["created_at"]))}</td>'
                     f"<td>{escape(row['question'][:200])}</td><td class=\"chat-recent-vote\">{escape(vote)}</td>"
                     f"<td>{escape(thought)}</td></tr>")
    return ('<table class="chat-recent"><thead><tr><th>When</th><th>Question</th><th>Vote</th>'
            "<th>Thought (background)</th></tr></thead>"
            f"<tbody>{''.join(lines)}</tbody></table>")


def memory_html(thoughts: list[dict]) -> str:
    if not thoughts:
        return "<p>No thoughts stored yet. They are made from answers after you vote.</p>"
    cards = []
    for t in thoughts:
        direct = []
        for source in t["sources"]:
            if source["kind"] == "paper":
                direct.append(arxiv_link(source["id"], f"{source['id']} {source.get('title', '')}".strip()))
            else:
                direct.append(f'<a href="#thought-{escape(source["id"])}">thought {escape(source["id"])}</a>')
        roots = ", ".join(arxiv_link(p["id"], f"{p['id']} {p['title']}".strip()) for p in t["root_papers"])
        similarity = f" · similarity {t['similarity']:.2f}" if "similarity" in t else ""
        cards.append(
            f'<div class="chat-thought" id="thought-{escape(t["id"])}"><div class="chat-thought-meta">'
            f"<code>{escape(t['id'])}</code> · {escape(_when(t['created_at']))} · level {t['level']:.2f} · "
            f"from {escape(t['origin'])}{similarity}</div>"
            f'<div class="chat-thought-text">{escape(t["text"])}</div>'
            f'<div class="chat-thought-question">Question: '
            f'{escape(t["question"]) or ("—" if t.get("own", True) else "<i>another user&#39;s</i>")}</div>'
            f'<div class="chat-thought-sources">Direct sources: {", ".join(direct) or "—"}</div>'
            f'<div class="chat-thought-roots">Root papers: {roots or "—"}</div></div>')
    return "".join(cards)


def stats_html(stats: dict) -> str:
    def pct(value):
        return "—" if value is None else f"{100 * value:.1f}%"

    rate = pct(stats["win_rate"])
    interval = "" if stats["ci_low"] is None else f" (95% CI {pct(stats['ci_low'])} – {pct(stats['ci_high'])})"
    rows = [("Thought-augmented win rate", rate + interval),
            ("Decisive votes", stats["decisive_votes"]), ("Thought-augmented wins", stats["thought_wins"]),
            ("Papers-only wins", stats["raw_wins"]), ("Ties", stats["ties"]), ("Both bad", stats["both_bad"]),
            ("No comparison (same items)", stats["no_comparison"]), ("Failed turns", stats["failed_turns"]),
            ("Comparisons not voted", stats["unvoted_comparisons"]), ("All turns", stats["turns"])]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="chat-stats">{body}</table>'


def stats_figure(stats: dict):
    import plotly.graph_objects as go

    points = stats["over_time"]
    figure = go.Figure()
    # x is the running count of decisive votes, not their clock time: votes minutes apart made a time axis with
    # sub-millisecond ticks (issue #20); the time of each vote is in the hover text.
    count = len(points)
    if points:
        x = list(range(1, count + 1))
        when = [str(p["at"])[:16].replace("T", " ") for p in points]
        figure.add_trace(go.Scatter(x=x + x[::-1], y=[p["ci_high"] for p in points] + [p["ci_low"] for p in points][::-1],
                                    fill="toself", line={"width": 0}, name="Wilson 95% interval", opacity=0.25,
                                    hoverinfo="skip"))
        figure.add_trace(go.Scatter(x=x, y=[p["win_rate"] for p in points], mode="lines+markers", customdata=when,
                                    name="thought-augmented win rate",
                                    hovertemplate="vote %{x} (%{customdata}): %{y:.2f}<extra></extra>"))
    figure.add_hline(y=0.5, line_dash="dot")
    figure.update_layout(yaxis={"range": [0, 1], "title": "win rate (cumulative)"},
                         xaxis={"title": "decisive votes so far", "tickformat": "d", "dtick": max(1, -(-count // 8)),
                                "range": [0.5, max(count, 1) + 0.5]},
                         height=320, margin={"l": 40, "r": 10, "t": 30, "b": 40},
                         title="Decisive votes over time" if points else "No decisive votes yet")
    return figure


DEEP_THOUGHT_WAIT_S = 30
DEEP_THOUGHT = {"stored": "Kept as a thought ({thought_id}), made from all {sources} items retrieved in the run.",
                "redundant": "Not kept as a thought: memory already holds something this close.",
                "not_an_answer": "Not kept as a thought: {reason}."}


def _deep_thought_text(thought: dict) -> str:
    template = DEEP_THOUGHT.get(thought.get("status", ""), "Thought step: {status}.")
    values = {"reason": "the thought step found no real answer"}
    values.update({key: value for key, value in thought.items() if value is not None})
    return template.format(**values)


SLIM_NO_SOURCES = ("Answered from the model's own knowledge, without sources: the judge decided no retrieval was "
                   "needed. Check it, or ask again naming a paper.")


def slim_html(trace: dict) -> tuple[str, str]:
    """(answer, decision trace) HTML of an adaptive-retrieval (SlimPLM) question, live or finished."""
    items = trace["items"]
    done = trace["step"] == "answered"
    body = _answer_text_html(trace["answer"], items, reveal=True) if trace["answer"] else ""
    if not done:
        body += ' <span class="chat-writing">writing…</span>' if trace["answer"] else \
            f'<span class="chat-writing">deciding… ({escape(trace["step"])})</span>'
    notes = list(trace.get("notes") or [])
    if done and trace["answer"] and not trace["retrieved"]:
        notes.insert(0, SLIM_NO_SOURCES)
    if notes:
        body += '<ul class="chat-notes">' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"
    answer = f'<div class="chat-answer slim-answer"><h3>Answer</h3><div class="chat-answer-text">{body}</div></div>'
    steps = []
    if trace["step"] in ("retrieved", "answered"):         # decided: the references are known
        used = "retrieved" if trace["retrieved"] else "skipped"
        steps.append(f'<li class="slim-decision">Retrieval <b>{used}</b>: {escape(trace["reason"])}'
                     + (f" ({escape(trace['forced_rule'])})" if trace["forced_rule"] else "") + "</li>")
    if trace["proxy_error"]:
        steps.append(f'<li class="slim-proxy-error">The proxy failed: {escape(trace["proxy_error"])}</li>')
    if trace["heuristic_answer"]:
        steps.append(f'<li>Proxy draft: <q>{escape(trace["heuristic_answer"])}</q></li>')
    if trace["verdict"]:
        said = "weighed its two words:" if trace.get("p_unknown") is not None else "it wrote"
        steps.append(f'<li>Judge: <b>{escape(trace["verdict"])}</b> ({said} <code>{escape(trace["judge_output"])}'
                     "</code>)</li>")
    if trace["claims"]:
        rows = "".join(f"<tr><td>{escape(c['text'])}</td><td>{escape(c['query'])}</td>"
                       f"<td>{escape(c['verdict'] or '—')}{_weight(c.get('p_unknown'))}</td>"
                       f"<td>{escape(', '.join(c['retrieved_ids']) or '—')}</td></tr>" for c in trace["claims"])
        steps.append('<li>Claims:<table class="slim-claims"><thead><tr><th>claim</th><th>query</th><th>judge</th>'
                     f"<th>retrieved</th></tr></thead><tbody>{rows}</tbody></table></li>")
    if items:
        refs = "".join(f'<li>[{i["label"]}] {arxiv_link(i["id"], i["title"] or i["id"])} <span class="slim-score">'
                       f'{i["score"]:.2f} · {escape(i["query"])}</span></li>' for i in items)   # papers only
        steps.append(f'<li>References:<ol class="chat-sources">{refs}</ol></li>')
    if done:
        # a prompt has tokens: 0 means the endpoint did not report them (llama_cpp.server when streaming)
        costs = " · ".join(f"{role}: {c['calls']} call(s), {c['prompt_tokens'] or '?'}+{c['completion_tokens']} "
                           f"tokens, {c['seconds']:.1f} s" for role, c in trace["costs"].items() if c["calls"])
        steps.append(f'<li class="slim-costs">Cost by role — {escape(costs)}</li>')
    return answer, f'<ul class="slim-trace">{"".join(steps)}</ul>'


def _weight(p_unknown: float | None) -> str:
    return "" if p_unknown is None else f" (P(unknown) {p_unknown:.2f})"


# --- the tab -------------------------------------------------------------------------------------------------
def build(services: Services) -> gr.Textbox:
    chat = chat_for(services)

    def lineage_of(view: dict, user: str) -> dict[str, list[dict]]:
        """Root papers of each thought the turn cited, for the reveal (thoughts no longer in memory are left out)."""
        if not reveals(view):
            return {}
        thought_ids = {s["id"] for a in view["answers"] for s in a["sources"] if s["kind"] == "thought"}
        return {t["id"]: t["root_papers"] for tid in sorted(thought_ids)
                for t in memory_view(services, tid, limit=1, user=user) if t["id"] == tid}

    def ask(question: str, personalize: bool, previous_turn: str | None, request: gr.Request):
        user = current_user(request)
        hidden = gr.update(visible=False)
        try:
            check_rate(services, user, rate_scope(request, user), "asking")
            turn = chat.prepare(question, user, personalize, previous_turn=previous_turn)
        except (ChatError, RateLimited) as error:
            yield f'<div class="chat-notice">{escape(error)}</div>', "", "", hidden, "", None, gr.update()
            return
        notice, a, b = turn_outputs(turn.view(), turn.notice)   # retrieval done: show the question and sources
        yield notice, a, b, hidden, "", turn.id, gr.update()
        last = time.monotonic()
        for live in chat.stream(turn):
            if time.monotonic() - last >= _STREAM_EVERY_S or live.done:
                last = time.monotonic()
                notice, a, b = turn_outputs(live.view(), turn.notice)
                yield notice, a, b, hidden, "", turn.id, gr.update()
        final = live.view()
        notice, a, b = turn_outputs(final, turn.notice, lineage_of(final, user))
        votable = gr.update(visible=turn.comparison == "yes")
        yield notice, a, b, votable, "", turn.id, recent_html(chat.recent_turns(user))

    def ask_slim(question: str, request: gr.Request):
        user = current_user(request)
        try:
            check_rate(services, user, rate_scope(request, user), "asking")
            last = 0.0
            for live in stream_adaptive(services, question, user):
                if time.monotonic() - last >= _STREAM_EVERY_S or live.step == "answered":
                    last = time.monotonic()
                    answer, trace = slim_html(live.as_dict())
                    yield "", answer, trace
        except (ChatError, RateLimited) as error:     # MainModelFailed is a ChatError
            yield f'<div class="chat-notice">{escape(error)}</div>', gr.update(), gr.update()

    def ask_deep(question: str, turn_id: str | None, request: gr.Request):
        """A deep answer (RAT) to the question typed, or else to the turn shown; streamed with its step trace. The
        finished answer goes to the thought step in the background; a stopped one never does."""
        user = current_user(request)
        if not (question or "").strip() and turn_id:
            shown = chat.view(turn_id)
            question = shown["question"] if shown and shown["user"] == user else ""
        try:
            check_rate(services, user, rate_scope(request, user), "asking")
            last, live = 0.0, None
            for live in stream_deep(services, question, user):
                if time.monotonic() - last >= _STREAM_EVERY_S or live.done:
                    last = time.monotonic()
                    record = live.as_dict()
                    yield result_html(record, "answer", f"Deep answer (RAT): {record['question']}"), trace_html(record)
        except (ChatError, RateLimited) as error:
            yield f'<div class="chat-notice">{escape(error)}</div>', ""
            return
        if not live.run.text:
            return
        job = keep_in_background(services, live, user)
        waited = time.monotonic()
        while not job.done() and time.monotonic() - waited < DEEP_THOUGHT_WAIT_S:
            time.sleep(0.5)
        record = live.as_dict()
        status = (_deep_thought_text(record["thought"]) if job.done() and not job.exception() else
                  "The thought step is still running in the background." if not job.done() else
                  f"The thought step failed: {job.exception()}")
        yield (result_html(record, "answer", f"Deep answer (RAT): {record['question']}")
               + f'<div class="deep-thought">{escape(status)}</div>', trace_html(record))

    def vote(choice: str, turn_id: str | None, request: gr.Request):
        user = current_user(request)
        if not turn_id:
            return '<div class="chat-notice">Ask a question first.</div>', gr.update(), gr.update(), gr.update()
        try:
            result = chat.vote(turn_id, choice, user)
        except ChatError as error:
            return f'<div class="chat-error">{escape(error)}</div>', gr.update(), gr.update(), gr.update()
        view = chat.view(turn_id)
        _, a, b = turn_outputs(view, lineage=lineage_of(view, user))
        changed = f" (changed from {CHOICE_TEXT[result['previous']]})" if result["changed"] else ""
        label = result["label"] if result["label"] in ("A", "B") else result["choice"]
        message = (f'<div class="chat-voted">Vote recorded: {escape(label)} — {escape(CHOICE_TEXT[result["choice"]])}'
                   f"{escape(changed)}. You can change it by clicking another button. "
                   + ("No thought is made from this turn.</div>" if result["choice"] == "bad" else
                      "A thought is being made from the preferred answer in the background.</div>"))
        return message, a, b, recent_html(chat.recent_turns(user))

    def show_recent(request: gr.Request):
        rows = chat.recent_turns(current_user(request))
        return recent_html(rows), gr.update(choices=history_choices(rows), value=None)

    def turn_bibtex(turn_id: str | None, request: gr.Request):
        """The papers the shown turn's answers used, as BibTeX — once the sides are revealed (the vote, or no
        comparison): before that, which papers a side used would tell the sides apart."""
        user = current_user(request)
        view = chat.view(turn_id) if isinstance(turn_id, str) and turn_id else None
        if view is None or view["user"] != user:
            return '<span class="chat-notice">Ask a question first.</span>', None
        if not reveals(view):
            return '<span class="chat-notice">Vote first: the sources stay blind until then.</span>', None
        ids = list(dict.fromkeys(s["id"] for a in view["answers"] for s in a["sources"] if s["kind"] == "paper"))
        if not ids:
            return '<span class="chat-notice">This turn used no papers.</span>', None
        try:
            return "", write_bibtex(bibtex_for_ids(services, ids), f"chat-{view['question'][:40]}")
        except UserError as error:
            return f'<span class="chat-notice">{escape(error)}</span>', None

    def refresh_history(request: gr.Request):
        return gr.update(choices=history_choices(chat.recent_turns(current_user(request))))

    def reopen(turn_id: str | None, request: gr.Request):
        """A past turn of this user, shown again with its answers, sources and vote; it becomes the turn a vote or
        a follow-up question refers to."""
        user = current_user(request)
        view = chat.view(turn_id) if isinstance(turn_id, str) and turn_id else None
        if view is None or view["user"] != user:
            message = "Pick one of your recent questions." if not turn_id else "That question is not in your history."
            return (f'<div class="chat-notice">{escape(message)}</div>', gr.update(), gr.update(), gr.update(),
                    gr.update(), gr.update())
        notice, a, b, status = reopened_outputs(view, lineage_of(view, user))
        return notice, a, b, gr.update(visible=view["comparison"] == "yes"), status, turn_id

    def search_memory(query: str, request: gr.Request):
        return memory_html(memory_view(services, query, user=current_user(request)))

    def first_memory(request: gr.Request):
        return search_memory("", request)

    def remove_thought(thought_id: str, query: str, request: gr.Request):
        user = current_user(request)
        deleted = delete_thought(services, thought_id, user)
        note = (f"Deleted {thought_id.strip()}." if deleted else
                f"No thought {thought_id.strip()!r} that you may delete: you can delete thoughts made from your own "
                "questions.")
        return f"<p>{escape(note)}</p>", memory_html(memory_view(services, query, user=user))

    def show_stats():
        stats = vote_stats(services)
        return stats_html(stats), stats_figure(stats)

    with gr.Tabs(elem_id="chat-tabs"):
        with gr.Tab("Ask", id="chat-ask-tab"):
            gr.Markdown("Each question is answered twice: once from papers only, once from papers plus the "
                        "assistant's stored thoughts. Until you vote both answers look alike: the same number of "
                        "sources, each shown as [1], [2]… with the start of its text (no links, ids or kinds), and "
                        "only the time of the whole turn. Your vote reveals which answer used thoughts, which "
                        "sources are papers (with arXiv links) and which are thoughts (with the papers they rest on).")
            question = gr.Textbox(label="Question", lines=2, elem_id="chat-question",
                                  placeholder="e.g. How are retrieval-augmented models evaluated?")
            with gr.Row():
                personalize = gr.Checkbox(label="Adapt answers to my saved profile", value=False,
                                          elem_id="chat-personalize")
                ask_button = gr.Button("Ask", variant="primary", elem_id="chat-ask")
                deep_button = gr.Button("Deep answer (RAT)", elem_id="chat-deep")
            notice = gr.HTML(elem_id="chat-notice")
            with gr.Row(equal_height=False):
                answer_a = gr.HTML(elem_id="chat-answer-a")
                answer_b = gr.HTML(elem_id="chat-answer-b")
            with gr.Row(visible=False, elem_id="chat-vote-row") as vote_row:
                vote_buttons = [(gr.Button(text, elem_id=elem), value) for text, value, elem in VOTE_BUTTONS]
            vote_status = gr.HTML(elem_id="chat-vote-status")
            with gr.Row():
                turn_bib = gr.Button("BibTeX of this turn's papers", size="sm", elem_id="chat-bib-run", scale=1)
                turn_bib_note = gr.HTML(elem_id="chat-bib-note")
                turn_bib_file = gr.File(label="BibTeX", elem_id="chat-bibtex", interactive=False, height=72, scale=2)
            deep_answer = gr.HTML(elem_id="chat-deep-answer")
            deep_stop = gr.Button("Stop the deep answer", size="sm", elem_id="chat-deep-stop")
            with gr.Accordion("Deep answer: step trace", open=False, elem_id="chat-deep-trace-box"):
                gr.Markdown("A deep answer drafts the answer step by step without sources, then for each step "
                            "searches papers and stored thoughts with the draft so far and revises the whole draft "
                            "with what it found (RAT). Each step shows its query, what it retrieved, and the text "
                            "before and after. A finished answer may become a thought; a stopped one never does.")
                deep_trace = gr.HTML(elem_id="chat-deep-trace")
            gr.Markdown("#### Your recent questions")
            with gr.Row():
                history = gr.Dropdown(label="Reopen a past question (its answers, sources and your vote)",
                                      choices=[], value=None, allow_custom_value=True, elem_id="chat-history",
                                      scale=4)
            recent = gr.HTML(elem_id="chat-recent")
            turn_state = gr.State(None)
        with gr.Tab("Adaptive retrieval (SlimPLM)", id="chat-slim-tab"):
            gr.Markdown("One answer. First the small local model drafts an answer and judges whether it can be "
                        "trusted; only what it judges unknown is looked up in the papers (questions about recent "
                        "papers, named papers, arXiv ids or dates always are). The main model answers once. The "
                        "decision trace below shows what was decided and why.")
            slim_question = gr.Textbox(label="Question", lines=2, elem_id="slim-question")
            slim_button = gr.Button("Ask", variant="primary", elem_id="slim-ask")
            slim_notice = gr.HTML(elem_id="slim-notice")
            slim_answer = gr.HTML(elem_id="slim-answer")
            slim_trace = gr.HTML(elem_id="slim-trace")
        with gr.Tab("Memory", id="chat-memory-tab"):
            with gr.Row():
                memory_query = gr.Textbox(label="Search thoughts (meaning) or a thought id", elem_id="chat-memory-query")
                memory_search = gr.Button("Search", elem_id="chat-memory-search")
            with gr.Row():
                delete_id = gr.Textbox(label="Thought id to delete", elem_id="chat-memory-delete-id")
                delete_button = gr.Button("Delete thought", variant="stop", elem_id="chat-memory-delete")
            delete_status = gr.HTML()
            memory_list = gr.HTML(elem_id="chat-memory-list")
        with gr.Tab("Statistics", id="chat-stats-tab"):
            stats_refresh = gr.Button("Refresh", elem_id="chat-stats-refresh")
            stats_table = gr.HTML(elem_id="chat-stats")
            stats_plot = gr.Plot(elem_id="chat-stats-plot")

    ask_outputs = [notice, answer_a, answer_b, vote_row, vote_status, turn_state, recent]
    asks_at_once = 1 if services.settings.llm_backend == "local" else services.settings.concurrency
    # the turn shown so far is what a follow-up question refers to
    ask_button.click(ask, [question, personalize, turn_state], ask_outputs, concurrency_limit=asks_at_once,
                     concurrency_id="chat-ask").then(refresh_history, None, [history])
    question.submit(ask, [question, personalize, turn_state], ask_outputs, concurrency_limit=asks_at_once,
                    concurrency_id="chat-ask").then(refresh_history, None, [history])
    deep_event = deep_button.click(ask_deep, [question, turn_state], [deep_answer, deep_trace],
                                   concurrency_limit=asks_at_once, concurrency_id="chat-ask")
    deep_stop.click(None, None, None, cancels=[deep_event])
    for trigger in (slim_button.click, slim_question.submit):
        trigger(ask_slim, [slim_question], [slim_notice, slim_answer, slim_trace], concurrency_limit=asks_at_once,
                concurrency_id="chat-ask")
    for button, value in vote_buttons:
        button.click(_bind_choice(vote, value), [turn_state], [vote_status, answer_a, answer_b, recent])
    memory_search.click(search_memory, [memory_query], [memory_list])
    memory_query.submit(search_memory, [memory_query], [memory_list])
    delete_button.click(remove_thought, [delete_id, memory_query], [delete_status, memory_list])
    stats_refresh.click(show_stats, None, [stats_table, stats_plot])
    turn_bib.click(turn_bibtex, [turn_state], [turn_bib_note, turn_bib_file])
    history.input(reopen, [history], [notice, answer_a, answer_b, vote_row, vote_status, turn_state])
    _on_page_load(show_recent, [recent, history])
    _on_page_load(first_memory, [memory_list])
    _on_page_load(show_stats, [stats_table, stats_plot])
    return question          # the Search tab's "Ask about this paper" fills it


def _bind_choice(vote, choice: str):
    def handler(turn_id: str | None, request: gr.Request):
        return vote(choice, turn_id, request)

    return handler


def _on_page_load(fn, outputs) -> None:
    """Run `fn` whenever the page (re)loads, from inside a tab module that does not own the page."""
    root = gr.context.Context.root_block
    if root is not None:
        root.load(fn, None, outputs)
