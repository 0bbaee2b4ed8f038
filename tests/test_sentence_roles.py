"""The sentence-role classifier through the real embedder: shipped weights, `eval roles` on a slice of CSAbstruct's
dev split, background told from result, bad input (issue #39, item 3)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from copilot.embed import Embedder
from copilot.methods import sentence_roles
from copilot.methods.sentence_roles import HAND_FEATURES, ROLES
from tests.helpers import DATA, clean_env, run_cli_in_process

DEV = DATA / "csabstruct" / "dev.jsonl"


@pytest.fixture(scope="module")
def embed():
    return Embedder().embed


def test_the_shipped_weights_load_and_say_how_they_were_made():
    model = sentence_roles.load_model()
    assert model.weights.shape == (384 + len(HAND_FEATURES), len(ROLES))
    assert model.roles == ROLES
    made = sentence_roles.metadata()
    assert made["made_by"] == "python -m copilot train-roles" and "CSAbstruct train" in made["trained_on"]
    assert sentence_roles.WEIGHTS_PATH.stat().st_size < 300_000


def test_background_and_result_sentences_are_told_apart(embed):
    abstract = ["Large language models have become a foundational component of modern search and dialogue systems.",
                "However, their memory footprint remains a major obstacle to deployment on small devices.",
                "We propose SlimCache, which quantizes the key-value cache to two bits per value.",
                "Experiments on LongBench show that SlimCache reduces memory by 72% with less than 1% accuracy loss."]
    roles = sentence_roles.classify(abstract, embed=embed)
    assert roles[0] == "background" and roles[-1] == "result"
    assert roles[2] in ("objective", "method")
    assert sentence_roles.is_background(roles[0]) and not sentence_roles.is_quotable(roles[0])
    assert sentence_roles.is_quotable(roles[-1])


def test_given_vectors_and_positions_give_the_same_roles_as_embedding_them(embed):
    sentences = ["Results show a 3x speed-up over the baseline.", "Deep learning has become ubiquitous."]
    vectors = embed(sentences)
    assert (sentence_roles.classify(sentences, vectors, [1.0, 0.0])
            == sentence_roles.classify(sentences, positions=[1.0, 0.0], embed=embed))


def test_bad_input_is_handled(embed):
    assert sentence_roles.classify([], embed=embed) == []
    assert sentence_roles.classify([], np.zeros((0, 384), dtype=np.float32)) == []
    latex = "$\\mathcal{O}(n^2)$ attention is replaced by \\textbf{LinAttn} with $k=64$ ($\\approx 4\\times$)."
    odd = ["Hello", "", latex, "x" * 5000]
    roles = sentence_roles.classify(odd, embed=embed)
    assert len(roles) == len(odd) and set(roles) <= set(ROLES)
    with pytest.raises(ValueError, match="positions"):
        sentence_roles.classify(["One.", "Two."], positions=[0.0], embed=embed)
    with pytest.raises(ValueError, match="vectors or an embed"):
        sentence_roles.classify(["One sentence."])


def test_eval_roles_on_a_slice_of_dev(tmp_path, monkeypatch, capsys):
    clean_env(monkeypatch)
    monkeypatch.setenv("COPILOT_DATA_DIR", str(tmp_path / "data"))
    rows = DEV.read_text(encoding="utf-8").splitlines()[:25]
    sliced = tmp_path / "dev-slice.jsonl"
    sliced.write_text("\n".join(rows) + "\n", encoding="utf-8")
    sentences = sum(len(json.loads(r)["sentences"]) for r in rows)
    code, report, err = run_cli_in_process(capsys, "eval", "roles", "--data", str(sliced), "--json")
    assert code == 0, err
    assert report["sentences"] == sentences == sum(map(sum, report["confusion"]["rows_gold"]))
    assert report["accuracy"] >= 0.6 and report["macro_f1"] >= 0.45      # the whole dev split: see docs
    assert set(report["per_role"]) == set(ROLES)
    assert (tmp_path / "data" / "eval" / "roles-dev-slice.json").is_file()
    assert "| background |" in (tmp_path / "data" / "eval" / "roles-dev-slice.md").read_text(encoding="utf-8")


def test_eval_roles_refuses_a_file_that_is_not_csabstruct(tmp_path, monkeypatch, capsys):
    clean_env(monkeypatch)
    monkeypatch.setenv("COPILOT_DATA_DIR", str(tmp_path / "data"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "no sentences here"}\n', encoding="utf-8")
    code, report, err = run_cli_in_process(capsys, "eval", "roles", "--data", str(bad), "--json")
    assert code == 2 and report is None and "is not a CSAbstruct row" in err


@pytest.mark.parametrize("damage", [lambda data: data[:4000],                       # cut short: not a zip
                                    lambda data: b"\x93NUMPY" + data[6:]])           # not an npz at all
def test_a_broken_weights_file_is_said_once_and_answers_use_the_cue_roles(embed, tmp_path, monkeypatch, caplog,
                                                                          damage):
    """A damaged `sentence_roles.npz` made learned roles silently fall back to cue phrases (or, cut short, fail
    every answer with BadZipFile); now it is logged once, with the file and why, and the cue roles are used."""
    import logging

    from copilot.methods.evidence import cue_role, roles_of

    broken = tmp_path / "sentence_roles.npz"
    broken.write_bytes(damage(sentence_roles.WEIGHTS_PATH.read_bytes()))
    monkeypatch.setattr(sentence_roles, "WEIGHTS_PATH", broken)
    sentences = ["Results show a 3x speed-up over the baseline.", "Deep learning has become ubiquitous."]
    caplog.set_level(logging.WARNING)
    for _ in range(3):
        assert roles_of(sentences, embed(sentences), [1.0, 0.0]) == [cue_role(sentences[0], False),
                                                                      cue_role(sentences[1], True)]
        assert not sentence_roles.trained_for("sentence-transformers/all-MiniLM-L6-v2")
    said = [r.getMessage() for r in caplog.records if r.name == "copilot.methods.sentence_roles"]
    assert len(said) == 1 and str(broken) in said[0] and "cue phrases" in said[0]
    assert sentence_roles.weights_problem() == sentence_roles.weights_problem(broken) == said[0].split("; answers")[0]


def test_a_one_sentence_abstract_is_not_its_own_background(embed):
    """A lone sentence sat at position 0, the opening of an abstract, and the classifier called every such sentence
    background: a one-sentence abstract could never be quoted once learned roles were on (issue #47)."""
    from copilot.methods.evidence import roles_of

    lone = ["We propose SlimCache, which quantizes the key-value cache to two bits per value and cuts memory by 72%.",
            "This paper studies retrieval-augmented generation with a sparse key-value cache for long documents."]
    for sentence in lone:
        assert sentence_roles.classify([sentence], embed=embed) != ["background"]
        assert roles_of([sentence], embed([sentence])) != ["background"]


def test_a_one_sentence_abstract_can_be_a_row(embed):
    """The table placed a lone sentence at 0 too (evidence.candidate_spans), so its learned role was background and
    the paper never became a row; placed at LONE_POSITION it is quoted (issue #47)."""
    from copilot.methods.evidence import Source, build_rows

    abstract = "We propose SlimCache, which quantizes the key-value cache to two bits per value and cuts memory by 72%."
    question = "Which methods compress the key-value cache to save memory?"
    paper = Source("2505.00001", "SlimCache", ("A. Author",), "2025-05-01", abstract, 0.6)
    rows, _ = build_rows(question, embed([question])[0], [paper], embed, floor=0.2, learned_roles=True)
    assert [row.source.paper_id for row in rows] == ["2505.00001"]
