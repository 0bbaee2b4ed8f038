"""The passage a question about one paper quotes (issue #57 item 4), integration tier: the real embedder, the real
LaTeXML parser and the full-text store. With one paper in scope its row quotes several of its passages, and what
the scope allows over the library's scores (methods.question_kinds: the section a question's kind lives in, a
number for a kind that numbers answer, a fragment's preceding sentence) reaches the sentences scanned. The rule
that names a question's kind: test_question_kinds.py."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from copilot.body import Body, Passage, Section
from copilot.features import fulltext
from copilot.features.library import ingestor
from copilot.methods import body_text, evidence, passages, question_kinds, sentence_roles
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row
from copilot.store.fulltext import StoredBody
from copilot.table import ABSTRACT, BODY, verbatim
from tests.conftest import make_settings
from tests.fake_arxiv_html import HTML_DIR

BRIDGE = "2606.24470"


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    """A library of the Latent Bridge paper, its page read from the shared LaTeXML file (parsed, embedded, stored)."""
    services = Services(make_settings(tmp_path_factory.mktemp("passages")))
    rows = [json.loads(line) for line in (HTML_DIR / "papers.jsonl").read_text(encoding="utf-8").splitlines()]
    ingestor(services).run("test passages", [paper_from_row(row) for row in rows if row["id"] == BRIDGE])
    assert fulltext.import_paths(services, [HTML_DIR / f"{BRIDGE}.html"])[0].status == "ok"
    return services


def source_of(services: Services, paper_id: str, body: StoredBody | None = None) -> evidence.Source:
    paper = services.store.get_papers([paper_id])[0]
    stored = body or services.fulltext.get([paper_id], services.embedder.name)[paper_id]
    return evidence.Source(paper.id, paper.title, tuple(paper.authors), paper.published.isoformat(), paper.abstract,
                           0.5, True, 0.0, "", f"v{paper.version}", stored)


def scoped_quotes(services: Services, question: str, source: evidence.Source) -> list:
    vector = services.embedder.embed([question])[0]
    rows = passages.passage_rows(question, vector, [source], services.embed_sentences,
                                 learned_roles=sentence_roles.trained_for(services.embedder.name))
    table = evidence.make_table(rows, question)
    return [quote for row in table.rows for quote in row.quotes]


def test_a_question_about_one_paper_quotes_its_answer_below_the_best_three_and_its_abstract_verbatim(services):
    # the answer is the paper's 4th passage for this question: a row quoting three passages (as a library row does)
    # misses it; a question about one paper gets its six best
    source = source_of(services, BRIDGE)
    found = scoped_quotes(services, "How large is the Latent Bridge's projection network, and how many tokens "
                                    "does it prepend to the fast model?", source)
    assert len(found) == passages.MAX_QUOTES
    answer = [q for q in found if re.search(r"33\s+M-parameter\s+2-layer\s+MLP", q.shown)]
    assert answer and answer[0].source == BODY and answer[0].section.startswith("3")
    # the paper's own claim is among them, though sentences holding the question's words outscore its abstract
    assert any(q.source == ABSTRACT for q in found)
    assert all(verbatim(q, evidence.source_text(source, q.source)) for q in found)


SECTIONS = [("3 Method", "S3", "3 Method"), ("5.1 Setup", "S5.SS1", "5 Experiments")]
SENTENCES = [
    (0, "The bridge is trained with a contrastive objective between the slow and the fast model."),
    (0, "The bridge runs between the slow and the fast model without any change to either."),
    (1, "All runs of the bridge use the following hardware."),
    (1, "Kaggle P100 GPU with 16 GB of VRAM, and the model kept on the CPU in FP32."),
]


def small_body(services: Services) -> StoredBody:
    """A four-sentence body, embedded by the real embedder: a fragment stating the hardware follows the sentence
    that says what it is about, in the implementation details."""
    text, spans = "", []
    for section, words in SENTENCES:
        start = len(text) + (2 if text else 0)
        text += ("\n\n" if text else "") + words
        spans.append(Passage(start, len(text), section, "paragraph"))
    body = Body(BRIDGE, "v1", "html", text, tuple(Section(*s) for s in SECTIONS), tuple(spans))
    sentences = body_text.body_sentences(body)
    texts = [" ".join(body.text[s.start:s.end].split()) for s in sentences]
    vectors = np.asarray(services.embedder.embed(texts), dtype=np.float32)
    return StoredBody(body, tuple((s.start, s.end, s.passage, s.cut_before, s.cut_after) for s in sentences),
                      services.embedder.name, vectors, tuple(frozenset(t) for t in body_text.sentence_terms(texts)))


def test_the_scoped_priors_reach_the_scan_and_lift_the_fragment_that_states_the_hardware(services):
    stored = small_body(services)
    question = "On what hardware does the bridge run?"
    assert question_kinds.question_kind(question) == "setup"
    vector = services.embedder.embed([question])[0]
    source = source_of(services, BRIDGE, stored)

    def scores(prior) -> tuple[dict[str, float], dict[str, float]]:
        found = evidence.body_candidates(source, question, vector, count=10, prior=prior)
        return ({span.text: float(np.asarray(v, dtype=np.float32) @ vector) + extra for span, _, v, extra in found},
                {span.text: extra for span, _, _, extra in found})

    plain, bonus = scores(None)
    scoped, _ = scores(passages.scoped_prior(question, stored))
    fragment, before = SENTENCES[3][1], SENTENCES[2][1]
    # the fragment: its section's prior, its number's, and a share of the sentence before it (it holds none of the
    # question's words itself); the method section's sentences, without a number, get none
    assert bonus[fragment] < question_kinds.NEIGHBOUR_ALONE
    assert scoped[fragment] - plain[fragment] == pytest.approx(
        question_kinds.SECTION_PRIOR + question_kinds.NUMBER_PRIOR + question_kinds.NEIGHBOUR_SHARE * bonus[before],
        abs=1e-4)
    assert scoped[SENTENCES[0][1]] - plain[SENTENCES[0][1]] == pytest.approx(0.0, abs=1e-6)
    # …so it passes the method section's sentence about training, which the library's scores put above it
    trained = SENTENCES[0][1]
    assert plain[fragment] < plain[trained] and scoped[fragment] > scoped[trained]
