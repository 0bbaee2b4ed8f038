"""The LLM layer: the packaged SmolLM2 in process, the OpenAI backend over real HTTP (llama_cpp.server on
loopback), retries with backoff, and no API key in llm_calls or error messages."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from copilot import prompts
from copilot.config import SettingsError
from copilot.llm import LLM, LLMError, Usage, packaged_gguf
from copilot.llm import interface as llm_interface
from copilot.llm import local as llm_local
from copilot.prompts import HEALTH_CHECK, Prompt
from copilot.services import Services
from tests.conftest import make_settings, stop_process
from tests.doubles import scripted_llm
from tests.helpers import clean_env, free_port
from tests.test_secrets import FakeOpenAI

KEY = "sk-test-Zq9-never-log-me-4711"
PROMPT = Prompt("test_llm", "You are a terse assistant.", "Name one planet of the solar system.")


def llm_calls(services_or_db) -> list[dict]:
    db = getattr(services_or_db, "db", services_or_db)
    return db.query("SELECT * FROM llm_calls ORDER BY id")


@pytest.fixture
def local_services(tmp_path, monkeypatch):
    clean_env(monkeypatch)
    # one thread: with two, llama.cpp's spinning thread barrier crawls when the box is shared with other jobs
    return Services(make_settings(tmp_path / "data", local_threads=1))


def test_local_smollm2_completion_is_logged(local_services):
    services = local_services
    prompt = HEALTH_CHECK.render()
    text = services.llm.complete(prompt, max_tokens=24, temperature=0.0)
    assert text.strip()
    [call] = llm_calls(services)
    assert (call["backend"], call["model"], call["prompt_name"]) == ("local", packaged_gguf().stem, "health_check")
    assert call["output"] == text and call["error"] is None
    assert "what is arXiv" in call["prompt"]
    assert call["prompt_tokens"] > 5 and 0 < call["completion_tokens"] <= 24 and call["latency_s"] > 0


def test_local_stream_yields_pieces(local_services):
    services = local_services
    pieces = list(services.llm.stream(PROMPT.render(), max_tokens=16, temperature=0.0))
    assert len(pieces) > 1 and "".join(pieces).strip()
    assert llm_calls(services)[-1]["output"] == "".join(pieces)


def test_the_local_model_weighs_a_choice_of_words_as_it_would_write_it(local_services):
    services = local_services
    prompt = prompts.SLIM_JUDGE.render(question="What is a hash table?", answer="It stores key-value pairs.")
    scores = services.llm.option_logprobs(prompt, ("known", "unknown"))
    assert set(scores) == {"known", "unknown"} and all(-40 < v < 0 for v in scores.values())
    assert math.exp(scores["known"]) + math.exp(scores["unknown"]) <= 1 + 1e-9
    written = services.llm.complete(prompt, max_tokens=8, temperature=0.0, grammar=prompts.slim_judge_grammar())
    assert written.strip() == max(scores, key=scores.get)          # the greedy word is the more probable one
    # after a generation, and in the other order, the same scores: no logits left over from another evaluation
    assert services.llm.option_logprobs(prompt, ("unknown", "known")) == pytest.approx(scores, abs=1e-3)
    weighed = [c for c in llm_calls(services) if c["completion_tokens"] == 0]
    assert len(weighed) == 2 and weighed[0]["output"].startswith("known -") and weighed[0]["prompt_tokens"] > 20


def test_local_prompt_longer_than_the_context_is_trimmed_with_a_notice(tmp_path):
    services = Services(make_settings(tmp_path / "data", local_context=512, local_threads=1))
    long = Prompt("too_long", "", "{text}").render(text="Question: what is a planet? " + "word " * 2000 + " Answer:")
    usage = Usage()
    services.llm.complete(long, max_tokens=8, usage=usage)       # the model may well stop at once: no crash
    assert usage.prompt_tokens <= 512 - 64
    assert "middle was left out" in usage.notices[0]
    assert llm_calls(services)[-1]["error"] is None


def test_a_huge_prompt_times_out_within_the_timeout_and_frees_the_model(tmp_path):
    # batches of 16 tokens: the deadline is checked between batches, so it holds within a fraction of a second
    services = Services(make_settings(tmp_path / "data", local_context=8192, local_threads=1, local_batch=16,
                                      llm_timeout=2.0))
    try:                                    # load the model outside the timed call; on a busy machine the load
        services.llm.complete(PROMPT.render(), max_tokens=2)      # itself may take the 2 s, and that is fine here
    except LLMError:
        pass
    huge = Prompt("huge", "", "{text}").render(text="planets and moons " * 2300)
    started = time.monotonic()
    with pytest.raises(LLMError, match="timed out after 2 s while reading the prompt"):
        services.llm.complete(huge, max_tokens=8)
    assert time.monotonic() - started < 2.0 + 1.5
    assert services.llm.complete(PROMPT.render(), max_tokens=4).strip()   # the model is free for the next call


def test_two_prompts_sharing_a_beginning_reuse_its_cache(local_services):
    first = Prompt("a", "You are a terse assistant.", "Question: name a planet.\n\nSources: {s}")
    usage_a, usage_b = Usage(), Usage()
    local_services.llm.complete(first.render(s="one two three " * 40), max_tokens=4, usage=usage_a)
    local_services.llm.complete(first.render(s="four five six " * 40), max_tokens=4, usage=usage_b)
    assert usage_b.cached_tokens >= 15                            # system text and question were not read again
    assert usage_b.cached_tokens < usage_b.prompt_tokens


def test_the_answer_grammar_holds_the_local_model_to_cited_statements(local_services):
    from copilot.prompts import answer_grammar

    prompt = Prompt("g", "Answer from the numbered sources.", "Sources: [1] Mars is red. [2] Venus is hot.\n"
                    "Question: which planet is red?").render()
    text = local_services.llm.complete(prompt, max_tokens=120, grammar=answer_grammar(2), temperature=0.0)
    statement = (r"Source \[[12]\] (?:shows that|reports that|finds that|proposes|introduces|studies|describes) "
                 r"[^\[\]\n<>.]{20,200}\.\n")
    assert re.fullmatch(f"(?:{statement}){{1,2}}", text), text


def test_a_grammar_the_model_would_not_follow_by_itself_still_holds_every_token(local_services):
    # digits after "Q" are never among the model's top choices here, so most steps take the whole-vocabulary path
    prompt = Prompt("g", "You are a terse assistant.", "Name one planet of the solar system.").render()
    text = local_services.llm.complete(prompt, max_tokens=12, grammar='root ::= "Q" [0-9] [0-9] [0-9] "!"',
                                       temperature=0.8)
    assert re.fullmatch(r"Q[0-9]{3}!", text), text
    with pytest.raises(LLMError, match="rejected the request"):
        local_services.llm.complete(prompt, max_tokens=4, grammar="root ::= (unclosed")


def _shared_instructions_prompts():
    system = "You answer a researcher's question using only the numbered sources you are given. " * 3
    answer = Prompt("a", system, "Question: {q}\n\nSources: {s}")
    other = Prompt("t", "Summarise what was found in two steps, plainly.", "Text: {s}")
    return answer, other


def test_the_shared_instructions_are_restored_after_another_prompt_used_the_model(local_services):
    answer, other = _shared_instructions_prompts()
    llm = local_services.llm
    first, between, later = Usage(), Usage(), Usage()
    llm.complete(answer.render(q="which planet is red?", s="Mars is red. " * 20), max_tokens=2, usage=first)
    llm.complete(other.render(s="Venus is hot. " * 20), max_tokens=2, usage=between)   # replaces the cache
    llm.complete(answer.render(q="which planet is hot?", s="Venus is hot. " * 20), max_tokens=2, usage=later)
    assert between.cached_tokens < 8                       # only the chat template's opening tokens match
    assert later.cached_tokens >= 40                        # the instructions came back from the saved state
    assert later.cached_tokens < later.prompt_tokens - 20


def test_a_corrupt_saved_state_is_dropped_and_the_prompt_read_again(local_services):
    answer, other = _shared_instructions_prompts()
    llm = local_services.llm
    loaded = llm.backend._loaded()
    loaded.prefixes.saved.clear()                 # (the shared model keeps earlier tests' states: corrupt this one's)
    discarded = loaded.prefixes.discarded
    llm.complete(other.render(s="Jupiter is big. " * 20), max_tokens=2)      # the live cache no longer holds them
    llm.complete(answer.render(q="which planet is red?", s="Mars is red. " * 20), max_tokens=2)
    llm.complete(other.render(s="Venus is hot. " * 20), max_tokens=2)
    snapshot = next(s for s in loaded.prefixes.saved.values() if len(s.tokens) >= 40)
    snapshot.data[len(snapshot.data) // 2] ^= 0xFF          # one flipped byte in the saved KV values
    usage = Usage()
    text = llm.complete(answer.render(q="which planet is hot?", s="Venus is hot. " * 20), max_tokens=6, usage=usage)
    assert text.strip()       # (tokens may still come from the live cache the previous call left, never the snapshot)
    # the corrupt copy was dropped (the prompt's instructions, read again, may be saved afresh under the same tokens)
    assert loaded.prefixes.saved.get(snapshot.tokens) is not snapshot and loaded.prefixes.discarded == discarded + 1
    again = Usage()                                        # read again, saved again, restored next time
    llm.complete(other.render(s="Mars is red. " * 20), max_tokens=2)
    llm.complete(answer.render(q="which planet is big?", s="Jupiter is big. " * 20), max_tokens=2, usage=again)
    assert again.cached_tokens >= 40


def test_the_next_token_after_a_one_token_prompt_is_weighed(local_services):
    """Weighing the token after a prompt of one token reads an empty prefix with no saved states to keep: nothing to
    save, nothing to fail (it used to call `save` on the saved states it was not given)."""
    backend = local_services.llm.backend
    loaded = backend._loaded()
    with loaded.lock:
        logits = backend._next_token_logits(loaded.llama, [loaded.llama.token_bos()], time.monotonic() + 60)
    assert logits.shape == (loaded.llama.n_vocab(),) and math.isfinite(float(logits.max()))


def test_a_file_that_is_not_a_gguf_stops_start_up_naming_the_variable(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"<html>not a model</html>")
    with pytest.raises(SettingsError, match="COPILOT_LOCAL_MODEL=.*not a GGUF"):
        make_settings(tmp_path / "data", local_model=bogus)
    with pytest.raises(SettingsError, match="COPILOT_LOCAL_MODEL=.*no GGUF file"):
        make_settings(tmp_path / "data", local_model=tmp_path / "missing.gguf")


def test_the_packaged_q4_1_model_gets_a_q8_0_copy_once(tmp_path):
    cache = tmp_path / "models"
    copy = llm_local.fast_copy(packaged_gguf(), cache)
    assert copy.parent == cache and copy.read_bytes()[:4] == b"GGUF"
    made = copy.stat().st_mtime
    assert llm_local.fast_copy(packaged_gguf(), cache) == copy and copy.stat().st_mtime == made
    assert llm_local.fast_copy(copy, cache) == copy                 # a Q8_0 model is used as it is
    assert llm_local.fast_copy(packaged_gguf(), None) == packaged_gguf()


def test_a_build_with_amx_kernels_reads_prompts_token_by_token(tmp_path, monkeypatch):
    monkeypatch.setattr(llm_local, "built_with_amx", lambda: True)
    backend = llm_local.LocalBackend(packaged_gguf(), 1024, 1, 30.0, n_batch=256, cache_dir=tmp_path / "m")
    loaded = backend._load()
    assert loaded.llama.n_batch == 1


# --- OpenAI backend against a real OpenAI-compatible server
@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    log = log_path.open("wb")  # a file, not a pipe: llama.cpp logs a lot and would block on a full pipe
    proc = subprocess.Popen(
        [sys.executable, "-m", "copilot.llm.serve", "--model", str(packaged_gguf()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--n_batch", "64", "--n_ubatch", "64",
         "--model_alias", "smollm2-test",
         "--api_key", KEY], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError("llama_cpp.server exited: " + log_path.read_text(errors="replace")[-2000:])
            try:
                request = urllib.request.Request(base + "/models", headers={"Authorization": f"Bearer {KEY}"})
                with urllib.request.urlopen(request, timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not come up in 180 s")
            time.sleep(0.3)
        yield base
    finally:
        stop_process(proc)
        log.close()


def openai_services(tmp_path, base_url: str, key: str = KEY, **extra) -> Services:
    return Services(make_settings(tmp_path / "data", llm="openai", openai_base_url=base_url, openai_api_key=key,
                                  llm_model="smollm2-test", **extra))


def assert_key_nowhere(services: Services) -> None:
    for call in llm_calls(services):
        assert KEY not in json.dumps(call), "the API key leaked into llm_calls"


def test_openai_backend_real_round_trip(llama_server, tmp_path):
    services = openai_services(tmp_path, llama_server)
    assert services.llm.info == {"backend": "openai", "model": "smollm2-test"}
    text = services.llm.complete(PROMPT.render(), max_tokens=16, temperature=0.0)
    assert text.strip()
    pieces = list(services.llm.stream(PROMPT.render(), max_tokens=16, temperature=0.0))
    assert "".join(pieces).strip()
    calls = llm_calls(services)
    assert [(c["backend"], c["model"], c["error"]) for c in calls] == [("openai", "smollm2-test", None)] * 2
    assert calls[0]["output"] == text and calls[0]["completion_tokens"] > 0
    # llama_cpp.server reports no usage when streaming: each streamed piece (one token) is counted. The page may get
    # fewer, longer pieces: a piece ending in what could begin the key waits for the next one (secrets.StreamMask)
    assert len(pieces) > 1 and calls[1]["completion_tokens"] >= len(pieces) and calls[1]["output"] == "".join(pieces)
    assert_key_nowhere(services)


def test_openai_backend_wrong_key_is_a_clear_error(llama_server, tmp_path):
    services = openai_services(tmp_path, llama_server, key="sk-wrong-" + KEY[::-1])
    with pytest.raises(LLMError) as caught:
        services.llm.complete(PROMPT.render(), max_tokens=8)
    assert "rejected the API key" in str(caught.value) and not caught.value.retryable
    assert KEY[::-1] not in str(caught.value) and KEY[::-1] not in json.dumps(llm_calls(services))


def test_an_endpoint_that_reports_usage_has_its_counts_logged(tmp_path):
    with FakeOpenAI() as endpoint:
        services = openai_services(tmp_path, endpoint.url("ok"))
        pieces = list(services.llm.stream(PROMPT.render(), max_tokens=16))
        request = json.loads(endpoint.requests[-1]["body"])
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    [call] = llm_calls(services)
    assert "".join(pieces) == "Retrieval grounds the answer in papers."
    assert (call["prompt_tokens"], call["completion_tokens"]) == (11, 3 * 3)   # the endpoint's own, for its 3 chunks


class _EchoingEndpoint(BaseHTTPRequestHandler):
    """An endpoint that fails and echoes the Authorization header in its error (some proxies do)."""

    status = 400
    hits = 0

    def do_POST(self):  # noqa: N802
        type(self).hits += 1
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        body = json.dumps({"error": {"message": f"bad request from {self.headers.get('Authorization')}",
                                     "type": "invalid_request_error"}}).encode()
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def echoing_endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _EchoingEndpoint.hits = 0
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status,retryable", [(400, False), (500, True)])
def test_api_key_never_in_error_or_log(echoing_endpoint, tmp_path, monkeypatch, status, retryable):
    monkeypatch.setattr(llm_interface.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(_EchoingEndpoint, "status", status)
    base = f"http://127.0.0.1:{echoing_endpoint.server_address[1]}/v1"
    services = openai_services(tmp_path, base, llm_retries=2)
    with pytest.raises(LLMError) as caught:
        services.llm.complete(PROMPT.render(), max_tokens=8)
    assert KEY not in str(caught.value) and caught.value.retryable is retryable
    assert _EchoingEndpoint.hits == (3 if retryable else 1)   # 500 is retried twice, 400 is not
    assert len(llm_calls(services)) == _EchoingEndpoint.hits
    assert_key_nowhere(services)


def test_unreachable_endpoint_is_retryable_and_clear(tmp_path, monkeypatch):
    monkeypatch.setattr(llm_interface.time, "sleep", lambda seconds: None)
    services = openai_services(tmp_path, f"http://127.0.0.1:{free_port()}/v1", llm_retries=1)
    with pytest.raises(LLMError, match="cannot reach the LLM endpoint") as caught:
        services.llm.complete(PROMPT.render(), max_tokens=8)
    assert caught.value.retryable and len(llm_calls(services)) == 2


def test_openai_backend_without_key_is_refused(tmp_path):
    from copilot.config import SettingsError

    with pytest.raises(SettingsError, match="OPENAI_API_KEY"):
        make_settings(tmp_path, llm="openai")
    with pytest.raises(SettingsError) as caught:  # a bad value next to the key: the key is not echoed
        make_settings(tmp_path, llm="openai", openai_api_key=KEY, llm_timeout=-1)
    assert KEY not in str(caught.value)


# --- retries with backoff (scripted backend)
def test_transient_errors_are_retried_with_exponential_backoff(services, monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(llm_interface.time, "sleep", slept.append)
    llm, backend = scripted_llm(services.db, [LLMError("busy", retryable=True), LLMError("busy", retryable=True),
                                              "the answer"])
    llm.retries, llm.backoff = 2, 0.5
    assert llm.complete(PROMPT.render(), max_tokens=20) == "the answer"
    assert len(backend.calls) == 3
    assert len(slept) == 2 and 0.5 <= slept[0] <= 0.75 and 1.0 <= slept[1] <= 1.5
    assert [c["error"] for c in llm_calls(services)] == ["busy", "busy", None]


def test_retries_give_up_and_permanent_errors_are_not_retried(services, monkeypatch):
    monkeypatch.setattr(llm_interface.time, "sleep", lambda seconds: None)
    llm, backend = scripted_llm(services.db, [LLMError("busy", retryable=True)] * 3)
    llm.retries = 1
    with pytest.raises(LLMError, match="busy"):
        llm.complete(PROMPT.render())
    assert len(backend.calls) == 2

    llm, backend = scripted_llm(services.db, [LLMError("bad request", retryable=False), "never used"])
    llm.retries = 3
    with pytest.raises(LLMError, match="bad request"):
        llm.complete(PROMPT.render())
    assert len(backend.calls) == 1


def test_backend_bug_becomes_an_llm_error(services):
    def broken(messages):
        raise KeyError("choices")

    llm, _ = scripted_llm(services.db, [broken])
    with pytest.raises(LLMError, match="LLM call failed: KeyError"):
        llm.complete(PROMPT.render())
    assert "KeyError" in llm_calls(services)[-1]["error"]


def test_llm_without_db_still_works():
    from tests.doubles import ScriptedBackend

    llm = LLM(ScriptedBackend(["fine"]), None, retries=0)
    assert llm.complete(PROMPT.render()) == "fine"


def test_lone_surrogates_reach_neither_the_model_nor_the_call_log(tmp_path):
    # issue #19: pasted text with lone surrogates made the call log's insert fail, so the call went unlogged
    services = Services(make_settings(tmp_path / "data"))
    llm, backend = scripted_llm(services.db, ["a fine reply"])
    prompt = Prompt("pasted", "", "I study {text}").render(text="sparse \ud800 retrieval \udfff")
    assert llm.complete(prompt) == "a fine reply"
    sent = backend.calls[0].messages[-1]["content"]
    assert "\ud800" not in sent and sent == "I study sparse \ufffd retrieval \ufffd"
    row = services.db.query_one("SELECT prompt_name, prompt, error FROM llm_calls")
    assert row["prompt_name"] == "pasted" and "\ufffd" in row["prompt"] and row["error"] is None


class _StallingEndpoint(BaseHTTPRequestHandler):
    """An endpoint that stalls within every per-read timeout (issue #34): `keepalive` answers 200 and then sends
    only `: keepalive` comments; `headers` drips its status line and headers one byte at a time."""

    mode = "keepalive"
    hits = 0

    def do_POST(self):  # noqa: N802
        type(self).hits += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            if type(self).mode == "keepalive":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
                for _ in range(60):
                    self.wfile.write(b": keepalive\n\n")
                    self.wfile.flush()
                    time.sleep(0.25)
            else:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Pad: " + b"x" * 200:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.1)
        except OSError:
            pass                              # the client gave up, as it should

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("mode", ["keepalive", "headers"])
def test_a_stalling_endpoint_meets_the_whole_call_deadline_and_is_not_retried(tmp_path, monkeypatch, mode):
    monkeypatch.setattr(_StallingEndpoint, "mode", mode)
    _StallingEndpoint.hits = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StallingEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        services = openai_services(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/v1", llm_retries=2,
                                   llm_timeout=2.0)
        started = time.monotonic()
        with pytest.raises(LLMError, match="did not") as caught:
            services.llm.complete(PROMPT.render(), max_tokens=8)
        took = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert took < 2.0 + 1.0, f"{mode}: {took:.1f} s"
    assert not caught.value.retryable and _StallingEndpoint.hits == 1
