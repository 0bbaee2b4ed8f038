"""Which body sentence a question's row quotes (issue #48, item 5): the words of a question weighed against the
paper's own sentences, its section path and its tables' headers, over constructed text and a real LaTeXML page of
the shared data (read there, never copied). Unit tier: no embedder (the cosine is the same for every test here, so
the bonus decides)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from copilot.methods import body_text
from copilot.sources.fulltext_html import parse_html
from tests.helpers import DATA
from tests.test_fulltext_rows import make_body

pytestmark = pytest.mark.unit

PAGES = DATA / "arxiv-html"


def _ranked(body, question: str, known: str = "") -> list[str]:
    sentences = body_text.body_sentences(body)
    texts = [body.text[s.start:s.end] for s in sentences]
    terms = tuple(frozenset(t) for t in body_text.sentence_terms(texts))
    bonus = body_text.question_bonus(question, body, [(s.start, s.end, s.passage, s.cut_before, s.cut_after)
                                                      for s in sentences], terms, known)
    return [texts[n] for n in np.argsort(-bonus, kind="stable")]


def test_the_section_a_question_names_lifts_its_sentence():
    body = make_body(given=[
        ("3 Method", "S3", "3 Method", "Removing the sliding window lowers the latency of every stream we translate."),
        ("5.2 Ablations", "S5.SS2", "5 Experiments", "Removing the sliding window lowers term accuracy to 64.0%.")])
    ranked = _ranked(body, "In the ablation study, what does removing the sliding window do?")
    assert ranked[0] == "Removing the sliding window lowers term accuracy to 64.0%."


def test_a_word_of_the_papers_abstract_names_the_paper_not_the_answer():
    given = [("4 Setup", "S4", "4 Setup", "RASST retrieves glossary terms for the speech model as it translates."),
             ("4 Setup", "S4", "4 Setup", "Its retriever was trained for 3 epochs on a single GPU."),
             ("4 Setup", "S4", "4 Setup", "Its speech windows overlap by half a second in every stream."),
             ("4 Setup", "S4", "4 Setup", "The model is never fine-tuned during decoding at all.")]
    question = "For how many epochs was RASST's glossary retriever trained on speech?"
    abstract = "RASST: retrieval of glossary terms for simultaneous speech translation. RASST retrieves terms."
    assert _ranked(make_body(given=given), question, abstract)[0].startswith("Its retriever was trained for 3")


def test_how_large_does_not_look_for_the_word_large():
    assert "larg" not in body_text.asked_words("How large are the molecule corpora in the study?")
    assert {"corpora", "molecul"} <= body_text.asked_words("How large are the molecule corpora in the study?")
    assert "transform" in body_text.asked_words("How transformers fail on long inputs")   # only a word of degree
    body = make_body(given=[
        ("4 Results", "S4", "4 Results", "First, the gap between the two molecule tokenizers is large in every run."),
        ("3.2 Data", "S3.SS2", "3 Setup", "The corpora span 740K to 136M molecules, each with a held-out split.")])
    assert _ranked(body, "How large are the molecule corpora in the study?")[0].startswith("The corpora span")


def test_a_table_row_is_read_with_its_header_on_a_real_page():
    """HackAPrompt's LaTeXML page (2311.16119): the row "Playground Dataset | 560,161 | 43,295 | 7.7%" holds no
    word of "prompts" or "success"; its table's header row does, and with it the row is the page's best table row
    for a question about how many prompts the playground dataset holds."""
    parsed = parse_html((PAGES / "2311.16119.html").read_bytes(), "2311.16119")
    body = parsed.body
    assert body is not None
    papers = {json.loads(line)["id"]: json.loads(line) for line in (PAGES / "papers.jsonl").read_text().splitlines()}
    known = papers["2311.16119"]["title"] + "\n" + papers["2311.16119"]["summary"]
    sentences = [s for s in body_text.body_sentences(body) if body_text.may_state_finding(body, s)]
    texts = [body.text[s.start:s.end] for s in sentences]
    rows = [(s.start, s.end, s.passage, s.cut_before, s.cut_after) for s in sentences]
    row = texts.index("Playground Dataset | 560,161 | 43,295 | 7.7%")
    assert {"prompt", "success"} <= body_text.header_terms(body, rows)[row]
    question = "How many prompts does the Playground Dataset hold, and what is their success rate?"
    bonus = body_text.question_bonus(question, body, rows, tuple(frozenset(t) for t in body_text.sentence_terms(
        texts)), known)
    table_rows = [n for n, s in enumerate(sentences) if body.passages[s.passage].kind == "table_row"]
    assert max(table_rows, key=lambda n: bonus[n]) == row
