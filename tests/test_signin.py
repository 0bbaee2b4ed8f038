"""Issue #50: a signed-in visitor's answers are written through Hugging Face's inference router with their own token.

Real stores over 40 real papers and the real embedder; the router is a loopback HTTPS double (tests/router_double.py)
that checks the bearer of every request. The Space's own model stays the packaged tiny one (never loaded here)."""

from __future__ import annotations

import inspect
import json
import threading
import time

import gradio as gr
import pytest
from gradio.helpers import special_args

from copilot.errors import UserError
from copilot.features import backup as B
from copilot.features import chat_thoughts
from copilot.features.answers import table_text
from copilot.features.chat import SWEEP_AFTER_S, Chat
from copilot.features.preferences import export_preferences
from copilot.features.signin import (
    NO_INFERENCE_SCOPE,
    SIGN_IN_ADDS,
    WHERE_WORDS_GO,
    oauth_writer,
    picker_shown,
    sign_in_note,
)
from copilot.features.signin import visitor_writer as make_writer
from copilot.features.stats import chat_stats
from copilot.llm import router
from copilot.methods.evidence_text import render_table
from copilot.methods.thought_drafts import is_row_thought
from copilot.services import Services
from copilot.ui.chat.ask import ask_view, vote_view
from copilot.ui.chat.render import turn_outputs
from tests.conftest import import_papers, make_settings
from tests.doubles import FakeHub
from tests.helpers import PAPERS_JSONL, clean_env, run_cli_in_process
from tests.router_double import RouterDouble, Visitor
from tests.tls import make_certificate, trust_env

QUESTION = "How are retrieval-augmented language models evaluated?"
ANN, BOB = "hf_ann_0f3c9a7d5e2b4c18a6d0e9f7b3c5a1d2", "hf_bob_7e1d4b9c2a6f4e30b8c7d5a9e1f3b6c4"
CANARY = "hf_canary_3b9e7f1a5c2d4e68a0b4c7d9e2f5a8c1"
FAILING = {"401": router.SIGN_IN_AGAIN, "402": router.NO_CREDITS, "429": router.RATE_LIMITED,
           "503": router.PROVIDER_FAILED.format(status=503)}
TIMEOUT_S = 3.0


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(services, router double) over one data dir with 40 real papers; the router's tokens: ann, bob, the canary,
    and one per failure."""
    root = tmp_path_factory.mktemp("signin")
    certificate = make_certificate(root / "tls")
    visitors = {ANN: Visitor("ann"), BOB: Visitor("bob"), CANARY: Visitor("carol")}
    visitors |= {f"hf_fail_{mode}_5d8e2a7c9b1f4a3e": Visitor(f"failing-{mode}", mode)
                 for mode in (*FAILING, "stall", "drip")}
    with pytest.MonkeyPatch.context() as patch, RouterDouble(certificate, visitors) as double:
        clean_env(patch)
        for name, value in trust_env(certificate).items():
            patch.setenv(name, value)
        # merge threshold 0.99: the router double's one thought text is close to the seeded one (not redundant here)
        settings = make_settings(root / "data", hf_router_url=double.url, hf_timeout=TIMEOUT_S, merge_threshold=0.99,
                                 hub_backup="tester/copilot-backup", hub_token="hf_write_token_for_the_backup_only")
        services = Services(settings)
        import_papers(services, 40)
        yield services, double


@pytest.fixture
def chat(world):
    services, double = world
    chat = Chat(services)
    double.seen.clear()
    double.piece_delay = 0.0
    yield chat
    chat.wait_for_all(timeout=60)
    ids = services.store.thoughts.get()["ids"]
    if ids:
        services.store.thoughts.delete(ids=ids)
    with services.db.transaction() as tx:
        for table in ("chat_vote_log", "chat_votes", "chat_judgements", "chat_thought_jobs",
                      "chat_turns", "thought_edges", "thoughts",
                      "llm_calls"):
            tx.execute(f"DELETE FROM {table}")


def seed_thought(chat: Chat) -> None:
    """A thought right on the question, so the thought side's retrieval differs from papers only (a comparison)."""
    hit = chat.services.store.search("paper", chat.services.embedder.embed_one(QUESTION), 1)[0]
    chat.memory.add(QUESTION, [(hit.id, "paper")], origin="test", check_redundant=False)


def writer_for(chat: Chat, token: str):
    return make_writer(chat.services, token)


def run(chat: Chat, token: str | None, user: str = "ann", question: str = QUESTION):
    """A whole turn; → (turn, the times the first piece of each answer came after its table was shown)."""
    turn = chat.prepare(question, user, writer=writer_for(chat, token) if token else None)
    shown: dict[str, float] = {}
    first: dict[str, float] = {}
    for live in chat.stream(turn):
        for answer in live.answers:
            if answer.table is not None and answer.label not in shown:
                shown[answer.label] = time.perf_counter()
            if answer.text and answer.label not in first:
                first[answer.label] = time.perf_counter() - shown[answer.label]
    return turn, first


def test_a_signed_in_turn_is_two_streamed_answers_written_with_the_visitors_token(chat, world):
    services, double = world
    seed_thought(chat)
    double.piece_delay = 0.02
    pieces: list[int] = []
    turn = chat.prepare(QUESTION, "ann", writer=writer_for(chat, ANN))
    for live in chat.stream(turn):
        pieces.append(sum(len(a.text) for a in live.answers))
    assert turn.comparison == "yes" and len(turn.answers) == 2
    assert [(s.token, s.kind) for s in double.seen] == [(ANN, "answer"), (ANN, "answer")]
    assert {s.model for s in double.seen} == {services.settings.hf_model}
    assert len(set(pieces)) > 10, "the answers came whole, not streamed"
    for answer in turn.answers:
        assert answer.error is None and answer.text.startswith("Written for ann")
        assert answer.text.endswith("".join(render_table(answer.table)))    # the table under the written words
    stored = services.chat_log.turn(turn.id)
    assert (stored.backend, stored.model) == ("hf-router", services.settings.hf_model)
    notice, a, b = turn_outputs(chat.view(turn.id, "ann"))
    assert f"written by {services.settings.hf_model} on Hugging Face" in notice
    assert ANN not in json.dumps([notice, a, b, repr(turn)])


def test_the_first_written_words_come_within_a_second_of_the_table(chat, world):
    seed_thought(chat)
    _, first = run(chat, ANN)
    assert set(first) == {"A", "B"} and max(first.values()) <= 1.0, first


def test_not_signed_in_or_without_the_inference_scope_is_the_tiny_turn_and_the_page_says_what_signing_in_adds(
        chat, world):
    services, double = world
    expires = int(time.time()) + 3600
    assert oauth_writer(services, None) is None
    assert oauth_writer(services, gr.OAuthToken(token=ANN, scope="openid profile", expires_at=expires)) is None
    assert oauth_writer(services, gr.OAuthToken(token=ANN, scope="", expires_at=expires)) is None   # an API caller's
    assert oauth_writer(services, gr.OAuthToken(token=ANN, scope="openid profile inference-api",
                                                expires_at=expires)) is not None
    model = services.settings.hf_model
    assert sign_in_note(services, None) == SIGN_IN_ADDS.format(model=model)
    assert sign_in_note(services, gr.OAuthToken(ANN, "openid profile", expires)) == NO_INFERENCE_SCOPE.format(
        model=model)
    said = sign_in_note(services, gr.OAuthToken(ANN, "openid profile inference-api", expires))
    assert said == WHERE_WORDS_GO.format(model=f"{model} or the model you pick below")
    assert "Hugging Face's inference provider" in said
    turn, _ = run(chat, None)
    first = turn.answers[0]
    assert double.seen == [] and not turn.writes and first.text == table_text(first.table, first.sources).strip()
    assert chat.services.chat_log.turn(turn.id).backend == "local"


def test_two_visitors_asking_at_once_each_send_only_their_own_token(chat, world):
    _, double = world
    seed_thought(chat)
    double.piece_delay = 0.03
    turns: dict[str, object] = {}

    def ask(user: str, token: str) -> None:
        turns[user] = run(chat, token, user=user)[0]

    threads = [threading.Thread(target=ask, args=(user, token)) for user, token in (("ann", ANN), ("bob", BOB))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    by_token = {token: [s for s in double.seen if s.token == token] for token in (ANN, BOB)}
    assert len(by_token[ANN]) == 2 and len(by_token[BOB]) == 2 and len(double.seen) == 4
    ann_first, bob_first = by_token[ANN][0], by_token[BOB][0]
    assert max(ann_first.started, bob_first.started) < min(ann_first.ended, bob_first.ended), "not at once"
    for user in ("ann", "bob"):
        texts = [a.text for a in turns[user].answers]
        assert all(t.startswith(f"Written for {user} ") for t in texts), texts


def test_a_turn_replaced_while_its_second_answer_streams_is_forgotten_with_no_thought_job(chat, world):
    """Issue #58 item 4: the page asked again while B was still being written (A done). Closing the stream finished
    the turn as "failed" and queued a `no_comparison` thought job (one more call billed to the visitor), and that
    job made `forget_turn` refuse: the half-answered turn stayed in the history. Nobody saw it answered: it goes,
    and nothing is made of it."""
    services, double = world
    seed_thought(chat)
    double.piece_delay = 0.03
    turn = chat.prepare(QUESTION, "ann", writer=writer_for(chat, ANN))
    stream = chat.stream(turn)
    for live in stream:
        first, second = live.answers
        if first.done and second.text:
            break
    assert turn.comparison == "pending" and not turn.answers[1].done, "B was not streaming when replaced"
    chat.replaced(turn, stream)
    chat.wait_for_all(timeout=60)
    assert services.chat_log.turn(turn.id) is None, "the replaced turn was kept"
    assert services.chat_log.jobs_of(turn.id) == []
    assert [s.kind for s in double.seen] == ["answer", "answer"], "a thought was drafted from it"
    assert chat.recent_turns("ann") == []


@pytest.mark.parametrize("mode", [*FAILING, "stall", "drip"])
def test_a_router_failure_reads_as_its_sentence_with_the_table_instead_and_is_not_retried(chat, world, mode):
    services, double = world
    seed_thought(chat)
    token = f"hf_fail_{mode}_5d8e2a7c9b1f4a3e"
    started = time.monotonic()
    turn, _ = run(chat, token)
    took = time.monotonic() - started
    sentence = FAILING.get(mode) or router.TOO_SLOW.format(model=services.settings.hf_model, seconds=TIMEOUT_S)
    assert len(double.seen) == 1, "a failure was retried, or the other side asked again"
    assert took < TIMEOUT_S + 5, took
    stored = services.chat_log.turn(turn.id)
    assert stored.comparison == "failed"
    for answer in turn.answers:
        assert answer.error == sentence
        assert answer.table is not None and answer.table.rows
        assert answer.text == table_text(answer.table, answer.sources).strip()
        assert stored.answer(answer.kind).error == sentence
    notice, a, b = turn_outputs(chat.view(turn.id, "ann"))
    page = notice + a + b
    assert sentence.replace("'", "&#x27;") in page and token not in page
    assert token not in json.dumps([dict(r) for r in services.db.query("SELECT * FROM llm_calls")])


def test_a_preferred_written_answer_becomes_a_written_thought_with_lineage(chat, world):
    services, double = world
    seed_thought(chat)
    turn, _ = run(chat, ANN)
    assert turn.comparison == "yes"
    chosen = turn.answers[0]
    result = chat.vote(turn.id, "A", "ann", writer=writer_for(chat, ANN))
    [job] = [j for j in chat.wait_for_thoughts(turn.id, timeout=60) if j["superseded_at"] is None]
    assert result["recorded"] and job["status"] == "stored", job
    thought = services.thoughts.get(job["thought_id"], include_hidden=True)
    assert thought.origin == f"chat, written by {services.settings.hf_model}"
    assert thought.text.startswith("Retrieval-augmented language models are evaluated both")
    assert [s.kind for s in double.seen] == ["answer", "answer", "thought"]
    assert double.seen[-1].token == ANN
    reachable = {s.id for s in chosen.sources if s.kind == "paper"}
    for source in (s for s in chosen.sources if s.kind == "thought"):
        reachable |= set(services.thought_memory.root_sources(source.id))
    roots = set(services.thought_memory.root_sources(job["thought_id"]))
    assert roots and roots <= reachable, (roots, reachable)


def test_written_and_quoted_comparisons_are_kept_apart_in_the_export_and_the_statistics(chat, world, tmp_path):
    services, _ = world
    seed_thought(chat)
    written, _ = run(chat, ANN)
    quoted, _ = run(chat, None, question="Which benchmarks measure retrieval-augmented generation?")
    assert written.comparison == "yes"
    for turn in (written, quoted):
        if turn.comparison == "yes":        # the quoted one is a comparison only where memory changed its table
            chat.vote(turn.id, "A", "ann")
    exported = export_preferences(services, out=tmp_path / "prefs.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "prefs.jsonl").read_text().splitlines()]
    assert exported["count"] == len(rows) >= 1
    policies = {row["turn_id"]: {a["policy"] for a in row["answers"]} for row in rows}
    assert policies[written.id] == {f"model:{services.settings.hf_model}"}
    if quoted.id in policies:
        assert policies[quoted.id] == {"extractive"}
    stats = chat_stats(services.db)
    by_policy = stats["by_policy"]
    assert by_policy[f"model:{services.settings.hf_model}"]["decisive_votes"] == 1
    assert sum(group["decisive_votes"] for group in by_policy.values()) == stats["decisive_votes"]


def test_a_canary_token_reaches_no_file_log_backup_or_export(chat, world, tmp_path, caplog):
    services, double = world
    caplog.set_level("DEBUG")
    seed_thought(chat)
    turn, _ = run(chat, CANARY, user="carol")
    assert turn.comparison == "yes"          # the vote with the token, and its drafted thought, are on the path
    chat.vote(turn.id, "A", "carol", writer=writer_for(chat, CANARY))
    chat.wait_for_thoughts(turn.id, timeout=60)
    assert any(s.token == CANARY and s.kind == "thought" for s in double.seen), double.seen
    double.visitors[CANARY] = Visitor("carol", "401")       # the same token, now refused: a failure
    try:
        failed, _ = run(chat, CANARY, user="carol")
    finally:
        double.visitors[CANARY] = Visitor("carol")
    assert failed.answers[0].error == router.SIGN_IN_AGAIN
    assert any(s.token == CANARY for s in double.seen) and chat.services.db.query("SELECT id FROM llm_calls")
    export_preferences(services, out=services.settings.data_dir / "exports" / "prefs.jsonl")
    hub = FakeHub(tmp_path / "hub")
    assert B.backup_now(services, api=hub)["status"] == "ok"
    found = [p for root in (services.settings.data_dir, tmp_path / "hub") for p in root.rglob("*")
             if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert found == [] and CANARY not in caplog.text


def test_the_ui_handlers_take_a_real_oauth_token(chat, world):
    services, double = world
    seed_thought(chat)
    token = gr.OAuthToken(token=ANN, scope="openid profile inference-api", expires_at=int(time.time()) + 3600)
    outputs = list(ask_view(services, QUESTION, False, None, None, token))
    notice, a, b, vote_row, _, turn_id, _ = outputs[-1]
    assert "Written for ann" in a and "Written for ann" in b["value"]
    assert "on Hugging Face&#x27;s inference router" in notice and [s.token for s in double.seen] == [ANN, ANN]
    status, *_ = vote_view(services, "A", turn_id, None, token)
    assert "Vote recorded" in status
    chat.wait_for_thoughts(turn_id, timeout=60)
    assert [s.kind for s in double.seen] == ["answer", "answer", "thought"] and double.seen[-1].token == ANN


def test_the_cli_answers_as_the_signed_in_visitor_whose_token_the_variable_holds(chat, world, monkeypatch, capsys):
    services, double = world
    seed_thought(chat)
    s = services.settings
    for name, value in {"COPILOT_DATA_DIR": str(s.data_dir), "COPILOT_LLM": "local", "COPILOT_SCHEDULER": "false",
                        "COPILOT_HF_ROUTER_URL": s.hf_router_url, "VISITOR_TOKEN": BOB}.items():
        monkeypatch.setenv(name, value)
    code, record, err = run_cli_in_process(capsys, "ask", QUESTION, "--user", "bob", "--hf-token-env",
                                           "VISITOR_TOKEN", "--json")
    assert code == 0, err
    assert record["models"]["backend"] == "hf-router" and record["models"]["model"] == s.hf_model
    assert all(a["text"].startswith("Written for bob") for a in record["answers"])
    assert {x.token for x in double.seen} == {BOB} and BOB not in json.dumps(record) + err
    monkeypatch.delenv("VISITOR_TOKEN")
    code, _, err = run_cli_in_process(capsys, "ask", QUESTION, "--hf-token-env", "VISITOR_TOKEN")
    assert code != 0 and "VISITOR_TOKEN" in err


def test_a_vote_without_the_visitors_sign_in_makes_the_thought_from_the_written_answers_table(chat, world):
    """A thought job with no writer (resumed after a restart, swept, or a vote from a script without the token): the
    tiny model never drafts from a capable model's words; the thought is the answer's table rows."""
    services, double = world
    seed_thought(chat)
    turn, _ = run(chat, ANN)
    assert turn.comparison == "yes"
    chat.vote(turn.id, "A", "ann")
    [job] = [j for j in chat.wait_for_thoughts(turn.id, timeout=60) if j["superseded_at"] is None]
    # the table's rows close enough to the question make the thought; on these 40 papers there may be none
    assert job["status"] in ("stored", "not_an_answer"), job
    if job["status"] == "stored":
        thought = services.thoughts.get(job["thought_id"], include_hidden=True)
        assert thought.origin == "chat" and is_row_thought(thought.text)
    assert [s.kind for s in double.seen] == ["answer", "answer"]
    called = {row["backend"] for row in services.db.query("SELECT backend FROM llm_calls")}
    assert called == {"hf-router"}, "another model drafted from the written answer"


def test_a_visitors_turn_ending_drafts_no_other_visitors_thought_with_their_token(chat, world, monkeypatch):
    """#58: ending Bob's turn sweeps Ann's unvoted comparison past its grace period; its thought is made without
    Bob's token (from its table), so nothing of Ann's goes to the router billed to Bob, nor under Ann's token."""
    services, double = world
    monkeypatch.setattr(chat_thoughts, "UNVOTED_FLOOR", 0.0)    # every swept table would make a thought
    seed_thought(chat)
    ann_turn, _ = run(chat, ANN, user="ann")
    assert ann_turn.comparison == "yes"
    services.db.execute("UPDATE chat_turns SET created_at = ? WHERE id = ?",
                        (time.time() - SWEEP_AFTER_S - 60, ann_turn.id))
    double.seen.clear()
    run(chat, BOB, user="bob", question="Which benchmarks measure hallucination in summarization?")
    chat.wait_for_all(timeout=60)
    [job] = [j for j in chat.thought_jobs(ann_turn.id) if j["superseded_at"] is None]
    # its table's rows make the thought, or none if no row is close enough; no model drafts it
    assert job["trigger"] == "no_vote" and job["status"] in ("stored", "not_an_answer"), job
    assert [(s.token, s.kind) for s in double.seen] == [(BOB, "answer")] * len(double.seen), double.seen
    if job["status"] == "stored":
        thought = services.thoughts.get(job["thought_id"], include_hidden=True)
        assert thought.origin == "chat" and is_row_thought(thought.text) and thought.user == "ann"


# --- the short model list (a visitor picks which model writes)
def test_two_visitors_picking_different_models_at_once_each_get_theirs_named_in_the_status_line(chat, world):
    services, double = world
    seed_thought(chat)
    double.piece_delay = 0.03
    default, other = services.settings.hf_model_choices()[:2]
    picks = {"ann": (ANN, default), "bob": (BOB, other)}
    turns: dict[str, object] = {}

    def ask(user: str) -> None:
        token, model = picks[user]
        turn = chat.prepare(QUESTION, user, writer=make_writer(services, token, model=model))
        for _ in chat.stream(turn):
            pass
        turns[user] = turn

    threads = [threading.Thread(target=ask, args=(user,)) for user in picks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert {(s.token, s.model) for s in double.seen} == {(ANN, default), (BOB, other)} and len(double.seen) == 4
    ann_first, bob_first = (next(s for s in double.seen if s.token == t) for t in (ANN, BOB))
    assert max(ann_first.started, bob_first.started) < min(ann_first.ended, bob_first.ended), "not at once"
    for user, (_, model) in picks.items():
        assert services.chat_log.turn(turns[user].id).model == model
        notice, _, _ = turn_outputs(chat.view(turns[user].id, user))
        assert f"written by {model} on Hugging Face" in notice


def test_a_model_not_offered_is_refused_with_a_sentence_and_nothing_is_sent(chat, world, monkeypatch, capsys):
    services, double = world
    token = gr.OAuthToken(token=ANN, scope="openid profile inference-api", expires_at=int(time.time()) + 3600)
    notice, *_ = list(ask_view(services, QUESTION, False, None, None, token, "evil/any-model"))[-1]
    assert "evil/any-model is not one of the models offered here" in notice
    assert services.settings.hf_model in notice and double.seen == []
    with pytest.raises(UserError, match="not one of the models offered"):
        make_writer(services, None, model="x" * 5000)           # refused even without a token, and cut short
    s = services.settings
    for name, value in {"COPILOT_DATA_DIR": str(s.data_dir), "COPILOT_LLM": "local", "COPILOT_SCHEDULER": "false",
                        "COPILOT_HF_ROUTER_URL": s.hf_router_url, "VISITOR_TOKEN": BOB}.items():
        monkeypatch.setenv(name, value)
    code, _, err = run_cli_in_process(capsys, "ask", QUESTION, "--hf-token-env", "VISITOR_TOKEN", "--hf-model",
                                      "evil/any-model")
    assert code != 0 and "evil/any-model is not one of the models offered here" in err and double.seen == []
    code, _, err = run_cli_in_process(capsys, "ask", QUESTION, "--hf-model", s.hf_model_choices()[1])
    assert code != 0 and "--hf-token-env" in err and double.seen == []


def test_the_cli_and_the_page_send_the_picked_model_and_its_thought_is_drafted_by_it(chat, world, monkeypatch,
                                                                                      capsys):
    services, double = world
    seed_thought(chat)
    s = services.settings
    other = s.hf_model_choices()[1]
    for name, value in {"COPILOT_DATA_DIR": str(s.data_dir), "COPILOT_LLM": "local", "COPILOT_SCHEDULER": "false",
                        "COPILOT_HF_ROUTER_URL": s.hf_router_url, "VISITOR_TOKEN": BOB}.items():
        monkeypatch.setenv(name, value)
    code, record, err = run_cli_in_process(capsys, "ask", QUESTION, "--user", "bob", "--hf-token-env",
                                           "VISITOR_TOKEN", "--hf-model", other, "--json")
    assert code == 0, err
    assert record["models"]["model"] == other and {x.model for x in double.seen} == {other}
    double.seen.clear()
    token = gr.OAuthToken(token=ANN, scope="openid profile inference-api", expires_at=int(time.time()) + 3600)
    notice, _, _, _, _, turn_id, _ = list(ask_view(services, QUESTION, False, None, None, token, other))[-1]
    assert f"written by {other} on Hugging Face" in notice
    status, *_ = vote_view(services, "A", turn_id, None, token)
    assert "Vote recorded" in status
    chat.wait_for_thoughts(turn_id, timeout=60)
    assert [(x.kind, x.model) for x in double.seen] == [("answer", other), ("answer", other), ("thought", other)]


def test_the_model_picker_shows_only_to_a_visitor_signed_in_with_inference(world):
    services, _ = world
    expires = int(time.time()) + 3600
    assert not picker_shown(services, None)
    assert not picker_shown(services, gr.OAuthToken(ANN, "openid profile", expires))
    assert picker_shown(services, gr.OAuthToken(ANN, "openid profile inference-api", expires))
    one = Services(services.settings.model_copy(update={"hf_models": []}))
    assert not picker_shown(one, gr.OAuthToken(ANN, "openid profile inference-api", expires))   # nothing to pick
    note = sign_in_note(services, gr.OAuthToken(ANN, "openid profile inference-api", expires))
    assert "or the model you pick below" in note


# --- `eval answers` and `eval all` as a signed-in visitor (--hf-token-env, --hf-model)
def _cli_env(monkeypatch, services, **more: str) -> None:
    s = services.settings
    for name, value in {"COPILOT_DATA_DIR": str(s.data_dir), "COPILOT_LLM": "local", "COPILOT_SCHEDULER": "false",
                        "COPILOT_HF_ROUTER_URL": s.hf_router_url, **more}.items():
        monkeypatch.setenv(name, value)


def _holding(root, token: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]


def test_eval_answers_is_written_by_the_visitors_picked_model_through_the_router(chat, world, monkeypatch, capsys,
                                                                                 tmp_path):
    services, double = world
    other = services.settings.hf_model_choices()[1]
    _cli_env(monkeypatch, services, VISITOR_TOKEN=BOB)
    survey = tmp_path / "survey.jsonl"
    survey.write_text(json.dumps({"question": QUESTION, "relevant": ["2503.12595"]}) + "\n", encoding="utf-8")
    args = ["eval", "answers", "--questions", str(survey), "--paper-questions", "", "--corpus", str(PAPERS_JSONL),
            "--papers", "40"]
    code, _, err = run_cli_in_process(capsys, *args, "--hf-token-env", "NO_SUCH_VARIABLE")
    assert code != 0 and "--hf-token-env NO_SUCH_VARIABLE" in err and double.seen == []
    code, report, err = run_cli_in_process(capsys, *args, "--hf-token-env", "VISITOR_TOKEN", "--hf-model", other,
                                           "--json")
    assert code == 0, err
    assert report["meta"]["written_by"] == {"backend": "hf-router", "model": other}
    row = report["survey"][0]
    assert row["answer"].startswith("Written for bob")
    # written as on the page: the checked words, the evidence table under them (what the figures read)
    assert row["quoted"] and all(q["quote"] in row["answer"] for q in row["quoted"])
    assert [(s.token, s.model, s.kind) for s in double.seen] == [(BOB, other, "answer")]
    assert _holding(services.settings.data_dir, BOB) == [] and BOB not in err + json.dumps(report)
    double.visitors[BOB] = Visitor("bob", "429")
    try:
        code, _, err = run_cli_in_process(capsys, *args, "--hf-token-env", "VISITOR_TOKEN")
    finally:
        double.visitors[BOB] = Visitor("bob")
    assert code != 0 and router.RATE_LIMITED in err and BOB not in err
    assert len(double.seen) == 2, "a failure was retried"


def test_eval_all_answers_and_judges_with_the_routers_model_as_that_visitor(chat, world, monkeypatch, capsys):
    services, double = world
    other = services.settings.hf_model_choices()[1]
    _cli_env(monkeypatch, services, VISITOR_TOKEN=ANN)
    code, report, err = run_cli_in_process(
        capsys, "eval", "all", "--limit", "1", "--skip", "csfcube,thoughts,related-work,gor", "--corpus",
        str(PAPERS_JSONL), "--hf-token-env", "VISITOR_TOKEN", "--hf-model", other, "--json")
    assert code == 0, err
    slim = next(p for p in report["parts"] if p["name"] == "slim")
    assert slim["status"] == "ran", slim
    assert slim["judge"] == f"judged by {other}" and report["meta"]["model"].startswith(f"{other} at https://127.0.0.1")
    assert double.seen and {(s.token, s.model) for s in double.seen} == {(ANN, other)}
    assert _holding(services.settings.data_dir, ANN) == [] and ANN not in err + json.dumps(report)
    code, _, err = run_cli_in_process(capsys, "eval", "all", "--hf-model", other)
    assert code != 0 and "--hf-token-env" in err


def test_the_page_shows_the_picker_on_load_only_when_signed_in_with_inference_and_asks_with_its_value(world):
    from copilot.ui.chat import ask as ask_tab

    services, _ = world
    with gr.Blocks() as page:      # the Ask tab alone: the page's LoginButton would ask the Hub who is logged in
        ask_tab.build(Services(services.settings.model_copy(update={"oauth_client_id": "client-for-the-test"})))
    picker = next(b for b in page.blocks.values() if getattr(b, "elem_id", None) == "chat-hf-model")
    assert not picker.visible and picker.choices == [(m, m) for m in services.settings.hf_model_choices()]
    [load] = [f for f in page.fns.values() if f.name == "sign_in_view"]
    assert picker in load.outputs
    expires = int(time.time()) + 3600
    shown = {scope: load.fn(gr.OAuthToken(ANN, scope, expires))[1]["visible"]
             for scope in ("openid profile", "openid profile inference-api")}
    assert shown == {"openid profile": False, "openid profile inference-api": True}
    assert load.fn(None)[1]["visible"] is False
    asks = [f for f in page.fns.values() if f.name in ("ask", "ask_alone")]
    assert len(asks) == 3 and all(picker in f.inputs for f in asks)
    token = gr.OAuthToken(ANN, "openid profile inference-api", expires)
    for f in asks:
        values = [f"value of {block.elem_id}" for block in f.inputs]
        put = special_args(f.fn, values, None, token=token)[0]   # Gradio's own placing of inputs, request, token
        called = dict(zip(inspect.signature(f.fn).parameters, put))
        assert called["model"] == "value of chat-hf-model" and called["oauth_token"] is token
