"""store/profiles.py and store/failures.py over a real SQLite file in a temporary data dir."""

from __future__ import annotations

import pytest

from copilot.store.failures import FailureCount
from copilot.store.profiles import BrokenProfile, Profile


def test_versions_are_numbered_per_user_and_the_latest_is_read_back_typed(services):
    profiles = services.profiles
    assert profiles.latest("ann") is None
    first = profiles.save("ann", "I study retrieval.", ["retrieval"], ["2501.00001"])
    profiles.save("bob", "I am Bob.", [], [])
    second = profiles.save("ann", "I study dense retrieval.", ["dense retrieval", "search"], [])
    assert (first.version, second.version, profiles.latest("bob").version) == (1, 2, 1)
    latest = profiles.latest("ann")
    assert isinstance(latest, Profile) and latest == second
    assert (latest.keywords, latest.paper_ids) == (["dense retrieval", "search"], [])


def test_an_unreadable_stored_profile_raises_broken_profile(services):
    services.profiles.save("ann", "I study retrieval.", ["retrieval"], [])
    services.db.execute("UPDATE profiles SET keywords = 'not json' WHERE user = 'ann'")
    with pytest.raises(BrokenProfile, match="keywords"):
        services.profiles.latest("ann")
    services.db.execute("UPDATE profiles SET keywords = '[1, 2]' WHERE user = 'ann'")
    with pytest.raises(BrokenProfile, match="list of strings"):
        services.profiles.latest("ann")


def test_failures_are_counted_by_kind_with_the_latest_reason(services):
    failures = services.failures
    assert failures.counts() == []
    failures.record("profile_unreadable", "first")
    failures.record("profile_unreadable", "second " + "x" * 600)
    failures.record("profile_papers_not_stored", "arXiv down")
    counts = failures.counts()
    assert [(c.kind, c.count) for c in counts] == [("profile_papers_not_stored", 1), ("profile_unreadable", 2)]
    assert isinstance(counts[1], FailureCount) and counts[1].last_reason.startswith("second")
    assert len(counts[1].last_reason) == 500
