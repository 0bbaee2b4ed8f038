"""CSFCube evaluation: metric functions against hand-computed values, the protocol on a toy fold, and the
real command on a 3-query slice of the dev fold with the local model and the default embedder."""

from __future__ import annotations

import json
import math

import pytest

from copilot.eval import csfcube
from copilot.eval.metrics import average_precision, mean_metrics, ndcg_at_k, query_metrics, recall_at_k
from tests.conftest import CSFCUBE
from tests.doubles import scripted_llm
from tests.helpers import run_cli, subprocess_env


# --- metrics
def test_metrics_hand_computed():
    grades = [3, 0, 2, 1]
    dcg = 3 / math.log2(2) + 2 / math.log2(4) + 1 / math.log2(5)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(grades, 20) == pytest.approx(dcg / ideal) == pytest.approx(0.930451, abs=1e-6)
    assert average_precision(grades) == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert recall_at_k(grades, 20) == 1.0 and recall_at_k(grades, 2) == 0.5
    assert query_metrics([2, 2, 0]) == {"ndcg@20": 1.0, "map": 1.0, "recall@20": 1.0}


def test_metrics_cutoff_and_no_relevant():
    late = [0] * 20 + [3] + [0] * 4
    assert ndcg_at_k(late, 20) == 0.0 and recall_at_k(late, 20) == 0.0
    assert average_precision(late) == pytest.approx(1 / 21)
    assert ndcg_at_k(late, 21) == pytest.approx(1 / math.log2(22))
    assert query_metrics([1, 1, 0]) == {"ndcg@20": 1.0, "map": 0.0, "recall@20": 0.0}   # grade 1 is not relevant
    assert ndcg_at_k([0, 0], 20) == 0.0
    assert mean_metrics([{"ndcg@20": 1, "map": 0.5, "recall@20": 0}, {"ndcg@20": 0, "map": 0.5, "recall@20": 1}]) == \
        {"ndcg@20": 0.5, "map": 0.5, "recall@20": 0.5, "queries": 2}


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
    anns = {"q1": {"cands": ["c2", "c3", "c1"], "relevance_adju": [0, 0, 3]}}
    (folder / "toy-pid2anns-background.json").write_text(json.dumps(anns))
    return rows


def test_protocol_on_a_toy_fold_ranks_only_the_query_candidates(services, tmp_path):
    rows = _write_toy_fold(tmp_path / "toy")
    assert csfcube.facet_sentences(rows[0], "method") == "We train a neural parser."
    assert csfcube.facet_sentences(rows[0], "other") == rows[0]["abstract"]
    protein = "Protein folding in yeast\n\nWe study chaperones in yeast."
    llm, backend = scripted_llm(services.db, [protein, protein, protein])
    services.llm = llm
    report = csfcube.run(services, tmp_path / "toy", facets=["background"])
    assert len(backend.calls) == 3 and all(c.temperature == 0.0 for c in backend.calls)
    assert set(report.results) == set(csfcube.METHODS)
    assert report.results["abstract"]["overall"] == {"ndcg@20": 1.0, "map": 1.0, "recall@20": 1.0, "queries": 1}
    # three aspect lists put the protein paper first, so the fused ranking no longer has c1 on top
    assert report.results["prism"]["background"]["map"] < 1.0
    assert list(report.per_query["prism"]) == ["q1_background"]
    assert report.meta["fold"] == "toy" and report.meta["candidates"] == 3

    again = csfcube.run(services, tmp_path / "toy", facets=["background"])     # aspects cached: no call
    assert len(backend.calls) == 3 and again.results == report.results
    table = csfcube.markdown_table(report)
    assert table.splitlines()[0].startswith("| method | overall ndcg@20 | overall map | overall recall@20 |")
    assert "| abstract | 100.00 | 100.00 | 100.00 |" in table


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


# --- the real command on a 3-query slice
def test_eval_command_on_a_three_query_slice(tmp_path):
    run = run_cli(["eval", "csfcube", "--data", str(CSFCUBE), "--limit", "3", "--aspect-tokens", "48", "--json"],
                  subprocess_env(tmp_path, COPILOT_LLM="local"),
                  timeout=1200)   # seconds on an idle machine; minutes when the 2 cores are shared
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1
    results = json.loads(lines[0])
    assert list(results) == list(csfcube.METHODS)
    for entry in results.values():
        assert set(entry) == {"overall", "background", "method", "result"}
        assert entry["overall"]["queries"] == 3 and entry["background"]["queries"] == 3
        assert entry["method"]["queries"] == 0
        assert all(0.0 <= entry["overall"][m] <= 1.0 for m in ("ndcg@20", "map", "recall@20"))
    # measured here: abstract 0.66 on this slice, a random order 0.36 on average (300 shuffles)
    assert results["abstract"]["overall"]["ndcg@20"] > 0.5
    assert "| method | overall ndcg@20" in run.stderr
    written = json.loads((tmp_path / "eval" / "csfcube-dev-limit3.json").read_text())
    assert written == results
    assert (tmp_path / "eval" / "csfcube-dev-limit3.md").read_text().startswith("| method |")
    per_query = json.loads((tmp_path / "eval" / "csfcube-dev-limit3-per-query.json").read_text())
    assert len(per_query["per_query"]["prism"]) == 3 and per_query["meta"]["llm_calls"] == 9
    assert list((tmp_path / "eval" / "cache").glob("csfcube-*.npz"))
