"""Derived data fails soft (issue #47 item 6): a corrupt, locked or unwritable `sentence-vectors.sqlite3`, or a full
disk, never fails an answer. The vectors are then computed on the fly with the real embedder, the failure is logged
once and counted in `status`, and a corrupt file is moved aside and made anew. Each case is a real SQLite file:
bytes overwritten, a write lock held by another connection, a read-only directory, a full file system."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from copilot.features import answers
from copilot.features.chat import Chat
from copilot.features.evidence_search import table_paper_hits
from copilot.features.library import failure_counts
from copilot.services import Services
from copilot.store.sentence_vectors import FAILURE_KIND, FILE_NAME, SentenceVectors
from tests.conftest import import_papers, make_settings

QUESTION = "Which methods make retrieval-augmented generation more efficient?"
SENTENCES = ["We propose a sparse cache for key-value states.", "It saves 80% of memory on long inputs.",
             "Results hold on four question answering tasks.", "Graphs link papers to their citations."]


def _items(services: Services):
    """The papers-only pool Chat retrieves for QUESTION."""
    vector = services.embedder.embed_one(QUESTION)
    return Chat(services)._retrieve(QUESTION, vector, "u", answers.question_ranking(services, QUESTION, vector)).raw


def _table(services: Services, items) -> str:
    return answers.table_text(answers.answer_tables(services, QUESTION, [items])[0], items)


def _warnings(caplog, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and r.name.startswith("copilot.store.sentence_vectors") and words in
            r.getMessage()]


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A library whose first answer kept its sentences' vectors; (settings, retrieved items, that answer's table)."""
    settings = make_settings(tmp_path_factory.mktemp("derived") / "data")
    first = Services(settings)
    import_papers(first, 40)
    items = _items(first)
    table = _table(first, items)
    assert "Evidence from" in table and first.sentence_vectors.count(first.embedder.name) > 0
    return settings, items, table


def _checkpointed(path: Path) -> None:
    """Everything in the main file, so overwriting its pages damages what was kept."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_corrupt_file_is_answered_around_recorded_once_and_made_anew(kept, caplog):
    settings, items, table = kept
    path = settings.data_dir / FILE_NAME
    _checkpointed(path)
    size = path.stat().st_size
    with open(path, "r+b") as handle:           # every page after the first two: the tables' rows
        handle.seek(8192)
        handle.write(os.urandom(size - 8192))
    restarted = Services(settings)
    caplog.set_level(logging.WARNING)
    assert _table(restarted, items) == table                 # the vectors computed on the fly
    assert _table(restarted, items) == table
    assert len(_warnings(caplog, "corrupt (answers embed on the fly)")) == 1
    assert failure_counts(restarted)[FAILURE_KIND]["count"] == 1
    assert "corrupt" in failure_counts(restarted)[FAILURE_KIND]["last_reason"]
    assert (settings.data_dir / f"{FILE_NAME}.corrupt").stat().st_size == size        # moved aside, kept
    assert SentenceVectors(path).count(restarted.embedder.name) > 0                  # made anew, filled by use


def test_a_file_that_is_not_a_database_at_all_is_made_anew(tmp_path, caplog):
    services = Services(make_settings(tmp_path / "data"))
    path = services.settings.data_dir / FILE_NAME
    path.write_bytes(b"not a database " * 1000)
    caplog.set_level(logging.WARNING)
    vectors = services.embed_sentences(SENTENCES)
    assert np.allclose(vectors, services.embedder.embed(SENTENCES), atol=1e-5)
    assert len(SentenceVectors(path).get(services.embedder.name, SENTENCES)) == len(SENTENCES)
    assert len(_warnings(caplog, "corrupt")) == 1 and (path.parent / f"{FILE_NAME}.corrupt").exists()


def test_a_held_write_lock_costs_an_answer_no_wait_and_is_recorded_once(tmp_path, caplog):
    services = Services(make_settings(tmp_path / "data"))
    import_papers(services, 40)
    items = _items(services)
    path = services.settings.data_dir / FILE_NAME
    SentenceVectors(path).count("any")          # the file exists; nothing is kept in it yet
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")           # another writer, in the middle of a long write
    caplog.set_level(logging.WARNING)
    try:
        started = time.monotonic()
        table = _table(services, items)
        _table(services, items)
        waited = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "Evidence from" in table
    assert waited < 20, waited                   # the old store waited 30 s for the lock, then failed the answer
    assert len(_warnings(caplog, "locked")) == 1
    assert failure_counts(services)[FAILURE_KIND]["count"] == 1
    assert table == _table(Services(services.settings), items)     # the same table once the lock is gone


@contextmanager
def _mounted(directory: Path, size: str):
    """A file system of its own at `directory` (a tmpfs of `size`), so a test can fill it or make it read-only."""
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); the case needs a file system to fill")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


@contextmanager
def _read_only(directory: Path):
    """`directory` with a kept store in it, read-only: by its mode, or (as root, whom modes do not stop) by a
    read-only mount."""
    if os.geteuid() != 0:
        directory.mkdir(parents=True)
        yield directory
        return
    with _mounted(directory, "16m"):
        yield directory


def _keep_some(path: Path, model: str, embed) -> None:
    store = SentenceVectors(path)
    assert store.put(model, SENTENCES[:2], embed(SENTENCES[:2]))
    store.close()


def test_a_read_only_directory_is_answered_around_and_recorded_once(tmp_path, caplog):
    from copilot.embed import Embedder

    embedder = Embedder()
    records: list[tuple[str, str]] = []
    with _read_only(tmp_path / "ro") as directory:
        _keep_some(directory / FILE_NAME, embedder.name, embedder.embed)
        if os.geteuid() == 0:
            subprocess.run(["mount", "-o", "remount,ro", str(directory)], check=True)
        else:
            for entry in [*directory.iterdir(), directory]:
                entry.chmod(0o555)
        store = SentenceVectors(directory / FILE_NAME, on_failure=lambda *failure: records.append(failure))
        caplog.set_level(logging.WARNING)
        first = embedder.embed_cached(SENTENCES, stored=store)
        again = Embedder().embed_cached(SENTENCES[::-1], stored=store)      # a new process's memory: empty
        if os.geteuid() != 0:
            directory.chmod(0o755)
    expected = embedder.embed(SENTENCES)
    assert np.allclose(first, expected, atol=1e-5) and np.allclose(again, expected[::-1], atol=1e-5)
    assert len(records) == 1 and records[0][0] == "unwritable", records
    assert len(_warnings(caplog, "unwritable")) == 1


def test_a_full_disk_is_answered_around_and_recorded_once(tmp_path, caplog):
    from copilot.embed import Embedder

    embedder = Embedder()                 # in bf16 on avx512_bf16 CPUs too: a vector does not depend on its batch
    records: list[tuple[str, str]] = []
    texts = [f"Sentence {n} of an abstract about retrieval, caches and graphs." for n in range(400)]
    with _mounted(tmp_path / "small", "1m") as directory:
        store = SentenceVectors(directory / FILE_NAME, on_failure=lambda *failure: records.append(failure))
        assert store.put(embedder.name, SENTENCES[:2], embedder.embed(SENTENCES[:2]))      # its WAL is open
        ballast = os.open(directory / "ballast", os.O_WRONLY | os.O_CREAT)       # the rest of the disk
        try:
            while True:
                os.write(ballast, b"\0" * 4096)
        except OSError as full:
            assert full.errno == 28
        finally:
            os.close(ballast)
        caplog.set_level(logging.WARNING)
        first = embedder.embed_cached(texts, stored=store)              # 400 vectors: 600 KB that do not fit
        again = Embedder().embed_cached(texts[:50], stored=store)
        assert store.get(embedder.name, SENTENCES[:2])                  # what was kept still reads
    expected = embedder.embed(texts)
    assert np.allclose(first, expected, atol=1e-5) and np.allclose(again, expected[:50], atol=1e-5)
    assert [kind for kind, _ in records] == ["disk full"], records
    assert len(_warnings(caplog, "disk full")) == 1


def test_a_failed_paper_search_is_logged_not_hidden(tmp_path, caplog):
    """The table's paper search raising a UserError (here: the library is empty) gave an empty table silently."""
    services = Services(make_settings(tmp_path / "data"))
    caplog.set_level(logging.WARNING)
    assert table_paper_hits(services, QUESTION, np.zeros(384, dtype=np.float32), 12) == []
    said = [r.getMessage() for r in caplog.records if r.name == "copilot.features.evidence_search"]
    assert len(said) == 1 and "the library is empty" in said[0]
