"""Related rankings with the real embedder and stores (issue #22): the lexical index kept in step with the paper
store, the gate on aspect descriptions the packaged model really wrote, extractive aspects, and find_related's
default, stand-ins and notices. The fusion arithmetic: tests/test_fusion.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copilot.eval import csfcube
from copilot.features import related
from copilot.features.memory import doctor
from copilot.llm import LLMError
from copilot.methods import prism
from copilot.services import Services
from copilot.store.lexical import LexicalIndex
from tests.conftest import CSFCUBE, import_papers, sample_papers
from tests.doubles import ScriptedBackend

RECORDED = Path(__file__).parent / "data" / "prism-aspects-recorded.json"


@pytest.fixture
def library(services):
    return import_papers(services, 40)


# --- the lexical index
def test_import_builds_the_index_and_search_finds_a_paper_by_its_words(services, library):
    index_dir = services.settings.data_dir / "lexical"
    assert (index_dir / "current").is_file()                       # built at import, not at the first query
    assert sorted(services.lexical.indexed_ids()) == sorted(p.id for p in library)
    target = library[7]
    found = services.lexical.search(f"{target.title}\n\n{target.abstract}", 5)
    assert found[0][0] == target.id
    assert target.id not in [i for i, _ in services.lexical.search(target.title, 5, exclude=[target.id])]
    assert doctor(services)["lexical_index"] == {"in_step": True, "indexed": 40, "stored": 40, "missing": 0,
                                                  "extra": 0}


def test_index_behind_the_store_is_rebuilt_and_other_processes_rebuilds_are_seen(services, library):
    more = sample_papers(3, start=40)
    services.store.upsert_papers(more, services.embedder.embed([p.document for p in more]))   # not through ingest
    report = doctor(services)
    assert report["lexical_index"]["missing"] == 3 and report["mismatches"] >= 1
    assert services.lexical.search(more[0].title, 3)[0][0] == more[0].id    # the search rebuilt it first
    other = LexicalIndex(services.settings.data_dir / "lexical", services.store)   # another process's view
    extra = sample_papers(1, start=43)
    services.store.upsert_papers(extra, services.embedder.embed([extra[0].document]))
    services.lexical.rebuild()
    assert extra[0].id in other.indexed_ids()                       # it follows the new pointer
    assert doctor(services)["lexical_index"]["in_step"]


def test_doctor_repair_rebuilds_a_lost_index(services, library):
    (services.settings.data_dir / "lexical" / "current").unlink()
    assert not doctor(services)["lexical_index"]["in_step"]
    repaired = doctor(services, repair=True, wait_s=30)
    assert repaired["repair"]["lexical_index_rebuilt"] == 40 and repaired["after_repair"]["lexical_index"]["in_step"]


# --- the gate, on descriptions the packaged model wrote for the CSFCube dev fold
def test_gate_on_recorded_descriptions(services):
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    papers = csfcube.read_abstracts(CSFCUBE, "")
    assert {r["rejected"] for r in recorded} == {None, "the description is off-topic",
                                                 "the description repeats its instructions",
                                                 "the description repeats itself"}
    for row in recorded:
        paper = prism.QueryPaper(papers[row["paper_id"]]["title"], papers[row["paper_id"]]["abstract"])
        aspects = prism.AspectSet(descriptions={row["aspect"]: row["description"]})
        rejected = prism.gate_descriptions(aspects, paper, services.embedder.embed)
        if row["rejected"] is None:
            assert rejected == {} and row["aspect"] in aspects.descriptions, row
        else:
            assert rejected[row["aspect"]].startswith(row["rejected"]), (row, rejected)
            assert aspects.missing[row["aspect"]] == rejected[row["aspect"]]


def test_extractive_aspects_use_every_sentence_once(services):
    abstract = ("Spam filters miss new campaigns. We stack several classifiers with a meta-learner. "
                "On two public corpora the stacked filter halves the false positives.")
    paper = prism.QueryPaper("Stacked spam filtering", abstract)
    queries = prism.extractive_aspects(paper, services.embedder.embed)
    assert queries and all(text.startswith("Stacked spam filtering. ") for text in queries.values())
    used = [s for text in queries.values() for s in prism.abstract_sentences(text.split(". ", 1)[1])]
    assert sorted(used) == sorted(prism.abstract_sentences(abstract))
    assert set(queries) <= set(prism.ASPECTS)
    assert prism.extractive_aspects(prism.QueryPaper("Only a title", ""), services.embedder.embed) == {}


# --- find_related
def test_default_ranking_on_the_local_model_calls_no_llm_and_fuses_six_lists(settings, library):
    backend = ScriptedBackend([], obeys_grammar=True)          # taken as the small local model
    services = Services(settings, llm_backend=backend)
    query = related.parse_query(services, library[3].id)
    result = related.find_related(services, query, limit=10)
    assert backend.calls == [] and result.method == "prism-extractive"
    assert result.method_label == related.RANKINGS["prism-extractive"]
    assert set(result.aspect_sources.values()) == {prism.EXTRACTIVE_ASPECTS}
    lists = set().union(*(row["ranks"] for row in result.results))
    assert {"abstract", "title", "lexical"} <= lists and lists - {"abstract", "title", "lexical"} <= set(prism.ASPECTS)
    assert len(result.results) == 10 and library[3].id not in [r["id"] for r in result.results]
    weights = prism.RANKINGS["prism-extractive"].weights
    for row in result.results:                                # the score is exactly the weighted RRF
        assert row["score"] == pytest.approx(sum(weights[n] / (60 + r) for n, r in row["ranks"].items()), abs=1e-6)
    assert [r["id"] for r in result.baseline] == [r["id"] for r in
                                                  related.find_related(services, query, 10, method="abstract").results]
    data = result.as_dict()
    assert data["method"] == "prism-extractive" and data["notices"] == []


def test_llm_down_leaves_prism_hybrid_on_extractive_stand_ins_with_a_notice(settings, library):
    backend = ScriptedBackend([LLMError("down")] * 3)
    services = Services(settings, llm_backend=backend)
    result = related.find_related(services, related.parse_query(services, library[5].id), limit=5,
                                  method="prism-hybrid")
    assert len(backend.calls) == 3 and result.aspects.descriptions == {}
    assert set(result.aspect_sources.values()) == {prism.EXTRACTIVE_ASPECTS}
    assert "LLM failed" in result.missing_notice and "own sentences stand in" in result.missing_notice
    assert len(result.results) == 5


def test_title_carries_a_query_without_abstract(settings, library):
    services = Services(settings, llm_backend=ScriptedBackend([]))
    query = related.parse_query(services, "", library[2].title, "")
    result = related.find_related(services, query, limit=5)
    assert result.notices == ["The abstract is empty or very short, so the title carries the query."]
    assert result.results[0]["id"] == library[2].id              # a pasted paper is not excluded from its library
    with pytest.raises(related.RelatedError, match="unknown ranking method"):
        related.find_related(services, query, method="bm25")
