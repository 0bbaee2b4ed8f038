"""SlimPLM's decision branches, exactly, with scripted proxy and main models and a retriever over a few items."""

from __future__ import annotations

import math
import re

import pytest

from copilot import prompts
from copilot.features.adaptive import MainModelFailed, ask_adaptive, citations, log_record, proxy_llm
from copilot.llm import LLM, LLMError
from copilot.methods import slim
from copilot.methods.slim import SlimOptions, read_claims, read_verdict, timeliness
from copilot.records import Evidence
from copilot.services import Services
from copilot.store.db import Database
from tests.conftest import make_settings
from tests.doubles import ScriptedBackend, scripted_llm
from tests.helpers import clean_env

QUESTION = "How does retrieval-augmented generation reduce hallucination?"
HEURISTIC = "It retrieves documents and conditions the answer on them."
RAG = ("2501.00001", "RAG survey", "RAG conditions answers on documents.")
GROUNDING = ("2501.00002", "Grounding", "Grounded generation cuts errors.")
FAITH = ("2501.00003", "Faithfulness", "Faithful answers cite evidence.")
WHOLE = ("2501.00009", "Whole question", "Retrieval reduces hallucination.")


def paper(found: tuple[str, str, str], score: float) -> Evidence:
    return Evidence(found[0], "paper", found[1], found[2], score)


ITEMS = {
    "RAG retrieval documents": [paper(RAG, 0.8), paper(GROUNDING, 0.6)],
    "hallucination grounding": [paper(GROUNDING, 0.7), paper(FAITH, 0.5)],
    QUESTION: [paper(WHOLE, 0.9)],
}
DECOMPOSITION = ("Claim: Retrieval conditions the answer on documents Query: RAG retrieval documents\n"
                 "Claim: Grounded answers hallucinate less Query: hallucination grounding\n"
                 "Claim: Retrieval augmented generation was proposed by Lewis Query: RAG original paper Lewis\n")


class Library:
    """A retriever over ITEMS that records the queries it was asked."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def __call__(self, query: str, k: int) -> list[Evidence]:
        self.queries.append(query)
        return ITEMS.get(query, [])[:k]


@pytest.fixture
def db(tmp_path):
    return Database(tmp_path / "copilot.db")


def run(db, proxy_replies, question=QUESTION, main_reply="Retrieval grounds the answer [1]."):
    proxy, proxy_backend = scripted_llm(db, proxy_replies)
    main, main_backend = scripted_llm(db, [main_reply])
    library = Library()
    trace = slim.run(question, proxy=proxy, main=main, retriever=library, options=SlimOptions(top_k=8))
    assert len(main_backend.calls) == 1 and trace.main_calls == 1      # every branch: the main model once
    assert not proxy_backend.replies                                     # the proxy said all it was scripted to
    return trace, library, proxy_backend, main_backend


def main_prompt_name(db) -> str:
    return db.query("SELECT prompt_name FROM llm_calls ORDER BY id DESC LIMIT 1")[0]["prompt_name"]


def test_known_question_is_answered_without_retrieval(db):
    trace, library, proxy, main = run(db, [HEURISTIC, "known"], main_reply="It grounds answers in documents.")
    assert trace.skipped and not trace.retrieved and library.queries == []
    assert (trace.decided_by, trace.reason, trace.verdict) == ("judge", slim.JUDGED_KNOWN, "known")
    assert trace.heuristic_answer == HEURISTIC and trace.claims == [] and trace.items == []
    assert len(proxy.calls) == 2 and main_prompt_name(db) == "slim_answer_direct"
    assert "References" not in main.calls[0].text
    assert trace.answer == "It grounds answers in documents."


def test_unknown_question_retrieves_with_the_question_and_the_claims_not_judged_known_and_dedupes(db):
    trace, library, proxy, main = run(db, [HEURISTIC, "unknown", DECOMPOSITION, "unknown", "maybe?", "known"])
    assert [c.verdict for c in trace.claims] == ["unknown", "unclear", "known"]
    # the paper's QR(x, â): a query from the question itself, then the claims' (not the known claim's)
    assert library.queries == [QUESTION, "RAG retrieval documents", "hallucination grounding"]
    assert [item.id for item in trace.items] == ["2501.00009", "2501.00001", "2501.00002", "2501.00003"]  # 00002 once
    assert trace.items[2].score == 0.7 and trace.items[2].metadata["slim_query"] == "hallucination grounding"
    assert trace.retrieved and trace.reason == "judge: unknown; " + slim.CLAIMS_UNKNOWN and trace.decided_by == "judge"
    assert trace.claims[2].retrieved_ids == [] and trace.claims[0].retrieved_ids == ["2501.00001"]
    assert len(proxy.calls) == 6 and main_prompt_name(db) == "slim_answer_with_references"
    assert '<source id="3">' in main.calls[0].text and "Faithful answers cite evidence." in main.calls[0].text
    # the claim judge reads (query, claim) in the places of (question, answer)
    assert "Question: RAG retrieval documents" in proxy.calls[3].text
    assert "Draft answer: Retrieval conditions the answer on documents" in proxy.calls[3].text


def test_unknown_question_whose_claims_are_all_known_is_retrieved_for_with_the_question_alone(db):
    trace, library, _, _ = run(db, [HEURISTIC, "unknown", DECOMPOSITION, "known", "known", "Known (True)"],
                               main_reply="Plain answer.")
    assert library.queries == [QUESTION] and trace.retrieved
    assert trace.reason == "judge: unknown; " + slim.CLAIMS_ALL_KNOWN
    assert [item.id for item in trace.items] == ["2501.00009"] and all(not c.retrieved_ids for c in trace.claims)
    assert main_prompt_name(db) == "slim_answer_with_references"


@pytest.mark.parametrize("judge_output", ["", "maybe", "known unknown", "I think it is known", "yes", "Unknown!?"])
def test_a_judge_output_that_is_not_clearly_known_retrieves(db, judge_output):
    trace, library, _, _ = run(db, [HEURISTIC, judge_output, DECOMPOSITION, "unknown", "unknown", "unknown"])
    assert trace.retrieved and trace.verdict in ("unclear", "unknown") and library.queries
    assert trace.verdict == ("unknown" if judge_output == "Unknown!?" else "unclear")
    assert trace.reason == f"judge: {trace.verdict}; " + slim.CLAIMS_UNKNOWN


@pytest.mark.parametrize("decomposition", ["", "no claims here", "Claim: <the claim> Query: <the search query>",
                                           "Claim: x Query: y\nClaim: : Query: ?"])
def test_garbage_decomposition_retrieves_with_the_question(db, decomposition):
    trace, library, _, _ = run(db, [HEURISTIC, "unknown", decomposition])
    assert library.queries == [QUESTION] and trace.claims == [] and trace.reason == "judge: unknown; " + slim.NO_CLAIMS
    assert [item.id for item in trace.items] == ["2501.00009"] and trace.decomposition == decomposition.strip()


@pytest.mark.parametrize("question, rule", [
    ("What does 2502.01234 propose?", "arxiv id"),
    ("Summarize https://arxiv.org/abs/2502.01234v2", "arxiv id"),
    ("Which retrieval papers appeared in 2025?", "year"),
    ("What was posted on 2025-03-18 about agents?", "date"),
    ("What moved in March 2025?", "date"),
    ("What are recent advances in retrieval-augmented generation?", "recent work"),
    ("What is the latest work on speculative decoding?", "recent work"),
    ("What does the paper on token merging find?", "named paper"),
    ('What does "Attention Is All You Need" claim?', "named paper"),
    ("What did Lewis et al. show about RAG?", "named paper"),
])
def test_timeliness_rule_forces_retrieval_without_the_proxy(db, question, rule):
    trace, library, proxy, _ = run(db, [], question=question, main_reply="Answer.")
    assert proxy.calls == [] and library.queries == [question] and trace.retrieved
    assert trace.decided_by == "forced" and trace.reason == slim.FORCED and trace.forced_rule.startswith(rule + ":")


@pytest.mark.parametrize("question", ["What is a transformer?", "How does dropout regularize a network?",
                                      "Explain beam search.", "Why does batch normalization help training?"])
def test_general_questions_are_not_forced(question):
    assert timeliness(question) is None


@pytest.mark.parametrize("replies", [
    [LLMError("local model timed out after 120 s")],
    [HEURISTIC, LLMError("local model timed out after 120 s")],
    [HEURISTIC, "unknown", LLMError("the local model was busy")],
    [HEURISTIC, "unknown", DECOMPOSITION, "known", LLMError("the local model was busy")],
])
def test_proxy_failure_falls_back_to_always_retrieve_and_says_so(db, replies):
    trace, library, _, _ = run(db, replies)
    assert library.queries == [QUESTION] and trace.retrieved
    assert trace.decided_by == "proxy failure" and trace.reason == slim.PROXY_FAILED
    assert "local model" in trace.proxy_error


@pytest.mark.parametrize("draft", ["", "   \n"])
def test_an_empty_draft_retrieves_with_the_question_without_asking_the_judge(db, draft):
    trace, library, proxy, _ = run(db, [draft])
    assert len(proxy.calls) == 1 and library.queries == [QUESTION] and trace.retrieved
    assert trace.decided_by == "proxy failure" and trace.reason == slim.NO_DRAFT and trace.verdict == ""


def test_the_chat_tab_says_when_the_proxy_failed(db):
    from copilot.ui.chat.adaptive import slim_html

    trace, *_ = run(db, [LLMError("local model timed out after 120 s")])
    _, shown = slim_html(trace.as_dict())
    assert f"Retrieval <b>retrieved</b>: {slim.PROXY_FAILED}" in shown
    assert "The proxy failed: local model timed out after 120 s" in shown
    trace.costs[slim.MAIN].prompt_tokens = 0          # an endpoint that does not report its prompt tokens
    assert "main: 1 call(s), ?+" in slim_html(trace.as_dict())[1]


def test_main_failure_raises_after_exactly_one_call(db):
    proxy, _ = scripted_llm(db, [HEURISTIC, "known"])
    main, main_backend = scripted_llm(db, [LLMError("the endpoint failed", retryable=False)])
    with pytest.raises(LLMError):
        slim.run(QUESTION, proxy=proxy, main=main, retriever=Library())
    assert len(main_backend.calls) == 1


def test_a_grammar_obeying_proxy_is_held_to_one_word_and_to_claim_lines(db):
    backend = ScriptedBackend([HEURISTIC, "unknown", DECOMPOSITION, "unknown", "known", "known"], obeys_grammar=True)
    main, _ = scripted_llm(db, ["Answer [1]."])
    slim.run(QUESTION, proxy=LLM(backend, db, retries=0), main=main, retriever=Library())
    grammars = [call.grammar for call in backend.calls]
    assert grammars[0] == prompts.plain_sentences_grammar()
    assert grammars[1] == grammars[3] == prompts.slim_judge_grammar() == 'root ::= "known" | "unknown"'
    assert grammars[2] == prompts.slim_claims_grammar(prompts.SLIM_MAX_CLAIMS)


def test_the_answer_passes_the_shared_checks_and_its_citations_are_listed(db):
    trace, *_ = run(db, [HEURISTIC, "unknown", DECOMPOSITION, "unknown", "known", "known"],
                    main_reply="RAG conditions answers on documents [1] [7]. See https://evil.example/x")
    assert "[7]" not in trace.answer and "evil.example" not in trace.answer
    assert any("not retrieved" in note for note in trace.notes)
    assert [c["id"] for c in citations(trace)] == ["2501.00001"]


@pytest.mark.parametrize("output, verdict", [("known", "known"), ("unknown", "unknown"), (" Known. ", "known"),
                                             ("Known (False)", "unknown"), ("", "unclear"), ("unknownn", "unclear")])
def test_read_verdict(output, verdict):
    assert read_verdict(output) == verdict


def test_read_claims_keeps_well_formed_pairs_once_and_at_most_the_limit():
    output = DECOMPOSITION + "Claim: Another claim here Query: RAG retrieval documents\nClaim: Fourth one Query: q w"
    claims = read_claims(output, max_claims=3)
    assert [c.query for c in claims] == ["RAG retrieval documents", "hallucination grounding",
                                         "RAG original paper Lewis"]
    assert read_claims("<Claim> Grounding helps answers <Query> grounding answers")[0].text == "Grounding helps answers"


def test_the_log_stores_a_question_whole(settings):
    services = Services(settings, llm_backend=ScriptedBackend())
    trace, *_ = run(services.db, [HEURISTIC, "unknown", DECOMPOSITION, "unknown", "maybe", "known"])
    question_id = services.slim_log.add(log_record(trace, "ana", 1700000000.0, "proxy-model", "main-model"))
    stored = services.slim_log.get(question_id)
    assert stored.id == question_id and stored.user == "ana" and stored.question == QUESTION
    assert (stored.retrieved, stored.decided_by, stored.reason, stored.verdict) == (
        True, "judge", "judge: unknown; " + slim.CLAIMS_UNKNOWN, "unknown")
    assert stored.heuristic_answer == HEURISTIC and stored.decomposition == DECOMPOSITION.strip()
    assert [(c.query, c.verdict) for c in stored.claims] == [("RAG retrieval documents", "unknown"),
                                                             ("hallucination grounding", "unclear"),
                                                             ("RAG original paper Lewis", "known")]
    assert [(i.item_id, i.query) for i in stored.items] == [
        ("2501.00009", QUESTION), ("2501.00001", "RAG retrieval documents"),
        ("2501.00002", "hallucination grounding"), ("2501.00003", "hallucination grounding")]
    roles = {r.role: r for r in stored.roles}
    assert set(roles) == set(slim.ROLES) and stored.main_calls == 1
    assert (roles["proxy"].calls, roles["rewrite"].calls, roles["judge"].calls) == (1, 1, 4)
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in stored.roles)
    assert stored.answer == trace.answer and (stored.proxy_model, stored.main_model) == ("proxy-model", "main-model")
    assert [r.id for r in services.slim_log.recent("ana")] == [question_id] and services.slim_log.recent("bob") == []


def test_the_feature_logs_a_finished_question_and_nothing_when_the_main_model_fails(settings):
    services = Services(settings, llm_backend=ScriptedBackend([HEURISTIC, "known", "Plain answer."]))
    record = ask_adaptive(services, QUESTION, "ana")     # known: the library is never searched
    assert record["answer"] == "Plain answer." and record["trace"]["skipped"] and record["citations"] == []
    assert services.slim_log.get(record["log_id"]).main_calls == 1
    services.llm.backend.replies[:] = [HEURISTIC, "known", LLMError("the endpoint failed")]
    with pytest.raises(MainModelFailed, match="the endpoint failed"):
        ask_adaptive(services, QUESTION, "ana")
    assert [r.id for r in services.slim_log.recent("ana")] == [record["log_id"]]


def test_with_an_endpoint_as_main_model_the_proxy_is_a_local_model_from_the_same_settings(tmp_path, monkeypatch):
    clean_env(monkeypatch)
    services = Services(make_settings(tmp_path / "data", llm="openai", openai_api_key="sk-test"))
    proxy = proxy_llm(services)
    assert services.llm.backend.name == "openai" and proxy.backend.name == "local"
    assert proxy.db is services.db and proxy.backend.model.startswith("SmolLM2-135M-Instruct")


def test_the_chat_tab_shows_the_decision_trace_escaped(db):
    from copilot.ui.chat.adaptive import slim_html

    trace, *_ = run(db, ["It uses <script>x</script> documents.", "unknown", DECOMPOSITION, "unknown", "maybe",
                         "known"])
    answer, shown = slim_html(trace.as_dict())
    assert "Retrieval <b>retrieved</b>" in shown and "<script>" not in shown and "&lt;script&gt;" in shown
    assert shown.count('<li><q>') == 3 and "judge: unclear" in shown and "2501.00001" in shown
    # issue #38: the proxy's claims are folded and named as its own unchecked words, never a table of facts
    folded = shown[shown.index('<details class="slim-draft">'):shown.index("</details>")]
    assert "<table" not in shown and all(f"<q>{c['text']}" in folded for c in trace.as_dict()["claims"])
    assert "not facts" in folded and "Queries:" in shown and "(your question)" in shown
    assert 'href="https://arxiv.org/abs/2501.00009"' in answer and "Cost by role" in shown
    live = slim.SlimTrace(QUESTION, step="proxy", heuristic_answer="A draft.")
    assert "deciding… (proxy)" in slim_html(live.as_dict())[0] and "Cost by role" not in slim_html(live.as_dict())[1]


def test_an_answer_without_sources_says_so_on_the_page(db):
    # seen in the browser: "What is dropout?" judged known, answered wrongly, and nothing said it had no source
    from copilot.ui.chat.adaptive import SLIM_NO_SOURCES, slim_html

    trace, *_ = run(db, [HEURISTIC, "known"], main_reply="It grounds answers in documents.")
    assert SLIM_NO_SOURCES in slim_html(trace.as_dict())[0].replace("&#x27;", "'")
    retrieved, *_ = run(db, ["It uses documents.", "unknown", DECOMPOSITION, "unknown", "maybe", "known"])
    assert SLIM_NO_SOURCES not in slim_html(retrieved.as_dict())[0].replace("&#x27;", "'")


# --- a proxy that weighs the judge's two words (the local model) -----------------------------------------------------
class WeighingBackend(ScriptedBackend):
    """A scripted proxy that also scores options: each `option_logprobs` call takes the next {option: logprob}."""

    def __init__(self, replies, weights) -> None:
        super().__init__(list(replies))
        self.weights = list(weights)
        self.weighed: list[list[str]] = []

    def option_logprobs(self, messages, options, usage):
        self.weighed.append(list(options))
        usage.prompt_tokens, usage.completion_tokens = 40, 0
        return self.weights.pop(0)


def weighed_run(db, replies, weights, threshold):
    backend = WeighingBackend(replies, weights)
    proxy = LLM(backend, db, retries=0)
    main, main_backend = scripted_llm(db, ["Retrieval grounds the answer [1]."])
    library = Library()
    trace = slim.run(QUESTION, proxy=proxy, main=main, retriever=library,
                     options=SlimOptions(top_k=8, unknown_threshold=threshold))
    assert len(main_backend.calls) == 1 and not backend.replies and not backend.weights
    return trace, library, backend


def weights(p_unknown: float) -> dict[str, float]:
    return {"known": 0.0, "unknown": math.log(p_unknown / (1 - p_unknown))}


def test_a_weighing_proxy_is_judged_by_its_probability_of_unknown_against_the_threshold(db):
    # P(unknown) 0.20: below the greedy word's 0.5, above the threshold 0.14 → unknown → claims, each weighed
    trace, library, backend = weighed_run(db, [HEURISTIC, DECOMPOSITION],
                                          [weights(0.20), weights(0.30), weights(0.05), weights(0.15)], 0.14)
    assert trace.verdict == "unknown" and trace.p_unknown == pytest.approx(0.20)
    assert trace.judge_output == "P(unknown) 0.200 ≥ threshold 0.140"
    assert [c.verdict for c in trace.claims] == ["unknown", "known", "unknown"]
    assert [round(c.p_unknown, 2) for c in trace.claims] == [0.30, 0.05, 0.15]
    assert library.queries == [QUESTION, "RAG retrieval documents", "RAG original paper Lewis"]
    assert backend.weighed == [["known", "unknown"]] * 4 and len(backend.calls) == 2   # draft + decomposition only
    assert trace.costs["judge"].calls == 4 and trace.costs["judge"].prompt_tokens == 160
    logged = db.query("SELECT output FROM llm_calls WHERE prompt_name = 'slim_judge' ORDER BY id")
    assert len(logged) == 4 and logged[0]["output"].startswith("known 0.000 · unknown -1.386")


def test_below_the_threshold_the_question_is_answered_without_retrieval(db):
    trace, library, backend = weighed_run(db, [HEURISTIC], [weights(0.10)], 0.14)
    assert (trace.verdict, trace.reason, trace.skipped) == ("known", slim.JUDGED_KNOWN, True)
    assert trace.judge_output == "P(unknown) 0.100 < threshold 0.140" and library.queries == []


def test_without_a_threshold_a_weighing_proxy_writes_its_word(db):
    trace, library, backend = weighed_run(db, [HEURISTIC, "known"], [], None)
    assert trace.verdict == "known" and trace.p_unknown is None and backend.weighed == []


def test_the_trace_shows_the_weighed_verdict(db):
    from copilot.ui.chat.adaptive import slim_html
    trace, _, _ = weighed_run(db, [HEURISTIC, DECOMPOSITION],
                              [weights(0.20), weights(0.30), weights(0.05), weights(0.15)], 0.14)
    trace.step = "answered"
    _, steps = slim_html(trace.as_dict())
    assert "weighed its two words: <code>P(unknown) 0.200 ≥ threshold 0.140</code>" in steps
    assert "judge: known (P(unknown) 0.05)</li>" in steps


class FloorLibrary(Library):
    """ITEMS, each scored by its closeness to the question when asked with it (the product's paper retriever)."""
    CLOSENESS = {"2501.00001": 0.62, "2501.00002": 0.21, "2501.00003": 0.30, "2501.00009": 0.9}

    def __call__(self, query: str, k: int, question: str | None = None) -> list[Evidence]:
        found = super().__call__(query, k)
        if question is None:
            return found
        return [Evidence(i.id, i.kind, i.title, i.text, self.CLOSENESS[i.id], i.metadata) for i in found]


def test_a_query_the_proxy_wrote_keeps_only_papers_over_the_question_relevance_floor(db):
    """Issue #49: a query made from the proxy's (garbled) draft brought papers of other topics into the references.
    With a floor, what such a query finds is scored by its closeness to the question and kept only above it."""
    proxy, _ = scripted_llm(db, [HEURISTIC, "unknown", DECOMPOSITION, "unknown", "unknown", "known"])
    main, _ = scripted_llm(db, ["Retrieval grounds the answer [1]."])
    library = FloorLibrary()
    trace = slim.run(QUESTION, proxy=proxy, main=main, retriever=library,
                     options=SlimOptions(top_k=8, query_floor=0.35))
    assert library.queries == [QUESTION, "RAG retrieval documents", "hallucination grounding"]
    assert [(item.id, item.score) for item in trace.items] == [("2501.00009", 0.9), ("2501.00001", 0.62)]
    assert trace.claims[1].retrieved_ids == []          # its query found only papers under the floor


def test_the_page_labels_the_references_in_the_order_the_answer_cites_them(db):
    """Issue #49: the quoted table ranks its rows by the question, not by retrieval: the page showed [1], [4], [3], [2].
    The answer and the references are numbered by first citation."""
    from copilot.ui.chat.adaptive import slim_html

    trace = slim.SlimTrace(QUESTION, step="answered", retrieved=True, reason="r", answer="A [3]. B [1]. C [2].",
                           items=[paper(RAG, 0.8), paper(GROUNDING, 0.7), paper(FAITH, 0.6)])
    answer, shown = slim_html(trace.as_dict())
    assert re.findall(r"\[(\d)\]", re.sub(r"<[^>]+>", "", answer)) == ["1", "2", "3"]
    refs = re.findall(r"\[(\d)\] <a [^>]*arxiv\.org/abs/([\d.]+)", shown)
    assert refs == [("1", FAITH[0]), ("2", RAG[0]), ("3", GROUNDING[0])]
