"""Paper text as a reader sees it: LaTeX in titles and abstracts (`$\\alpha$`, `$\\unicode{x2013}$`, `{\\"o}`) turned
into plain Unicode where text is shown. Stored text is never changed; every screen that shows a paper's title or
abstract passes it through `readable` (issue #38: Search snippets showed raw LaTeX)."""

from __future__ import annotations

import re
import unicodedata

GREEK = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon "
         "phi chi psi omega").split()
SYMBOLS = {name: chr(0x3B1 + i + (1 if i > 16 else 0)) for i, name in enumerate(GREEK)}   # no final sigma
SYMBOLS |= {name.capitalize(): chr(0x391 + i + (1 if i > 16 else 0)) for i, name in enumerate(GREEK)}
SYMBOLS |= {"varepsilon": "ε", "vartheta": "ϑ", "varphi": "φ", "varrho": "ϱ", "varsigma": "ς", "ell": "ℓ",
            "times": "×", "cdot": "·", "pm": "±", "mp": "∓", "div": "÷", "leq": "≤", "le": "≤", "geq": "≥", "ge": "≥",
            "neq": "≠", "ne": "≠", "approx": "≈", "sim": "~", "simeq": "≃", "equiv": "≡", "propto": "∝",
            "infty": "∞", "to": "→", "rightarrow": "→", "leftarrow": "←", "Rightarrow": "⇒", "leftrightarrow": "↔",
            "mapsto": "↦", "in": "∈", "notin": "∉", "subset": "⊂", "subseteq": "⊆", "cup": "∪", "cap": "∩",
            "forall": "∀", "exists": "∃", "sum": "∑", "prod": "∏", "int": "∫", "partial": "∂", "nabla": "∇",
            "sqrt": "√", "ldots": "…", "dots": "…", "cdots": "⋯", "circ": "∘", "degree": "°", "star": "⋆",
            "ast": "∗", "langle": "⟨", "rangle": "⟩", "lceil": "⌈", "rceil": "⌉", "lfloor": "⌊", "rfloor": "⌋",
            "log": "log", "exp": "exp", "max": "max", "min": "min", "arg": "arg", "quad": " ", "qquad": " ",
            "%": "%", "&": "&", "_": "_", "#": "#", "$": "$", "{": "{", "}": "}", ",": " ", ";": " ", "!": "",
            " ": " ", "textasciitilde": "~", "textendash": "–", "textemdash": "—"}
ACCENTS = {'"': "\u0308", "'": "\u0301", "`": "\u0300", "^": "\u0302", "~": "\u0303", "=": "\u0304", ".": "\u0307",
           "c": "\u0327", "v": "\u030C", "u": "\u0306", "H": "\u030B"}
SUPERSCRIPT = str.maketrans("0123456789+-=()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿ")
SUBSCRIPT = str.maketrans("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎")

_UNICODE = re.compile(r"\\unicode\{\s*(x[0-9a-fA-F]{1,6}|\d{1,7})\s*\}")
_ACCENT = re.compile(r"\{?\\([\"'`^~=.]|[cvuH](?=[\s{]))\s*\{?\\?([A-Za-z])\}?\}?")
_STYLE = re.compile(r"\\(?:text(?:bf|it|rm|tt|sc|sf|normal)?|emph|math(?:rm|bf|it|cal|bb|sf|tt|frak)|"
                    r"operatorname|boldsymbol|bm|mbox|hbox)\s*\{([^{}]*)\}")
_MATH = re.compile(r"\$\$(.{1,400}?)\$\$|\$(?!\s)([^$]{1,300}?)(?<![\s\\])\$|\\\((.{1,300}?)\\\)", re.S)
_COMMAND = re.compile(r"\\([A-Za-z]+|[%&_#${},;! ])")
_SCRIPT = re.compile(r"([\^_])(?:\{([^{}]*)\}|([A-Za-z0-9]))")
# a citation or cross-reference left in an abstract ("Liu~\\cite{wang2024stylemamba}"): the reader cannot follow it
_CITE = re.compile(r"~?\\(?:[cC]ite[a-zA-Z]{0,8}|ref|eqref|autoref|[cC]ref)\*?"
                   r"(?:\[[^\[\]{}]{0,80}\]){0,2}\{[^{}]{0,300}\}")
_TIE = re.compile(r"(?<=[\w.,;:)])~(?=[\w(])")      # "Fig.~3", "Liu~et al.": not "/~user" nor "~740K"


def _code_point(match: re.Match) -> str:
    value = match.group(1)
    number = int(value[1:], 16) if value.startswith("x") else int(value)
    return chr(number) if 0 < number < 0x110000 else match.group(0)


def _accented(match: re.Match) -> str:
    return unicodedata.normalize("NFC", match.group(2) + ACCENTS[match.group(1)])


def _script(match: re.Match) -> str:
    body = match.group(2) if match.group(2) is not None else match.group(3)
    table = SUPERSCRIPT if match.group(1) == "^" else SUBSCRIPT
    shifted = body.translate(table)
    if all(ch != plain for ch, plain in zip(shifted, body)):
        return shifted
    return ("^" if match.group(1) == "^" else "_") + (body if len(body) == 1 else f"({body})")


def _command(match: re.Match) -> str:
    name = match.group(1)
    return SYMBOLS.get(name, name if name.isalpha() else "")


def _math(text: str) -> str:
    text = _STYLE.sub(lambda m: m.group(1), text)
    text = _STYLE.sub(lambda m: m.group(1), text)          # one style inside another
    text = _COMMAND.sub(_command, text)
    text = _SCRIPT.sub(_script, text)
    return text.replace("{", "").replace("}", "")


def readable(text: str | None) -> str:
    """`text` with its LaTeX shown as text: math delimiters dropped, commands as Unicode (α, ≤, –), accents
    composed, style commands unwrapped, citations and cross-references dropped with their tie ("Liu~\\cite{x}" →
    "Liu"), a tie between words a space; anything else is left as written."""
    if not text or ("\\" not in text and "$" not in text and "--" not in text and "~" not in text):
        return text or ""
    text = _TIE.sub(" ", _CITE.sub("", text))
    text = _UNICODE.sub(_code_point, text)
    text = _ACCENT.sub(_accented, text)
    text = _MATH.sub(lambda m: _math(next(g for g in m.groups() if g is not None)), text)
    text = _STYLE.sub(lambda m: m.group(1), text)
    text = re.sub(r"\\(?:textendash)\b", "–", text)
    text = re.sub(r"(?<![-\w])---(?![-\w])|(?<=\w)---(?=\w)", "—", text)
    text = re.sub(r"(?<=[\w\s])--(?=[\w\s])", "–", text)
    return re.sub(r"\\([%&_#])", r"\1", text)
