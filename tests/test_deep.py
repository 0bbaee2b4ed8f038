"""Deep answers (Chat) and related-work drafts (Related) over real papers and the real embedder: with a scripted model
(the thought step and its lineage, a stopped run stores nothing) and, through the command line, with the packaged
local model."""

from __future__ import annotations

import re

import pytest

from copilot.errors import UserError
from copilot.features import related
from copilot.features.deep import keep_as_thought, stream_deep
from copilot.features.related_work import draft_related_work
from copilot.services import Services
from tests.conftest import import_papers, make_settings
from tests.doubles import ScriptedBackend
from tests.helpers import clean_env, run_cli_in_process

QUESTION = "How can large language models reduce hallucination when answering questions?"
DRAFT = ("Language models hallucinate when they answer from memory alone.\n\n"
         "Retrieving documents gives the model evidence to ground its answer.\n\n"
         "Checking each claim against sources removes unsupported statements.")


FINDINGS = ["shows that grounding answers in documents cuts unsupported claims",
            "reports fewer invented facts when evidence passages are given",
            "finds that verifying claims one by one catches errors",
            "proposes retrieval before generation for factual questions",
            "introduces a checker that flags statements without support",
            "describes benchmarks measuring faithfulness of generated text"]


def scripted_reply(messages) -> str:
    text = messages[-1]["content"]
    if "Answer the task with step-by-step" in text:
        return DRAFT
    if "##Draft:" in text:
        draft = text.split("##Draft:\n")[1].split("\n\n##Instruction")[0]
        label = re.findall(r'<source id="(\d+)">', text)[0]
        return f"{draft} Source [{label}] {FINDINGS[int(label) % len(FINDINGS)]}."
    if "Step 1: Is this a real answer" in text:
        return ("1\nAsked how language models can avoid hallucinating; the answer found that retrieval and checking "
                "claims against papers help.")
    if "describe the" in text or "JSON object" in text:     # PRISM's aspect descriptions, when the ranking asks
        return "The paper studies how retrieval grounds the answers of language models in documents."
    raise AssertionError("unexpected prompt: " + text[:200])


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """120 real papers, embedded once for the module."""
    import os

    saved = {k: os.environ.pop(k) for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "COPILOT_LLM", "COPILOT_DATA_DIR")
             if k in os.environ}
    services = Services(make_settings(tmp_path_factory.mktemp("deep") / "data"))
    papers = import_papers(services, 120)
    yield services, papers
    os.environ.update(saved)


def scripted(services: Services) -> tuple[Services, ScriptedBackend]:
    backend = ScriptedBackend([scripted_reply] * 20, obeys_grammar=True)   # a small model let write, as the 135M
    return Services(services.settings.model_copy(update={"model_profile": "capable"}), llm_backend=backend), backend


def test_a_finished_deep_answer_becomes_a_thought_with_every_retrieved_item_as_source(library):
    services, _ = scripted(library[0])
    *_, answer = stream_deep(services, QUESTION, "ana")
    record = answer.as_dict()
    assert answer.done and len(record["trace"]) == 3 and record["llm_calls"] == 1 + sum(
        1 for s in record["trace"] if s["retrieved"])
    assert record["citations"] and all(c["kind"] == "paper" for c in record["citations"])
    retrieved = [item["id"] for step in record["trace"] for item in step["retrieved"]]
    assert retrieved and len(retrieved) == len(set(retrieved))           # each step brings its own sources
    outcome = keep_as_thought(services, answer, "ana")
    assert outcome.status == "stored"
    edges = {row["source_id"] for row in services.db.query(
        "SELECT source_id FROM thought_edges WHERE thought_id = ?", (outcome.thought_id,))}
    assert edges == set(retrieved)


def test_a_stopped_deep_answer_stores_nothing_and_calls_nothing_more(library):
    services, backend = scripted(library[0])
    before = services.store.count("thought")
    stream = stream_deep(services, QUESTION, "bob")
    for answer in stream:
        if answer.run.rat and answer.run.rat.steps and answer.run.rat.steps[0].status != "pending":
            break
    stream.close()                        # what Gradio does when the page is left or "Stop" is clicked
    calls = len(backend.calls)
    assert calls == 2 and not answer.done
    with pytest.raises(UserError, match="not finished"):
        keep_as_thought(services, answer, "bob")
    assert services.store.count("thought") == before and len(backend.calls) == calls


def test_related_work_cites_only_papers_of_its_prism_pool(library):
    services, papers = library
    services, _ = scripted(services)
    query = related.parse_query(services, papers[7].id)
    draft = draft_related_work(services, query)
    record = draft.as_dict()
    assert record["done"] and papers[7].id not in record["pool"] and len(record["pool"]) <= 20
    cited = [c["id"] for c in record["citations"]]
    assert cited and set(cited) <= set(record["pool"])
    assert record["bibtex"].count("@misc{") == len(cited) and all(c["bibtex_key"] in record["latex"]
                                                                   for c in record["citations"])
    assert "Source [" not in record["text"]          # "Source [n] shows …" is written with the paper's authors
    named = [draft.papers[c["id"]] for c in record["citations"] if draft.papers[c["id"]].authors]
    assert all(p.authors[0].split()[-1] in record["text"] for p in named)


def test_deep_answer_and_related_work_with_the_packaged_model_through_the_cli(library, monkeypatch, capsys):
    services, papers = library
    clean_env(monkeypatch)
    monkeypatch.setenv("COPILOT_DATA_DIR", str(services.settings.data_dir))
    monkeypatch.setenv("COPILOT_LLM", "local")
    code, _, err = run_cli_in_process(capsys, "ask", QUESTION, "--mode", "deep", "--no-thought", "--json")
    assert code != 0 and "with the tiny local model the product writes no text" in err    # the default: no drafts
    monkeypatch.setenv("COPILOT_MODEL_PROFILE", "capable")                                  # the writing path
    code, printed, _ = run_cli_in_process(capsys, "ask", QUESTION, "--mode", "deep", "--no-thought", "--json")
    assert code == 0 and printed["mode"] == "deep" and printed["done"]
    assert set(printed) >= {"answer", "citations", "trace", "draft", "sources", "llm_calls"}
    assert [s["step"] for s in printed["trace"]] == list(range(1, len(printed["trace"]) + 1))
    for step in printed["trace"]:
        assert set(step) >= {"query", "retrieved", "before", "after", "status"}
    labels = {s["label"] for s in printed["sources"]}
    assert {int(n) for n in re.findall(r"\[(\d+)\]", printed["answer"])} <= labels    # no invented citation

    paper = papers[3]
    code, printed, _ = run_cli_in_process(capsys, "related-work", "--title", paper.title, "--abstract",
                                          paper.abstract, "--json")
    assert code == 0 and printed["done"] and printed["query"]["source"] == "input"
    assert {c["id"] for c in printed["citations"]} <= set(printed["pool"])
    assert printed["bibtex"].count("@misc{") == len({c["id"] for c in printed["citations"]})



def test_another_users_question_is_in_neither_the_trace_nor_the_prompt(library):
    """Issue #34: a retrieved thought's title is the question it was made from; only its user may see it, in the
    deep answer's trace and in the prompts that answer sends alike."""
    services, _ = scripted(library[0])
    secret = "What would Ann, privately, ask about hallucination of language models when answering questions?"
    paper = services.store.search("paper", services.embedder.embed_one(QUESTION), 1)[0]
    services.thought_memory.add("Language models hallucinate less when they answer from retrieved papers and check "
                                "their claims against them.", [(paper.id, "paper")], origin="deep",
                                question=secret, user="ann-private", check_redundant=False)

    def traced_thoughts(user: str) -> tuple[list[dict], ScriptedBackend]:
        services, backend = scripted(library[0])
        *_, answer = stream_deep(services, QUESTION, user)
        items = [item for step in answer.as_dict()["trace"] for item in step["retrieved"] if item["kind"] == "thought"]
        return items, backend

    thoughts, backend = traced_thoughts("bob-curious")
    assert thoughts, "the other user's thought is retrieved (shared memory)"
    assert all(item["title"] == "" for item in thoughts)
    assert not any(secret in message["content"] for call in backend.calls for message in call.messages)
    own, _ = traced_thoughts("ann-private")
    assert own and all(item["title"] == "" for item in own)      # no trace shows a stored question (issue #41)
