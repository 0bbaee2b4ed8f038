"""PRISM: RRF fusion, the three aspect prompts, the JSON variant, the aspect cache, and the Related feature."""

from __future__ import annotations

import json

import numpy as np
import pytest

from copilot import prompts
from copilot.features import related
from copilot.llm import LLMError
from copilot.methods import prism
from copilot.methods.fusion import reciprocal_rank_fusion
from copilot.services import Services
from tests.conftest import import_papers, make_settings
from tests.doubles import ScriptedBackend, scripted_llm
from tests.fake_arxiv import fake_arxiv  # noqa: F401 (fixture)

PAPER = prism.QueryPaper("Sparse Mixture Routing for Translation",
                         "We route tokens to experts. We evaluate on WMT and beat dense baselines.", id="2501.00001")


# --- fusion
def test_rrf_exact_scores_and_order():
    fused = reciprocal_rank_fusion([["A", "B", "C"], ["C", "A"], ["A"]], k=60)
    assert [item for item, _, _ in fused] == ["A", "C", "B"]
    scores = {item: score for item, score, _ in fused}
    assert scores["A"] == pytest.approx(1 / 61 + 1 / 62 + 1 / 61, abs=1e-15)
    assert scores["C"] == pytest.approx(1 / 63 + 1 / 61, abs=1e-15)
    assert scores["B"] == pytest.approx(1 / 62, abs=1e-15)
    assert fused[1][2] == {"0": 3, "1": 1}          # C: rank 3 in list 0, rank 1 in list 1, absent from list 2


def test_rank_with_queries_embeds_each_query_and_fuses_named_lists():
    queries = {"method": "m", "experiments": "e", prism.ABSTRACT: "a"}
    lists = {"m": ["P1", "P2", "P3"], "e": ["P3", "P1"], "a": ["P1"]}
    embedded: list[list[str]] = []

    def embed(texts):
        embedded.append(list(texts))
        return np.array([[ord(t)] for t in texts], dtype=np.float32)

    ranking = prism.rank_with_queries(queries, embed, lambda vector: lists[chr(int(vector[0]))])
    assert embedded == [["m", "e", "a"]]
    assert [(i, r) for i, _, r in ranking.fused] == [
        ("P1", {"method": 1, "experiments": 2, "abstract": 1}), ("P3", {"method": 3, "experiments": 1}),
        ("P2", {"method": 2})]
    assert ranking.lists["experiments"] == ["P3", "P1"]


def test_rank_candidates_by_cosine_with_stable_ties():
    vectors = np.array([[0, 1], [1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
    assert prism.rank_candidates(np.array([0, 1], dtype=np.float32), ["a", "b", "c", "d"], vectors) == \
        ["a", "c", "d", "b"]


# --- aspect prompts
def test_three_aspect_prompts_called_with_distinct_instructions_at_temperature_zero(services):
    llm, backend = scripted_llm(services.db, ["Research question text.", "Method text.", "Experiments text."])
    result = prism.describe_aspects(llm, PAPER)
    assert result.descriptions == {"research_question": "Research question text.", "method": "Method text.",
                                   "experiments": "Experiments text."}
    assert result.missing == {} and result.llm_calls == 3
    assert [c.temperature for c in backend.calls] == [0.0, 0.0, 0.0]
    assert all(c.max_tokens <= 96 for c in backend.calls)
    systems = [c.messages[0]["content"] for c in backend.calls]
    assert len(set(systems)) == 3
    for call, focus, others in zip(backend.calls, ["research question", "method", "experiments and results"],
                                   ["method and its experiments", "motivation and its experiments",
                                    "motivation and its method"]):
        system, user = call.messages[0]["content"], call.messages[1]["content"]
        assert f"you cover only its {focus.upper()}, and do not repeat what they cover" in system
        assert "Two other writers cover the paper's research question" in system or focus == "research question"
        assert others in system
        assert f"describe the {focus} of this paper" in user
        assert PAPER.title in user and '<source id="query-paper">' in user
    logged = services.db.query("SELECT prompt_name FROM llm_calls ORDER BY id")
    assert [r["prompt_name"] for r in logged] == ["prism_research_question", "prism_method", "prism_experiments"]


def test_one_failed_aspect_is_reported_and_the_rest_kept(services):
    llm, _ = scripted_llm(services.db, ["RQ.", LLMError("model crashed"), "Exp."])
    result = prism.describe_aspects(llm, PAPER)
    assert list(result.descriptions) == ["research_question", "experiments"]
    assert "model crashed" in result.missing["method"]
    queries = prism.prism_queries(PAPER, result)
    assert list(queries) == ["research_question", "experiments", "abstract"]
    assert queries["abstract"] == f"{PAPER.title}\n\n{PAPER.abstract}"


def test_description_cleanup_drops_preamble_and_bullets():
    assert prism.clean_description("Sure, here is the paragraph:\n## Method\n- uses experts\n- routes") == \
        "Method uses experts routes"


# --- JSON variant
@pytest.mark.parametrize("reply, expected", [
    ('{"research_question": "rq", "method": "m", "experiments": "e"}',
     {"research_question": "rq", "method": "m", "experiments": "e"}),
    ('Here you go:\n```json\n{"research_question_query": "rq", "method_query": "m", "experiment_query": "e"}\n```',
     {"research_question": "rq", "method": "m", "experiments": "e"}),
    ('{"Method": "only m", "other": 3}', {"method": "only m"}),
])
def test_parse_aspect_json(reply, expected):
    assert prism.parse_aspect_json(reply) == expected


@pytest.mark.parametrize("reply", ["no json here", '{"method": 3}', '{"research_question": "rq", "method": ',
                                   '["rq", "m", "e"]'])
def test_parse_aspect_json_malformed(reply):
    with pytest.raises(prism.AspectParseError):
        prism.parse_aspect_json(reply)


def test_json_variant_makes_one_call_and_reports_malformed_output(services):
    good = json.dumps({"research_question": "rq", "method": "m", "experiments": "e"})
    llm, backend = scripted_llm(services.db, [good, "I think the paper is about routing."])
    ok = prism.describe_aspects(llm, PAPER, mode=prism.JSON)
    assert ok.descriptions == {"research_question": "rq", "method": "m", "experiments": "e"} and ok.llm_calls == 1
    assert backend.calls[0].temperature == 0.0 and '"research_question"' in backend.calls[0].messages[0]["content"]
    other = prism.QueryPaper("Another paper", "A different abstract.")
    bad = prism.describe_aspects(llm, other, mode=prism.JSON)
    assert bad.descriptions == {} and bad.llm_calls == 1
    assert set(bad.missing) == set(prism.ASPECTS) and "malformed JSON" in bad.missing["method"]


# --- cache
def test_cache_hit_makes_no_llm_call_and_is_keyed_by_model_and_content(services):
    cache = prism.AspectCache(services.db)
    llm, backend = scripted_llm(services.db, ["RQ.", LLMError("busy"), "Exp."])
    first = prism.describe_aspects(llm, PAPER, cache)
    assert "method" in first.missing and len(backend.calls) == 3

    backend.replies.append("Method.")               # only the failed aspect is asked again
    second = prism.describe_aspects(llm, PAPER, cache)
    assert len(backend.calls) == 4 and "METHOD" in backend.calls[3].messages[0]["content"]
    assert second.from_cache == ["research_question", "experiments"] and second.missing == {}

    third = prism.describe_aspects(llm, PAPER, cache)   # no replies left: any call would fail the test
    assert third.llm_calls == 0 and len(backend.calls) == 4
    assert third.descriptions == {"research_question": "RQ.", "method": "Method.", "experiments": "Exp."}

    other_model, other_backend = scripted_llm(services.db, ["a", "b", "c"])
    other_backend.model = "another-model"
    assert prism.describe_aspects(other_model, PAPER, cache).llm_calls == 3
    changed = prism.QueryPaper(PAPER.title, PAPER.abstract + " More.", id=PAPER.id)
    llm.backend.replies.extend(["x", "y", "z"])
    assert prism.describe_aspects(llm, changed, cache).llm_calls == 3


def test_migration_creates_cache_table(services):
    assert "related_aspect_cache" in services.db.tables()
    applied = {r["name"] for r in services.db.query("SELECT name FROM schema_migrations")}
    assert "related_0001_aspect_cache" in applied


# --- the feature over a real library
@pytest.fixture
def library(services):
    return import_papers(services, 40)


def test_find_related_fuses_available_queries_and_names_the_missing_aspect(settings):
    backend = ScriptedBackend()
    services = Services(settings, llm_backend=backend)
    library = import_papers(services, 40)
    query_paper = library[0]
    backend.replies += [f"{library[5].title}. {library[5].abstract}", LLMError("down"), library[9].abstract]
    query = related.parse_query(services, f"https://arxiv.org/abs/{query_paper.id}v1")
    assert query.source == "library" and query.paper.id == query_paper.id
    result = related.find_related(services, query, limit=39, method="prism")
    assert len(backend.calls) == 3 and result.method == "prism"
    rows = {r["id"]: r for r in result.results}
    assert len(rows) == 39 and query_paper.id not in rows           # every other paper, never the query itself
    assert all(set(r["ranks"]) == {"research_question", "experiments", "abstract"} for r in result.results)
    assert rows[library[5].id]["ranks"]["research_question"] == 1    # the paper the RQ description copies
    assert rows[library[9].id]["ranks"]["experiments"] == 1
    for row in result.results:                                       # the fused score is exactly RRF, k=60
        assert row["score"] == pytest.approx(sum(1 / (60 + r) for r in row["ranks"].values()), abs=1e-6)
    scores = [r["score"] for r in result.results]
    assert scores == sorted(scores, reverse=True)
    assert "method" in result.missing_notice
    baseline_scores = [r["score"] for r in result.baseline]
    assert len(baseline_scores) == 39 and baseline_scores == sorted(baseline_scores, reverse=True)
    assert [r["id"] for r in result.baseline][0] == min(rows.values(), key=lambda r: r["ranks"]["abstract"])["id"]
    data = result.as_dict()
    assert set(data) >= {"query", "aspects", "results"} and set(data["results"][0]) >= {"id", "title", "score", "ranks"}


def test_bad_input_messages(tmp_path, fake_arxiv):
    services = Services(make_settings(tmp_path / "data", arxiv_api_url=fake_arxiv.url))
    with pytest.raises(related.RelatedError, match="nothing to search with"):
        related.parse_query(services, "", "", "  ")
    assert related.parse_query(services, "", "A title only", "").paper.title == "A title only"
    with pytest.raises(related.RelatedError, match="not an arXiv id"):
        related.parse_query(services, "hello")
    with pytest.raises(related.RelatedError, match="unknown arXiv id 2199.99999"):
        related.parse_query(services, "2199.99999")
    pasted = related.parse_query(services, "", "", "A Pasted Title\nThe abstract of the pasted paper.")
    assert pasted.paper.title == "A Pasted Title" and pasted.paper.abstract == "The abstract of the pasted paper."


def test_empty_library_says_so(services):
    query = related.query_from_text("T", "Some abstract.", 4000)
    with pytest.raises(related.RelatedError, match="no papers yet"):
        related.find_related(services, query)


# --- through the real local model
def test_real_local_model_writes_three_aspects_and_ranks(services, library):
    query = related.parse_query(services, library[3].id)
    result = related.find_related(services, query, limit=5, method="prism")
    assert set(result.aspects.descriptions) | set(result.aspects.missing) == set(prism.ASPECTS)
    assert len(result.aspects.descriptions) >= 2
    assert len(set(result.aspects.descriptions.values())) == len(result.aspects.descriptions)
    assert len(result.results) == 5 and all("abstract" in r["ranks"] or r["ranks"] for r in result.results)
    calls = services.db.query("SELECT prompt_name, completion_tokens FROM llm_calls WHERE prompt_name LIKE 'prism_%'")
    assert len(calls) == 3 and all((c["completion_tokens"] or 0) <= 96 for c in calls)
    # cached; only an aspect that failed (timeout) is retried
    again = related.find_related(services, query, limit=5, method="prism")
    assert again.aspects.llm_calls == len(result.aspects.missing)
    assert set(again.aspects.from_cache) == set(result.aspects.descriptions)
    prism_calls = services.db.query("SELECT id FROM llm_calls WHERE prompt_name LIKE 'prism_%'")
    assert len(prism_calls) == 3 + len(result.aspects.missing)


def test_prompts_are_registered():
    assert {"prism_research_question", "prism_method", "prism_experiments",
            "prism_aspects_json"} <= set(prompts.PROMPTS)


def test_a_capable_writer_is_asked_for_detailed_aspects_with_room_for_them():
    llm, backend = scripted_llm(None, ["Detailed research question text."] * 3)
    result = prism.describe_aspects(llm, PAPER, detailed=True)
    assert len(result.descriptions) == 3
    assert all("one detailed paragraph" in call.messages[-1]["content"] for call in backend.calls)
    assert all(call.max_tokens == prism.DETAILED_ASPECT_MAX_TOKENS for call in backend.calls)
    llm, short = scripted_llm(None, ["Short text."] * 3)
    prism.describe_aspects(llm, PAPER)
    assert all("2-3 sentences" in call.messages[-1]["content"] for call in short.calls)
    assert all(call.max_tokens == prism.ASPECT_MAX_TOKENS for call in short.calls)
