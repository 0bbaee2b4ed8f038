"""The running app's real routes against abuse (issue #19): /login refuses a guesser (before, 300 wrong passwords
went through in 0.4 s with no delay or lock-out); the upload route refuses a file over the limit (before, any
size was accepted)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.parse
import urllib.request

from copilot.ratelimit import LOGIN_ATTEMPTS


def _login(url: str, username: str, password: str) -> int:
    body = urllib.parse.urlencode({"username": username, "password": password}).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url + "login", data=body), timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_running_app_refuses_a_guesser(app_server):
    url = app_server(env={"COPILOT_AUTH": "ann:right horse"})
    assert _login(url, "ann", "right horse") == 200
    refused = [_login(url, "ann", f"guess {n}") for n in range(LOGIN_ATTEMPTS + 20)]
    assert all(code >= 400 for code in refused)
    assert _login(url, "ann", "right horse") >= 400      # locked for a minute


def test_the_upload_route_refuses_a_large_file(app_server):
    """An upload over the limit (MAX_UPLOAD_MB, raised for snapshots in issue #38) is refused from its announced
    length alone, before a byte of it is read."""
    from copilot.ui.guard import MAX_UPLOAD_MB
    from copilot.ui.main import MAX_UPLOAD

    url = app_server()
    assert MAX_UPLOAD == f"{MAX_UPLOAD_MB}mb"
    port = urllib.parse.urlsplit(url).port
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:    # over the limit announced, none sent
        sock.sendall(b"POST /gradio_api/upload HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: multipart/form-data; boundary=copilot-test-boundary\r\n"
                     + f"Content-Length: {(MAX_UPLOAD_MB + 1) * 1024 * 1024}\r\n\r\n".encode())
        answer = sock.recv(200)
    assert answer.startswith(b"HTTP/1.1 413"), answer
