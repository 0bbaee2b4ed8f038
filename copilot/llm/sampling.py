"""Grammar-held generation on llama.cpp that checks the grammar against a few candidates, not the whole vocabulary.

llama-cpp-python's sampler chain applies the grammar to all 49,152 vocabulary entries before top-k at every step;
that check cost the packaged model a third of its generation speed (docs/performance.md). Here each step first
samples as usual from the model's top candidates (top-k 40, repeat penalty, top-p, min-p, temperature) and asks the
grammar about that one token; only when the grammar rejects it is the step sampled again with the grammar applied
to every token, so the output always obeys the grammar. llama.cpp's own `common_sampler` works the same way.
"""

from __future__ import annotations

import codecs
import ctypes
from collections.abc import Callable, Iterator

import numpy as np

TOP_K = 40
TOP_P = 0.95
MIN_P = 0.05
PENALTY_LAST_N = 64            # llama-cpp-python's default window for the repeat penalty


class GrammarSampler:
    """One generation's samplers: the usual chain, and the grammar on its own (both freed by `close`)."""

    def __init__(self, llama_cpp, llama, grammar_text: str, temperature: float, repeat_penalty: float,
                 seed: int = 0) -> None:
        self.lib = llama_cpp
        self.vocab = llama._model.vocab
        self.n_vocab = llama.n_vocab()
        lib = llama_cpp
        self.chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        # top-k before the repeat penalty (llama.h advises it: the penalty looks up every candidate it is given)
        for sampler in (lib.llama_sampler_init_top_k(TOP_K),
                        lib.llama_sampler_init_penalties(self.n_vocab, PENALTY_LAST_N, repeat_penalty, 0.0, 0.0),
                        lib.llama_sampler_init_top_p(TOP_P, 1),
                        lib.llama_sampler_init_min_p(MIN_P, 1), lib.llama_sampler_init_temp(temperature),
                        lib.llama_sampler_init_dist(seed)):
            lib.llama_sampler_chain_add(self.chain, sampler)
        self.grammar = lib.llama_sampler_init_grammar(self.vocab, grammar_text.encode("utf-8"), b"root")
        if not self.grammar:
            lib.llama_sampler_free(self.chain)
            raise ValueError("the grammar does not parse")
        self.buffer = (lib.llama_token_data * self.n_vocab)()
        self.view = np.ctypeslib.as_array(ctypes.cast(self.buffer, ctypes.POINTER(ctypes.c_float)),
                                          shape=(self.n_vocab * 3,)).reshape(self.n_vocab, 3)
        self.ids = np.arange(self.n_vocab, dtype=np.int32).view(np.float32)
        self.one = (lib.llama_token_data * 1)()
        self.full_checks = 0           # steps whose first choice the grammar rejected

    def _candidates(self, logits: np.ndarray):
        self.view[:, 0] = self.ids                  # ids stored as int32 bits in the float view
        self.view[:, 1] = logits
        self.view[:, 2] = 0.0
        return self.lib.llama_token_data_array(self.buffer, self.n_vocab, -1, False)

    def _allowed(self, token: int) -> bool:
        self.one[0].id, self.one[0].logit, self.one[0].p = token, 1.0, 0.0
        single = self.lib.llama_token_data_array(self.one, 1, -1, False)
        self.lib.llama_sampler_apply(self.grammar, ctypes.byref(single))
        return bool(np.isfinite(self.one[0].logit))

    def sample(self, logits: np.ndarray) -> int:
        """The next token: the chain's choice when the grammar allows it, else a choice among allowed tokens."""
        candidates = self._candidates(logits)
        self.lib.llama_sampler_apply(self.chain, ctypes.byref(candidates))
        token = int(candidates.data[candidates.selected].id)
        if not self._allowed(token):
            self.full_checks += 1
            candidates = self._candidates(logits)
            self.lib.llama_sampler_apply(self.grammar, ctypes.byref(candidates))
            self.lib.llama_sampler_apply(self.chain, ctypes.byref(candidates))
            token = int(candidates.data[candidates.selected].id)
        self.lib.llama_sampler_accept(self.grammar, token)
        self.lib.llama_sampler_accept(self.chain, token)
        return token

    def close(self) -> None:
        for sampler in (self.chain, self.grammar):
            self.lib.llama_sampler_free(sampler)
        self.chain = self.grammar = None


def generate(llama_cpp, llama, first_token: int, sampler: GrammarSampler, max_tokens: int,
             check_deadline: Callable[[], None]) -> Iterator[str]:
    """Text pieces after the prompt (whose last token, `first_token`, is not evaluated yet), up to `max_tokens`
    tokens or an end-of-generation token. A piece is yielded once its UTF-8 bytes are complete."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    token = first_token
    for _ in range(max_tokens):
        llama.eval([token])
        check_deadline()
        row = llama_cpp.llama_get_logits(llama.ctx)
        token = sampler.sample(np.ctypeslib.as_array(row, shape=(sampler.n_vocab,)))
        if llama_cpp.llama_vocab_is_eog(sampler.vocab, token):
            break
        piece = decoder.decode(llama.detokenize([token], special=False))
        if piece:
            yield piece
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail
