"""The regex sweep of `bench --parts hostile`: every regular expression in the product that can see a question or a
paper's text, run on adversarial texts of two lengths, so that a pattern whose time grows faster than its input (a
nested quantifier such as `(?:\\w+ ?){1,3}`, a bounded `.{0,80}` between alternations) shows up by measurement,
not by reading.

The patterns are found in the source with `ast` (every `re.compile`/`re.sub`/`re.search`/… call whose pattern is a
literal, and every module-level compiled pattern, f-strings included, read from the imported module), with their
file and line. Each runs with `finditer` (every start position, the worst case of `search`, `match` and `sub`) over
each adversarial text at SMALL and LARGE characters; the growth between the two gives the exponent.
"""

from __future__ import annotations

import ast
import importlib
import math
import re
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]          # copilot/
SKIPPED = ("eval", "cli")                          # offline tools: no user or paper text reaches them at serve time
SMALL, LARGE = 300, 1_200
FLAG_MS = 2.0            # a pattern is reported when it takes this long at LARGE characters …
FLAG_EXPONENT = 1.5      # … and its time grows faster than length ** FLAG_EXPONENT
LIMIT_CHARS = 10_000     # the longest text a pattern sees in the product (an abstract at its limit)

# Units repeated to length: long words, spaces, abbreviations and initials, brackets, markup, math, ids, labels,
# quote marks, and the openings the product's patterns look for (definitions, contributions, sources).
UNITS = ("x", "a ", "A. ", "e.g. J. R. R. Smith et al. i.e. Fig. 3 vs. ", " ", "\t", "\n", "a\n", "[", "[1, ", "(",
         "<a ", "<", "$a ", "\\(", "- ", "-", "1.", "1", "arxiv.org/abs/", "2503.14421 ", "**", "#", '"', "\u201c",
         "[1] ", "Source 1 ", "we ", "our work ", "x.", "x-", "a, ", "; ", ". ", ".", "\u00b7 ", "a: ", "[a]", "T1 ")
OPENINGS = ("", "what is ", "define ", "what does ", "we ", "[1] ", "## ", "> ", "1. ")


def adversarial(unit: str, opening: str, length: int) -> str:
    body = (unit * (length // len(unit) + 1))[:max(0, length - len(opening))]
    return opening + body


def _call_pattern(node: ast.Call) -> bool:
    func = node.func
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "re"
            and func.attr in ("compile", "sub", "subn", "search", "match", "fullmatch", "findall", "finditer",
                              "split"))


_FLAGS_AT = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3,
             "sub": 4, "subn": 4}      # the position of the flags argument


def _flags(node: ast.Call) -> int:
    """The flags of a call when they are written as `re.X | re.Y` (else none)."""
    candidates = [kw.value for kw in node.keywords if kw.arg == "flags"]
    position = _FLAGS_AT[node.func.attr]                               # type: ignore[attr-defined]
    if len(node.args) > position:
        candidates.append(node.args[position])
    flags = 0
    for candidate in candidates:
        for name in re.findall(r"re\.([A-Z]+)", ast.unparse(candidate)):
            flags |= getattr(re, name, 0)
    return flags


def find_patterns() -> list[dict]:
    """Every pattern of the product: {where: 'copilot/x.py:12', name, pattern (compiled)}."""
    found: dict[tuple[str, int], dict] = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT.parent)
        if relative.parts[1] in SKIPPED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_name = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
        named = {node.value.lineno: node.targets[0].id for node in tree.body
                 if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                 and isinstance(node.value, ast.Call)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _call_pattern(node) and node.args):
                continue
            where = f"{relative}:{node.lineno}"
            compiled = None
            if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, (str, bytes)):
                try:
                    compiled = re.compile(node.args[0].value, _flags(node))
                except re.error:
                    continue
            elif node.lineno in named:               # a module-level pattern built from parts: read it from the module
                compiled = getattr(importlib.import_module(module_name), named[node.lineno], None)
            if isinstance(compiled, re.Pattern):
                found[(str(relative), node.lineno)] = {"where": where, "name": named.get(node.lineno, ""),
                                                       "pattern": compiled}
    return list(found.values())


def _time(pattern: re.Pattern, text: str) -> float:
    subject: str | bytes = text.encode("utf-8") if isinstance(pattern.pattern, bytes) else text
    started = time.perf_counter()
    for _ in pattern.finditer(subject):        # type: ignore[arg-type]
        pass
    return time.perf_counter() - started


def sweep_one(pattern: re.Pattern) -> dict:
    """The pattern's worst text: its time at LARGE characters, its growth exponent, and the time extrapolated to
    LIMIT_CHARS characters."""
    worst: dict[str, Any] = {"ms": 0.0, "exponent": 1.0, "text": ""}
    for opening in OPENINGS:
        for unit in UNITS:
            large = _time(pattern, adversarial(unit, opening, LARGE))
            if large * 1000 < worst["ms"] or large * 1000 < FLAG_MS / 4:
                continue
            small = min(_time(pattern, adversarial(unit, opening, SMALL)) for _ in range(3))
            large = min(large, *(_time(pattern, adversarial(unit, opening, LARGE)) for _ in range(2)))
            if large * 1000 < worst["ms"] or large * 1000 < FLAG_MS / 4:
                continue
            exponent = math.log(max(large, 1e-7) / max(small, 1e-7)) / math.log(LARGE / SMALL)
            worst = {"ms": large * 1000, "exponent": exponent, "text": f"{opening!r} + {unit!r} × n"}
    worst["ms_at_limit"] = worst["ms"] * (LIMIT_CHARS / LARGE) ** max(worst["exponent"], 1.0)
    worst["flagged"] = worst["ms"] >= FLAG_MS and worst["exponent"] >= FLAG_EXPONENT
    return worst
