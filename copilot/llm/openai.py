"""The endpoint backend: any OpenAI-compatible chat endpoint through the `openai` client (imported when the backend
is made, so the local model never loads it; `import openai` is absolute and names the installed package)."""

from __future__ import annotations

import queue
import socket
import threading
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
            return LLMError(f"the LLM endpoint did not answer within {self.timeout:.0f} s")   # not retried: a deadline
        if isinstance(error, o.APIConnectionError):
            return LLMError("cannot reach the LLM endpoint: check OPENAI_BASE_URL", retryable=True)
        if isinstance(error, (o.RateLimitError, o.InternalServerError)):
            return LLMError(f"the LLM endpoint is busy or failing ({type(error).__name__})", retryable=True)
        if isinstance(error, o.APIStatusError) and error.status_code >= 500:
            return LLMError(f"the LLM endpoint failed (HTTP {error.status_code})", retryable=True)
        return LLMError(f"the LLM endpoint refused the request: {text[:300]}")

    def _late(self) -> LLMError:
        """The error of a call past its deadline (a stall, or an answer dripped too slowly)."""
        return LLMError(f"the LLM endpoint did not finish within {self.timeout:.0f} s")

    def stream(self, messages, max_tokens, temperature, usage, grammar=None):
        """The answer in pieces, within one deadline of `timeout` seconds for the whole call — connecting, the status
        line and headers, keep-alive comments, the body (issue #34: an endpoint sending only `: keepalive` held each
        call 150 s at a 10 s timeout, and the miss was retried). The endpoint is read on a helper thread; at the
        deadline the call ends with a non-retryable error and the connection is shut."""
        started = time.monotonic()
        deadline = started + self.timeout
        feed: queue.Queue = queue.Queue()
        stop = threading.Event()
        held: list = []
        threading.Thread(target=self._pump, args=(messages, max_tokens, temperature, feed, stop, held),
                         name="openai-stream", daemon=True).start()
        try:
            count, reported = 0, False
            while True:
                remaining = deadline - time.monotonic()
                try:
                    kind, value = feed.get(timeout=max(remaining, 0.0))
                except queue.Empty:
                    raise self._late() from None
                if kind == "end":
                    return
                if kind == "error":
                    raise self._error(value) if isinstance(value, self._openai.OpenAIError) else value
                if getattr(value, "usage", None):
                    usage.prompt_tokens = value.usage.prompt_tokens
                    usage.completion_tokens = value.usage.completion_tokens
                    reported = True
                piece = (value.choices[0].delta.content or "") if value.choices else ""
                if piece:
                    count += 1
                    if not reported:
                        usage.completion_tokens = count
                    if usage.first_token_seconds is None:
                        usage.first_token_seconds = time.monotonic() - started
                    yield piece
        finally:
            stop.set()
            _shut(held)
            usage.total_seconds = time.monotonic() - started

    def _pump(self, messages, max_tokens, temperature, feed: queue.Queue, stop: threading.Event, held: list) -> None:
        """Read the endpoint's stream into `feed` (("chunk", c) …, then ("end", None) or ("error", e))."""
        try:
            # include_usage: the endpoint's own token counts in a last chunk (OpenAI, vLLM, Ollama); one that ignores
            # it (llama_cpp.server) leaves the prompt's tokens unknown (0) and the streamed pieces are counted instead
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=max_tokens, temperature=temperature, stream=True,
                stream_options={"include_usage": True})
            held.append(response)
            if stop.is_set():
                return _shut(held)
            for chunk in response:
                if stop.is_set():
                    return _shut(held)
                feed.put(("chunk", chunk))
            feed.put(("end", None))
        except Exception as error:      # handed to the caller, which raises it as an LLMError
            feed.put(("error", error))


def _shut(held: list) -> None:
    """Shut the connection of a stream that is no longer wanted, so its helper thread ends too."""
    for response in held:
        try:
            stream = response.response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except Exception:
            pass
        try:
            response.close()
        except Exception:
            pass
