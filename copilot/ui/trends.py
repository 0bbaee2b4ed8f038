"""The Trends tab: pick a range, see topics, plots, summaries with links and research ideas as they arrive."""

from __future__ import annotations

import logging
import re

import gradio as gr
import plotly.graph_objects as go

from copilot.errors import UserError
from copilot.features import gor, gor_period, trends
from copilot.features.bibtex import bibtex_for_ids
from copilot.features.limits import RateLimited, check_rate
from copilot.readable import readable
from copilot.records import ARXIV_ID_PATTERN
from copilot.services import Services
from copilot.ui.common import arxiv_link, current_user, escape, rate_scope, shown_file, write_bibtex

log = logging.getLogger(__name__)

RANGES = {"Last day": "day", "Last week": "week", "Last month": "month", "Custom": "custom"}
_ID_REF = re.compile(rf"\[((?:{ARXIV_ID_PATTERN})(?:,\s*(?:{ARXIV_ID_PATTERN}))*)\]")
MAX_PLOTTED = 8


def linked(text: str) -> str:
    """Model text or quotes of abstracts, their LaTeX shown as text (`readable`: a quote read "\\emph{ReverBERT}"
    and "Liu~\\cite{…}", issue #59), escaped; then [2501.01234] and [2501.01234, hep-th/9901001] citations become
    arXiv links; a line break (between quotes) stays one."""
    def links(match: re.Match) -> str:
        return "[" + ", ".join(arxiv_link(pid.strip()) for pid in match.group(1).split(",")) + "]"
    return _ID_REF.sub(links, escape(readable(text))).replace("\n", "<br>")


def status_html(report: trends.TrendsReport) -> str:
    who = (f"for you: ranked by your profile (version {report.profile_version})" if report.selection == "profile"
           else "the field: spread evenly over the whole range, not chosen by your profile")
    cats = escape(", ".join(report.categories)) if report.categories else "all categories"
    parts = [f"<b>{report.start} … {report.end}</b> · {cats} · <span id='trends-count'>{report.papers}</span> "
             f"papers analysed of {report.in_range} in the range (cap {report.cap}) · {who}"]
    if report.previous and report.previous_papers >= trends.MIN_PREVIOUS_PAPERS:
        parts.append(f"Compared with {report.previous[0]} … {report.previous[1]} ({report.previous_papers:,} "
                     "papers).")
    parts += [escape(n) for n in report.notices]
    parts += [f"<span class='trends-failure'>LLM step failed: {escape(f)}</span>" for f in report.failures]
    if report.cached:
        parts.append("Shown from the cache; <b>Refresh</b> recomputes.")
    if not report.done:       # the stage timings stay in the CLI's output and the log, not on the page
        parts.append(f"<i>Working: {escape(report.stage)}…</i>")
    state = "done" if report.done else "working"
    return f"<span class='trends-state' data-state='{state}'>" + "<br>".join(parts) + "</span>"


def topics_html(report: trends.TrendsReport) -> str:
    rows = []
    for topic in report.topics:
        trend = "n/a" if topic.rising is None else "▲ rising" if topic.rising else "steady"
        if topic.falling:
            trend = "▼ falling"
        links = ", ".join(arxiv_link(pid, report.titles.get(pid) or pid) for pid in topic.paper_ids[:3])
        more = f" and {topic.size - 3} more" if topic.size > 3 else ""
        summary = linked(topic.summary) if topic.summary else "<i>no summary (only the largest topics get one)</i>"
        rows.append(f"<tr class='trends-topic'><td><b>{escape(topic.label)}</b><br>"
                    f"<small>{escape(', '.join(topic.terms))}</small></td><td>{topic.size}</td><td>{trend}</td>"
                    f"<td>{summary}<br><small>{links}{more}</small>"
                    "</td></tr>")
    if not rows:
        return ""
    return ("<table id='trends-topic-table'><thead><tr><th>Topic</th><th>Papers</th><th>Trend</th>"
            "<th>Summary and papers</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def summary_html(report: trends.TrendsReport) -> str:
    if not report.summary:
        return ""
    return f"<h3>The period</h3><div id='trends-overall'>{linked(report.summary)}</div>"


def trace_html(trace: list[dict], title: str = "Revision trace (RAT)") -> str:
    steps = "".join(
        f"<li>query: <code>{escape(step['query'])}</code> · retrieved: {escape(', '.join(step['retrieved']))}"
        f"{' · kept the draft' if step.get('kept') else ''}<br><b>before</b>: {escape(step['before'])}"
        f"<br><b>after</b>: {escape(step['after'])}</li>" for step in trace)
    return f"<details><summary>{escape(title)}</summary><ol>{steps}</ol></details>"


def ideas_html(report: trends.TrendsReport) -> str:
    if report.ideas_error:
        shown = trace_html(report.ideas_trace, "What the model wrote (RAT trace)") if report.ideas_trace else ""
        return f"<h3>Research ideas</h3><p class='trends-failure'>{escape(report.ideas_error)}</p>{shown}"
    if not report.ideas:
        return ""
    items = []
    for idea in report.ideas:
        papers = ", ".join(arxiv_link(pid, report.titles.get(pid) or pid) for pid in idea.paper_ids) or "none"
        items.append(f"<li class='trends-idea'>{linked(idea.text)}<br><small>Papers: {papers}</small>"
                     f"{trace_html(idea.trace)}</li>")
    caution = ""
    if report.small_writer:
        caution = (f"<p class='trends-caution'><small>Drafted by the small local model ({escape(report.writer)}): "
                   "read them as starting points and check each supporting paper; an OpenAI-compatible endpoint "
                   "(COPILOT_LLM=openai) writes far better ideas.</small></p>")
    return "<h3>Research ideas</h3>" + caution + "<ol id='trends-ideas-list'>" + "".join(items) + "</ol>"


def timeline_figure(report: trends.TrendsReport) -> go.Figure:
    figure = go.Figure()
    for topic in report.topics[:MAX_PLOTTED]:
        figure.add_trace(go.Scatter(x=list(topic.counts), y=list(topic.counts.values()), mode="lines+markers",
                                    name=topic.label))
    unit = "day" if (report.end - report.start).days < 14 else "week starting"
    figure.update_layout(title="Papers per topic over time", xaxis_title=unit, yaxis_title="papers", height=380,
                         margin=dict(l=40, r=10, t=50, b=40), legend=dict(font=dict(size=10)))
    return figure


def movers_figure(report: trends.TrendsReport) -> go.Figure:
    topics = report.topics[:MAX_PLOTTED]
    figure = go.Figure()
    if topics and topics[0].change is not None:
        values = [100 * (t.change or 0.0) for t in topics]
        colors = ["#2e7d32" if t.rising else "#c62828" if t.falling else "#9e9e9e" for t in topics]
        figure.add_trace(go.Bar(x=values, y=[t.label for t in topics], orientation="h", marker_color=colors))
        title = "Rising (green) vs falling (red): change in share, points vs the previous window"
    else:
        figure.add_trace(go.Bar(x=[100 * t.share for t in topics], y=[t.label for t in topics], orientation="h"))
        title = "Share of papers (no previous window to compare with)"
    figure.update_layout(title=dict(text=title, font=dict(size=13)), height=380, yaxis=dict(autorange="reversed"),
                         margin=dict(l=10, r=10, t=50, b=40), xaxis_title="% of the window's papers")
    return figure


def render(report: trends.TrendsReport) -> tuple:
    """The outputs of `build`'s `outputs`; the plots and the BibTeX picker show once the report has topics."""
    topic_ids = {f"{topic.label} ({topic.size} papers)": list(topic.paper_ids) for topic in report.topics}
    shown = gr.update(visible=bool(report.topics))
    return (status_html(report), topics_html(report), timeline_figure(report), movers_figure(report),
            summary_html(report), ideas_html(report),
            gr.update(choices=list(topic_ids), value=next(iter(topic_ids), None)), topic_ids, shown, shown,
            shown_file(None))


def message(text: str) -> tuple:
    hidden = gr.update(visible=False)
    return (f"<span id='trends-message'>{escape(text)}</span>", "", None, None, "", "",
            gr.update(choices=[], value=None), {}, hidden, hidden, shown_file(None))


# --- "Ask about this period": a free question answered from the records Graph of Records chooses ---------------
def training_html(status: dict) -> str:
    state = status.get("state", "idle")
    text = {"ready": "ready", "running": "training", "failed": "failed", "too small": "not trained (too small)",
            "idle": "not trained yet"}.get(state, state)
    stage = status.get("stage", "")
    detail = f" · <small>{escape(stage)}</small>" if stage and stage != text else ""
    return (f"<span id='trends-gor-state' data-state='{escape(state)}'>Record graph of this period: <b>{text}</b>"
            f"</span>{detail}")


def answer_html(result: gor.PeriodAnswer, titles: dict[str, str] | None = None) -> str:
    if result.chosen_by == gor.GOR:
        how = ("<b>Chosen by Graph of Records</b>: the period's papers and thoughts, ranked by the network trained "
               "on this period's record graph.")
    else:
        how = "<b>Plain retrieval</b> (embedding similarity), not Graph of Records."
    notices = "".join(f"<li>{escape(n)}</li>" for n in result.notices)
    rows = "".join(
        f"<li class='trends-gor-node' data-kind='{escape(n.kind)}'>{n.score:.3f} · {escape(n.kind)} · "
        + (arxiv_link(n.id, n.title or n.id) if n.kind == "paper" else f"{escape(n.id)} {escape(n.title[:90])}")
        + "</li>" for n in result.nodes)
    return (f"<div id='trends-gor-answer' data-chosen-by='{escape(result.chosen_by)}'>"
            f"<p class='trends-gor-how'>{how}</p>"
            + (f"<ul class='trends-gor-notices'>{notices}</ul>" if notices else "")
            + f"<div class='trends-gor-text'>{linked(result.answer)}</div>"
            f"<details open><summary>Records handed to the model, with their scores</summary><ol>{rows}</ol>"
            "</details></div>")


def _scope_of(value):
    return gor_period.scope_for(trends.parse_day(value[0], "start"), trends.parse_day(value[1], "end"), value[2])


def _scope_from_inputs(services: Services, range_name, first, last, cats):
    begin, finish = trends.resolve_range(services, RANGES.get(range_name, "week"), first, last)
    return gor_period.scope_for(begin, finish, cats or [])


def ask_view(services: Services, user: str, scope_key: str | None, text, range_name, first, last, cats):
    """Answer at once (GoR's choice if trained, else plain retrieval); never starts a training."""
    try:
        check_rate(services, user, scope_key, "a question about the period")
        scope = _scope_from_inputs(services, range_name, first, last, cats)
        result = gor_period.ask_period(services, scope, (text or "")[:services.settings.max_input_chars], user=user)
    except (RateLimited, ValueError) as error:   # TrendsError is a ValueError
        return f"<span id='trends-ask-message'>{escape(str(error))}</span>", gr.skip(), gr.skip()
    value = (str(scope.start), str(scope.end), list(scope.categories))
    return answer_html(result), training_html(gor_period.training_status(services, scope)), value


def train_view(services: Services, user: str, range_name, first, last, cats):
    """Start training the chosen period's record graph in the background (the user asked for it)."""
    try:
        scope = _scope_from_inputs(services, range_name, first, last, cats)
    except ValueError as error:
        return f"<span id='trends-ask-message'>{escape(str(error))}</span>", gr.skip()
    status = gor_period.start_training(services, scope, user=user)
    return training_html(status), (str(scope.start), str(scope.end), list(scope.categories))


def tick_view(services: Services, value):
    return training_html(gor_period.training_status(services, _scope_of(value))) if value else gr.skip()


def _ask_event(services: Services):
    def on_ask(text, range_name, first, last, cats, request: gr.Request):
        user = current_user(request)
        return ask_view(services, user, rate_scope(request, user), text, range_name, first, last, cats)
    return on_ask


def _train_event(services: Services):
    def on_train(range_name, first, last, cats, request: gr.Request):
        return train_view(services, current_user(request), range_name, first, last, cats)
    return on_train


def build_ask(services: Services, range_inputs: list) -> None:
    """The question box, its answer, the explained training action, and the training status (polled)."""
    gr.Markdown("### Ask about this period\nA free question over the chosen range, answered at once from six of its "
                "papers and the thoughts made from them: by plain retrieval, or by Graph of Records once this "
                "period's record graph is trained. Training is a separate action: it writes simulated questions "
                f"with the model and trains a small network, about {gor_period.TRAINING_MINUTES} minutes of full "
                "CPU for a month of papers.")
    question = gr.Textbox(label="Your question about the period", lines=2, elem_id="trends-ask",
                          placeholder="What did the papers of this period do about agents?")
    with gr.Row():
        ask = gr.Button("Ask", elem_id="trends-ask-run")
        train = gr.Button(f"Train the record graph (~{gor_period.TRAINING_MINUTES} min)", elem_id="trends-gor-train")
    answer = gr.HTML(elem_id="trends-ask-answer")
    status = gr.HTML(elem_id="trends-ask-status")
    asked = gr.State(None)          # the period of the last question or training: (start, end, categories)
    timer = gr.Timer(2.0)
    on_ask = _ask_event(services)
    ask.click(on_ask, [question] + range_inputs, [answer, status, asked], concurrency_limit=2)
    question.submit(on_ask, [question] + range_inputs, [answer, status, asked], concurrency_limit=2)
    train.click(_train_event(services), range_inputs, [status, asked], concurrency_limit=1)
    timer.tick(lambda value: tick_view(services, value), [asked], [status], show_progress="hidden")


def topic_bibtex_view(services: Services, label, ids_by_topic):
    ids = (ids_by_topic or {}).get(label) if isinstance(label, str) else None
    if not ids:
        return shown_file(None)
    try:
        return shown_file(write_bibtex(bibtex_for_ids(services, ids), f"topic-{label}"))
    except UserError:          # a paper left the library since the report was made
        return shown_file(None)


SCOPES = {"The field (the whole period, sampled evenly)": False, "For me (ranked by my profile)": True}


def show_view(services: Services, user: str, scope_key: str | None, range_name, first, last, cats, n_summaries, n_ideas,
              refresh_now: bool, progress, scope: str | None = None):
    """The report as it grows (one tuple of outputs per stage)."""
    try:
        check_rate(services, user, scope_key, "a trends report")
    except RateLimited as error:
        yield message(str(error))
        return
    try:
        begin, finish = trends.resolve_range(services, RANGES.get(range_name, "week"), first, last)
        opts = trends.TrendsOptions.for_writer(services.generation, summarized_topics=int(n_summaries),
                                               ideas=int(n_ideas), for_me=SCOPES.get(scope or "", False))
        for steps, report in enumerate(trends.iter_trends(services, begin, finish, cats or [], user, opts,
                                                          refresh=refresh_now), start=1):
            progress(min(0.95, steps / 10), desc=report.stage)
            if report.done:
                log.info("trends %s … %s, seconds: %s", report.start, report.end,
                         ", ".join(f"{k} {v:.1f}" for k, v in report.timings.items()))
            yield render(report)
    except trends.TrendsError as error:
        yield message(str(error))


def _show_events(services: Services):
    def show(range_name, first, last, cats, n_summaries, n_ideas, scope, request: gr.Request,
             progress=gr.Progress()):
        user = current_user(request)
        yield from show_view(services, user, rate_scope(request, user), range_name, first, last, cats,
                             n_summaries, n_ideas, False, progress, scope)

    def show_fresh(range_name, first, last, cats, n_summaries, n_ideas, scope, request: gr.Request,
                   progress=gr.Progress()):
        user = current_user(request)
        yield from show_view(services, user, rate_scope(request, user), range_name, first, last, cats,
                             n_summaries, n_ideas, True, progress, scope)
    return show, show_fresh


def build(services: Services) -> None:
    gr.Markdown("What moved in your field: topics of a period, how they rise or fall, summaries that cite their "
                "papers, and research ideas revised against papers and thoughts (RAT). With a model that writes, "
                "the summaries and ideas are kept as thoughts (Chat's Memory tab lists them); with the default small "
                "model a summary is quotes of the period's papers and is not kept.")
    with gr.Row():
        preset = gr.Radio(list(RANGES), value="Last week", label="Range (ends at the newest paper)",
                          elem_id="trends-range")
        start = gr.Textbox(label="From (custom)", placeholder="YYYY-MM-DD", elem_id="trends-from")
        end = gr.Textbox(label="To (custom)", placeholder="YYYY-MM-DD", elem_id="trends-to")
        categories = gr.CheckboxGroup(services.settings.categories, label="Primary categories (none = all)",
                                      elem_id="trends-categories")
    with gr.Row():
        scope = gr.Radio(list(SCOPES), value=next(iter(SCOPES)), label="Whose trends", elem_id="trends-scope")
        summarized = gr.Slider(0, 8, value=5, step=1, label="Topics to summarize", elem_id="trends-summaries")
        idea_count = gr.Slider(0, 5, value=trends.default_ideas(services), step=1, label="Research ideas (RAT steps)",
                               visible=services.model_profile.writes, elem_id="trends-ideas-count")
    with gr.Row():
        run = gr.Button("Show trends", variant="primary", elem_id="trends-run")
        refresh = gr.Button("Refresh (recompute)", elem_id="trends-refresh")
    status = gr.HTML(elem_id="trends-status")
    topics = gr.HTML(elem_id="trends-topics")
    with gr.Row(visible=False) as plots:
        timeline = gr.Plot(label="Papers per topic over time", elem_id="trends-timeline")
        movers = gr.Plot(label="Rising vs falling topics", elem_id="trends-movers")
    with gr.Row():
        with gr.Column():
            summary = gr.HTML(elem_id="trends-summary")
        with gr.Column():
            build_ask(services, [preset, start, end, categories])
    ideas = gr.HTML(elem_id="trends-ideas")
    with gr.Row(visible=False) as topic_bib_row:
        topic_choice = gr.Dropdown([], value=None, label="A topic's papers as BibTeX", elem_id="trends-bib-topic",
                                   scale=3)
        topic_bib = gr.Button("Make BibTeX", elem_id="trends-bib-run", scale=1)
        topic_file = gr.File(label="BibTeX", elem_id="trends-bibtex", interactive=False, height=72, scale=2,
                             visible=False)
    topic_ids = gr.State({})
    outputs = [status, topics, timeline, movers, summary, ideas, topic_choice, topic_ids, plots, topic_bib_row,
               topic_file]

    topic_bib.click(lambda label, ids_by_topic: topic_bibtex_view(services, label, ids_by_topic),
                    [topic_choice, topic_ids], topic_file)
    show, show_fresh = _show_events(services)
    inputs = [preset, start, end, categories, summarized, idea_count, scope]
    run.click(show, inputs, outputs, concurrency_limit=2)
    refresh.click(show_fresh, inputs, outputs, concurrency_limit=2)
