"""What a question about one paper asks for, and where the paper writes it (issue #57 item 4), unit tier: the
question's kind from its words, the sections each kind lives in, and the bonus a sentence borrows from the one
before it; and `eval fulltext`'s count per kind. The passage this chooses, through the real embedder:
test_passages.py."""

from __future__ import annotations

import time

import numpy as np
import pytest

from copilot.body import Body, Passage, Section
from copilot.methods import question_kinds
from copilot.methods.evidence import asks_how_much
from copilot.methods.question_kinds import question_kind, section_holds

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("question, kind", [
    ("On what hardware and numeric precision were the experiments run?", "setup"),
    ("Which optimizer and learning rate train the retriever?", "setup"),
    ("For how many epochs was the decoder fine-tuned?", "setup"),
    ("How many documents does each of the evaluation datasets contain?", "data"),
    ("How large are the molecule corpora?", "data"),
    ("Which kinds of documents may the benchmark not fully represent?", "limits"),
    ("Where do the authors expect their tokenizers to be less efficient?", "limits"),
    # limits come first: "training runs" is a setting, but the question asks what the study was limited to
    ("Which model families were the experiments limited to, and how many training runs did they take?", "limits"),
    ("How does the agent compare with a ReAct baseline?", "results"),
    ("What error rate do the authors estimate for their judge?", "results"),
    ("How much does dev Recall@10 drop without the multi-scale windows?", "results"),
    ("How well can a prompted model tell which profile produced which prediction?", "results"),
    ("Is the code available?", "code"),
    ("Did they release the tokenizers publicly?", "code"),
    ("Is the data publicly available?", "data"),                        # data comes first: its availability
    ("What does the Latent Bridge prepend to the fast model?", "other"),
    ("", "other"),
])
def test_a_questions_kind_is_read_from_its_words(question, kind):
    assert question_kind(question) == kind


def test_a_cue_word_counts_whole_or_as_its_stem_never_inside_another_word():
    assert question_kind("How many samples are in the datasets?") == "data"       # "dataset*" a prefix
    assert question_kind("What metadata does the crawler keep?") == "other"       # "data" is a whole word
    assert question_kind("Where does the update fall short?") == "limits"         # two words in a row


def test_a_pasted_page_is_classified_in_bounded_time():
    hostile = "how " + "a" * 200_000 + " " + "data-" * 50_000
    started = time.perf_counter()
    assert question_kind(hostile) in question_kinds.KINDS
    assert time.perf_counter() - started < 0.5
    assert question_kind("x " * 1500 + "hardware") == "other"     # only the first MAX_QUESTION characters are read


@pytest.mark.parametrize("kind, path, holds", [
    ("setup", "5 Experiments 5.2 Implementation Details", True),
    ("setup", "Appendix G Training Details", True),
    ("data", "3 The Corpora 3.1 Statistics", True),
    ("limits", "7 Conclusion", True),
    ("limits", "Limitations", True),
    ("results", "4 Results 4.1 Main results", True),
    ("results", "2 Related Work", False),
    ("limits", "2 Related Work", False),
    ("other", "5 Experiments", False),
])
def test_each_kind_has_the_sections_it_is_written_in(kind, path, holds):
    assert section_holds(kind, path) is holds


def _body(sections_of: list[int]) -> tuple[Body, tuple[tuple[int, int, int, bool, bool], ...]]:
    sections = (Section("2 Related Work", "S2", "2 Related Work"),
                Section("5.1 Implementation Details", "S5.SS1", "5 Experiments"))
    passages = tuple(Passage(10 * n, 10 * n + 9, section, "paragraph") for n, section in enumerate(sections_of))
    body = Body("2601.00001", "v1", "html", "x" * (10 * len(sections_of)), sections, passages)
    return body, tuple((p.start, p.end, n, False, False) for n, p in enumerate(passages))


def test_a_sentence_in_the_questions_section_gets_the_prior_others_none():
    body, sentences = _body([0, 1, 1])
    prior = question_kinds.section_prior("setup", body, sentences)
    assert prior.tolist() == pytest.approx([0.0, question_kinds.SECTION_PRIOR, question_kinds.SECTION_PRIOR])
    assert not question_kinds.section_prior("other", body, sentences).any()


def test_a_sentence_stating_a_number_gets_the_prior_when_numbers_answer_the_kind():
    body, sentences = _body([1, 1])
    body = Body(body.paper_id, body.version, body.source, "runs on 8 GPUs" + " " * 6 + "runs on a GPU     ",
                body.sections, body.passages)
    assert question_kinds.number_prior("setup", body, sentences).tolist() == pytest.approx(
        [question_kinds.NUMBER_PRIOR, 0.0])
    assert not question_kinds.number_prior("limits", body, sentences).any()


def test_a_fragment_borrows_from_the_sentence_before_it_only_within_its_section():
    body, sentences = _body([0, 1, 1, 1, 1])
    bonus = np.array([0.9, 0.05, 0.5, 0.0, 0.0], dtype=np.float32)
    prior = question_kinds.neighbour_prior(bonus, body, sentences)
    share = question_kinds.NEIGHBOUR_SHARE
    # the first sentence of a section borrows nothing from the last of the one before; a sentence holding the
    # question's words (0.5) borrows nothing; one after a fragment that holds none borrows nothing either
    assert prior.tolist() == pytest.approx([0.0, 0.0, 0.0, share * 0.5, 0.0])


def test_eval_fulltext_counts_each_kind_apart_both_ways():
    from copilot.eval.fulltext_eval import markdown, summarise

    def row(kind: str, type_: str, quoted: bool, scoped: bool) -> dict:
        return {"kind": kind, "type": type_, "quoted": quoted, "section_named": quoted, "quoted_cold": False,
                "quoted_scoped": scoped, "verbatim": 3, "quotes": 3, "ask_cold_s": 0.1, "ask_warm_s": 0.1,
                "ask_scoped_s": 0.02}

    rows = [row("body", "setup", False, True), row("body", "setup", True, True), row("body", "data", False, False),
            row("abstract", "other", True, True)]
    summary = summarise(rows, [])
    assert summary["body"]["quoted"] == 0.3333 and summary["body"]["quoted_scoped"] == 0.6667
    assert summary["by_type"]["body · setup"] == {"questions": 2, "quoted": 0.5, "section_named": 0.5,
                                                  "quoted_cold": 0.0, "quoted_scoped": 1.0}
    assert summary["by_type"]["body · data"]["quoted_scoped"] == 0.0
    assert set(summary["by_type"]) == {"body · setup", "body · data", "abstract · other"}
    assert "| body · setup | 2 | 0.5 | 0.5 | 0.0 | 1.0 |" in markdown({"summary": summary})


def test_eval_fulltext_names_the_line_of_a_malformed_question(tmp_path):
    from copilot.eval.fulltext_eval import FulltextDataError, read_questions

    good = '{"paper": "2503.11958", "question": "What GPU?", "patterns": ["A100"]}'
    path = tmp_path / "questions.jsonl"
    path.write_text(f"{good}\n\n{good}\n", encoding="utf-8")
    assert [row["compiled"][0].pattern for row in read_questions(path)] == ["A100", "A100"]
    for bad in ('{"paper": "2503.11958", "question": "What GPU?", "patterns": ["(A100"]}',     # not a pattern
                '{"paper": "2503.11958", "question": "What GPU?", "patterns": []}', "{not json"):
        path.write_text(f"{good}\n\n{bad}\n", encoding="utf-8")
        with pytest.raises(FulltextDataError, match="questions.jsonl:3 needs"):
            read_questions(path)
    with pytest.raises(FulltextDataError, match="no question file"):
        read_questions(tmp_path / "absent.jsonl")


@pytest.mark.parametrize("question, numbers", [
    ("What share of the dataset comes from real rather than synthetic images?", True),
    ("What fraction of the probes are miscategorized?", True),
    ("How long does one term lookup take at inference time?", True),
    ("What part of the model is frozen?", False),
    ("Which tokenizer is more stable under rewriting?", False),
])
def test_a_question_asking_for_a_share_or_a_duration_asks_for_a_number(question, numbers):
    assert asks_how_much(question) is numbers
