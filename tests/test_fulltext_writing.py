"""A writing profile writes from the body sentences its table shows (issue #48), integration tier: the shared LaTeXML
page imported through the product, the real embedder, and the packaged local model on the writing profile
(COPILOT_MODEL_PROFILE=capable), its prompts recorded on the way to it.
"""

from __future__ import annotations

import json

import pytest

from copilot.features import fulltext
from copilot.features.answers import with_body_sentences
from copilot.features.chat import Chat
from copilot.features.library import ingestor
from copilot.llm import build_llm
from copilot.prompts import BODY_SENTENCES_LEAD, CHAT_ANSWER
from copilot.records import Evidence
from copilot.services import Services
from copilot.sources.snapshot import paper_from_row
from copilot.table import ABSTRACT, BODY, EvidenceTable, Quote, Row
from tests.conftest import make_settings
from tests.fake_arxiv_html import HTML_DIR

RASST = "2601.22777"
QUESTION = ("In RASST, retrieval-augmented simultaneous speech translation, how many unique terms does the ACL 60/60 "
            "glossary it retrieves from contain?")


class Prompts:
    """Wraps the real backend to keep the user message of each answer prompt."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.model = inner, inner.name, inner.model
        self.obeys_grammar = inner.obeys_grammar
        self.answers: list[str] = []

    def stream(self, messages, max_tokens, temperature, usage, grammar=None):
        if messages[0]["content"] == CHAT_ANSWER.system:
            self.answers.append(messages[-1]["content"])
        yield from self.inner.stream(messages, max_tokens, temperature, usage, grammar=grammar)


def test_a_writing_profile_reads_the_body_sentences_its_table_quotes(tmp_path):
    settings = make_settings(tmp_path / "data", model_profile="capable")
    recorded = Prompts(build_llm(settings, None).backend)
    services = Services(settings, llm_backend=recorded)
    rows = [json.loads(line) for line in (HTML_DIR / "papers.jsonl").read_text(encoding="utf-8").splitlines()]
    ingestor(services).run("test", [paper_from_row(row) for row in rows])
    [outcome] = fulltext.import_paths(services, [HTML_DIR / f"{RASST}.html"])
    assert outcome.status == "ok"

    chat = Chat(services)
    turn = chat.prepare(QUESTION, "ann")
    for _ in chat.stream(turn):
        pass
    answer = turn.answers[0]
    assert answer.error is None and answer.table is not None
    row = next(row for row in answer.table.rows if row.paper_id == RASST)
    body = [q for q in row.quotes if q.source == BODY]
    assert body, "the table under the words quotes the body"
    prompt = recorded.answers[0]
    assert f"{BODY_SENTENCES_LEAD}: (\u00a7{body[0].section}) {body[0].shown}" in prompt, prompt[-1500:]
    assert prompt.count(BODY_SENTENCES_LEAD) == len({r.paper_id for r in answer.table.rows
                                                      if any(q.source == BODY for q in r.quotes)})


@pytest.mark.unit
def test_only_a_paper_whose_row_quotes_its_body_gets_body_sentences():
    quote = Quote(BODY, 10, 40, "The glossary holds 238 unique terms.", section="4.1 Data", anchor="S4.SS1")
    rows = (Row("1", "2601.22777", "v1", "RASST", (), "2026-01-30",
                (Quote(ABSTRACT, 0, 20, "We present RASST here."), quote), 0.7),
            Row("2", "2601.00002", "v1", "Other", (), "2026-01-02", (Quote(ABSTRACT, 0, 12, "Other words."),), 0.5))
    items = [Evidence("2601.22777", "paper", "RASST", "RASST abstract.", 0.7),
             Evidence("2601.00002", "paper", "Other", "Other abstract.", 0.5),
             Evidence("T0123456789", "thought", "a thought", "A thought's text.", 0.4)]
    written = with_body_sentences(items, EvidenceTable(rows))
    assert written[0].text == ("RASST abstract.\n" + BODY_SENTENCES_LEAD
                               + ": (\u00a74.1 Data) The glossary holds 238 unique terms.")
    assert [w.text for w in written[1:]] == ["Other abstract.", "A thought's text."]
    assert with_body_sentences(items, None) == items
