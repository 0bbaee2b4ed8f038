"""A question about chosen papers (issue #57), unit tier: which ids a scope holds, and which a typed question offers."""

from __future__ import annotations

import pytest

from copilot.features.scope import MAX_PAPERS, ScopeError, ids_in, scope_ids


def test_a_scope_is_arxiv_ids_or_links_each_once_in_the_order_chosen():
    given = ["2601.22777", "https://arxiv.org/abs/2503.15484v2", "arXiv:2601.22777v1", " ", "hep-th/9901001"]
    assert scope_ids(given) == ["2601.22777", "2503.15484", "hep-th/9901001"]
    assert scope_ids(None) == [] and scope_ids([]) == []


def test_a_scope_refuses_what_is_not_an_id_and_more_than_five_papers():
    with pytest.raises(ScopeError, match="Not an arXiv id"):
        scope_ids(["2601.22777", "attention is all you need"])
    with pytest.raises(ScopeError, match=f"at most {MAX_PAPERS} papers"):
        scope_ids([f"2601.0000{n}" for n in range(MAX_PAPERS + 1)])
    assert len(scope_ids([f"2601.0000{n}" for n in range(MAX_PAPERS)])) == MAX_PAPERS


def test_a_typed_question_offers_the_ids_and_links_it_holds():
    text = ("Compare https://arxiv.org/pdf/2601.22777v1 with 2503.15484, and again 2601.22777: which glossary is "
            "larger than 1.5 times 2,000 terms?")
    assert ids_in(text) == ["2601.22777", "2503.15484"]
    assert ids_in("How large is the glossary?") == [] and ids_in(None) == []
