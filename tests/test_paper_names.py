"""Names find their paper (issue #57): the name index of methods.paper_names, pure (the `unit` tier)."""

from __future__ import annotations

import time

import pytest

from copilot.methods.paper_names import AUTHOR, ID, NAME, TITLE, Entry, NameIndex, coined_name, looks_made_up

LIBRARY = [
    Entry("2503.18102", "AgentRxiv: Towards Collaborative Autonomous Research", ("Samuel Schmidgall", "Michael Moor"),
          2025),
    Entry("2504.12516", "BrowseComp: A Simple Yet Challenging Benchmark for Browsing Agents",
          ("Jason Wei", "Zhiqing Sun"), 2025),
    Entry("2503.16252", "Fin-R1: A Large Language Model for Financial Reasoning through Reinforcement Learning",
          ("Zhaowei Liu", "Xin Guo"), 2025),
    Entry("2503.20000", "Chameleon: Mixed-Modal Early-Fusion Foundation Models", ("Ann Lee", "Bo Chen"), 2025),
    Entry("2502.11111", "Reasoning Language Models: A Blueprint", ("Maciej Besta", "Julia Barth"), 2025),
    Entry("2408.22222", "Graph of Thoughts: Solving Elaborate Problems with Large Language Models",
          ("Maciej Besta", "Nils Blach"), 2024),
    Entry("2503.33333", "Affordable AI Assistants with Knowledge Graph of Thoughts",
          ("Maciej Besta", "Lorenzo Paleari"), 2025),
    Entry("2504.44444", "Qwen2.5-Omni Technical Report", ("Jin Xu", "Zhifang Guo"), 2025),
    Entry("2504.55555", "Vision-Language Models for Medical Report Generation", ("Ana Ruiz", "Li Wei"), 2025),
    Entry("2504.66666", "Scaling Test-Time Compute with Open Deep Search", ("Salaheddin Alzubi",), 2025),
    Entry("2504.77777", "Open Deep Search: Democratizing Search with Open-source Reasoning Agents",
          ("Salaheddin Alzubi", "Creston Brooks"), 2025),
    Entry("2504.88888", "Adrian's Method", ("Adrian Del Maestro", "Bo Chen"), 2025),
    Entry("2506.12345", "MADE: A Multilingual Agentic Diagnosing Engine", ("Kim Lo",), 2025),
] + [Entry(f"2505.{n:05d}", f"GRPO: variant number {n} of policy optimisation", (f"Author{n} Person",), 2025)
     for n in range(6)] + [Entry(f"2506.{n:05d}", f"LLMs: a study of topic {n}", ("Pat Doe",), 2025) for n in range(2)]


@pytest.fixture(scope="module")
def index() -> NameIndex:
    return NameIndex(LIBRARY)


def names(index: NameIndex, question: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(m.kind, m.ids) for m in index.mentions(question)]


@pytest.mark.parametrize("title, name", [
    ("AgentRxiv: Towards Collaborative Autonomous Research", "AgentRxiv"),
    ("Qwen2.5-Omni Technical Report", "Qwen2.5-Omni"),
    ("Open Deep Search: Democratizing Search", "Open Deep Search"),
    ("Vision-Language Models for Medical Report Generation", ""),
    ("A Survey of Everything in Machine Learning: Parts and Wholes", ""),      # more than a name
])
def test_coined_name_of_a_title(title, name):
    assert coined_name(title) == name


@pytest.mark.parametrize("token, made_up", [("AgentRxiv", True), ("Fin-R1", True), ("MKG-Rank", True),
                                            ("Vision-Language", False), ("Risk-Based", False), ("Atlas", False)])
def test_looks_made_up(token, made_up):
    assert looks_made_up(token) is made_up


@pytest.mark.parametrize("question, paper", [
    ("Who rated the samples of BrowseComp, and how reliable were they?", "2504.12516"),
    ("what data does agentrxiv use for its evaluation?", "2503.18102"),        # a made-up name in any case
    ("How much compute did Fin-R1 need to train?", "2503.16252"),
    ("What are the limits of Qwen2.5-Omni on speech?", "2504.44444"),
    ("Where is the code of Open Deep Search?", "2504.77777"),
    ("How is Chameleon evaluated?", "2503.20000"),
])
def test_a_coined_name_finds_its_paper(index, question, paper):
    assert names(index, question) == [(NAME, (paper,))]


def test_an_ordinary_word_name_needs_its_capitals(index):
    assert names(index, "Does a chameleon change colour, and do open deep search engines help?") == []
    assert names(index, "Can a model be made to forget?") == []
    assert names(index, "What does MADE diagnose?") == [(NAME, ("2506.12345",))]


def test_a_name_in_many_titles_is_a_term_not_a_name(index):
    assert names(index, "How does GRPO compare with PPO for LLMs?") == []


def test_a_name_inside_a_longer_hyphenated_word_is_not_that_name(index):
    assert names(index, "Is there an AgentRxiv-like platform for chemistry?") == []


def test_a_whole_title_names_its_paper_before_its_coined_name(index):
    question = "In 'Open Deep Search: Democratizing Search with Open-source Reasoning Agents', what is evaluated?"
    assert names(index, question) == [(TITLE, ("2504.77777",))]
    assert names(index, "What does scaling test-time compute with open deep search cost?") == \
        [(TITLE, ("2504.66666",))]


@pytest.mark.parametrize("question, ids", [
    ("What data did Besta et al. 2025 use?", ("2502.11111", "2503.33333")),      # two papers: ambiguous
    ("What data did Besta et al. (2024) use?", ("2408.22222",)),
    ("As Besta et al., 2024 show, what is the cost?", ("2408.22222",)),
    ("Which baselines does Besta and Blach (2024) compare?", ("2408.22222",)),
    ("What does Del Maestro et al. 2025 measure?", ("2504.88888",)),
    ("What does Besta (2024) measure?", ("2408.22222",)),
])
def test_first_author_and_year(index, question, ids):
    assert names(index, question) == [(AUTHOR, ids)]


def test_an_author_and_year_the_library_lacks_names_nothing(index):
    assert names(index, "What did Besta et al. 2019 find? And Smith et al. 2025?") == []
    assert names(index, "Is Besta and Blach a good pair?") == []          # no year: no citation


def test_a_name_that_fits_several_papers_says_so(index):
    mentions = index.mentions("How do Besta et al. 2025 evaluate their methods?")
    assert len(mentions) == 1 and mentions[0].ambiguous and mentions[0].text == "Besta et al. 2025"


@pytest.mark.parametrize("written", ["2503.18102", "arXiv:2503.18102v2", "https://arxiv.org/abs/2503.18102",
                                     "(https://arxiv.org/pdf/2503.18102v1)"])
def test_an_id_or_link_is_a_lookup(index, written):
    assert names(index, f"What does {written} evaluate?") == [(ID, ("2503.18102",))]


def test_an_id_the_library_lacks_is_said_not_matched(index):
    assert names(index, "What does 2501.99999 do?") == [(ID, ())]


def test_digits_around_an_id_are_not_an_id(index):
    assert names(index, "numbers 12503.18102 and 2503.181023 and v1.2503.18102") == []


def test_an_id_next_to_a_long_pasted_token_is_found(index):
    token = "x9" * 450                      # 900 characters of one pasted word
    for question in (f"{token} 2503.18102 what does it evaluate?", f"What is 2503.18102? {token}",
                     f"{token}\n2503.18102 {token}"):
        assert (ID, ("2503.18102",)) in names(index, question)


@pytest.mark.parametrize("hostile", [
    "et al " * 700, "Besta et al. " * 300, "a" * 4000, "-" * 4000, "2503." * 800, "Open Deep " * 400,
    "Besta (" * 600 + "2025", "x-" * 2000, "hep-th/" * 500, "AgentRxiv " * 400,
])
def test_hostile_questions_are_read_in_linear_time(index, hostile):
    started = time.perf_counter()
    found = index.mentions(hostile[:4000])
    assert time.perf_counter() - started < 0.5
    assert len(found) <= 12


def test_time_grows_linearly_with_the_question(index):
    def seconds(text: str) -> float:
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            index.mentions(text)
            best = min(best, time.perf_counter() - started)
        return best

    piece = "How do the et al methods of x-y-z and Open Deep compare in (2025), by Smith and Jones 2024? "
    short, long = seconds(piece * 40), seconds(piece * 320)      # no name of the library: nothing stops the reading
    assert long < 8 * short * 3


def test_the_dev_set_reads_and_the_eval_summarises(tmp_path):
    from copilot.eval import named_eval
    from tests.helpers import ROOT

    dev = named_eval.read_questions(ROOT / "tests" / "data" / "named-dev.jsonl")
    assert len(dev) >= 30 and {row["names_by"] for row in dev} == set(named_eval.KINDS)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "What does X do?"}\n', encoding="utf-8")
    with pytest.raises(named_eval.NamedDataError, match="bad.jsonl:1"):
        named_eval.read_questions(bad)
    rows = [{"question": "q1", "names_by": "name", "heads_table": True, "in_table": True, "retrieved": True,
             "search_first": False, "in_search": True, "seconds": 0.5},
            {"question": "q2 | x", "names_by": "id", "heads_table": False, "in_table": True, "retrieved": True,
             "search_first": False, "in_search": False, "seconds": 1.5}]
    summary = named_eval.summarise(rows)
    assert summary["heads_table"] == 0.5 and summary["in_table_count"] == 2
    assert summary["by_kind"]["id"]["in_table"] == 1
    report = {"summary": summary, "per_question": rows, "meta": {"papers_in_library": 2, "model_profile": "tiny",
                                                                 "load_avg": [1.0]}}
    text = named_eval.markdown(report)
    assert "| named paper heads Chat's table | 0.5 (1) | 1.0 | 0.0 |" in text and "q2 / x" in text
