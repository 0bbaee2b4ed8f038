"""`eval slim` (issue #14, deliverable 3): token-F1, the dev question set, the comparison with a scripted model
(exact counts), and one small real run with the packaged model through the command line."""

from __future__ import annotations

import json

import pytest

from copilot.eval import slim_eval
from copilot.eval.slim_eval import make_questions, read_questions, token_f1
from copilot.llm import LLMError
from copilot.methods import slim
from copilot.methods.slim import SlimOptions
from copilot.records import Evidence
from copilot.services import Services
from copilot.store.db import Database
from tests.conftest import make_settings
from tests.doubles import ScriptedBackend, scripted_llm
from tests.helpers import PAPERS_JSONL, ROOT, app_env, clean_env, run_cli, run_cli_in_process

DEV_SET = ROOT / "tests" / "data" / "slim-dev.jsonl"


@pytest.mark.parametrize("prediction, reference, expected", [
    ("the cat sat", "a cat sat", 1.0),                          # articles do not count
    ("Cat, sat!", "cat sat", 1.0),                              # case and punctuation do not count
    ("cat sat down", "cat sat", 0.8),                           # P 2/3, R 1 → 0.8
    ("cat cat", "cat sat", 0.5),                                # multiplicity: one "cat" in common, P 1/2, R 1/2
    ("dog", "cat", 0.0),
    ("Source [2] shows that hash tables map keys [2].", "hash tables map keys", 1.0),   # the local opening, labels
    ("", "cat", 0.0),
    ("", "", 1.0),
])
def test_token_f1(prediction, reference, expected):
    assert token_f1(prediction, reference) == pytest.approx(expected)


def test_the_dev_set_is_valid_and_is_what_the_documented_command_makes():
    rows = read_questions(DEV_SET)
    assert len(rows) >= 100 and all(set(row) == {"question", "answer", "gold"} for row in rows)
    paper, general = [r for r in rows if r["gold"]], [r for r in rows if not r["gold"]]
    assert len(paper) >= 40 and len(general) >= 40
    assert [bool(r["gold"]) for r in rows[:4]] == [True, False, True, False]       # alternating: --limit takes both
    corpus = {json.loads(line)["id"] for line in PAPERS_JSONL.open(encoding="utf-8")}
    assert all(len(r["gold"]) == 1 and r["gold"][0] in corpus for r in paper)
    assert len({r["question"] for r in rows}) == len(rows)
    assert rows == make_questions(PAPERS_JSONL, seed=0)       # `eval slim-questions --out … --seed 0`


def test_always_and_never_options_fix_retrieval_without_asking_the_proxy(tmp_path):
    db = Database(tmp_path / "copilot.db")
    asked: list[str] = []

    def library(query, k):
        asked.append(query)
        return [Evidence("2501.00001", "paper", "Hash tables", "Hash tables map keys to values.", 0.9)]

    for retrieval, queries in (("always", ["What does a hash table do?"]), ("never", [])):
        proxy, proxy_backend = scripted_llm(db, [])
        main, main_backend = scripted_llm(db, ["It maps keys to values."])
        asked.clear()
        trace = slim.run("What does a hash table do?", proxy=proxy, main=main, retriever=library,
                         options=SlimOptions(retrieval=retrieval))
        assert asked == queries and trace.retrieved == bool(queries) and trace.decided_by == retrieval
        assert proxy_backend.calls == [] and len(main_backend.calls) == 1 and trace.main_calls == 1


FORCED_Q = {"question": 'What does the paper "Foo Bar Networks" propose?', "answer": "We propose foo bar networks.",
            "gold": ["2501.00001"]}
BARE_Q = {"question": "What does Baz Quux Learning propose?", "answer": "We propose baz quux.", "gold": ["2501.00002"]}
GENERAL_Q = {"question": "What does a hash table do?", "answer": "A hash table maps keys to values.", "gold": []}
FOO = Evidence("2501.00001", "paper", "Foo Bar Networks", "Foo Bar Networks. We propose foo bar networks.", 0.9)
OTHER = Evidence("2501.00009", "paper", "Other", "Other. Something else entirely.", 0.4)


def scripted_library(query: str, k: int) -> list[Evidence]:
    return [FOO, OTHER][:k] if "Foo Bar" in query else [OTHER]


def test_the_comparison_with_a_scripted_model_gives_exact_counts(tmp_path, monkeypatch):
    clean_env(monkeypatch)
    replies = [
        # forced paper question: always, never, SlimPLM (timeliness rule: no proxy, the main model once)
        "Source [1] shows that we propose foo bar networks.", "No idea.", "Source [1] shows that we propose foo bar.",
        # bare paper question: always, never, SlimPLM (draft, judge wrongly says known, main)
        "Source [1] shows something else.", "Baz quux is a method.", "Baz is a thing.", "known", "We propose baz quux.",
        # general question: always, never, SlimPLM (draft, unknown, two claims, both known: the question alone, main)
        "Source [1] shows something else.", "A hash table maps keys to values.", "It maps keys to values.", "unknown",
        "Claim: Hash tables map keys Query: hash table keys\nClaim: Lookups take constant time Query: hash lookup time",
        "known", "known", "A hash table maps keys to values.",
    ]
    backend = ScriptedBackend(list(replies))
    services = Services(make_settings(tmp_path / "data"), llm_backend=backend)
    report = slim_eval.evaluate(services, [FORCED_Q, BARE_Q, GENERAL_Q], retriever=scripted_library)
    assert backend.replies == [] and len(backend.calls) == len(replies)

    s = report.summary
    assert [s[k]["all"]["retrieval_rate"] for k in slim_eval.STRATEGIES] == [1.0, 0.0, round(2 / 3, 4)]
    assert [s[k]["paper"]["gold_found"] for k in slim_eval.STRATEGIES] == [0.5, 0.0, 0.5]
    for strategy in slim_eval.STRATEGIES:
        assert s[strategy]["all"]["main_calls_per_question"] == 1.0
        assert (s[strategy]["all"]["main_calls_min"], s[strategy]["all"]["main_calls_max"]) == (1, 1)
    assert report.meta["slim_one_main_call"] is True
    assert s["always"]["all"]["helper_token_share"] == 0.0 and s["adaptive"]["all"]["helper_token_share"] > 0
    assert s["never"]["general"]["f1"] == 1.0 and s["adaptive"]["general"]["f1"] == 1.0
    assert report.judge == {"paper": {"forced": 1, "judged known": 1},
                            "general": {"judged unknown: claims all known": 1}}
    md = slim_eval.markdown(report)
    assert "| SlimPLM | 3 |" in md and "exactly once per question: yes" in md


@pytest.mark.parametrize("output, verdict", [
    ("correct", "correct"), ("Incorrect.", "incorrect"), ("**Verdict: correct**", "correct"),
    ("correct\nbecause it matches", "correct"), ("", None), ("partly correct", None), ("yes", None),
    ("correct or incorrect", None),
])
def test_read_accuracy(output, verdict):
    assert slim_eval.read_accuracy(output) == verdict


def test_a_scripted_judge_grades_every_answer_blind_and_the_counts_add_up(tmp_path, monkeypatch):
    clean_env(monkeypatch)
    answers = {"always": "Source [1] shows that we propose foo bar networks.", "never": "No idea.",
               "adaptive": "Source [1] shows that we propose foo bar."}
    services = Services(make_settings(tmp_path / "data"), llm_backend=ScriptedBackend(list(answers.values())))
    judge, judge_backend = scripted_llm(None, ["correct", "maybe", LLMError("the judge endpoint failed")])
    report = slim_eval.evaluate(services, [FORCED_Q], retriever=scripted_library, answer_judge=judge)
    assert [r.get("accuracy") for r in report.per_question] == ["correct", None, None]
    assert report.per_question[2]["accuracy_error"] == "the judge endpoint failed"
    for call, shown in zip(judge_backend.calls, answers.values()):
        prompt = " ".join(m["content"] for m in call.messages)
        assert shown in prompt and FORCED_Q["answer"] in prompt and call.temperature == 0.0
        assert not any(word in prompt.lower() for word in ("retriev", "slim", "strateg", "adaptive", "baseline"))
    s = report.summary
    assert s["always"]["all"]["judge_accuracy"] == 1.0 and s["never"]["all"]["judge_accuracy"] is None
    assert s["never"]["all"]["judge_unparseable"] == s["adaptive"]["all"]["judge_unparseable"] == 1
    assert s["always"]["all"]["judge_verdicts"] == {"correct": 1, "incorrect": 0}
    assert report.meta["answer_judge"] == {"backend": "scripted", "model": "scripted-model"}
    md = slim_eval.markdown(report)
    assert "LLM judge of answer accuracy (scripted/scripted-model)" in md
    assert "| always-retrieve | 1.00 / 1.00 / –" in md


def test_without_judge_no_verdicts_are_reported(tmp_path, monkeypatch):
    clean_env(monkeypatch)
    services = Services(make_settings(tmp_path / "data"), llm_backend=ScriptedBackend(["a b c."] * 3))
    report = slim_eval.evaluate(services, [FORCED_Q], retriever=scripted_library)
    assert "judge_accuracy" not in report.summary["always"]["all"] and report.meta["answer_judge"] is None
    assert "LLM judge" not in slim_eval.markdown(report)


def test_eval_slim_refuses_judge_with_the_packaged_model_before_any_work(tmp_path, monkeypatch, capsys):
    clean_env(monkeypatch)
    monkeypatch.setenv("COPILOT_DATA_DIR", str(tmp_path / "data"))
    code, printed, err = run_cli_in_process(capsys, "eval", "slim", "--questions", str(DEV_SET), "--judge")
    assert code == 2 and printed is None
    assert err.startswith("error: --judge needs a model that can judge") and "--judge-local" in err
    assert not (tmp_path / "data" / "eval").exists()


@pytest.mark.integration
def test_eval_slim_with_the_packaged_model_through_the_cli(tmp_path):
    """Three questions with the packaged model as proxy, main and (--judge-local) judge, through the CLI."""
    env = app_env(tmp_path / "data")
    done = run_cli(["eval", "slim", "--questions", str(DEV_SET), "--limit", "3", "--distractors", "20", "--json",
                    "--judge", "--judge-local"], env)      # the 135M judge: only the plumbing
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["meta"]["questions"] == 3 and report["meta"]["slim_one_main_call"] is True
    assert report["meta"]["library_papers"] == 20 + 2              # the first 3 questions: 2 about a paper
    adaptive = report["summary"]["adaptive"]["all"]
    assert adaptive["questions"] == 3 and adaptive["main_calls_per_question"] == 1.0 and adaptive["errors"] == 0
    assert report["summary"]["always"]["all"]["retrieval_rate"] == 1.0
    assert report["summary"]["never"]["all"]["retrieval_rate"] == 0.0
    first = [r for r in report["per_question"] if r["question"] == read_questions(DEV_SET, 1)[0]["question"]]
    assert {r["strategy"]: r["gold_found"] for r in first}["always"] is True   # its title finds it among 22
    assert {r["strategy"]: r["decided"] for r in first}["adaptive"] == "forced"
    assert "| SlimPLM | 3 |" in done.stderr
    assert report["meta"]["answer_judge"]["backend"] == "local" and "LLM judge of answer accuracy" in done.stderr
    for strategy in slim_eval.STRATEGIES:
        figures = report["summary"][strategy]["all"]
        assert sum(figures["judge_verdicts"].values()) + figures["judge_unparseable"] == 3
    assert all(r["accuracy"] in ("correct", "incorrect", None) for r in report["per_question"])
    assert list((tmp_path / "data" / "eval").glob("slim-slim-dev-n3.*"))


def test_calibration_of_the_judges_probability_exactly():
    # dev-set order (paper and general alternate); per fold the threshold chosen on the other questions
    weighed = [("paper", 0.30), ("general", 0.05), ("paper", 0.20), ("general", 0.10), ("paper", 0.12),
               ("general", 0.15), ("general", 0.02)]
    rows = [{"strategy": "adaptive", "kind": kind, "p_unknown": p} for kind, p in weighed]
    rows += [{"strategy": "always", "kind": "paper", "p_unknown": None},
             {"strategy": "adaptive", "kind": "paper", "p_unknown": None}]       # forced: not weighed
    c = slim_eval.calibration(rows, 0.14)
    assert c["weighed"] == 7 and c["auc"] == pytest.approx(11 / 12, abs=1e-4)
    assert c["best_threshold_all"] == 0.12 and c["cv_thresholds"] == [0.12, 0.12, 0.2, 0.12]
    assert c["cv_retrieved"] == {"paper": "2/3", "general": "0/4"}             # fold 2 held out 0.12 < 0.20
    assert c["cv_balanced_accuracy"] == pytest.approx((2 / 3 + 1) / 2, abs=1e-4)
    assert c["in_use_retrieved"] == {"paper": "2/3", "general": "1/4"}
    assert slim_eval.calibration(rows[:1], 0.14) == {}                          # one kind only: nothing to tell
