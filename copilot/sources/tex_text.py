"""Short inline TeX as a reader writes it (issue #49 item 4, for the full text of issue #48): arXiv's HTML pages
carry each formula's TeX, and a quote of "lr 1\\times 10^{-4}" or "\\sim740K molecules" is noise on a page. A formula
made only of what this module knows — symbols, Greek letters, text wrappers, grouping braces, simple super- and
subscripts — becomes its characters ("1×10⁻⁴", "~740K"); anything else stays the TeX it was, so nothing is guessed.
The parser stores the result, so a quote is still a slice of the stored text. Linear in the formula's length.
"""

from __future__ import annotations

import re

_SYMBOLS = {
    "times": "\u00d7", "sim": "~", "approx": "\u2248", "simeq": "\u2243", "pm": "\u00b1", "mp": "\u2213",
    "leq": "\u2264", "le": "\u2264", "geq": "\u2265", "ge": "\u2265", "neq": "\u2260", "ne": "\u2260",
    "ll": "\u226a", "gg": "\u226b", "cdot": "\u00b7", "to": "\u2192", "rightarrow": "\u2192",
    "leftarrow": "\u2190", "Rightarrow": "\u21d2", "leftrightarrow": "\u2194", "infty": "\u221e",
    "ldots": "\u2026", "dots": "\u2026", "cdots": "\u22ef", "in": "\u2208", "notin": "\u2209", "mid": "|",
    "propto": "\u221d", "degree": "\u00b0", "circ": "\u00b0", "log": "log", "ln": "ln", "exp": "exp", "max": "max",
    "min": "min", "arg": "arg", "sum": "\u2211", "prod": "\u220f", "partial": "\u2202", "nabla": "\u2207",
    "downarrow": "\u2193", "uparrow": "\u2191", "lvert": "|", "rvert": "|", "vert": "|", "quad": " ",
    "qquad": " ", "checkmark": "\u2713", "dagger": "\u2020", "star": "\u22c6", "prime": "\u2032",
}
_GREEK = ("alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi rho sigma "
          "tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega").split()
_GREEK_CHARS = "αβγδεεζηθϑικλμνξπρστυφφχψωΓΔΘΛΞΠΣΦΨΩ"
_SYMBOLS.update(zip(_GREEK, _GREEK_CHARS))
_ESCAPED = {"%": "%", "&": "&", "#": "#", "_": "_", "$": "$", "{": "{", "}": "}", ",": " ", ";": " ", ":": " ",
            "!": "", " ": " "}
_WRAPPERS = {"text", "textrm", "mathrm", "textbf", "mathbf", "textit", "mathit", "mathsf", "textsf", "texttt",
             "mathtt", "operatorname", "boldsymbol", "bm", "emph", "textsc", "textnormal", "mathnormal"}
_SUPER = str.maketrans("0123456789+-=()ni", "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
                                            "\u207a\u207b\u207c\u207d\u207e\u207f\u2071")
_SUB = str.maketrans("0123456789+-=()", "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089"
                                      "\u208a\u208b\u208c\u208d\u208e")
_SUPER_OK = set("0123456789+-=()ni")
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
                table, allowed = (_SUPER, _SUPER_OK) if token == "^" else (_SUB, _SUB_OK)
                text, at = _script(tokens, at, table, allowed)
                out.append(text)
            elif len(token) == 2 and token[0] == "\\" and not token[1].isalpha():
                if token[1] not in _ESCAPED:
                    raise _Unknown
                out.append(_ESCAPED[token[1]])          # "\%" is "%", "\," a space
            elif token.startswith("\\"):
                name = token[1:].rstrip(" ")
                if name in _WRAPPERS:
                    continue                  # \text{RHAE} is RHAE: its braces are dropped as grouping
                if name not in _SYMBOLS:
                    raise _Unknown
                out.append(_SYMBOLS[name])
            else:
                out.append(token)
    except _Unknown:
        return tex
    return " ".join("".join(out).split())
