"""Votes decide the one thought of a turn (issue #12): a vote makes it from the preferred answer, a changed vote
replaces it, "both bad" retracts it, an unvoted turn gets it after its grace period; two votes at once leave one
final vote and two log rows. Exact tests: a scripted LLM over real SQLite, Chroma and the real embedder.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from copilot.cli import main
from copilot.features import chat_thoughts
from copilot.features.chat import SWEEP_AFTER_S, THOUGHT_FROM, Chat, ChatError
from copilot.services import Services
from tests.conftest import import_papers, make_settings
from tests.doubles import ScriptedBackend, rescript
from tests.helpers import forget_chat

QUESTION = "How do large language models use retrieval to answer questions?"
THOUGHT = "1\nLanguage models answer questions better when they first retrieve supporting passages from papers."


def reply(messages) -> str:
    user = messages[-1]["content"]
    if "Step 1:" in user:
        return THOUGHT
    # the prompt's length tells the two sides apart: identical answers are shown as one and take no vote
    return f"Retrieval grounds the answer in the retrieved papers [1] ({len(user)})."


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    services = Services(make_settings(tmp_path_factory.mktemp("votes") / "data"), llm_backend=ScriptedBackend())
    import_papers(services, 40)
    return services


@pytest.fixture
def chat(shared, monkeypatch):
    # these tests are about votes and sweeps: every unvoted answer may make a thought here (the floor an unvoted
    # answer must clear has its own tests, tests/test_thought_floor.py)
    monkeypatch.setattr(chat_thoughts, "UNVOTED_FLOOR", 0.0)
    rescript(shared, [reply] * 200)
    chat = Chat(shared)
    seed = chat.services.store.search("paper", shared.embedder.embed_one(QUESTION), 1)[0]
    chat.memory.add(QUESTION, [(seed.id, "paper")], origin="test", check_redundant=False)   # makes comparisons
    yield chat
    forget_chat(chat)


def comparison(chat: Chat, question: str = QUESTION, user: str = "local") -> str:
    turn = chat.prepare(question, user)
    for _ in chat.stream(turn):
        pass
    assert turn.comparison == "yes", "the seeded thought must make this turn a comparison"
    return turn.id


def settled(chat: Chat, turn_id: str) -> list[dict]:
    return chat.wait_for_thoughts(turn_id, timeout=60)


def live_thoughts_of(chat: Chat, turn_id: str) -> list[str]:
    """Thoughts made by this turn's jobs that retrieval can still find (row live and vector present)."""
    made = [j["thought_id"] for j in chat.thought_jobs(turn_id) if j["thought_id"]]
    live = [t for t in made if chat.memory.get(t)]
    vectors = set(chat.services.store.thoughts.get(ids=made, include=[])["ids"]) if made else set()
    assert set(live) == vectors, "a live row without its vector, or a vector without a live row"
    return live


def test_a_changed_vote_replaces_the_thought(chat):
    turn_id = comparison(chat)
    chat.vote(turn_id, "raw", "local")
    [first] = settled(chat, turn_id)
    assert (first["answer"], first["status"]) == ("raw", "stored")
    chat.vote(turn_id, "thoughts", "local")
    jobs = settled(chat, turn_id)
    assert [(j["answer"], j["status"], j["superseded_at"] is None) for j in jobs] == [
        ("raw", "retracted", False), ("thoughts", "stored", True)]
    old, new = jobs[0]["thought_id"], jobs[1]["thought_id"]
    assert live_thoughts_of(chat, turn_id) == [new]
    # retracted: the row and its lineage stay, out of retrieval and out of the Memory list
    row = chat.db.query_one("SELECT retracted_at, deleted_at FROM thoughts WHERE id = ?", (old,))
    assert row["retracted_at"] is not None and row["deleted_at"] is None
    assert chat.memory.get(old) is None and chat.memory.get(old, include_hidden=True)["state"] == "retracted"
    assert chat.memory.direct_sources(old) and old not in [t["id"] for t in chat.memory.list()]
    hits = chat.services.store.search("thought", chat.services.embedder.embed_one(THOUGHT), 10)
    assert old not in [h.id for h in hits] and new in [h.id for h in hits]
    # the new thought was made from the thought-augmented answer: its sources are that answer's
    sources = [s["id"] for s in json.loads(chat.db.query_one("SELECT thoughts_sources FROM chat_turns WHERE id = ?",
                                                             (turn_id,))["thoughts_sources"])]
    assert [s["id"] for s in chat.memory.get(new)["sources"]] == sources
    # voting the same again changes nothing; a tie prefers the thought-augmented answer, so it keeps the thought
    chat.vote(turn_id, "thoughts", "local")
    chat.vote(turn_id, "tie", "local")
    assert len(settled(chat, turn_id)) == 2 and live_thoughts_of(chat, turn_id) == [new]


def test_both_bad_retracts_the_thought_the_sweep_made(chat):
    turn_id = comparison(chat)
    assert chat.thought_jobs(turn_id) == []            # no thought before a vote or the end of the grace period
    comparison(chat, "Which benchmarks test retrieval for question answering?")   # the user moved on: swept
    [job] = settled(chat, turn_id)
    assert (job["answer"], job["trigger"], job["status"]) == ("thoughts", "no_vote", "stored")
    before = chat.memory.count()
    chat.vote(turn_id, "bad", "local")
    [job] = settled(chat, turn_id)
    assert job["status"] == "retracted" and job["superseded_at"] is not None
    assert live_thoughts_of(chat, turn_id) == [] and chat.memory.count() == before - 1
    chat.vote(turn_id, "raw", "local")                 # changing "both bad" to a preference makes one again
    jobs = settled(chat, turn_id)
    assert [(j["answer"], j["status"]) for j in jobs if j["superseded_at"] is None] == [("raw", "stored")]
    assert len(live_thoughts_of(chat, turn_id)) == 1


def test_a_vote_that_changes_while_the_job_runs_retracts_what_it_stores(chat):
    started, release = threading.Event(), threading.Event()

    def slow_thought(messages) -> str:
        if "Step 1:" not in messages[-1]["content"]:
            return reply(messages)
        started.set()
        release.wait(30)
        return THOUGHT

    rescript(chat.services, [slow_thought] * 20)
    turn_id = comparison(chat)
    chat.vote(turn_id, "thoughts", "local")
    assert started.wait(30)
    chat.vote(turn_id, "bad", "local")                 # the job is running: it has stored nothing yet
    release.set()
    [job] = settled(chat, turn_id)
    assert job["status"] == "retracted" and job["thought_id"]
    assert live_thoughts_of(chat, turn_id) == []
    assert chat.db.query_one("SELECT retracted_at FROM thoughts WHERE id = ?", (job["thought_id"],))["retracted_at"]


def test_two_votes_at_once_leave_one_final_vote_both_logged_and_its_thought(chat, shared):
    other = Services(shared.settings, llm_backend=ScriptedBackend([reply] * 20))   # a second connection, as a
                                                                                    # second tab's request would be
    other.thought_jobs = shared.thought_jobs           # one process: its thought jobs run on one thread
    tabs = [chat, Chat(other)]
    for round_no in range(3):
        turn_id = comparison(chat, f"{QUESTION} Round {round_no}.")
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def vote(tab: Chat, choice: str) -> None:   # its threads are joined within the iteration (B023 n/a)
            barrier.wait()  # noqa: B023
            try:
                tab.vote(turn_id, choice, "local")  # noqa: B023
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)  # noqa: B023

        threads = [threading.Thread(target=vote, args=(tab, choice)) for tab, choice in zip(tabs, ("thoughts", "raw"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == []
        final = chat.db.query("SELECT choice, changes FROM chat_votes WHERE turn_id = ?", (turn_id,))
        assert len(final) == 1 and final[0]["choice"] in ("thoughts", "raw") and final[0]["changes"] == 1
        log = chat.db.query("SELECT choice FROM chat_vote_log WHERE turn_id = ? ORDER BY id", (turn_id,))
        assert sorted(r["choice"] for r in log) == ["raw", "thoughts"] and log[-1]["choice"] == final[0]["choice"]
        jobs = settled(chat, turn_id)
        current = [j for j in jobs if j["superseded_at"] is None]
        assert [j["answer"] for j in current] == [THOUGHT_FROM[final[0]["choice"]]]
        # the scripted thought is the same every round: later rounds find it redundant (the merge test)
        assert current[0]["status"] == ("stored" if round_no == 0 else "redundant"), jobs
        assert len(live_thoughts_of(chat, turn_id)) == (1 if round_no == 0 else 0)


def test_votes_on_missing_or_other_users_turns_are_refused(chat):
    turn_id = comparison(chat)
    with pytest.raises(ChatError, match="no turn with id"):
        chat.vote("no-such-turn", "thoughts", "local")
    with pytest.raises(ChatError, match="another user"):
        chat.vote(turn_id, "thoughts", "mallory")
    assert chat.db.query("SELECT * FROM chat_vote_log") == [] and chat.thought_jobs(turn_id) == []


def test_grace_period_sweeps_anyones_old_turn_but_not_a_young_one(chat):
    old, young = comparison(chat, user="alice"), comparison(chat, QUESTION + " Briefly.", user="carol")
    chat.db.execute("UPDATE chat_turns SET created_at = ? WHERE id = ?", (time.time() - SWEEP_AFTER_S - 1, old))
    comparison(chat, "Which benchmarks test retrieval for question answering?", user="bob")
    assert [j["trigger"] for j in settled(chat, old)] == ["no_vote"]
    assert chat.thought_jobs(young) == []


def test_resumed_job_of_a_stopped_process_runs_once_and_never_stores_twice(chat, monkeypatch):
    dead = subprocess.Popen(["true"])
    dead.wait()
    turn_id = comparison(chat)
    monkeypatch.setattr(chat, "_submit", lambda job_id: None)      # the process "stops" before running the job
    chat.vote(turn_id, "thoughts", "local")
    monkeypatch.undo()
    [job] = chat.thought_jobs(turn_id)
    chat.db.execute("UPDATE chat_thought_jobs SET status = 'running', runner = ? WHERE id = ?",
                    (f"{dead.pid}:gone", job["id"]))
    assert chat.stale_jobs() == [job["id"]]
    # it had stored its thought (row and vector) before it stopped, but not recorded that in the job
    row = chat.db.query_one("SELECT thoughts_sources FROM chat_turns WHERE id = ?", (turn_id,))
    sources = [(s["id"], s["kind"]) for s in json.loads(row["thoughts_sources"])]
    chat.memory.add(THOUGHT.split("\n", 1)[1], sources, origin="chat", thought_id=job["planned_thought_id"],
                    check_redundant=False)
    calls = len(chat.services.llm.backend.calls)
    assert chat.resume_jobs() == [job["id"]]
    [done] = settled(chat, turn_id)
    assert (done["status"], done["thought_id"]) == ("stored", job["planned_thought_id"])
    assert len(chat.services.llm.backend.calls) == calls                 # no second thought drafted
    assert chat.resume_jobs() == [] and live_thoughts_of(chat, turn_id) == [job["planned_thought_id"]]
    assert chat.db.query_one("SELECT COUNT(*) AS n FROM thoughts WHERE text = ?",
                             (THOUGHT.split("\n", 1)[1],))["n"] == 1


def test_cli_ask_makes_no_thought_unless_voted(chat, shared, monkeypatch, capsys):
    monkeypatch.setattr("copilot.cli.chat.Services", lambda: shared)

    def ask(*extra: str) -> dict:
        assert main(["ask", QUESTION + f" {len(extra)}", "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)

    plain = ask("--user", "other")        # another user: the next ask does not sweep it (it stays thoughtless)
    assert plain["comparison"] is True and plain["thought_jobs"] == [] and "vote" not in plain
    voted = ask("--vote", "B")
    assert voted["vote"]["recorded"] and voted["vote"]["label"] == "B"
    [job] = voted["thought_jobs"]
    augmented_label = next(a["label"] for a in voted["answers"] if a["thought_augmented"])
    assert job["answer"] == ("thoughts" if augmented_label == "B" else "raw")
    assert job["status"] == "stored" and job["current"] and job["trigger"] == "vote"
    assert chat.thought_jobs(plain["turn_id"]) == []
    # a turn with one answer cannot be voted on: the answer stands, the vote is refused in the record
    with chat.db.transaction() as tx:
        tx.execute("UPDATE thoughts SET retracted_at = 1")
    chat.services.store.thoughts.delete(ids=chat.services.store.thoughts.get()["ids"])
    single = ask("--vote", "thoughts", "--user", "solo")
    assert single["comparison"] is False and single["vote"]["recorded"] is False
    assert "cannot be voted on" in single["vote"]["error"]
    assert [j["trigger"] for j in single["thought_jobs"]] == ["no_comparison"]


def test_vote_flips_that_remake_the_thought_count_against_the_rate_limit(tmp_path):
    """Issue #34: 40 flips in 1.5 s queued 10 extra thought jobs on the one thought thread. A change that remakes
    the thought counts as an LLM-backed action; over the limit it is refused with a sentence and queues nothing."""
    from copilot.ratelimit import RateLimited

    services = Services(make_settings(tmp_path / "data", rate_limit=2, rate_window=3600),
                        llm_backend=ScriptedBackend())
    import_papers(services, 40)
    rescript(services, [reply] * 50)
    chat = Chat(services)
    seed = services.store.search("paper", services.embedder.embed_one(QUESTION), 1)[0]
    chat.memory.add(QUESTION, [(seed.id, "paper")], origin="test", check_redundant=False)
    turn_id = comparison(chat)
    chat.vote(turn_id, "thoughts", "local")              # a first vote is never limited
    chat.vote(turn_id, "tie", "local")                   # the same thought source: not a remake, not counted
    chat.vote(turn_id, "raw", "local")
    chat.vote(turn_id, "thoughts", "local")
    jobs = len(chat.thought_jobs(turn_id))
    with pytest.raises(RateLimited, match="changing a vote"):
        chat.vote(turn_id, "raw", "local")
    assert chat.view(turn_id).vote.choice == "thoughts" and len(chat.thought_jobs(turn_id)) == jobs
    chat.wait_for_all(timeout=120)


def test_cli_asks_and_votes_blind_and_a_vote_after_reveal_is_left_out(chat, shared, monkeypatch, capsys):
    """Issue #41: `ask` shows an unvoted comparison's answers without its sides (no sources, kinds or per-answer
    times) until `vote`, which reveals them; `ask --reveal` shows them at once, and a vote after that is recorded
    as unblinded and stays out of `stats`."""
    from copilot.features.stats import chat_stats

    monkeypatch.setattr("copilot.cli.chat.Services", lambda: shared)

    def run(*argv: str) -> dict:
        assert main([*argv, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    blind = run("ask", QUESTION)
    assert blind["comparison"] is True and blind["sides_hidden"] is True
    assert all(set(a) == {"label", "text", "error"} for a in blind["answers"])
    thought_ids = chat.services.store.thoughts.get()["ids"]
    assert thought_ids and not any(t in json.dumps(blind) for t in thought_ids)
    assert set(blind["timings"]) == {"total_s"}
    voted = run("vote", blind["turn_id"], "A")
    assert voted["counted"] is True and {"thought_augmented", "sources"} <= set(voted["answers"][0])
    shown = run("ask", QUESTION + " Shown first.", "--reveal")
    assert shown["sides_hidden"] is False and any(a["thought_augmented"] for a in shown["answers"])
    late = run("vote", shown["turn_id"], "B")
    assert late["counted"] is False
    changed = run("vote", blind["turn_id"], "B")
    assert changed["changed"] is True and changed["counted"] is False
    stats = chat_stats(shared.db)
    assert stats["decisive_votes"] == 1 and stats["unblinded_votes_left_out"] == 1
    assert stats["votes_changed_after_first"] == 1
    first = next(a for a in voted["answers"] if a["label"] == "A")
    assert stats["thought_wins"] == int(first["thought_augmented"])    # the first vote (A), not the change (B)
