"""A running app finds papers another process imported into its data dir, without a restart (issue #19, medium 9:
they were counted by the Library tab but search did not find them: an embedded Chroma client keeps its search
index in memory)."""

from __future__ import annotations

import json

from copilot.services import Services
from tests.conftest import PAPERS_JSONL, import_papers, make_settings, read_rows
from tests.helpers import run_cli, subprocess_env


def test_papers_imported_by_another_process_are_found_by_the_running_store(tmp_path):
    data_dir = tmp_path / "data"
    running = Services(make_settings(data_dir))
    import_papers(running, 30)
    newcomer = read_rows(PAPERS_JSONL, 500, 1)[0]
    query = running.embedder.embed_one(newcomer["title"])
    assert newcomer["id"] not in {e.id for e in running.store.search("paper", query, 5)}

    snapshot = tmp_path / "new.jsonl"
    snapshot.write_text(json.dumps(newcomer) + "\n", encoding="utf-8")
    done = run_cli(["import", str(snapshot)], subprocess_env(data_dir))   # another process, same data dir
    assert done.returncode == 0, done.stderr[-2000:]

    assert running.store.count("paper") == 31
    assert newcomer["id"] in {e.id for e in running.store.search("paper", query, 5)}
    # and the running process still writes and finds its own papers afterwards
    import_papers(running, 1, start=600)
    mine = read_rows(PAPERS_JSONL, 600, 1)[0]
    assert mine["id"] in {e.id for e in running.store.search("paper", running.embedder.embed_one(mine["title"]), 5)}


def test_reads_after_another_process_imported_see_its_papers_without_error(tmp_path):
    """Trends read the new papers' vectors with `paper_embeddings` and failed with Chroma's "Error finding id" until
    a restart (issue #20): every read, not only search, must see what another process wrote."""
    data_dir = tmp_path / "data"
    running = Services(make_settings(data_dir))
    import_papers(running, 20)
    before = running.store.date_range()
    rows = read_rows(PAPERS_JSONL, 700, 5)
    snapshot = tmp_path / "more.jsonl"
    snapshot.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    done = run_cli(["import", str(snapshot)], subprocess_env(data_dir))
    assert done.returncode == 0, done.stderr[-2000:]

    ids = [row["id"] for row in rows]
    vectors = running.store.paper_embeddings(ids)
    assert sorted(vectors) == sorted(ids) and all(v.shape == (384,) for v in vectors.values())
    assert [p.id for p in running.store.get_papers(ids)] == ids
    low, high = running.store.date_range()
    assert {p.id for p in running.store.papers_between(low, high)} >= set(ids)
    assert before is not None and running.store.count("paper") == 25
