"""The Library tab: corpus status, ingestion history, and a button to ingest from arXiv now."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from copilot.features import library
from copilot.scheduler import IngestScheduler
from copilot.services import Services
from copilot.ui.common import escape

HISTORY_COLUMNS = ["id", "source", "status", "started", "finished", "seen", "added", "updated", "unchanged",
                   "skipped", "error"]


def status_markdown(services: Services, scheduler: IngestScheduler | None) -> str:
    info = library.status(services, scheduler.next_run() if scheduler else None)
    last = info["last_ingest"]
    if last:
        last_line = (f"{escape(last['status'])} · {escape(last['source'])} · started {last['started']} · "
                     f"added {last['added']}, updated {last['updated']}, unchanged {last['unchanged']}, "
                     f"skipped {last['skipped']}")
        if last["error"]:
            last_line += f" · error: {escape(last['error'])}"
    else:
        last_line = "never"
    running = info["ingest_running"] or (scheduler is not None and scheduler.running)
    lines = [
        f"**Corpus:** <span id='corpus-count'>{info['papers']}</span> papers · {info['thoughts']} thoughts",
        f"**Last ingestion:** {last_line}",
        f"**Next ingestion:** {info['next_ingest'] or 'not scheduled'} (categories "
        f"{escape(', '.join(info['categories']))})",
        f"**Models:** LLM {escape(info['llm']['backend'])} / {escape(info['llm']['model'])} · embeddings "
        f"{escape(info['embedder'])}",
    ]
    if running:
        lines.append("**Ingestion running…** counts below update as batches land.")
    if scheduler and scheduler.last_error:
        lines.append(f"**Last scheduled run failed:** {escape(scheduler.last_error)}")
    return "\n\n".join(lines)


def history_frame(services: Services) -> pd.DataFrame:
    return pd.DataFrame(library.ingest_history(services), columns=HISTORY_COLUMNS)


def build(services: Services, scheduler: IngestScheduler | None) -> None:
    status = gr.Markdown(elem_id="library-status")
    with gr.Row():
        run_now = gr.Button("Run ingestion now", variant="primary", interactive=scheduler is not None)
        refresh = gr.Button("Refresh")
    notice = gr.Markdown()
    history = gr.Dataframe(headers=HISTORY_COLUMNS, interactive=False, label="Ingestion history")
    timer = gr.Timer(3.0)

    def show():
        return status_markdown(services, scheduler), history_frame(services)

    def trigger():
        if scheduler is None:
            return "The scheduler is off (COPILOT_SCHEDULER=false); use `python -m copilot ingest`."
        if scheduler.trigger_now():
            return "Ingestion started in the background; progress shows above."
        return "An ingestion is already running; this request was not started."

    gr.on([refresh.click, timer.tick], show, outputs=[status, history], show_progress="hidden")
    run_now.click(trigger, outputs=notice).then(show, outputs=[status, history])
    return show, status, history
