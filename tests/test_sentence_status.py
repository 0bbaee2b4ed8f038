"""The Library's status says when the sentence-vector file failed (issue #47 item 6), in a researcher's words, and
says nothing when it is fine: a damaged file (made anew by the answer that found it) and a file that cannot be
written (the filler, another process, stops on it) are each shown until a complete fill mends them. Real SQLite
files, the real embedder, the product's fill."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pytest

from copilot.features import library
from copilot.features.sentence_prefill import fill
from copilot.services import Services
from copilot.store.sentence_vectors import FILE_NAME
from copilot.ui.library import status_markdown
from tests.conftest import import_papers

SENTENCES = ["We propose a sparse cache for key-value states.", "It saves 80% of memory on long inputs."]


@pytest.fixture
def services(settings):
    services = Services(settings)
    import_papers(services, 12)
    return services


def shown(services: Services) -> list[str]:
    """The Library status's lines about sentence vectors."""
    return [line for line in status_markdown(services, None).split("\n\n") if "sentence vectors" in line.lower()]


def test_a_library_whose_sentence_vectors_are_fine_says_nothing_of_them(services):
    assert library.status(services)["sentence_vectors"] is None and shown(services) == []
    assert fill(services).failed is None
    assert library.status(services)["sentence_vectors"] is None and shown(services) == []


def test_a_damaged_file_is_shown_until_a_complete_fill_mends_it(services):
    assert fill(services).failed is None
    path = services.settings.data_dir / FILE_NAME
    with sqlite3.connect(path) as conn:        # everything in the main file (no page of it left in the WAL) …
        assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    path.write_bytes(b"not a database " * 1000)     # … which is then overwritten
    app = Services(services.settings)                          # the app, started on the damaged file
    vectors = app.embed_sentences(SENTENCES)                   # an answer: computed on the fly, the file made anew
    assert np.allclose(vectors, app.embedder.embed(SENTENCES), atol=1e-5)
    problem = library.status(app)["sentence_vectors"]
    assert problem["kind"] == "corrupt" and problem["at"], problem
    [line] = shown(app)
    assert line.startswith("**Answers are slower for now:** the sentence vectors kept on disk were lost (their file "
                           "was damaged; it was set aside and started anew) on "), line
    assert "python -m copilot sentences" in line
    counts = fill(Services(services.settings))                 # the filler: another process's Services
    assert counts.failed is None and counts.filled == counts.papers == 12
    assert library.status(app)["sentence_vectors"] is None and shown(app) == []


def test_a_file_that_cannot_be_written_is_shown_while_it_cannot(services):
    path = services.settings.data_dir / FILE_NAME
    path.mkdir()                                               # nothing can open or make the file there
    counts = fill(Services(services.settings))                 # the filler stops on it and records why
    assert counts.failed and counts.filled == 0
    problem = library.status(services)["sentence_vectors"]
    assert problem["kind"] == "unwritable", problem
    [line] = shown(services)
    assert "the sentence vectors kept on disk could not be saved (their file or its folder is read-only)" in line, line
    assert np.allclose(services.embed_sentences(SENTENCES), services.embedder.embed(SENTENCES), atol=1e-5)
    assert shown(services) == [line]                           # answers still come; the line stays
    shutil.rmtree(path)                                        # the disk mended
    assert fill(Services(services.settings)).failed is None
    assert library.status(services)["sentence_vectors"] is None and shown(services) == []
