"""Fair sharing of one app among its users (issue #19: one client filled the shared queue and everyone else got
"Queue is full", votes and page loads included; requests whose client had gone still ran).

An ASGI middleware after the request guard, on every Gradio route that puts work on the queue or runs it (issue #34:
`call/<api>` and `call/v2/<api>` were not counted, nor concurrent joins between the check and the join): a user
(the signed-in account; without sign-in, the client's address) may have at most `per_user` events waiting or running;
a place is taken before the request reaches Gradio, and one more gets 429. An event stops counting when its result is
sent on the session's event stream (or its `call/<api>/<event id>` stream), when the client drops that stream before
it came (Gradio then drops or stops the event itself: measured in tests/e2e/test_fair_sharing.py), or after `ttl`
seconds (a client that never reads its stream only blocks itself). Only the user who made a `call/<api>` event reads
its result; an unknown `fn_index` or API name gets a 404 (Gradio answered a 500 with a traceback in the log). The
registry is per process, as Gradio's queue is.

On the same event streams, Gradio's own message for a value that is not among a dropdown's or radio's choices (sent
only by API callers; it shows Python reprs and the whole list) is replaced by a plain sentence (issue #19).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from copilot.ui.guard import BODY_LIMIT, _read_body, _replay, signed_in_user

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
_COMPLETED = re.compile(rb'"msg":\s*"process_completed".*?"event_id":\s*"([^"]+)"|'
                        rb'"event_id":\s*"([^"]+)"[^\n]*?"msg":\s*"process_completed"')
_CLOSED = re.compile(rb'"msg":\s*"close_stream"')
_NOT_A_CHOICE = re.compile(rb'"Value: (?:[^"\\]|\\.)*? is not in the list of choices: (?:[^"\\]|\\.)*"')
NOT_A_CHOICE = b'"That value is not one of the choices offered here; pick one from the list."'


class PendingEvents:
    """Each user's events waiting or running, and who owns each event id (kept after it finished, for reading its
    result: the `owners` most recent). A place is reserved before the event joins the queue, so concurrent joins
    cannot pass the limit between the check and the join."""

    def __init__(self, ttl: float = 900.0, clock: Callable[[], float] = time.monotonic,
                 owners: int = 20_000) -> None:
        self.ttl = ttl
        self.clock = clock
        self.max_owners = owners
        self._lock = threading.Lock()
        self._events: dict[str, tuple[str, str, float]] = {}     # event id (or ticket) → (user key, session, when)
        self._owners: OrderedDict[str, tuple[str, str]] = OrderedDict()   # event id → (user key, session)
        self._tickets = itertools.count()

    def count(self, key: str) -> int:
        with self._lock:
            self._expire()
            return self._count(key)

    def reserve(self, key: str, limit: int) -> str | None:
        """A ticket holding one of `key`'s places, or None when `limit` places are taken (check and take at once)."""
        with self._lock:
            self._expire()
            if self._count(key) >= limit:
                return None
            ticket = f"ticket:{next(self._tickets)}"
            self._events[ticket] = (key, "", self.clock())
            return ticket

    def release(self, ticket: str) -> None:
        with self._lock:
            self._events.pop(ticket, None)

    def joined(self, key: str, session: str, event_id: str, ticket: str | None = None) -> None:
        """The event took its place (its ticket's, if it had one)."""
        with self._lock:
            if ticket is not None:
                self._events.pop(ticket, None)
            self._events[event_id] = (key, session, self.clock())
            self._owners[event_id] = (key, session)
            while len(self._owners) > self.max_owners:
                self._owners.popitem(last=False)

    def owner(self, event_id: str) -> tuple[str, str] | None:
        """(user key, session) of a known event id, else None."""
        with self._lock:
            return self._owners.get(event_id)

    def completed(self, event_id: str) -> None:
        with self._lock:
            self._events.pop(event_id, None)

    def abandon(self, session: str) -> None:
        """The session's client dropped its event stream: its events no longer count."""
        with self._lock:
            for event_id in [e for e, (_, s, _) in self._events.items() if s == session]:
                del self._events[event_id]

    def _count(self, key: str) -> int:
        return sum(1 for owner, _, _ in self._events.values() if owner == key)

    def _expire(self) -> None:
        now = self.clock()
        for event_id in [e for e, (_, _, t) in self._events.items() if now - t > self.ttl]:
            del self._events[event_id]


PENDING = PendingEvents()


_JOIN = re.compile(r"/(?:queue/join|call/(?:v2/)?([^/]+))/?$")
_DIRECT = re.compile(r"/(?:run|api)/[^/]+/?$")
_RESULT = re.compile(r"/call/(?:v2/)?[^/]+/([^/]+)/?$")
_SSE_END = re.compile(rb"^event: (?:complete|error)$", re.MULTILINE)


class FairShare:
    """ASGI middleware; give it to Gradio after RequestGuard: `Middleware(FairShare, per_user=N)`.

    Every route that puts work on the queue (`queue/join`, `call/<api>`, `call/v2/<api>`) or runs it directly
    (`run/<api>`, `api/<api>`) takes one of the user's places before Gradio sees it; the result of a `call/<api>`
    event (`GET call/<api>/<event id>`) is given only to the user who made it."""

    def __init__(self, app: Callable, per_user: int = 8, registry: PendingEvents = PENDING) -> None:
        self.app = app
        self.per_user = per_user
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]], send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope.get("path", ""), scope["method"]
        if method == "POST" and (join := _JOIN.search(path)):
            return await self._join(scope, receive, send, join.group(1))
        if method == "POST" and _DIRECT.search(path):
            return await self._direct(scope, receive, send)
        if method == "GET" and path.rstrip("/").endswith("/queue/data"):
            session = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("session_hash")
            return await self._stream(scope, receive, send, session)
        if method == "GET" and (result := _RESULT.search(path)):
            return await self._result(scope, receive, send, result.group(1))
        return await self.app(scope, receive, send)

    def _key(self, scope: Scope) -> str:
        headers = {name.lower(): value for name, value in scope.get("headers", ())}
        user = signed_in_user(scope, headers)
        return user or f"client:{(scope.get('client') or ('unknown',))[0]}"

    async def _join(self, scope, receive, send, api_name: str | None) -> None:
        body, _ = await _read_body(receive, BODY_LIMIT)
        payload = _json_object(body or b"")
        unknown = _unknown_event(scope, payload, api_name)
        if unknown:
            return await _answer(send, 404, unknown)
        key = self._key(scope)
        ticket = self.registry.reserve(key, self.per_user)
        if ticket is None:
            return await _too_many(send, self.per_user)
        chunks: list[bytes] = []
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False) and status == 200:
                    self._note_join(key, payload.get("session_hash"), b"".join(chunks), ticket)
            await send(message)

        try:
            await self.app(scope, _replay(body or b"", receive), sending)
        finally:
            self.registry.release(ticket)          # nothing when the event took the ticket's place

    def _note_join(self, key: str, session: object, response: bytes, ticket: str) -> None:
        event_id = _json_object(response).get("event_id")
        if isinstance(event_id, str):
            self.registry.joined(key, session if isinstance(session, str) else event_id, event_id, ticket)

    async def _direct(self, scope, receive, send) -> None:
        """A direct call runs while its request is open: it holds one of the user's places meanwhile."""
        ticket = self.registry.reserve(self._key(scope), self.per_user)
        if ticket is None:
            return await _too_many(send, self.per_user)
        try:
            await self.app(scope, receive, send)
        finally:
            self.registry.release(ticket)

    async def _result(self, scope, receive, send, event_id: str) -> None:
        owner = self.registry.owner(event_id)
        if owner is None:
            return await _answer(send, 404, "No such event: it was never started here, or it is too old.")
        if owner[0] != self._key(scope):
            return await _answer(send, 403, "This event belongs to another user.")
        await self._stream(scope, receive, send, owner[1], event_id)

    async def _stream(self, scope, receive, send, session: str | None, event_id: str | None = None) -> None:
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
                if event_id and _SSE_END.search(chunk):
                    self.registry.completed(event_id)
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


def _json_object(raw: bytes) -> dict:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _unknown_event(scope: Scope, payload: dict, api_name: str | None) -> str | None:
    """Why this join names no event of the app (Gradio answers those with a 500 and a traceback), else None."""
    blocks = getattr(scope.get("app"), "get_blocks", lambda: None)()
    fns = getattr(blocks, "fns", None)
    if not isinstance(fns, dict):
        return None
    if api_name is not None:
        if any(fn.api_name == api_name for fn in fns.values()):
            return None
        return f"No such API endpoint: {api_name[:64]!r}."
    index = payload.get("fn_index")
    if index is None or isinstance(index, bool) or not isinstance(index, int) or index in fns:
        return None                                # Gradio's own 400/422 for a missing or non-integer index
    return f"No such event: fn_index {index} (there are {len(fns)})."


async def _too_many(send, limit: int) -> None:
    await _answer(send, 429, f"You already have {limit} requests waiting or running; wait for one to finish "
                             "(other users are served meanwhile).", [(b"retry-after", b"5")])


async def _answer(send, status: int, message: str, extra: list | None = None) -> None:
    body = json.dumps({"detail": message, "error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(extra or [])]})
    await send({"type": "http.response.body", "body": body, "more_body": False})
