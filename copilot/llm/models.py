"""Which GGUF file the local backend loads: the packaged SmolLM2-135M, a path, or a Hugging Face reference fetched
once into the data dir (`owner/repo:Q4_K_M`, `owner/repo/file.gguf`, or `owner/repo` holding one GGUF).

A reference is fetched through `huggingface_hub` (progress bar on stderr, a cut connection resumed where it
stopped, the file checked against the Hub's SHA-256) and recorded in `<data dir>/models/fetched.json`, so later
starts use the cached file without asking the Hub. When the fetch cannot be done (offline, a wrong name, a bad
checksum) the packaged model is used and `ModelChoice.note` says why in one sentence: the app still starts.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from copilot.config import HubReference, Settings, hub_offline_requested, hub_requests_allowed, parse_reference
from copilot.llm.gguf import gguf_layout_problem
from copilot.llm.local import packaged_gguf

log = logging.getLogger(__name__)

class ModelFetchError(Exception):
    """A Hub reference could not be made a local file; the message is one sentence a user can act on."""


@dataclass(frozen=True)
class ModelChoice:
    path: Path                      # the file the local backend loads
    source: str                     # "packaged", "file" or "hub:<owner/repo/file>"
    note: str | None = None         # why the requested model is not the one loaded

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size if self.path.is_file() else 0


_choices: dict[tuple[str, str], ModelChoice] = {}
_choices_lock = threading.Lock()


def choose_local_model(settings: Settings, tqdm_class=None) -> ModelChoice:
    """The GGUF the settings ask for, fetched if it is a Hub reference not yet cached (once per process)."""
    requested = settings.local_model
    if not requested:
        return ModelChoice(packaged_gguf(), "packaged")
    reference = parse_reference(requested)
    if isinstance(reference, Path):
        return ModelChoice(reference, "file")
    key = (str(reference), str(settings.data_dir.resolve()))
    with _choices_lock:
        if key not in _choices:
            _choices[key] = _fetch_or_fall_back(settings, reference, tqdm_class)
        return _choices[key]


def cached_choice(settings: Settings) -> ModelChoice | None:
    """What `choose_local_model` would return without fetching anything (None: a reference not fetched yet)."""
    requested = settings.local_model
    if not requested or isinstance(parse_reference(requested), Path):
        return choose_local_model(settings)
    key = (str(parse_reference(requested)), str(settings.data_dir.resolve()))
    if key in _choices:
        return _choices[key]
    recorded = _read_record(models_dir(settings)).get(str(parse_reference(requested)))
    if recorded and Path(recorded["path"]).is_file():
        return ModelChoice(Path(recorded["path"]), f"hub:{recorded['repo']}/{recorded['filename']}")
    return None


def models_dir(settings: Settings) -> Path:
    return settings.data_dir / "models"


def _fetch_or_fall_back(settings: Settings, reference: HubReference, tqdm_class) -> ModelChoice:
    try:
        path = fetch(reference, models_dir(settings), endpoint=settings.hub_endpoint,
                     token=settings.hub_token.get_secret_value() if settings.hub_token else None,
                     offline=hub_offline_requested(), tqdm_class=tqdm_class)
    except (ModelFetchError, OSError) as error:      # OSError: the data dir could not hold the file
        note = f"{error}; using the packaged SmolLM2-135M model instead."
        log.warning("COPILOT_LOCAL_MODEL=%s: %s", reference, note)
        return ModelChoice(packaged_gguf(), "packaged", note)
    return ModelChoice(path, f"hub:{reference.repo}/{path.name}")


def fetch(reference: HubReference, cache_dir: Path, endpoint: str | None = None, token: str | None = None,
          offline: bool = False, tqdm_class=None) -> Path:
    """The local file of a Hub reference: from the record of an earlier fetch, else downloaded and checked."""
    record = _read_record(cache_dir)
    known = record.get(str(reference))
    if known and Path(known["path"]).is_file():
        return Path(known["path"])
    if offline:
        raise ModelFetchError(f"{reference} is not in the model cache and HF_HUB_OFFLINE is set, so it cannot be "
                              "fetched (unset HF_HUB_OFFLINE for one start to fetch it)")
    from huggingface_hub import HfApi, constants, hf_hub_download

    address = (endpoint or constants.ENDPOINT).rstrip("/")
    if not _reachable(address):           # at once, rather than after huggingface_hub's ~25 s of retries
        raise ModelFetchError(f"could not reach the Hub at {address} to fetch {reference} (offline?)")
    with hub_requests_allowed():
        entry = _pick_file(HfApi(endpoint=endpoint, token=token), reference)
        try:
            path = Path(hf_hub_download(reference.repo, entry.path, cache_dir=cache_dir / "hub", endpoint=endpoint,
                                        token=token, tqdm_class=tqdm_class))
        except Exception as error:        # network, disk, HTTP: all reported the same way
            raise ModelFetchError(f"could not download {entry.path} from {reference.repo} ({_short(error)})") from None
    sha256 = entry.lfs.sha256 if entry.lfs else None
    _check(path, sha256, f"{reference.repo}/{entry.path}")
    record[str(reference)] = {"repo": reference.repo, "filename": entry.path, "sha256": sha256, "path": str(path),
                              "size": path.stat().st_size}
    _write_record(cache_dir, record)
    return path


def _reachable(address: str, timeout: float = 5.0) -> bool:
    """One TCP connection to the Hub's host (behind a proxy, not tried: the proxy may be the only way out)."""
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                             "ALL_PROXY", "all_proxy")):
        return True
    url = urlparse(address)
    try:
        socket.create_connection((url.hostname or "", url.port or (443 if url.scheme == "https" else 80)),
                                 timeout=timeout).close()
        return True
    except OSError:
        return False


def _pick_file(api, reference: HubReference):
    """The repository's file the reference names, found in its file list (so a wrong name says what is there)."""
    from huggingface_hub.hf_api import RepoFile

    try:
        files = [f for f in api.list_repo_tree(reference.repo, recursive=True) if isinstance(f, RepoFile)]
    except Exception as error:
        raise ModelFetchError(_listing_failure(reference, error)) from None
    ggufs = [f for f in files if f.path.lower().endswith(".gguf")]
    if reference.filename:
        chosen = [f for f in files if f.path == reference.filename]
    elif reference.quant:
        pattern = f"*{reference.quant.lower()}*.gguf"
        chosen = [f for f in ggufs if fnmatch.fnmatch(f.path.lower(), pattern)]
    else:
        chosen = ggufs
    if len(chosen) == 1:
        return chosen[0]
    names = ", ".join(sorted(f.path for f in ggufs)[:12]) or "none"
    what = "matches" if len(chosen) > 1 else "has"
    raise ModelFetchError(f"{reference.repo} {what} {'several' if chosen else 'no'} GGUF file"
                          f"{'s' if chosen else ''} for {reference} (its GGUF files: {names}); name one as "
                          f"owner/repo/FILE.gguf")


def _listing_failure(reference: HubReference, error: Exception) -> str:
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if isinstance(error, GatedRepoError):
        return f"{reference.repo} is gated on the Hub: accept its terms there and set HF_TOKEN"
    if isinstance(error, RepositoryNotFoundError):
        return f"there is no model repository {reference.repo} on the Hub (or it is private: set HF_TOKEN)"
    return f"could not reach the Hub to fetch {reference} ({_short(error)})"


def _check(path: Path, sha256: str | None, name: str) -> None:
    """The downloaded file must hash to the Hub's SHA-256 and be a whole GGUF (its header read to the end, its
    tensors inside the file); otherwise it is deleted."""
    if sha256:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        if digest.hexdigest() != sha256:
            _delete(path)
            raise ModelFetchError(f"the download of {name} does not match the Hub's SHA-256 checksum (it was "
                                  "deleted; the next start fetches it again)")
    problem = gguf_layout_problem(path)
    if problem:
        _delete(path)
        raise ModelFetchError(f"{name} is not a whole GGUF model file ({problem}); it was deleted")


def _delete(path: Path) -> None:
    blob = path.resolve()
    path.unlink(missing_ok=True)
    blob.unlink(missing_ok=True)


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:200]


def _read_record(cache_dir: Path) -> dict:
    try:
        return json.loads((cache_dir / "fetched.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_record(cache_dir: Path, record: dict) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = cache_dir / "fetched.json.partial"
    partial.write_text(json.dumps(record, indent=1), encoding="utf-8")
    os.replace(partial, cache_dir / "fetched.json")


def llama_cpp_build() -> str:
    """The installed llama.cpp: the llama-cpp-python version, the CPU variant loaded and the features it uses."""
    from copilot.llm.cpu_backend import ensure_loaded
    from copilot.llm.local import _llama_cpp, system_info

    llama_cpp = _llama_cpp()
    variant = ensure_loaded(llama_cpp).variant
    info = system_info()
    features = [part.split("=")[0].strip() for part in info.replace("CPU :", "").split("|")
                if part.strip().endswith("= 1")]
    kernels = f"CPU variant {variant}: " if variant else "built-in CPU kernels: "
    return f"llama-cpp-python {llama_cpp.__version__} ({kernels}{', '.join(features) or 'no CPU extensions'})"
