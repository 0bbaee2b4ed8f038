"""The Library tab: corpus status, adding papers (a snapshot file, pasted arXiv ids, arXiv now), ingestion history."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import gradio as gr
import pandas as pd

from copilot.errors import UserError, readable_failure
from copilot.features import library
from copilot.features.fulltext import WHY_NOT_READ
from copilot.scheduler import IngestScheduler
from copilot.services import Services
from copilot.ui.common import current_user, escape, user_within_rate
from copilot.ui.guard import MAX_UPLOAD_MB

log = logging.getLogger(__name__)

BAD_LINES_SHOWN = 20
STARTED = "Ingestion started in the background; progress shows above."
STILL_WORKS = "The papers already in the library are unchanged and every tab works on them; the next run tries again."

HISTORY_COLUMNS = ["id", "source", "status", "started", "finished", "seen", "added", "updated", "unchanged",
                   "skipped", "error"]


_ISO_TIME = re.compile(r"\b(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?(?:\+00:00|Z)")
_SIZE_WORD = re.compile(r"\d+(?:\.\d+)?[MB]", re.I)
WHAT_IT_WRITES = {"tiny": "it writes no text of its own: answers and drafts quote the papers",
                  "capable": "it writes the answers, checked against the papers"}


def readable_time(iso: str | None, now: datetime | None = None, ago: bool = False) -> str:
    """'2026-11-28T06:00:00+00:00' → '28 Nov 2026, 06:00 UTC' (with ago: '… (3 hours ago)'); '' for none."""
    if not iso:
        return ""
    try:
        when = datetime.fromisoformat(str(iso)).astimezone(timezone.utc)
    except ValueError:
        return str(iso)
    text = f"{when.day} {when:%b %Y, %H:%M} UTC"
    if not ago:
        return text
    seconds = ((now or datetime.now(timezone.utc)) - when).total_seconds()
    if seconds < 0:
        return text
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{text} ({count} {unit}{'s' if count != 1 else ''} ago)"
    return f"{text} (just now)"


def readable_times(text: str) -> str:
    """Every ISO time in a sentence (the backup line's) in the readable form."""
    return _ISO_TIME.sub(lambda m: readable_time(m.group(0)), text)


def model_name(file: str) -> str:
    """'SmolLM2-135M-Instruct.Q4_1.gguf' → 'SmolLM2 135M': the name up to its size, without the file's details."""
    parts = Path(file).name.split(".")[0].split("-")
    sized = next((n for n, part in enumerate(parts) if _SIZE_WORD.fullmatch(part)), None)
    return " ".join(parts[:sized + 1] if sized is not None else parts)


def model_line(model: dict) -> str:
    """The language model in words (which one, its size and llama.cpp build, or its endpoint), why it is not the one
    asked for, what it writes on this install, and its measured speed."""
    profile = model.get("profile") or {}
    if "endpoint" in model:
        line = f"**Language model:** {escape(model['model'])} at {escape(model['endpoint'])}"
        line += f" ({escape(profile['reason'])})" if profile else ""
    elif "file" not in model:
        line = f"**Language model:** {escape(str(model['requested']))}, {escape(model['note'])}"
    else:
        whose = "the packaged local model" if model["source"] == "packaged" else "the local model"
        line = (f"**Language model:** {whose}, {escape(model_name(model['file']))} ({escape(model['size'])} file "
                f"{escape(Path(model['file']).name)}, on {escape(model['llama_cpp'].split(' (')[0])})")
        line += f" · **{escape(model['note'])}**" if model["note"] else ""
    if profile.get("profile") in WHAT_IT_WRITES:
        line += f" · {WHAT_IT_WRITES[profile['profile']]}"
    speed = model.get("measured_speed")
    line += (f" · measured over its last {speed['calls']} calls: {speed['output_tokens_per_s']} tokens written/s, "
             f"median call {speed['median_call_s']} s" if speed else " · speed: not measured yet (no call logged)")
    return line


def full_text_line(counts: dict[str, int]) -> str:
    """How many papers the library holds the full text of, and why others have none."""
    have = counts.get("ok", 0)
    others = [f"{n} {WHY_NOT_READ.get(status, status.replace('_', ' '))}" for status, n in sorted(counts.items())
              if status != "ok" and n]
    tail = f" · not read: {escape(', '.join(others))}" if others else ""
    return (f"**Full text:** <span id='fulltext-count'>{have}</span> paper{'' if have == 1 else 's'} read "
            f"(quoted with their sections){tail}")


SENTENCE_TROUBLE = {"corrupt": "were lost (their file was damaged; it was set aside and started anew)",
                    "locked": "could not be used (another process held their file locked)",
                    "unwritable": "could not be saved (their file or its folder is read-only)",
                    "disk full": "could not be saved (the disk is full)",
                    "disk error": "could not be read or saved (the disk reported an error)"}


def sentence_vector_line(problem: dict) -> str:
    """What a failed sentence-vector file means for answers, in a researcher's words (features.library)."""
    what = SENTENCE_TROUBLE.get(problem["kind"], "could not be used (their file failed)")
    return (f"**Answers are slower for now:** the sentence vectors kept on disk {what} on "
            f"{readable_time(problem['at'])}, so each answer computes the ones it needs as it goes. They are refilled "
            "at the next start or ingestion, or now with `python -m copilot sentences`.")


def status_markdown(services: Services, scheduler: IngestScheduler | None) -> str:
    info = library.status(services, scheduler.next_run() if scheduler else None)
    last = info["last_ingest"]
    if last:
        last_line = (f"{escape(last['status'])} · {escape(last['source'])} · started "
                     f"{readable_time(last['started'], ago=True)} · "
                     f"added {last['added']}, updated {last['updated']}, unchanged {last['unchanged']}, "
                     f"skipped {last['skipped']}")
        if last["status"] == "failed":
            last_line += f" · {escape(readable_failure(last['error'] or ''))}. {STILL_WORKS}"
    else:
        last_line = "never"
    running = info["ingest_running"] or (scheduler is not None and scheduler.running)
    lines = [
        f"**Corpus:** <span id='corpus-count'>{info['papers']:,}</span> papers · {info['thoughts']:,} thoughts",
        f"**Last ingestion:** {last_line}",
        f"**Next ingestion:** {readable_time(info['next_ingest']) or 'not scheduled'} (categories "
        f"{escape(', '.join(info['categories']))})",
        model_line(info["model"]),          # the language model in words; its file name is said there once
        f"**Embedding model:** {escape(info['embedder'])}",
        full_text_line(info["full_text"]),
    ]
    if info["sentence_vectors"]:
        lines.append(sentence_vector_line(info["sentence_vectors"]))
    backup = library.backup_line(services)
    if backup:
        lines.append(f"**Backup to the Hub:** {escape(readable_times(backup))}")
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
        run["started"], run["finished"] = readable_time(run["started"]), readable_time(run["finished"])
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
        return STARTED
    return "An ingestion is already running; this request was not started."


def notice_state(notice: str | None, scheduler: IngestScheduler | None):
    """The line under the buttons on each tick: "started" stays only while that run is running; once it ended, the
    status above says how it went (a failed run's sentence must not sit above a stale "started")."""
    if notice == STARTED and not (scheduler is not None and scheduler.running):
        return ""
    return gr.skip()


FOLLOW_RUNNING = 0     # a page just opened: the result box follows this user's upload if one is running
FOLLOW_NONE = -1       # the box holds something else (a refused file, fetched ids): the tick leaves it alone


def upload_view(services: Services, file_path, request: gr.Request | None) -> tuple[str, int]:
    """Start importing an uploaded snapshot in the background → (the result box, the upload the box now follows).
    What the import does shows on each tick (`upload_state`); a refused file's sentence stays until the next action."""
    if not file_path:
        return "", FOLLOW_NONE
    name = Path(file_path).name
    try:
        user = current_user(request)
        library.check_may_change(services, user)
        user_within_rate(services, request, "importing")
        job = library.start_upload(services, file_path, user)
    except UserError as error:
        return f'<div class="chat-notice"><b>{escape(name)}</b>: {escape(error)}</div>', FOLLOW_NONE
    except Exception:     # never Gradio's blank "Error": say what happened, keep the details in the log
        log.exception("import of an uploaded file failed")
        return (f'<div class="chat-notice"><b>{escape(name)}</b>: the import could not start on an unexpected '
                "error; nothing was imported. The app's log has the details.</div>", FOLLOW_NONE)
    return upload_html(job), job.number


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


def upload_state(request: gr.Request | None, following: int | None) -> tuple:
    """(the result box, the upload it follows) on each tick: the upload this page started (or, on a page just
    opened, one still running), while it runs and when it ends; anything else in the box stays as it is."""
    job = library.latest_upload(current_user(request))
    if job is None or not (job.number == following or (following == FOLLOW_RUNNING and not job.done)):
        return gr.skip(), gr.skip()
    return upload_html(job), job.number


def fetch_view(services: Services, text, request: gr.Request | None, progress) -> str:
    try:
        user = current_user(request)
        library.check_may_change(services, user)
        user_within_rate(services, request, "importing")
        counts, notes = library.import_ids(services, text or "", _progress_reporter(progress, None))
        return import_report(counts, notes)
    except UserError as error:
        return f'<div class="chat-notice">{escape(error)}</div>'


def build(services: Services, scheduler: IngestScheduler | None
          ) -> tuple[Callable[[], tuple[str, pd.DataFrame]], gr.Markdown, gr.Dataframe]:
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
    following = gr.State(FOLLOW_RUNNING)
    history = gr.Dataframe(headers=HISTORY_COLUMNS, interactive=False, label="Ingestion history", wrap=False,
                           max_height=420, elem_id="library-history")
    timer = gr.Timer(3.0)

    def show() -> tuple[str, pd.DataFrame]:
        return status_markdown(services, scheduler), history_frame(services)

    def trigger(request: gr.Request):
        return trigger_view(services, scheduler, request)

    def on_upload(file_path, request: gr.Request):
        return upload_view(services, file_path, request)

    def on_tick(notice_text, follow, request: gr.Request):
        return *show(), notice_state(notice_text, scheduler), *upload_state(request, follow)

    def on_fetch(text, request: gr.Request, progress=gr.Progress()):
        return fetch_view(services, text, request, progress), FOLLOW_NONE

    snapshot.upload(on_upload, snapshot, [import_result, following], concurrency_limit=1,
                    concurrency_id="import").then(show, outputs=[status, history])
    snapshot.clear(lambda: ("", FOLLOW_NONE), None, [import_result, following])   # a new file: an empty box
    fetch.click(on_fetch, pasted, [import_result, following], concurrency_limit=1, concurrency_id="import").then(
        show, outputs=[status, history])
    gr.on([refresh.click, timer.tick], on_tick, [notice, following],
          [status, history, notice, import_result, following], show_progress="hidden")
    run_now.click(trigger, outputs=notice).then(show, outputs=[status, history])
    return show, status, history
