"""LaTeX shown as text (issue #38: Search snippets showed `$\\unicode{x2013}$`): one helper, `copilot.readable`,
used by every screen that shows a paper's title or abstract; the stored text is unchanged."""

from __future__ import annotations

from datetime import date

import pytest

from copilot.readable import readable
from copilot.records import Paper

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("raw", "shown"), [
    ("a 3$\\unicode{x2013}$5 times speedup", "a 3–5 times speedup"),
    ("$\\alpha$-divergence and $\\beta$-VAE", "α-divergence and β-VAE"),
    ("with $O(n^2)$ cost, not $\\mathcal{O}(\\log n)$", "with O(n²) cost, not O(log n)"),
    ("$\\sim$30\\% faster, $\\leq 10^{-3}$ error", "~30% faster, ≤ 10⁻³ error"),
    ("Schr{\\\"o}dinger bridges and Erd\\H{o}s graphs", "Schrödinger bridges and Erdős graphs"),
    ("\\emph{very} small models, $x_{i}$ and $\\beta_1$", "very small models, x_i and β₁"),
    ("costs $5 and $10 per hour", "costs $5 and $10 per hour"),          # prices are not math
    ("pages 3--5", "pages 3–5"),
    ("plain text - no change", "plain text - no change"),
    ("", ""),
])
def test_latex_reads_as_text(raw, shown):
    assert readable(raw) == shown


def _paper(title: str, abstract: str) -> Paper:
    return Paper(id="2501.00001", version=1, title=title, abstract=abstract, authors=["Ann Lee"],
                 categories=["cs.CL"], published=date(2025, 1, 2))


def test_every_screen_shows_the_readable_text_and_the_store_keeps_the_original():
    from copilot.features.feed import FeedItem
    from copilot.features.search import Hit
    from copilot.ui.common import arxiv_link
    from copilot.ui.feed import card_html as feed_card
    from copilot.ui.feed import card_of
    from copilot.ui.search import card_html as search_card

    title, abstract = "$\\alpha$-Tuning", "We gain 3$\\unicode{x2013}$5$\\times$ on $\\sim$10 tasks."
    paper = _paper(title, abstract)
    shown = [search_card(1, Hit(paper=paper, score=1.0, ranks={}), ["tasks"]),
             feed_card(card_of(FeedItem(paper, 1.0), {})), arxiv_link(paper.id, paper.title)]
    for html in shown:
        assert "$" not in html and "\\" not in html, html
        assert "α-Tuning" in html
    assert "3–5×" in shown[0] and "3–5×" in shown[1]
    assert (paper.title, paper.abstract) == (title, abstract)
