"""Graph of Records on a small real period with the real local model and embedder (issue #16): training improves
the training objective's ranking metric over the untrained network; a stopped training stores nothing; a corpus
update is not served an old network; a too-small period falls back to plain retrieval with a notice; the command
line answers with citations and the nodes GoR chose."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import date

import numpy as np
import pytest

from copilot.features import gor as feature
from copilot.features import gor_period as period
from copilot.methods import gor
from copilot.services import Services
from tests.conftest import PAPERS_JSONL, ROOT, make_settings, read_rows
from tests.helpers import app_env, clean_env

ROWS = (1859, 1953)                        # listed 2025-05-13 … 2025-05-16: 94 real papers
PERIOD = feature.Scope(date(2025, 5, 14), date(2025, 5, 16))   # 62 papers; 05-13 lies in its previous window
SMALL_DAY = feature.Scope(date(2025, 5, 15), date(2025, 5, 15))  # 14 papers: too few
GOR_ENV = {"COPILOT_GOR_QUESTIONS": "8", "COPILOT_GOR_RESPONSES": "2"}


@pytest.fixture(scope="module")
def period_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("gor-period")
    snapshot = root / "papers.jsonl"
    rows = read_rows(PAPERS_JSONL, ROWS[0], ROWS[1] - ROWS[0])
    snapshot.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = root / "data"
    subprocess.run([sys.executable, "-m", "copilot", "import", str(snapshot)], cwd=ROOT, env=app_env(data),
                   check=True, capture_output=True, timeout=600)
    return data


@pytest.fixture(scope="module")
def trained_dir(period_dir, tmp_path_factory):
    """The period prepared once (8 simulated questions by the local model, 6 train; 2 simulated answers)."""
    import torch

    torch.set_num_threads(1)
    data = tmp_path_factory.mktemp("gor-trained") / "data"
    shutil.copytree(period_dir, data)
    services = Services(make_settings(data, gor_questions=8, gor_responses=2))
    prepared = feature.prepare(services, PERIOD)
    return data, prepared


def services_over(data, monkeypatch) -> Services:
    clean_env(monkeypatch)
    return Services(make_settings(data, gor_questions=8, gor_responses=2))


def test_training_improves_the_objective_over_the_untrained_network(trained_dir, monkeypatch):
    data, prepared = trained_dir
    services = services_over(data, monkeypatch)
    graph = prepared.graph
    assert sum(n.kind == gor.PAPER for n in graph.nodes) == 62
    assert sum(n.kind == gor.RESPONSE for n in graph.nodes) >= 1 and graph.edges
    questions, held_out = feature.GoROptions.from_settings(services.settings).training_part(
        prepared.simulation.questions)
    assert len(questions) >= 4 and held_out, [q.question for q in prepared.simulation.questions]
    assert all(q.question.endswith("?") for q in questions)
    queries, labels, _ = feature.labels_for(services, graph, questions, prepared.token_vectors)
    before = gor.ranking_metrics(queries @ gor.node_embeddings(gor.untrained(graph.features.shape[1]), graph).T,
                                 labels)
    after = gor.ranking_metrics(queries @ gor.node_embeddings(prepared.trained, graph).T, labels)
    assert after["mrr"] > before["mrr"] + 0.05, (before, after)
    assert after["overlap@6"] >= before["overlap@6"], (before, after)
    losses = prepared.trained.losses
    assert len(losses) == 150 and losses[-1] < 0.8 * losses[0]


def test_the_trained_network_is_cached_and_a_corpus_update_is_not_served_it(trained_dir, tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(trained_dir[0], data)
    services = services_over(data, monkeypatch)
    assert period.training_status(services, PERIOD)["state"] == "ready"
    services.runs.finish(services.runs.start("test:update", 1), "ok", _no_counts(), None)   # the corpus moved on
    assert period.training_status(services, PERIOD)["state"] == "idle"


def _no_counts():
    from copilot.store.runs import RunCounts

    return RunCounts(0, 0, 0, 0, 0)


def test_a_stopped_training_stores_no_network(trained_dir, tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(trained_dir[0], data)
    services = services_over(data, monkeypatch)
    # the simulation is cached; another training setting has no network yet
    opts = feature.GoROptions.from_settings(services.settings, train=gor.TrainSettings(epochs=149))
    epochs = []

    def stop_after_three() -> bool:
        epochs.append(1)
        return len(epochs) > 3

    with pytest.raises(gor.TrainingStopped):
        feature.prepare(services, PERIOD, opts, should_stop=stop_after_three)
    assert services.gor_cache.network(PERIOD.key(opts), feature.corpus_version(services),
                                      feature.network_variant(services, opts)) is None
    assert period.training_status(services, PERIOD, opts)["state"] == "idle"


def test_too_small_a_period_is_answered_by_plain_retrieval_with_a_notice(period_dir, tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(period_dir, data)
    services = services_over(data, monkeypatch)
    result = period.ask_period(services, SMALL_DAY, "Which methods make language models reason better?",
                                train=True)
    assert result.chosen_by == feature.PLAIN
    assert any("too few" in n for n in result.notices), result.notices
    assert len(result.nodes) == 6 and all(n.kind == "paper" for n in result.nodes)
    assert set(result.citations) <= {n.id for n in result.nodes}
    assert period.start_training(services, SMALL_DAY)["state"] == "too small"


def test_command_line_answers_from_the_nodes_gor_chose(trained_dir):
    data, _ = trained_dir
    env = app_env(data)
    env.update(GOR_ENV)
    done = subprocess.run([sys.executable, "-m", "copilot", "trends", "--from", "2025-05-14", "--to", "2025-05-16",
                           "--ask", "What did this period's papers do with retrieval-augmented generation?",
                           "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    meta = period.training_status(Services(make_settings(data, gor_questions=8, gor_responses=2)), PERIOD)["meta"]
    # 8 questions hold out 2, fewer than the gate's minimum: no evidence, so the network is not used
    assert meta["heldout_questions"] < gor.MIN_HELDOUT_QUESTIONS and meta["validated"] is False
    assert result["chosen_by"] == "plain"
    assert any("not used" in n and f"at least {gor.MIN_HELDOUT_QUESTIONS}" in n for n in result["notices"])
    assert 1 <= len(result["nodes"]) <= 6
    assert all(n["kind"] in ("paper", "thought") and isinstance(n["score"], float) for n in result["nodes"])
    scores = [n["score"] for n in result["nodes"]]
    assert scores == sorted(scores, reverse=True)
    assert result["answer"].strip() and result["citations"]
    assert set(result["citations"]) <= {n["id"] for n in result["nodes"]}
    for cited in result["citations"]:
        assert f"[{cited}]" in result["answer"]
    assert np.isfinite(result["seconds"]["answer"])
