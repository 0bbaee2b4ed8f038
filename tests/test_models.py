"""COPILOT_LOCAL_MODEL as a Hub reference: fetched once from a loopback stand-in of the Hub (tests/fake_hub.py)
serving the packaged GGUF — download with progress, resume after a cut connection, a checksum mismatch, offline,
a wrong name — and the packaged model kept, with one sentence, whenever the fetch cannot be done."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest
from tqdm.auto import tqdm

from copilot.config import HubReference, SettingsError, parse_reference
from copilot.features import library
from copilot.llm import models, packaged_gguf
from copilot.llm.models import ModelFetchError, choose_local_model, fetch
from copilot.services import Services
from copilot.ui.library import model_line
from tests.conftest import make_settings
from tests.fake_hub import FakeHub, HubFiles
from tests.helpers import clean_env

REPO = "tiny-lab/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    clean_env(monkeypatch, "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_TOKEN")
    models._choices.clear()


@pytest.fixture(scope="module")
def packaged_sha256() -> str:
    return hashlib.sha256(packaged_gguf().read_bytes()).hexdigest()


def hub_files(**options) -> HubFiles:
    other = packaged_gguf()
    return HubFiles({REPO: {FILE: packaged_gguf(), "README.md": other, f"sub/{FILE.replace('Q4_1', 'Q8_0')}": other}},
                    **options)


class Counting(tqdm):
    """A progress bar that shows even without a terminal and remembers how far it got."""
    seen: list[int] = []

    def __init__(self, *args, **kwargs):
        kwargs["disable"] = False
        super().__init__(*args, **kwargs)

    def update(self, n=1):
        Counting.seen.append(n)
        return super().update(n)


@pytest.mark.parametrize("text, expected", [
    (f"{REPO}:Q4_1", HubReference(REPO, quant="Q4_1")),
    (f"{REPO}/{FILE}", HubReference(REPO, filename=FILE)),
    (REPO, HubReference(REPO)),
])
def test_a_hub_reference_is_told_from_a_path(text, expected):
    assert parse_reference(text) == expected
    assert parse_reference("/models/x.gguf").__class__.__name__.endswith("Path")


def test_download_shows_progress_checks_and_is_recorded(tmp_path, packaged_sha256):
    Counting.seen = []
    with FakeHub(hub_files()) as hub:
        path = fetch(HubReference(REPO, quant="q4_1"), tmp_path, endpoint=hub.url, tqdm_class=Counting)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == packaged_sha256
        assert sum(Counting.seen) == packaged_gguf().stat().st_size
        record = json.loads((tmp_path / "fetched.json").read_text())
        assert record[f"{REPO}:q4_1"]["sha256"] == packaged_sha256
        asked = len(hub.files.requests)
        assert fetch(HubReference(REPO, quant="q4_1"), tmp_path, endpoint=hub.url) == path
        assert len(hub.files.requests) == asked            # fetched once: the second start asks nothing


def test_a_cut_connection_is_resumed_where_it_stopped(tmp_path, packaged_sha256):
    files = hub_files(cut_after=25_000_000)     # past two of the client's 10 MB chunks
    with FakeHub(files) as hub:
        path = fetch(HubReference(REPO, filename=FILE), tmp_path, endpoint=hub.url)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == packaged_sha256
    ranges = [r for method, _, r in files.requests if method == "GET" and r]
    assert ranges and ranges[0].startswith("bytes=") and int(ranges[0][6:].rstrip("-")) >= 1_000_000


def test_a_checksum_mismatch_deletes_the_file_and_says_so(tmp_path):
    with FakeHub(hub_files(wrong_sha256=True)) as hub:
        with pytest.raises(ModelFetchError, match="does not match the Hub's SHA-256"):
            fetch(HubReference(REPO, filename=FILE), tmp_path, endpoint=hub.url)
    assert not [p for p in (tmp_path / "hub").rglob("*") if p.is_file() and p.stat().st_size > 1_000_000]
    assert not (tmp_path / "fetched.json").exists()


@pytest.mark.parametrize("reference, message", [
    (HubReference("nobody/no-such-model", quant="Q4_K_M"), "no model repository nobody/no-such-model"),
    (HubReference(REPO, quant="Q2_K"), "has no GGUF file .*its GGUF files: SmolLM2"),
    (HubReference(REPO), "matches several GGUF files"),
    (HubReference(REPO, filename="missing.gguf"), "has no GGUF file"),
])
def test_a_wrong_name_is_one_sentence_naming_what_is_there(tmp_path, reference, message):
    with FakeHub(hub_files()) as hub:
        with pytest.raises(ModelFetchError, match=message):
            fetch(reference, tmp_path, endpoint=hub.url)


def test_offline_is_refused_without_a_request_and_a_cached_file_still_serves(tmp_path):
    with FakeHub(hub_files()) as hub:
        with pytest.raises(ModelFetchError, match="HF_HUB_OFFLINE is set"):
            fetch(HubReference(REPO, filename=FILE), tmp_path, endpoint=hub.url, offline=True)
        assert hub.files.requests == []
        path = fetch(HubReference(REPO, filename=FILE), tmp_path, endpoint=hub.url)
        assert fetch(HubReference(REPO, filename=FILE), tmp_path, endpoint=hub.url, offline=True) == path


def test_an_unreachable_hub_keeps_the_packaged_model_and_the_status_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")       # nothing listens on the discard port
    settings = make_settings(tmp_path / "data", local_model=f"{REPO}:Q4_K_M")
    choice = choose_local_model(settings)
    assert choice.path == packaged_gguf() and choice.source == "packaged"
    assert choice.note.startswith("could not reach the Hub") and choice.note.endswith("packaged SmolLM2-135M "
                                                                                      "model instead.")
    status = library.model_status(Services(settings))
    assert status["note"] == choice.note and status["size_bytes"] == packaged_gguf().stat().st_size
    assert status["llama_cpp"].startswith("llama-cpp-python ")
    line = model_line(status)
    assert ("the packaged local model, SmolLM2 135M (98 MB file SmolLM2-135M-Instruct.Q4_1.gguf, on "
            "llama-cpp-python") in line
    assert "could not reach the Hub" in line


def test_the_user_setting_hf_hub_offline_falls_back_in_one_sentence(tmp_path, monkeypatch):
    from copilot import config

    monkeypatch.setattr(config, "_defaulted", set())     # a fresh process: the variable comes from the user
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings = make_settings(tmp_path / "data", local_model=f"{REPO}/{FILE}")
    choice = choose_local_model(settings)
    assert choice.source == "packaged" and "HF_HUB_OFFLINE is set" in choice.note


def test_a_fetched_model_is_the_one_the_app_loads_and_shows(tmp_path, monkeypatch):
    with FakeHub(hub_files()) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        settings = make_settings(tmp_path / "data", local_model=f"{REPO}:Q4_1")
        choice = choose_local_model(settings)
    assert choice.source == f"hub:{REPO}/{FILE}" and choice.note is None
    assert choice.path.is_relative_to(tmp_path / "data" / "models" / "hub")
    models._choices.clear()                               # a new process: the record answers, no Hub needed
    status = library.model_status(Services(settings))
    assert status["file"] == str(choice.path) and status["size"].endswith("MB") and status["note"] is None
    assert Services(settings).llm.backend.path == choice.path


def test_a_missing_path_is_still_a_settings_error(tmp_path):
    with pytest.raises(SettingsError, match="COPILOT_LOCAL_MODEL=.*no GGUF file"):
        make_settings(tmp_path / "data", local_model="./nowhere/model.gguf")


def test_the_status_shows_the_profile_and_the_speed_measured_from_the_call_log(tmp_path):
    from copilot.prompts import Prompt

    services = Services(make_settings(tmp_path / "data"))
    status = library.model_status(services)
    assert status["measured_speed"] is None and status["profile"]["profile"] == "tiny"
    assert "speed: not measured yet" in model_line(status)
    prompt = Prompt("speed-test", "You answer briefly.", "Name three planets. {x}")
    services.llm.complete(prompt.render(x=""), max_tokens=12, temperature=0.0)        # the real local model
    speed = library.model_status(services)["measured_speed"]
    assert speed["calls"] == 1 and speed["output_tokens_per_s"] > 0 and speed["median_call_s"] > 0
    line = model_line(library.model_status(services))
    assert "measured over its last 1 calls" in line and "it writes no text of its own" in line


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:-1000], "it is cut short: 98,361,432 bytes, while its tensors need 98,362,432"),
    (lambda data: data[:4] + b"\x03\x00\x00\x00" + b"\xff" * 64, "its header lists"),
    (lambda data: data[:200_000], "cut short|ends early"),
    # an array of 2^59 eight-byte values: skipping it made `seek` raise OSError, which nobody caught (issue #47)
    (lambda data: data[:4] + struct.pack("<IQQQ", 3, 1, 1, 3) + b"abc" + struct.pack("<IIQ", 9, 10, 1 << 59)
     + b"\0" * 64, "ends early"),
])
def test_a_download_that_only_starts_like_a_model_is_refused_and_deleted(tmp_path, damage, message):
    """The Hub's checksum matches what it serves, so a file uploaded cut short (or a non-model renamed .gguf with
    the magic bytes) passed the old check; now the header is read to its end and the tensors must fit the file."""
    bad = tmp_path / "served" / FILE
    bad.parent.mkdir()
    bad.write_bytes(damage(packaged_gguf().read_bytes()))
    files = HubFiles({REPO: {FILE: bad}})
    with FakeHub(files) as hub:
        with pytest.raises(ModelFetchError, match=f"not a whole GGUF model file .*({message})"):
            fetch(HubReference(REPO, filename=FILE), tmp_path / "cache", endpoint=hub.url)
    assert not [p for p in (tmp_path / "cache").rglob("*.gguf") if p.is_file()]
    assert not (tmp_path / "cache" / "fetched.json").exists()
