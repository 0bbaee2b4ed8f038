"""`eval thoughts`: root-source precision/recall on hand-made retrievals, the qrels loader, the warm-up questions,
a scripted warm-up that is interrupted and resumed, a scripted judge, the real command on a 3-query slice of the
dev fold with the local model, and `--judge` on a 2-query slice against a loopback OpenAI-compatible server."""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
import time
import urllib.request
from xml.etree import ElementTree

import numpy as np
import pytest

from copilot.eval import csfcube, svg, thoughts_eval
from copilot.eval.thoughts_eval import root_precision_recall
from copilot.llm import fast_copy, packaged_gguf
from copilot.methods.thought_retriever import ThoughtMemory
from copilot.records import Evidence
from copilot.services import Services
from tests.conftest import stop_process
from tests.doubles import ScriptedBackend
from tests.helpers import CSFCUBE, free_port, run_cli, subprocess_env


# --- scoring
@pytest.mark.parametrize("roots, cited, expected", [
    (["a", "b", "c", "d"], {"a", "c", "x"}, (2 / 4, 2 / 3)),
    (["a", "a", "b"], {"a"}, (1 / 2, 1.0)),                 # a root reached twice counts once
    ([], {"a"}, (0.0, 0.0)),
    (["a"], set(), (0.0, 0.0)),
    (["x", "y"], {"a", "b"}, (0.0, 0.0)),
])
def test_root_precision_recall(roots, cited, expected):
    assert root_precision_recall(roots, cited) == pytest.approx(expected)


def _means_match_rows(point: dict, setting: str) -> None:
    rows = point["per_query"][setting]
    assert len(rows) == point["queries"]
    for metric in ("precision", "recall", "level", "thoughts"):
        assert point["mean"][setting][metric] == pytest.approx(np.mean([r[metric] for r in rows]), abs=1e-12)


def _unit(seed: int, dim: int = 384) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def test_thoughts_expand_to_root_papers_without_the_query_paper(services):
    memory = ThoughtMemory(services.db, services.store, services.embedder)
    first = memory.add("Parsers trained on treebanks beat rule-based ones.", [("p1", "paper"), ("q", "paper")],
                       origin="chat", check_redundant=False, embedding=_unit(1))
    second = memory.add("Treebank parsers and tagging share features.", [(first, "thought"), ("p2", "paper")],
                        origin="chat", check_redundant=False, embedding=_unit(2))
    items = [Evidence(id="p3", kind="paper", title="", text="", score=0.9),
             Evidence(id=second, kind="thought", title="", text="", score=0.8),
             Evidence(id="q", kind="paper", title="", text="", score=0.7)]
    roots = thoughts_eval.expand_roots(items, memory, leave_out="q")
    assert roots == ["p3", "p1", "p2"]
    assert root_precision_recall(roots, {"p1", "p2", "p9"}) == pytest.approx((2 / 3, 2 / 3))
    assert memory.level(second) == pytest.approx(1 + (2 + 1) / 2)


# --- data
def _write_dir(folder, papers: dict[str, dict], qrels: list[tuple[str, str, int]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / csfcube.ABSTRACTS_FILE).open("w", encoding="utf-8") as out:
        for pid, row in papers.items():
            out.write(json.dumps({"paper_id": pid, **row}) + "\n")
    with (folder / "toy-qrels-cited.tsv").open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, delimiter="\t")
        writer.writerow(["query_pid", "cand_pid", "cited"])
        writer.writerows(qrels)


TOY_PAPERS = {
    "q1": {"title": "Neural dependency parsing", "abstract": "We train a neural parser on treebanks.", "year": 2018},
    "c1": {"title": "Treebank annotation", "abstract": "A large annotated treebank for parsing.", "year": 2010},
    "c2": {"title": "Transition-based parsing", "abstract": "A fast transition-based dependency parser.", "year": 2012},
    "q2": {"title": "Protein folding in yeast", "abstract": "We study chaperones that fold proteins.", "year": 2015},
    "c3": {"title": "Chaperone proteins", "abstract": "Heat shock proteins help proteins fold.", "year": 2008},
    "n1": {"title": "Bird migration", "abstract": "Birds fly south in autumn, guided by stars.", "year": 2001},
    "n2": {"title": "Ocean tides", "abstract": "The moon drives the tides of the oceans.", "year": 1999},
    "n3": {"title": "Word embeddings for parsing", "abstract": "Word vectors help neural parsers.", "year": 2016},
}
TOY_QRELS = [("q1", "c1", 1), ("q1", "c2", 1), ("q1", "n1", 0), ("q2", "c3", 1), ("q2", "gone", 1), ("zz", "c1", 1)]


def test_cited_pairs_count_ids_missing_from_the_abstracts(tmp_path):
    _write_dir(tmp_path / "toy", TOY_PAPERS, TOY_QRELS)
    papers = csfcube.read_abstracts(tmp_path / "toy", thoughts_eval.QRELS_GLOB)
    gold = thoughts_eval.load_cited(tmp_path / "toy", papers)
    assert gold.cited == {"q1": {"c1", "c2"}, "q2": {"c3"}}
    assert gold.unknown_ids == {"query": 1, "cited": 1} and gold.prefix == "toy"


def test_the_held_out_fold_is_the_pool_queries_the_qrels_do_not_hold_with_their_cited_candidates(tmp_path):
    _write_dir(tmp_path / "toy", TOY_PAPERS, TOY_QRELS)
    pool = {"q1": {"cands": ["c1"], "cand_source": [["cited"]]},                  # the dev fold's: left out
            "n3": {"cands": ["c2", "n1", "gone", "c1"], "cand_source": [["cited", "specter"], ["specter"],
                                                                         ["cited"], ["title_tfidf", "cited"]]},
            "n2": {"cands": ["c3"], "cand_source": [["abs_cbow200"]]}}                # nothing cited: left out
    (tmp_path / "toy" / csfcube.POOL_FILE).write_text(json.dumps(pool), encoding="utf-8")
    papers = csfcube.read_abstracts(tmp_path / "toy", thoughts_eval.QRELS_GLOB)
    assert csfcube.held_out_cited(tmp_path / "toy", papers, thoughts_eval.QRELS_GLOB) == {"n3": {"c2", "c1"}}
    with pytest.raises(csfcube.EvalDataError, match="held-out fold needs"):
        csfcube.held_out_cited(tmp_path, papers, thoughts_eval.QRELS_GLOB)


def test_a_directory_without_the_files_is_named(tmp_path):
    with pytest.raises(csfcube.EvalDataError, match="abstracts-csfcube-from-readable.jsonl"):
        csfcube.read_abstracts(tmp_path, thoughts_eval.QRELS_GLOB)
    with pytest.raises(csfcube.EvalDataError, match=r"no file matching \*-qrels-cited.tsv"):
        thoughts_eval.load_cited(tmp_path, {})


def test_warmup_questions_leave_out_the_query_papers_and_are_seeded():
    questions = thoughts_eval.warmup_questions(TOY_PAPERS, {"q1", "q2"}, 4, seed=3)
    assert len(questions) == 4 and not {q["from"] for q in questions} & {"q1", "q2"}
    assert questions == thoughts_eval.warmup_questions(TOY_PAPERS, {"q1", "q2"}, 4, seed=3)
    assert questions[0]["question"] == f"What is known about {TOY_PAPERS[questions[0]['from']]['title']}?"
    assert len(thoughts_eval.warmup_questions(TOY_PAPERS, {"q1", "q2"}, 50, seed=3)) == 6


def test_neighbour_questions_take_the_query_papers_nearest_in_turn(services):
    thoughts_eval.fill_store(services, TOY_PAPERS, progress=lambda line: None)
    questions = thoughts_eval.neighbour_questions(services, TOY_PAPERS, ["q1", "q2"], 4)
    sources = [q["from"] for q in questions]
    assert len(sources) == 4 and len(set(sources)) == 4 and not set(sources) & {"q1", "q2"}
    assert sources[1] == "c3"                   # q2's nearest paper (chaperones), taken second
    assert sources[0] in {"c1", "c2", "n3"}     # q1's nearest is a parsing paper
    assert len(thoughts_eval.neighbour_questions(services, TOY_PAPERS, ["q1", "q2"], 20)) == 6


@pytest.mark.parametrize("warmup, marks", [(0, [0]), (1, [0, 1]), (2, [0, 1, 2]), (4, [0, 1, 2, 4]),
                                           (40, [0, 10, 20, 40]), (10, [0, 2, 5, 10])])
def test_curve_checkpoints(warmup, marks):
    assert thoughts_eval.checkpoints(warmup) == marks


# --- a scripted warm-up, interrupted and resumed
def _reply(messages) -> str:
    text = messages[-1]["content"]
    question = text.split("Question: ", 1)[1].split("\n", 1)[0]
    if "Step 1:" in text:       # the thought prompt
        return f"1\nA note on the question {question} The sources [c1] describe parsers, treebanks and their uses."
    return "Source [1] shows that parsers are trained on annotated treebanks."


def test_scripted_warmup_resumes_after_an_interruption(settings, tmp_path):
    _write_dir(tmp_path / "toy", TOY_PAPERS, TOY_QRELS)
    backend = ScriptedBackend([_reply] * 40)
    services = Services(settings, llm_backend=backend)

    def stop_after_first(line: str) -> None:
        if line.startswith("warm-up 1/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        thoughts_eval.run(services, tmp_path / "toy", warmup=2, k=3, seed=1, progress=stop_after_first)
    state = json.loads((settings.data_dir / thoughts_eval.STATE_FILE).read_text())
    assert len(state["done"]) == 1 and list(state["curve"]) == ["0"]     # checkpoint 1 is measured on resuming
    calls_before = len(backend.calls)

    again = Services(settings, llm_backend=backend)
    report = thoughts_eval.run(again, tmp_path / "toy", warmup=2, k=3, seed=1, progress=lambda line: None)
    assert list(report.curve) == ["0", "1", "2"] and len(report.warmup) == 2
    assert len(backend.calls) - calls_before in (2, 3)      # only the second question was asked again
    start, end = report.curve["0"], report.curve["2"]
    assert start["thoughts_in_memory"] == 0 and start["mean"]["papers"] == start["mean"]["papers+thoughts"]
    assert start["mean"]["papers"]["level"] == 1.0 and start["queries"] == 2
    assert end["thoughts_in_memory"] == sum(1 for t in report.warmup if t["thought"] == "stored") >= 1
    for point in report.curve.values():       # each mean is the mean of the per-query values it reports
        for setting in thoughts_eval.SETTINGS:
            _means_match_rows(point, setting)
    assert [r["query"] for r in start["per_query"]["papers"]] == ["q1", "q2"]
    same = start["thoughts_vs_papers"]["recall"]      # no thought yet: every query ties
    assert (same["ties"], same["mean_difference"], same["sign_test_p"]) == (2, 0.0, 1.0)
    assert report.meta["unknown_qrels_ids"] == {"query": 1, "cited": 1}
    table = thoughts_eval.markdown(report)
    assert table.startswith("| warm-up questions | thoughts in memory | setting | root precision |")
    paths = thoughts_eval.write_outputs(report, tmp_path / "out", "toy")
    assert sorted(paths) == ["json", "markdown", "recall-precision", "recall-thoughts"]
    for plot in ("recall-precision", "recall-thoughts"):
        svg = ElementTree.parse(paths[plot]).getroot()
        assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 2
        assert len(svg.findall("{http://www.w3.org/2000/svg}circle")) == 2 * 3       # a point per checkpoint


def _judging_reply(messages) -> str:
    if "Which answer is better?" in messages[-1]["content"]:
        return "A"
    return _reply(messages)


def test_a_scripted_judge_sees_each_comparison_in_the_seeded_order(settings, tmp_path):
    _write_dir(tmp_path / "toy", TOY_PAPERS, TOY_QRELS)
    backend = ScriptedBackend([_judging_reply] * 40)
    services = Services(settings, llm_backend=backend)
    report = thoughts_eval.run(services, tmp_path / "toy", warmup=2, k=3, seed=1, progress=lambda line: None,
                               judge=True)
    judged = report.judge
    rows, order = judged["per_query"], thoughts_eval.blind_order(1, 2)
    assert [r["query"] for r in rows] == ["q1", "q2"] and judged["queries"] == 2
    assert judged["judged"] + judged["same_items"] + judged["failed"] == 2 and judged["judged"] >= 1
    for row, thoughts_first in zip(rows, order):
        if row["outcome"] != "same_items":
            assert row["thoughts_shown_as"] == ("A" if thoughts_first else "B")
            assert row["outcome"] == ("win" if thoughts_first else "loss")      # the judge always says A
            assert set(row["answers"]) == set(thoughts_eval.SETTINGS)
    judge_calls = [c for c in backend.calls if "Which answer is better?" in c.text]
    assert len(judge_calls) == judged["judged"]
    assert all("thought" not in c.text.lower() for c in judge_calls)
    assert list(report.as_json()) == ["curve", "warmup", "meta", "judge"]
    assert "| queries | judged | wins | losses | ties | unparseable |" in thoughts_eval.markdown(report)


def test_svg_plot_places_points_on_the_axes():
    drawn = svg.svg_plot("t", "x", "y", {"papers": [(0.0, 0.0), (2.0, 1.0)]})
    root = ElementTree.fromstring(drawn)
    circles = [(float(c.get("cx")), float(c.get("cy"))) for c in root.findall("{http://www.w3.org/2000/svg}circle")]
    margin, width, height = svg.MARGIN, svg.PLOT_WIDTH, svg.PLOT_HEIGHT
    assert circles == [(margin, height - margin), (width - margin, margin)]


# --- the real command on a 3-query slice
def _dev_slice(folder, queries: int = 3, others: int = 60) -> None:
    papers = csfcube.read_abstracts(CSFCUBE, thoughts_eval.QRELS_GLOB)
    with (CSFCUBE / "dev-qrels-cited.tsv").open(encoding="utf-8") as rows:
        qrels = [(r["query_pid"], r["cand_pid"], int(r["cited"])) for r in csv.DictReader(rows, delimiter="\t")]
    chosen = list(dict.fromkeys(q for q, _, _ in qrels))[:queries]
    rows = [row for row in qrels if row[0] in chosen]
    keep = set(chosen) | {cand for _, cand, _ in rows}
    keep |= set(random.Random(5).sample(sorted(set(papers) - keep), others))
    _write_dir(folder, {pid: papers[pid] for pid in sorted(keep) if pid in papers}, rows)


def test_eval_thoughts_command_on_a_three_query_slice(tmp_path):
    _dev_slice(tmp_path / "slice")
    run = run_cli(["eval", "thoughts", "--data", str(tmp_path / "slice"), "--warmup", "4", "--k", "8", "--json"],
                  subprocess_env(tmp_path / "data", COPILOT_LLM="local"), timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = json.loads(run.stdout)
    assert list(printed) == ["curve", "warmup", "meta"] and list(printed["curve"]) == ["0", "1", "2", "4"]
    assert printed["meta"]["query_papers"] == 3 and printed["meta"]["k"] == 8 and len(printed["warmup"]) == 4
    start = printed["curve"]["0"]["mean"]
    assert start["papers"] == start["papers+thoughts"] and start["papers"]["recall"] > 0
    for point in printed["curve"].values():
        assert point["queries"] == 3
        for setting in thoughts_eval.SETTINGS:
            _means_match_rows(point, setting)
            assert point["mean"][setting]["level"] >= 1.0
    written = tmp_path / "data" / "eval" / "thoughts-toy-w4-k8-s13.json"
    assert json.loads(written.read_text()) == printed
    assert written.with_name("thoughts-toy-w4-k8-s13-recall-thoughts.svg").is_file()
    assert "| warm-up questions |" in run.stderr and "| recall |" in run.stderr
    assert set(printed["curve"]["4"]["thoughts_vs_papers"]) == {"precision", "recall"}


# --- --judge against a real OpenAI-compatible server on loopback, serving the packaged model
JUDGE_KEY = "sk-judge-test-0413"


@pytest.fixture
def packaged_model_server(tmp_path):
    port, log_path = free_port(), tmp_path / "server.log"
    model = fast_copy(packaged_gguf(), tmp_path / "models")     # the Q8_0 copy: prompts read ~3x faster
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "copilot.llm.serve", "--model", str(model), "--host",
                                 "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1",
                                 "--model_alias", "smollm2-judge", "--api_key", JUDGE_KEY],
                                stdout=log, stderr=subprocess.STDOUT)
        base, deadline = f"http://127.0.0.1:{port}/v1", time.monotonic() + 180
        try:
            while not _serving(base):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log_tail = log_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError("llama_cpp.server did not come up: " + log_tail)
                time.sleep(0.3)
            yield base
        finally:
            stop_process(proc)


def _serving(base: str) -> bool:
    request = urllib.request.Request(base + "/models", headers={"Authorization": f"Bearer {JUDGE_KEY}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def test_eval_thoughts_judge_against_a_loopback_endpoint(tmp_path, packaged_model_server):
    """Only the plumbing: the 135M model behind the endpoint cannot judge well."""
    _dev_slice(tmp_path / "slice", queries=2, others=20)
    env = subprocess_env(tmp_path / "data", OPENAI_BASE_URL=packaged_model_server, OPENAI_API_KEY=JUDGE_KEY,
                         COPILOT_LLM_MODEL="smollm2-judge", COPILOT_CONTEXT_TOKENS="400", COPILOT_SOURCE_TOKENS="60",
                         COPILOT_ANSWER_MAX_TOKENS="48")
    run = run_cli(["eval", "thoughts", "--data", str(tmp_path / "slice"), "--warmup", "2", "--k", "4",
                   "--warmup-from", "neighbours", "--judge", "--json"], env, timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    judged = json.loads(run.stdout)["judge"]
    assert judged["judge"] == {"backend": "openai", "model": "smollm2-judge"} and judged["queries"] == 2
    assert judged["judged"] + judged["same_items"] + judged["failed"] == 2
    assert judged["wins"] + judged["losses"] + judged["ties"] + judged["unparseable"] == judged["judged"]
    assert sum(judged["verdicts_by_label"].values()) == judged["judged"] - judged["unparseable"]
    assert len(judged["per_query"]) == 2 and "Blind pairwise judge (openai/smollm2-judge)" in run.stderr
