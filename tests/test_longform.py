"""RAT for deep answers and related-work drafts (features/longform.py) with a scripted model and a scripted search:
the causal loop's order and inputs, numbered citations checked, and the faults that must never lose text."""

from __future__ import annotations

import pytest

from copilot.features.bibtex import bibtex_keys, bibtex_text
from copilot.features.longform import LongformOptions, Numbering, stream_longform
from copilot.features.related_work import as_latex, with_authors
from copilot.records import Evidence, Paper
from copilot.store.db import Database
from tests.doubles import scripted_llm

DRAFT = ("Attention layers read the whole input at once.\n\n"
         "Sparse attention keeps only some of the pairs.\n\n"
         "Linear attention replaces the softmax with kernels.")
RAW = ["Attention layers read", "Sparse attention keeps", "Linear attention replaces"]
WORDS = {1: "dense", 2: "sparse", 3: "linear", 4: "kernel", 5: "local"}
OPTS = LongformOptions(steps=3, retrieve_k=2, min_score=0.3)


def item(item_id: str, score: float = 0.8, text: str = "") -> Evidence:
    return Evidence(item_id, "paper", f"Paper {item_id}", text or f"Findings of paper {item_id} on attention.", score)


@pytest.fixture
def db(tmp_path):
    return Database(tmp_path / "copilot.db")


def small_model(db, replies):
    """The scripted model on the small local model's path: grammars, and the draft itself as each step's query."""
    llm, backend = scripted_llm(db, replies)
    backend.obeys_grammar = True
    return llm, backend


def run(llm, search, opts=OPTS):
    return list(stream_longform(llm, "Answer in 3 steps: how does attention scale?", search, opts))


def revised(*labels: int) -> str:
    """A plausible revision of the first len(labels) steps, step i citing [labels[i]] (0: no citation)."""
    return "\n\n".join(f"Claim {i} revised keeps its point about attention cost."
                        + (f" Source [{label}] shows that {WORDS[label]} attention grows with the input."
                           if label else "")
                        for i, label in enumerate(labels, start=1))


def test_each_query_holds_the_revised_earlier_steps_and_the_raw_step_never_a_later_one(db):
    queries: list[str] = []
    pool = iter([[item("a"), item("b")], [item("a"), item("c"), item("d")], [item("e")]])

    def search(query):
        queries.append(query)
        return next(pool)

    llm, backend = small_model(db, [DRAFT, revised(1), revised(1, 3), revised(1, 3, 5)])
    runs = run(llm, search)
    final = runs[-1]
    assert len(backend.calls) == 4        # draft + one revision per step; no query call on a small model
    assert backend.calls[0].grammar and "Source" not in backend.calls[0].grammar       # zero-shot draft: no cite
    assert "<source id" not in backend.calls[0].text                                  # no retrieved abstract
    for i, query in enumerate(queries):
        assert RAW[i] in query and query.startswith(RAW[i])
        assert not [later for later in RAW[i + 1:] if later in query], f"step {i + 1} saw a later step"
        assert not [earlier for earlier in RAW[:i] if earlier in query], f"step {i + 1} saw an unrevised step"
        assert all(f"Claim {j} revised" in query for j in range(1, i + 1))
    # each revision prompt holds the whole draft so far and only its own step's sources, under run-wide numbers
    assert '<source id="1">' in backend.calls[1].text and '<source id="3">' in backend.calls[2].text
    assert '<source id="1">' not in backend.calls[2].text
    # an item an earlier step retrieved is not retrieved again: step 2 got c and d, numbered 3 and 4
    assert [s.retrieved_ids for s in final.rat.steps] == [["a", "b"], ["c", "d"], ["e"]]
    # the last paragraph of a revision must cite what its own step retrieved; an earlier cited step keeps a citation
    assert '("3" | "4")' in backend.calls[2].grammar
    assert 'step1 ::= sentence " Source [" ("1")' in backend.calls[2].grammar
    assert final.done and [c.id for c in final.cited] == ["a", "c", "e"]
    assert final.as_dict()["trace"][1]["retrieved"][0] == {"label": 3, "id": "c", "kind": "paper",
                                                           "title": "Paper c", "url": "https://arxiv.org/abs/c",
                                                           "score": 0.8}
    assert final.llm_calls == 4


def test_a_step_with_nothing_relevant_stays_unrevised_without_a_model_call(db):
    results = iter([[item("a")], [item("far", score=0.1)], [item("b")]])
    llm, backend = small_model(db, [DRAFT, revised(1), revised(1, 0, 2)])
    final = run(llm, lambda q: next(results), LongformOptions(steps=3, retrieve_k=2, min_score=0.3))[-1]
    step = final.rat.steps[1]
    assert step.status == "nothing retrieved" and step.retrieved == [] and step.after == step.before
    assert "nothing relevant was retrieved" in step.note
    assert len(backend.calls) == 3        # the draft, then a revision for steps 1 and 3 only
    assert final.numbering.items[1].id == "b"     # the far item got no number


@pytest.mark.parametrize("reply, why", [
    ("", "came back empty"),
    ("Short.", "shorter than half"),
    ("The cost grows fast and the cost grows fast and the cost grows fast. " * 4, "loop"),
])
def test_a_bad_revision_keeps_the_draft_so_far(db, reply, why):
    llm, _ = small_model(db, [DRAFT, reply])
    final = run(llm, lambda q: [item("a")], LongformOptions(steps=1, retrieve_k=1))[-1]
    step = final.rat.steps[0]
    assert step.kept and step.status == "kept" and why in step.note
    assert final.text == ("Attention layers read the whole input at once. Sparse attention keeps only some of the "
                          "pairs. Linear attention replaces the softmax with kernels.")   # one step: the whole draft


def test_invented_citations_are_removed_and_real_ones_kept(db):
    reply = "Attention layers read the whole input at once [7]. Source [1] shows that attention cost is quadratic."
    llm, _ = small_model(db, [DRAFT, reply])
    final = run(llm, lambda q: [item("a", text="Attention cost is quadratic in the input length.")],
                LongformOptions(steps=1, retrieve_k=1))[-1]
    assert "[7]" not in final.text and "[1]" in final.text
    assert [c.id for c in final.cited] == ["a"]


def test_a_revision_cut_by_the_token_limit_keeps_the_later_steps(db):
    cut = "Step one revised with care and detail.\n\nStep two revised but cut in the midd"
    two_steps = "Attention layers read the whole input at once.\n\nSparse attention keeps only some of the pairs."
    llm, _ = small_model(db, [two_steps, "Step one revised with care and detail. Source [1] shows that it holds.",
                               cut])
    opts = LongformOptions(steps=2, retrieve_k=1, revise_tokens=14)
    final = run(llm, lambda q: [item(q[:3])], opts)[-1]
    step = final.rat.steps[1]
    assert "token limit after 1 of 2" in step.note
    assert step.after.endswith("Sparse attention keeps only some of the pairs.")      # the later step is kept
    assert "cut in the midd" not in final.text


def test_closing_the_stream_stops_the_work(db):
    llm, backend = small_model(db, [DRAFT, revised(1), revised(1, 2), revised(1, 2, 3)])
    stream = stream_longform(llm, "task", lambda q: [item(q[:5])], OPTS)
    for live in stream:
        if live.rat and live.rat.steps and live.rat.steps[0].status == "revised":
            break
    stream.close()
    assert len(backend.calls) == 2 and not live.done      # the draft and step 1's revision, nothing after


def test_numbering_is_stable_across_the_run():
    numbering = Numbering()
    numbering.add([item("a"), item("b")])
    numbering.add([item("b"), item("c")])
    assert [numbering.label(i) for i in (item("c"), item("a"))] == ["3", "1"] and numbering.labels == ["1", "2", "3"]


def paper(pid: str, authors: list[str], title: str) -> Paper:
    from datetime import date

    return Paper(pid, title, "abstract", authors, ["cs.CL"], date(2023, 5, 1))


def test_authors_bibtex_and_latex():
    papers = {"2301.00001": paper("2301.00001", ["Hiroyuki Deguchi", "Taro Watanabe"], "Subset Retrieval for MT"),
              "2301.00002": paper("2301.00002", ["Ann Lee"], "The {Best} Model & more")}
    items = [item("2301.00001"), item("2301.00002")]
    text = "Claims. Source [1] proposes a subset search. Source [2] shows that it works."
    shown = with_authors(text, items, papers)
    assert shown == "Claims. Deguchi and Watanabe [1] propose a subset search. Lee [2] shows that it works."
    keys = bibtex_keys(list(papers.values()))
    assert keys == {"2301.00001": "deguchi2023subset", "2301.00002": "lee2023best"}
    entry = bibtex_text([papers["2301.00002"]], keys)
    assert entry.startswith("@misc{lee2023best,") and r"{The {Best} Model \& more}" in entry
    assert "eprint = {2301.00002}" in entry and "url = {https://arxiv.org/abs/2301.00002v1}" in entry
    assert as_latex(shown, items, keys) == ("Claims. Deguchi and Watanabe~\\cite{deguchi2023subset} propose a subset "
                                            "search. Lee~\\cite{lee2023best} shows that it works.")
    assert "eprint" not in bibtex_text([paper("rw10-c03", ["A B"], "T")])    # not an arXiv paper
    nameless = {"2301.00001": paper("2301.00001", [], "Untitled")}
    assert with_authors("Source [1] proposes x.", items, nameless) == "Earlier work [1] proposes x."
    assert with_authors("Source [1] reports less.", items, papers) == "Deguchi and Watanabe [1] reports less."
