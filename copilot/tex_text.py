"""Short TeX as a reader writes it (issue #49 item 4): a quote of "lr 1\\times 10^{-4}" or "$1,405$" is noise on a
page. A formula made only of what this module knows — copilot.readable's symbols, text wrappers, grouping braces,
simple super- and subscripts — becomes its characters ("1×10⁻⁴", "~740K", "1,405"); anything else stays the TeX it
was, so nothing is guessed (copilot.readable, for titles and snippets, makes a best effort instead). The full-text
parser stores a body's formulas so; a quote of an abstract shows its `$…$` so (`readable_math`). Linear.
"""

from __future__ import annotations

import re

from copilot.readable import SUBSCRIPT, SUPERSCRIPT, SYMBOLS

_WRAPPERS = {"text", "textrm", "mathrm", "textbf", "mathbf", "textit", "mathit", "mathsf", "textsf", "texttt",
             "mathtt", "operatorname", "boldsymbol", "bm", "emph", "textsc", "textnormal", "mathnormal"}
_SUPER_OK = set("0123456789+-=()n")
_SUB_OK = set("0123456789+-=()")
_TOKEN = re.compile(r"\\[A-Za-z]+ ?|\\.|[{}^_]|[^\\{}^_]+")


class _Unknown(Exception):
    pass


def _script(tokens: list[str], at: int, table, allowed: set[str]) -> tuple[str, int]:
    """The super- or subscript that starts at tokens[at] (one character, or a braced group of plain text) in its
    Unicode form; raises _Unknown when it cannot be written so."""
    if at >= len(tokens):
        raise _Unknown
    token = tokens[at]
    if token == "{":
        end = at + 1
        while end < len(tokens) and tokens[end] != "}":
            end += 1
        text = "".join(tokens[at + 1:end])
        if end >= len(tokens) or not text or not set(text) <= allowed:
            raise _Unknown
        return text.translate(table), end + 1
    if token[:1] == "\\" or token[0] not in allowed:
        raise _Unknown
    return token[0].translate(table) + token[1:], at + 1


def readable_tex(tex: str) -> str:
    """The formula in characters, or `tex` unchanged when it holds anything this module does not know."""
    tokens = _TOKEN.findall(tex)
    out: list[str] = []
    at = 0
    try:
        while at < len(tokens):
            token = tokens[at]
            at += 1
            if token in ("{", "}"):
                continue                      # grouping: "b{=}1" is "b=1"
            if token in ("^", "_"):
                table, allowed = (SUPERSCRIPT, _SUPER_OK) if token == "^" else (SUBSCRIPT, _SUB_OK)
                text, at = _script(tokens, at, table, allowed)
                out.append(text)
            elif token.startswith("\\"):
                name = token[1:] if len(token) == 2 else token[1:].rstrip(" ")    # "\%", "\ " or "\times"
                if name in _WRAPPERS:
                    continue                  # \text{RHAE} is RHAE: its braces are dropped as grouping
                if name not in SYMBOLS:
                    raise _Unknown
                out.append(SYMBOLS[name])
            else:
                out.append(token)
    except _Unknown:
        return tex
    return " ".join("".join(out).split())


_MATH = re.compile(r"\$(?!\s)([^$\n]{1,120}?)(?<![\s\\])\$")


def readable_math(text: str) -> str:
    """`text` with each short `$…$` formula in characters where `readable_tex` knows all of it, else as it was."""
    if "$" not in text:
        return text

    def shown(match: re.Match) -> str:
        inner = readable_tex(match.group(1))
        return match.group(0) if inner == match.group(1) and "\\" in inner else inner

    return _MATH.sub(shown, text)
