"""Ten simultaneous sessions against the real app on loopback, through gradio_client: each logs in as its own
user (COPILOT_AUTH), asks its own question and votes. No errors; the turns that memory made comparisons are shown
blind and voted on, every vote is in SQLite exactly once; no answer reaches the wrong session (each output names its
own question, never another's).
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time

from gradio_client import Client

from copilot.features.chat import Chat
from copilot.services import Services
from tests.comparisons import KEEP_MEMORY_ROWS, tables_differ, thought_with_a_new_row
from tests.conftest import make_settings

SESSIONS = 10
APP_ENV = {"COPILOT_TOP_K": "4", "COPILOT_CONTEXT_TOKENS": "200", "COPILOT_CONCURRENCY": str(SESSIONS),
           "COPILOT_ANSWER_MAX_TOKENS": "24", "COPILOT_THOUGHT_ROW_MARGIN": str(KEEP_MEMORY_ROWS)}
TOPICS = ["speech recognition", "protein folding", "graph neural networks", "reinforcement learning for robots",
          "machine translation", "image segmentation", "recommender systems", "code generation",
          "federated learning", "time series forecasting"]
ASK_TIMEOUT_S = 600


def question(i: int) -> str:
    return f"Session {i} asks: what do recent papers say about {TOPICS[i]}?"


def prepared_dir(preloaded, tmp_path) -> tuple:
    """200 papers plus one thought per topic, each visible to every user (shared memory), and for each session's
    question a thought on a paper its plain retrieval misses where the library has one (a thought that re-quotes the
    papers already shown changes no table: the turn is one answer with no vote, issue #40; 30 papers held no such
    paper for any question). → (data dir, the sessions whose turns are comparisons)."""
    data_dir = tmp_path / "concurrency-data"
    shutil.copytree(preloaded(200), data_dir)
    services = Services(make_settings(data_dir, top_k=4, context_tokens=200, answer_max_tokens=24,
                                      thought_row_margin=KEEP_MEMORY_ROWS))
    memory = Chat(services).memory
    paper = services.store.papers.get(limit=1)["ids"][0]
    for i, topic in enumerate(TOPICS):
        memory.add(f"What recent papers say about {topic}: they study {topic} with learned models.",
                   [(paper, "paper")], origin="test", user=f"user{i}", check_redundant=False)
    for i in range(SESSIONS):       # in words that name no session (a vote reveals them; memory is shared)
        thought_with_a_new_row(services, question(i), user=f"user{i}", text=question(i).split(": ", 1)[1])
    # a later session's thought may reach an earlier question too: which tables differ is read once all are made
    compared = {i for i in range(SESSIONS) if tables_differ(services, question(i), f"user{i}")}
    assert compared, "no session's question has a paper beyond its pool that memory could bring"
    return data_dir, compared


def test_ten_sessions_ask_and_vote_at_once(app_server, preloaded, tmp_path):
    data_dir, expected = prepared_dir(preloaded, tmp_path)
    auth = ",".join(f"user{i}:pw{i}" for i in range(SESSIONS))
    url = app_server(env={"COPILOT_DATA_DIR": str(data_dir), "COPILOT_AUTH": auth, **APP_ENV})
    barrier = threading.Barrier(SESSIONS)
    results: dict[int, dict] = {}
    errors: list[str] = []
    in_flight = [0, 0]  # now, most at once
    lock = threading.Lock()

    def session(i: int) -> None:
        try:
            client = Client(url, auth=(f"user{i}", f"pw{i}"), verbose=False)
            barrier.wait(timeout=120)
            with lock:
                in_flight[0] += 1
                in_flight[1] = max(in_flight)
            started = time.monotonic()
            answer = client.submit(question(i), False, api_name="/ask").result(timeout=ASK_TIMEOUT_S)
            with lock:
                in_flight[0] -= 1
            vote = client.submit(api_name="/handler").result(timeout=120)  # "A is better"
            results[i] = {"answer": " ".join(str(x) for x in answer), "vote": " ".join(str(x) for x in vote),
                          "seconds": time.monotonic() - started}
        except Exception as error:  # collected: every session must succeed
            errors.append(f"session {i}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=session, args=(i,)) for i in range(SESSIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=ASK_TIMEOUT_S + 200)
    assert not errors, errors
    assert len(results) == SESSIONS
    assert in_flight[1] == SESSIONS, f"only {in_flight[1]} sessions were held at once"

    for i, result in results.items():
        assert question(i) in result["answer"], f"session {i} did not get its own turn"
        others = [j for j in range(SESSIONS) if j != i and f"Session {j} asks" in result["answer"] + result["vote"]]
        assert not others, f"session {i} received the turn of sessions {others}"
        # a turn whose two answers came out the same is shown as one and takes no vote (issue #40)
        same = "nothing new" in result["answer"]
        assert ("Vote recorded" in result["vote"]) != same, f"session {i}: {result['vote'][:300]}"
        assert "This answer failed" not in result["answer"]

    with sqlite3.connect(data_dir / "copilot.db") as conn:
        turns = conn.execute("SELECT id, user, question, comparison FROM chat_turns").fetchall()
        votes = conn.execute("SELECT turn_id, user, label FROM chat_votes").fetchall()
        logged = conn.execute("SELECT turn_id, COUNT(*) FROM chat_vote_log GROUP BY turn_id").fetchall()
    assert len(turns) == SESSIONS
    by_turn = {t[0]: t for t in turns}
    for _turn_id, user, question_text, comparison in turns:
        assert question_text == question(int(user.removeprefix("user"))), "a turn was stored for the wrong user"
        assert comparison in ("yes", "same_answer")
    # the turns whose two tables differ are blind comparisons, each voted in its own session (a bug that showed them
    # as one answer, or lost a vote, fails here); the others were one answer and their votes refused (above)
    compared = sorted(t[0] for t in turns if t[3] == "yes")
    # (a thought another session's turn left meanwhile may make one more a comparison)
    assert {int(by_turn[t][1].removeprefix("user")) for t in compared} >= expected, (compared, expected)
    assert all("Vote recorded" in results[i]["vote"] for i in expected)
    assert sorted(v[0] for v in votes) == compared, "every vote in SQLite, exactly once"
    assert all(by_turn[turn_id][1] == user and label == "A" for turn_id, user, label in votes)
    assert sorted(n for _, n in logged) == [1] * len(compared)
