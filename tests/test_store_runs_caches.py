"""store/runs.py and store/caches.py over a real SQLite file in a temporary data dir."""

from __future__ import annotations

from copilot.store.caches import CachedReport
from copilot.store.runs import IngestRun, RunCounts


def test_a_run_is_started_counted_finished_and_listed_newest_first(services):
    runs = services.runs
    assert runs.recent() == [] and runs.latest_id() == 0
    first = runs.start("snapshot:a.jsonl", pid=123)
    runs.update_counts(first, RunCounts(seen=10, added=8, updated=1, unchanged=1, skipped=2))
    assert [r.id for r in runs.running()] == [first]
    runs.finish(first, "ok", RunCounts(seen=12, added=9, updated=1, unchanged=2, skipped=2), None)
    second = runs.start("arxiv:cs.CL", pid=456)
    runs.mark_interrupted(second)
    newest, oldest = runs.recent()
    assert isinstance(newest, IngestRun) and (newest.id, newest.status) == (second, "interrupted")
    assert newest.error == "the process stopped before the run finished" and newest.finished_at
    assert (oldest.status, oldest.seen, oldest.added, oldest.skipped, oldest.pid) == ("ok", 12, 9, 2, 123)
    assert runs.running() == [] and runs.latest_id() == second and len(runs.recent(1)) == 1


def test_aspect_descriptions_are_cached_per_paper_model_and_variant(services):
    cache = services.aspect_cache
    cache.put("hash1", "model", "separate", {"background": "Why.", "method": "How."})
    cache.put("hash1", "model", "separate", {"method": "How, again."})
    assert cache.get("hash1", "model", "separate") == {"background": "Why.", "method": "How, again."}
    assert cache.get("hash1", "model", "json") == {} and cache.get("hash1", "other", "separate") == {}


def test_trends_reports_are_cached_under_their_key(services):
    cache = services.trends_cache
    entry = CachedReport(key='["ann", 1]', user="ann", profile_version=1, start="2025-01-01", end="2025-01-07",
                         categories="cs.CL,cs.IR", corpus_version="300:2", report='{"topics": []}')
    assert cache.get(entry.key) is None
    cache.put(entry)
    cache.put(entry)   # replaced, not duplicated
    assert cache.get(entry.key) == '{"topics": []}'
    assert services.db.query_one("SELECT COUNT(*) AS n FROM trends_cache")["n"] == 1
