"""Graph of Records, pure parts (issue #16): the graph of a hand-made scope, BERTScore, the loss (exact values),
the ranking metric, the network's residual start, and the store of trained networks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch  # a hard dependency (requirements.txt): a missing torch must fail here, not skip

from copilot.methods import gor
from copilot.store.db import Database
from copilot.store.gor_cache import GoRCache, SimulatedQuestion, SimulatedResponse, Simulation


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def tiny_graph() -> gor.RecordGraph:
    papers = [gor.Node("2501.00001", gor.PAPER, "a"), gor.Node("2501.00002", gor.PAPER, "b"),
              gor.Node("2501.00003", gor.PAPER, "c")]
    vectors = np.stack([unit(1, 0), unit(0, 1), unit(1, 1)])
    records = [
        gor.Record("T2", gor.THOUGHT, "made from T1", unit(1, 2), ("T1",)),           # joins in the second round
        gor.Record("T1", gor.THOUGHT, "made from 1 and 3", unit(2, 1), ("2501.00001", "2501.00003", "2501.00001")),
        gor.Record("T9", gor.THOUGHT, "elsewhere", unit(0, 1), ("2401.09999",)),     # touches nothing here
        gor.Record("R1", gor.RESPONSE, "answer", unit(1, 3), ("2501.00002", "T1")),
    ]
    return gor.build_graph(papers, vectors, records)


def test_graph_holds_the_scope_papers_and_the_records_touching_them():
    graph = tiny_graph()
    assert [n.id for n in graph.nodes] == ["2501.00001", "2501.00002", "2501.00003", "T1", "R1", "T2"]
    # lineage edges source → record, a repeated source once; T9 left out
    assert graph.edges == [(0, 3), (2, 3), (1, 4), (3, 4), (3, 5)]
    mask = graph.mask()
    assert mask.shape == (6, 6) and mask.diagonal().all()
    assert mask[3, 0] and mask[0, 3] and not mask[0, 1] and mask.sum() == 6 + 2 * 5
    assert graph.retrievable().tolist() == [True, True, True, True, False, True]
    np.testing.assert_allclose(graph.features[3], unit(2, 1))


def test_bert_score_is_greedy_matching_f1():
    reference = np.stack([unit(1, 0), unit(0, 1)])
    same = reference.copy()
    half = np.stack([unit(1, 0)])                       # precision 1, recall (1 + 0) / 2
    scores = gor.bert_scores(reference, [same, half])
    assert scores[0] == pytest.approx(1.0)
    assert scores[1] == pytest.approx(2 * 1 * 0.5 / 1.5)


def test_loss_exact_values_on_one_query():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    labels = torch.tensor([[0.9, 0.5, 0.1]])
    total, contrastive, ranking = gor.gor_loss(logits, labels, alpha=0.6, tau=1.0)
    cl = math.log(math.exp(2) + math.exp(1) + 1) - 2
    rank = (math.log1p(math.exp(1 - 2)) + math.log1p(math.exp(0 - 2)) + math.log1p(math.exp(0 - 1))) / 3
    assert float(contrastive) == pytest.approx(cl, abs=1e-6)
    assert float(ranking) == pytest.approx(rank, abs=1e-6)
    assert float(total) == pytest.approx(cl + 0.6 * rank, abs=1e-6)


def test_loss_positive_is_the_best_label_and_negatives_of_another_graph_count():
    logits = torch.tensor([[0.0, 3.0]])
    labels = torch.tensor([[0.2, 0.8]])                  # node 1 is the positive
    _, contrastive, ranking = gor.gor_loss(logits, labels, alpha=1.0, tau=2.0,
                                           negatives=torch.tensor([[1.0]]))
    z = [0.0, 1.5, 0.5]
    assert float(contrastive) == pytest.approx(math.log(sum(math.exp(v) for v in z)) - 1.5, abs=1e-6)
    assert float(ranking) == pytest.approx(math.log1p(math.exp(0.0 - 1.5)), abs=1e-6)


def test_ranking_metrics():
    scores = np.array([[0.9, 0.8, 0.1, 0.0], [0.0, 0.1, 0.9, 0.2]])
    labels = np.array([[0.5, 0.9, 0.1, 0.2], [0.9, 0.1, 0.2, 0.3]])
    found = gor.ranking_metrics(scores, labels, k=2)
    assert found["mrr"] == pytest.approx((1 / 2 + 1 / 4) / 2)
    assert found["hit@2"] == pytest.approx(0.5)
    assert found["overlap@2"] == pytest.approx((2 / 2 + 1 / 2) / 2)


@pytest.mark.parametrize("heldout, ours, plain, validated", [
    (0, None, None, False),                                   # no evidence is not a pass
    (gor.MIN_HELDOUT_QUESTIONS - 1, 0.9, 0.1, False),         # too few, however good
    (gor.MIN_HELDOUT_QUESTIONS, 0.5, 0.5, True),              # enough, and as good as plain retrieval
    (10, 0.24, 0.78, False),                                  # the rerun of docs/gor-eval.md
])
def test_gate_needs_enough_held_out_questions_and_no_loss(heldout, ours, plain, validated):
    verdict, why = gor.gate(heldout, ours, plain)
    assert verdict is validated and f"{heldout} held-out" in why
    if heldout < gor.MIN_HELDOUT_QUESTIONS:
        assert f"at least {gor.MIN_HELDOUT_QUESTIONS}" in why


def test_a_stored_network_without_held_out_questions_is_not_used():
    from copilot.features import gor as feature  # a network stored before the minimum existed said "validated"
    old = {"validated": True, "heldout_questions": 0}
    assert feature.gate_of(old)[0] is False
    assert "not used: only 0 held-out" in feature.not_validated_notice(old)


def test_untrained_network_is_plain_retrieval_and_top_nodes_skip_responses():
    graph = tiny_graph()
    dim = graph.features.shape[1]
    vectors = gor.node_embeddings(gor.untrained(dim, gor.TrainSettings(heads=2)), graph)
    np.testing.assert_allclose(vectors, graph.features, atol=1e-6)
    best = gor.top_nodes(vectors, graph, unit(1, 3), k=3)
    assert [i for i, _ in best] == [5, 1, 2]             # R1 (index 4) is closest but never handed on


def test_training_stops_without_weights_when_asked():
    graph = tiny_graph()
    with pytest.raises(gor.TrainingStopped):
        gor.train(graph, np.stack([unit(1, 0)]), np.array([[1.0, 0, 0.5, 0.7, 0.2, 0.1]], np.float32),
                  gor.TrainSettings(heads=2, epochs=3), should_stop=lambda: True)


def test_trained_network_round_trips_through_bytes():
    graph = tiny_graph()
    trained = gor.train(graph, np.stack([unit(1, 0)]), np.array([[1.0, 0, 0.5, 0.7, 0.2, 0.1]], np.float32),
                        gor.TrainSettings(heads=2, epochs=2))
    again = gor.from_bytes(gor.to_bytes(trained))
    np.testing.assert_allclose(gor.node_embeddings(again, graph), gor.node_embeddings(trained, graph))
    assert again.settings == trained.settings and len(again.losses) == 2


def test_store_keeps_networks_per_scope_and_corpus_version(tmp_path):
    cache = GoRCache(Database(tmp_path / "copilot.db"))
    assert cache.network("week", "200:1", "v") is None
    cache.put_network("week", "200:1", "v", b"weights", {"nodes": 3})
    stored = cache.network("week", "200:1", "v")
    assert stored.weights == b"weights" and stored.meta == {"nodes": 3}
    assert cache.network("week", "250:2", "v") is None                 # a corpus update: not reused
    simulation = Simulation([SimulatedQuestion("What is new?", "2501.00001")],
                            [SimulatedResponse("R1", "What is new?", "An answer [2501.00001].", ("2501.00001",))])
    cache.put_simulation("week", "200:1", "m", simulation)
    assert cache.simulation("week", "200:1", "m") == simulation
    assert cache.drop_stale("week", "250:2") == 2
    assert cache.network("week", "200:1", "v") is None and cache.simulation("week", "200:1", "m") is None


def test_sources_are_drawn_without_repeats_until_exhausted():
    picks = gor.choose_sources(5, 3, seed=1)
    assert len(picks) == 5 and sorted(picks[:3]) == [0, 1, 2]
    assert picks == gor.choose_sources(5, 3, seed=1)


@pytest.mark.parametrize("question, kept", [
    ("What is the answer to this question?", False),
    ("What is the purpose of this paper?", False),
    ("What would you like to know about our research?", False),
    ("How does speculative decoding speed up downstream tasks?", True),
    ("What is the purpose of Chronocept?", False),                 # one shared word is not enough
    ("How can register tokens improve interpretability of vision transformers?", True),
    ("What is the purpose of speculative decoding?", True),          # a word of the title counts twice
])
def test_a_simulated_question_is_kept_only_when_it_is_about_its_paper(question, kept):
    from datetime import date

    from copilot.features.gor import about_its_paper
    from copilot.records import Paper

    paper = Paper("2505.00001", "Faster speculative decoding for downstream tasks, and register tokens",
                  "We study speculative decoding and register tokens that improve the interpretability of vision "
                  "transformers. Chronocept is a benchmark.", [], ["cs.CL"], date(2025, 5, 14))
    assert about_its_paper(question, paper) is kept


def test_eval_gor_training_variants_are_parsed_and_checked():
    from copilot.cli.evals import _train_variant
    from copilot.errors import UserError

    variant = _train_variant(gor.TrainSettings(), ["dropout=0.2", "epochs=30", "lr=1e-4", "alpha=0"])
    assert (variant.dropout, variant.epochs, variant.lr, variant.alpha) == (0.2, 30, 1e-4, 0.0)
    assert _train_variant(gor.TrainSettings(), []) == gor.TrainSettings()
    for bad in ("heads=2", "dropout", "epochs=many"):
        with pytest.raises(UserError):
            _train_variant(gor.TrainSettings(), [bad])
