"""Short inline TeX as a reader writes it (issue #49 item 4, the full text's formulas): known parts become their
characters, a formula with anything unknown stays its TeX, and the work is linear."""

from __future__ import annotations

import time

import pytest

from copilot.tex_text import readable_math, readable_tex

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("tex, shown", [
    (r"1\times 10^{-4}", "1\u00d710\u207b\u2074"),
    (r"\sim740K", "~740K"),
    (r"V{=}1024", "V=1024"),
    (r"\approx40\%", "\u224840%"),
    (r"R^{2}", "R\u00b2"),
    (r"\log_{10}(N)", "log\u2081\u2080(N)"),
    (r"\tau\in\{0.3,0.5\}", "\u03c4\u2208{0.3,0.5}"),
    (r"\text{RHAE}=0.5290", "RHAE=0.5290"),
    (r"n\geq 8", "n\u22658"),
])
def test_known_parts_become_characters(tex, shown):
    assert readable_tex(tex) == shown


@pytest.mark.parametrize("tex", [r"\frac{a}{b}", r"x^{ab}", r"\mathcal{O}(n)", r"a^", r"\unknown+1", r"x_{\alpha}"])
def test_anything_unknown_leaves_the_tex_as_it_was(tex):
    assert readable_tex(tex) == tex


def test_linear_on_hostile_input():
    for tex in ("^{" * 20_000, "\\" * 40_000, "{" * 40_000 + "x", "^" * 40_000):
        started = time.perf_counter()
        readable_tex(tex)
        assert time.perf_counter() - started < 1.0


def test_an_abstracts_formulas_are_shown_in_characters_where_known():
    assert readable_math("costs $1,405$ GPU hours at $\\sim$3x, not $\\frac{a}{b}$") == \
        "costs 1,405 GPU hours at ~3x, not $\\frac{a}{b}$"
    assert readable_math("a price of $5 and $6") == "a price of $5 and $6"
