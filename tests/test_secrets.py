"""Secrets: a known fake API key is used against a loopback OpenAI-compatible server that answers, fails, echoes
the key back in its error bodies, returns garbage, or hangs. Afterwards the key must appear nowhere we write or
show: stdout/stderr of the CLI (with debug logging on), log records, `llm_calls`, every file in the data dir,
error messages and tracebacks, turn records shown to users.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import subprocess
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from copilot.features.chat import Chat
from copilot.llm import LLMError
from copilot.prompts import HEALTH_CHECK
from copilot.secrets import mask_secret
from copilot.services import Services
from tests import helpers
from tests.conftest import import_papers, make_settings
from tests.helpers import subprocess_env

KEY = "sk-canary-7f3d9c1e5b2a48d6a0c4e8f1b3d5a7c9"
MODES = ("ok", "echo400", "echo500", "echo_variants", "unauthorized", "garbage", "hang")
QUESTION = "How do language models use retrieval to answer questions?"


class FakeOpenAI:
    """A loopback OpenAI-compatible chat endpoint. The first path segment picks the behaviour:
    /ok/v1 streams a short answer; /echo400/v1 and /echo500/v1 answer an error whose body repeats the request's
    Authorization header (as careless proxies do); /echo_variants/v1 answers 400 with the key base64-encoded (the
    whole header, so at an odd alignment), reversed and spaced out; /reply/v1 streams `reply` ("{n}" in it: the
    request's number); /unauthorized/v1 answers 401; /garbage/v1 answers 200 with bytes that are not an event
    stream; /hang/v1 waits `hang_s` before answering."""

    def __init__(self, hang_s: float = 5.0, reply: str = "") -> None:
        self.hang_s = hang_s
        self.reply = reply
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                mode = self.path.strip("/").split("/", 1)[0]
                owner.requests.append({"mode": mode, "auth": self.headers.get("Authorization", ""),
                                       "body": body.decode("utf-8", "replace")})
                echo = f"bad request from {self.headers.get('Authorization', '')} ({self.headers.get('User-Agent')})"
                if mode == "ok":
                    return self._stream(["Retrieval ", "grounds the answer ", "in papers."])
                if mode == "reply":  # streams `owner.reply` in pieces (e.g. hostile HTML for the browser tests); "{n}"
                    # in it becomes the request's number, so the two answers of a comparison differ (identical ones
                    # are shown as one answer and take no vote)
                    text = owner.reply.replace("{n}", str(sum(r["mode"] == "reply" for r in owner.requests)))
                    return self._stream([text[i:i + 20] for i in range(0, len(text), 20)])
                if mode in ("echo400", "echo500"):
                    return self._json(400 if mode == "echo400" else 500,
                                      {"error": {"message": echo, "type": "invalid_request_error", "param": KEY}})
                if mode == "echo_variants":
                    header = self.headers.get("Authorization", "")
                    key = header.removeprefix("Bearer ")
                    message = (f"bad header {base64.b64encode(header.encode()).decode()}; reversed {key[::-1]}; "
                               f"spaced {' '.join(key)}")
                    return self._json(400, {"error": {"message": message, "type": "invalid_request_error"}})
                if mode == "unauthorized":
                    return self._json(401, {"error": {"message": f"Incorrect API key provided: {echo}"}})
                if mode == "garbage":
                    payload = b"data: {\x00\xff not json " + echo.encode() + b"\n\n\x9f\x92"
                    return self._raw(200, payload, "text/event-stream")
                if mode == "hang":
                    time.sleep(owner.hang_s)
                    return self._stream(["too late"])
                return self._json(404, {"error": {"message": "unknown mode"}})

            def _json(self, status, obj):
                self._raw(status, json.dumps(obj).encode(), "application/json")

            def _raw(self, status, payload: bytes, content_type: str):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:
                    pass

            def _stream(self, pieces):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for piece in pieces:
                        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
                                 "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    asked = json.loads(owner.requests[-1]["body"] or "{}").get("stream_options") or {}
                    if asked.get("include_usage"):              # as OpenAI does: a last chunk with the usage
                        usage = {"prompt_tokens": 11, "completion_tokens": 3 * len(pieces), "total_tokens": 0}
                        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
                                 "choices": [], "usage": usage}
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{mode}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def fake_openai():
    with FakeOpenAI(hang_s=4.0) as server:
        yield server


def secret_in(text: str | bytes) -> bool:
    """The key, or its distinctive tail (a key cut into pieces or partly masked), as written, reversed, with
    whitespace between its characters, or inside base64 at any alignment."""
    data = text if isinstance(text, bytes) else str(text).encode("utf-8", "replace")
    squeezed = re.sub(rb"\s+", b"", data)
    tails = (KEY.encode(), KEY[-16:].encode())
    if any(t in form for t in tails for form in (data, data[::-1], squeezed, squeezed[::-1])):
        return True
    return any(piece in decoded for decoded in _base64_runs(data) for piece in (KEY[10:26].encode(), tails[1]))


def _base64_runs(data: bytes):
    """Every run of base64 characters in `data`, decoded from each of its first four characters."""
    for run in re.findall(rb"[A-Za-z0-9+/_-]{20,}", data):
        for start in range(4):
            chunk = run[start:].replace(b"-", b"+").replace(b"_", b"/")
            try:
                yield base64.b64decode(chunk[:len(chunk) // 4 * 4])
            except (binascii.Error, ValueError):
                continue


def test_the_canary_check_sees_the_echoed_forms():
    """secret_in, the check every test here relies on, sees the forms the echo_variants endpoint sends."""
    header = f"Bearer {KEY}"
    forms = [KEY, KEY[::-1], " ".join(KEY), base64.b64encode(header.encode()).decode(),
             base64.urlsafe_b64encode(KEY.encode()).decode(), f"x{KEY[-16:]}y"]
    assert all(secret_in(f"error: {form}!") for form in forms)
    assert not secret_in("error: Bearer *** " + base64.b64encode(b"Bearer sk-other-key").decode())


def files_holding_secret(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret_in(p.read_bytes())]


def openai_settings(data_dir: Path, url: str, **overrides):
    return make_settings(data_dir, llm="openai", openai_api_key=KEY, openai_base_url=url, llm_model="fake-model",
                         llm_timeout=1.5, llm_retries=1, answer_max_tokens=32, **overrides)


def test_llm_layer_never_leaks_the_key(fake_openai, tmp_path, caplog, monkeypatch):
    """Every mode through LLM.complete: errors are clear, and the key is in no message, traceback, log or row."""
    caplog.set_level(logging.DEBUG)  # openai/httpx debug logs included
    monkeypatch.setenv("OPENAI_LOG", "debug")
    shown: list[str] = []
    errors: dict[str, LLMError] = {}
    data_dir = tmp_path / "data"
    for mode in MODES:
        services = Services(openai_settings(data_dir, fake_openai.url(mode)))
        try:
            shown.append(services.llm.complete(HEALTH_CHECK.render(), max_tokens=16))
        except LLMError as error:
            errors[mode] = error
            shown += [str(error), repr(error), "".join(traceback.format_exception(error))]
    assert set(errors) == set(MODES) - {"ok"}, "every failing mode must raise LLMError"
    assert "rejected the API key" in str(errors["unauthorized"])
    assert "reversed ***" in str(errors["echo_variants"]) and "spaced ***" in str(errors["echo_variants"])
    assert "did not finish within" in str(errors["hang"]) and not errors["hang"].retryable   # a deadline (#34)
    assert all(r["auth"] == f"Bearer {KEY}" for r in fake_openai.requests), "the key must reach the endpoint"
    rows = Services(openai_settings(data_dir, fake_openai.url("ok"))).db.query("SELECT * FROM llm_calls")
    assert len(rows) >= len(MODES)  # one row per call, retries included
    assert any(r["error"] for r in rows) and any(r["output"] for r in rows)

    assert not [s for s in shown if secret_in(s)], "key in an error message or traceback"
    assert not [r for r in rows if secret_in(json.dumps(r, default=str))], "key in llm_calls"
    assert not [r.getMessage() for r in caplog.records if secret_in(r.getMessage())], "key in a log record"
    assert not files_holding_secret(data_dir)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A data dir with 12 real papers (so answers call the LLM instead of the no-sources shortcut)."""
    data_dir = tmp_path_factory.mktemp("secrets") / "data"
    import_papers(Services(make_settings(data_dir)), 12)
    return data_dir


def test_chat_turns_never_show_the_key(fake_openai, corpus, tmp_path, caplog):
    """Chat turns through the real OpenAI backend in every failing mode: what the user sees has no key."""
    import shutil

    caplog.set_level(logging.DEBUG)
    data_dir = tmp_path / "data"
    shutil.copytree(corpus, data_dir)
    shown: list[str] = []
    for mode in ("ok", "echo400", "echo500", "echo_variants", "garbage", "unauthorized"):
        services = Services(openai_settings(data_dir, fake_openai.url(mode)))
        chat = Chat(services)
        record = chat.ask(QUESTION, user="local", wait=True)
        # the previous turn's swept thought job runs after this turn's answers: let it finish under this Services,
        # as one app process would, before the next Services opens the same data dir
        chat.wait_for_all(timeout=60)
        shown.append(json.dumps(record))
        shown.append(json.dumps(chat.view(record["turn_id"]).as_dict(), default=str))
        if mode != "ok":
            assert all(a["error"] for a in record["answers"]), f"{mode}: the failure must be reported"
        else:
            assert all("Retrieval grounds" in a["text"] for a in record["answers"])
    db = Services(openai_settings(data_dir, fake_openai.url("ok"))).db
    for table in ("llm_calls", "chat_turns", "chat_thought_jobs", "thoughts"):
        shown.append(json.dumps(db.query(f"SELECT * FROM {table}"), default=str))
    assert not [s[:200] for s in shown if secret_in(s)], "key in a turn, a job or a table"
    assert not [r.getMessage()[:200] for r in caplog.records if secret_in(r.getMessage())]
    assert not files_holding_secret(data_dir)


def run_cli(args: list[str], data_dir: Path, url: str) -> subprocess.CompletedProcess:
    env = subprocess_env(data_dir, OPENAI_API_KEY=KEY, OPENAI_BASE_URL=url, COPILOT_LLM_MODEL="fake",
                         COPILOT_LLM_TIMEOUT="2", COPILOT_LLM_RETRIES="0", COPILOT_ANSWER_MAX_TOKENS="32",
                         COPILOT_SCHEDULER="false", OPENAI_LOG="debug", HF_HUB_OFFLINE="1")
    return helpers.run_cli(["-v", *args], env, timeout=240)


def test_cli_with_debug_logging_never_prints_the_key(fake_openai, corpus, tmp_path):
    """The CLI with the key in its environment and debug logs on: ask against an echoing endpoint, ask against a
    working one, vote (its thought job meets a failing endpoint). Nothing on stdout/stderr or on disk holds the key."""
    import shutil

    data_dir = tmp_path / "data"
    shutil.copytree(corpus, data_dir)
    failing = run_cli(["ask", QUESTION, "--json"], data_dir, fake_openai.url("echo400"))
    assert failing.returncode == 0, failing.stderr[-2000:]
    record = json.loads(failing.stdout)
    assert record["comparison_state"] in ("failed", "same_items")
    assert any("refused" in (a["error"] or "") for a in record["answers"])
    assert not any(a["text"] for a in record["answers"])
    working = run_cli(["ask", QUESTION, "--json"], data_dir, fake_openai.url("ok"))
    assert working.returncode == 0, working.stderr[-2000:]
    outputs = [failing, working]
    turn = json.loads(working.stdout)
    if turn["comparison"]:
        outputs.append(run_cli(["vote", turn["turn_id"], "tie", "--json"], data_dir, fake_openai.url("echo500")))
    assert any(r["mode"] == "echo400" for r in fake_openai.requests)
    leaked = [(p.args[4:6], "stdout" if secret_in(p.stdout) else "stderr") for p in outputs
              if secret_in(p.stdout) or secret_in(p.stderr)]
    assert not leaked, f"key printed by {leaked}"
    assert "Bearer ***" in failing.stdout  # the echoed header reached the message, masked
    assert not files_holding_secret(data_dir)


def test_bad_settings_never_echo_the_key(tmp_path):
    """A settings error (here: a bad timeout next to the key) names the variable but hides secret values."""
    from copilot.config import SettingsError, load_settings

    with pytest.raises(SettingsError) as caught:
        load_settings(data_dir=tmp_path, openai_api_key=KEY, llm_timeout=-1)
    assert "COPILOT_LLM_TIMEOUT" in str(caught.value) and not secret_in(str(caught.value))
    settings = load_settings(data_dir=tmp_path, openai_api_key=KEY)
    assert not secret_in(repr(settings)) and not secret_in(str(settings.model_dump()))


def test_a_key_echoed_in_a_successful_streamed_answer_is_masked_on_the_way(corpus, tmp_path):
    """An endpoint that puts the key in its answer, streamed in 20-character pieces (the key split across two or
    three of them, as written, reversed and base64-encoded): no piece the page receives holds it, and the joined
    pieces equal the answer masked as a whole (issue #19)."""
    reply = (f"Source [1] says the key is {KEY}; backwards {KEY[::-1]}; encoded "
             f"{base64.b64encode(KEY.encode()).decode()}. The rest of the answer is plain text.")
    with FakeOpenAI(reply=reply) as server:
        services = Services(openai_settings(tmp_path / "data", server.url("reply")))
        pieces = list(services.llm.stream(HEALTH_CHECK.render(), max_tokens=64))
    assert len(pieces) > 3 and not [p for p in pieces if secret_in(p)]
    assert "".join(pieces) == mask_secret(reply, KEY) and not secret_in("".join(pieces))
    assert "".join(pieces).endswith("The rest of the answer is plain text.")
