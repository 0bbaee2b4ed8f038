"""A loopback forward proxy for the tests, as a company network puts in front of arXiv (`HTTPS_PROXY`): `CONNECT
host:port` opens a tunnel (HTTPS through the proxy), a request in absolute form (`GET http://host:port/path`) is
passed on in origin form (HTTP through the proxy). Bytes are relayed as they come, so a server's drip or endless
answer reaches the client as the server sends it. Only loopback targets are served.

    def test_x(monkeypatch):
        with LoopbackProxy() as proxy:
            proxy.use(monkeypatch)       # HTTP_PROXY and HTTPS_PROXY point at it, NO_PROXY is cleared
            ...
            assert proxy.targets         # what went through it, e.g. ["CONNECT 127.0.0.1:41234"]
"""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit

import pytest

LOOPBACK = ("127.0.0.1", "localhost")


class LoopbackProxy:
    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.targets: list[str] = []
        self._open: list[socket.socket] = []
        self._stop = threading.Event()

    def __enter__(self) -> LoopbackProxy:
        threading.Thread(target=self._accept, daemon=True, name="loopback-proxy").start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self.listener.close()
        for sock in self._open:
            try:
                sock.close()
            except OSError:
                pass

    def use(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            monkeypatch.setenv(name, self.url)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self._open.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(4096)
            if not data:
                client.close()
                return
            head += data
        head, rest = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
        else:
            parts = urlsplit(target)
            host, port = parts.hostname or "", str(parts.port or 80)
        if host not in LOOPBACK:
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        self.targets.append(f"{method} {host}:{port}")
        upstream = socket.create_connection((host, int(port)))
        self._open.append(upstream)
        if method == "CONNECT":
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            parts = urlsplit(target)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            headers = [line for line in lines[1:] if not line.lower().startswith("proxy-")]
            upstream.sendall("\r\n".join([f"{method} {path} {version}", *headers]).encode("latin-1") + b"\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        threading.Thread(target=self._relay, args=(upstream, client), daemon=True).start()
        self._relay(client, upstream)

    @staticmethod
    def _relay(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
