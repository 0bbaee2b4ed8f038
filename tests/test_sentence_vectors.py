"""Sentence vectors kept on disk (issue #41 item 7): an answer looks up its candidate sentences instead of embedding
them; the app fills them in the background at the lowest priority; they never hold a question and never leave in a
backup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from copilot.features import answers, sentence_prefill
from copilot.features.chat import Chat
from copilot.features.library import ingestor
from copilot.methods.evidence import candidate_spans
from copilot.services import Services
from copilot.store.sentence_vectors import FILE_NAME, SentenceVectors
from tests.conftest import ROOT, import_papers, make_settings, sample_papers


def test_the_store_reads_back_what_it_kept_and_misses_other_models_and_changed_papers(tmp_path):
    store = SentenceVectors(tmp_path / FILE_NAME)
    vectors = np.random.default_rng(3).standard_normal((3, 384)).astype(np.float32)
    texts = ["We propose a sparse cache.", "It saves 80% of memory.", "Results hold on four tasks."]
    store.put("model-a", texts, vectors)
    again = SentenceVectors(tmp_path / FILE_NAME).get("model-a", texts + ["Never stored."])
    assert set(again) == set(texts) and all(np.array_equal(again[t], v) for t, v in zip(texts, vectors))
    assert store.get("model-b", texts) == {} and store.count("model-a") == 3
    store.mark_done("model-a", [("2501.00001", "abstract one"), ("2501.00002", "abstract two")])
    assert store.papers_done("model-a", [("2501.00001", "abstract one"), ("2501.00002", "changed abstract"),
                                         ("2501.00003", "x")]) == {"2501.00001"}


def test_an_answer_reads_kept_vectors_without_embedding_and_keeps_what_it_embedded(tmp_path, monkeypatch):
    """The first process embeds a table's sentences and keeps them; a second process (a restart) builds the same
    table reading them, embedding only the question."""
    settings = make_settings(tmp_path / "data")
    first = Services(settings)
    import_papers(first, 40)
    question = "Which methods make retrieval-augmented generation more efficient?"
    vector = first.embedder.embed_one(question)
    ranking = answers.question_ranking(first, question, vector)
    items = Chat(first)._retrieve(question, vector, "u", ranking).raw

    def table_of(services):
        return "".join(answers.stream_reply(services, question, items,
                                            answers.answer_tables(services, question, [items], ranking)[0]))
    table = table_of(first)
    assert first.sentence_vectors.count(first.embedder.name) > 0

    second = Services(settings)
    embedded: list[str] = []
    real = second.embedder.embed
    monkeypatch.setattr(second.embedder, "embed", lambda texts: embedded.extend(texts) or real(texts))
    assert table_of(second) == table
    assert embedded == [question]                  # the question, never kept on disk
    assert second.sentence_vectors.get(second.embedder.name, [question]) == {}


def test_fill_stores_every_papers_quotable_sentences_once_and_again_after_a_change(services):
    papers = import_papers(services, 30)
    counts = sentence_prefill.fill(services)
    spans = {span.text for p in papers for span, _, _ in candidate_spans(p.abstract)}
    assert (counts.papers, counts.already, counts.filled) == (30, 0, 30)
    assert services.sentence_vectors.count(services.embedder.name) == len(spans)
    assert len(services.sentence_vectors.get(services.embedder.name, list(spans))) == len(spans)
    assert sentence_prefill.fill(services).filled == 0            # nothing left to do

    changed = papers[0]
    changed.abstract = "We propose a new sentence cache. It cuts answer time by half on two cores."
    changed.version += 1
    ingestor(services).run("test", [changed])
    again = sentence_prefill.fill(services)
    assert (again.already, again.filled) == (29, 1)
    assert services.sentence_vectors.get(services.embedder.name, ["We propose a new sentence cache."])


def test_an_ingestion_that_writes_papers_calls_the_apps_hook_and_one_that_changes_nothing_does_not(services):
    calls: list[str] = []
    services.after_papers_written = lambda: calls.append("written")
    papers = sample_papers(5)
    ingestor(services).run("test", papers)
    ingestor(services).run("test", papers)       # unchanged: nothing to embed
    assert calls == ["written"]


def _cli(data_dir, *args):
    env = {**os.environ, "COPILOT_DATA_DIR": str(data_dir), "COPILOT_LLM": "local"}
    return subprocess.run([sys.executable, "-m", "copilot", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_sentences_command_fills_the_library_and_a_second_one_waits_its_turn(settings, services):
    import fcntl

    import_papers(services, 12)
    with open(settings.data_dir / sentence_prefill.LOCK_FILE, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        busy = _cli(settings.data_dir, "sentences", "--json")
        quiet = _cli(settings.data_dir, "sentences", "--background")
    assert busy.returncode == 2 and "another process" in busy.stderr and not busy.stdout
    assert quiet.returncode == 0 and not quiet.stdout            # the app's filler leaves quietly
    done = _cli(settings.data_dir, "sentences", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["filled"] == 12


@pytest.mark.parametrize("enabled", [True, False])
def test_the_app_starts_the_filler_at_the_lowest_priority_unless_turned_off(tmp_path, enabled):
    services = Services(make_settings(tmp_path / "data", sentence_prefill=enabled))
    import_papers(services, 6)
    process = sentence_prefill.start_in_background(services)
    if not enabled:
        assert process is None
        return
    assert process is not None
    try:
        nice = None
        for _ in range(50):      # read the child's priority while it runs (field 19 of /proc/PID/stat)
            try:
                nice = int(open(f"/proc/{process.pid}/stat").read().rsplit(")", 1)[1].split()[16])
            except (FileNotFoundError, ProcessLookupError):
                break
            if nice == 19:
                break
            time.sleep(0.1)
        assert process.wait(timeout=240) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert nice == 19
    assert sentence_prefill.fill(services).filled == 0


def test_a_backup_leaves_the_sentence_vectors_behind(services, tmp_path):
    import tarfile

    from copilot.store.backup import write_snapshot
    from copilot.store.vectors import PAPERS, THOUGHTS

    import_papers(services, 8)
    sentence_prefill.fill(services)
    assert (services.settings.data_dir / FILE_NAME).stat().st_size > 0
    archive = write_snapshot(services.settings.data_dir, tmp_path / "snapshot.tar.gz",
                             {PAPERS: services.store.papers, THOUGHTS: services.store.thoughts})
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["copilot.db", "vectors.sqlite3"]


def _state(pid: int) -> str | None:
    """A process's state letter (R, S, Z, ...), None once it is gone (reaped)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def test_the_apps_filler_ends_with_the_app(tmp_path):
    """The background filler stops between batches once the process that started it is gone (a test's app, a
    restarted Space), instead of filling a data dir nobody serves. It must end (not hang) and leave papers
    unfilled: a filler that ignored its parent filled all 200 papers (issue #47 item 9)."""
    settings = make_settings(tmp_path / "data")
    import_papers(Services(settings), 200)
    env = {**os.environ, "COPILOT_DATA_DIR": str(settings.data_dir), "COPILOT_LLM": "local"}
    starter = subprocess.Popen(   # a parent that starts the filler and dies at once
        [sys.executable, "-c", "import os, subprocess, sys; p = subprocess.Popen([sys.executable, '-m', 'copilot', "
         "'sentences', '--background', '--parent', str(os.getpid())]); print(p.pid, flush=True)"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    child = int(starter.stdout.readline())
    assert starter.wait(timeout=30) == 0
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and _state(child) not in (None, "Z"):
        time.sleep(0.5)
    assert _state(child) in (None, "Z"), "the orphaned filler did not end"
    left = sentence_prefill.fill(Services(settings))
    assert left.already < 200 and left.filled == 200 - left.already       # it stopped early, and nothing failed
    assert left.filled >= 200 - 2 * sentence_prefill.PAPERS_PER_BATCH     # at the first checks, not near the end


def test_a_filler_started_while_another_runs_gets_its_papers_filled_by_that_one(services, monkeypatch):
    """An ingestion's filler finds the lock held and exits; the running one, told by the flag, looks again before
    it ends and fills the papers ingested while it ran (they were left unfilled until the next app start)."""
    import_papers(services, 20)
    real_fill = sentence_prefill.fill
    late: list = []

    def fill_then_ingest(*args, **kwargs):
        counts = real_fill(*args, **kwargs)
        if not late:      # after the running filler's scan: an ingestion and its own filler
            late.append(import_papers(services, 6, start=20))
            late.append(_cli(services.settings.data_dir, "sentences", "--background"))
        return counts

    monkeypatch.setattr(sentence_prefill, "fill", fill_then_ingest)
    total = sentence_prefill.run(services)
    _, second = late
    assert second.returncode == 0 and not second.stdout, second.stderr     # it found the lock held
    assert total is not None and (total.papers, total.filled) == (26, 26)
    assert real_fill(services).filled == 0
    assert not (services.settings.data_dir / sentence_prefill.DUE_FILE).exists()


def test_the_apps_fillers_are_reaped_when_they_end(services):
    """The app never waits for its filler; a process nobody waits for stays a zombie until the app ends."""
    import_papers(services, 4)
    process = sentence_prefill.start_in_background(services)
    assert process is not None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and _state(process.pid) is not None:
        time.sleep(0.2)
    state = _state(process.pid)
    if state is None:
        assert process.returncode == 0          # reaped by the app, which kept its status
    else:
        process.kill()
        process.wait()
    assert state is None, f"the ended filler is left in state {state}"
