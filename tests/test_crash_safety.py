"""Crash safety: real processes killed with SIGKILL in the middle of an ingestion, a burst of votes and a burst of
questions; then a restart. The store and the database must be consistent: no duplicate or missing papers after
the import is re-run, no half-written turn, every confirmed vote present (and exactly once).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from copilot.features.chat import Chat, ChatError
from copilot.services import Services
from tests.conftest import PAPERS_JSONL, ROOT, import_papers, make_settings, read_rows
from tests.doubles import scripted_llm

FULL_ANSWER = "Retrieval grounds the answer in the retrieved papers [x]."

# A worker that drives the chat feature functions in its own process (the scripted LLM stands in for the model,
# slowed down so a kill lands mid-answer). It prints a line after each step returns: what it printed is confirmed.
WORKER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from copilot.config import load_settings
from copilot.services import Services
from copilot.features.chat import Chat
from tests.doubles import scripted_llm

mode, data_dir, answer_delay = sys.argv[2], sys.argv[3], float(sys.argv[4])
services = Services(load_settings(data_dir=data_dir, llm="local", scheduler=False))

def reply(messages):
    if "Step 1:" in messages[-1]["content"]:
        return "0"
    time.sleep(answer_delay)
    return %r

services.llm, _ = scripted_llm(services.db, [reply] * 100000)
chat = Chat(services)
print("ready", flush=True)
if mode == "votes":
    turns = json.loads(open(sys.argv[5]).read())
    choices = ["A", "B", "tie", "bad", "thoughts", "raw"]
    for round_no in range(1000):
        for i, turn_id in enumerate(turns):
            choice = choices[(round_no + i) %% len(choices)]
            print("attempt", turn_id, choice, flush=True)
            result = chat.vote(turn_id, choice, "crash-user")
            print("confirmed", turn_id, result["choice"], flush=True)
else:
    for i in range(1000):
        turn = chat.prepare(f"How do language models retrieve evidence, variant {i}?", "crash-user")
        print("prepared", turn.id, flush=True)
        for _ in chat.stream(turn):
            pass
        print("finished", turn.id, turn.comparison, flush=True)
''' % FULL_ANSWER


def reply(messages) -> str:
    return "0" if "Step 1:" in messages[-1]["content"] else FULL_ANSWER


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COPILOT_", "OPENAI_"))}
    env.update(COPILOT_DATA_DIR=str(data_dir), COPILOT_LLM="local", COPILOT_SCHEDULER="false", HF_HUB_OFFLINE="1",
               PYTHONUNBUFFERED="1", **extra)
    return env


def kill_when(proc: subprocess.Popen, ready, timeout: float = 300) -> None:
    """SIGKILL `proc` as soon as `ready()` is true; fail if it finished first or never got there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            return
        assert proc.poll() is None, "the process finished before it could be killed mid-way"
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the process never reached the point to kill it at")


def db_value(db_path: Path, sql: str) -> int:
    if not db_path.exists():
        return 0
    try:
        with sqlite3.connect(db_path, timeout=5) as conn:
            row = conn.execute(sql).fetchone()
            return int(row[0] or 0) if row else 0
    except sqlite3.OperationalError:  # table not created yet
        return 0


def test_import_killed_mid_way_then_rerun(tmp_path):
    count, batch = 96, 8
    data_dir = tmp_path / "data"
    command = [sys.executable, "-m", "copilot", "import", str(PAPERS_JSONL), "--limit", str(count), "--json"]
    env = cli_env(data_dir, COPILOT_EMBED_BATCH_SIZE=str(batch))
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    db_path = data_dir / "copilot.db"
    kill_when(proc, lambda: db_value(db_path, "SELECT MAX(added) FROM ingest_runs") >= 2 * batch)
    assert proc.returncode == -signal.SIGKILL
    killed_at = db_value(db_path, "SELECT MAX(added) FROM ingest_runs")
    assert 0 < killed_at < count

    rerun = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    counts = json.loads(rerun.stdout)
    assert counts["added"] + counts["unchanged"] + counts["updated"] == count
    assert counts["unchanged"] >= killed_at  # what the killed run stored was kept, not written twice

    services = Services(make_settings(data_dir))
    expected = [row["id"] for row in read_rows(PAPERS_JSONL, 0, count)]
    stored = services.store.papers.get(include=[])["ids"]
    assert sorted(stored) == sorted(set(expected)) and len(stored) == len(set(expected)), "duplicate or missing papers"
    runs = services.db.query("SELECT status, error FROM ingest_runs ORDER BY id")
    assert [r["status"] for r in runs] == ["interrupted", "ok"]
    # the vector index answers: each sampled paper finds itself first
    for paper in services.store.get_papers(expected[::24]):
        hits = services.store.search("paper", services.embedder.embed_one(paper.document), 1)
        assert hits[0].id == paper.id
    assert services.db.query_one("PRAGMA integrity_check")["integrity_check"] == "ok"


@pytest.fixture(scope="module")
def chat_dir(tmp_path_factory):
    """Papers plus one thought per question family, so turns become two-answer comparisons."""
    data_dir = tmp_path_factory.mktemp("crash-chat") / "data"
    services = Services(make_settings(data_dir))
    import_papers(services, 20)
    chat = Chat(services)
    chat.memory.add("Language models retrieve evidence from papers before they answer, variant notes.",
                    [(services.store.papers.get(limit=1)["ids"][0], "paper")], origin="test", user="crash-user")
    return data_dir


def start_worker(tmp_path: Path, data_dir: Path, mode: str, delay: float, *extra: str) -> subprocess.Popen:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return subprocess.Popen([sys.executable, str(script), str(ROOT), mode, str(data_dir), str(delay), *extra],
                            cwd=ROOT, env=cli_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, bufsize=1)


def read_until(proc: subprocess.Popen, lines: list[str], done) -> None:
    while not done():
        line = proc.stdout.readline()
        if not line:
            raise AssertionError("worker ended early:\n" + proc.stderr.read()[-3000:])
        lines.append(line.split())


def test_burst_of_votes_killed_then_every_confirmed_vote_is_present(chat_dir, tmp_path):
    import shutil

    data_dir = tmp_path / "data"
    shutil.copytree(chat_dir, data_dir)
    services = Services(make_settings(data_dir))
    services.llm, _ = scripted_llm(services.db, [reply] * 100)
    chat = Chat(services)
    turns = []
    for i in range(12):
        turn = chat.prepare(f"How do language models retrieve evidence, variant {i}?", "crash-user")
        for _ in chat.stream(turn):
            pass
        if turn.comparison == "yes":
            turns.append(turn.id)
    assert len(turns) >= 5, "the setup must give comparisons to vote on"
    Chat.wait_for_all(timeout=60)
    (tmp_path / "turns.json").write_text(json.dumps(turns))

    proc = start_worker(tmp_path, data_dir, "votes", 0.0, str(tmp_path / "turns.json"))
    lines: list[list[str]] = []
    read_until(proc, lines, lambda: sum(1 for x in lines if x[0] == "confirmed") >= 3 * len(turns))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    lines += [line.split() for line in proc.stdout.read().splitlines() if line.strip()]  # flushed before the kill

    confirmed: dict[str, str] = {}
    attempts: dict[str, list[str]] = {}
    for word, *rest in lines:
        if word == "confirmed":
            confirmed[rest[0]] = rest[1]
        elif word == "attempt":
            attempts.setdefault(rest[0], []).append(rest[1])
    assert len(confirmed) == len(turns)

    restarted = Services(make_settings(data_dir))
    assert restarted.db.query_one("PRAGMA integrity_check")["integrity_check"] == "ok"
    votes = {r["turn_id"]: r for r in restarted.db.query("SELECT * FROM chat_votes")}
    assert set(votes) == set(turns), "a confirmed vote is missing"
    last_line_turn = next(rest[0] for word, *rest in reversed(lines) if word == "attempt")
    for turn_id, choice in confirmed.items():
        if turn_id == last_line_turn and votes[turn_id]["choice"] != choice:
            continue  # killed after its commit but before it printed: the newer, unconfirmed vote won
        assert votes[turn_id]["choice"] == choice, f"turn {turn_id}: confirmed {choice}, stored {votes[turn_id]}"
    log_rows = restarted.db.query("SELECT turn_id, COUNT(*) AS n FROM chat_vote_log GROUP BY turn_id")
    assert all(r["n"] >= 1 for r in log_rows) and len(log_rows) == len(turns)
    # voting again after the restart works and changes the stored vote once
    Chat(restarted).vote(turns[0], "bad", "crash-user")
    assert restarted.db.query_one("SELECT COUNT(*) AS n FROM chat_votes WHERE turn_id = ?", (turns[0],))["n"] == 1


def test_burst_of_questions_killed_leaves_no_half_written_turn(chat_dir, tmp_path):
    import shutil

    data_dir = tmp_path / "data"
    shutil.copytree(chat_dir, data_dir)
    proc = start_worker(tmp_path, data_dir, "asks", 1.0)
    lines: list[list[str]] = []
    read_until(proc, lines, lambda: sum(1 for x in lines if x[0] == "finished") >= 2 and lines[-1][0] == "prepared")
    time.sleep(0.5)  # inside the streaming of the next turn's answers
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    lines += [line.split() for line in proc.stdout.read().splitlines() if line.strip()]
    finished = {x[1] for x in lines if x[0] == "finished"}
    prepared = [x[1] for x in lines if x[0] == "prepared"]

    services = Services(make_settings(data_dir))
    assert services.db.query_one("PRAGMA integrity_check")["integrity_check"] == "ok"
    rows = {r["id"]: r for r in services.db.query("SELECT * FROM chat_turns WHERE user = 'crash-user'")}
    assert set(prepared) <= set(rows)
    interrupted = 0
    for turn_id, row in rows.items():
        texts = [row["thoughts_answer"], row["raw_answer"]]
        if row["finished_at"] is None:      # killed mid-turn: nothing of the answers was written, no vote possible
            interrupted += 1
            assert turn_id not in finished and row["comparison"] == "pending" and texts == [None, None]
            with pytest.raises(ChatError, match="not finished"):
                Chat(services).vote(turn_id, "A", "crash-user")
        else:                               # finished: whole answers only
            assert row["comparison"] in ("yes", "same_items", "failed")
            assert all(t in (None, FULL_ANSWER) for t in texts) and FULL_ANSWER in texts
    assert interrupted == 1 and finished <= set(rows)
