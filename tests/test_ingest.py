"""Snapshot import through the real ingestion: both schemas, idempotence, versions, bad lines, restartability."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from copilot.features.library import import_snapshot, ingest_history
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row
from tests.conftest import KAGGLE_JSONL, PAPERS_JSONL, ROOT, make_settings, read_rows
from tests.helpers import run_cli, subprocess_env


def store_dump(services: Services) -> dict[str, tuple[str, dict]]:
    """Every stored paper's document and metadata, without the time it was stored (two runs differ in that)."""
    found = services.store.papers.get(include=["documents", "metadatas"])
    return {pid: (doc, {k: v for k, v in meta.items() if k != "ingested"})
            for pid, doc, meta in zip(found["ids"], found["documents"], found["metadatas"])}


def write_jsonl(path: Path, lines: list[str | dict]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_import_a_few_hundred_then_reimport_is_a_no_op(services):
    counts = import_snapshot(services, PAPERS_JSONL, limit=200)
    assert (counts.seen, counts.added, counts.updated, counts.skipped) == (200, 200, 0, 0)
    assert services.store.count("paper") == 200
    rows = read_rows(PAPERS_JSONL, 0, 200)
    first = rows[0]
    [stored] = services.store.get_papers([first["id"]])
    assert stored.title == " ".join(first["title"].split())
    assert stored.authors == first["authors"] and stored.categories == first["categories"]
    assert stored.published == date.fromisoformat(first["listing_date"])
    assert stored.primary_category == first["categories"][0]
    before = store_dump(services)
    assert set(before) == {r["id"] for r in rows}

    again = import_snapshot(services, PAPERS_JSONL, limit=200)
    assert (again.seen, again.added, again.updated, again.unchanged) == (200, 0, 0, 200)
    assert store_dump(services) == before
    assert [r["status"] for r in ingest_history(services)] == ["ok", "ok"]
    assert ingest_history(services)[0]["unchanged"] == 200

    # the stored vectors are the documents' embeddings: a paper is its own nearest neighbour
    vector = services.embedder.embed_one(stored.document)
    [hit] = services.store.search("paper", vector, 1)
    assert hit.id == first["id"] and hit.score > 0.99


def test_kaggle_schema_sample(services):
    counts = import_snapshot(services, KAGGLE_JSONL)
    assert (counts.seen, counts.added, counts.skipped) == (200, 200, 0)
    [paper] = services.store.get_papers(["0704.0001"])
    assert paper.title.startswith("Calculation of prompt diphoton production cross sections")
    assert paper.authors[:2] == ["C. Balázs", "E. L. Berger"]
    assert paper.categories == ["hep-ph"]
    assert paper.published == date(2007, 4, 2) and paper.version == 2
    assert import_snapshot(services, KAGGLE_JSONL).unchanged == 200


def test_newer_version_replaces_older_and_older_does_not(services, tmp_path):
    row = read_rows(PAPERS_JSONL, 0, 1)[0]
    v2 = dict(row, id=row["id"] + "v2", summary=row["summary"] + " We add a new experiment.",
              listing_date="2025-04-01")
    import_snapshot(services, write_jsonl(tmp_path / "v1.jsonl", [row]))
    counts = import_snapshot(services, write_jsonl(tmp_path / "v2.jsonl", [v2]))
    assert (counts.added, counts.updated) == (0, 1)
    [paper] = services.store.get_papers([row["id"]])
    assert paper.version == 2 and paper.abstract.endswith("We add a new experiment.")
    assert services.store.count("paper") == 1

    older = import_snapshot(services, tmp_path / "v1.jsonl")   # re-importing the old file keeps v2
    assert (older.updated, older.unchanged) == (0, 1)
    assert services.store.get_papers([row["id"]])[0].version == 2
    # both versions in one file: the newer wins whatever the order
    both = import_snapshot(services, write_jsonl(tmp_path / "both.jsonl", [v2, row]))
    assert both.updated == 0 and services.store.get_papers([row["id"]])[0].version == 2


def test_malformed_lines_are_reported_by_number_and_skipped(services, tmp_path):
    good = read_rows(PAPERS_JSONL, 0, 3)
    path = write_jsonl(tmp_path / "mixed.jsonl", [
        good[0], '{"id": "2501.00001", "title": "cut off', good[1], {"id": "not-an-id", "title": "x", "summary": "y"},
        "", good[2], dict(good[0], id="2501.99999", summary="")])
    counts = import_snapshot(services, path)
    assert counts.added == 3 and counts.skipped == 3
    assert [(b.line_no, b.reason.split(" (")[0]) for b in counts.bad_lines] == [
        (2, "not JSON"), (4, "no valid arXiv id"), (7, "missing title or abstract")]
    assert ingest_history(services)[0]["skipped"] == 3


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(data_dir, COPILOT_LLM="local", COPILOT_SCHEDULER="false", **extra)


def test_cli_import_reports_bad_lines(tmp_path):
    good = read_rows(PAPERS_JSONL, 0, 2)
    path = write_jsonl(tmp_path / "mixed.jsonl", [good[0], "{oops", good[1]])
    done = run_cli(["import", str(path), "--json"], cli_env(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # exactly one JSON object on stdout
    assert (result["added"], result["skipped"]) == (2, 1)
    assert result["bad_lines"] == [{"line": 2, "reason": result["bad_lines"][0]["reason"]}]
    assert "line 2: skipped (not JSON" in done.stderr


def test_missing_file_is_a_clear_cli_error(tmp_path):
    done = run_cli(["import", str(tmp_path / "nope.jsonl")], cli_env(tmp_path / "data"))
    assert done.returncode == 2 and "no such file" in done.stderr


LIMIT = 128


def test_killed_import_resumes_to_the_same_store_as_a_clean_run(tmp_path):
    """SIGKILL `python -m copilot import` after a few batches, run it again, compare with one clean run."""
    killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
    # a resumed import batches the papers left differently from a clean run: a paper's vector must not depend on its
    # batch (in bf16 on avx512_bf16 CPUs it did, issue #58 item 10)
    env = cli_env(killed_dir, COPILOT_EMBED_BATCH_SIZE="16")
    args = ["import", str(PAPERS_JSONL), "--limit", str(LIMIT), "--json"]
    proc = subprocess.Popen([sys.executable, "-m", "copilot", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        seen = 0
        while time.monotonic() < deadline and proc.poll() is None:
            seen = _running_seen(killed_dir / "copilot.db")
            if seen >= 48:  # three batches are in the store, more are coming
                break
            time.sleep(0.02)
        if proc.poll() is not None:
            pytest.fail(f"the import finished (or died, rc={proc.returncode}) before it could be killed")
        assert seen >= 48, "the import made no progress in time"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert seen < LIMIT

    resumed = run_cli(args, env)
    assert resumed.returncode == 0, resumed.stderr
    counts = json.loads(resumed.stdout)
    assert counts["added"] + counts["unchanged"] == LIMIT and counts["unchanged"] >= 48
    fresh = Services(make_settings(clean_dir, embed_batch_size=16))   # one clean run, here
    assert import_snapshot(fresh, PAPERS_JSONL, limit=LIMIT).added == LIMIT

    killed = Services(make_settings(killed_dir))
    assert killed.store.count("paper") == fresh.store.count("paper") == LIMIT
    assert store_dump(killed) == store_dump(fresh)
    ids = sorted(store_dump(fresh))
    a, b = killed.store.paper_embeddings(ids), fresh.store.paper_embeddings(ids)
    assert all(np.allclose(a[i], b[i], atol=1e-5) for i in ids)
    # the vector index answers the same in both (every item is searchable after the restart)
    query = fresh.embedder.embed_one("retrieval-augmented generation with large language models")
    assert [e.id for e in killed.store.search("paper", query, 10)] == \
        [e.id for e in fresh.store.search("paper", query, 10)]
    runs = ingest_history(killed)
    assert [r["status"] for r in runs] == ["ok", "interrupted"]
    assert paper_from_row(read_rows(PAPERS_JSONL, LIMIT - 1, 1)[0]).id in ids


def _running_seen(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    try:
        with sqlite3.connect(db_path, timeout=1) as conn:
            row = conn.execute("SELECT seen FROM ingest_runs WHERE status='running' ORDER BY id DESC").fetchone()
        return int(row[0]) if row else 0
    except sqlite3.Error:
        return 0
