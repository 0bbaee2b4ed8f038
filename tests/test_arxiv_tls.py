"""arXiv over HTTPS, as users reach it (issue #38): the real `arxiv` client through ArxivSource against the loopback
fake arXiv speaking TLS with a self-signed certificate trusted the standard way (SSL_CERT_FILE / REQUESTS_CA_BUNDLE).
Before the fix every HTTPS request failed with a TypeError inside the connection pool; the plain-http fakes never saw
it. Each way the product reaches arXiv has a test here: the source itself, ingestion (the button and the scheduled
job), fetching pasted ids, and the Profile's author lookup; and the whole-call deadline holds through a TLS handshake
that never finishes or drips."""

from __future__ import annotations

import os
import time

import pytest

from copilot.errors import UserError
from copilot.features import library
from copilot.features import profile as P
from copilot.features import profile_lookup as L
from copilot.scheduler import IngestScheduler
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSource, ArxivSourceError
from tests.conftest import make_settings
from tests.fake_arxiv import FakeArxiv, fake_arxiv_https  # noqa: F401 (fixture)
from tests.tls import make_certificate, stalled_handshake, tls_cert, trust  # noqa: F401 (fixture)

LISTING = "q_testing_s0_m10_bc5a6c384fe9.json"      # ten recorded papers, served for the ingestion's date window


def source(url: str, tmp_path, **overrides) -> ArxivSource:
    return ArxivSource(make_settings(tmp_path / "data", arxiv_api_url=url, **overrides))


def test_an_id_lookup_over_https(fake_arxiv_https, tmp_path):
    assert fake_arxiv_https.url.startswith("https://")
    [paper] = source(fake_arxiv_https.url, tmp_path).by_ids(["1605.08386"])
    assert (paper.id, paper.title) == ("1605.08386", "Heat-bath random walks with Markov bases")
    assert fake_arxiv_https.queries[0]["id_list"] == "1605.08386"


def test_ingestion_over_https_stores_the_papers(fake_arxiv_https, tmp_path):
    fake_arxiv_https.serve_listing(LISTING)
    services = Services(make_settings(tmp_path / "data", arxiv_api_url=fake_arxiv_https.url, ingest_max_papers=10,
                                      arxiv_retries=0))
    counts = library.ingest_from_arxiv(services, trigger="manual")
    assert counts.added == 10 and services.store.count("paper") == 10
    [run] = library.ingest_history(services)
    assert (run["status"], run["error"]) == ("ok", None)


def test_the_scheduled_job_over_https(fake_arxiv_https, tmp_path):
    fake_arxiv_https.serve_listing(LISTING)
    services = Services(make_settings(tmp_path / "data", arxiv_api_url=fake_arxiv_https.url, ingest_max_papers=10,
                                      arxiv_retries=0, categories="cs.CL,cs.IR"))
    scheduler = IngestScheduler(lambda trigger: library.ingest_from_arxiv(services, trigger=trigger), "0 6 * * *")
    assert scheduler.trigger_now() is True
    deadline = time.monotonic() + 60
    while scheduler.running and time.monotonic() < deadline:
        time.sleep(0.05)
    [run] = library.ingest_history(services)
    assert (run["status"], run["added"], run["error"]) == ("ok", 10, None)
    assert scheduler.last_error is None


def test_fetching_pasted_ids_over_https(fake_arxiv_https, tmp_path):
    services = Services(make_settings(tmp_path / "data", arxiv_api_url=fake_arxiv_https.url, arxiv_retries=0))
    counts, notes = library.import_ids(services, "https://arxiv.org/abs/1707.08567")
    assert counts.added == 1 and notes == []
    assert services.store.get_papers(["1707.08567"])


def test_the_profile_lookup_over_https(fake_arxiv_https, tmp_path):
    services = Services(make_settings(tmp_path / "data", arxiv_api_url=fake_arxiv_https.url, arxiv_timeout=5.0))
    result = L.lookup_author(services, "Del Maestro", max_results=10)
    assert len(result.candidates) == 10
    assert all(c.found_in == "arxiv" for c in result.candidates)


def test_a_certificate_nobody_trusts_is_a_sentence_not_an_exception(tls_cert, tmp_path, monkeypatch):
    """A server whose certificate the machine does not trust: the user reads what failed, not a Python error."""
    stranger = make_certificate(tmp_path / "stranger")
    trust(monkeypatch, tls_cert)                      # trusted: tls_cert; served: stranger's
    with FakeArxiv(tls=stranger) as server:
        with pytest.raises(ArxivSourceError) as raised:
            source(server.url, tmp_path, arxiv_retries=0).by_ids(["1605.08386"])
        assert "certificate" in str(raised.value) and "could not be verified" in str(raised.value)
        services = Services(make_settings(tmp_path / "data2", arxiv_api_url=server.url, arxiv_retries=0))
        with pytest.raises(UserError, match="arXiv could not be reached.*arXiv.s certificate") as raised_ids:
            library.import_ids(services, "1707.08567")
        assert "Error" not in str(raised_ids.value) and "Traceback" not in str(raised_ids.value)
        with pytest.raises(P.ProfileError, match="certificate"):
            L.lookup_author(services, "Del Maestro", max_results=10)


@pytest.mark.parametrize("drip", [False, True], ids=["silent", "dripping"])
def test_a_tls_handshake_that_never_finishes_meets_the_whole_call_deadline(tls_cert, tmp_path, monkeypatch, drip):
    """The server accepts the connection and never completes the handshake (silent, or one byte a second of a
    hello that never ends: a per-read timeout never fires on that)."""
    trust(monkeypatch, tls_cert)
    with stalled_handshake(drip=drip) as server:
        src = source(f"https://127.0.0.1:{server.port}/api/query", tmp_path, arxiv_timeout=1.5, arxiv_retries=0)
        started = time.monotonic()
        with pytest.raises(ArxivSourceError, match="did not answer in time"):
            src.by_ids(["1605.08386"])
        assert time.monotonic() - started < 1.5 + 1.5
        assert server.accepted >= 1


def test_a_drip_of_headers_over_https_meets_the_deadline(fake_arxiv_https, tmp_path):
    src = source(fake_arxiv_https.url, tmp_path, arxiv_timeout=1.5, arxiv_retries=0)
    fake_arxiv_https.drip_headers_next(1, interval=0.2)
    started = time.monotonic()
    with pytest.raises(ArxivSourceError, match="did not answer in time"):
        src.by_ids(["1605.08386"])
    assert time.monotonic() - started < 1.5 + 1.0


def test_a_drip_of_the_body_over_https_meets_the_deadline(fake_arxiv_https, tmp_path):
    src = source(fake_arxiv_https.url, tmp_path, arxiv_timeout=1.5, arxiv_retries=0)
    fake_arxiv_https.drip_next(1, interval=0.3)
    started = time.monotonic()
    with pytest.raises(ArxivSourceError, match="did not answer in time"):
        src.by_ids(["1605.08386"])
    assert time.monotonic() - started < 1.5 + 1.0


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"])
def test_either_standard_variable_alone_is_trusted_by_every_client(tls_cert, tmp_path, monkeypatch, variable):
    """requests reads only REQUESTS_CA_BUNDLE and httpx only SSL_CERT_FILE: a user who sets one is trusted by both."""
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, str(tls_cert.cert))
    with FakeArxiv(tls=tls_cert) as server:
        [paper] = source(server.url, tmp_path).by_ids(["1605.08386"])
    assert paper.id == "1605.08386"
    assert {os.environ["SSL_CERT_FILE"], os.environ["REQUESTS_CA_BUNDLE"]} == {str(tls_cert.cert)}
