"""A test double at the outer boundary: Hugging Face's inference router on loopback HTTPS (tests/tls.py's certificate),
speaking the OpenAI chat API the way the `openai` client reads it (server-sent events, a last usage chunk, [DONE]).

Every request's bearer token is checked against the visitors it knows: an unknown one gets 401. A known token's mode
picks the reply: `ok` streams a written answer naming its visitor (or, for the thought prompt, a thought), `401`,
`402`, `429`, `503` answer that status with a body that echoes the Authorization header (as careless proxies do),
`stall` sends only keep-alive comments, `drip` one short piece a second. Each request is recorded (token, visitor,
model, prompt kind, when it began and ended)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.tls import Certificate, serve_tls


@dataclass
class Visitor:
    name: str
    mode: str = "ok"


@dataclass
class Seen:
    token: str
    visitor: str | None
    model: str
    kind: str                 # "answer" | "thought"
    started: float
    ended: float = 0.0


ERROR_BODIES = {
    401: "Invalid credentials in Authorization header: {auth}",
    402: "You have exceeded your monthly included credits for Inference Providers ({auth}).",
    429: "Rate limit reached for {auth}: too many requests.",
    503: "Service unavailable upstream ({auth}).",
}


class RouterDouble:
    def __init__(self, certificate: Certificate, visitors: dict[str, Visitor], piece_delay: float = 0.0) -> None:
        self.visitors = visitors
        self.piece_delay = piece_delay
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                auth = self.headers.get("Authorization", "")
                token = auth.removeprefix("Bearer ")
                visitor = owner.visitors.get(token)
                prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
                kind = "thought" if "reusable research note" in prompt else "answer"
                seen = Seen(token, visitor.name if visitor else None, body.get("model", ""), kind, time.monotonic())
                with owner._lock:
                    owner.seen.append(seen)
                    number = sum(s.visitor == seen.visitor and s.kind == "answer" for s in owner.seen)
                try:
                    mode = visitor.mode if visitor else "401"
                    if mode.isdigit():
                        return self._json(int(mode), {"error": ERROR_BODIES[int(mode)].format(auth=auth)})
                    if mode == "stall":
                        return self._stall()
                    text = (owner.thought(visitor.name) if kind == "thought"
                            else owner.answer(visitor.name, number))
                    return self._stream(text.split(" "), 1.0 if mode == "drip" else owner.piece_delay)
                finally:
                    seen.ended = time.monotonic()

            def _json(self, status, obj):
                payload = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stall(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for _ in range(120):
                        self.wfile.write(b": keepalive\n\n")
                        self.wfile.flush()
                        time.sleep(0.25)
                except OSError:
                    pass

            def _stream(self, words, delay):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for n, word in enumerate(words):
                        chunk = {"id": "r1", "object": "chat.completion.chunk", "created": 0, "model": "router",
                                 "choices": [{"index": 0, "delta": {"content": word if n == 0 else " " + word},
                                              "finish_reason": None}]}
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                        if delay:
                            time.sleep(delay)
                    usage = {"prompt_tokens": 100, "completion_tokens": len(words), "total_tokens": 100 + len(words)}
                    chunk = {"id": "r1", "object": "chat.completion.chunk", "created": 0, "model": "router",
                             "choices": [], "usage": usage}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
                except OSError:
                    pass

        self.server = serve_tls(ThreadingHTTPServer(("127.0.0.1", 0), Handler), certificate)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="router-double")

    @staticmethod
    def answer(visitor: str, number: int) -> str:
        """A written answer citing the first two sources; the visitor's name and the request's number in it, so
        the two sides of a comparison differ and each visitor's answers can be told apart."""
        return (f"Written for {visitor} (answer {number}): retrieval-augmented models are judged by how well the "
                f"retrieved passages support the answer [1], and by exact match on question answering benchmarks [2].")

    @staticmethod
    def thought(visitor: str) -> str:
        return ("1\nRetrieval-augmented language models are evaluated both on benchmark accuracy and on how well "
                f"their retrieved evidence supports each claim, as {visitor}'s preferred answer found.")

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> RouterDouble:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
