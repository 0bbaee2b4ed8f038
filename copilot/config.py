"""One Settings object, read from the environment once and passed down."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_CATEGORIES = ["cs.CL", "cs.AI", "cs.LG", "cs.IR"]
# what a signed-in visitor may pick (docs/signin.md says why each): open, ungated, non-thinking instruct models
HF_MODELS = ["Qwen/Qwen3-235B-A22B-Instruct-2507", "deepseek-ai/DeepSeek-V3-0324", "moonshotai/Kimi-K2-Instruct"]
_MODEL_NAME = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.:-]{0,95}")


class SettingsError(ValueError):
    """A setting has a bad value; the message names the variable and how to fix it."""


def _env(name: str, *aliases: str) -> AliasChoices:
    return AliasChoices(name, *aliases)


_HUB_REFERENCE = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)"
                            r"(?::(?P<quant>[\w.*-]+)|/(?P<file>[^:]+\.gguf))?$", re.IGNORECASE)


@dataclass(frozen=True)
class HubReference:
    repo: str
    filename: str | None = None      # a file in the repository
    quant: str | None = None         # or a quantization the file name carries, e.g. Q4_K_M (glob characters allowed)

    def __str__(self) -> str:
        if self.filename:
            return f"{self.repo}/{self.filename}"
        return f"{self.repo}:{self.quant}" if self.quant else self.repo


def parse_reference(text: str) -> Path | HubReference:
    """A path (an existing file, or anything that looks like a path) or a Hub reference."""
    text = text.strip()
    path = Path(text).expanduser()
    if path.is_file() or text.startswith(("/", ".", "~")) or "\\" in text:
        return path
    match = _HUB_REFERENCE.match(text)
    if not match:
        return path
    return HubReference(match["repo"], match["file"], match["quant"])


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="COPILOT_", extra="ignore", populate_by_name=True)

    data_dir: Path = Field(Path("./copilot-data"), description="Chroma files, copilot.db and logs live here.")

    # --- language model
    llm: Literal["openai", "local"] | None = Field(
        None, description="LLM backend: `openai` (any OpenAI-compatible endpoint) or `local` (llama.cpp). "
        "Default: `openai` when OPENAI_API_KEY is set, else `local`.")
    openai_base_url: str | None = Field(
        None, validation_alias=_env("OPENAI_BASE_URL"), description="OpenAI-compatible endpoint (OPENAI_BASE_URL).")
    openai_api_key: SecretStr | None = Field(
        None, validation_alias=_env("OPENAI_API_KEY"), description="API key for the openai backend (OPENAI_API_KEY).")
    llm_model: str = Field("gpt-4o-mini", description="Model name sent to the OpenAI-compatible endpoint.")
    local_model: str | None = Field(
        None, description="The local backend's model: a GGUF path, or a Hugging Face reference fetched once into the "
        "data dir (`owner/repo:Q4_K_M`, `owner/repo/FILE.gguf`). Default: the packaged SmolLM2-135M-Instruct.")
    local_context: int = Field(4096, ge=512, le=131072, description="Context window (tokens) of the local model.")
    local_threads: int = Field(1, ge=1, le=64, description="CPU threads the local model generates with. One: with "
                               "sleeping OpenMP threads a second one gains nothing for a small model, and spinning "
                               "ones collapse when another process is busy (README \"Local model\").")
    local_batch_threads: int | None = Field(
        None, ge=1, le=64, description="CPU threads for evaluating a prompt in batches. Default: the machine's cores, "
        "at most 4.")
    local_requantize: bool = Field(
        True, description="Make a Q8_0 copy (once, in the data dir) of a Q4_1/Q5_1 local model: those have no fast "
        "batched kernel, so prompts are read ~3x slower.")
    local_batch: int = Field(256, ge=1, le=4096, description="Prompt tokens the local model evaluates per batch "
                             "(1 = token by token, the slow path kept for builds with AMX kernels).")
    model_profile: Literal["auto", "tiny", "capable"] = Field(
        "auto", description="`tiny`: answers (Ask and Adaptive), Trends summaries and profile drafts are quotes of the "
        "sources, and research ideas, deep answers and related-work drafts are not offered: the model writes nothing "
        "shown (a reader cannot trust a tiny model's words); `capable`: they are written, every output check on. "
        "`auto`: `tiny` for a local GGUF under 1B parameters (the packaged one), else `capable`. Budgets and grammars "
        "follow the model's size, not this setting (README \"The generation plan\").")
    llm_parameters: str | None = Field(
        None, description="Size of the OpenAI-compatible endpoint's model, e.g. `135M` or `8B`: under 1B the model "
        "profile is `tiny`. Unset: read from the model id the endpoint reports (`/v1/models`, e.g. a GGUF file name "
        "with `135M` in it), else from COPILOT_LLM_MODEL; with no size anywhere the endpoint is taken as capable.")
    llm_timeout: float = Field(120.0, gt=0, description="Seconds before one LLM call is abandoned.")
    llm_retries: int = Field(2, ge=0, le=10, description="Retries with backoff on transient LLM errors.")

    # --- embeddings and vectors
    embed_model: str | None = Field(
        None, description="Sentence-transformers model name or path, or a static model directory made by "
        "`embed-distill` (fast path). Default: the packaged all-MiniLM-L6-v2.")
    embed_batch_size: int = Field(32, ge=1, le=4096, description="Texts embedded per batch (32: faster than 64 on "
                                  "a paper's sentences and on abstracts, docs/performance.md \"bf16 on the torch "
                                  "path\").")
    embed_backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        "torch", description="How a sentence-transformers model runs: `torch`, `onnx` (an ONNX Runtime copy "
        "exported once into the data dir's models folder, ~10 s and ~1.2 GB at first use; the same vectors as "
        "`torch`, faster) or `onnx-int8` (int8 weights: faster still, vectors differ slightly, so import into a "
        "fresh data dir). A failed export falls back to torch with a logged reason (docs/performance.md, "
        "section 4).")
    embed_precision: Literal["auto", "fp32"] = Field(
        "auto", description="`auto`: the torch backend embeds every text in bf16 where the CPU multiplies bf16 in "
        "hardware (avx512_bf16; ~2x faster on a paper's body, vectors within cosine 0.9999 of fp32, checked at "
        "load), each padded to a length of its own so its vector is the same alone or in any batch; else fp32; "
        "`fp32`: always fp32 (docs/performance.md, \"bf16 on the torch path\").")
    chroma_host: str | None = Field(None, description="Chroma server host; unset means embedded Chroma in the data "
                                    "dir.")
    chroma_port: int = Field(8000, ge=1, le=65535, description="Chroma server port (with COPILOT_CHROMA_HOST).")

    # --- arXiv and ingestion
    arxiv_api_url: str | None = Field(
        None, description="arXiv API endpoint without the query string, e.g. http://127.0.0.1:8123/api/query.")
    arxiv_timeout: float = Field(30.0, gt=0, description="Seconds before one arXiv request is abandoned.")
    arxiv_delay: float = Field(3.0, ge=0, description="Seconds between arXiv API requests (the API's politeness "
                               "delay).")
    arxiv_retries: int = Field(3, ge=0, le=10, description="Retries of a failed arXiv request.")
    arxiv_html_url: str = Field(
        "https://arxiv.org/html/", description="Where a paper's full text is read as HTML: `<this><id><version>` "
        "(arXiv's LaTeXML pages; tests point it at a loopback server); COPILOT_ARXIV_TIMEOUT bounds each request.")
    arxiv_pdf_url: str = Field(
        "https://arxiv.org/pdf/", description="Where a paper's PDF is read when it has no HTML page: "
        "`<this><id><version>`.")
    fulltext_delay: float = Field(3.0, ge=0, le=600, description="Seconds between two requests for full text (HTML "
                                  "or PDF), one at a time in the whole process: arXiv asks robots for one request "
                                  "every few seconds.")
    fulltext_max_mb: float = Field(20.0, gt=0, le=1000, description="Largest HTML page or PDF read, in MB (a "
                                   "download or an imported file); a larger one is refused and not read on.")
    categories: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_CATEGORIES), description="arXiv categories ingested, comma-separated.")
    ingest_cron: str = Field("0 6 * * *", description="When the daily ingestion runs (crontab, UTC).")
    ingest_days: int = Field(2, ge=1, le=365, description="Days back the scheduled ingestion looks.")
    ingest_max_papers: int = Field(2000, ge=1, description="Most papers one scheduled ingestion fetches.")
    scheduler: bool = Field(True, description="Run the daily ingestion inside the app process.")
    sentence_prefill: bool = Field(
        True, description="The app embeds the papers' quotable sentences in the background, at the lowest CPU "
        "priority, at start and after each ingestion, so an answer looks them up (`python -m copilot sentences`).")
    fulltext_reading: bool = Field(
        True, description="Chat reads the full text of the papers its answers show (arXiv's HTML page, else the PDF) "
        "in the background, one at a time, so later answers quote their bodies (`python -m copilot fulltext`).")

    # --- chat and retrieval
    top_k: int = Field(8, ge=1, le=100, description="Items retrieved per question (Thought-Retriever K).")
    thought_row_margin: float = Field(
        0.08, ge=-1.0, le=1.0, description="How much a paper reached through a thought must beat the papers-only row "
        "it would push out of Chat's thought-side table by (its best sentence's score) to take that place; else the "
        "papers-only row stays. Negative: memory's rows always keep their places (docs/thoughts-eval.md).")
    context_tokens: int | None = Field(
        None, ge=100, le=100000, description="Token budget for retrieved material. Default: 2000 (the paper's) for "
        "an OpenAI-compatible endpoint or a local model of 1B parameters or more, 700 for a smaller local model "
        "such as the packaged one (keeps a turn fast; README \"Local model\").")
    source_tokens: int | None = Field(
        None, ge=20, le=100000, description="Each retrieved item is cut to this many tokens before the budget. "
        "Default: none for an endpoint or a 1B+ local model, 90 for a smaller local model (title and first "
        "sentences, so several items fit).")
    merge_threshold: float = Field(0.85, gt=0, le=1, description="Cosine at or above which a new thought is redundant.")
    private_thoughts: bool = Field(False, description="New thoughts are seen only by the user whose turn made them "
                                   "(default: thought memory is shared by all users, the method's point).")
    admins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Users (comma-separated, as the app names them, e.g. hf:alice) who may "
        "delete any thought (everyone else deletes only thoughts made from their own questions) and, once any are "
        "named, are the only ones who may import into the shared library from the page.")
    answer_max_tokens: int | None = Field(
        None, ge=16, le=8192, description="Most tokens one answer may have. Default: 400 for an endpoint or a 1B+ "
        "local model, 160 for a smaller local model.")
    max_input_chars: int = Field(4000, ge=100, le=1000000,
                                 description="Longer text inputs are truncated, with a notice.")

    related_method: Literal["auto", "abstract", "lexical", "hybrid", "prism", "prism-hybrid",
                            "prism-extractive"] = Field(
        "auto", description="How the Related tab ranks (docs/related-eval.md). `auto`: `prism-extractive` on a "
        "small local model such as the packaged one (it won on the CSFCube dev fold, no LLM call), `prism-hybrid` "
        "with an OpenAI-compatible endpoint or a 1B+ local model (the LLM writes the aspect descriptions).")

    # --- SlimPLM (Chat: "Adaptive retrieval")
    slim_unknown_threshold: float = Field(
        0.14, ge=0.0, le=1.0, description="SlimPLM with a local proxy: its judge says \"unknown\" (retrieve) when "
        "its probability of that word reaches this. 0.14 is the best threshold over the 82 dev questions the judge "
        "decides for the packaged model, picked on them (5-fold cross-validation chose 0.109-0.159; "
        "[docs/slim-eval.md](docs/slim-eval.md)); another `COPILOT_LOCAL_MODEL` needs its own (`eval slim` prints "
        "the calibration). An endpoint proxy is judged by the word it writes.")

    # --- Graph of Records (Trends: "Ask about this period")
    gor_questions: int = Field(40, ge=4, le=1000, description="Simulated questions written per period for Graph of "
                               "Records: three quarters train its network (30 of 40, the paper's number), the rest "
                               "are held out for `eval gor`.")
    gor_responses: int = Field(30, ge=0, le=1000, description="Simulated answers to training questions that join a "
                               "period's record graph as response records (paper: one per question).")

    # --- profile
    profile_max_papers: int = Field(50, ge=1, le=1000,
                                    description="Most papers an author lookup fetches (newest first).")
    profile_max_tokens: int = Field(450, ge=32, le=4096, description="Most tokens a generated profile may have.")
    profile_prompt_papers: int = Field(5, ge=1, le=50, description="Checked papers quoted in the profile-generation "
                                       "prompt (all checked papers are saved with the profile).")

    # --- web app
    server_name: str = Field("127.0.0.1", validation_alias=_env("GRADIO_SERVER_NAME"),
                             description="Address the app listens on (GRADIO_SERVER_NAME).")
    server_port: int = Field(7860, ge=1, le=65535, validation_alias=_env("GRADIO_SERVER_PORT"),
                             description="Port the app listens on (GRADIO_SERVER_PORT).")
    concurrency: int = Field(4, ge=1, le=64, description="Requests the web app handles at once.")
    queue_size: int = Field(256, ge=1, le=10000,
                            description="Requests that may wait in the web app's queue; beyond it new ones are "
                            "refused.")
    user_pending: int = Field(16, ge=1, le=1000, description="Requests one user (one address, without sign-in) may "
                              "have waiting or running in the web app's queue; one more is refused with 429 before "
                              "it takes a place, so one user cannot fill the queue for everyone (a page load makes 5, "
                              "so keep room for a few open tabs).")
    rate_limit: int = Field(10, ge=0, le=10000, description="LLM-backed actions (ask, generate, summarise) one "
                            "user may start per COPILOT_RATE_WINDOW seconds; 0 turns the limit off.")
    rate_window: float = Field(60.0, gt=0, le=86400, description="Length in seconds of the rate-limit window.")
    auth: SecretStr | None = Field(
        None, description="Password protection for self-hosting: `user:password` pairs, comma-separated.")
    oauth_client_id: str | None = Field(
        None, validation_alias=_env("OAUTH_CLIENT_ID"), description="Set by Hugging Face Spaces when the Space "
        "enables sign-in (OAUTH_CLIENT_ID); the page then shows a sign-in button.")

    # --- a signed-in visitor's own model (Hugging Face sign-in with the `inference-api` scope; docs/signin.md)
    hf_router_url: str = Field(
        "https://router.huggingface.co/v1", description="OpenAI-compatible endpoint a signed-in visitor's answers are "
        "written through, with the visitor's own token as the key (Hugging Face's inference router).")
    hf_model: str = Field(
        "Qwen/Qwen3-235B-A22B-Instruct-2507", description="Model that writes a signed-in visitor's answers and "
        "thoughts through COPILOT_HF_ROUTER_URL: an open instruct model without a thinking phase, so the first words "
        "come at once (docs/signin.md says why this one).")
    hf_models: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(HF_MODELS), description="The models a signed-in visitor may pick among "
        "(comma-separated, each served by COPILOT_HF_ROUTER_URL); COPILOT_HF_MODEL is always offered, first. A model "
        "not in the list is refused.")
    hf_timeout: float = Field(60.0, gt=0, le=600, description="Seconds one written answer through the router may "
                              "take, first token to last; past it the answer is stopped and the evidence table shown.")

    # --- backup to a Hugging Face dataset (a free Space's disk is wiped on restart)
    hub_backup: str | None = Field(
        None, pattern=r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$",
        description="`user/dataset`: snapshot the app's state to this Hugging Face dataset repository every "
        "COPILOT_HUB_BACKUP_MINUTES and after each ingestion, and restore the newest snapshot at start when the data "
        "dir is empty. Needs a write token in HF_TOKEN.")
    hub_preferences: str | None = Field(
        None, pattern=r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$",
        description="`user/dataset`: `export preferences` also pushes the exported preference pairs (JSON lines) to "
        "this Hugging Face dataset repository (made private if new). Needs a write token in HF_TOKEN.")
    hub_token: SecretStr | None = Field(
        None, validation_alias=_env("HF_TOKEN"), description="Hugging Face token with write access to the backup and "
        "preference datasets (HF_TOKEN).")
    hub_backup_minutes: int = Field(15, ge=1, le=1440, description="Minutes between backups to the Hub; votes "
                                    "confirmed after the last backup are lost if the Space restarts.")
    hub_endpoint: str | None = Field(None, validation_alias=_env("HF_ENDPOINT"),
                                     description="Hugging Face Hub address (HF_ENDPOINT); default the public Hub.")
    hub_timeout: float = Field(600.0, gt=0, le=7200, description="Seconds a whole backup, restore or push of "
                               "preference data may take (upload or download included) before it is reported as "
                               "failed.")

    @field_validator("auth")
    @classmethod
    def _check_auth(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            pairs = [p for p in value.get_secret_value().split(",") if p.strip()]
            if not pairs or any(":" not in p or not p.split(":", 1)[0].strip() or not p.split(":", 1)[1]
                                for p in pairs):
                raise ValueError("expected user:password pairs separated by commas")
        return value

    def auth_pairs(self) -> list[tuple[str, str]] | None:
        if self.auth is None:
            return None
        pairs = [p.split(":", 1) for p in self.auth.get_secret_value().split(",") if p.strip()]
        return [(user.strip(), password) for user, password in pairs]

    @field_validator("categories", mode="before")
    @classmethod
    def _split_categories(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list) and not value:
            raise ValueError("give at least one arXiv category, e.g. cs.CL,cs.LG")
        return value

    @field_validator("hf_models", mode="before")
    @classmethod
    def _split_hf_models(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list) and any(not _MODEL_NAME.fullmatch(str(v)) for v in value):
            raise ValueError("expected Hub model names such as owner/model, comma-separated")
        return value

    def hf_model_choices(self) -> list[str]:
        """The models a signed-in visitor may pick: COPILOT_HF_MODEL (the default) first, then COPILOT_HF_MODELS."""
        return list(dict.fromkeys([self.hf_model, *self.hf_models]))

    @field_validator("admins", mode="before")
    @classmethod
    def _split_admins(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("ingest_cron")
    @classmethod
    def _check_cron(cls, value: str) -> str:
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(value)
        except ValueError as error:
            raise ValueError(f"not a crontab expression ({error}); e.g. '0 6 * * *'") from None
        return value

    @field_validator("local_model", mode="before")
    @classmethod
    def _check_gguf(cls, value: object) -> str | None:
        if value is None or str(value).strip() == "":
            return None
        reference = parse_reference(str(value))
        if not isinstance(reference, Path):
            return str(value).strip()          # a Hub reference: fetched (or refused, in one sentence) at start
        if not reference.is_file():
            raise ValueError(f"no GGUF file at {reference} (a Hub reference looks like owner/repo:Q4_K_M or "
                             "owner/repo/FILE.gguf)")
        with reference.open("rb") as model:
            if model.read(4) != b"GGUF":
                raise ValueError(f"{reference} is not a GGUF model file (it does not start with 'GGUF')")
        return str(reference)

    @property
    def llm_backend(self) -> str:
        if self.llm:
            return self.llm
        return "openai" if self.openai_api_key else "local"

    @property
    def batch_threads(self) -> int:
        return self.local_batch_threads or max(1, min(os.cpu_count() or 1, 4))

    @property
    def db_path(self) -> Path:
        return self.data_dir / "copilot.db"

    @property
    def chroma_path(self) -> Path:
        return self.data_dir / "chroma"


def _env_name(field_name: str) -> str:
    alias = Settings.model_fields[field_name].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return "COPILOT_" + field_name.upper()


def env_names() -> dict[str, str]:
    """Environment variable of every setting, keyed by field name."""
    return {name: _env_name(name) for name in Settings.model_fields}


def settings_table() -> str:
    """The README's configuration table, generated from the Settings fields (a test keeps them equal)."""
    rows = ["| variable | default | what it does |", "|---|---|---|"]
    for name, info in Settings.model_fields.items():
        default = ",".join(info.get_default(call_default_factory=True)) if info.default_factory else info.default
        shown = "—" if default is None else f"`{default}`"
        rows.append(f"| `{_env_name(name)}` | {shown} | {info.description} |")
    return "\n".join(rows)


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment; a bad value raises SettingsError that says which and why."""
    try:
        settings = Settings(**overrides)
    except ValidationError as error:
        lines = []
        for problem in error.errors():
            field = str(problem["loc"][0]) if problem["loc"] else "?"
            name = _env_name(field) if field in Settings.model_fields else field
            shown = "<hidden>" if field in ("openai_api_key", "auth", "hub_token") else repr(problem.get("input"))
            lines.append(f"{name}={shown}: {problem['msg']}")
        raise SettingsError("bad setting: " + "; ".join(lines)) from None
    if settings.llm_backend == "openai" and not settings.openai_api_key:
        raise SettingsError("COPILOT_LLM=openai but no key found: set OPENAI_API_KEY or use COPILOT_LLM=local")
    for name, value in _OFFLINE_DEFAULTS.items():
        if name not in os.environ:
            os.environ[name] = value
            _defaulted.add(name)
    _one_ca_bundle()
    return settings


def _one_ca_bundle() -> None:
    """A CA bundle named in either standard variable is trusted by every client: requests (arXiv) reads only
    REQUESTS_CA_BUNDLE, httpx (the OpenAI-compatible endpoint, the Hub) only SSL_CERT_FILE."""
    named = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE")
    if named:
        os.environ.setdefault("REQUESTS_CA_BUNDLE", named)
        os.environ.setdefault("SSL_CERT_FILE", named)


# Nothing reaches the Hub unless asked: a model the user names by a Hub reference is the one exception, fetched
# when the user did not set HF_HUB_OFFLINE themselves (copilot/llm/models.py).
_OFFLINE_DEFAULTS = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
_defaulted: set[str] = set()


def hub_offline_requested() -> bool:
    """True when the user (not `load_settings`) set HF_HUB_OFFLINE."""
    value = os.environ.get("HF_HUB_OFFLINE", "")
    return "HF_HUB_OFFLINE" not in _defaulted and value.strip().lower() in ("1", "true", "yes", "on")


@contextlib.contextmanager
def hub_requests_allowed():
    """Let huggingface_hub make requests inside this block: a model the user names by a Hub reference, a backup or
    a preference push to a dataset the user configured. `load_settings` sets HF_HUB_OFFLINE=1 by default so that
    nothing else reaches the Hub, and huggingface_hub reads it at import; a user who set it themselves keeps it."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_OFFLINE
    if not hub_offline_requested():
        constants.HF_HUB_OFFLINE = False
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved
