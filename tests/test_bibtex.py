"""BibTeX out and in (issue #18): export then import gives the same ids and versions; the spellings exporters use
for arXiv entries are read; a file that is too big, not BibTeX or without an arXiv entry is refused clearly."""

from __future__ import annotations

from datetime import date

import pytest

from copilot.errors import UserError
from copilot.features.bibtex import MAX_BIBTEX_BYTES, arxiv_ids_from_bibtex, bibtex_keys, bibtex_text
from copilot.records import Paper

PAPERS = [
    Paper("2401.01234", "Graph {RAG} & retrieval: 100% of_it", "Abstract.", ["Muhao Chen", "Dan Roth"], ["cs.CL"],
          date(2024, 1, 3), version=2),
    Paper("hep-th/9901001", "Strings", "Abstract.", ["Édouard Martin"], ["hep-th"], date(1999, 1, 4)),
    Paper("2401.09999", "Graph retrieval again", "Abstract.", ["Muhao Chen"], ["cs.IR", "cs.CL"], date(2024, 1, 9)),
]


def test_export_then_import_gives_the_same_ids_and_versions():
    text = bibtex_text(PAPERS)
    assert text.count("@misc{") == 3
    assert "archivePrefix = {arXiv}" in text and "primaryClass = {cs.CL}" in text
    assert "url = {https://arxiv.org/abs/2401.01234v2}" in text
    assert r"{Graph {RAG} \& retrieval: 100\% of\_it}" in text            # LaTeX specials escaped, braces kept
    assert "author = {Muhao Chen and Dan Roth}" in text and "year = {2024}" in text
    ids, others = arxiv_ids_from_bibtex(text)
    assert ids == ["2401.01234", "hep-th/9901001", "2401.09999"] and others == 0
    keys = bibtex_keys(PAPERS)
    assert keys["2401.01234"] == "chen2024graph" and keys["2401.09999"] == "chen2024graphb"   # a clash gets b
    assert keys["hep-th/9901001"] == "martin1999strings"


ZOTERO = r"""
@article{smith_deep_2023,
  title = {Deep things},
  journal = {arXiv preprint arXiv:2301.00001},
  year = {2023},
}
@misc{doe2022,
  title = {By DOI},
  doi = {10.48550/arXiv.2202.00002},
}
@online{lee2021,
  title = {By URL},
  url = {https://arxiv.org/pdf/2101.00003v3.pdf},
}
@article{journal2020,
  title = {A journal paper},
  journal = {Nature},
  volume = {1},
}
@misc{dup, eprint = {2301.00001v2}, eprinttype = {arxiv}}
"""


def test_the_spellings_exporters_use_are_read():
    ids, others = arxiv_ids_from_bibtex(ZOTERO.encode())
    assert ids == ["2301.00001", "2202.00002", "2101.00003v3"] and others == 1   # the duplicate counts once


@pytest.mark.parametrize("data, message", [
    (b"", "holds no entry"),
    (b"just some words, no entries", "holds no entry"),
    (b"@article{broken, title = {x\n", "no readable BibTeX entry"),
    (b"@article{a, title={Only a journal}, journal={Nature}}", "none of the 1 entries"),
    (b"@" + b"x" * (MAX_BIBTEX_BYTES + 1), "at most 2 MB"),
])
def test_bad_files_get_a_clear_message(data, message):
    with pytest.raises(UserError, match=message):
        arxiv_ids_from_bibtex(data)
