"""Real TLS on loopback for the tests: a self-signed certificate for 127.0.0.1 and localhost, trusted the standard way
(`SSL_CERT_FILE` for OpenSSL, httpx and the openai client, `REQUESTS_CA_BUNDLE` for requests), servers that speak
HTTPS with it, and a server that accepts connections and never finishes the TLS handshake.

    def test_x(tls_cert, monkeypatch):
        trust(monkeypatch, tls_cert)
        server = serve_tls(ThreadingHTTPServer(("127.0.0.1", 0), Handler), tls_cert)
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Certificate:
    cert: Path    # PEM certificate, also the CA bundle a client trusts
    key: Path     # PEM private key

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context


def make_certificate(folder: Path) -> Certificate:
    """A self-signed certificate (its own CA) valid for 127.0.0.1, ::1 and localhost, for one day."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Research Copilot test server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
             x509.IPAddress(ipaddress.ip_address("::1"))]
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, key_encipherment=False,
                                         content_commitment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    certificate = Certificate(folder / "loopback-cert.pem", folder / "loopback-key.pem")
    certificate.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    certificate.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    return certificate


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory) -> Certificate:
    return make_certificate(tmp_path_factory.mktemp("tls"))


def trust_env(certificate: Certificate) -> dict[str, str]:
    """The variables through which every client the product uses trusts `certificate` (for a child process)."""
    return {"SSL_CERT_FILE": str(certificate.cert), "REQUESTS_CA_BUNDLE": str(certificate.cert)}


def trust(monkeypatch: pytest.MonkeyPatch, certificate: Certificate) -> None:
    for name, value in trust_env(certificate).items():
        monkeypatch.setenv(name, value)


def serve_tls(server: socketserver.TCPServer, certificate: Certificate) -> socketserver.TCPServer:
    """Make `server` (not yet serving) speak TLS. Each accepted connection does its handshake on the handler's own
    thread, so a client that stalls in the handshake holds up nobody else."""
    context = certificate.server_context()
    accept = server.get_request

    def get_request():
        sock, address = accept()
        return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    server.get_request = get_request  # type: ignore[method-assign]
    finish = server.finish_request

    def finish_request(request, client_address):
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError):
            return          # a client that did not trust us, or went away
        finish(request, client_address)

    server.finish_request = finish_request  # type: ignore[method-assign]
    return server


class StalledHandshake:
    """Accepts TCP connections on loopback and then sends nothing: a TLS client waits for the server's hello
    forever unless its own deadline ends the call. `drip=True` sends one byte of a would-be hello a second instead
    (a per-read timeout never fires on that)."""

    def __init__(self, drip: bool = False) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.drip = drip
        self.accepted = 0
        self._stop = threading.Event()
        self._held: list[socket.socket] = []

    def __enter__(self) -> StalledHandshake:
        threading.Thread(target=self._accept, daemon=True, name="stalled-tls").start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self.listener.close()
        for conn in self._held:
            conn.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self._held.append(conn)
            if self.drip:
                threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        hello = b"\x16\x03\x03\x40\x00" + b"\x02" * 64     # a handshake record that promises 16 KB
        for byte in hello:
            if self._stop.wait(1.0):
                return
            try:
                conn.send(bytes([byte]))
            except OSError:
                return


@contextmanager
def stalled_handshake(drip: bool = False) -> Iterator[StalledHandshake]:
    with StalledHandshake(drip) as server:
        yield server
