"""What a researcher read on the screens and should not have (issue #49, items 5 and 6): stage timings and a README
pointer on Trends, raw timestamps and "(size label)" on the Library, a stale "started" under a failed run, and an
upload refused in silence while the box kept the previous upload's report. Real stores in a temporary data dir."""

from __future__ import annotations

import json
import re
import time
from datetime import date, datetime, timezone

import gradio as gr
import pytest

from copilot.services import Services
from tests.conftest import make_settings

ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


@pytest.fixture
def services(tmp_path):
    return Services(make_settings(tmp_path / "data"))


def test_trends_says_when_it_is_done_without_stage_timings_or_a_readme_pointer():
    from copilot.features import trends
    from copilot.ui.trends import status_html

    report = trends.TrendsReport(date(2026, 11, 20), date(2026, 11, 27), [], "local", in_range=40,
                                 notices=[trends.IDEAS_OFF_NOTICE], stage="done", done=True,
                                 timings={"select": 0.2, "topics": 0.8, "summaries": 5.5})
    shown = status_html(report)
    assert "data-state='done'" in shown and "No research ideas with a tiny local model" in shown
    assert "Seconds" not in shown and "0.8" not in shown and "README" not in shown, shown
    working = status_html(trends.TrendsReport(date(2026, 11, 20), date(2026, 11, 27), [], "local", stage="topics"))
    assert "data-state='working'" in working and "Working: topics" in working


def test_times_read_as_a_date_and_an_hour_not_an_iso_string():
    from copilot.ui.library import readable_time, readable_times

    now = datetime(2026, 11, 28, 9, 5, tzinfo=timezone.utc)
    assert readable_time("2026-11-28T06:00:00+00:00") == "28 Nov 2026, 06:00 UTC"
    assert readable_time("2026-11-28T06:00:00+00:00", now, ago=True) == "28 Nov 2026, 06:00 UTC (3 hours ago)"
    assert readable_time("2026-11-27T09:04:00+00:00", now, ago=True).endswith("(1 day ago)")
    assert readable_time(None) == "" and readable_time("soon") == "soon"
    assert readable_times("last snapshot 2026-11-28T06:00:00+00:00 (s1)") == "last snapshot 28 Nov 2026, 06:00 UTC (s1)"


def test_the_library_status_and_history_show_readable_times_and_the_model_in_plain_words(services, tmp_path):
    from copilot.features import library
    from copilot.ui.library import history_frame, status_markdown

    snapshot = tmp_path / "few.jsonl"
    from tests.conftest import read_rows
    from tests.helpers import PAPERS_JSONL

    snapshot.write_text("".join(json.dumps(r) + "\n" for r in read_rows(PAPERS_JSONL, 0, 3)), encoding="utf-8")
    library.import_snapshot(services, snapshot)
    shown = status_markdown(services, None)
    assert not ISO.search(shown.split("<details")[0]), shown
    assert re.search(r"started \d{1,2} [A-Z][a-z]{2} \d{4}, \d{2}:\d{2} UTC \((just now|\d+ minutes? ago)\)", shown)
    assert "the packaged local model, SmolLM2 135M" in shown, shown
    assert "size label" not in shown and "parameters (" not in shown
    frame = history_frame(services)
    assert not any(ISO.search(str(value)) for value in frame[["started", "finished"]].values.ravel())
    assert frame["started"][0].endswith(" UTC")


class _Scheduler:
    """Only what notice_state reads of the app's IngestScheduler."""
    def __init__(self, running: bool) -> None:
        self.running = running


def test_the_started_line_goes_once_its_run_has_ended():
    from copilot.ui.library import STARTED, notice_state

    assert notice_state(STARTED, _Scheduler(running=True)) is not None
    assert not isinstance(notice_state(STARTED, _Scheduler(running=True)), str)      # left as it is (a skip)
    assert notice_state(STARTED, _Scheduler(running=False)) == ""                    # the status says how it went
    assert notice_state("An ingestion is already running; this request was not started.",
                        _Scheduler(running=False)) != ""                              # other sentences stay


def _wait(job, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not job.done and time.monotonic() < deadline:
        time.sleep(0.3)
    assert job.done


@pytest.mark.parametrize("name, content", [("binary.jsonl", bytes(range(256)) * 64),
                                           ("notes.txt", b"my reading list, not a snapshot\n")])
def test_a_refused_upload_keeps_its_own_sentence_on_every_tick(services, tmp_path, name, content):
    """Issue #49: a binary .jsonl or a .txt showed its refusal for a moment, then the tick put the previous upload's
    report back in the box."""
    from copilot.features import library
    from copilot.ui.library import FOLLOW_RUNNING, upload_state, upload_view
    from tests.conftest import read_rows
    from tests.helpers import PAPERS_JSONL

    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in read_rows(PAPERS_JSONL, 0, 5)), encoding="utf-8")
    shown, following = upload_view(services, str(good), None)
    assert "good.jsonl" in shown
    _wait(library.latest_upload("local"))
    box, following = upload_state(None, following)                 # the page that started it sees it end
    assert "good.jsonl" in box and "done" in box

    bad = tmp_path / name
    bad.write_bytes(content)
    refused, following = upload_view(services, str(bad), None)
    assert name in refused and "not a JSON-lines snapshot" in refused
    for _ in range(3):                                              # ticks leave the refusal where it is
        box, following = upload_state(None, following)
        assert box is not None and not isinstance(box, str), box   # a skip, not the previous report
    # a page opened later shows nothing of a finished upload; it shows a running one (FOLLOW_RUNNING)
    assert not isinstance(upload_state(None, FOLLOW_RUNNING)[0], str)
    assert isinstance(gr.skip(), type(upload_state(None, FOLLOW_RUNNING)[0]))
