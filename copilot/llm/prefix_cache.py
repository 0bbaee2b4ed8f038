"""Saved KV states of the instructions that many prompts share, restored instead of reading them again.

The KV cache of one llama.cpp context holds only the last prompt. Two answers of a turn share their beginning and
reuse it directly, but between turns the background thought job (another prompt) replaces it, so each turn's first
answer used to read its instructions again. The state of a prompt's instructions (its system message) is saved
once per distinct text, with a checksum; when the cache holds less of a new prompt than a saved state, that state
is restored. A state whose bytes no longer match their checksum, or that llama.cpp refuses, is dropped and the
prompt is read from the start: a bad state is never used.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass

log = logging.getLogger(__name__)

KEEP = 4                # distinct instruction prefixes kept (chat answer, thought, Trends, profile …)
MIN_TOKENS = 16         # shorter prefixes are cheaper to read than to restore


@dataclass
class Snapshot:
    tokens: tuple[int, ...]          # what the saved KV holds, from position 0
    data: bytearray                  # llama_state_seq_get_data of sequence 0
    digest: bytes                    # sha256 of `data` when it was saved


def common_prefix(a, b) -> int:
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count


class PrefixStates:
    """Up to KEEP saved prefixes of one llama.cpp context (callers hold the model's lock)."""

    def __init__(self, llama_cpp, keep: int = KEEP) -> None:
        self.lib = llama_cpp
        self.keep = keep
        self.saved: OrderedDict[tuple[int, ...], Snapshot] = OrderedDict()
        self.restored = 0
        self.discarded = 0

    def best(self, tokens: list[int], cached: int) -> Snapshot | None:
        """The saved prefix that covers more of `tokens` than the `cached` tokens already in the KV cache."""
        found = None
        for snapshot in self.saved.values():
            if len(snapshot.tokens) > max(cached, len(found.tokens) if found else 0) \
                    and common_prefix(snapshot.tokens, tokens) == len(snapshot.tokens):
                found = snapshot
        return found

    def save(self, llama, length: int) -> None:
        """Save the KV state of the first `length` tokens, which must be exactly what the cache holds now."""
        tokens = tuple(int(t) for t in llama.input_ids[:length])
        if length < MIN_TOKENS or llama.n_tokens != length or tokens in self.saved:
            return
        size = self.lib.llama_state_seq_get_size(llama.ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = self.lib.llama_state_seq_get_data(llama.ctx, buffer, size, 0)
        if written <= 0:
            return
        data = bytearray(buffer)[:written]
        self.saved[tokens] = Snapshot(tokens, data, hashlib.sha256(data).digest())
        while len(self.saved) > self.keep:
            self.saved.popitem(last=False)

    def restore(self, llama, snapshot: Snapshot) -> int:
        """Put `snapshot` into the KV cache; returns how many tokens it holds, or 0 (cache emptied) when the
        state is corrupt or refused, which also drops it."""
        self._clear(llama)
        ok = hashlib.sha256(snapshot.data).digest() == snapshot.digest
        if ok:
            source = (ctypes.c_uint8 * len(snapshot.data)).from_buffer(snapshot.data)
            ok = self.lib.llama_state_seq_set_data(llama.ctx, source, len(snapshot.data), 0) == len(snapshot.data)
        if not ok:
            log.warning("a saved prompt state was corrupt or refused by llama.cpp; dropped, the prompt is read again")
            self.saved.pop(snapshot.tokens, None)
            self.discarded += 1
            self._clear(llama)
            return 0
        length = len(snapshot.tokens)
        llama.input_ids[:length] = snapshot.tokens
        llama.n_tokens = length
        self.saved.move_to_end(snapshot.tokens)
        self.restored += 1
        return length

    def _clear(self, llama) -> None:
        memory = self.lib.llama_get_memory(llama.ctx)
        self.lib.llama_memory_seq_rm(memory, -1, -1, -1)
        llama.n_tokens = 0
