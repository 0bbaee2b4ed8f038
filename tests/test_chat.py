"""Chat feature: turns, sides, votes, thought jobs, statistics and the CLI.

Exact tests use a scripted LLM over real stores and ~40 real papers; one end-to-end test uses the real local
model (SmolLM2) on 200 imported papers through the CLI.
"""

from __future__ import annotations

import json
import re
import threading

import pytest

from copilot.cli import main
from copilot.config import load_settings
from copilot.features import chat_thoughts
from copilot.features.chat import Chat, ChatError
from copilot.features.stats import chat_stats, wilson_interval
from copilot.llm import LLMError
from copilot.methods.thought_drafts import is_row_thought
from copilot.prompts import CHAT_ANSWER
from copilot.services import Services
from tests.comparisons import KEEP_MEMORY_ROWS, thought_with_a_new_row
from tests.conftest import import_papers, make_settings
from tests.doubles import ScriptedBackend, rescript
from tests.helpers import forget_chat

QUESTION = "How do large language models use retrieval to answer questions?"
THOUGHT = "1\nLanguage models answer better when they retrieve supporting passages first [{}]."


def reply(messages) -> str:
    """An answer for answer prompts, a thought for thought prompts (whatever the order they come in)."""
    user = messages[-1]["content"]
    if "Step 1:" in user:
        return THOUGHT.format("ref")
    first_id = user.split('<source id="', 1)[1].split('"', 1)[0] if '<source id="' in user else "none"
    # the prompt's length tells the two sides apart: identical answers are shown as one and take no vote
    return f"Retrieval grounds the answer [{first_id}] ({len(user)})."


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One data dir with 40 real papers for the scripted tests (importing per test is slow on 2 cores)."""
    services = Services(make_settings(tmp_path_factory.mktemp("chat") / "data"), llm_backend=ScriptedBackend())
    import_papers(services, 40)
    return services


@pytest.fixture
def chat(shared, monkeypatch):
    """A fresh Chat over the shared papers; afterwards every turn, vote, job and thought is removed. Any unvoted
    answer may make a thought here (the floor it must clear: tests/test_thought_floor.py)."""
    monkeypatch.setattr(chat_thoughts, "UNVOTED_FLOOR", 0.0)
    chat = Chat(shared)
    yield chat
    forget_chat(chat)


@pytest.fixture
def scripted(chat):
    return rescript(chat.services, [reply] * 50)


def run(chat: Chat, question: str, user: str = "local"):
    turn = chat.prepare(question, user)
    for _ in chat.stream(turn):
        pass
    return turn


def seed_thought(chat: Chat, text: str = QUESTION) -> str:
    """A thought right on the question, so the thought-augmented retrieval differs from the raw one."""
    hit = chat.services.store.search("paper", chat.services.embedder.embed_one(text), 1)[0]
    return chat.memory.add(text, [(hit.id, "paper")], origin="test", check_redundant=False)


def test_empty_question_is_refused_without_an_llm_call(chat, scripted):
    for empty in ("", "   \n ", None):
        with pytest.raises(ChatError, match="Type a question"):
            chat.prepare(empty, "local")
    assert scripted.calls == []
    assert chat.db.query("SELECT * FROM chat_turns") == []


def test_long_question_is_truncated_with_a_notice(chat, scripted):
    turn = chat.prepare("What is retrieval? " * 2700, "local")  # 51,299 characters once stripped
    assert len(turn.question) == chat.settings.max_input_chars
    assert "51,299" in turn.notice and f"{chat.settings.max_input_chars:,}" in turn.notice
    assert chat.db.query_one("SELECT question_chars FROM chat_turns")["question_chars"] == 51300


def test_first_turn_has_no_comparison_and_its_thought_keeps_lineage(chat, scripted):
    turn = run(chat, QUESTION)
    assert turn.comparison == "same_items" and len(turn.answers) == 1
    assert turn.answers[0].text.startswith("Retrieval grounds the answer [")
    jobs = chat.wait_for_thoughts(turn.id, timeout=60)
    assert [(j["answer"], j["trigger"], j["status"]) for j in jobs] == [("raw", "no_comparison", "stored")]
    thought = chat.memory.get(jobs[0]["thought_id"])
    retrieved = [s.id for s in turn.answers[0].sources]
    assert [s["id"] for s in thought["sources"]] == retrieved and 1 < len(retrieved) <= chat.settings.top_k
    assert thought["root_sources"] == retrieved and thought["level"] == 2.0
    with pytest.raises(ChatError, match="same items"):
        chat.vote(turn.id, "thoughts", "local")
    assert chat_stats(chat.db)["no_comparison"] == 1 and chat_stats(chat.db)["decisive_votes"] == 0


def test_comparison_turn_votes_are_committed_changed_and_logged(chat, scripted):
    seeded = seed_thought(chat)
    turn = run(chat, QUESTION)
    assert turn.comparison == "yes"
    kinds = {a.label: a.kind for a in turn.answers}
    assert sorted(kinds.values()) == ["raw", "thoughts"]
    row = chat.db.query_one("SELECT side_a, comparison, raw_answer, thoughts_answer FROM chat_turns")
    assert row["side_a"] == kinds["A"] and row["comparison"] == "yes"
    augmented = next(a for a in turn.answers if a.kind == "thoughts")
    assert seeded in [s.id for s in augmented.sources] and augmented.thought_augmented
    assert f"[{seeded}]" in row["thoughts_answer"] or row["thoughts_answer"].startswith("Retrieval grounds")
    # no thought job yet: it waits for the vote
    assert chat.thought_jobs(turn.id) == []
    first = chat.vote(turn.id, "A", "local")
    assert first["choice"] == kinds["A"] and first["label"] == "A" and not first["changed"]
    assert chat.db.query_one("SELECT choice FROM chat_votes")["choice"] == kinds["A"]  # committed on return
    second = chat.vote(turn.id, "tie", "local")
    assert second["changed"] and second["previous"] == kinds["A"]
    again = chat.vote(turn.id, "tie", "local")
    assert not again["changed"]
    log = chat.db.query("SELECT choice, previous FROM chat_vote_log ORDER BY id")
    # every vote is logged, a repeated one too (issue #12: two tabs voting at once leave two log rows)
    assert [(r["choice"], r["previous"]) for r in log] == [(kinds["A"], None), ("tie", kinds["A"]), ("tie", "tie")]
    vote_row = chat.db.query_one("SELECT choice, label, changes FROM chat_votes")
    assert (vote_row["choice"], vote_row["label"], vote_row["changes"]) == ("tie", "tie", 1)
    jobs = chat.wait_for_thoughts(turn.id, timeout=60)
    assert {j["answer"] for j in jobs} == {"thoughts", "raw"} - ({"raw"} if kinds["A"] == "thoughts" else set())
    stored = [j["thought_id"] for j in jobs if j["status"] == "stored"]
    assert len(stored) == 1, jobs                                  # one thought per turn, from the tie's answer
    current = [j for j in jobs if j["superseded_at"] is None]
    assert [(j["answer"], j["status"]) for j in current] == [("thoughts", "stored")]
    new = chat.memory.get(stored[0])
    if jobs[0]["answer"] == "thoughts":
        assert {"id": seeded, "kind": "thought"} in new["sources"] and new["level"] > 2.0
    with pytest.raises(ChatError, match="another user"):
        chat.vote(turn.id, "raw", "mallory")
    with pytest.raises(ChatError, match="choice must be"):
        chat.vote(turn.id, "maybe", "local")


def test_sides_are_random_per_turn(chat, scripted):
    seed_thought(chat)
    sides = {run(chat, QUESTION + f" Variant {i}?").answers[0].kind for i in range(12)}
    assert sides == {"raw", "thoughts"}  # a fixed side would fail with probability 2 * 2**-12


def test_one_side_failing_keeps_the_other_and_blocks_voting(chat):
    seed_thought(chat)
    rescript(chat.services, [LLMError("endpoint down"), reply, reply])
    turn = run(chat, QUESTION)
    failed, ok = turn.answers[0], turn.answers[1]
    assert failed.error == "endpoint down" and failed.text == ""
    assert ok.error is None and ok.text.startswith("Retrieval grounds")
    assert turn.comparison == "failed"
    with pytest.raises(ChatError, match="failed"):
        chat.vote(turn.id, "A", "local")
    jobs = chat.wait_for_thoughts(turn.id, timeout=60)
    assert [(j["answer"], j["status"]) for j in jobs] == [(ok.kind, "stored")]
    record = chat.turn_record(turn.id)
    assert record["comparison"] is False and record["answers"][0]["error"] == "endpoint down"
    assert chat_stats(chat.db)["failed_turns"] == 1


def test_failed_thought_job_is_logged_and_the_vote_kept(chat):
    seed_thought(chat)
    rescript(chat.services, [reply, reply, LLMError("model crashed")])
    turn = run(chat, QUESTION)
    chat.vote(turn.id, "thoughts", "local")
    jobs = chat.wait_for_thoughts(turn.id, timeout=60)
    assert [(j["status"], j["error"]) for j in jobs] == [("failed", "LLMError: model crashed")]
    assert chat.db.query_one("SELECT choice FROM chat_votes WHERE turn_id = ?", (turn.id,))["choice"] == "thoughts"


def test_bad_vote_makes_no_thought_and_unvoted_turns_are_swept(chat, scripted):
    seed_thought(chat)
    bad = run(chat, QUESTION)
    chat.vote(bad.id, "bad", "local")
    unvoted = run(chat, QUESTION + " Please be brief.")
    assert chat.thought_jobs(bad.id) == [] and chat.thought_jobs(unvoted.id) == []
    run(chat, "Which benchmarks test question answering?")   # the next question sweeps the unvoted turn
    jobs = chat.wait_for_thoughts(unvoted.id, timeout=60)
    assert [(j["answer"], j["trigger"]) for j in jobs] == [("thoughts", "no_vote")]
    assert chat.thought_jobs(bad.id) == []


def test_the_swept_thought_waits_until_the_next_questions_answers_are_done(chat, scripted):
    seed_thought(chat)
    unvoted = run(chat, QUESTION)
    assert unvoted.comparison == "yes"
    turn = chat.prepare(QUESTION + " Please be brief.", "local")
    assert chat.thought_jobs(unvoted.id) == []          # asking does not start it: it would hold the local model
    streamed = chat.stream(turn)
    next(streamed)
    next(streamed)                                       # the first answer is being written
    assert chat.thought_jobs(unvoted.id) == []
    for _ in streamed:
        pass
    assert [j["trigger"] for j in chat.wait_for_thoughts(unvoted.id, timeout=60)] == ["no_vote"]
    assert chat.thought_jobs(turn.id) == []              # the new turn itself still waits for its vote


@pytest.mark.parametrize("wins, n, low, high",
                         [(8, 10, 0.4902, 0.9433), (0, 5, 0.0, 0.4345), (50, 100, 0.4038, 0.5962)])
def test_wilson_interval(wins, n, low, high):
    got_low, got_high = wilson_interval(wins, n)
    assert got_low == pytest.approx(low, abs=1e-4) and got_high == pytest.approx(high, abs=1e-4)


def test_stats_count_only_decisive_votes_in_the_rate(chat, scripted):
    seed_thought(chat)
    choices = ["thoughts", "thoughts", "raw", "tie", "bad"]
    for i, choice in enumerate(choices):
        chat.vote(run(chat, QUESTION + f" Case {i}.").id, choice, "local")
    run(chat, QUESTION + " Unvoted.")
    stats = chat_stats(chat.db)
    low, high = wilson_interval(2, 3)
    assert {k: stats[k] for k in ("decisive_votes", "thought_wins", "ties", "both_bad", "unvoted_comparisons")} == {
        "decisive_votes": 3, "thought_wins": 2, "ties": 1, "both_bad": 1, "unvoted_comparisons": 1}
    assert stats["win_rate"] == pytest.approx(2 / 3) and (stats["ci_low"], stats["ci_high"]) == (low, high)
    assert [p["decisive_votes"] for p in stats["over_time"]] == [1, 2, 3]


def test_cli_vote_and_stats_json(chat, scripted, monkeypatch, capsys):
    monkeypatch.setenv("COPILOT_DATA_DIR", str(chat.settings.data_dir))
    seed_thought(chat)
    turn = run(chat, QUESTION)
    with pytest.raises(SystemExit):
        main(["vote", turn.id, "sometimes"])
    capsys.readouterr()
    assert main(["vote", "no-such-turn", "raw"]) == 2
    assert "no turn with id" in capsys.readouterr().err
    assert main(["stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    for key in ("decisive_votes", "thought_wins", "win_rate", "ci_low", "ci_high", "ties", "both_bad", "no_comparison"):
        assert key in stats
    assert stats["decisive_votes"] == 0 and stats["win_rate"] is None
    assert main(["ask", "   ", "--json"]) == 2
    assert "Type a question" in capsys.readouterr().err


def test_end_to_end_with_the_real_local_model(services, settings, monkeypatch, capsys):
    """ask → (no thought yet) one answer and a thought → a related question, with a thought in memory that brings
    a paper the papers alone miss, is a blind comparison whose thought-augmented side retrieves the first thought →
    the vote is recorded, logged and counted."""
    import_papers(services, 200)
    for name, value in {"COPILOT_DATA_DIR": str(settings.data_dir), "COPILOT_LLM": "local",
                        "COPILOT_SCHEDULER": "false", "COPILOT_ANSWER_MAX_TOKENS": "48",
                        "COPILOT_CONTEXT_TOKENS": "600", "COPILOT_LLM_TIMEOUT": "600",
                        "COPILOT_LOCAL_THREADS": "1", "COPILOT_THOUGHT_ROW_MARGIN": str(KEEP_MEMORY_ROWS)}.items():
        monkeypatch.setenv(name, value)

    def ask(question: str) -> dict:
        assert main(["ask", question, "--json"]) == 0
        out = capsys.readouterr().out
        assert out.count("\n") == 1
        return json.loads(out)

    first = ask("How are large language models evaluated on reasoning benchmarks?")
    assert first["comparison"] is False and len(first["answers"]) == 1
    assert first["answers"][0]["text"] and first["answers"][0]["sources"]
    assert all(s["kind"] == "paper" and s["title"] for s in first["answers"][0]["sources"])
    assert first["models"]["backend"] == "local"
    job = first["thought_jobs"][0]
    assert job["status"] == "stored", job
    thought_id = job["thought_id"]

    second_question = "Which reasoning benchmarks are used to evaluate large language models?"
    # the first thought re-quotes the papers the related question's plain retrieval shows (one answer, nothing to
    # vote on: issue #40); a thought on a paper beyond that pool makes it a comparison
    assert thought_with_a_new_row(Services(load_settings()), second_question), "no paper makes the tables differ"
    second = ask(second_question)
    stored = Chat(services).log.turn(second["turn_id"])
    assert thought_id in [s.id for s in stored.thoughts.sources]        # memory was retrieved for the related question
    assert stored.comparison == "yes", stored.comparison
    assert second["comparison"] is True and second["sides_hidden"] is True, second   # blind until the vote
    assert len(second["answers"]) == 2 and all(a["text"] and "sources" not in a for a in second["answers"])
    assert second["answers"][0]["text"] != second["answers"][1]["text"]
    assert set(second["timings"]) == {"total_s"}
    assert second["thought_jobs"] == []                                  # its thought waits for the vote

    assert main(["vote", second["turn_id"], "thoughts", "--json"]) == 0
    voted = json.loads(capsys.readouterr().out)
    assert voted["recorded"] and voted["choice"] == "thoughts" and voted["counted"]
    by_kind = {a["thought_augmented"]: a for a in voted["answers"]}    # the vote reveals the sides
    assert thought_id in [s["id"] for s in by_kind[True]["sources"]]
    assert all(s["kind"] == "paper" for s in by_kind[False]["sources"])
    votes = services.db.query("SELECT turn_id, user, choice FROM chat_votes")
    logged = services.db.query("SELECT turn_id, choice, previous FROM chat_vote_log")
    assert [(v["turn_id"], v["user"], v["choice"]) for v in votes] == [(second["turn_id"], "local", "thoughts")]
    assert [(v["turn_id"], v["choice"], v["previous"]) for v in logged] == [(second["turn_id"], "thoughts", None)]
    assert main(["stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["decisive_votes"], stats["thought_wins"], stats["no_comparison"]) == (1, 1, 1)
    memory = Chat(services).memory
    first_thought = memory.get(thought_id)
    # the default (tiny) profile answers with the evidence table: the thought is its rows (title: "quote"), its
    # lineage their papers (issue #40)
    assert first_thought["root_sources"] and set(first_thought["root_sources"]) <= {
        s["id"] for s in first["answers"][0]["sources"]}
    assert is_row_thought(first_thought["text"])
    assert not re.search(r"\[\d{1,3}\]|\b\d{4}\.\d{4,5}\b", first_thought["text"])      # no labels, no raw ids
    assert memory.level(thought_id) == 2.0


def test_empty_library_is_refused_before_any_model_runs(settings):
    backend = ScriptedBackend([])
    services = Services(settings, llm_backend=backend)
    with pytest.raises(ChatError, match="library is empty"):
        Chat(services).prepare("What is new in retrieval?", "local")
    assert backend.calls == [] and services.db.query("SELECT * FROM chat_turns") == []


def test_personalized_answers_carry_the_users_profile(chat, scripted):
    from copilot.features.profile import save_profile

    save_profile(chat.services, "ann", "I study <b>retrieval</b> for low-resource languages.", "retrieval", [])
    turn = chat.prepare(QUESTION, "ann", personalize=True)
    for _ in chat.stream(turn):
        pass
    chat.wait_for_all(timeout=60)       # its background thought job calls the model too: find the answer call
    [prompt] = [c.messages[-1]["content"] for c in scripted.calls if c.messages[0]["content"] == CHAT_ANSWER.system]
    assert "research profile" in prompt and "low-resource languages" in prompt
    assert chat.db.query_one("SELECT personalized FROM chat_turns WHERE id = ?", (turn.id,))["personalized"] == 1
    plain = chat.prepare(QUESTION, "bob", personalize=True)   # no profile saved: nothing added
    assert plain.reader == ""


def test_a_larger_local_model_writes_free_text_with_the_checks_on(settings, monkeypatch):
    """Through the real local model, taken as a larger one (the size threshold lowered below its 135M): both
    answers are written without a grammar, and every citation they keep names one of their own sources."""
    from copilot import model_profile
    from copilot.llm.local import LocalBackend

    monkeypatch.setattr(model_profile, "TINY_BELOW_PARAMETERS", 100_000_000)
    services = Services(settings.model_copy(update={"context_tokens": 600}))
    assert services.model_profile.writes and not services.generation.grammars and not services.llm.obeys_grammar
    import_papers(services, 200)
    grammars = []
    real_stream = LocalBackend.stream

    def spy(self, messages, max_tokens, temperature, usage, grammar=None):
        grammars.append(grammar)
        return real_stream(self, messages, max_tokens, temperature, usage, grammar)

    monkeypatch.setattr(LocalBackend, "stream", spy)
    chat = Chat(services)
    seed = run(chat, "How are large language models evaluated on reasoning benchmarks?")
    chat.wait_for_thoughts(seed.id, timeout=300)
    turn = run(chat, "Which reasoning benchmarks are used to evaluate large language models?")
    assert grammars and all(g is None for g in grammars)
    for answer in turn.answers:
        assert answer.text.strip() and answer.sources
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", answer.text)}
        assert cited <= set(range(1, len(answer.sources) + 1)), (cited, answer.text)


def test_a_double_click_on_ask_keeps_one_turn(chat):
    """The Ask button takes a click on a running event (so a question can be asked while the last one reads full
    text): a double click asks twice. The first ask, replaced before its answers were done, is dropped, not kept in
    the history as a failed answer; the second is answered (the page's handlers, as the button calls them)."""
    import gradio as gr

    from copilot.ui.chat.ask import ask_view

    page = gr.Request(username="dora", session_hash="double-click")
    first = ask_view(chat.services, QUESTION, False, None, page)
    first_id = next(first)[5]                        # retrieved, the answers not done yet
    second = list(ask_view(chat.services, QUESTION, False, None, page))
    assert second[-1][5] != first_id and "failed" not in str(second[-1][0])
    rest = list(first)       # nothing more shown: one frame that changes nothing (Gradio sends a stream's last
    assert len(rest) == 1 and all(part == gr.update() for part in rest[0])      # frame again at its end)
    assert chat.log.turn(first_id) is None
    assert [row["id"] for row in chat.recent_turns("dora")] == [second[-1][5]]

    other = ask_view(chat.services, QUESTION, False, None, page)
    other_id = next(other)[5]                        # another question meanwhile: an API client asking several
    assert "Which" in str(list(ask_view(chat.services, "Which benchmarks test retrieval?", False, None, page))[-1][0])
    assert list(other) and chat.log.turn(other_id).finished_at is not None, "each question is answered"


def test_a_one_answer_turn_is_judged_by_its_user_apart_from_the_blind_votes(chat, scripted, monkeypatch):
    """#59 item 11: a turn with nothing to compare cannot be voted on; its user keeps it ("Remember this answer": its
    thought is made as a preferred answer's is, even when the unvoted floor refused it) or dismisses it (none). No
    blind statistic counts a judgement."""
    monkeypatch.setattr(chat_thoughts, "UNVOTED_FLOOR", 1.01)      # on its own, the answer makes no thought
    turn = run(chat, QUESTION)
    assert turn.comparison == "same_items"
    [unvoted] = chat.wait_for_thoughts(turn.id, timeout=60)
    assert (unvoted["trigger"], unvoted["status"]) == ("no_comparison", "under_floor")
    with pytest.raises(ChatError, match="another user"):
        chat.judge(turn.id, "keep", "someone-else")
    with pytest.raises(ChatError, match="judgement is one of"):
        chat.judge(turn.id, "A", "local")
    assert chat.judge(turn.id, "keep", "local")["recorded"] and chat.judgement(turn.id) == "keep"
    [kept] = [j for j in chat.wait_for_thoughts(turn.id, timeout=60) if j["superseded_at"] is None]
    assert (kept["trigger"], kept["status"]) == ("judgement", "stored"), kept
    assert chat.memory.get(kept["thought_id"]) is not None
    stats = chat_stats(chat.db)
    assert (stats["decisive_votes"], stats["no_comparison"]) == (0, 1)
    assert chat.judge(turn.id, "dismiss", "local")["previous"] == "keep"
    chat.wait_for_thoughts(turn.id, timeout=60)
    assert chat.services.thoughts.get(kept["thought_id"], include_hidden=True).retracted_at is not None
    assert not chat.log.forget_turn(turn.id), "a judged turn was forgotten"
    # judged while its own unvoted job still waits in the queue (the thought thread busy): the judgement decides
    release = threading.Event()
    chat.jobs.submit("busy", release.wait, 60)
    soon = run(chat, "Which methods let language models retrieve passages before answering?")
    assert soon.comparison == "same_items"
    chat.judge(soon.id, "keep", "local")
    release.set()
    [kept] = [j for j in chat.wait_for_thoughts(soon.id, timeout=60) if j["superseded_at"] is None]
    assert (kept["trigger"], kept["status"]) == ("judgement", "stored"), kept
    seed_thought(chat)
    compared = run(chat, QUESTION)
    assert compared.comparison == "yes"
    with pytest.raises(ChatError, match="gets a vote"):
        chat.judge(compared.id, "keep", "local")


def test_a_past_turn_reopened_is_not_covered_by_the_turn_still_being_answered(chat):
    """Reopening a past question while the last one's answers still update (its papers' full text): the live turn
    stops writing into the boxes, as it does for a newer question, so the reopened turn stays on the page."""
    import gradio as gr

    from copilot.ui.chat.ask import ask_view, reopen_view

    page = gr.Request(username="erin", session_hash="reopen-while-reading")
    past = list(ask_view(chat.services, QUESTION, False, None, page))[-1][5]
    live = ask_view(chat.services, "Which benchmarks test retrieval?", False, None, page)
    for frame in live:
        if "chat-time" in frame[0]:          # "Answered in …": the answers are shown
            break
    reopened = reopen_view(chat.services, past, page)
    assert reopened[5] == past and "reopened from your history" in reopened[0]
    rest = list(live)
    assert len(rest) == 1 and all(part == gr.update() for part in rest[0]), "the live turn wrote over the reopened"
