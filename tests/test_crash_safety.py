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
from tests.doubles import ScriptedBackend
from tests.helpers import answer_words, subprocess_env, unlabelled

FULL_ANSWER = "Retrieval grounds the answer in the retrieved papers [x]."

# A worker that drives the chat feature functions in its own process (the scripted LLM stands in for the model,
# slowed down so a kill lands mid-answer). It prints a line after each step returns: what it printed is confirmed.
WORKER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from copilot.config import load_settings
from copilot.services import Services
from copilot.features.chat import Chat
from tests.doubles import ScriptedBackend

mode, data_dir, answer_delay = sys.argv[2], sys.argv[3], float(sys.argv[4])

def reply(messages):
    if "Step 1:" in messages[-1]["content"]:
        return "0"
    time.sleep(answer_delay)
    return %r

# rate_limit=0: the burst changes votes as fast as it can, and changes that remake a thought are rate-limited
services = Services(load_settings(data_dir=data_dir, llm="local", scheduler=False, rate_limit=0),
                    llm_backend=ScriptedBackend([reply] * 100000))
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
    return subprocess_env(data_dir, COPILOT_LLM="local", COPILOT_SCHEDULER="false", HF_HUB_OFFLINE="1",
                          PYTHONUNBUFFERED="1", **extra)


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


def lines_left(proc: subprocess.Popen) -> list[list[str]]:
    """The whole lines a killed worker had flushed; the kill may have cut its last line short."""
    rest = proc.stdout.read()
    return [line.split() for line in rest[:rest.rfind("\n") + 1].splitlines() if line.strip()]


def test_burst_of_votes_killed_then_every_confirmed_vote_is_present(chat_dir, tmp_path):
    import shutil

    data_dir = tmp_path / "data"
    shutil.copytree(chat_dir, data_dir)
    services = Services(make_settings(data_dir), llm_backend=ScriptedBackend([reply] * 100))
    chat = Chat(services)
    turns = []
    for i in range(12):
        turn = chat.prepare(f"How do language models retrieve evidence, variant {i}?", "crash-user")
        for _ in chat.stream(turn):
            pass
        if turn.comparison == "yes":
            turns.append(turn.id)
    assert len(turns) >= 5, "the setup must give comparisons to vote on"
    chat.wait_for_all(timeout=60)
    (tmp_path / "turns.json").write_text(json.dumps(turns))

    proc = start_worker(tmp_path, data_dir, "votes", 0.0, str(tmp_path / "turns.json"))
    lines: list[list[str]] = []
    read_until(proc, lines, lambda: sum(1 for x in lines if x[0] == "confirmed") >= 3 * len(turns))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    lines += lines_left(proc)

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
    lines += lines_left(proc)
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
            words = [None if t is None else unlabelled(answer_words(t)) for t in texts]   # the table under them
            assert all(t in (None, unlabelled(FULL_ANSWER)) for t in words) and unlabelled(FULL_ANSWER) in words
    assert interrupted == 1 and finished <= set(rows)


# A process that votes and is SIGKILLed at a chosen point of the thought memory's two writes. The stores are
# paused by wrapping the Chroma collection in this child process only; the product code runs unchanged.
MEMORY_WORKER = r'''
import sys, threading, time
sys.path.insert(0, sys.argv[1])
from copilot.config import load_settings
from copilot.services import Services
from copilot.features.chat import Chat
from tests.doubles import ScriptedBackend

mode, data_dir, turn_id, choice = sys.argv[2:6]
said = threading.Lock()

def say(word):
    """One whole line: the job thread's "paused" and the main thread's "voted" must not share a line."""
    with said:
        print(word, flush=True)

def reply(messages):
    if "Step 1:" in messages[-1]["content"]:
        if mode == "mid_thought":
            say("paused")
            time.sleep(300)
        return %r
    return "Retrieval grounds the answer in the retrieved papers [1]."

services = Services(load_settings(data_dir=data_dir, llm="local", scheduler=False),
                    llm_backend=ScriptedBackend([reply] * 100))

class Paused:
    """The thoughts collection, stopping for good after (upsert) or before (delete) the chosen write."""
    def __init__(self, inner, method, after):
        self.inner, self.method, self.after = inner, method, after
    def __getattr__(self, name):
        real = getattr(self.inner, name)
        if name != self.method:
            return real
        def paused(*args, **kwargs):
            if self.after:
                real(*args, **kwargs)
            say("paused")
            time.sleep(300)
        return paused

if mode == "between_add":           # the vector is written, the row is not
    services.store.thoughts = Paused(services.store.thoughts, "upsert", after=True)
elif mode == "between_retract":     # the row is marked retracted, the vector is not yet removed
    services.store.thoughts = Paused(services.store.thoughts, "delete", after=False)
chat = Chat(services)
chat.vote(turn_id, choice, "crash-user")
say("voted")
time.sleep(300)
''' % ("1\n" + "Citation-aware decoding lets small models point to the abstract behind every claim they write.")
KILLED_THOUGHT = "Citation-aware decoding lets small models point to the abstract behind every claim they write."
CITED_ANSWER = "Retrieval grounds the answer in the retrieved papers [1]."


def memory_doctor_cli(data_dir: Path, *extra: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "copilot", "doctor", "--json", *extra], cwd=ROOT,
                          env=cli_env(data_dir), capture_output=True, text=True, timeout=600)
    assert done.stdout.count("\n") == 1, done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize("mode", ["mid_thought", "between_add", "between_retract"])
def test_killed_inside_a_thought_write_then_restart_repairs(chat_dir, tmp_path, mode):
    import shutil

    from copilot.features.memory import doctor

    data_dir = tmp_path / "data"
    shutil.copytree(chat_dir, data_dir)
    services = Services(make_settings(data_dir), llm_backend=ScriptedBackend(
        [lambda m: "1\n" + KILLED_THOUGHT if "Step 1:" in m[-1]["content"] else CITED_ANSWER] * 20))
    chat = Chat(services)
    turn = chat.prepare("How do language models retrieve evidence before they answer?", "crash-user")
    for _ in chat.stream(turn):
        pass
    assert turn.comparison == "yes" and all(unlabelled(answer_words(a.text)) == unlabelled(CITED_ANSWER)
                                            for a in turn.answers)
    if mode == "between_retract":        # a stored thought, which the killed process's "both bad" vote retracts
        chat.vote(turn.id, "thoughts", "crash-user")
        [job] = chat.wait_for_thoughts(turn.id, timeout=60)
        assert job["status"] == "stored"
    thoughts_before = services.db.query_one("SELECT COUNT(*) AS n FROM thoughts")["n"]

    script = tmp_path / "memory_worker.py"
    script.write_text(MEMORY_WORKER)
    choice = "bad" if mode == "between_retract" else "thoughts"
    proc = subprocess.Popen([sys.executable, str(script), str(ROOT), mode, str(data_dir), turn.id, choice], cwd=ROOT,
                            env=cli_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines: list[list[str]] = []
        read_until(proc, lines, lambda: ["paused"] in lines)   # ("voted" may come first: the job has its thread)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    code, report = memory_doctor_cli(data_dir)            # a fresh process sees what the kill left
    thoughts = report["thoughts"]
    if mode == "between_add":
        assert len(thoughts["orphan_vectors"]) == 1 and len(report["stale_jobs"]) == 1
    elif mode == "between_retract":
        assert len(thoughts["hidden_with_vector"]) == 1 and report["stale_jobs"] == []
    else:
        assert thoughts["mismatches"] == 0 and len(report["stale_jobs"]) == 1
    assert code == 1 and report["mismatches"] >= 1 and thoughts["missing_vectors"] == []  # never invisible

    restarted = Services(make_settings(data_dir),          # restart: repair, resume the job (scripted model)
                         llm_backend=ScriptedBackend(["1\n" + KILLED_THOUGHT] * 5))
    repaired = doctor(restarted, repair=True)
    assert repaired["after_repair"]["mismatches"] == 0
    code, report = memory_doctor_cli(data_dir)
    assert (code, report["mismatches"]) == (0, 0)

    jobs = Chat(restarted).thought_jobs(turn.id)
    current = [j for j in jobs if j["superseded_at"] is None]
    vectors = restarted.store.thoughts.get(include=["documents"])
    if mode == "between_retract":
        assert current == [] and jobs[0]["status"] == "retracted"
        assert KILLED_THOUGHT not in vectors["documents"] and restarted.db.query_one(
            "SELECT COUNT(*) AS n FROM thoughts")["n"] == thoughts_before
    else:                                                 # the resumed job stored its thought exactly once
        assert [(j["status"], j["thought_id"]) for j in current] == [("stored", current[0]["planned_thought_id"])]
        assert vectors["documents"].count(KILLED_THOUGHT) == 1
        assert restarted.db.query_one("SELECT COUNT(*) AS n FROM thoughts WHERE text = ?",
                                      (KILLED_THOUGHT,))["n"] == 1
        assert current[0]["thought_id"] in {t["id"] for t in Chat(restarted).memory.list()}
