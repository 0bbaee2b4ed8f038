"""Secret masking: a key never shows in a log, an error message or a streamed answer, in any form an endpoint is
seen to echo it (as written, in any case, reversed, spaced out, base64-, hex- or percent-encoded)."""

from __future__ import annotations

import base64
import functools
import html
import re
import unicodedata

SECRET_MASK = "***"
# What a careless echo puts between a secret's characters: runs of white space (a page shows any run as one space,
# issue #34), punctuation, escaped line breaks (at most three of them)
_GAP = r"(?:\s++|\\[nrt]|[^0-9A-Za-z\s]){0,3}"
RUN = 12          # a run of this many characters of a secret, as written, is masked (a key split in parts, #34)


def mask_secret(text: str, secret: str | None) -> str:
    """`text` with every form of `secret` an error body is seen to echo replaced by SECRET_MASK: as written, in any
    case, reversed, with spaces or punctuation between its characters, base64-encoded (standard or URL-safe, at any
    alignment inside a longer encoded text), hex- or percent-encoded. A secret under 8 characters is masked only as
    written (its fuzzy forms would match ordinary text)."""
    if not text or not secret:
        return text
    text = _mask_forms(text, secret)
    if len(secret) < 8:
        return text
    view = page_view(text)        # what a page shows of it: HTML entities decoded, fullwidth letters as ASCII
    if view != text and _mask_forms(view, secret) != view:
        return _mask_forms(view, secret)
    return text


def page_view(text: str) -> str:
    """`text` as a reader sees it on a page: HTML entities decoded, compatibility forms (fullwidth letters) folded."""
    return unicodedata.normalize("NFKC", html.unescape(text))


def _mask_forms(text: str, secret: str) -> str:
    text = text.replace(secret, SECRET_MASK)
    if len(secret) < 8:
        return text
    for pattern in _secret_patterns(secret):
        text = pattern.sub(SECRET_MASK, text)
    return _mask_runs(text, secret)


def _mask_runs(text: str, secret: str) -> str:
    """Every run of RUN or more characters that also runs in `secret` (a key echoed in parts) → SECRET_MASK."""
    if len(secret) < 2 * RUN:
        return text
    windows = {secret[i:i + RUN]: i for i in range(len(secret) - RUN + 1)}
    out, at, i = [], 0, 0
    while i <= len(text) - RUN:
        start = windows.get(text[i:i + RUN])
        if start is None:
            i += 1
            continue
        end = i + RUN
        while end < len(text) and start + (end - i) < len(secret) and text[end] == secret[start + end - i]:
            end += 1
        out += [text[at:i], SECRET_MASK]
        at = i = end
    return "".join(out) + text[at:]


class StreamMask:
    """mask_secret for text that arrives in pieces (a streamed answer): a key split across pieces is caught by
    holding back only a tail that could be the beginning of one of its forms, until the next piece settles it; other
    text passes at once. Feed pieces in order; `flush` at the end. The joined output equals mask_secret of the whole
    text."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        # longer than any form (HTML entities, percent-encoded, spelled with gaps)
        self.hold = 8 * len(secret) + 12
        self.text = ""
        self.sent = 0

    def feed(self, piece: str) -> str:
        self.text += piece
        text, n = self.text, len(self.text)
        cut = next((p for p in range(max(self.sent, n - self.hold), n) if _may_begin(text[p:], self.secret)), n)
        for start, end in _secret_spans(text[self.sent:], self.secret):
            if start < cut - self.sent < end:        # never cut through a whole form: it is masked with its text
                cut = self.sent + start
                break
        return self._send(cut) if cut > self.sent else ""

    def flush(self) -> str:
        return self._send(len(self.text))

    def _send(self, cut: int) -> str:
        shown, self.sent = mask_secret(self.text[self.sent:cut], self.secret), cut
        return shown


def _may_begin(tail: str, secret: str) -> bool:
    """Could `tail` (the end of the text so far) be the start of a form of `secret` that is not complete yet?"""
    spelled, literal = _secret_forms(secret)
    if "&" in tail or not tail.isascii():
        tail = page_view(tail)
    tail = re.sub(r"\s+", " ", tail)
    lowered = tail.lower()
    if len(secret) >= 2 * RUN and len(tail) < len(secret) and tail in secret:     # a part of it may be coming
        return True
    if any(len(tail) < len(form) and form.startswith(lowered) for form in literal[0]):
        return True
    if any(len(tail) < len(form) and form.startswith(tail) for form in literal[1]):
        return True
    return any(_spelled_prefix(lowered, form) for form in spelled)


def _spelled_prefix(tail: str, form: str) -> bool:
    """`tail` is `form` (lower case) begun but not finished, with at most three gap characters between letters."""
    i = j = gap = 0
    while i < len(tail):
        if j < len(form) and tail[i] == form[j]:
            i, j, gap = i + 1, j + 1, 0
        elif j > 0 and not tail[i].isalnum() and gap < 3:
            i, gap = i + 1, gap + 1
        else:
            return False
    return 0 < j < len(form)


@functools.lru_cache(maxsize=8)
def _secret_forms(secret: str) -> tuple[tuple[str, ...], tuple[tuple[str, ...], tuple[str, ...]]]:
    """(forms spelled with gaps, lower case; (literal forms compared in any case, literal forms compared as
    written)) — the forms mask_secret replaces."""
    if len(secret) < 8:
        return (), ((), (secret,))
    raw = secret.encode("utf-8")
    spelled = (secret.lower(), secret[::-1].lower())
    any_case = (raw.hex(), "".join(f"%{b:02x}" for b in raw))
    return spelled, (any_case, (secret, *_base64_forms(raw)))


def _base64_forms(raw: bytes) -> tuple[str, ...]:
    based = set()
    for offset in range(3):                # the key's bytes may start at any of the three places in a base64 group
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            full = encode(bytes(offset) + raw).decode("ascii")
            # only the characters made of the key's bits alone, not of a neighbour's or the padding's
            based.add(full[-(-8 * offset // 6):8 * (offset + len(raw)) // 6])
    return tuple(sorted(based))


def _secret_spans(text: str, secret: str) -> list[tuple[int, int]]:
    """Where the forms of `secret` that mask_secret replaces occur in `text`."""
    spans = []
    start = text.find(secret)
    while start >= 0:
        spans.append((start, start + len(secret)))
        start = text.find(secret, start + 1)
    if len(secret) >= 8:
        spans += [m.span() for pattern in _secret_patterns(secret) for m in pattern.finditer(text)]
    return sorted(spans)


@functools.lru_cache(maxsize=8)
def _secret_patterns(secret: str) -> tuple[re.Pattern[str], ...]:
    raw = secret.encode("utf-8")
    spelled = "|".join(_GAP.join(re.escape(c) for c in form) for form in (secret, secret[::-1]))
    hexed = "|".join(re.escape(form) for form in (raw.hex(), "".join(f"%{b:02x}" for b in raw)))
    return (re.compile(spelled, re.IGNORECASE), re.compile(hexed, re.IGNORECASE),
            re.compile("|".join(re.escape(form) for form in _base64_forms(raw))))


# glibc's mallopt parameter that fills memory on free (with the byte) and on malloc (with its complement)
_M_PERTURB = -6
_FREED_BYTE = 0x5A


def scrub_freed_memory() -> bool:
    """Make this process's C allocator overwrite memory when it is freed, so a key once held in a request buffer
    cannot be handed, still readable, to a later allocation that is written to disk whole (Chroma's HNSW files write
    their free capacity from uninitialised `malloc` memory: issue #41). Set in child processes too, through glibc's
    MALLOC_PERTURB_. Returns whether it took effect (glibc only; elsewhere nothing changes). Memory freed before this
    call is not scrubbed: it is called when the `copilot` package is first imported, before any setting is read."""
    import ctypes
    import ctypes.util
    import os

    os.environ.setdefault("MALLOC_PERTURB_", str(_FREED_BYTE))
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_PERTURB, _FREED_BYTE))
