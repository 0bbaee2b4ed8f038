"""The OpenAI-compatible endpoint and the Hugging Face Hub over real TLS on loopback (issue #38): a self-signed
certificate trusted the standard way (SSL_CERT_FILE, REQUESTS_CA_BUNDLE), and the whole-call deadline held through
a TLS handshake that never finishes or drips. arXiv over TLS: tests/test_arxiv_tls.py."""

from __future__ import annotations

import hashlib
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from copilot.config import HubReference
from copilot.features import backup as B
from copilot.llm import LLMError, packaged_gguf
from copilot.llm.models import fetch
from copilot.services import Services
from tests.conftest import make_settings
from tests.fake_hub import FakeHub, HubFiles
from tests.helpers import clean_env, llama_server
from tests.test_llm import KEY, PROMPT, _StallingEndpoint, llm_calls, openai_services
from tests.tls import stalled_handshake, tls_cert, trust  # noqa: F401 (fixture)

REPO = "tiny-lab/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(autouse=True)
def trusted(tls_cert, monkeypatch):
    clean_env(monkeypatch, "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_TOKEN")
    trust(monkeypatch, tls_cert)


def test_the_openai_backend_over_https_with_a_real_server(tls_cert, tmp_path):
    with llama_server(packaged_gguf(), tmp_path / "server.log", "smollm2-test", KEY, tls=tls_cert) as base:
        assert base.startswith("https://")
        services = openai_services(tmp_path, base)
        text = services.llm.complete(PROMPT.render(), max_tokens=8, temperature=0.0)
        pieces = list(services.llm.stream(PROMPT.render(), max_tokens=8, temperature=0.0))
    assert text.strip() and "".join(pieces).strip()
    assert [c["error"] for c in llm_calls(services)] == [None, None]


@pytest.mark.parametrize("drip", [False, True], ids=["silent", "dripping"])
def test_an_endpoint_whose_tls_handshake_never_finishes_meets_the_deadline(tmp_path, drip):
    with stalled_handshake(drip=drip) as server:
        # the model's size given: no /models lookup first (it has its own deadline), only the call is timed
        services = openai_services(tmp_path, f"https://127.0.0.1:{server.port}/v1", llm_retries=2, llm_timeout=2.0,
                                   llm_parameters="135M")
        started = time.monotonic()
        with pytest.raises(LLMError, match="did not") as caught:
            services.llm.complete(PROMPT.render(), max_tokens=8)
        took = time.monotonic() - started
    assert took < 2.0 + 1.0 and not caught.value.retryable
    assert server.accepted == 1                     # a deadline is not retried into a longer one


def test_an_endpoint_dripping_headers_over_https_meets_the_deadline(tls_cert, tmp_path, monkeypatch):
    from tests.tls import serve_tls

    monkeypatch.setattr(_StallingEndpoint, "mode", "headers")
    server = serve_tls(ThreadingHTTPServer(("127.0.0.1", 0), _StallingEndpoint), tls_cert)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        services = openai_services(tmp_path, f"https://127.0.0.1:{server.server_address[1]}/v1", llm_timeout=2.0)
        started = time.monotonic()
        with pytest.raises(LLMError, match="did not"):
            services.llm.complete(PROMPT.render(), max_tokens=8)
        took = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert took < 2.0 + 1.0


def test_a_model_is_fetched_from_a_hub_over_https(tls_cert, tmp_path):
    files = HubFiles({REPO: {FILE: packaged_gguf()}})
    with FakeHub(files, tls=tls_cert) as hub:
        assert hub.url.startswith("https://")
        path = fetch(HubReference(REPO, filename=FILE), tmp_path, endpoint=hub.url)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(packaged_gguf().read_bytes()).hexdigest()
    assert any(method == "GET" for method, _, _ in files.requests)


@pytest.mark.parametrize("drip", [False, True], ids=["silent", "dripping"])
def test_a_backup_to_a_hub_whose_handshake_never_finishes_ends_at_the_deadline(tmp_path, drip):
    with stalled_handshake(drip=drip) as server:
        services = Services(make_settings(tmp_path / "data", hub_backup="someone/copilot-backup",
                                          hub_token="hf_secret_token_1234567890", hub_timeout=2.0,
                                          hub_endpoint=f"https://127.0.0.1:{server.port}"))
        started = time.monotonic()
        result = B.backup_now(services)
        took = time.monotonic() - started
    assert result["status"] == "failed" and "did not finish within 2 s" in result["error"]
    assert took < 2.0 + 1.5 and server.accepted >= 1
