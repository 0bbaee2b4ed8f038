"""The running app's guard (copilot/ui/guard.py) against the attacks of issue #19, through real HTTP on loopback:
oversized bodies and session ids (before: 200 requests with 1 MB session ids added 219 MB to the server, a 10 MB
body was accepted), the API schema on the login page (before: every endpoint's schema, 55 KB page), and another
user's session id (before: it let a client read that user's live answers and cancel their ask)."""

from __future__ import annotations

import http.client
import http.cookiejar
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from copilot.ui.guard import BODY_LIMIT

ACCOUNTS = "ann:ann's password,bob:bob's password"


def _port(url: str) -> int:
    return urllib.parse.urlsplit(url).port


def _server_rss_mb(url: str) -> float:
    """Resident memory of the app serving `url` (found by its port in its environment), in MB."""
    wanted = f"GRADIO_SERVER_PORT={_port(url)}".encode()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"app.py" in (proc / "cmdline").read_bytes() \
                    and wanted in (proc / "environ").read_bytes().split(b"\0"):
                status = (proc / "status").read_text()
                return int(status.split("VmRSS:")[1].split()[0]) / 1024
        except OSError:
            continue
    raise AssertionError("the app's process was not found")


def _post(url: str, path: str, body: bytes, timeout: float = 10) -> tuple[int, str]:
    """POST `body` as JSON; the status and text of the answer, even when the server answers before reading it all."""
    conn = http.client.HTTPConnection("127.0.0.1", _port(url), timeout=timeout)
    try:
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        except (BrokenPipeError, ConnectionResetError):
            pass                                  # refused before the body was read: the answer is waiting
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _get(opener: urllib.request.OpenerDirector, url: str, timeout: float = 10) -> tuple[int, str]:
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def _join(body: dict) -> bytes:
    return json.dumps({"data": [], "event_data": None, "trigger_id": None, **body}).encode()


def _warmed_up(log: Path, timeout: float = 180.0) -> None:
    """Wait for the app's warm-up at start (app.py: the embedding model, ~300 MB) to end, so memory measured
    after it grows only by what the test sends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.is_file() else ""
        if "warmed up for the first question" in text or "warming up at start failed" in text:
            return
        time.sleep(0.5)
    raise AssertionError(f"the app did not finish warming up in {timeout:.0f} s")


def test_oversized_bodies_and_session_ids_are_refused_before_gradio(app_server, tmp_path):
    url = app_server()
    _warmed_up(tmp_path / f"app-{_port(url)}.log")
    page_load = _no_input_dependency(urllib.request.build_opener(), url)
    def flood(count: int) -> tuple[list, list]:
        huge = [_post(url, "/gradio_api/queue/join", _join({"fn_index": page_load, "session_hash": "s" * 2**20}))
                for _ in range(count)]
        long = [_post(url, "/gradio_api/queue/join", _join({"fn_index": page_load, "session_hash": "s" * 200_000}))
                for _ in range(count // 4)]
        return huge, long

    before = _server_rss_mb(url)
    started = time.monotonic()
    huge_ids, long_ids = flood(100)
    flood_s = time.monotonic() - started
    between = _server_rss_mb(url)
    more_huge, more_long = flood(100)
    after = _server_rss_mb(url)
    assert {status for status, _ in huge_ids + more_huge} == {413} and "at most 256 KB" in huge_ids[0][1]
    assert {status for status, _ in long_ids + more_long} == {400} and "Bad session id" in long_ids[0][1]
    # kept ids grow the server in step with the requests (before the guard: 219 MB for 200); the allocator's
    # high-water mark from reading the bodies does not grow again in a second, equal flood
    print(f"server memory: {before:.0f} MB, {between:.0f} MB after one flood, {after:.0f} MB after two")
    grown = f"the server grew {before:.0f} → {between:.0f} → {after:.0f} MB"
    assert after - between < 15 and after - before < 60, grown
    assert flood_s < 60

    with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as sock:   # 10 MB announced, none sent
        sock.sendall(b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 10485760\r\n\r\n")
        assert sock.recv(200).startswith(b"HTTP/1.1 413")
    assert _post(url, "/gradio_api/queue/join", b"{" + b" " * (BODY_LIMIT + 1) + b"}")[0] == 413
    status, text = _get(urllib.request.build_opener(), url + "gradio_api/queue/data?session_hash=" + "s" * 12_000)
    assert status == 414 and "Address too long" in text
    status, _ = _get(urllib.request.build_opener(), url + "gradio_api/queue/data?session_hash=" + "s" * 100_000)
    assert status == 400                                  # longer still: the HTTP parser refuses it first
    status, text = _get(urllib.request.build_opener(), url + "gradio_api/heartbeat/" + "s" * 65)
    assert status == 400 and "Bad session id" in text

    # a normal request still goes through the guard to Gradio's queue, body intact
    session = "normal-session_1"
    status, text = _post(url, "/gradio_api/queue/join", _join({"fn_index": page_load, "session_hash": session}))
    assert status == 200 and "event_id" in json.loads(text)
    assert "process_completed" in _read_events(urllib.request.build_opener(), url, session)


def test_the_login_page_carries_no_api_schema(app_server):
    url = app_server(env={"COPILOT_AUTH": ACCOUNTS})
    anonymous = urllib.request.build_opener()
    for path in ("", "?all_endpoints=true", "gradio_api/runs"):
        status, page = _get(anonymous, url + path)
        assert status == 200 and "gradio_api_info" in page and "/on_lookup" not in page, path
    for path in ("config", "gradio_api/info", "gradio_api/info?all_endpoints=true", "gradio_api/openapi.json"):
        assert _get(anonymous, url + path)[0] == 401, path
    assert _get(anonymous, url + "openapi.json")[0] == 404          # FastAPI's list of routes: off
    ann = _signed_in(url, "ann", "ann's password")
    status, page = _get(ann, url)
    assert status == 200 and "/on_lookup" in page                    # signed in: the schema is there


def test_another_users_session_can_be_neither_read_nor_cancelled(app_server):
    url = app_server(env={"COPILOT_AUTH": ACCOUNTS})
    ann, bob = _signed_in(url, "ann", "ann's password"), _signed_in(url, "bob", "bob's password")
    page_load = _no_input_dependency(ann, url)
    session = "anns-session-42"
    status, text = _post_as(ann, url, "gradio_api/queue/join", _join({"fn_index": page_load, "session_hash": session}))
    assert status == 200, text
    event_id = json.loads(text)["event_id"]
    status, text = _get(bob, url + f"gradio_api/queue/data?session_hash={session}")
    assert status == 403 and "another user" in text
    cancel = json.dumps({"session_hash": session, "fn_index": page_load, "event_id": event_id}).encode()
    assert _post_as(bob, url, "gradio_api/cancel", cancel)[0] == 403
    assert _post(url, "/gradio_api/cancel", cancel)[0] == 403                     # not signed in
    assert _get(bob, url + f"gradio_api/heartbeat/{session}", timeout=3)[0] == 403
    assert "process_completed" in _read_events(ann, url, session)                # ann still gets her answer


def _signed_in(url: str, user: str, password: str) -> urllib.request.OpenerDirector:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    form = urllib.parse.urlencode({"username": user, "password": password}).encode()
    with opener.open(urllib.request.Request(url + "login", data=form), timeout=30) as response:
        assert response.status == 200
    return opener


def _post_as(opener: urllib.request.OpenerDirector, url: str, path: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(url + path, data=body, headers={"Content-Type": "application/json"})
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _no_input_dependency(opener: urllib.request.OpenerDirector, url: str) -> int:
    """The id of the page load's event (the Library status: no input, no model)."""
    status, text = _get(opener, url + "config")
    assert status == 200, text
    return next(d["id"] for d in json.loads(text)["dependencies"]
                if not d["inputs"] and any(t[1] == "load" for t in d["targets"]))


def _read_events(opener: urllib.request.OpenerDirector, url: str, session: str, timeout: float = 60) -> str:
    """The session's event stream until its event completes (or the stream ends)."""
    seen = []
    with opener.open(url + f"gradio_api/queue/data?session_hash={session}", timeout=timeout) as response:
        for line in response:
            seen.append(line.decode())
            if "process_completed" in seen[-1] or "close_stream" in seen[-1]:
                break
    return "".join(seen)
