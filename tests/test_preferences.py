"""Preference data out (issue #30): every voted comparison exported as a JSON line — decisive votes as DPO pairs,
ties and "both bad" with their label — read back field by field; an empty export; the push to a Hugging Face
dataset through the backups' client stand-in (tests/doubles.FakeHub): done, not configured, no token, Hub down,
Hub slow, and a vote recorded while a slow push runs."""

from __future__ import annotations

import json
import threading
import time

import pytest

from copilot.cli import main
from copilot.errors import UserError
from copilot.features.preferences import export_and_push, export_preferences, push_preferences, user_hash
from copilot.services import Services
from copilot.store.app_keys import EXPORT_SALT, AppKeys
from copilot.store.chat_log import AnswerOutcome, ChatLog, NewTurn, SourceRecord
from tests.conftest import make_settings
from tests.doubles import FakeHub
from tests.helpers import clean_env

REPO = "someone/copilot-preferences"
TOKEN = "hf_preferencestoken0123456789"
NOV_20 = 1_763_596_800.0           # 2025-11-20 00:00 UTC
NOV_20_DATE = __import__("datetime").date(2025, 11, 20)

PAPER_1 = SourceRecord(id="2501.00001", kind="paper", title="Dense retrieval for QA", preview="We study…", score=0.8)
PAPER_2 = SourceRecord(id="2501.00002", kind="paper", title="Sparse retrieval", preview="BM25…", score=0.7)
THOUGHT = SourceRecord(id="Tabc123", kind="thought", title="Retrieval helps when…", preview="Retrieval…", score=0.9)


def add_turn(log: ChatLog, turn_id: str, user: str, side_a: str, at: float, question: str = "How does retrieval help?",
             comparison: str = "yes") -> None:
    log.add_turn(NewTurn(id=turn_id, user=user, created_at=at, question=question, question_chars=len(question),
                         comparison="pending", side_a=side_a, backend="local", model="SmolLM2-135M", embedder="MiniLM",
                         personalized=False, retrieval_s=0.1, raw_sources=(PAPER_1, PAPER_2),
                         thoughts_sources=(THOUGHT, PAPER_1)))
    raw, thoughts = f"Papers say so [1] ({turn_id}).", f"A thought says so [1], a paper too [2] ({turn_id})."
    log.finish_turn(turn_id, comparison, raw=AnswerOutcome(raw, None, 1.0, words=raw),
                    thoughts=AnswerOutcome(thoughts, None, 1.2, words=thoughts), at=at + 5)


@pytest.fixture
def services(tmp_path, monkeypatch):
    clean_env(monkeypatch, "HF_TOKEN", "COPILOT_HUB_PREFERENCES")
    return Services(make_settings(tmp_path / "data", hub_preferences=REPO, hub_token=TOKEN, hub_timeout=1.0))


@pytest.fixture
def voted(services):
    log = ChatLog(services.db)
    plan = [("t1", "ann", "thoughts", "thoughts"), ("t2", "bob", "thoughts", "raw"), ("t3", "ann", "raw", "tie"),
            ("t4", "bob", "raw", "bad")]
    for day, (turn_id, user, side_a, choice) in enumerate(plan):
        add_turn(log, turn_id, user, side_a, NOV_20 + day * 86_400)
        label = choice if choice in ("tie", "bad") else ("A" if choice == side_a else "B")
        log.record_vote(turn_id, user, choice, label, at=NOV_20 + day * 86_400 + 60)
    add_turn(log, "t5", "ann", "raw", NOV_20)                                   # a comparison nobody voted on
    add_turn(log, "t6", "ann", "raw", NOV_20, comparison="failed")              # not a finished comparison
    log.record_vote("t6", "ann", "thoughts", "B", at=NOV_20 + 30)
    return services


def read_lines(path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8").read().splitlines()]


def test_every_voted_comparison_reads_back_field_by_field(voted, tmp_path):
    out = tmp_path / "prefs.jsonl"
    result = export_preferences(voted, out=out)
    assert (result["count"], result["pairs"], result["ties"], result["both_bad"]) == (4, 2, 1, 1)
    assert result["path"] == str(out) and "2 preference pairs" in result["message"]
    rows = read_lines(out)
    assert [r["turn_id"] for r in rows] == ["t1", "t2", "t3", "t4"]
    assert len({tuple(sorted(r)) for r in rows}) == 1                           # one set of keys for every row
    salt = AppKeys(voted.db).get_or_make(EXPORT_SALT)
    thoughts_text = "A thought says so [Tabc123], a paper too [2501.00001] ({})."
    raw_text = "Papers say so [2501.00001] ({})."
    first, second, tie, bad = rows
    new_in_41 = ("chosen_context", "rejected_context", "chosen_policy", "rejected_policy")   # tested below
    first = {k: v for k, v in first.items() if k not in new_in_41}
    first["answers"] = [{k: v for k, v in a.items() if k not in ("context", "policy")} for a in first["answers"]]
    assert first == {
        "prompt": "How does retrieval help?",
        "chosen": thoughts_text.format("t1"), "rejected": raw_text.format("t1"), "label": "pair",
        "chosen_arm": "thoughts", "rejected_arm": "raw",
        "chosen_sources": [{"id": "Tabc123", "kind": "thought", "title": ""},
                           {"id": "2501.00001", "kind": "paper", "title": "Dense retrieval for QA"}],
        "rejected_sources": [{"id": "2501.00001", "kind": "paper", "title": "Dense retrieval for QA"},
                             {"id": "2501.00002", "kind": "paper", "title": "Sparse retrieval"}],
        "chosen_side": "A",
        "answers": [{"side": "A", "arm": "thoughts", "text": thoughts_text.format("t1"),
                     "sources": [{"id": "Tabc123", "kind": "thought", "title": ""},
                                 {"id": "2501.00001", "kind": "paper", "title": "Dense retrieval for QA"}]},
                    {"side": "B", "arm": "raw", "text": raw_text.format("t1"),
                     "sources": [{"id": "2501.00001", "kind": "paper", "title": "Dense retrieval for QA"},
                                 {"id": "2501.00002", "kind": "paper", "title": "Sparse retrieval"}]}],
        "model": "SmolLM2-135M", "backend": "local", "embedder": "MiniLM", "personalized": False,
        "user": user_hash(salt, "ann"), "turn_id": "t1", "asked_at": "2025-11-20T00:00:00+00:00",
        "voted_at": "2025-11-20T00:01:00+00:00", "vote_changes": 0,
        "first_choice": "thoughts", "blind": True, "changed_after_reveal": False, "counted_in_stats": True}
    # bob preferred the papers-only answer, shown as B
    assert (second["chosen"], second["rejected"]) == (raw_text.format("t2"), thoughts_text.format("t2"))
    assert (second["chosen_arm"], second["rejected_arm"], second["chosen_side"]) == ("raw", "thoughts", "B")
    assert [a["arm"] for a in second["answers"]] == ["thoughts", "raw"]
    assert second["user"] == user_hash(salt, "bob") != first["user"] == tie["user"]
    for row, label in ((tie, "tie"), (bad, "both_bad")):
        assert row["label"] == label
        assert all(row[key] is None for key in ("chosen", "rejected", "chosen_arm", "rejected_arm", "chosen_sources",
                                                "rejected_sources", "chosen_side"))
        assert {a["arm"] for a in row["answers"]} == {"thoughts", "raw"} and all(a["text"] for a in row["answers"])
    text = out.read_text(encoding="utf-8")
    assert '"ann"' not in text and '"bob"' not in text and salt not in text      # no raw user, no salt


def test_since_a_day_and_the_hash_is_stable(voted, tmp_path):
    later = export_preferences(voted, since="2025-11-22", out=tmp_path / "later.jsonl")
    assert [r["turn_id"] for r in read_lines(later["path"])] == ["t3", "t4"] and later["since"] == "2025-11-22"
    again = export_preferences(voted, since="2025-11-22", out=tmp_path / "again.jsonl")
    assert read_lines(again["path"]) == read_lines(later["path"])
    with pytest.raises(UserError, match="YYYY-MM-DD"):
        export_preferences(voted, since="last week")
    default = export_preferences(voted)
    assert default["path"].startswith(str(voted.settings.data_dir / "exports" / "preferences-"))


def test_an_export_with_no_votes_says_so_and_writes_an_empty_file(services, tmp_path):
    result = export_and_push(services, out=tmp_path / "empty.jsonl", api=FakeHub(tmp_path / "hub"))
    export = result["export"]
    assert export["count"] == 0 and export["message"].startswith("No votes on finished comparisons yet")
    assert (tmp_path / "empty.jsonl").read_text() == ""
    assert result["push"] == {"status": "skipped", "reason": "nothing to push: the export is empty",
                              "repository": REPO}


def test_the_push_lands_in_the_dataset_and_a_partial_export_goes_beside_it(voted, tmp_path):
    hub = FakeHub(tmp_path / "hub")
    full = export_and_push(voted, out=tmp_path / "full.jsonl", api=hub)
    assert full["push"] == {"status": "ok", "repository": REPO, "path_in_repo": "data/preferences.jsonl", "count": 4}
    repo = tmp_path / "hub" / REPO.replace("/", "--")
    assert (repo / "data" / "preferences.jsonl").read_bytes() == (tmp_path / "full.jsonl").read_bytes()
    partial = export_and_push(voted, since="2025-11-22", out=tmp_path / "part.jsonl", api=hub)
    assert partial["push"]["path_in_repo"] == "partial/preferences-since-2025-11-22.jsonl"
    assert len(read_lines(repo / "data" / "preferences.jsonl")) == 4                  # the full one is untouched


def test_a_push_without_a_dataset_or_a_token_says_why_and_keeps_the_file(voted, tmp_path):
    plain = Services(make_settings(voted.settings.data_dir))
    export = export_preferences(plain, out=tmp_path / "a.jsonl")
    assert push_preferences(plain, export)["status"] == "skipped"
    tokenless = Services(make_settings(voted.settings.data_dir, hub_preferences=REPO))
    pushed = push_preferences(tokenless, export)
    assert pushed["status"] == "failed" and "no HF_TOKEN" in pushed["error"] and str(tmp_path / "a.jsonl") in \
        pushed["error"]
    assert len(read_lines(tmp_path / "a.jsonl")) == 4


@pytest.mark.parametrize("hub_kwargs, message", [
    ({"fail_with": ConnectionError(f"cannot reach the Hub (token {TOKEN})")}, "ConnectionError"),
    ({"fail_with": PermissionError("401 Unauthorized: invalid token")}, "401"),
    ({"delay": 3.0}, "did not finish within 1 s"),
])
def test_the_hub_down_refusing_or_slow_fails_with_the_reason_and_keeps_the_file(voted, tmp_path, hub_kwargs, message):
    started = time.monotonic()
    result = export_and_push(voted, out=tmp_path / "p.jsonl", api=FakeHub(tmp_path / "hub", **hub_kwargs))
    assert time.monotonic() - started < 2.5                                     # the whole call has its deadline
    push = result["push"]
    assert push["status"] == "failed" and message in push["error"] and TOKEN not in push["error"]
    assert "the export stays at" in push["error"] and len(read_lines(tmp_path / "p.jsonl")) == 4


def test_a_slow_push_never_holds_up_a_vote(voted, tmp_path):
    export = export_preferences(voted, out=tmp_path / "p.jsonl")
    pushing = threading.Thread(target=push_preferences, args=(voted, export, FakeHub(tmp_path / "hub", delay=3.0)))
    pushing.start()
    time.sleep(0.2)
    log = ChatLog(voted.db)
    add_turn(log, "t9", "cy", "raw", NOV_20)
    started = time.monotonic()
    log.record_vote("t9", "cy", "raw", "A")
    assert time.monotonic() - started < 0.5 and log.vote("t9").choice == "raw"
    pushing.join()


def test_the_command_writes_the_file_and_reports_in_json(voted, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COPILOT_DATA_DIR", str(voted.settings.data_dir))
    monkeypatch.setenv("COPILOT_LLM", "local")
    out = tmp_path / "cli.jsonl"
    assert main(["export", "preferences", "--since", "2025-11-21", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["export"]["count"] == 3 and printed["push"]["status"] == "skipped"    # no dataset set here
    assert [r["turn_id"] for r in read_lines(out)] == ["t2", "t3", "t4"]
    assert main(["export", "preferences", "--since", "yesterday"]) == 2
    assert "YYYY-MM-DD" in capsys.readouterr().err


def test_a_vote_changed_after_the_reveal_is_exported_as_the_change_and_marked(voted, tmp_path):
    """Issue #41: the change decides `chosen` (it decides the thought too) and the row says the first vote was
    different and is the one the statistics count."""
    ChatLog(voted.db).record_vote("t1", "ann", "raw", "B", at=NOV_20 + 600)
    out = tmp_path / "prefs.jsonl"
    export_preferences(voted, out=out)
    row = read_lines(out)[0]
    assert (row["chosen_arm"], row["first_choice"], row["changed_after_reveal"]) == ("raw", "thoughts", True)
    assert row["blind"] is True and row["counted_in_stats"] is True and row["vote_changes"] == 1


def test_each_side_carries_what_it_was_given_and_the_policy_that_wrote_it(voted, tmp_path):
    """Issue #41 item 5: `prompt` is the question alone while the two sides were given different sources, so each
    answer carries its sources' stored texts and its policy (quotes the embedder chose, or a model's words)."""
    import numpy as np

    from copilot.records import Paper

    paper = Paper(id="2501.00001", title="Dense retrieval for QA", abstract="We study dense retrieval for QA.",
                  authors=["Ann Lee"], categories=["cs.IR"], published=NOV_20_DATE, version=1, updated=NOV_20_DATE)
    voted.store.upsert_papers([paper], np.ones((1, voted.embedder.dimension), dtype=np.float32))
    log = ChatLog(voted.db)
    add_turn(log, "q1", "ann", "raw", NOV_20 + 10)
    with voted.db.transaction() as tx:       # the papers-only side quoted its source: the tiny profile's answer
        tx.execute("UPDATE chat_turns SET raw_answer = ?, raw_words = NULL WHERE id = 'q1'",
                   ("[1] \u201cWe study dense retrieval.\u201d",))
        # the other side's model wrote words shaped like quotes: still a model's words (#58 item 5)
        tx.execute("UPDATE chat_turns SET thoughts_answer = ?, thoughts_words = ? WHERE id = 'q1'",
                   *[("[1] \u201cWe study sparse retrieval.\u201d",) * 2])
    log.record_vote("q1", "ann", "raw", "A", at=NOV_20 + 20)
    out = tmp_path / "prefs.jsonl"
    export_preferences(voted, out=out)
    row = next(r for r in read_lines(out) if r["turn_id"] == "q1")
    assert row["chosen_context"].startswith("[2501.00001] Dense retrieval for QA\nWe study dense retrieval for QA.")
    assert "[2501.00002] (no longer stored)" in row["chosen_context"]
    assert row["rejected_context"].startswith("[Tabc123] (no longer stored)")
    assert (row["chosen_policy"], row["rejected_policy"]) == ("extractive", "model:SmolLM2-135M")
    assert row["blind"] is True and all({"context", "policy"} <= set(a) for a in row["answers"])
