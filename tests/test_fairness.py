"""The per-user count of waiting and running queue events (copilot/ui/fairness.py), with a fake clock."""

from __future__ import annotations

from copilot.ui.fairness import _COMPLETED, PendingEvents


def test_events_count_until_completed_abandoned_or_expired():
    now = [0.0]
    pending = PendingEvents(ttl=100.0, clock=lambda: now[0])
    for n in range(3):
        pending.joined("ann", "s1" if n < 2 else "s2", f"e{n}")
    pending.joined("bob", "s9", "e9")
    assert (pending.count("ann"), pending.count("bob")) == (3, 1)
    pending.completed("e0")
    assert pending.count("ann") == 2
    pending.abandon("s1")                      # ann's first page is closed
    assert pending.count("ann") == 1
    now[0] = 101.0                             # a client that never reads its stream only blocks itself, for a while
    assert pending.count("ann") == 0 and pending.count("bob") == 0


def test_completion_messages_are_read_in_either_field_order():
    chunk = (b'data: {"msg": "process_completed", "event_id": "abc", "output": {}}\n\n'
             b'data: {"event_id": "def", "msg": "process_completed", "success": true}\n\n'
             b'data: {"msg": "process_generating", "event_id": "ghi"}\n\n')
    assert [(m.group(1) or m.group(2)).decode() for m in _COMPLETED.finditer(chunk)] == ["abc", "def"]


def test_gradios_raw_not_a_choice_message_is_replaced():
    import json

    from copilot.ui.fairness import _NOT_A_CHOICE, NOT_A_CHOICE

    raw = "Value: {'x': 1} (type: <class 'dict'>) is not in the list of choices: ['relevance', \"date\"]"
    chunk = ("data: " + json.dumps({"msg": "process_completed", "output": {"error": raw}, "success": False})).encode()
    cleaned = json.loads(_NOT_A_CHOICE.sub(NOT_A_CHOICE, chunk)[len("data: "):])
    assert cleaned["output"]["error"] == json.loads(NOT_A_CHOICE) and "<class" not in json.dumps(cleaned)


def test_a_place_is_reserved_before_the_join_and_freed_if_it_fails():
    pending = PendingEvents()
    tickets = [pending.reserve("ann", 3) for _ in range(5)]
    assert sum(t is not None for t in tickets) == 3 and pending.count("ann") == 3
    pending.joined("ann", "s1", "e1", tickets[0])          # the first join took its place
    pending.release(tickets[1])                            # the second was refused by Gradio
    assert pending.count("ann") == 2 and pending.reserve("ann", 3) is not None
    assert pending.owner("e1") == ("ann", "s1") and pending.owner("e2") is None
    pending.completed("e1")
    assert pending.owner("e1") == ("ann", "s1")           # its owner is kept, for reading its result


def test_reservations_are_exact_under_threads():
    import threading

    pending = PendingEvents()
    got: list[str | None] = []
    threads = [threading.Thread(target=lambda: got.append(pending.reserve("ann", 16))) for _ in range(150)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(t is not None for t in got) == 16
