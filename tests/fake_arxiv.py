"""A loopback fake arXiv API server that answers with verbatim recorded arXiv responses.

Seeded from `../shared/data/arxiv-api-responses/` (never copied into the repo):

- `arxiv.py_2026_recorded/*.json` ({url, status_code, body}): answered when the request's query parameters
  equal the recorded URL's parameters exactly (order and %-encoding do not matter). Covers id lookups,
  an empty result, the HTTP 400 error feed for `id_list=abc`, and `search_query=testing` pages
  (sortBy=relevance, start 0/5/9/10/20/30/40/50, max_results 10/15/100).
- `arxiv.py_2016_xml/*.xml` and `orijtech_2017_atom/deep_dream-{0,1,2}.atom` (old feed format): the query
  recorded in each feed's <title> (e.g. `search_query=au:del_maestro`, `id_list=1111.2011v2`,
  `search_query=deep dream` with start 0, 1, 2 -- offsets one result apart, so those pages overlap) is
  answered for that start whatever the sort order and page size. Each holds one page of at most 10 entries
  while claiming more results (au:del_maestro: 31), so ask for max_results <= 10, or the client asks for a
  page that was never recorded and gets an empty feed.
- anything else: an empty but valid (2026-format) feed, like arXiv's answer to a query without results.

Fault switches (each applies to the next requests, in this order of precedence):
`fail_next(n, status=503)`, `hang_next(n, seconds)` (the handler waits longer than the client's timeout),
`drip_next(n, interval)` (the answer one byte at a time), `endless_next(n)` (an answer that never ends, sent as
fast as the client reads),
`garble_next(n, mode="truncate"|"garbage")` (half of the would-be body, or bytes that are not XML).

Use in tests (`fake_arxiv_https` is the same server over TLS, its certificate trusted; it needs `tls_cert` from
tests.tls imported beside it):

    from tests.fake_arxiv import fake_arxiv   # the fixture
    def test_x(fake_arxiv, tmp_path):
        settings = make_settings(tmp_path, arxiv_api_url=fake_arxiv.url)

or run it on its own: `python -m tests.fake_arxiv --port 8123` (prints the URL, serves until Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.tls import Certificate, serve_tls, trust

RESPONSES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "arxiv-api-responses"
API_PATH = "/api/query"

EMPTY_FEED = """<?xml version='1.0' encoding='UTF-8'?>
<feed xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" xmlns:arxiv="http://arxiv.org/schemas/atom" \
xmlns="http://www.w3.org/2005/Atom">
  <id>https://arxiv.org/api/fake-empty</id>
  <title>arXiv Query: {query}</title>
  <updated>2026-04-12T22:09:26Z</updated>
  <opensearch:itemsPerPage>{per_page}</opensearch:itemsPerPage>
  <opensearch:totalResults>0</opensearch:totalResults>
  <opensearch:startIndex>{start}</opensearch:startIndex>
</feed>
"""
GARBAGE = b"\x00\x9f\x92\x96 <<<not an atom feed>>> \xff\xfe" * 8


def _params(query: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(parse_qsl(query, keep_blank_values=True)))


@dataclass
class Canned:
    status: int
    body: bytes
    source: str  # file it came from (for debugging a test)


def _load_recorded() -> tuple[dict, dict]:
    """exact: {sorted params: Canned}; loose: {(search_query, id_list, start): Canned}."""
    exact: dict[tuple, Canned] = {}
    for path in sorted((RESPONSES / "arxiv.py_2026_recorded").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        exact[_params(urlsplit(record["url"]).query)] = Canned(
            int(record["status_code"]), record["body"].encode("utf-8"), path.name)
    loose: dict[tuple, Canned] = {}
    title = re.compile(r"<title[^>]*>ArXiv Query: (.*?)</title>", re.S)
    old_files = sorted((RESPONSES / "arxiv.py_2016_xml").glob("*.xml"))
    old_files += sorted((RESPONSES / "orijtech_2017_atom").glob("deep_dream-*.atom"))
    for path in old_files:
        body = path.read_bytes()
        query = unescape(title.search(body.decode("utf-8")).group(1))
        # the title shows the query decoded, e.g. 'search_query=au:del_maestro AND ti:"x"&id_list=&start=0…'
        fields = dict(part.split("=", 1) for part in query.split("&") if "=" in part)
        key = (fields.get("search_query", ""), fields.get("id_list", ""), fields.get("start", "0"))
        loose[key] = Canned(200, body, path.name)
    return exact, loose


class FakeArxiv:
    """The server; `.url` is the endpoint to use as COPILOT_ARXIV_API_URL."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls: Certificate | None = None) -> None:
        self.exact, self.loose = _load_recorded()
        self.custom: dict[tuple, Canned] = {}
        self.listing: Canned | None = None
        self.requests: list[str] = []          # path + query of every request, in order
        self._lock = threading.Lock()
        self._faults: list[tuple[str, object]] = []
        self._stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                fake._handle(self)

            def log_message(self, *args) -> None:  # keep pytest output clean
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        if tls:
            serve_tls(self.server, tls)
        self.host, self.port = self.server.server_address[:2]
        self.url = f"{'https' if tls else 'http'}://{self.host}:{self.port}{API_PATH}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="fake-arxiv", daemon=True)

    # --- lifecycle
    def start(self) -> FakeArxiv:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes hanging handlers
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeArxiv:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- switches
    def fail_next(self, count: int = 1, status: int = 503) -> None:
        """The next `count` requests are answered with HTTP `status` (default 503) and a short text body."""
        with self._lock:
            self._faults.extend([("status", status)] * count)

    def hang_next(self, count: int = 1, seconds: float = 30.0) -> None:
        """The next `count` requests get no answer for `seconds` (set it above the client's timeout)."""
        with self._lock:
            self._faults.extend([("hang", seconds)] * count)

    def drip_next(self, count: int = 1, interval: float = 1.0) -> None:
        """The next `count` requests get their answer one byte every `interval` seconds (a per-read timeout
        longer than `interval` never fires)."""
        with self._lock:
            self._faults.extend([("drip", interval)] * count)

    def drip_headers_next(self, count: int = 1, interval: float = 1.0) -> None:
        """The next `count` requests get their status line and headers one byte every `interval` seconds, then
        the answer (issue #34: a deadline on the body alone never fires on this)."""
        with self._lock:
            self._faults.extend([("drip-headers", interval)] * count)

    def endless_next(self, count: int = 1) -> None:
        """The next `count` requests get a 200 answer without a length whose body never ends (an open feed, then
        entries without end, 64 KB at a time)."""
        with self._lock:
            self._faults.extend([("endless", None)] * count)

    def garble_next(self, count: int = 1, mode: str = "truncate") -> None:
        """The next `count` requests get a broken body: 'truncate' (first half of the real answer) or
        'garbage' (bytes that are not XML at all). The status is 200."""
        if mode not in ("truncate", "garbage"):
            raise ValueError("mode is 'truncate' or 'garbage'")
        with self._lock:
            self._faults.extend([(mode, None)] * count)

    def add_response(self, query: str | dict, body: str | bytes, status: int = 200) -> None:
        """Answer requests whose parameters equal `query` (a query string or dict) with `body`."""
        params = _params(query) if isinstance(query, str) else tuple(sorted((k, str(v)) for k, v in query.items()))
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.custom[params] = Canned(status, data, "custom")

    def serve_listing(self, recorded: str) -> None:
        """Answer the first page of every date-window query (the daily ingestion's `submittedDate:[…]`, whose
        window moves with the clock) with the recorded file `recorded` of arxiv.py_2026_recorded."""
        record = json.loads((RESPONSES / "arxiv.py_2026_recorded" / recorded).read_text(encoding="utf-8"))
        self.listing = Canned(int(record["status_code"]), record["body"].encode("utf-8"), recorded)

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self.requests.clear()
            self.custom.clear()
            self.listing = None

    @property
    def queries(self) -> list[dict[str, str]]:
        """The received query parameters, one dict per request."""
        return [dict(parse_qsl(urlsplit(r).query, keep_blank_values=True)) for r in self.requests]

    # --- answering
    def lookup(self, query: str) -> Canned:
        params = _params(query)
        if params in self.custom:
            return self.custom[params]
        if params in self.exact:
            return self.exact[params]
        fields = dict(params)
        if self.listing and "submittedDate:[" in fields.get("search_query", "") and fields.get("start", "0") == "0":
            return self.listing
        key = (fields.get("search_query", ""), fields.get("id_list", ""), fields.get("start", "0"))
        if key in self.loose:
            return self.loose[key]
        body = EMPTY_FEED.format(query=query.replace("&", "&amp;").replace("<", "&lt;"),
                                 per_page=fields.get("max_results", "10"), start=fields.get("start", "0"))
        return Canned(200, body.encode("utf-8"), "empty")

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.requests.append(handler.path)
            fault = self._faults.pop(0) if self._faults else None
        parts = urlsplit(handler.path)
        if parts.path.rstrip("/") != API_PATH:
            self._send(handler, 404, b"not found", "text/plain")
            return
        if fault and fault[0] == "status":
            self._send(handler, int(fault[1]), b"Service Unavailable (fake arXiv fault)", "text/plain")
            return
        if fault and fault[0] == "hang":
            if self._stop.wait(float(fault[1])):
                return
        canned = self.lookup(parts.query)
        body = canned.body
        if fault and fault[0] == "truncate":
            body = body[: max(1, len(body) // 2)]
        elif fault and fault[0] == "garbage":
            body = GARBAGE
        if fault and fault[0] == "drip":
            self._drip(handler, body, float(fault[1]))
            return
        if fault and fault[0] == "drip-headers":
            self._drip_headers(handler, body, float(fault[1]))
            return
        if fault and fault[0] == "endless":
            self._endless(handler)
            return
        self._send(handler, canned.status, body, "application/atom+xml; charset=utf-8")

    def _drip(self, handler: BaseHTTPRequestHandler, body: bytes, interval: float) -> None:
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/atom+xml; charset=utf-8")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.flush()
            for i in range(len(body)):
                handler.wfile.write(body[i:i + 1])
                handler.wfile.flush()
                if self._stop.wait(interval):
                    return
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def _drip_headers(self, handler: BaseHTTPRequestHandler, body: bytes, interval: float) -> None:
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/atom+xml; charset=utf-8\r\n"
                f"X-Padding: {'x' * 200}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        try:
            for i in range(len(head)):
                handler.wfile.write(head[i:i + 1])
                handler.wfile.flush()
                if self._stop.wait(interval):
                    return
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def _endless(self, handler: BaseHTTPRequestHandler) -> None:
        entry = b"<entry><title>again</title><summary>" + b"x" * 1000 + b"</summary></entry>\n"
        chunk = entry * (65536 // len(entry))
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/atom+xml; charset=utf-8")
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(b"<?xml version='1.0'?><feed xmlns='http://www.w3.org/2005/Atom'>")
            while not self._stop.wait(0.001):     # at most ~64 MB/s: an unbounded reader fills memory slowly
                handler.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client gave up, as it should
        handler.close_connection = True

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)


@pytest.fixture
def fake_arxiv() -> Iterator[FakeArxiv]:
    """A running fake arXiv on a free loopback port; `.url`, `.requests`, `.fail_next/.hang_next/.garble_next`."""
    with FakeArxiv() as server:
        yield server


@pytest.fixture
def fake_arxiv_https(tls_cert: Certificate, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArxiv]:
    """The same server over HTTPS with a self-signed certificate this process trusts (`SSL_CERT_FILE`,
    `REQUESTS_CA_BUNDLE`); `.url` starts with https://."""
    trust(monkeypatch, tls_cert)
    with FakeArxiv(tls=tls_cert) as server:
        yield server


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve recorded arXiv API responses on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8123)
    args = parser.parse_args()
    with FakeArxiv(args.host, args.port) as server:
        print(server.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
