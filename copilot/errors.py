"""Errors every layer may raise, and how a failure reads on screen; the bottom layer, it imports nothing from the
project."""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)


class UserError(Exception):
    """Bad input or a fault the user can act on: the command line prints it as one line and exits 2."""


# Python's own words in an error text: an exception class, a traceback, an object's repr, attribute faults.
_PYTHON_TEXT = re.compile(r"\b[A-Z][A-Za-z0-9_]+(?:Error|Exception|Timeout|Warning)\b|Traceback|\bsuper\(|"
                          r"<[\w.]+ object at 0x|\bNoneType\b|has no attribute|File \"|\bobj\b")
_PARENTHESIS = re.compile(r"\s*\(([^()]*)\)")


def plain_reason(error: BaseException | str) -> str:
    """An error's message as a person reads it: parentheses holding Python's own text (an exception class and its
    message) are dropped; '' when what is left is still Python's text, or nothing."""
    text = " ".join(str(error).split())
    while True:         # innermost first: "(TypeError: super(type, obj): …)" holds parentheses of its own
        shorter = _PARENTHESIS.sub(lambda found: "" if _PYTHON_TEXT.search(found.group(1)) else found.group(0), text)
        if shorter == text:
            break
        text = shorter
    text = text.strip(" .;:")
    return "" if not text or _PYTHON_TEXT.search(text) else text


def readable_failure(error: BaseException | str) -> str:
    """Why something failed, for the screen and for records shown on it: the plain reason, else a pointer to the
    log (which has Python's text)."""
    return plain_reason(error) or "an unexpected error; the app's log has the details"


def failure_sentence(what_failed: str, error: BaseException | str, still_works: str = "") -> str:
    """'<What failed> (<the reason, when it is readable>). <What still works>' for the screen; the error's full
    text goes to the log, never to the page."""
    log.warning("%s: %s", what_failed, error if isinstance(error, str) else f"{type(error).__name__}: {error}")
    reason = plain_reason(error)
    if reason and reason.lower() in what_failed.lower():
        reason = ""
    sentence = what_failed.rstrip(". ") + (f" ({reason})" if reason else "") + "."
    return f"{sentence} {still_works}".strip()
