"""Trends feature: range checks, profile selection by RRF, citation check, the staged pipeline with a scripted
LLM (failure mid-way, thoughts with lineage, cache), and one end-to-end run with the real local model (CLI)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import date

import numpy as np
import pytest

from copilot.features import trends as tr
from copilot.llm import LLMError
from copilot.methods.fusion import reciprocal_rank_fusion
from copilot.services import Services
from tests.conftest import ROOT, make_settings, read_rows
from tests.doubles import ScriptedBackend
from tests.helpers import app_env, clean_env

# Rows of the shared corpus listed 2025-05-05 … 2025-05-16: two arXiv weeks (~100 papers each).
WEEK_ROWS = (1745, 1953)
LAST_DAY = date(2025, 5, 16)


@pytest.fixture(scope="module")
def week_dir(tmp_path_factory):
    """A data dir holding two real weeks of papers, imported once through the real CLI."""
    root = tmp_path_factory.mktemp("trends-week")
    snapshot = root / "week.jsonl"
    rows = read_rows(tr_path(), WEEK_ROWS[0], WEEK_ROWS[1] - WEEK_ROWS[0])
    snapshot.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = root / "data"
    subprocess.run([sys.executable, "-m", "copilot", "import", str(snapshot)], cwd=ROOT, env=app_env(data),
                   check=True, capture_output=True, timeout=600)
    return data


def tr_path():
    from tests.conftest import PAPERS_JSONL
    return PAPERS_JSONL


@pytest.fixture
def week(week_dir, tmp_path, monkeypatch):
    clean_env(monkeypatch)
    data = tmp_path / "week-data"
    shutil.copytree(week_dir, data)
    return Services(make_settings(data))


def fake_reply(messages) -> str:
    """Replies by prompt kind, citing one real id from its sources and one invented id."""
    text = "\n".join(m["content"] for m in messages)
    first_id = text.split('<source id="')[1].split('"')[0] if '<source id="' in text else "2501.00000"
    if "These papers form the topic" in text:
        return (f"They study this topic with new benchmarks and shared evaluation protocols [{first_id}] "
                "and more [9999.99999].")
    if "Topics of the period" in text:
        return f"The period moved on many fronts, with new models, data sets and evaluation methods [{first_id}]."
    if "Answer the task with step-by-step" in text:
        return ("Idea one: combine sparse retrieval with reranking to cut the cost of searching long documents.\n\n"
                "Idea two: test whether small instruction-tuned models keep their accuracy on new benchmarks "
                "[8888.88888].")
    if "Write ONE short" in text:
        return "search query"
    if "Revise the draft" in text:
        draft = text.split("##Draft:\n")[1].split("\n\n##Instruction")[0]
        return draft + f" [{first_id}]"
    raise AssertionError("unexpected prompt: " + text[:200])


def use_script(services: Services, replies) -> tuple[Services, ScriptedBackend]:
    """Services over the same data with a scripted model passed in at construction, and that model."""
    backend = ScriptedBackend(list(replies))
    return Services(services.settings, llm_backend=backend), backend


SMALL = dict(summarized_topics=3, ideas=2, store_thoughts=True)


# --- pure parts ------------------------------------------------------------------------------------------------
def test_rrf_arithmetic_on_hand_made_lists():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "a"]], k=60)
    scores = {item: score for item, score, _ in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 62)
    assert [item for item, _, _ in fused] == ["b", "a", "c"]
    # the same through the profile ranking: two queries that rank the papers a,b,c and b,c,a
    vectors = np.eye(3, dtype=np.float32)
    queries = [np.array([3, 2, 1], np.float32), np.array([1, 3, 2], np.float32)]
    assert tr.rank_by_profile(["a", "b", "c"], vectors, queries) == ["b", "a", "c"]


def test_citation_check_drops_an_invented_id():
    from copilot.grounding import keep_paper_citations  # the one checker of id citations (Trends and Profile)
    text, cited, dropped = keep_paper_citations("Uses graphs [2505.01234] and tricks [9999.99999], see 2505.04321.",
                                                ["2505.01234", "2505.04321"])
    assert cited == ["2505.01234", "2505.04321"] and dropped == ["9999.99999"]
    assert "9999.99999" not in text and "[2505.01234]" in text and "tricks," in text
    credited, ids = tr.cite_or_credit("No citation at all [1234.56789].", ["2505.00001", "2505.00002"])
    assert ids == ["2505.00001", "2505.00002"] and "1234.56789" not in credited
    assert credited.endswith("(from [2505.00001], [2505.00002])")


def test_even_sample_keeps_the_time_profile():
    from tests.conftest import sample_papers
    papers = sample_papers(100, 1745)
    picked = tr.even_sample(papers, 10)
    assert len(picked) == 10 and picked == sorted(picked, key=lambda p: (p.published, p.id))
    assert picked[0].published == min(p.published for p in papers)
    assert picked[-1].published == max(p.published for p in papers)


# --- ranges ----------------------------------------------------------------------------------------------------
def test_ranges_presets_and_bad_input(week, services):
    assert tr.resolve_range(week, "day") == (LAST_DAY, LAST_DAY)
    assert tr.resolve_range(week, "week") == (date(2025, 5, 10), LAST_DAY)
    assert tr.resolve_range(week, "month") == (date(2025, 4, 17), LAST_DAY)
    assert tr.resolve_range(week, "custom", "2025-05-06", "2025-05-07") == (date(2025, 5, 6), date(2025, 5, 7))
    # the widest dates a user can type are narrowed to the corpus (they overflowed the previous window before)
    assert tr.resolve_range(week, "custom", "0001-01-01", "9999-12-31") == tr.corpus_span(week)
    with pytest.raises(tr.TrendsError, match="after the end"):
        tr.resolve_range(week, None, "2025-05-09", "2025-05-06")
    with pytest.raises(tr.TrendsError, match="outside the corpus"):
        tr.resolve_range(week, None, "2026-01-01", "2026-01-31")
    with pytest.raises(tr.TrendsError, match="not a date"):
        tr.resolve_range(week, None, "May 5", "2025-05-06")
    with pytest.raises(tr.TrendsError, match="no papers yet"):
        tr.resolve_range(services, "week")
    with pytest.raises(tr.TrendsError, match="no papers between"):       # a weekend inside the corpus
        next(tr.iter_trends(week, date(2025, 5, 10), date(2025, 5, 11)))


def test_category_filter_and_cap_without_profile(week):
    chosen, vectors, in_range = tr.select_papers(week, date(2025, 5, 12), LAST_DAY, ["cs.IR"], None, 300)
    assert chosen and in_range == len(chosen) < 106 and vectors.shape == (len(chosen), 384)
    assert all(p.primary_category == "cs.IR" for p in chosen)
    capped, _, total = tr.select_papers(week, date(2025, 5, 12), LAST_DAY, None, None, 25)
    assert total == 106 and len(capped) == 25


# --- the pipeline with a scripted LLM ----------------------------------------------------------------------------
def test_pipeline_stages_citations_thoughts_and_cache(week):
    week, backend = use_script(week, [fake_reply] * 40)
    opts = tr.TrendsOptions(**SMALL)
    reports = list(tr.iter_trends(week, date(2025, 5, 12), LAST_DAY, opts=opts))
    first, final = reports[0], reports[-1]
    assert first is final and final.done          # one report object grows stage by stage
    assert final.in_range == 106 and final.papers == 106 and final.selection == "all"
    assert final.previous == (date(2025, 5, 7), date(2025, 5, 11)) and final.previous_papers > 0
    assert all(t.rising is not None for t in final.topics)

    given = set(final.titles)
    for topic in final.topics[:3]:
        assert "9999.99999" not in topic.summary and topic.extra["summary_ids"]
        assert set(topic.extra["summary_ids"]) <= set(topic.paper_ids[:3])
    assert all(not t.summary for t in final.topics[3:])
    assert final.summary.startswith("The period moved") and set(final.summary_ids) <= given
    assert len(final.ideas) == 2 and all("8888.88888" not in i.text for i in final.ideas)
    for idea in final.ideas:
        assert idea.paper_ids and len(idea.trace) == 1
        assert idea.trace[0]["query"] == "search query" and idea.trace[0]["retrieved"]

    out = final.as_json()
    assert set(out) == {"papers", "topics", "summary", "ideas"}
    assert set(out["topics"][0]) == {"label", "terms", "paper_ids", "counts", "rising", "summary"}
    assert set(out["ideas"][0]) == {"text", "paper_ids", "trace"}
    json.dumps(out)

    # summaries and ideas are thoughts with lineage to their papers
    assert len(final.thought_ids) >= 3
    edges = week.db.query("SELECT source_id, source_kind FROM thought_edges WHERE thought_id = ?",
                          (final.thought_ids[0],))
    assert edges and {e["source_id"] for e in edges} <= set(final.topics[0].paper_ids[:3])
    assert week.store.count("thought") == len(final.thought_ids)

    calls = len(backend.calls)
    cached = list(tr.iter_trends(week, date(2025, 5, 12), LAST_DAY, opts=opts))
    assert len(cached) == 1 and cached[0].cached and cached[0].as_json() == out
    assert len(backend.calls) == calls                                   # no LLM call for a cached report
    fresh = list(tr.iter_trends(week, date(2025, 5, 12), LAST_DAY, opts=opts, refresh=True))[-1]
    assert not fresh.cached and len(backend.calls) > calls


def test_llm_failure_mid_way_keeps_topics_and_says_which_summary_failed(week):
    replies = [fake_reply, LLMError("model crashed")] + [fake_reply] * 30
    week, _ = use_script(week, replies)
    opts = tr.TrendsOptions(**SMALL)
    final = tr.run_trends(week, date(2025, 5, 12), LAST_DAY, opts=opts)
    assert final.done and len(final.topics) >= 3
    assert final.topics[1].summary == ("The model could not summarize this topic (model crashed). Its papers are "
                                       "listed below.")
    assert final.topics[0].summary and "failed" not in final.topics[0].summary
    assert final.failures and final.ideas
    assert week.db.query_one("SELECT COUNT(*) AS n FROM trends_cache")["n"] == 0     # a failed run is not cached


def test_ideas_failure_leaves_summaries(week):
    def fail_ideas(messages):  # an LLMError raised by a scripted reply is a failed call
        if "Answer the task with step-by-step" in messages[-1]["content"]:
            raise LLMError("no ideas today")
        return fake_reply(messages)

    week, _ = use_script(week, [fail_ideas] * 30)
    final = tr.run_trends(week, date(2025, 5, 12), LAST_DAY, opts=tr.TrendsOptions(**SMALL))
    assert final.ideas == [] and final.ideas_error == ("The model could not propose ideas (no ideas today). The "
                                                       "topics and summaries stand.")
    assert final.summary and final.topics[0].summary


def test_profile_ranks_the_range_by_rrf_and_the_cap_applies(week):
    from copilot.features.profile import save_profile

    papers = week.store.papers_between(20250512, 20250516)
    mine = papers[5]
    profile = save_profile(week, "ana", "I work on " + mine.title, ["retrieval"], [mine.id])
    week, _ = use_script(week, [fake_reply] * 30)
    final = tr.run_trends(week, date(2025, 5, 12), LAST_DAY, user="ana",
                          opts=tr.TrendsOptions(cap=20, summarized_topics=1, ideas=1, for_me=True))
    assert final.selection == "profile" and final.profile_version == profile.version
    assert final.papers == 20 and final.in_range == 106 and any("capped at 20" in n for n in final.notices)
    vectors = week.store.paper_embeddings([p.id for p in papers])
    ids = [p.id for p in papers]
    queries = [week.embedder.embed_one(profile.text), vectors[mine.id]]
    expected = tr.rank_by_profile(ids, np.stack([vectors[i] for i in ids]), queries)[:20]
    assert {pid for t in final.topics for pid in t.paper_ids} == set(expected)
    assert mine.id in expected[:2]
    field = tr.run_trends(week, date(2025, 5, 12), LAST_DAY, user="ana",      # issue #38: the field by default
                          opts=tr.TrendsOptions(cap=20, summarized_topics=1, ideas=1))
    assert field.selection == "all" and field.profile_version is None
    assert {pid for t in field.topics for pid in t.paper_ids} == {p.id for p in tr.even_sample(papers, 20)}
    assert any("spread evenly" in n for n in field.notices)


# --- the real local model, through the CLI ---------------------------------------------------------------------
def test_week_of_real_papers_with_the_local_model_through_the_cli(week, monkeypatch, capsys):
    from copilot import cli

    monkeypatch.setenv("COPILOT_DATA_DIR", str(week.settings.data_dir))
    monkeypatch.setenv("COPILOT_LLM", "local")
    monkeypatch.setenv("COPILOT_ANSWER_MAX_TOKENS", "48")
    monkeypatch.setenv("COPILOT_SCHEDULER", "false")
    monkeypatch.setenv("COPILOT_MODEL_PROFILE", "capable")     # the writing path; the default quotes (below)
    assert cli.main(["trends", "--range", "week", "--summaries", "2", "--ideas", "2", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert set(out) == {"papers", "topics", "summary", "ideas", "ideas_status", "ideas_note"} and out["papers"] == 106
    assert out["ideas_status"] == ("shown" if out["ideas"] else "none_passed") and bool(out["ideas_note"]) != bool(
        out["ideas"])
    shown = {pid for t in out["topics"] for pid in t["paper_ids"]}
    assert sum(len(t["paper_ids"]) for t in out["topics"]) == 106
    summarized = [t for t in out["topics"] if t["summary"]]
    assert summarized and all(t["summary"].strip() for t in summarized)
    assert "failed" not in out["summary"] and out["summary"].strip()
    # the local model writes under a grammar: statements that open with a paper it was given, ideas that propose
    from copilot.grounding import cited
    for topic in summarized:
        assert topic["summary"].startswith("Paper [") and set(cited(topic["summary"])) <= set(topic["paper_ids"][:3])
    assert out["summary"].startswith("Paper [") and "Cite papers" not in out["summary"]
    assert all(idea["text"].startswith("Idea: ") for idea in out["ideas"])
    for topic in out["topics"]:
        assert sum(topic["counts"].values()) == len(topic["paper_ids"])
    assert "seconds:" in captured.err
    for idea in out["ideas"]:
        assert idea["text"] and idea["trace"] and {"query", "retrieved", "before", "after"} <= set(idea["trace"][0])
        assert set(idea["paper_ids"]) <= shown | {pid for s in idea["trace"] for pid in s["retrieved"]}


def test_the_tiny_profile_quotes_central_papers_through_the_cli(week, monkeypatch, capsys):
    """The default profile on the packaged model: summaries are key sentences of the topics' central papers, quoted
    verbatim and cited; no model writes them; ideas are off and the page says why."""
    from copilot import cli
    from copilot.methods.quotes import CLOSE_QUOTE, OPEN_QUOTE

    monkeypatch.setenv("COPILOT_DATA_DIR", str(week.settings.data_dir))
    monkeypatch.setenv("COPILOT_LLM", "local")
    monkeypatch.setenv("COPILOT_SCHEDULER", "false")
    assert cli.main(["trends", "--range", "week", "--summaries", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    abstracts = {p.id: " ".join(p.abstract.split()) for p in week.store.get_papers(
        [pid for t in out["topics"] for pid in t["paper_ids"]])}
    line = re.compile(rf"^(?:(?P<label>[^\n:]+): )?\[(?P<id>[^\]]+)\] "
                      rf"{OPEN_QUOTE}(?P<quote>[^{CLOSE_QUOTE}]+){CLOSE_QUOTE}$")
    summarized = [t for t in out["topics"] if t["summary"]]
    assert len(summarized) == 3
    for topic in summarized:
        for row in topic["summary"].split("\n"):
            found = line.match(row)
            assert found and found.group("id") in topic["paper_ids"][:2], row
            assert found.group("quote") in abstracts[found.group("id")], row
    rows = out["summary"].split("\n")
    assert len(rows) == 3 and all(line.match(r) and line.match(r).group("label") for r in rows), rows
    assert out["ideas"] == []
    assert week.db.query_one("SELECT COUNT(*) AS n FROM llm_calls")["n"] == 0     # no model words at all


def test_page_escapes_model_text_and_links_only_citations():
    from copilot.ui.trends import linked

    html = linked('<img src=x onerror=alert(1)> see [2505.01234] and [not-an-id]')
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert 'href="https://arxiv.org/abs/2505.01234"' in html and html.count("<a ") == 1
    several = linked("as [2505.01234, hep-th/9901001] show")
    assert several.count("<a ") == 2 and 'href="https://arxiv.org/abs/hep-th/9901001"' in several


def test_tidy_drops_repeats_and_a_cut_off_citation():
    raw = ("Topic: A new way to learn!\n\n[2606.26535]\n\nThis is a summary.\n\n[2606.26535]\n\n"
           "This is a summary.\n\n[2606.2")
    from copilot.grounding import tidy  # the one output tidier (Trends and Profile)
    assert tidy(raw, paragraphs=False) == "Topic: A new way to learn! [2606.26535] This is a summary."
    text, ids = tr.cite_or_credit(raw, ["2606.26535"])
    assert ids == ["2606.26535"] and text.count("2606.26535") == 1


def test_ideas_keep_their_support_with_the_paper_it_comes_from_and_drop_copies():
    from copilot.methods.rat import RATResult

    # recorded from the 135M model under the ideas grammar: the second idea copied the first one's support
    # sentence and gave it another retrieved id
    text = ("Idea: Adapt machine learning triage of hospitals in Finland to emergency departments. Support: "
            "[2503.14917] introduces a case study "
            "on how AI can be used for healthcare in Finland.\n\n"
            "Idea: Extend sparse autoencoders for judging language model outputs. Support: [2503.14917] introduces "
            "a case study "
            "on how AI can be used for healthcare in Finland.")
    papers = {"2503.14828": "Healthcare AI in Finland: a case study of hospitals adopting machine learning triage",
              "2503.14917": "Sparse autoencoders for judging language model outputs on benchmarks",
              "2503.15168": "Vision-language models for scene maps in autonomous driving"}
    result = RATResult(task="Propose ideas", draft=text, raw_steps=[], text=text)
    ideas = tr.ideas_from_rat(result, papers, 3)
    assert len(ideas) == 1 and ideas[0].paper_ids == ["2503.14828"]
    assert ideas[0].text.startswith("Idea: Adapt") and "[2503.14828] introduces a case study" in ideas[0].text


def test_an_idea_must_share_its_words_with_the_papers_and_its_support_with_the_cited_one():
    ids = ["2503.14828", "2503.14917", "2503.15168"]
    texts = ["Healthcare AI in Finland: a case study of hospitals adopting machine learning triage",
             "Sparse autoencoders for judging language model outputs on benchmarks",
             "Vision-language models for scene maps in autonomous driving"]
    grounded = ("Idea: Adapt machine learning triage of hospitals in Finland to emergency departments. Support: "
                "[2503.14828] introduces a case study of hospitals in Finland adopting machine learning triage.")
    assert tr.grounded_idea(grounded, ids, texts)
    # recorded from the 135M model: a proposal about nothing in the papers, and a support in another language
    assert not tr.grounded_idea("Idea: Adapt to the new way of thinking, and I am ready. Support: [2503.14917] "
                                "introduces de la ciencia y aprenden el cual es más lindo.", ids, texts)
    assert not tr.grounded_idea(grounded.replace("[2503.14828]", "[2503.15168]"), ids, texts)


def test_the_record_graph_status_says_not_trained_once():
    from copilot.ui.trends import training_html

    assert training_html({"state": "idle", "stage": "not trained yet"}).count("not trained yet") == 1
    assert "epoch 2 of 5" in training_html({"state": "running", "stage": "epoch 2 of 5"})


def test_json_says_why_there_are_no_ideas():
    from copilot.cli.trends import ideas_status

    def report(**fields) -> tr.TrendsReport:
        return tr.TrendsReport(start=date(2025, 5, 12), end=LAST_DAY, categories=[], user="local", cap=300,
                               **fields)

    assert ideas_status(report(notices=[tr.IDEAS_OFF_NOTICE]), 0) == {"ideas_status": "off",
                                                                        "ideas_note": tr.IDEAS_OFF_NOTICE}
    # issue #38: `trends --ideas 2 --json` on the tiny default said "failed; see the logs" where ideas are off
    assert ideas_status(report(notices=[tr.IDEAS_OFF_NOTICE]), 2) == {"ideas_status": "off",
                                                                        "ideas_note": tr.IDEAS_OFF_NOTICE}
    assert ideas_status(report(), 0)["ideas_note"] == "Research ideas were not asked for (--ideas 0)."
    assert ideas_status(report(ideas_error=tr.NO_IDEA_PASSED), 2) == {"ideas_status": "none_passed",
                                                                       "ideas_note": tr.NO_IDEA_PASSED}
    assert ideas_status(report(ideas_error="Ideas failed: timeout"), 2) == {"ideas_status": "failed",
                                                                           "ideas_note": "Ideas failed: timeout"}
    shown = report(ideas=[tr.Idea(text="Idea: x", paper_ids=["2505.00001"], trace=[])])
    assert ideas_status(shown, 2) == {"ideas_status": "shown", "ideas_note": None}
