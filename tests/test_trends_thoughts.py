"""Trends summaries and ideas enter thought memory through the same confidence check (as text: no extra LLM call)
and merge test as chat thoughts, and each records every item it was made from (issue #12)."""

from __future__ import annotations

from datetime import date

from copilot.features import trends as tr
from tests.test_trends import LAST_DAY, use_script, week, week_dir  # noqa: F401 - fixtures

LOOPING = "They study this topic and this topic and this topic and this topic"


def replies(messages) -> str:
    text = "\n".join(m["content"] for m in messages)
    first_id = text.split('<source id="')[1].split('"')[0] if '<source id="' in text else "2501.00000"
    if "These papers form the topic" in text:
        return LOOPING + f" [{first_id}]"                                        # a loop: not kept
    if "Topics of the period" in text:
        return f"The period moved on many fronts, with new models, data sets and evaluation methods [{first_id}]."
    if "Answer the task with step-by-step" in text:
        return "Idea one: combine sparse retrieval with reranking to cut the cost of searching long documents."
    if "Write ONE short" in text:
        return "search query"
    if "Revise the draft" in text:
        return text.split("##Draft:\n")[1].split("\n\n##Instruction")[0]
    raise AssertionError("unexpected prompt: " + text[:200])


def test_trend_texts_pass_the_confidence_check_and_record_all_their_sources(week):  # noqa: F811
    week, _ = use_script(week, [replies] * 40)
    opts = tr.TrendsOptions(summarized_topics=2, ideas=1, store_thoughts=True, use_cache=False)
    report = list(tr.iter_trends(week, date(2025, 5, 12), LAST_DAY, opts=opts))[-1]
    stored = {row["question"]: row for row in week.db.query("SELECT * FROM thoughts")}
    # the looping topic summaries were shown but not kept as thoughts; the period summary and the idea were
    assert all(t.summary.startswith(LOOPING) for t in report.topics[:2])
    assert not any("Not kept" in n or "loop" in n for n in report.notices)    # the log's note, not the page's
    assert len(report.thought_ids) == 2 and week.store.count("thought") == 2
    assert not any(q.startswith("Trend ") and ":" in q for q in stored)

    def sources(question_start: str) -> list[str]:
        thought = next(r for q, r in stored.items() if q.startswith(question_start))
        return [e["source_id"] for e in week.db.query(
            "SELECT source_id FROM thought_edges WHERE thought_id = ? ORDER BY position", (thought["id"],))]

    # the period summary: every paper the model was given (the first paper of each of the top four topics)
    assert sources("Trends of") == [t.paper_ids[0] for t in report.topics[:4]]
    # the idea: its citations first, then every context paper and everything RAT retrieved
    idea = report.ideas[0]
    made_from = sources("Research idea")
    retrieved = [item_id for step in idea.trace for item_id in step["retrieved"]]
    assert made_from[:len(idea.paper_ids)] == idea.paper_ids
    assert set(made_from) == set(idea.paper_ids) | {t.paper_ids[0] for t in report.topics[:4]} | set(retrieved)


def test_echo_of_the_trend_prompt_is_not_kept(week, caplog):  # noqa: F811
    from copilot.methods.thought_retriever import instruction_text
    from copilot.prompts import TRENDS_PERIOD_SUMMARY

    echo = " ".join(instruction_text(TRENDS_PERIOD_SUMMARY).split()[:14])
    report = tr.TrendsReport(start=date(2025, 5, 12), end=LAST_DAY, categories=[], user="local")
    lineage = [(echo + " [2505.00001].", [("2505.00001", "paper")], "Trends of a week"),
               ("New retrieval benchmarks test whether answers cite the abstracts they rest on [2505.00001].",
                [("2505.00001", "paper")], "Trends of a week")]
    with caplog.at_level("INFO", logger="copilot.features.trends"):
        tr._store_thoughts(week, report, lineage, "local")
    assert len(report.thought_ids) == 1 and report.notices == []       # an internal note: the log's, not the page's
    assert "echoes the prompt's instructions" in caplog.text


def test_the_tiny_profile_keeps_no_trends_thought_and_a_writing_profile_does(week):  # noqa: F811
    """On the tiny profile a Trends summary is quotes of the period's papers; kept as thoughts they brought no
    relevant paper to a later question and made more of its tables differ (issue #40 item 3, docs/thoughts-eval.md),
    so the run shows them and stores none. A writing profile's summaries are the model's own text: kept."""
    from copilot.services import Services

    tiny = Services(week.settings.model_copy(update={"model_profile": "tiny"}))
    opts = tr.TrendsOptions(summarized_topics=2, use_cache=False)
    report = tr.run_trends(tiny, date(2025, 5, 12), LAST_DAY, opts=opts)
    assert report.done and report.summary and report.topics[0].summary        # the quotes are shown
    assert report.thought_ids == [] and tiny.store.count("thought") == 0
    writer, _ = use_script(week, [replies] * 40)
    assert writer.model_profile.writes
    report = tr.run_trends(writer, date(2025, 5, 12), LAST_DAY, opts=tr.TrendsOptions(summarized_topics=2, ideas=0,
                                                                                       use_cache=False))
    assert report.thought_ids and writer.store.count("thought") == len(report.thought_ids)
