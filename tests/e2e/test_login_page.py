"""The running app's real /login route refuses a guesser (issue #19, medium 8): before, 300 wrong passwords went
through in 0.4 s with no delay or lock-out."""

from __future__ import annotations

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
