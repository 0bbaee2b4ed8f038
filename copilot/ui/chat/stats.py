"""The Statistics sub-tab: how the blind votes stand — thought-augmented against papers-only answers
(copilot.features.stats)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import gradio as gr

from copilot.errors import UserError
from copilot.features.preferences import export_for
from copilot.features.stats import vote_stats
from copilot.services import Services
from copilot.ui.chat.ask import on_page_load
from copilot.ui.common import current_user, escape, shown_file


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _interval(low: float | None, high: float | None) -> str:
    return "" if low is None else f" ({_pct(low)} – {_pct(high)})"


def stats_html(stats: dict) -> str:
    """The verdict in one sentence, then the figures behind it."""
    bias = stats["position_bias"]
    sequential = stats["sequential"]
    rows = [("Thought-augmented win rate", _pct(stats["win_rate"])),
            ("… 95% interval, votes taken as independent (Wilson)", _interval(stats["ci_low"], stats["ci_high"])
             or "—"),
            ("… 95% interval, each user's votes resampled together",
             _interval(stats["cluster_ci_low"], stats["cluster_ci_high"]) or "— (needs 2 voters)"),
            ("Evidence that thoughts win more than half (a verdict at 20; may be read after every vote)",
             f"{sequential['evalue']:.3g}"),
            ("Position bias: decisive votes for the answer shown as A", _pct(bias["a_share"]) + _interval(
                bias["ci_low"], bias["ci_high"])),
            ("Decisive votes", stats["decisive_votes"]), ("from people", stats["voters"]),
            ("Thought-augmented wins", stats["thought_wins"]), ("Papers-only wins", stats["raw_wins"]),
            ("Ties", stats["ties"]), ("Both bad", stats["both_bad"]),
            ("Turns compared (two different answers)", stats["comparisons"]),
            ("… share of finished turns", _pct(stats["comparison_share"])),
            ("No comparison: memory found nothing for the question", stats["no_comparison"]),
            ("No comparison: memory found something, but the answers came out the same", stats["same_answer"]),
            ("Failed turns", stats["failed_turns"]),
            ("Comparisons not voted", stats["unvoted_comparisons"]),
            ("Votes cast after the sides were shown (left out)", stats["unblinded_votes_left_out"]),
            ("Votes changed after the first (the first counts)", stats["votes_changed_after_first"]),
            ("All turns", stats["turns"])]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return (f'<p class="chat-stats-verdict">{escape(stats["verdict_text"])}</p>'
            f'<table class="chat-stats">{body}</table>')


def stats_figure(stats: dict):
    """The evidence after each decisive vote (log scale, the verdict line at 20) beside the running win rate. No
    cumulative interval: watching one shrink invites stopping the day it looks good."""
    import plotly.graph_objects as go

    points = stats["over_time"]
    figure = go.Figure()
    # x is the running count of decisive votes, not their clock time: votes minutes apart made a time axis with
    # sub-millisecond ticks (issue #20); the time of each vote is in the hover text.
    count = len(points)
    if points:
        x = list(range(1, count + 1))
        when = [str(p["at"])[:16].replace("T", " ") for p in points]
        if all("evalue" in p for p in points):
            figure.add_trace(go.Scatter(x=x, y=[p["evalue"] for p in points], mode="lines", yaxis="y2",
                                        name="evidence (verdict at 20)", line={"dash": "dash"},
                                        hovertemplate="vote %{x}: evidence %{y:.3g}<extra></extra>"))
        figure.add_trace(go.Scatter(x=x, y=[p["win_rate"] for p in points], mode="lines+markers", customdata=when,
                                    name="thought-augmented win rate",
                                    hovertemplate="vote %{x} (%{customdata}): %{y:.2f}<extra></extra>"))
    figure.add_hline(y=0.5, line_dash="dot")
    figure.update_layout(yaxis={"range": [0, 1], "title": "win rate (cumulative)"},
                         yaxis2={"type": "log", "overlaying": "y", "side": "right", "title": "evidence",
                                 "showgrid": False},
                         xaxis={"title": "decisive votes so far", "tickformat": "d", "dtick": max(1, -(-count // 8)),
                                "range": [0.5, max(count, 1) + 0.5]},
                         height=320, margin={"l": 40, "r": 50, "t": 30, "b": 40}, legend={"orientation": "h"},
                         title="Decisive votes over time" if points else "No decisive votes yet")
    return figure


def export_view(services: Services, since: str, request: gr.Request | None) -> tuple:
    """→ (a sentence on the export and any push, the JSON-lines file or None)."""
    try:
        done = export_for(services, current_user(request), (since or "").strip() or None)
    except UserError as error:
        return f'<span class="chat-notice">{escape(error)}</span>', shown_file(None)
    push, export = done["push"], done["export"]
    said = (f"{export['count']} voted comparisons: {export['pairs']} preference pairs, {export['ties']} ties, "
            f"{export['both_bad']} both bad." if export["count"] else "No votes on finished comparisons yet.")
    if push["status"] == "ok":
        said += f" Pushed to the dataset {push['repository']}."
    elif push["status"] == "failed":
        said += f" The push to {push['repository']} failed: {push['error']}."
    return f"<span>{escape(said)}</span>", shown_file(_download_copy(export["path"]) if export["count"] else None)


def _download_copy(path: str) -> str:
    """The export copied to a temporary folder: the page serves files from there, never from the data dir."""
    copy = Path(tempfile.mkdtemp(prefix="copilot-prefs-")) / Path(path).name
    shutil.copyfile(path, copy)
    return str(copy)


def stats_view(services: Services) -> tuple:
    stats = vote_stats(services)
    return stats_html(stats), plot_update(stats)


def plot_update(stats: dict) -> dict:
    """The plot once there is a decisive vote to draw; before that the table's sentence says so, and an empty chart
    would say nothing more."""
    return gr.update(value=stats_figure(stats) if stats["over_time"] else None, visible=bool(stats["over_time"]))


def build(services: Services):
    """The sub-tab; returns (refresh, its outputs) for the tab's select events."""
    refresh = gr.Button("Refresh", elem_id="chat-stats-refresh")
    table, plot = gr.HTML(elem_id="chat-stats"), gr.Plot(elem_id="chat-stats-plot", visible=False)
    with gr.Accordion("Preference data (JSON lines: prompt, chosen, rejected, …)", open=False):
        with gr.Row():
            since = gr.Textbox(label="Votes since (YYYY-MM-DD; empty: all)", elem_id="chat-prefs-since", scale=3)
            export = gr.Button("Export", elem_id="chat-prefs-export", scale=1)
        export_note = gr.HTML(elem_id="chat-prefs-note")
        export_file = gr.File(label="Preference pairs", interactive=False, height=72, visible=False,
                              elem_id="chat-prefs-file")

    def show_stats():
        return stats_view(services)

    def export_preferences(since_text: str, request: gr.Request):
        return export_view(services, since_text, request)

    refresh.click(show_stats, None, [table, plot])
    export.click(export_preferences, [since], [export_note, export_file])
    on_page_load(show_stats, [table, plot])
    return show_stats, [table, plot]
