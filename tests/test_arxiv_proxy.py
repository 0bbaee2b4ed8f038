"""arXiv behind a proxy (`HTTP_PROXY`/`HTTPS_PROXY`, issue #47): the whole-call deadline and the cap on an answer's
size hold through a loopback forward proxy as they do directly. Before the fix the proxy's connection pools were not
watched, so an answer dripped one byte a second through the proxy held the call for as long as the server liked; and
no path capped the body, so an endless answer was read into memory until the deadline."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest

from copilot.sources.arxiv_api import MAX_ANSWER_BYTES, ArxivSource, ArxivSourceError
from tests.conftest import make_settings
from tests.fake_arxiv import FakeArxiv
from tests.fake_proxy import LoopbackProxy
from tests.tls import tls_cert, trust  # noqa: F401 (fixture)


@contextmanager
def arxiv_server(scheme: str, certificate, monkeypatch):
    if scheme == "https":
        trust(monkeypatch, certificate)
    with FakeArxiv(tls=certificate if scheme == "https" else None) as server:
        yield server


def source(url: str, tmp_path, **overrides) -> ArxivSource:
    return ArxivSource(make_settings(tmp_path / "data", arxiv_api_url=url, arxiv_retries=0, **overrides))


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_lookup_goes_through_the_proxy(scheme, tls_cert, monkeypatch, tmp_path):
    with arxiv_server(scheme, tls_cert, monkeypatch) as fake, LoopbackProxy() as proxy:
        proxy.use(monkeypatch)
        [paper] = source(fake.url, tmp_path).by_ids(["1605.08386"])
    assert paper.title == "Heat-bath random walks with Markov bases"
    assert proxy.targets == [f"{'CONNECT' if scheme == 'https' else 'GET'} 127.0.0.1:{fake.port}"]


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_drip_through_the_proxy_meets_the_whole_call_deadline(scheme, tls_cert, monkeypatch, tmp_path):
    """The status line and headers at one byte a second: a per-read timeout (1.5 s) never fires on it, and no chunk of
    a body arrives to be checked; only the watchdog's cut of the proxy connection ends the call. (A dripped body ends
    at its next byte after the deadline, and CPython bounds a TLS handshake by the socket timeout, so those two held
    through a proxy before the fix too.)"""
    with arxiv_server(scheme, tls_cert, monkeypatch) as fake, LoopbackProxy() as proxy:
        proxy.use(monkeypatch)
        src = source(fake.url, tmp_path, arxiv_timeout=1.5)
        fake.drip_headers_next(1, interval=1.0)
        started = time.monotonic()
        with pytest.raises(ArxivSourceError, match="did not answer in time"):
            src.by_ids(["1605.08386"])
        assert time.monotonic() - started < 1.5 + 1.5
        assert proxy.targets


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("through", ["direct", "proxy"])
def test_an_endless_answer_is_cut_at_the_size_cap(scheme, through, tls_cert, monkeypatch, tmp_path):
    """An answer that never ends is refused at MAX_ANSWER_BYTES, long before the deadline (the old client read it
    into memory until the deadline, ~64 MB a second here)."""
    with arxiv_server(scheme, tls_cert, monkeypatch) as fake, LoopbackProxy() as proxy:
        if through == "proxy":
            proxy.use(monkeypatch)
        src = source(fake.url, tmp_path, arxiv_timeout=8.0)
        fake.endless_next(1)
        started = time.monotonic()
        with pytest.raises(ArxivSourceError, match=f"larger than {MAX_ANSWER_BYTES // 2 ** 20} MB"):
            src.by_ids(["1605.08386"])
        assert time.monotonic() - started < 6.0
        assert bool(proxy.targets) == (through == "proxy")

