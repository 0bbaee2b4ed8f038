"""The Statistics sub-tab: how the blind votes stand — thought-augmented against papers-only answers
(copilot.features.stats)."""

from __future__ import annotations

import gradio as gr

from copilot.features.stats import vote_stats
from copilot.services import Services
from copilot.ui.chat.ask import on_page_load
from copilot.ui.common import escape


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


def stats_view(services: Services) -> tuple:
    stats = vote_stats(services)
    return stats_html(stats), stats_figure(stats)


def build(services: Services) -> None:
    refresh = gr.Button("Refresh", elem_id="chat-stats-refresh")
    table, plot = gr.HTML(elem_id="chat-stats"), gr.Plot(elem_id="chat-stats-plot")

    def show_stats():
        return stats_view(services)

    refresh.click(show_stats, None, [table, plot])
    on_page_load(show_stats, [table, plot])
