"""The attack of issue #34, rerun as one script through real HTTP against the running app on loopback (bounded: a few
hundred requests, each with a timeout). `python -m pytest -q -m attack tests/e2e/test_attack.py` runs it alone; the
figures it prints are in docs/reliability.md ("Hardening, round two").

Each test reproduces one finding of the issue and checks it no longer holds:
- every route that queues work passes the user's share (`call/<api>`, `call/v2/<api>`, `queue/join`; 150 concurrent
  joins included), the direct `run/<api>` route runs no queued event, only an event's owner reads its result, an
  unknown event is a clean 404 — with password users and in the Spaces mode without signing in;
- a request naming many session ids is refused, and no eviction hands a live session to another user.
"""

from __future__ import annotations

import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.test_request_guard import ACCOUNTS, _join, _no_input_dependency, _port, _read_events, _signed_in
from tests.e2e.test_spaces_start import CLIENT_ID, CLIENT_SECRET, OpenIDProvider, session_cookie

pytestmark = pytest.mark.attack

PER_USER = 4


def _cookie(opener) -> str:
    jar = next(h for h in opener.handlers if hasattr(h, "cookiejar")).cookiejar
    return "; ".join(f"{c.name}={c.value}" for c in jar)


def _http(url: str, method: str, path: str, body: dict | bytes | None = None, cookie: str = "",
          timeout: float = 30) -> tuple[int, str]:
    """One request on its own connection: (status, text)."""
    conn = http.client.HTTPConnection("127.0.0.1", _port(url), timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if cookie:
        headers["Cookie"] = cookie
    raw = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    try:
        conn.request(method, path, body=raw, headers=headers)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _flood(url: str, requests: list[tuple[str, dict]], cookie: str = "", workers: int = 150) -> list[int]:
    """All `requests` (path, body) at once from `workers` threads; their statuses."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda r: _http(url, "POST", r[0], r[1], cookie)[0], requests))


def _dependency(url: str, api_name: str, cookie: str = "") -> int:
    config = json.loads(_http(url, "GET", "/config", cookie=cookie)[1])
    return next(d["id"] for d in config["dependencies"] if d.get("api_name") == api_name)


def _log(url: str, tmp_path: Path) -> str:
    return (tmp_path / f"app-{_port(url)}.log").read_text(errors="replace")


def test_every_queueing_route_passes_the_users_share(app_server, tmp_path):
    url = app_server(preload=30, env={"COPILOT_AUTH": ACCOUNTS, "COPILOT_USER_PENDING": str(PER_USER),
                                      "COPILOT_RATE_LIMIT": "0", "COPILOT_ANSWER_MAX_TOKENS": "16"})
    ann = _cookie(_signed_in(url, "ann", "ann's password"))
    bob_opener = _signed_in(url, "bob", "bob's password")
    bob = _cookie(bob_opener)
    ask = _dependency(url, "ask", ann)
    started = time.monotonic()
    calls = _flood(url, [("/gradio_api/call/ask", {"data": [f"flood {n}?", False, None]}) for n in range(280)], ann)
    call_s = time.monotonic() - started
    joins = _flood(url, [("/gradio_api/queue/join", json.loads(_join({"fn_index": ask, "session_hash": f"f{n}",
                                                                        "data": [f"q{n}?", False, None]})))
                         for n in range(150)], ann)
    v2 = _flood(url, [("/gradio_api/call/v2/ask", {"question": "x?"}) for _ in range(20)], ann, workers=20)
    print(f"\nfair share: 280 call/ask in {call_s:.2f} s → {calls.count(200)} accepted, {calls.count(429)} refused; "
          f"150 concurrent queue/join → {joins.count(200)} accepted; 20 call/v2 → {v2.count(200)} accepted")
    assert calls.count(200) <= PER_USER and calls.count(429) >= 280 - PER_USER
    assert joins.count(200) + calls.count(200) + v2.count(200) <= PER_USER, (calls, joins, v2)

    page_load = _no_input_dependency(bob_opener, url)       # another user is served meanwhile
    waited = time.monotonic()
    status, _ = _http(url, "POST", "/gradio_api/queue/join", _join({"fn_index": page_load, "session_hash": "bobs"}),
                      bob)
    assert status == 200 and "process_completed" in _read_events(bob_opener, url, "bobs", timeout=60)
    print(f"another user's page load answered in {time.monotonic() - waited:.2f} s")

    status, text = _http(url, "POST", "/gradio_api/call/show", {"data": []}, bob)
    event_id = json.loads(text)["event_id"]
    assert _http(url, "GET", f"/gradio_api/call/show/{event_id}", cookie=ann)[0] == 403
    assert _http(url, "GET", "/gradio_api/call/show/0123456789abcdef", cookie=bob)[0] == 404
    status, text = _http(url, "GET", f"/gradio_api/call/show/{event_id}", cookie=bob)
    # the owner gets the result stream (show called with no data: an error event)
    assert status == 200 and text.startswith("event: ")

    assert _http(url, "POST", "/gradio_api/run/ask", {"data": ["direct?", False, None]}, bob)[0] == 404
    logged = len(_log(url, tmp_path))     # show called with no data above logs Gradio's own traceback
    for index in (9999, -1):
        status, text = _http(url, "POST", "/gradio_api/queue/join", _join({"fn_index": index, "session_hash": "bobs"}),
                             bob)
        assert status == 404 and "No such event" in text
    assert _http(url, "POST", "/gradio_api/call/no_such_api", {"data": []}, bob)[0] == 404
    # bob's session is the live one: ann's own share is still full of her flood's accepted asks
    _session_flood_transfers_nothing(url, bob, ann, page_load)
    assert "Traceback" not in _log(url, tmp_path)[logged:]        # none from the probes that follow it


def _session_flood_transfers_nothing(url: str, ann: str, bob: str, page_load: int) -> None:
    """The issue's flush: 118 requests not signed in, 430 session ids each, then another user takes a live session."""
    status, _ = _http(url, "POST", "/gradio_api/queue/join", _join({"fn_index": page_load, "session_hash": "ann-live"}),
                      ann)
    assert status == 200
    query = "&".join(f"session_hash=f{n}" for n in range(430))       # 7 KB: under the address limit
    started = time.monotonic()
    flood = [_http(url, "GET", f"/gradio_api/queue/data?{query}")[0] for _ in range(118)]
    print(f"session flush: 118 requests × 430 session ids in {time.monotonic() - started:.2f} s → "
          f"{flood.count(400)} refused with 400")
    assert flood.count(400) == 118
    assert _http(url, "GET", "/gradio_api/queue/data?session_hash=ann-live", cookie=bob, timeout=10)[0] == 403
    assert _http(url, "GET", "/gradio_api/queue/data?session_hash=ann-live", timeout=10)[0] == 403


def test_anonymous_visitors_of_a_space_have_a_share_too(app_server, tmp_path):
    provider = OpenIDProvider()
    try:
        url = app_server(env={"SYSTEM": "spaces", "SPACE_ID": "someone/research-copilot",
                              "OAUTH_CLIENT_ID": CLIENT_ID, "OAUTH_CLIENT_SECRET": CLIENT_SECRET,
                              "OAUTH_SCOPES": "openid profile", "OPENID_PROVIDER_URL": provider.url,
                              "COPILOT_USER_PENDING": str(PER_USER), "COPILOT_ARXIV_TIMEOUT": "30",
                              "COPILOT_ARXIV_RETRIES": "1"})
        started = time.monotonic()
        lookups = _flood(url, [("/gradio_api/call/on_lookup", {"data": ["2401.00001"]}) for _ in range(270)])
        print(f"\nSpaces, not signed in: 270 call/on_lookup in {time.monotonic() - started:.2f} s → "
              f"{lookups.count(200)} accepted, {lookups.count(429)} refused")
        assert lookups.count(200) <= PER_USER and lookups.count(429) >= 270 - PER_USER
        signed_in = session_cookie("carol")
        page_load = _dependency(url, "show", signed_in)
        status, _ = _http(url, "POST", "/gradio_api/queue/join",
                          _join({"fn_index": page_load, "session_hash": "carols"}), signed_in)
        assert status == 200
    finally:
        provider.close()
