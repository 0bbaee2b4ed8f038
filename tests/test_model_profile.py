"""The model profile: the packaged model is tiny, a bigger local GGUF and any endpoint are capable, one setting
overrides; the size is read from the GGUF header."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from copilot import model_profile
from copilot.llm import packaged_gguf
from copilot.model_profile import CAPABLE, TINY, choose_profile, gguf_metadata, parameters_from_label
from copilot.services import Services
from tests import helpers
from tests.conftest import make_settings

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    helpers.clean_env(monkeypatch)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, values: dict[str, object], padding: int = 0) -> Path:
    """A GGUF header with the given string / uint32 key-values (and one skipped array), no tensors."""
    body = b""
    for key, value in values.items():
        if isinstance(value, str):
            body += _string(key) + struct.pack("<I", 8) + _string(value)
        else:
            body += _string(key) + struct.pack("<I", 4) + struct.pack("<I", value)
    body += _string("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 3) + struct.pack("<3f", 0.1, 0.2, 0.3)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(values) + 1) + body + b"\0" * padding)
    return path


def test_packaged_model_is_tiny(tmp_path):
    services = Services(make_settings(tmp_path / "data"))
    profile = services.model_profile
    assert profile.name == TINY and profile.tiny and not profile.writes
    assert profile.parameters == 135_000_000
    assert gguf_metadata(packaged_gguf())["general.size_label"] == "135M"


def test_larger_local_file_is_capable_by_its_size_label(tmp_path):
    big = write_gguf(tmp_path / "big.gguf", {"general.architecture": "llama", "general.size_label": "3B"})
    profile = choose_profile(make_settings(tmp_path / "data", local_model=big))
    assert profile.name == CAPABLE and profile.parameters == 3_000_000_000
    small = write_gguf(tmp_path / "small.gguf", {"general.architecture": "llama", "general.size_label": "360M"})
    assert choose_profile(make_settings(tmp_path / "data", local_model=small)).name == TINY


def test_size_from_the_architecture_when_no_label(tmp_path):
    shape = {"general.architecture": "qwen2", "qwen2.embedding_length": 2048, "qwen2.block_count": 36,
             "qwen2.feed_forward_length": 11008, "qwen2.attention.head_count": 16,
             "qwen2.attention.head_count_kv": 2, "qwen2.vocab_size": 151936}
    path = write_gguf(tmp_path / "shape.gguf", shape)
    profile = choose_profile(make_settings(tmp_path / "data", local_model=path))
    assert profile.name == CAPABLE and 2.5e9 < profile.parameters < 3.5e9


def test_size_from_the_file_when_the_header_says_nothing(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "bare.gguf", {"general.architecture": "llama"})
    assert choose_profile(make_settings(tmp_path / "data", local_model=path)).name == TINY
    monkeypatch.setattr(model_profile, "TINY_BELOW_BYTES", 10)
    assert choose_profile(make_settings(tmp_path / "data", local_model=path)).name == CAPABLE


def test_endpoint_is_capable_and_the_setting_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert choose_profile(make_settings(tmp_path / "data", llm="openai")).name == CAPABLE
    assert choose_profile(make_settings(tmp_path / "data", llm="openai", model_profile="tiny")).name == TINY
    assert choose_profile(make_settings(tmp_path / "data", model_profile="capable")).name == CAPABLE


@pytest.mark.parametrize("label, count", [("135M", 135_000_000), ("1.7B", 1_700_000_000), ("8x7B", 56_000_000_000),
                                          ("large", None), ("", None)])
def test_size_labels(label, count):
    assert parameters_from_label(label) == count


def test_not_a_gguf_is_refused(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"NOPE" + b"\0" * 20)
    with pytest.raises(ValueError, match="not a GGUF"):
        gguf_metadata(path)


def test_the_generation_plan_follows_the_writers_size(tmp_path, monkeypatch):
    from copilot.model_profile import generation_plan

    def plan(**values):
        settings = make_settings(tmp_path / "data", **{"answer_max_tokens": None, **values})
        return generation_plan(settings, choose_profile(settings))

    packaged = plan()
    assert (packaged.source_budget, packaged.source_cap, packaged.answer_tokens, packaged.grammars,
            packaged.related_ranking, packaged.ideas) == (700, 90, 160, True, "prism-extractive", 0)
    big = write_gguf(tmp_path / "big.gguf", {"general.architecture": "llama", "general.size_label": "3B"})
    larger = plan(local_model=big)
    assert (larger.source_budget, larger.source_cap, larger.answer_tokens, larger.grammars,
            larger.related_ranking, larger.ideas) == (2000, None, 400, False, "prism-hybrid", 3)
    assert larger.summary_tokens > packaged.summary_tokens and larger.detailed_aspects and not packaged.detailed_aspects
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert plan(llm="openai") == larger
    # the 135M model let write stays small: grammars and small budgets, ideas offered
    forced = plan(model_profile="capable")
    assert (forced.grammars, forced.source_budget, forced.ideas) == (True, 700, 3)
    explicit = plan(local_model=big, context_tokens=900, source_tokens=120, answer_max_tokens=200,
                    related_method="abstract")
    assert (explicit.source_budget, explicit.source_cap, explicit.answer_tokens, explicit.related_ranking) == (
        900, 120, 200, "abstract")


def test_a_larger_local_model_is_built_without_grammars(tmp_path):
    big = write_gguf(tmp_path / "big.gguf", {"general.architecture": "llama", "general.size_label": "3B"})
    assert Services(make_settings(tmp_path / "data", local_model=big)).llm.obeys_grammar is False
    assert Services(make_settings(tmp_path / "data2")).llm.obeys_grammar is True


# --- issue #41 item 6: an endpoint's profile from the size it reports or a setting -----------------------------
class _Models:
    """A loopback OpenAI-compatible endpoint that lists its models as llama_cpp.server does (`copilot.llm.serve`:
    the id is the GGUF's path)."""

    def __init__(self, ids: list[str]) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        body = json.dumps({"object": "list", "data": [{"id": i, "object": "model", "owned_by": "me",
                                                       "permissions": []} for i in ids]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                found = self.path.rstrip("/").endswith("/v1/models")
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) if found else 0))
                self.end_headers()
                if found:
                    self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _endpoint_settings(tmp_path, url: str, **overrides):
    from tests.conftest import make_settings

    return make_settings(tmp_path / "data", llm="openai", openai_api_key="sk-test", openai_base_url=url,
                         llm_model="local-model", **overrides)


def test_an_endpoint_serving_a_135m_model_is_tiny_and_status_says_why(tmp_path):
    from copilot.features.library import status
    from copilot.services import Services

    server = _Models(["/opt/models/SmolLM2-135M-Instruct-Q8_0.gguf"])
    try:
        profile = Services(_endpoint_settings(tmp_path, server.url)).model_profile
        shown = status(Services(_endpoint_settings(tmp_path, server.url)))
    finally:
        server.close()
    assert profile.tiny and profile.parameters == 135_000_000
    assert "the endpoint reports 'SmolLM2-135M-Instruct-Q8_0.gguf'" in profile.reason
    assert "endpoint reports" in str(shown)


def test_an_endpoint_size_setting_wins_and_an_unknown_size_says_so(tmp_path):
    from copilot.model_profile import profile_of_endpoint

    server = _Models(["/opt/models/SmolLM2-135M-Instruct-Q8_0.gguf"])
    try:
        set_size = profile_of_endpoint(_endpoint_settings(tmp_path, server.url, llm_parameters="8B"))
    finally:
        server.close()
    assert (set_size.name, set_size.parameters) == ("capable", 8_000_000_000)
    assert "COPILOT_LLM_PARAMETERS" in set_size.reason
    unknown = profile_of_endpoint(_endpoint_settings(tmp_path, "http://127.0.0.1:9/v1"))   # nothing listens
    assert unknown.name == "capable" and "size not known" in unknown.reason


def test_a_header_nesting_arrays_5000_deep_gets_the_fallback_not_a_recursion_error(tmp_path):
    """Issue #41: arrays of arrays 5,000 deep crashed app.py and `status` with RecursionError; like any other
    unreadable header, the model's size is then taken from its file."""
    nested = struct.pack("<IQ", 9, 1) * 5_000 + struct.pack("<IQ", 4, 0)
    path = tmp_path / "deep.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _string("evil.nest") + struct.pack("<I", 9) + nested)
    with pytest.raises(ValueError, match="nests arrays more than"):
        gguf_metadata(path)
    assert model_profile.local_parameters(path) == (None, "unreadable header")
    profile = model_profile.profile_of_local(path)
    assert profile.tiny and "unreadable header" in profile.reason
