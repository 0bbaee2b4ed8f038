"""A loopback stand-in of the Hugging Face Hub for model fetches: the two endpoints `huggingface_hub` calls to
list a model repository and download a file (`/api/models/<repo>/tree/<rev>` and `/<repo>/resolve/<rev>/<file>`,
HEAD and GET with Range), over files the test names. It can cut the first download after some bytes (the client
should resume with a Range request) and advertise a wrong SHA-256 (the client should refuse the file)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.tls import Certificate, serve_tls

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubFiles:
    repos: dict[str, dict[str, Path]]                # repo id -> {file name in the repo: local file}
    cut_after: int | None = None                     # bytes the first GET sends before the connection drops
    wrong_sha256: bool = False
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)   # (method, path, Range header)
    _sha: dict[Path, str] = field(default_factory=dict)

    def sha256(self, path: Path) -> str:
        if path not in self._sha:
            self._sha[path] = hashlib.sha256(path.read_bytes()).hexdigest()
        return "0" * 64 if self.wrong_sha256 else self._sha[path]


def _handler(files: HubFiles):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            self._serve(body=True)

        def do_HEAD(self):
            self._serve(body=False)

        def _serve(self, body: bool):
            files.requests.append((self.command, self.path, self.headers.get("Range")))
            tree = re.match(r"^/api/models/([^/]+/[^/]+)/tree/[^/?]+", self.path)
            resolve = re.match(r"^/([^/]+/[^/]+)/resolve/[^/]+/([^?]+)", self.path)
            if tree:
                return self._tree(tree[1], body)
            if resolve:
                return self._file(resolve[1], resolve[2], body)
            self._error(404, "EntryNotFound")

        def _error(self, status: int, code: str):
            payload = json.dumps({"error": code}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _tree(self, repo: str, body: bool):
            if repo not in files.repos:
                return self._error(404, "RepoNotFound")
            listing = [{"type": "file", "path": name, "size": path.stat().st_size, "oid": "f" * 40,
                        "lfs": {"oid": files.sha256(path), "size": path.stat().st_size, "pointerSize": 134}}
                       for name, path in files.repos[repo].items()]
            payload = json.dumps(listing).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if body:
                self.wfile.write(payload)

        def _file(self, repo: str, name: str, body: bool):
            if repo not in files.repos:
                return self._error(404, "RepoNotFound")
            path = files.repos[repo].get(name)
            if path is None:
                return self._error(404, "EntryNotFound")
            size = path.stat().st_size
            start = int(re.match(r"bytes=(\d+)-", self.headers.get("Range", "bytes=0-"))[1])
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{files.sha256(path)}"')
            self.send_header("X-Linked-Size", str(size))
            self.send_header("ETag", f'"{files.sha256(path)}"')
            self.send_header("Accept-Ranges", "bytes")
            if start:
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.send_header("Content-Length", str(size - start))
            self.end_headers()
            if body:
                self._send_bytes(path, start, size)

        def _send_bytes(self, path: Path, start: int, size: int):
            cut = files.cut_after
            files.cut_after = None                     # only the first download is cut
            with path.open("rb") as handle:
                handle.seek(start)
                sent = start
                while sent < size:
                    block = handle.read(1 << 20)
                    if cut is not None and sent + len(block) > cut:
                        self.wfile.write(block[:cut - sent])
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    self.wfile.write(block)
                    sent += len(block)

    return Handler


class FakeHub:
    """`with FakeHub(files) as hub:` serves on a loopback port; `hub.url` is the HF_ENDPOINT to use (https:// with
    `tls`, whose certificate the test must trust: tests.tls.trust)."""

    def __init__(self, files: HubFiles, tls: Certificate | None = None) -> None:
        self.files = files
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(files))
        self.server.daemon_threads = True
        if tls:
            serve_tls(self.server, tls)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_) -> None:
        self.server.shutdown()
        self.server.server_close()
