"""Related rankings without a model: weighted RRF, score fusion, BM25, which query each list searches with, and
the evaluation's rule for the default ranking (issue #22)."""

from __future__ import annotations

import math
import typing

import pytest

from copilot.config import Settings
from copilot.eval import csfcube
from copilot.methods import prism
from copilot.methods.fusion import reciprocal_rank_fusion, score_fusion
from copilot.model_profile import choose_profile, generation_plan
from copilot.store.lexical import Bm25

PAPER = prism.QueryPaper("Sparse Routing", "We route tokens to experts. We evaluate on WMT.", id="2501.00001")


# --- weighted RRF
def test_weighted_rrf_exact_scores():
    fused = reciprocal_rank_fusion({"abstract": ["A", "B"], "lexical": ["B", "C"]}, k=60,
                                   weights={"abstract": 2.0, "lexical": 0.5})
    scores = {item: score for item, score, _ in fused}
    assert scores["A"] == pytest.approx(2 / 61, abs=1e-15)
    assert scores["B"] == pytest.approx(2 / 62 + 0.5 / 61, abs=1e-15)
    assert scores["C"] == pytest.approx(0.5 / 62, abs=1e-15)
    assert [item for item, _, _ in fused] == ["B", "A", "C"]


def test_weight_zero_keeps_ranks_but_adds_nothing_and_unnamed_lists_weigh_one():
    fused = reciprocal_rank_fusion({"x": ["A"], "y": ["B"], "z": ["C"]}, weights={"x": 0.0, "y": 3.0})
    assert [(item, round(score, 9), ranks) for item, score, ranks in fused] == [
        ("B", round(3 / 61, 9), {"y": 1}), ("C", round(1 / 61, 9), {"z": 1}), ("A", 0.0, {"x": 1})]


def test_rrf_ties_keep_first_seen_order_and_a_missing_list_is_simply_absent():
    fused = reciprocal_rank_fusion({"a": ["P", "Q"], "b": ["Q", "P"], "empty": []})
    assert [item for item, _, _ in fused] == ["P", "Q"]
    assert fused[0][1] == fused[1][1]


# --- score fusion
def test_score_fusion_standardises_each_list():
    fused = dict(score_fusion({"dense": {"A": 0.9, "B": 0.5, "C": 0.1}, "words": {"A": 0.0, "B": 10.0, "C": 5.0}}))
    # dense z-scores: A +1.2247, B 0, C -1.2247; words: A -1.2247, B +1.2247, C 0
    assert fused == pytest.approx({"A": 0.0, "B": 1.2247449, "C": -1.2247449}, abs=1e-6)


def test_score_fusion_weights_constant_lists_and_missing_items():
    fused = score_fusion({"dense": {"A": 1.0, "B": 0.0}, "flat": {"A": 2.0, "B": 2.0}, "words": {"B": 4.0, "C": 2.0}},
                         weights={"dense": 2.0})
    scores = dict(fused)
    # dense: A +1, B -1 (×2), C absent → floor -1 (×2); flat adds nothing; words: B +1, C -1, A absent → -1
    assert scores == pytest.approx({"A": 2.0 - 1.0, "B": -2.0 + 1.0, "C": -2.0 - 1.0})
    assert [item for item, _ in fused] == ["A", "B", "C"]


# --- BM25
def test_bm25_ranks_by_shared_words_stemmed_and_leaves_out_non_matching():
    index = Bm25(["a", "b", "c"], ["Graph neural networks for molecules", "Translating speech with transformers",
                                    "Statistical machine translation of speech"])
    # "Translating" and "translation" meet at "translat"; both share both stems, the shorter one scores higher
    assert [item for item, _ in index.search("speech translation", 5)] == ["b", "c"]
    assert [item for item, _ in index.search("speech translation", 5, exclude=["b"])] == ["c"]
    assert index.search("the of and", 5) == [] and index.search("", 5) == []
    assert index.rank("molecules", ["c", "a", "b"]) == ["a", "c", "b"]                # ties keep given order
    assert list(index.scores_of("molecules", ["b", "a"]) > 0) == [False, True]


def test_empty_bm25_index_finds_nothing():
    assert Bm25([]).search("anything", 3) == []


# --- which text each list searches with
def test_ranking_queries_per_method():
    llm = {"method": "Experts route tokens.", "experiments": "WMT results."}
    extractive = {"research_question": "Sparse Routing. RQ sentence.", "method": "Sparse Routing. We route tokens."}
    published = prism.ranking_queries(prism.RANKINGS["prism"], PAPER, llm, extractive)
    assert published == {"method": llm["method"], "experiments": llm["experiments"], "abstract": PAPER.abstract_query}
    hybrid = prism.ranking_queries(prism.RANKINGS["prism-hybrid"], PAPER, llm, extractive)
    assert hybrid == {"research_question": extractive["research_question"], "method": llm["method"],
                      "experiments": llm["experiments"], "abstract": PAPER.abstract_query, "title": "Sparse Routing"}
    only_words = prism.ranking_queries(prism.RANKINGS["prism-extractive"], PAPER, llm, extractive)
    assert only_words == {**extractive, "abstract": PAPER.abstract_query, "title": "Sparse Routing"}
    untitled = prism.QueryPaper("", "Only an abstract here.")
    assert prism.ranking_queries(prism.RANKINGS["hybrid"], untitled) == {"abstract": "Only an abstract here."}


def test_rank_with_method_fuses_dense_and_lexical_lists_with_weights():
    method = prism.RANKINGS["hybrid"]
    queries = {"abstract": "a", "title": "t"}
    lists = {"a": ["P1", "P2"], "t": ["P2", "P3"]}
    embedded = []

    def embed(texts):
        embedded.append(list(texts))
        return [t for t in texts]

    ranking = prism.rank_with_method(method, PAPER, queries, embed, lambda text: lists[text],
                                     lambda text: ["P3"] if text == PAPER.abstract_query else [])
    assert embedded == [["a", "t"]]
    assert ranking.lists == {"abstract": ["P1", "P2"], "title": ["P2", "P3"], "lexical": ["P3"]}
    # P2 (ranks 2 and 1) and P3 (ranks 2 and 1) tie at 1/61 + 1/62 and keep first-seen order; P1 has 1/61 only
    assert [item for item, _, _ in ranking.fused] == ["P2", "P3", "P1"]
    without_index = prism.rank_with_method(method, PAPER, queries, embed, lambda text: lists[text], None)
    assert "lexical" not in without_index.lists


def test_settings_offer_exactly_the_rankings():
    choices = typing.get_args(Settings.model_fields["related_method"].annotation)
    assert set(choices) == {"auto", *prism.RANKINGS}
    def default(**values) -> str:
        settings = Settings(**values)
        return generation_plan(settings, choose_profile(settings)).related_ranking

    assert default(llm="local") == "prism-extractive"
    assert default(llm="openai", openai_api_key="k") == "prism-hybrid"
    assert default(llm="local", related_method="hybrid") == "hybrid"


# --- the evaluation's rule for the default
def _report(means: dict[str, float], p: dict[str, float], facet_loss: dict[str, float]) -> csfcube.Report:
    results, vs = {}, {}
    for method, mean in means.items():
        loss = facet_loss.get(method, 0.0)
        results[method] = {"overall": {csfcube.SELECTION_METRIC: mean},
                           **{f: {csfcube.SELECTION_METRIC: 0.5 + (loss if f == "method" else 0.0)}
                              for f in csfcube.FACETS}}
        if method != "abstract":
            vs[method] = {csfcube.SELECTION_METRIC: {"mean_difference": mean - means["abstract"],
                                                      "bootstrap_p": p[method]}}
    return csfcube.Report(results, {}, vs)


def test_default_is_the_best_significant_product_ranking_without_a_lost_facet():
    means = {"abstract": 0.50, "hybrid": 0.55, "prism-extractive": 0.58, "prism-hybrid": 0.60,
             "prism-extractive-scores": 0.70}
    p = {"hybrid": 0.01, "prism-extractive": 0.01, "prism-hybrid": 0.20, "prism-extractive-scores": 0.001}
    assert csfcube.choose_default(_report(means, p, {}))[0] == "prism-extractive"    # eval-only and p 0.2 are out
    assert csfcube.choose_default(_report(means, p, {"prism-extractive": -0.02}))[0] == "hybrid"
    assert csfcube.choose_default(_report(means, {k: 0.5 for k in p}, {}))[0] == "abstract"


def test_nested_default_scores_each_query_paper_by_a_choice_made_without_it():
    from copilot.eval import csfcube_nested
    from copilot.eval.metrics import METRICS

    def row(value: float) -> dict:
        return {m: value for m in METRICS}

    keys = [f"p{i}_background" for i in range(6)]
    per_query = {"abstract": {k: row(0.5) for k in keys}, "hybrid": {k: row(0.52) for k in keys},
                 "prism-extractive": {k: row(0.55 if k != "p5_background" else 0.0) for k in keys}}
    report = csfcube_nested._report_on(per_query, keys)
    report.default_method = csfcube.choose_default(report)[0]
    assert report.default_method == "hybrid"       # in-sample, prism-extractive's loss on p5 sinks its mean
    nested = csfcube_nested.nested_default(report)
    # without p5, prism-extractive wins and is then scored on p5 (0.0); with p5 in training, hybrid is chosen
    assert nested["chosen"] == [{"method": "hybrid", "folds": 5}, {"method": "prism-extractive", "folds": 1}]
    assert nested["mean"][csfcube.SELECTION_METRIC] == pytest.approx((5 * 0.52 + 0.0) / 6)
    assert nested["vs_abstract"]["wins"] == 5 and nested["vs_abstract"]["losses"] == 1
    assert nested["in_sample_mean"] == pytest.approx(0.52) and nested["in_sample_vs_abstract"] == pytest.approx(0.02)
    assert csfcube_nested.paper_of("8781666_result") == "8781666"
    assert csfcube_nested.nested_default(csfcube_nested._report_on(per_query, keys[:1])) == {}


def test_list_ablation_scores_each_list_alone_and_with_the_abstract():
    from copilot.eval import csfcube_lists
    from copilot.eval.metrics import METRICS

    query = csfcube.CsfQuery("q", "background", ["a", "b", "c", "d"], {"a": 3, "b": 2, "c": 0, "d": 0})
    lists = {"abstract": ["a", "b", "c", "d"], "title": ["d", "c", "b", "a"]}
    report = csfcube.Report({}, {"abstract": {query.key: {m: 1.0 for m in METRICS}}}, {})
    report.lists, report.queries = {"hybrid": {query.key: lists}}, [query]
    found = csfcube_lists.list_ablation(report)
    ideal = 3 + 2                                      # upstream: ranks 1 and 2 undiscounted
    assert found["hybrid"]["alone"]["abstract"] == pytest.approx(1.0)
    assert found["hybrid"]["alone"]["title"] == pytest.approx((2 / math.log2(3) + 3 / math.log2(4)) / ideal)
    # RRF: a and d tie above b and c, ties in first-seen order → a, d, b, c
    assert found["hybrid"]["with_abstract"] == {"title": pytest.approx((3 + 2 / math.log2(3)) / ideal)}
    assert "| hybrid | title (1 queries) |" in csfcube_lists.markdown(found)
    second = csfcube.CsfQuery("r", "method", ["a", "b"], {"a": 0, "b": 3})       # a query without a title list
    report.lists["hybrid"][second.key] = {"abstract": ["b", "a"]}
    report.queries.append(second)
    again = csfcube_lists.list_ablation(report)
    assert again["hybrid"]["queries"] == {"abstract": 2, "title": 1}
    assert again["hybrid"]["alone"]["abstract"] == pytest.approx(1.0)
    assert again["hybrid"]["alone"]["title"] == pytest.approx(found["hybrid"]["alone"]["title"])
