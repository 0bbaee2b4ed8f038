"""A signed-in visitor's answers, written by a capable open model through Hugging Face's inference router under the
visitor's own account (issue #50).

A `Writer` is made per turn from the token of that event (Gradio's `OAuthToken`, or the CLI's `--hf-token-env`) and
travels with the turn (`Turn.writer`) and its thought job, never further: it is not stored, logged, exported or
backed up (the call log keeps masked prompts, copilot.llm.router). Without a token, or with one that does not allow
inference, there is no writer and the turn is the tiny profile's, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from copilot.config import Settings
from copilot.errors import UserError
from copilot.llm import LLM, LLMError
from copilot.llm.router import ROUTER, WHERE, router_llm
from copilot.model_profile import CAPABLE, Generation, ModelProfile, generation_plan
from copilot.services import Services

INFERENCE_SCOPE = "inference-api"

SIGN_IN_ADDS = ("Sign in with Hugging Face to have your answers and thoughts written by {model}, a capable open "
                "model, under your own Hugging Face account (its inference credits, not this Space's). Without "
                "signing in, answers are the evidence table: the papers' own sentences, chosen and quoted.")
NO_INFERENCE_SCOPE = ("Your Hugging Face sign-in does not allow inference, so answers are the evidence table. Sign "
                      "out and sign in again, allowing inference, to have them written by {model}.")
NOT_OFFERED = "{model} is not one of the models offered here for written answers; pick one of: {choices}."
WHERE_WORDS_GO = ("Signed in: your answers are written by {model} through Hugging Face's inference router under "
                  "your account. Your question and the quoted sources (titles and abstracts of the papers found) are "
                  "sent to Hugging Face's inference provider for each answer, and the use is billed to your account.")


@dataclass(frozen=True)
class Writer:
    """The model that writes one signed-in visitor's answers for one turn (and its thought)."""

    llm: LLM = field(repr=False)      # its backend holds the visitor's token: never printed, never stored
    model: str
    plan: Generation                   # a capable model's budgets: whole sources, 400-token answers

    @property
    def info(self) -> dict[str, str]:
        """What the turn records as its backend and model (no token)."""
        return {"backend": ROUTER, "model": self.model}

    @property
    def failure(self) -> LLMError | None:
        """The turn's first router failure: its later calls are not made (no retries)."""
        return getattr(self.llm.backend, "failure", None)

    def status(self, seconds: float | None = None) -> str:
        """Where the answer was written, for its status line."""
        took = f" in {seconds:.1f} s" if seconds else ""
        return f"Written by {self.model} on {WHERE}{took}."


def allows_inference(scope: str | None) -> bool:
    """Whether a sign-in's scopes (space-separated, as Hugging Face's OAuth gives them) allow inference. `None`:
    a token given outside a sign-in (the CLI's), whose scopes are not known; the router says if it may not."""
    return scope is None or INFERENCE_SCOPE in scope.split()


def picked_model(settings: Settings, model: str | None) -> str:
    """The model a visitor picked, if it is one of those offered (COPILOT_HF_MODEL when none was picked). Anything
    else is refused: the page offers the list, but an API caller can send any text."""
    choices = settings.hf_model_choices()
    if model is None or not str(model).strip():
        return choices[0]
    name = str(model).strip()
    if name not in choices:
        shown = name if len(name) <= 80 else name[:80] + "…"
        raise UserError(NOT_OFFERED.format(model=shown, choices=", ".join(choices)))
    return name


def visitor_writer(services: Services, token: str | None, scope: str | None = None,
                   model: str | None = None) -> Writer | None:
    """The writer for a visitor's turn, or None (not signed in, or a sign-in that does not allow inference).
    `model`: the visitor's pick (`picked_model`); a model not offered raises UserError even without a token."""
    name = picked_model(services.settings, model)
    if not token or not token.strip() or not allows_inference(scope):
        return None
    s = services.settings
    llm = router_llm(s.hf_router_url, token.strip(), name, s.hf_timeout, services.db)
    plan = generation_plan(s, ModelProfile(CAPABLE, f"a signed-in visitor's model ({name})"))
    return Writer(llm, name, plan)


def oauth_writer(services: Services, oauth_token, model: str | None = None) -> Writer | None:
    """The writer for a Gradio event's `gr.OAuthToken` and model pick (None when not signed in)."""
    name = picked_model(services.settings, model)
    if oauth_token is None:
        return None
    return visitor_writer(services, getattr(oauth_token, "token", None), getattr(oauth_token, "scope", "") or "",
                          name)


def routed_settings(settings: Settings, model: str) -> Settings:
    """Settings naming the router's `model` as the configured one (an OpenAI-compatible endpoint), for a run whose
    every model call goes through a visitor's router backend (`eval all --hf-token-env`): reports, judges and caches
    name that model. No key: the backend passed to Services holds the visitor's token; nothing is built from these."""
    return settings.model_copy(update={"llm": "openai", "llm_model": model, "openai_base_url": settings.hf_router_url,
                                       "openai_api_key": None})


def turn_model(services: Services, models: dict[str, str]) -> str | None:
    """The model that wrote a turn, if it is still offered: its thought is drafted by the same model (None: the
    default, for a turn written by a model no longer in the list, or not written through the router)."""
    name = models.get("model") if models.get("backend") == ROUTER else None
    return name if name in services.settings.hf_model_choices() else None


def picker_shown(services: Services, oauth_token) -> bool:
    """The model picker shows only to a signed-in visitor whose sign-in allows inference, and only with a choice."""
    return (oauth_token is not None and allows_inference(getattr(oauth_token, "scope", "") or "")
            and len(services.settings.hf_model_choices()) > 1)


def sign_in_note(services: Services, oauth_token) -> str:
    """What the page says about signing in: what it adds, or (signed in) where the words go, said before the first
    written answer."""
    model = services.settings.hf_model
    if oauth_token is None:
        return SIGN_IN_ADDS.format(model=model)
    if not allows_inference(getattr(oauth_token, "scope", "") or ""):
        return NO_INFERENCE_SCOPE.format(model=model)
    if picker_shown(services, oauth_token):
        model = f"{model} or the model you pick below"
    return WHERE_WORDS_GO.format(model=model)


def written_where(models: dict[str, str]) -> str:
    """The status line of a turn written through the router (its model and where it ran); "" for any other turn."""
    if models.get("backend") != ROUTER:
        return ""
    return f"Both answers were written by {models.get('model', '?')} on {WHERE}."
