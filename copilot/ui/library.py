"""The Library tab: corpus status, adding papers (a snapshot file, pasted arXiv ids, arXiv now), ingestion history."""

from __future__ import annotations

import logging
from pathlib import Path

import gradio as gr
import pandas as pd

from copilot.errors import UserError, readable_failure
from copilot.features import library
from copilot.scheduler import IngestScheduler
from copilot.services import Services
from copilot.ui.common import current_user, escape, user_within_rate
from copilot.ui.guard import MAX_UPLOAD_MB

log = logging.getLogger(__name__)

BAD_LINES_SHOWN = 20
STILL_WORKS = "The papers already in the library are unchanged and every tab works on them; the next run tries again."

HISTORY_COLUMNS = ["id", "source", "status", "started", "finished", "seen", "added", "updated", "unchanged",
                   "skipped", "error"]


def model_line(model: dict) -> str:
    """The language model's file, size and llama.cpp build (or endpoint), why it is not the one asked for, its
    profile and its measured speed."""
    if "endpoint" in model:
        line = f"**Language model:** {escape(model['model'])} at {escape(model['endpoint'])}"
    elif "file" not in model:
        line = f"**Language model:** {escape(str(model['requested']))}, {escape(model['note'])}"
    else:
        line = (f"**Language model:** {escape(Path(model['file']).name)} ({escape(model['size'])}, "
                f"{escape(model['source'])}) on {escape(model['llama_cpp'].split(' (')[0])}")
        line += f" · **{escape(model['note'])}**" if model["note"] else ""
    profile = model.get("profile") or {}
    if profile:
        line += f" · profile {escape(profile['profile'])} ({escape(profile['reason'])})"
    speed = model.get("measured_speed")
    line += (f" · measured over its last {speed['calls']} calls: {speed['output_tokens_per_s']} tokens written/s, "
             f"median call {speed['median_call_s']} s" if speed else " · speed: not measured yet (no call logged)")
    return line


def status_markdown(services: Services, scheduler: IngestScheduler | None) -> str:
    info = library.status(services, scheduler.next_run() if scheduler else None)
    last = info["last_ingest"]
    if last:
        last_line = (f"{escape(last['status'])} · {escape(last['source'])} · started {last['started']} · "
                     f"added {last['added']}, updated {last['updated']}, unchanged {last['unchanged']}, "
                     f"skipped {last['skipped']}")
        if last["status"] == "failed":
            last_line += f" · {escape(readable_failure(last['error'] or ''))}. {STILL_WORKS}"
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
        model_line(info["model"]),
    ]
    backup = library.backup_line(services)
    if backup:
        lines.append(f"**Backup to the Hub:** {escape(backup)}")
    if running:
        lines.append("**Ingestion running…** counts below update as batches land.")
    if scheduler and scheduler.last_error:
        lines.append(f"**Last {escape(scheduler.last_trigger or 'scheduled')} run failed:** "
                     f"{escape(readable_failure(scheduler.last_error))}."
                     + ("" if last and last["status"] == "failed" else f" {STILL_WORKS}"))   # said once
    if "llama_cpp" in info["model"]:        # the CPU instruction sets: folded, for whoever checks the build
        lines.append(f"<details id='library-build'><summary>llama.cpp build</summary>"
                     f"{escape(info['model']['llama_cpp'])}</details>")
    return "\n\n".join(lines)


EMPTY_LIBRARY = ("**The library is empty.** Add papers on the **Library** tab: upload a JSON-lines snapshot, paste "
                 "arXiv ids, or run an ingestion from arXiv; on the server, `python -m copilot import FILE` takes a "
                 "snapshot of any size. Search, Chat, Trends and For you work on the papers it holds.")


def empty_library_note(services: Services) -> dict:
    """The first tab's note while the library holds no paper (hidden once it does)."""
    return gr.update(value=EMPTY_LIBRARY, visible=library.paper_count(services) == 0)


def history_frame(services: Services) -> pd.DataFrame:
    runs = library.ingest_history(services)
    for run in runs:       # runs recorded before failures were written for people still hold Python's text
        run["error"] = readable_failure(run["error"]) if run["error"] else ""
    return pd.DataFrame(runs, columns=HISTORY_COLUMNS)


def import_report(counts, notes: list[str] | None = None) -> str:
    """What an import did, with each skipped line by number (the first ones) so the file can be fixed."""
    c = counts
    lines = [f'<div class="library-import-result"><p>Imported: <b>{c.added}</b> new, {c.updated} updated, '
             f"{c.unchanged} already in the library, {c.skipped} skipped.</p>"]
    if c.bad_lines:
        items = "".join(f"<li>{escape(bad.sentence)}</li>" for bad in c.bad_lines[:BAD_LINES_SHOWN])
        more = (f"<li>… and {len(c.bad_lines) - BAD_LINES_SHOWN} more</li>" if len(c.bad_lines) > BAD_LINES_SHOWN
                else "")
        head = "Skipped lines (fix them and upload again" if c.bad_lines[0].line_no else "Not stored (too large"
        lines.append(f'<p>{head}; what was imported stays):</p>'
                     f'<ul class="library-bad-lines">{items}{more}</ul>')
    lines += [f"<p>{escape(note)}</p>" for note in notes or []]
    return "".join(lines) + "</div>"


def _progress_reporter(progress: gr.Progress, total: int | None):
    def report(counts) -> None:
        done = counts.seen + counts.skipped
        if total:
            progress(min(done / total, 1.0), desc=f"{done} of {total} lines read, {counts.added} new papers")
        else:
            progress(None, desc=f"{done} papers read, {counts.added} new")
    return report


def trigger_view(services: Services, scheduler: IngestScheduler | None, request: gr.Request | None) -> str:
    try:
        library.check_may_change(services, current_user(request))
    except UserError as error:
        return str(error)
    if scheduler is None:
        return "The scheduler is off (COPILOT_SCHEDULER=false); use `python -m copilot ingest`."
    if scheduler.trigger_now():
        return "Ingestion started in the background; progress shows above."
    return "An ingestion is already running; this request was not started."


def upload_view(services: Services, file_path, request: gr.Request | None) -> str:
    """Start importing an uploaded snapshot in the background; what it does shows on each tick (`upload_state`)."""
    if not file_path:
        return ""
    name = Path(file_path).name
    try:
        user = current_user(request)
        library.check_may_change(services, user)
        user_within_rate(services, request, "importing")
        job = library.start_upload(services, file_path, user)
    except UserError as error:
        return f'<div class="chat-notice"><b>{escape(name)}</b>: {escape(error)}</div>'
    except Exception:     # never Gradio's blank "Error": say what happened, keep the details in the log
        log.exception("import of an uploaded file failed")
        return (f'<div class="chat-notice"><b>{escape(name)}</b>: the import could not start on an unexpected '
                "error; nothing was imported. The app's log has the details.</div>")
    return upload_html(job)


def upload_html(job: library.UploadImport) -> str:
    """An upload's import as it stands: running with its counts, finished with its report, or why it stopped."""
    head = f"<p><b>{escape(job.name)}</b> ({job.lines:,} lines): "
    if job.error:
        return f'<div class="chat-notice">{head}{escape(job.error)}</p></div>'
    if not job.done:
        read = (job.counts.seen + job.counts.skipped) if job.counts else 0
        added = job.counts.added if job.counts else 0
        return (f'<div class="library-import-result">{head}importing in the background — {read:,} lines read, '
                f"{added:,} new papers so far. You can use the other tabs meanwhile.</p></div>")
    return head + "done.</p>" + import_report(job.counts)


def upload_state(request: gr.Request | None):
    """The result box on each tick: this user's latest upload while it runs and when it ends; else unchanged."""
    job = library.latest_upload(current_user(request))
    return upload_html(job) if job else gr.skip()


def fetch_view(services: Services, text, request: gr.Request | None, progress) -> str:
    try:
        user = current_user(request)
        library.check_may_change(services, user)
        user_within_rate(services, request, "importing")
        counts, notes = library.import_ids(services, text or "", _progress_reporter(progress, None))
        return import_report(counts, notes)
    except UserError as error:
        return f'<div class="chat-notice">{escape(error)}</div>'


def build(services: Services, scheduler: IngestScheduler | None) -> None:
    status = gr.Markdown(elem_id="library-status")
    with gr.Row():
        run_now = gr.Button("Run ingestion now", variant="primary", interactive=scheduler is not None)
        refresh = gr.Button("Refresh")
    notice = gr.Markdown()
    with gr.Accordion("Add papers", open=True, elem_id="library-add"):
        gr.Markdown(f"Upload a JSON-lines snapshot (the daily-listing rows or Kaggle's arXiv metadata rows; up to "
                    f"{MAX_UPLOAD_MB} MB, about {MAX_UPLOAD_MB * 500:,} abstracts, imported in the background — for a "
                    "bigger file run `python -m copilot import FILE` on the server), or paste arXiv ids or links to "
                    "fetch those papers from arXiv. Importing again is safe: known papers are skipped.")
        with gr.Row():
            snapshot = gr.File(label="Snapshot (.jsonl)", file_types=[".jsonl", ".json", ".txt"],
                               elem_id="library-upload")
            with gr.Column():
                pasted = gr.Textbox(label="arXiv ids or links", lines=3, elem_id="library-ids",
                                    placeholder="2401.01234, https://arxiv.org/abs/2402.04321 …")
                fetch = gr.Button("Fetch these papers", elem_id="library-fetch")
        import_result = gr.HTML(elem_id="library-import-result")
    history = gr.Dataframe(headers=HISTORY_COLUMNS, interactive=False, label="Ingestion history", wrap=False,
                           max_height=420, elem_id="library-history")
    timer = gr.Timer(3.0)

    def show():
        return status_markdown(services, scheduler), history_frame(services)

    def trigger(request: gr.Request):
        return trigger_view(services, scheduler, request)

    def on_upload(file_path, request: gr.Request):
        return upload_view(services, file_path, request)

    def on_tick(request: gr.Request):
        return *show(), upload_state(request)

    def on_fetch(text, request: gr.Request, progress=gr.Progress()):
        return fetch_view(services, text, request, progress)

    snapshot.upload(on_upload, snapshot, import_result, concurrency_limit=1, concurrency_id="import").then(
        show, outputs=[status, history])
    snapshot.clear(lambda: "", None, import_result)     # a new file starts with an empty result box
    fetch.click(on_fetch, pasted, import_result, concurrency_limit=1, concurrency_id="import").then(
        show, outputs=[status, history])
    gr.on([refresh.click, timer.tick], on_tick, outputs=[status, history, import_result], show_progress="hidden")
    run_now.click(trigger, outputs=notice).then(show, outputs=[status, history])
    return show, status, history
