"""Session binding in the request guard (copilot/ui/guard.py, issue #34): one id per request, nothing bound for a
visitor not signed in, and no eviction that hands a live session to someone else."""

from __future__ import annotations

from copilot.ui import guard
from copilot.ui.guard import RequestGuard, RetiredIds


def test_a_dropped_binding_is_refused_to_everyone_never_rebound():
    g = RequestGuard(app=None, max_sessions=3)
    assert g._owned_by("ann-live", "password:ann")
    for n in range(10):                                    # a flood of bindings by another user
        assert g._owned_by(f"flood-{n}", "password:eve")
    assert not g._owned_by("ann-live", "password:eve")     # dropped from memory: refused, not Eve's now
    assert not g._owned_by("ann-live", None)


def test_a_visitor_not_signed_in_binds_nothing_and_cannot_use_a_users_session():
    g = RequestGuard(app=None)
    for n in range(1000):
        assert g._owned_by(f"anon-{n}", None)
    assert len(g._owners) == 0
    assert g._owned_by("ann-live", "password:ann") and not g._owned_by("ann-live", None)
    assert not g._owned_by("ann-live", "password:bob") and g._owned_by("ann-live", "password:ann")


def test_one_users_flood_drops_only_their_own_bindings(monkeypatch):
    monkeypatch.setattr(guard, "MAX_USER_SESSIONS", 5)
    g = RequestGuard(app=None)
    assert g._owned_by("ann-live", "password:ann")
    for n in range(50):
        assert g._owned_by(f"eve-{n}", "password:eve")
    assert g._owned_by("ann-live", "password:ann") and len(g._owners) == 6
    assert not g._owned_by("eve-0", "password:eve")        # Eve's oldest was dropped and stays refused


def test_retired_ids_are_remembered_with_few_false_positives():
    retired = RetiredIds(bits=1 << 16)
    for n in range(1000):
        retired.add(f"gone-{n}")
    assert all(f"gone-{n}" in retired for n in range(1000))
    assert sum(f"fresh-{n}" in retired for n in range(1000)) < 20
