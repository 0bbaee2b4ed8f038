"""CSFCube evaluation: the protocol on a toy fold (whose query sits in its own pool), and the real command on a
3-query slice of the dev fold with the local model and the default embedder. The metrics: tests/test_metrics.py."""

from __future__ import annotations

import json
import math

import pytest

from copilot.eval import csfcube, csfcube_report
from copilot.eval.metrics import METRICS, TESTED_METRICS
from copilot.services import Services
from tests.conftest import CSFCUBE
from tests.doubles import ScriptedBackend
from tests.helpers import run_cli, subprocess_env


# --- the protocol on a toy fold
def _write_toy_fold(folder):
    folder.mkdir()
    query = {"paper_id": "q1", "title": "Neural dependency parsing",
             "abstract": "Parsing is hard. We train a neural parser. It beats baselines.",
             "sentence_labels": ["background", "method", "result"], "sentence_spans": [[0, 16], [17, 42], [43, 62]]}
    rows = [query,
            {**query, "paper_id": "c1"},                                               # same text: grade 3
            {"paper_id": "c2", "title": "Protein folding in yeast", "abstract": "We study chaperones in yeast."},
            {"paper_id": "c3", "title": "Bird migration", "abstract": "Birds fly south in autumn."}]
    (folder / csfcube.ABSTRACTS_FILE).write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    anns = {"q1": {"cands": ["c2", "q1", "c3", "c1"], "relevance_adju": [0, 3, 0, 3]}}     # q1 in its own pool
    (folder / "toy-pid2anns-background.json").write_text(json.dumps(anns))
    return rows


def test_protocol_on_a_toy_fold_ranks_only_the_query_candidates(settings, tmp_path):
    rows = _write_toy_fold(tmp_path / "toy")
    assert csfcube.facet_sentences(rows[0], "method") == "We train a neural parser."
    assert csfcube.facet_sentences(rows[0], "other") == rows[0]["abstract"]
    protein = "Protein folding in yeast\n\nWe study chaperones in yeast."
    backend = ScriptedBackend([protein, protein, protein])
    services = Services(settings, llm_backend=backend)
    report = csfcube.run(services, tmp_path / "toy", facets=["background"])
    assert len(backend.calls) == 3 and all(c.temperature == 0.0 for c in backend.calls)
    assert set(report.results) == set(csfcube.METHODS)
    # the query paper is out of its own pool: c1, its twin, is the one grade-3 hit, ranked first
    assert report.meta["query_in_own_pool_removed"] == ["q1_background"] and report.meta["candidates"] == 3
    assert report.results["abstract"]["overall"] == {**dict.fromkeys(METRICS, 1.0), "queries": 1} | \
        {"upstream_ndcg%20": 0.0}                                      # 3 candidates: NDCG%20 cuts at rank 0
    # three aspect lists put the protein paper first, so the fused ranking no longer has c1 on top
    assert report.results["prism"]["background"]["map"] < 1.0
    assert list(report.per_query["prism"]) == ["q1_background"]
    assert report.meta["fold"] == "toy" and report.meta["llm_calls"] == 3
    assert set(report.vs_baseline) == set(csfcube.METHODS) - {"abstract"}
    # the twin c1 shares every word with the query: the lexical list and the hybrid rankings put it first
    for method in ("lexical", "hybrid", "prism-extractive"):
        assert report.results[method]["overall"]["map"] == 1.0, method
    assert report.cross_validated == {}                      # one query paper: no weights to cross-validate
    assert report.default_method == "abstract"               # one query: nothing is significantly better
    loss = report.vs_baseline["prism"]["map"]
    assert (loss["wins"], loss["losses"], loss["ties"], loss["sign_test_p"]) == (0, 1, 0, 1.0)
    assert set(report.vs_baseline["prism"]) == set(TESTED_METRICS)

    again = csfcube.run(services, tmp_path / "toy", facets=["background"])     # aspects cached: no call
    assert len(backend.calls) == 3 and again.results == report.results
    table = csfcube_report.markdown_table(report)
    assert table.startswith("**Default ranking by this run: `abstract`**")
    assert ("| method | NDCG@20 (ours) | NDCG%20 (upstream) | NDCG@20 (upstream) | MAP | Recall@20 |"
            in table.splitlines())
    assert "| abstract | 100.00 | 0.00 | 100.00 | 100.00 | 100.00 |" in table
    assert "| prism | MAP | -" in table and "| q1_background | 100.0 / 100.0 / 0.0 / 100.0 |" in table
    assert "taken out of their own pool: q1_background" in table


def test_embedder_only_methods_call_no_llm(settings, tmp_path):
    _write_toy_fold(tmp_path / "toy")
    backend = ScriptedBackend([])
    services = Services(settings, llm_backend=backend)
    report = csfcube.run(services, tmp_path / "toy", facets=["background"], methods=["facet-sentences"])
    assert backend.calls == [] and report.meta["llm"] is None and report.meta["llm_calls"] == 0
    assert list(report.results) == ["abstract", "facet-sentences"] and list(report.vs_baseline) == ["facet-sentences"]
    assert "no LLM (embedder-only methods)" in csfcube_report.markdown_table(report)
    assert csfcube.output_name("dev", "json", None, csfcube.FACETS, ["abstract", "facet-sentences"]) == \
        "csfcube-dev-facet-sentences"
    assert csfcube.output_name("dev", "json", 3, csfcube.FACETS, csfcube.METHODS) == "csfcube-dev-json-limit3"
    with pytest.raises(csfcube.EvalDataError, match="unknown method 'bm25'"):
        csfcube.run(services, tmp_path / "toy", facets=["background"], methods=["bm25"])


def test_missing_files_are_reported(tmp_path):
    with pytest.raises(csfcube.EvalDataError, match="abstracts-csfcube-from-readable.jsonl"):
        csfcube.load_fold(tmp_path)
    _write_toy_fold(tmp_path / "toy")
    with pytest.raises(csfcube.EvalDataError, match="no file matching"):
        csfcube.load_fold(tmp_path / "toy", ["method"])


def test_dev_fold_loads_by_glob():
    fold = csfcube.load_fold(CSFCUBE)
    assert fold.prefix == "dev" and len(fold.queries) == 24
    assert [q.facet for q in fold.queries[:9]] == ["background"] * 8 + ["method"]
    assert all(len(q.cands) == len(q.grades) for q in fold.queries)
    # upstream's result pool of 8781666 lists the query paper itself, graded 3: it is no candidate here
    assert fold.in_own_pool == ["8781666_result"]
    assert all(q.pid not in q.cands and q.pid not in q.grades for q in fold.queries)


# --- the real command on a 3-query slice
def test_eval_command_on_a_three_query_slice(tmp_path):
    run = run_cli(["eval", "csfcube", "--data", str(CSFCUBE), "--limit", "3", "--aspect-tokens", "48", "--json"],
                  subprocess_env(tmp_path, COPILOT_LLM="local"),
                  timeout=1200)   # seconds on an idle machine; minutes when the 2 cores are shared
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1
    printed = json.loads(lines[0])
    assert list(printed) == ["default_method", "product_default", "selection", "default_nested", "results",
                             "vs_abstract", "cross_validated", "per_query", "meta"]
    nested = printed["default_nested"]                 # 3 query papers: 3 folds, each choosing by the rule
    assert nested["folds"] == 3 and sum(c["folds"] for c in nested["chosen"]) == 3
    assert {c["method"] for c in nested["chosen"]} <= set(csfcube.PRODUCT_METHODS)
    assert nested["in_sample_default"] == printed["default_method"] and nested["vs_abstract"]["queries"] == 3
    assert printed["product_default"] == "prism-extractive"
    # the default is the rule applied to the printed numbers (read here on its own, not through choose_default)
    assert printed["default_method"] == _default_by_the_rule(printed)
    for method in csfcube.METHODS[1:]:                     # every method against abstract, paired, per metric
        test = printed["vs_abstract"][method]["upstream_ndcg@20"]
        assert test["queries"] == 3 and test["wins"] + test["losses"] + test["ties"] == 3
        ours = [printed["per_query"][method][k]["upstream_ndcg@20"] for k in printed["per_query"]["abstract"]]
        base = [row["upstream_ndcg@20"] for row in printed["per_query"]["abstract"].values()]
        assert test["mean_difference"] == pytest.approx(sum(ours) / 3 - sum(base) / 3, abs=1e-12)
        assert test["sign_test_p"] == pytest.approx(_two_sided_sign_p(test["wins"], test["losses"]))
        assert 0.0 <= test["bootstrap_p"] <= 1.0
    assert set(printed["cross_validated"]) == set(csfcube.TUNED_METHODS)
    assert sum(c["folds"] for c in printed["cross_validated"]["hybrid"]["weights_chosen"]) == 3
    results = printed["results"]
    assert list(results) == list(csfcube.METHODS)
    for entry in results.values():
        assert set(entry) == {"overall", "background", "method", "result"}
        assert entry["overall"]["queries"] == 3 and entry["background"]["queries"] == 3
        assert entry["method"]["queries"] == 0
    for method, entry in results.items():                   # each mean is the mean of its printed per-query rows
        rows = list(printed["per_query"][method].values())
        assert all(entry["overall"][m] == pytest.approx(sum(r[m] for r in rows) / 3, abs=1e-12) for m in METRICS)
    # measured here: abstract 0.66 on this slice, a random order 0.36 on average (300 shuffles)
    assert results["abstract"]["overall"]["ndcg@20"] > 0.5
    assert "| method | NDCG@20 (ours) | NDCG%20 (upstream)" in run.stderr and "sign test p" in run.stderr
    written = json.loads((tmp_path / "eval" / "csfcube-dev-limit3.json").read_text())
    assert written == printed
    assert (tmp_path / "eval" / "csfcube-dev-limit3.md").read_text().startswith(
        f"**Default ranking by this run: `{printed['default_method']}`**")
    assert len(printed["per_query"]["prism"]) == 3 and printed["meta"]["llm_calls"] == 9
    assert printed["vs_abstract"]["prism"]["ndcg@20"]["queries"] == 3
    assert list((tmp_path / "eval" / "cache").glob("csfcube-*.npz"))


def _two_sided_sign_p(wins: int, losses: int) -> float:
    n = wins + losses
    return 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n)


def _default_by_the_rule(printed: dict) -> str:
    """The best overall upstream NDCG@20 among product rankings that beat `abstract` (mean up, bootstrap p < 0.05)
    and lose at most 0.01 on every facet that has queries; `abstract` when none does."""
    base = printed["results"]["abstract"]
    eligible = []
    for method in csfcube.PRODUCT_METHODS[1:]:
        test, entry = printed["vs_abstract"][method]["upstream_ndcg@20"], printed["results"][method]
        facets = [f for f in csfcube.FACETS if entry[f]["queries"]]
        if test["mean_difference"] > 0 and test["bootstrap_p"] < 0.05 and all(
                entry[f]["upstream_ndcg@20"] - base[f]["upstream_ndcg@20"] >= -0.01 for f in facets):
            eligible.append((entry["overall"]["upstream_ndcg@20"], method))
    return max(eligible)[1] if eligible else "abstract"
