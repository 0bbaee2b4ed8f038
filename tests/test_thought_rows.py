"""A tiny-profile thought is the evidence a user preferred (issue #40): the table's rows, each paper's title and
quoted sentences, with lineage to those papers (or to the thought a row was reached through); what its vector is
made of; and the figures `eval thoughts-dev` reads from its turns."""

from __future__ import annotations

import numpy as np
import pytest

from copilot.eval.thoughts_dev_eval import read_warmups, summarise
from copilot.methods import thought_drafts
from copilot.methods.evidence import Row, Source, Span, make_table
from copilot.methods.evidence_text import render_table
from copilot.methods.thought_drafts import describes_itself, is_row_thought, vector_text
from copilot.records import Evidence
from copilot.table import EvidenceTable


def table(*rows: tuple[str, str, str, str]) -> EvidenceTable:
    """A table as the product makes it, from (thought the row was reached through or "", paper id, title, quote)
    rows; each quote is its paper's whole abstract."""
    made = [Row(Source(pid, title, ("A. Author",), "2025-04-01", quote, 0.6, via=via),
                [Span(quote, False, False, 0, 0, len(quote))], 0.6, 0.6) for via, pid, title, quote in rows]
    return make_table(made, "")


def table_thought(made: EvidenceTable, *args, **kwargs):
    return thought_drafts.table_thought(made, "".join(render_table(made)), *args, **kwargs)


PAPERS = [Evidence("2504.00001", "paper", "KV cache quantization", "", 0.7),
          Evidence("T0123456789", "thought", "", "", 0.8),
          Evidence("2504.00003", "paper", "Token eviction", "", 0.6)]


def test_a_table_becomes_its_rows_with_lineage_to_their_papers_or_the_thought_they_came_through():
    answer = table(("", "2504.00001", "KV cache quantization", "We quantize the KV cache to 2 bits."),
                   ("T0123456789", "2504.00099", "Paged attention: serving", "Paging the cache cuts memory by 40%."),
                   ("", "2504.00003", "Token eviction", "Evicting cold tokens keeps accuracy at 4x compression."))
    draft, lineage = table_thought(answer, PAPERS)
    assert draft.confidence == 1 and not draft.llm_called
    assert draft.text.splitlines() == [
        "KV cache quantization: \u201cWe quantize the KV cache to 2 bits.\u201d",
        "Paged attention: serving: \u201cPaging the cache cuts memory by 40%.\u201d",
        "Token eviction: \u201cEvicting cold tokens keeps accuracy at 4x compression.\u201d"]
    # the second row's paper was reached through the thought: the lineage goes through that thought
    assert lineage == [("2504.00001", "paper"), ("T0123456789", "thought"), ("2504.00003", "paper")]
    assert is_row_thought(draft.text) and "?" not in draft.text      # no question in a shared thought's text


def test_a_table_of_papers_nobody_retrieved_makes_no_thought():
    draft, lineage = table_thought(table(("", "2504.00777", "Elsewhere", "Something about caches here.")), PAPERS)
    assert draft.confidence == 0 and lineage == [] and draft.reason


def test_what_a_row_thought_is_embedded_as():
    text = "KV cache quantization: \u201cWe quantize the KV cache to 2 bits.\u201d"
    question = "Which methods shrink the KV cache?"
    assert vector_text(question, text) == text                       # the shipped choice (docs/thoughts-eval.md)
    assert vector_text(question, text, "question") == question
    assert vector_text(question, text, "question+quotes") == f"{question}\n{text}"
    assert vector_text(question, text, "quotes") == text
    assert vector_text("", text, "question") == text                  # no question stored: its own words
    prose = "Quantizing the KV cache to two bits keeps accuracy for long contexts."
    assert not is_row_thought(prose) and vector_text(question, prose, "question") == prose   # a writing profile's
    assert not is_row_thought("\u201cA quote alone.\u201d \u201cAnother.\u201d")   # the old quote thought
    with pytest.raises(ValueError):
        vector_text(question, text, "title")
    assert not describes_itself(text)


def test_eval_figures_count_comparisons_identical_answers_and_the_longer_side(tmp_path):
    def turn(comparison, raw_rows, thought_rows, adds=(), loses=()):
        side = {"recall": 0.5, "precision": 1.0}
        return {"comparison": comparison, "papers": {**side, "rows": raw_rows}, "thoughts": {**side, "rows":
                thought_rows}, "adds_relevant": list(adds), "loses_relevant": list(loses), "reached_own": True,
                "from_memory": list(adds)}
    rows = [turn("yes", 4, 5, adds=["p"]), turn("yes", 4, 4, loses=["q"]), turn("same_answer", 3, 3),
            turn("same_items", 2, 2)]
    s = summarise(rows, [{"comparison": "yes", "thought": "stored"}])
    assert s["comparison_share"] == 0.5 and s["same_answer_share"] == round(1 / 3, 4)
    assert s["same_items_share"] == 0.25 and s["adds_relevant_share"] == 0.5 and s["loses_relevant_share"] == 0.5
    assert (s["thought_side_longer"], s["thought_side_shorter"], s["same_length"]) == (1, 0, 1)
    assert s["longer_guesser_right"] == 1.0 and s["warmup_thoughts_stored"] == 1
    path = tmp_path / "w.jsonl"
    path.write_text('{"about": "how"}\n{"for": 0, "question": "q?"}\n{"for": 5, "question": "r?"}\n')
    assert read_warmups(path, 2) == [{"for": 0, "question": "q?"}]


def test_two_no_answer_lines_naming_the_same_papers_are_the_same_answer():
    from copilot.features.answers import table_text
    from copilot.features.chat_view import same_answer

    def no_answer_line(items):
        return table_text(EvidenceTable(), items)

    papers = [Evidence(f"2504.0000{n}", "paper", f"Paper {n}", "", 0.3 - n / 100) for n in range(1, 5)]
    thought = Evidence("T0123456789", "thought", "", "", 0.9)
    raw, with_memory = no_answer_line(papers), no_answer_line([thought] + papers)
    assert raw.count("\u201c") == with_memory.count("\u201c") == 3      # a thought takes no place among the nearest
    assert raw != with_memory and same_answer(raw, with_memory)          # labels differ, the papers do not
    assert not same_answer(raw, no_answer_line(papers[1:]))


def test_rows_whose_quote_is_far_from_the_question_stay_out_of_the_thought():
    """A preferred table is preferred as a whole: a row whose quote is not close to the question (another topic's
    paper that scraped past the table's floor) does not go into memory."""
    answer = table(("", "2504.00001", "KV cache quantization", "We quantize the KV cache to 2 bits."),
                   ("", "2504.00003", "Angle selection in CT", "We select X-ray angles with a policy gradient."))
    directions = {"Which methods shrink the KV cache?": (1.0, 0.0), "We quantize the KV cache to 2 bits.": (0.9, 0.44),
                  "We select X-ray angles with a policy gradient.": (0.2, 0.98)}

    def embed(texts):
        return np.asarray([directions[t] for t in texts], dtype=np.float32)

    draft, lineage = table_thought(answer, PAPERS, embed, "Which methods shrink the KV cache?")
    assert lineage == [("2504.00001", "paper")] and "CT" not in draft.text
    far, _ = table_thought(answer, PAPERS, embed, "Which methods shrink the KV cache?", floor=0.95)
    assert far.confidence == 0 and far.reason
