"""Fair sharing of one app among its users (issue #19: one client filled the shared queue and everyone else got
"Queue is full", votes and page loads included; requests whose client had gone still ran).

An ASGI middleware after the request guard, on Gradio's queue routes: a user (the signed-in account; without
sign-in, the client's address) may have at most `per_user` events waiting or running; one more `queue/join` gets 429
before it takes a place in the queue. An event stops counting when its result is sent on the session's event
stream, when the client drops that stream before it came (Gradio then drops or stops the event itself: measured in
tests/e2e/test_fair_sharing.py), or after `ttl` seconds (a client that never reads its stream only blocks itself).
The registry is per process, as Gradio's queue is.

On the same event streams, Gradio's own message for a value that is not among a dropdown's or radio's choices (sent
only by API callers; it shows Python reprs and the whole list) is replaced by a plain sentence (issue #19).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from copilot.ui.guard import signed_in_user

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
_COMPLETED = re.compile(rb'"msg":\s*"process_completed".*?"event_id":\s*"([^"]+)"|'
                        rb'"event_id":\s*"([^"]+)"[^\n]*?"msg":\s*"process_completed"')
_CLOSED = re.compile(rb'"msg":\s*"close_stream"')
_NOT_A_CHOICE = re.compile(rb'"Value: (?:[^"\\]|\\.)*? is not in the list of choices: (?:[^"\\]|\\.)*"')
NOT_A_CHOICE = b'"That value is not one of the choices offered here; pick one from the list."'


class PendingEvents:
    def __init__(self, ttl: float = 900.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._events: dict[str, tuple[str, str, float]] = {}     # event id → (user key, session, when joined)

    def count(self, key: str) -> int:
        with self._lock:
            self._expire()
            return sum(1 for owner, _, _ in self._events.values() if owner == key)

    def joined(self, key: str, session: str, event_id: str) -> None:
        with self._lock:
            self._events[event_id] = (key, session, self.clock())

    def completed(self, event_id: str) -> None:
        with self._lock:
            self._events.pop(event_id, None)

    def abandon(self, session: str) -> None:
        """The session's client dropped its event stream: its events no longer count."""
        with self._lock:
            for event_id in [e for e, (_, s, _) in self._events.items() if s == session]:
                del self._events[event_id]

    def _expire(self) -> None:
        now = self.clock()
        for event_id in [e for e, (_, _, t) in self._events.items() if now - t > self.ttl]:
            del self._events[event_id]


PENDING = PendingEvents()


class FairShare:
    """ASGI middleware; give it to Gradio after RequestGuard: `Middleware(FairShare, per_user=N)`."""

    def __init__(self, app: Callable, per_user: int = 8, registry: PendingEvents = PENDING) -> None:
        self.app = app
        self.per_user = per_user
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]], send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope["type"] == "http" and scope["method"] == "POST" and path.endswith("/queue/join"):
            return await self._join(scope, receive, send)
        if scope["type"] == "http" and scope["method"] == "GET" and path.endswith("/queue/data"):
            return await self._stream(scope, receive, send)
        return await self.app(scope, receive, send)

    def _key(self, scope: Scope) -> str:
        headers = {name.lower(): value for name, value in scope.get("headers", ())}
        user = signed_in_user(scope, headers)
        return user or f"client:{(scope.get('client') or ('unknown',))[0]}"

    async def _join(self, scope, receive, send) -> None:
        key = self._key(scope)
        waiting = self.registry.count(key)
        if waiting >= self.per_user:
            body = json.dumps({"detail": f"You already have {waiting} requests waiting or running; wait for one "
                                         "to finish (other users are served meanwhile)."}).encode()
            await send({"type": "http.response.start", "status": 429,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"5"),
                                    (b"content-length", str(len(body)).encode())]})
            return await send({"type": "http.response.body", "body": body, "more_body": False})
        chunks: list[bytes] = []
        request_body: list[bytes] = []

        async def reading() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request_body.append(message.get("body", b""))
            return message

        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False) and status == 200:
                    self._note_join(key, b"".join(request_body), b"".join(chunks))
            await send(message)

        await self.app(scope, reading, sending)

    def _note_join(self, key: str, request: bytes, response: bytes) -> None:
        try:
            session = json.loads(request).get("session_hash")
            event_id = json.loads(response).get("event_id")
        except (ValueError, AttributeError):
            return
        if isinstance(session, str) and isinstance(event_id, str):
            self.registry.joined(key, session, event_id)

    async def _stream(self, scope, receive, send) -> None:
        session = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("session_hash")
        finished = False

        async def sending(message: Message) -> None:
            nonlocal finished
            if message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if b"is not in the list of choices" in chunk:
                    chunk = _NOT_A_CHOICE.sub(NOT_A_CHOICE, chunk)
                    message = {**message, "body": chunk}
                for match in _COMPLETED.finditer(chunk):
                    self.registry.completed((match.group(1) or match.group(2)).decode())
                if _CLOSED.search(chunk) or not message.get("more_body", False):
                    finished = True
            await send(message)

        async def reading() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not finished and session:
                self.registry.abandon(session)
            return message

        try:
            await self.app(scope, reading, sending)
        except OSError:
            if not finished and session:
                self.registry.abandon(session)
            raise
