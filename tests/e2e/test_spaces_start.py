"""The app as a Hugging Face Space with sign-in (README front matter `hf_oauth: true`; issue #19, high 1: without
gradio's OAuth extra it crashed at start-up). Started by `python app.py` with the variables a Space sets and a
loopback stand-in of the OpenID provider:

- it starts, serves the page with the sign-in button, and /login/huggingface redirects to the provider with our
  client id;
- a visitor who has not signed in is asked to before anything personal is stored;
- a signed-in visitor (a session as Gradio stores it after the provider's callback: the library's boundary — the
  provider's token exchange itself is authlib's) saves a profile under their own Hugging Face account.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from tests.e2e.test_request_guard import _join, _port
from tests.helpers import free_port

CLIENT_ID, CLIENT_SECRET = "copilot-test-client", "copilot-test-secret"


class OpenIDProvider:
    """Serves the provider's discovery document (what Gradio's OAuth client reads at start and at login)."""

    def __init__(self) -> None:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                if self.path != "/.well-known/openid-configuration":
                    self.send_error(404)
                    return
                body = json.dumps({"issuer": provider.url, "authorization_endpoint": provider.url + "/oauth/authorize",
                                   "token_endpoint": provider.url + "/oauth/token",
                                   "userinfo_endpoint": provider.url + "/oauth/userinfo",
                                   "jwks_uri": provider.url + "/oauth/jwks"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def session_cookie(username: str) -> str:
    """Gradio's session after a Hugging Face sign-in, signed as its SessionMiddleware signs it."""
    from itsdangerous import TimestampSigner

    secret = hashlib.sha256((CLIENT_SECRET + "-v4").encode()).hexdigest()
    info = {"access_token": "hf_oauth_test", "expires_at": time.time() + 3600,
            "userinfo": {"preferred_username": username, "name": username.title(), "sub": "42"}}
    data = base64.b64encode(json.dumps({"oauth_info": info}).encode())
    return "session=" + TimestampSigner(secret).sign(data).decode()


def request(url: str, method: str, path: str, body: bytes | None = None, cookie: str = "") -> tuple[int, dict, str]:
    conn = http.client.HTTPConnection("127.0.0.1", _port(url), timeout=60)
    headers = {"Content-Type": "application/json"} if body else {}
    if cookie:
        headers["Cookie"] = cookie
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    result = response.status, dict(response.getheaders()), response.read().decode("utf-8", "replace")
    conn.close()
    return result


def completed(url: str, session: str, cookie: str = "") -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", _port(url), timeout=60)
    conn.request("GET", f"/gradio_api/queue/data?session_hash={session}", headers={"Cookie": cookie} if cookie else {})
    response = conn.getresponse()
    for line in response:
        if b"process_completed" in line:
            conn.close()
            return json.loads(line.decode()[len("data: "):])
    raise AssertionError("the event did not complete")


def test_the_space_starts_asks_anonymous_visitors_to_sign_in_and_keeps_accounts_apart(app_server, tmp_path):
    provider = OpenIDProvider()
    data_dir = tmp_path / "space-data"
    try:
        url = app_server(env={"COPILOT_DATA_DIR": str(data_dir), "SYSTEM": "spaces",
                              "SPACE_ID": "someone/research-copilot", "OAUTH_CLIENT_ID": CLIENT_ID,
                              "OAUTH_CLIENT_SECRET": CLIENT_SECRET,
                              "OAUTH_SCOPES": "openid profile", "OPENID_PROVIDER_URL": provider.url})
        status, _, _ = request(url, "GET", "/")
        assert status == 200 and "Sign in with Hugging Face" in request(url, "GET", "/config")[2]

        status, headers, _ = request(url, "GET", "/login/huggingface")
        location = headers.get("location") or headers.get("Location")
        assert status in (302, 307) and location.startswith(provider.url + "/oauth/authorize")
        assert parse_qs(urlparse(location).query)["client_id"] == [CLIENT_ID]

        config = json.loads(request(url, "GET", "/config", cookie=session_cookie("alice"))[2])
        save = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "on_save")
        profile_text = "I study retrieval for scientific question answering, with small local models."
        args = [profile_text, "retrieval, question answering", {}, []]

        status, _, text = request(url, "POST", "/gradio_api/queue/join",
                                  _join({"fn_index": save, "session_hash": "visitor-1", "data": args}))
        assert status == 200, text
        message = completed(url, "visitor-1")
        assert not message["success"] and "Sign in with Hugging Face" in message["output"]["error"]

        alice = session_cookie("alice")
        status, _, text = request(url, "POST", "/gradio_api/queue/join",
                                  _join({"fn_index": save, "session_hash": "alice-1", "data": args}), cookie=alice)
        assert status == 200, text
        message = completed(url, "alice-1", cookie=alice)
        assert message["success"] and "version" in json.dumps(message["output"])
        with sqlite3.connect(data_dir / "copilot.db") as db:
            assert db.execute("SELECT user FROM profiles").fetchall() == [("hf:alice",)]
    finally:
        provider.close()
