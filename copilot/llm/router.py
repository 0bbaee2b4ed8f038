"""A signed-in visitor's model: Hugging Face's inference router (the OpenAI chat API) called with the visitor's own
token as the key. One backend and one `openai` client per turn, made for that visitor and dropped with the turn: no
client is shared, so one visitor's request can never carry another's token. The token is masked out of every log
row, error and streamed piece (copilot.secrets, through OpenAIBackend), and no failure is retried: each reads as a
sentence the visitor can act on, and a turn's later calls after a failure are not made (`failure`)."""

from __future__ import annotations

from copilot.llm.interface import LLM, LLMError
from copilot.llm.openai import OpenAIBackend
from copilot.store.db import Database

ROUTER = "hf-router"
WHERE = "Hugging Face's inference router, under your account"

SIGN_IN_AGAIN = ("Your Hugging Face sign-in was refused by the inference router (it has expired, or does not allow "
                 "inference): sign out and sign in again.")
NOT_ALLOWED = ("Your Hugging Face account may not use {model} through the inference router (a gated model, or a "
               "sign-in without the inference permission): sign in again, or pick another model.")
NO_CREDITS = ("Your Hugging Face account has used up its inference credits: add credits or a subscription in your "
              "Hugging Face billing settings, or ask again when they renew.")
RATE_LIMITED = ("Hugging Face's inference router is limiting your account (too many requests in a short time): wait "
                "a minute and ask again.")
PROVIDER_FAILED = "The inference provider behind Hugging Face's router failed (HTTP {status}): try again later."
UNREACHABLE = "Hugging Face's inference router could not be reached: try again later."
NOT_SERVED = "{model} is not served by Hugging Face's inference router: pick another model."
REFUSED = "Hugging Face's inference router refused the request (HTTP {status})."
TOO_SLOW = "{model} did not finish writing within {seconds:.0f} s, so it was stopped."
# a 429 or 403 whose body speaks of credits or quota is the account's credits, not its rate
_CREDIT_WORDS = ("credit", "quota", "payment", "billing", "exceeded your monthly")


class RouterBackend(OpenAIBackend):
    """The router through the `openai` client with a visitor's token. Errors are sentences for that visitor (never
    retryable, never echoing what the router said); after one failure the backend refuses further calls with it."""

    name = ROUTER

    def __init__(self, base_url: str, token: str, model: str, timeout: float) -> None:
        super().__init__(base_url, token, model, timeout)
        self.failure: LLMError | None = None

    def _late(self) -> LLMError:
        return self._failed(LLMError(TOO_SLOW.format(model=self.model, seconds=self.timeout)))

    def _error(self, error: Exception) -> LLMError:
        return self._failed(LLMError(self._sentence(error)))

    def _failed(self, error: LLMError) -> LLMError:
        self.failure = self.failure or error
        return error

    def _sentence(self, error: Exception) -> str:
        o = self._openai
        status = getattr(error, "status_code", None)
        body = self.mask(str(getattr(error, "body", "") or error)).lower()
        if isinstance(error, o.APITimeoutError):
            return TOO_SLOW.format(model=self.model, seconds=self.timeout)
        if isinstance(error, o.APIConnectionError):
            return UNREACHABLE
        if status == 402 or (status in (403, 429) and any(word in body for word in _CREDIT_WORDS)):
            return NO_CREDITS
        if status == 401:
            return SIGN_IN_AGAIN
        if status == 403:
            return NOT_ALLOWED.format(model=self.model)
        if status == 404:
            return NOT_SERVED.format(model=self.model)
        if status == 429:
            return RATE_LIMITED
        if isinstance(status, int) and status >= 500:
            return PROVIDER_FAILED.format(status=status)
        return REFUSED.format(status=status if status is not None else "?")

    def stream(self, messages, max_tokens, temperature, usage, grammar=None):
        if self.failure is not None:      # one failure per turn: the turn's other calls are not made
            raise self.failure
        yield from super().stream(messages, max_tokens, temperature, usage, grammar)


def router_llm(base_url: str, token: str, model: str, timeout: float, db: Database | None) -> LLM:
    """An LLM over the router for one visitor's turn (its calls logged to `llm_calls` with the token masked), never
    retried."""
    return LLM(RouterBackend(base_url, token, model, timeout), db, retries=0)
