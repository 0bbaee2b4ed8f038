"""What the web server refuses before Gradio reads a request (issue #19), as one ASGI middleware on Gradio's app:

- a request body over BODY_LIMIT (an upload: over UPLOAD_LIMIT, Gradio then applies the MAX_UPLOAD_MB file limit) → 413,
  read no further; an upload without a length → 411; an address longer than URL_LIMIT → 414;
- a session id (`session_hash` in the query, a header, the JSON body or the path) that is not 1–64 letters, digits,
  `-` or `_` → 400 (Gradio keeps one entry per session id: 1 MB ids held 219 MB after 200 requests);
- a session id first used by one signed-in user and then by anyone else → 403: knowing another user's session id
  no longer lets a client read their live answers or cancel their ask; a request names at most one session id
  (400 otherwise), a visitor not signed in binds nothing, one user holds at most MAX_USER_SESSIONS bindings, and a
  binding dropped from memory is never given to anyone else (its id is refused from then on: issue #34, 118
  anonymous requests with 430 ids each evicted a live binding and another user read its answer);
- the page served to a visitor who has not signed in (the password login page; a Space's page before sign-in)
  carries no API schema (Gradio embeds every endpoint's schema in it).

Who is signed in is read as Gradio reads it: the password login's token cookie, Hugging Face sign-in's session.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import cookie_parser

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

BODY_LIMIT = 256 * 1024                       # a question, a profile text (20,000 characters) and Gradio's envelope
MAX_UPLOAD_MB = 200                           # an uploaded snapshot: ~100,000 abstracts (Library tab; issue #38)
UPLOAD_LIMIT = MAX_UPLOAD_MB * 1024 * 1024 + 64 * 1024    # ui.main.MAX_UPLOAD plus the multipart envelope
URL_LIMIT = 8 * 1024
DRAIN_LIMIT = 4 * 1024 * 1024                 # a refused body up to this size is read (and dropped) before the answer,
                                              # so a client still sending it sees the 413, not a reset connection
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_SESSIONS = 50_000                          # session ids remembered with their user (least recently used dropped)
MAX_USER_SESSIONS = 1_000                      # of them, one user's (their own least recently used dropped first)
RETIRED_BITS = 1 << 23                         # 1 MB filter of dropped session ids: never bound afresh to anyone
_SESSION_IN_PATH = re.compile(r"/(?:heartbeat|stream)/([^/]*)")
_API_INFO = re.compile(rb"<script>window\.gradio_api_info = .*?;</script>", re.DOTALL)
_NO_API_INFO = b'<script>window.gradio_api_info = {"named_endpoints": {}, "unnamed_endpoints": {}};</script>'


class RequestGuard:
    """ASGI middleware; give it to Gradio as `launch(app_kwargs={"middleware": [Middleware(RequestGuard)]})`."""

    def __init__(self, app: Callable, body_limit: int = BODY_LIMIT, upload_limit: int = UPLOAD_LIMIT,
                 max_sessions: int = MAX_SESSIONS) -> None:
        self.app = app
        self.body_limit = body_limit
        self.upload_limit = upload_limit
        self.max_sessions = max_sessions
        self._owners: OrderedDict[str, str] = OrderedDict()
        self._by_user: dict[str, OrderedDict[str, None]] = {}
        self._retired = RetiredIds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {name.lower(): value for name, value in scope.get("headers", ())}
        upload = scope["method"] == "POST" and scope["path"].rstrip("/").endswith("/upload")
        limit = self.upload_limit if upload else self.body_limit
        refusal = _size_refusal(scope, headers, limit, upload)
        if refusal:
            if refusal[0] == 413 and int(headers[b"content-length"]) <= DRAIN_LIMIT:
                await _drain(receive)
            return await _refuse(send, *refusal)
        if not upload:                         # bounded by the limit: read it whole, then hand it on
            body, ended = await _read_body(receive, limit)
            if body is None:
                if not ended:
                    await _drain(receive)
                return await _refuse(send, 413, f"Request too large: at most {limit // 1024} KB.")
            receive = _replay(body, receive)
        named = _session_ids(scope, headers, None if upload else body)
        if any(not isinstance(s, str) or not SESSION_ID.fullmatch(s) for s in named):
            return await _refuse(send, 400, "Bad session id: 1 to 64 letters, digits, '-' or '_'. Reload the page.")
        sessions = [s for s in named if isinstance(s, str)]
        if len(set(sessions)) > 1:
            return await _refuse(send, 400, "A request names one session id at most. Reload the page.")
        user = signed_in_user(scope, headers)
        if sessions and not self._owned_by(sessions[0], user):
            return await _refuse(send, 403, "This session belongs to another user, or has expired. Reload the page.")
        if user is None and _has_login(scope) and scope["method"] == "GET":
            send = _without_api_info(send)
        await self.app(scope, receive, send)

    def _owned_by(self, session: str, user: str | None) -> bool:
        """Bind `session` to `user` on first sight; afterwards only that user may use it. A visitor not signed in
        binds nothing (any visitor not signed in may use an unbound id; there is nothing of theirs to keep apart). An
        id dropped from memory is refused to everyone."""
        owner = self._owners.get(session)
        if owner is not None:
            self._owners.move_to_end(session)
            self._by_user[owner].move_to_end(session)
            return owner == user
        if session in self._retired:
            return False
        if user is None:
            return True
        self._owners[session] = user
        mine = self._by_user.setdefault(user, OrderedDict())
        mine[session] = None
        if len(mine) > MAX_USER_SESSIONS:
            self._drop(next(iter(mine)))
        while len(self._owners) > self.max_sessions:
            self._drop(next(iter(self._owners)))
        return True

    def _drop(self, session: str) -> None:
        owner = self._owners.pop(session)
        mine = self._by_user[owner]
        del mine[session]
        if not mine:
            del self._by_user[owner]
        self._retired.add(session)


class RetiredIds:
    """Session ids dropped from the bindings, as a Bloom filter (bounded memory; a false positive asks a fresh page to
    reload: about 1 in 50 once a million ids were dropped)."""

    def __init__(self, bits: int = RETIRED_BITS, hashes: int = 3) -> None:
        self.bits = bits
        self.hashes = hashes
        self._filter = bytearray(bits // 8)
        self._key = os.urandom(16)

    def _positions(self, session: str) -> list[int]:
        digest = hashlib.blake2b(session.encode(), key=self._key, digest_size=8 * self.hashes).digest()
        return [int.from_bytes(digest[8 * i:8 * i + 8], "big") % self.bits for i in range(self.hashes)]

    def add(self, session: str) -> None:
        for position in self._positions(session):
            self._filter[position // 8] |= 1 << (position % 8)

    def __contains__(self, session: str) -> bool:
        return all(self._filter[p // 8] & (1 << (p % 8)) for p in self._positions(session))


def signed_in_user(scope: Scope, headers: dict[bytes, bytes]) -> str | None:
    """The user this request is signed in as, read as Gradio reads it, or None: the password login's token cookie
    (Gradio's `App.tokens`), else Hugging Face sign-in's session (SessionMiddleware, which runs before this one)."""
    app = scope.get("app")
    tokens, cookie_id = getattr(app, "tokens", None), getattr(app, "cookie_id", None)
    if tokens and cookie_id and b"cookie" in headers:
        cookies = cookie_parser(headers[b"cookie"].decode("latin-1"))
        token = cookies.get(f"access-token-{cookie_id}") or cookies.get(f"access-token-unsecure-{cookie_id}")
        if token and tokens.get(token):
            return f"password:{tokens[token]}"
    session = scope.get("session")
    info = session.get("oauth_info") if isinstance(session, dict) else None
    name = ((info or {}).get("userinfo") or {}).get("preferred_username") if isinstance(info, dict) else None
    return f"hf:{name}" if isinstance(name, str) and name else None


def _has_login(scope: Scope) -> bool:
    """Whether this app signs visitors in: a password login, or Hugging Face sign-in (its session middleware)."""
    return getattr(scope.get("app"), "auth", None) is not None or "session" in scope


def _size_refusal(scope: Scope, headers: dict[bytes, bytes], limit: int, upload: bool) -> tuple[int, str] | None:
    if len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") > URL_LIMIT:
        return 414, f"Address too long: at most {URL_LIMIT // 1024} KB."
    declared = headers.get(b"content-length")
    if declared is None:
        return (411, "An upload must say its length (Content-Length).") if upload else None
    try:
        length = int(declared)
    except ValueError:
        return 400, "Bad Content-Length."
    if length > limit:
        what = "Upload" if upload else "Request"
        return 413, f"{what} too large: {length // 1024} KB, at most {limit // 1024} KB."
    return None


async def _read_body(receive: Receive, limit: int) -> tuple[bytes | None, bool]:
    """The request body (None once it passes `limit`: reading stops there), and whether its end was read."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":      # the client went away
            return b"".join(chunks), True
        chunk = message.get("body", b"")
        size += len(chunk)
        ended = not message.get("more_body", False)
        if size > limit:
            return None, ended
        chunks.append(chunk)
        if ended:
            return b"".join(chunks), True


async def _drain(receive: Receive) -> None:
    """Read and drop what is left of a refused body, up to DRAIN_LIMIT bytes (nothing is kept)."""
    size = 0
    while size <= DRAIN_LIMIT:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        size += len(message.get("body", b""))


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body already read, then waits on the real one (for the client's disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _session_ids(scope: Scope, headers: dict[bytes, bytes], body: bytes | None) -> list[object]:
    """Every session id the request names: in the query, the `session_hash` header, the path, the JSON body."""
    query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
    found: list[object] = [value for name, value in query if name == "session_hash"]
    if b"session_hash" in headers:
        found.append(headers[b"session_hash"].decode("latin-1"))
    found += _SESSION_IN_PATH.findall(scope["path"])
    if body and b"session_hash" in body:
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if isinstance(payload, dict) and payload.get("session_hash") is not None:
            found.append(payload["session_hash"])
    return found


def _without_api_info(send: Send) -> Send:
    """A `send` that removes the API schema from an HTML page (held whole: a page is tens of KB)."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def sending(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            content_type = dict(message.get("headers", ())).get(b"content-type", b"")
            if not content_type.startswith(b"text/html"):
                return await send(message)
            start = message
            return None
        if start is None or message["type"] != "http.response.body":
            return await send(message)
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return None
        body = _API_INFO.sub(_NO_API_INFO, b"".join(chunks))
        start["headers"] = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
        start["headers"].append((b"content-length", str(len(body)).encode()))
        await send(start)
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return sending


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message, "detail": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})
