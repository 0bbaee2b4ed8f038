"""A loopback HTTPS arXiv for full text (issue #48): `/html/<id>[vN]` serves the shared LaTeXML pages in
`../shared/data/arxiv-html/` (read there, never copied into the repo), a "no HTML" page for any other id (status 200,
as arXiv answers), and `/pdf/<id>[vN]` the PDFs a test hands it (`.pdfs[id] = bytes`; `minimal_pdf` makes one).

Hostile answers, per id (`.hostile[id] = mode`, for both the HTML and the PDF path unless the mode says which):
`huge` (50 MB with its Content-Length), `huge_unsized` (50 MB without a length), `drip` (the page one byte a second;
`drip_pdf` the PDF only),
`other` (another paper's page), `failed` (a failed conversion: LaTeXML's empty "Untitled Document"), `error` (HTTP
500), `cut` (the connection closes halfway through the promised length), `missing` (404), `redirect_other` (302 to
another paper's page), `redirect_other_pdf` (302 from the PDF to another paper's PDF), `redirect_away` (302 to
another host).

Every request is recorded with its arrival time (`time.monotonic()` of this process), path and User-Agent; `.sent`
counts the bytes each hostile body got out before the client stopped reading.

    def test_x(fake_arxiv_html, tmp_path):
        settings = make_settings(tmp_path, arxiv_html_url=fake_arxiv_html.html_url,
                                 arxiv_pdf_url=fake_arxiv_html.pdf_url, fulltext_delay=0)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers import DATA
from tests.tls import Certificate, serve_tls, trust

HTML_DIR = DATA / "arxiv-html"
FAILED_PAGE = HTML_DIR / "2506.06105.failed.html"
OTHER_ID = "2503.17247"            # the paper whose page `other` and `redirect_other` send
HUGE = 50 * 2 ** 20
STUB = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>No HTML for {id}</title></head>"
        "<body><main><h1>No HTML for {id}</h1><p>This paper has no HTML rendering; its source could not be "
        "converted (fake arXiv).</p><p><a href=\"/abs/{id}\">Back to the abstract</a></p></main></body></html>")


def minimal_pdf(text: str) -> bytes:
    """A small valid one-page PDF that shows `text` (ASCII, no parentheses or backslashes) in Helvetica."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("ascii")
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


@dataclass(frozen=True)
class Seen:
    at: float          # time.monotonic() when the request line arrived
    path: str
    user_agent: str


def _split(path: str) -> tuple[str, str, str]:
    """'/html/2601.22777v2' → ('html', '2601.22777', 'v2')."""
    _, kind, rest = (path.split("?")[0].split("/", 2) + ["", ""])[:3]
    rest = rest.rstrip("/")
    base, version = rest, ""
    head, sep, tail = rest.rpartition("v")
    if sep and tail.isdigit() and head:
        base, version = head, f"v{tail}"
    return kind, base, version


class FakeArxivHtml:
    def __init__(self, tls: Certificate, host: str = "127.0.0.1") -> None:
        self.pdfs: dict[str, bytes] = {}
        self.hostile: dict[str, str] = {}
        self.seen: list[Seen] = []
        self.sent: dict[str, int] = {}
        self._stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                fake.seen.append(Seen(time.monotonic(), self.path, self.headers.get("User-Agent", "")))
                try:
                    fake._answer(self)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    self.close_connection = True      # the client stopped reading, as it should

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        serve_tls(self.server, tls)
        self.port = self.server.server_address[1]
        self.base = f"https://{host}:{self.port}"
        self.html_url, self.pdf_url = f"{self.base}/html/", f"{self.base}/pdf/"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-arxiv-html", daemon=True)

    def __enter__(self) -> FakeArxivHtml:
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

    def paths(self) -> list[str]:
        return [seen.path for seen in self.seen]

    # --- answering
    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        kind, base, version = _split(handler.path)
        mode = self.hostile.get(base, "")
        if mode and self._hostile(handler, mode, kind, base):
            return
        if kind == "html":
            page = HTML_DIR / f"{base}.html"
            body = page.read_bytes() if page.is_file() else STUB.format(id=base + version).encode()
            self._send(handler, 200, body, "text/html; charset=utf-8")
        elif kind == "pdf" and base in self.pdfs:
            self._send(handler, 200, self.pdfs[base], "application/pdf")
        else:
            self._send(handler, 404, b"<html><body>Not found (fake arXiv)</body></html>", "text/html")

    def _hostile(self, handler: BaseHTTPRequestHandler, mode: str, kind: str, base: str) -> bool:
        """Answer in `mode`; False when the mode leaves this request alone."""
        page = (HTML_DIR / f"{base}.html")
        body = page.read_bytes() if page.is_file() else self.pdfs.get(base, b"x" * 4096)
        if mode == "huge" or mode == "huge_unsized":
            self._huge(handler, sized=mode == "huge")
        elif mode == "drip" or (mode == "drip_pdf" and kind == "pdf"):
            self._drip(handler, body)
        elif mode == "other" and kind == "html":
            self._send(handler, 200, (HTML_DIR / f"{OTHER_ID}.html").read_bytes(), "text/html; charset=utf-8")
        elif mode == "failed" and kind == "html":
            self._send(handler, 200, FAILED_PAGE.read_bytes(), "text/html; charset=utf-8")
        elif mode == "error":
            self._send(handler, 500, b"Internal Server Error (fake arXiv)", "text/plain")
        elif mode == "cut":
            self._cut(handler, body)
        elif mode == "missing" and kind == "html":
            self._send(handler, 404, b"Not found (fake arXiv)", "text/plain")
        elif mode == "redirect_other" and kind == "html":
            self._redirect(handler, f"/html/{OTHER_ID}")
        elif mode == "redirect_other_pdf" and kind == "pdf":
            self._redirect(handler, f"/pdf/{OTHER_ID}")
        elif mode == "redirect_away" and kind == "html":
            self._redirect(handler, f"https://localhost:{self.port}/html/{base}")
        else:
            return False
        return True

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    @staticmethod
    def _redirect(handler: BaseHTTPRequestHandler, location: str) -> None:
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _huge(self, handler: BaseHTTPRequestHandler, sized: bool) -> None:
        chunk = (b"<p class=\"ltx_p\">" + b"all work and no play " * 3000 + b"</p>\n")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        if sized:
            handler.send_header("Content-Length", str(HUGE))
        else:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        sent = 0
        try:
            while sent < HUGE and not self._stop.is_set():
                piece = chunk[: HUGE - sent]
                handler.wfile.write(piece)
                sent += len(piece)
        finally:
            self.sent[handler.path] = sent

    def _drip(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.flush()
        sent = 0
        try:
            for i in range(len(body)):
                handler.wfile.write(body[i:i + 1])
                handler.wfile.flush()
                sent += 1
                if self._stop.wait(1.0):
                    return
        finally:
            self.sent[handler.path] = sent

    @staticmethod
    def _cut(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body[: len(body) // 2])
        handler.wfile.flush()
        handler.close_connection = True


@pytest.fixture
def fake_arxiv_html(tls_cert: Certificate, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArxivHtml]:
    """The server on a free loopback port over HTTPS, its certificate trusted (`tls_cert` from tests.tls must be
    imported beside it)."""
    trust(monkeypatch, tls_cert)
    with FakeArxivHtml(tls_cert) as server:
        yield server
