"""Password login (COPILOT_AUTH) against guessing (issue #19, medium 8): five failed tries on an account lock it
for a minute, the right password included (tests/e2e/test_login_page.py: the same through the running app)."""

from __future__ import annotations

from copilot.ratelimit import LOGIN_ATTEMPTS, LOGIN_ATTEMPTS_ALL, LOGIN_WINDOW_S, PasswordGate


def test_an_account_locks_after_failed_tries_and_opens_after_the_window():
    now = [0.0]
    gate = PasswordGate([("ann", "right horse"), ("bob", "battery")], clock=lambda: now[0])
    assert gate("ann", "right horse") and not gate("ann", "wrong") and not gate("nobody", "right horse")
    for _ in range(LOGIN_ATTEMPTS - 1):
        assert not gate("ann", "wrong")
    assert not gate("ann", "right horse")              # locked: even the right password is refused
    assert gate("bob", "battery")                       # other accounts are not
    now[0] += LOGIN_WINDOW_S
    assert gate("ann", "right horse")


def test_tries_spread_over_many_names_lock_every_account():
    now = [0.0]
    gate = PasswordGate([("ann", "right horse")], clock=lambda: now[0])
    for n in range(LOGIN_ATTEMPTS_ALL):
        assert not gate(f"guess{n}", "x")
    assert not gate("ann", "right horse")
    now[0] += LOGIN_WINDOW_S
    assert gate("ann", "right horse")
