"""The endpoint backend: any OpenAI-compatible chat endpoint through the `openai` client (imported when the backend
is made, so the local model never loads it; `import openai` is absolute and names the installed package)."""

from __future__ import annotations

import time

from copilot.llm.interface import LLMError
from copilot.secrets import mask_secret


class OpenAIBackend:
    """Any OpenAI-compatible chat endpoint through the `openai` client."""

    name = "openai"
    obeys_grammar = False    # the prompt states the shape; the output checks in copilot.grounding still run

    def __init__(self, base_url: str | None, api_key: str, model: str, timeout: float) -> None:
        import openai

        self._openai = openai
        self._key = api_key
        self.model = model
        self.timeout = timeout
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)

    def mask(self, text: str) -> str:
        """`text` without the API key in any form an endpoint may echo (base64, reversed, spaced …)."""
        return mask_secret(text, self._key)

    @property
    def secret(self) -> str:
        """The key, for masking streamed answers (never logged or shown)."""
        return self._key

    def _error(self, error: Exception) -> LLMError:
        o = self._openai
        text = self.mask(str(error))
        if isinstance(error, o.AuthenticationError):
            return LLMError("the endpoint rejected the API key: check OPENAI_API_KEY")
        if isinstance(error, o.NotFoundError):
            return LLMError(f"model '{self.model}' not found at the endpoint: check COPILOT_LLM_MODEL")
        if isinstance(error, o.APITimeoutError):
            return LLMError("the LLM endpoint timed out", retryable=True)
        if isinstance(error, o.APIConnectionError):
            return LLMError("cannot reach the LLM endpoint: check OPENAI_BASE_URL", retryable=True)
        if isinstance(error, (o.RateLimitError, o.InternalServerError)):
            return LLMError(f"the LLM endpoint is busy or failing ({type(error).__name__})", retryable=True)
        if isinstance(error, o.APIStatusError) and error.status_code >= 500:
            return LLMError(f"the LLM endpoint failed (HTTP {error.status_code})", retryable=True)
        return LLMError(f"the LLM endpoint refused the request: {text[:300]}")

    def stream(self, messages, max_tokens, temperature, usage, grammar=None):
        started = time.monotonic()
        try:
            # include_usage: the endpoint's own token counts in a last chunk (OpenAI, vLLM, Ollama); one that ignores
            # it (llama_cpp.server) leaves the prompt's tokens unknown (0) and the streamed pieces are counted instead
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=max_tokens, temperature=temperature, stream=True,
                stream_options={"include_usage": True})
            count, reported = 0, False
            for chunk in response:
                if time.monotonic() - started > self.timeout:   # the client's timeout is per read, not per call
                    response.close()
                    raise LLMError(f"the LLM endpoint did not finish within {self.timeout:.0f} s")
                if getattr(chunk, "usage", None):
                    usage.prompt_tokens = chunk.usage.prompt_tokens
                    usage.completion_tokens = chunk.usage.completion_tokens
                    reported = True
                if not chunk.choices:
                    continue
                piece = chunk.choices[0].delta.content or ""
                if piece:
                    count += 1
                    if not reported:
                        usage.completion_tokens = count
                    if usage.first_token_seconds is None:
                        usage.first_token_seconds = time.monotonic() - started
                    yield piece
        except self._openai.OpenAIError as error:
            raise self._error(error) from None
        finally:
            usage.total_seconds = time.monotonic() - started
