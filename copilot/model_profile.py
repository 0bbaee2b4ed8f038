"""The model profile: is the configured writer a tiny model whose words a reader cannot trust, or a capable one?

One place decides it, every feature reads it (`Services.model_profile`):
  - `tiny`: a local GGUF under ~1B parameters (the packaged SmolLM2-135M). Answers, summaries and profile drafts
    are quotes of the sources chosen by the embedder; the model writes nothing a reader sees.
  - `capable`: a larger local GGUF, or any OpenAI-compatible endpoint. Answers are written, every output check on.
`COPILOT_MODEL_PROFILE=tiny|capable` overrides the choice (`auto`, the default, decides as above).

The size of a local model comes from its GGUF header, read here without loading the model: the `general.size_label`
the converter writes ("135M", "1.7B"), else the parameters counted from the architecture's shape, else the file's
size.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

from copilot.llm.gguf import gguf_metadata

TINY = "tiny"
CAPABLE = "capable"
TINY_BELOW_PARAMETERS = 1_000_000_000
# Without any size in the header: a 1B model is ~0.6 GB at 4 bits and ~1.1 GB at 8 bits; below this file size the
# model is taken as tiny.
TINY_BELOW_BYTES = 800_000_000


@dataclass(frozen=True)
class ModelProfile:
    name: str                      # TINY | CAPABLE
    reason: str                    # why, in a few words (shown by `status` and in tests)
    parameters: int | None = None  # of a local model, when known
    small: bool = False            # a local model under ~1B parameters: when it writes, grammars hold it (below)

    @property
    def tiny(self) -> bool:
        return self.name == TINY

    @property
    def writes(self) -> bool:
        """Whether the model's own words may be shown to a reader (else: quotes only)."""
        return self.name == CAPABLE

    def as_dict(self) -> dict:
        return {"profile": self.name, "reason": self.reason, "parameters": self.parameters, "small": self.small}


@dataclass(frozen=True)
class Generation:
    """How much the writer reads and writes, and how it is decoded: one plan, read by every feature.

    A small local model (the packaged 135M) reads little (700 tokens of sources, each cut to 90) and writes little
    (160 tokens), held by grammars to short sentences that open with a citation; it stays small even when
    COPILOT_MODEL_PROFILE=capable lets it write. A larger local model or an endpoint gets the papers' budgets
    (2,000 tokens of sources, whole items, 400-token answers) and writes free text, every output check still on;
    Related asks it for PRISM's aspect descriptions, and Trends proposes ideas. An explicit setting wins."""
    source_budget: int             # tokens of retrieved material per answer
    source_cap: int | None         # tokens of each retrieved item (None: whole)
    answer_tokens: int             # most tokens of one answer
    grammars: bool                 # free text held to grammars (small local model) or free
    related_ranking: str           # the Related tab's default ranking
    ideas: int                     # Trends' research ideas by default
    summary_tokens: int            # most tokens of one Trends summary
    detailed_aspects: bool         # PRISM's aspect descriptions as detailed paragraphs (else 2-3 sentences)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def generation_plan(settings, profile: ModelProfile) -> Generation:
    small = profile.small
    return Generation(
        source_budget=settings.context_tokens or (700 if small else 2000),
        source_cap=settings.source_tokens or (90 if small else None),
        answer_tokens=settings.answer_max_tokens or (160 if small else 400),
        grammars=small,
        related_ranking=settings.related_method if settings.related_method != "auto" else
        ("prism-extractive" if small else "prism-hybrid"),
        ideas=0 if profile.tiny else 3,
        summary_tokens=96 if small else 240,
        detailed_aspects=not small,
    )


_SIZE_LABEL = re.compile(r"^(?:(\d+)x)?(\d+(?:\.\d+)?)([KMBT])$", re.I)
_SCALE = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def parameters_from_label(label: str) -> int | None:
    """"135M" → 135e6, "1.7B" → 1.7e9, "8x7B" → 56e9; None for anything else."""
    match = _SIZE_LABEL.match(str(label).strip())
    if not match:
        return None
    experts = int(match.group(1) or 1)
    return int(experts * float(match.group(2)) * _SCALE[match.group(3).upper()])


def _number(value: object) -> int:
    """A header value as a whole number (a GGUF header holds ints, floats, bools and strings)."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"not a number: {type(value).__name__}")


def parameters_from_shape(meta: dict[str, object]) -> int | None:
    """Parameters of a decoder-only transformer from its header: embeddings + per layer attention and MLP."""
    arch = meta.get("general.architecture")
    try:
        width = _number(meta[f"{arch}.embedding_length"])
        layers = _number(meta[f"{arch}.block_count"])
        hidden = _number(meta[f"{arch}.feed_forward_length"])
        heads = _number(meta[f"{arch}.attention.head_count"])
        kv_heads = _number(meta.get(f"{arch}.attention.head_count_kv", heads))
        vocab = _number(meta.get(f"{arch}.vocab_size", 32000))
    except (KeyError, TypeError, ValueError):
        return None
    kv_width = width * kv_heads // max(heads, 1)
    per_layer = 2 * width * width + 2 * width * kv_width + 3 * width * hidden
    return vocab * width + layers * per_layer


def local_parameters(path: Path) -> tuple[int | None, str]:
    """(parameters or None, where the figure came from)."""
    try:
        meta = gguf_metadata(path)
    except (OSError, ValueError, struct.error):
        return None, "unreadable header"
    by_label = parameters_from_label(str(meta.get("general.size_label", "")))
    if by_label:
        return by_label, "size label"
    by_shape = parameters_from_shape(meta)
    return (by_shape, "architecture") if by_shape else (None, "no size in the header")


def profile_of_local(path: Path) -> ModelProfile:
    parameters, source = local_parameters(path)
    if parameters is not None:
        small = parameters < TINY_BELOW_PARAMETERS
        reason = f"local model of {parameters / 1e6:,.0f}M parameters ({source})"
        return ModelProfile(TINY if small else CAPABLE, reason, parameters, small)
    try:
        size = Path(path).stat().st_size
    except OSError:
        return ModelProfile(TINY, f"local model file {path} not readable", small=True)
    small = size < TINY_BELOW_BYTES
    return ModelProfile(TINY if small else CAPABLE, f"local model file of {size / 1e6:,.0f} MB ({source})", small=small)


# a size inside a model id or file name: "SmolLM2-135M-Instruct-Q8_0.gguf", "llama-3.1-8b-instruct", "qwen2.5:0.5b"
_SIZE_IN_NAME = re.compile(r"(?<![0-9A-Za-z.])(?:(\d+)x)?(\d+(?:\.\d+)?)([MB])(?![0-9A-Za-z])", re.I)
ENDPOINT_LOOKUP_S = 3.0


def parameters_in_name(name: str) -> int | None:
    """The parameters a model id or file name states, e.g. 135M or 8B; None when it states none."""
    match = _SIZE_IN_NAME.search(str(name).rsplit("/", 1)[-1])
    if not match:
        return None
    experts = int(match.group(1) or 1)
    return int(experts * float(match.group(2)) * _SCALE[match.group(3).upper()])


def reported_model_ids(settings) -> list[str]:
    """The model ids the endpoint lists at /models (llama_cpp.server: the GGUF's path; vLLM, Ollama: the name), in a
    few seconds at most; [] when it lists none or cannot be asked."""
    import threading

    import httpx

    base = (settings.openai_base_url or "https://api.openai.com/v1").rstrip("/")
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else ""
    found: list[str] = []

    def ask() -> None:
        try:
            reply = httpx.get(f"{base}/models", headers={"Authorization": f"Bearer {key}"} if key else {},
                              timeout=ENDPOINT_LOOKUP_S)
            reply.raise_for_status()
            found.extend(str(item["id"]) for item in reply.json().get("data", [])
                         if isinstance(item, dict) and "id" in item)
        except (httpx.HTTPError, ValueError, KeyError, AttributeError):
            pass

    # a deadline for the whole lookup: a server that drips its answer never trips httpx's per-read timeout
    worker = threading.Thread(target=ask, daemon=True, name="endpoint-models")
    worker.start()
    worker.join(ENDPOINT_LOOKUP_S)
    return list(found) if not worker.is_alive() else []


def profile_of_endpoint(settings, reported: list[str] | None = None) -> ModelProfile:
    """The profile of an OpenAI-compatible endpoint by its model's size: from COPILOT_LLM_PARAMETERS, else from the
    model id the endpoint reports for COPILOT_LLM_MODEL (or its only model), else from COPILOT_LLM_MODEL itself.
    With no size anywhere it is taken as capable, and the reason says the size is not known."""
    where = f"OpenAI-compatible endpoint ({settings.llm_model})"
    found: list[tuple[int | None, str]] = []
    if settings.llm_parameters:
        found.append((parameters_from_label(settings.llm_parameters), "COPILOT_LLM_PARAMETERS"))
    else:
        ids = reported_model_ids(settings) if reported is None else reported
        named = [i for i in ids if i == settings.llm_model] or (ids if len(ids) == 1 else [])
        found += [(parameters_in_name(i), f"the endpoint reports {i.rsplit('/', 1)[-1]!r}") for i in named]
        found.append((parameters_in_name(settings.llm_model), "the model's name"))
    for parameters, source in found:
        if parameters:
            tiny = parameters < TINY_BELOW_PARAMETERS
            return ModelProfile(TINY if tiny else CAPABLE, f"{where}: {parameters / 1e6:,.0f}M parameters ({source})",
                                parameters)
    return ModelProfile(CAPABLE, f"{where}: size not known (set COPILOT_LLM_PARAMETERS), taken as capable")


def choose_profile(settings, local_path: Path | None = None) -> ModelProfile:
    """The profile for `settings`: the override when set, else by backend and model size. `local_path` is the GGUF
    the local backend loads (default: COPILOT_LOCAL_MODEL, fetched if it is a Hub reference, else the packaged
    model)."""
    if settings.llm_backend == "openai":
        chosen = profile_of_endpoint(settings)
    else:
        if local_path is None:
            from copilot.llm.models import choose_local_model  # a Hub reference: the file it was fetched to

            local_path = choose_local_model(settings).path
        chosen = profile_of_local(local_path)
    if settings.model_profile != "auto":
        return ModelProfile(settings.model_profile, "set by COPILOT_MODEL_PROFILE", chosen.parameters, chosen.small)
    return chosen
