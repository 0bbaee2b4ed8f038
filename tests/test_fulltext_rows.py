"""A paper's full text in the evidence table (issue #48), unit tier: the body's sentences, which of them may stand
for the paper's finding, the store (one body per paper, replaced whole, derived data that fails soft), rows that
quote the body with its section, and how the section and its link are shown. A bag-of-words stand-in for the
embedder (tests/test_quotes.embed). The real pages, parser and embedder: test_fulltext_parse.py and
test_fulltext_answers.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from copilot import table
from copilot.body import Body, Passage, Section
from copilot.methods import body_text, evidence, evidence_text, passages
from copilot.methods.evidence import Source, build_rows
from copilot.store.fulltext import FulltextStore, StoredBody
from copilot.ui.chat.render import answer_text_html
from tests.test_quotes import embed

pytestmark = pytest.mark.unit

PASSAGES = [
    ("1 Introduction", "S1", "1 Introduction",
     "Speech translation systems have long struggled with rare terms (Smith et al., 2020). "
     "We show that retrieval of glossary terms fixes most of these errors."),
    ("2 Related Work", "S2", "2 Related Work",
     "Prior systems retrieve glossary terms with a cascade and reach 40% term accuracy."),
    ("4.2 Ablations", "S4.SS2", "4 Experiments",
     "Removing the sliding window drops term accuracy from 81.2% to 64.0%, e.g. on the En-De direction. "
     "The retriever was trained for 3 epochs with a learning rate of 1e-4 on 8 GPUs."),
    ("4.2 Ablations", "S4.SS2", "4 Experiments", "Window size | Term accuracy | Latency"),
    ("4.2 Ablations", "S4.SS2", "4 Experiments", "1.92 s | 81.2 | 1.4"),
]


def make_body(paper_id: str = "2601.22777", version: str = "v1", given=PASSAGES) -> Body:
    sections: list[Section] = []
    passages: list[Passage] = []
    text = ""
    for title, anchor, top, words in given:
        if not sections or sections[-1].title != title:
            sections.append(Section(title, anchor, top))
        start = len(text) + (2 if text else 0)
        text += ("\n\n" if text else "") + words
        kind = "table_row" if " | " in words else "paragraph"
        passages.append(Passage(start, len(text), len(sections) - 1, kind))
    return Body(paper_id, version, "html", text, tuple(sections), tuple(passages))


def stored(body: Body) -> StoredBody:
    sentences = body_text.body_sentences(body)
    texts = [" ".join(body.text[s.start:s.end].split()) for s in sentences]
    return StoredBody(body, tuple((s.start, s.end, s.passage, s.cut_before, s.cut_after) for s in sentences),
                      "bag-of-words", embed(texts), tuple(frozenset(t) for t in body_text.sentence_terms(texts)))


PAPER = Source("2601.22777", "RASST: retrieval-augmented simultaneous speech translation", ("Ann Lee",), "2026-01-30",
               "Simultaneous speech translation produces text from partial speech. We propose RASST, which retrieves "
               "terms for a speech LLM while it translates. RASST improves terminology accuracy by up to 16 points.",
               0.6, version="v1")


def test_body_sentences_are_slices_split_at_ends_not_at_abbreviations():
    body = make_body()
    found = [body.text[s.start:s.end] for s in body_text.body_sentences(body)]
    assert "Removing the sliding window drops term accuracy from 81.2% to 64.0%, e.g. on the En-De direction." in found
    assert "Speech translation systems have long struggled with rare terms (Smith et al., 2020)." in found
    assert "Window size | Term accuracy | Latency" in found          # a table row is one span


def test_related_work_and_the_introductions_background_never_stand_for_the_finding():
    body = make_body()
    allowed = {body.text[s.start:s.end] for s in body_text.body_sentences(body) if body_text.may_state_finding(body, s)}
    assert "We show that retrieval of glossary terms fixes most of these errors." in allowed
    assert not any("Prior systems" in s or "have long struggled" in s for s in allowed)
    assert any(s.startswith("Removing the sliding window") for s in allowed)


def test_a_rare_word_of_the_question_counts_for_more_than_the_papers_own_name():
    body = make_body()
    texts = [body.text[s.start:s.end] for s in body_text.body_sentences(body)]
    terms = [frozenset(t) for t in body_text.sentence_terms(texts)]
    shares = body_text.word_shares("Which learning rate trained the retriever of the sliding window model?", terms)
    best = texts[int(shares.argmax())]
    assert best.startswith("The retriever was trained for 3 epochs with a learning rate")
    assert body_text.word_shares("banana bread", terms).max() == 0.0


def test_the_asking_words_of_a_question_do_not_pick_the_sentence():
    texts = ["We ask how many of the terms which a speaker says are rare, and what they do.",
             "The retriever was trained for 3 epochs on 8 GPUs."]
    terms = [frozenset(t) for t in body_text.sentence_terms(texts)]
    shares = body_text.word_shares("For how many epochs was it trained, and what does it do?", terms)
    assert shares[1] > shares[0]


def test_a_number_beside_what_the_question_asks_the_amount_of_is_marked():
    texts = ["The retriever was trained for 3 epochs with a learning rate of 1e-4.",
             "More epochs did not help the retriever at all in our runs.",
             "Each of the 5 datasets holds 20-100 documents from one domain."]
    terms = [frozenset(t) for t in body_text.sentence_terms(texts)]
    assert body_text.asked_units("For how many epochs was the retriever trained?") == {"epoch"}
    assert body_text.asked_units("What learning rate does it use?") == {"rate"}
    assert body_text.asked_units("How large are the molecule corpora in the study?") == {"corpora"}
    assert list(body_text.unit_numbers("For how many epochs was the retriever trained?", texts, terms)) == [1, 0, 0]
    assert list(body_text.unit_numbers("How many documents does each dataset hold?", texts, terms)) == [0, 0, 1]
    assert not body_text.unit_numbers("Does it use a retriever?", texts, terms).any()


TABLE = [("4.1 Data", "S4.SS1", "4 Experiments",
          "We collected the prompts of the competition into two datasets that we release."),
         ("4.1 Data", "S4.SS1", "4 Experiments", "Dataset | Total prompts | Success rate"),
         ("4.1 Data", "S4.SS1", "4 Experiments", "Submissions Dataset | 41,596 | 83.2%"),
         ("4.1 Data", "S4.SS1", "4 Experiments", "Playground Dataset | 560,161 | 7.7%"),
         ("5 Analysis", "S5", "5 Analysis", "A model labelled the attacks, and we compared its "
          "\u201cmost common attack\u201d labels with ours: they agreed on 75% of the prompts we checked by hand.")]


def test_a_table_row_with_a_number_is_a_span_and_can_be_the_quote():
    body = make_body(given=TABLE)
    found = [body.text[s.start:s.end] for s in body_text.body_sentences(body)]
    assert "Submissions Dataset | 41,596 | 83.2%" in found and "Playground Dataset | 560,161 | 7.7%" in found
    question = "How many prompts does the Submissions Dataset hold?"
    with_body = replace(PAPER, body=stored(body))
    rows = build_rows(question, embed([question])[0], [with_body], embed, floor=0.2)[0]
    quotes = [q for q in evidence.make_table(rows, question).rows[0].quotes if q.source == table.BODY]
    assert "Submissions Dataset | 41,596 | 83.2%" in [q.text for q in quotes]


def test_a_sentence_holding_curly_quote_marks_is_quoted_up_to_the_mark():
    body = make_body(given=TABLE)
    question = "How often did the model's attack labels agree with the labels checked by hand?"
    with_body = replace(PAPER, body=stored(body))
    rows = build_rows(question, embed([question])[0], [with_body], embed, floor=0.2)[0]
    made = evidence.make_table(rows, question)
    quotes = [q for q in made.rows[0].quotes if q.source == table.BODY and q.text.startswith("A model labelled")]
    assert quotes and quotes[0].text == "A model labelled the attacks, and we compared its" and quotes[0].cut_after
    assert table.verbatim(quotes[0], body.text)
    assert not any("\u201c" in q.text or "\u201d" in q.text for q in made.rows[0].quotes)


def test_the_paper_a_question_is_most_about_shows_up_to_three_body_quotes_another_two():
    body = make_body(given=[("4 Results", "S4", "4 Results",
                             "The retriever recalls 88% of the glossary with a short window of frames. "
                             "Our talks were recorded in a quiet room over two weeks. "
                             "Longer talks in German lower how much of the glossary it recalls to 81%. "
                             "Our talks were read by twelve speakers of German. "
                             "Each window of frames adds latency, 40 ms for the longest one we tried. "
                             "Our talks were transcribed by two annotators. "
                             "A window of eight frames recalls most terms of the medical glossary.")])
    question = "How much of the glossary does the retriever recall with each window of frames?"
    first = replace(PAPER, body=stored(body), rank=0.0)
    second = replace(PAPER, paper_id="2601.00001", title="Another retriever of speech", body=stored(body), rank=1.0)
    rows = build_rows(question, embed([question])[0], [first, second], embed, floor=0.2)[0]
    counts = {row.source.paper_id: sum(s.origin == table.BODY for s in row.spans) for row in rows}
    assert counts["2601.22777"] == 3 and 1 <= counts["2601.00001"] <= 2     # the same body, ranked second


def test_a_row_quotes_the_body_sentence_that_answers_with_its_section():
    question = "How much does removing the sliding window drop RASST's term accuracy?"
    with_body = replace(PAPER, body=stored(make_body()))
    rows = build_rows(question, embed([question])[0], [with_body], embed, floor=0.2)[0]
    made = evidence.make_table(rows, question)
    quotes = made.rows[0].quotes
    body_quotes = [q for q in quotes if q.source == table.BODY]
    assert body_quotes and body_quotes[0].text.startswith("Removing the sliding window")
    assert (body_quotes[0].section, body_quotes[0].anchor) == ("4.2 Ablations", "S4.SS2")
    assert table.verbatim(body_quotes[0], with_body.body.body.text)
    # the same paper without its full text quotes only its abstract
    plain = build_rows(question, embed([question])[0], [PAPER], embed, floor=0.2)[0]
    assert all(q.source == table.ABSTRACT for q in evidence.make_table(plain, question).rows[0].quotes)


@pytest.mark.parametrize("sentence, announces", [
    ("In this section, we first analyze the high-level statistics of our TextAtlas5M.", True),
    ("This section details our approach to designing and training the KL3M tokenizers.", True),
    ("Section 4 describes the experimental setup.", True),
    ("Appendix A provides a constructive proof for a class of environments.", True),
    ("In this section, we show that the sliding window doubles term accuracy.", False),     # it states a finding
    ("The next section presents ablations on 4 datasets.", False),
    ("In this setting, the sliding window model collapses.", False),
    ("This part of the model describes the scene.", False),
])
def test_a_sentence_that_only_announces_a_part_of_the_paper_is_a_signpost(sentence, announces):
    assert body_text.is_signpost(sentence) is announces


def test_a_row_never_quotes_a_signpost_however_many_words_it_shares():
    """Seen on the page: TextAtlas5M's row quoted "In this section, we first analyze the high-level statistics of our
    TextAtlas5M." for the limits its authors report."""
    signpost = "In this section, we analyze the sliding window term accuracy of RASST."
    body = make_body(given=[*PASSAGES[:3], ("4.2 Ablations", "S4.SS2", "4 Experiments", signpost), *PASSAGES[3:]])
    question = "What does the sliding window do to the term accuracy of RASST?"
    with_body = replace(PAPER, body=stored(body))
    scanned = evidence.body_candidates(with_body, question, embed([question])[0])
    assert scanned and signpost not in [span.text for span, *_ in scanned]
    rows = build_rows(question, embed([question])[0], [with_body], embed, floor=0.2)[0]
    assert all(q.text != signpost for q in evidence.make_table(rows, question).rows[0].quotes)


def test_a_body_quote_that_is_not_a_slice_of_the_body_drops_the_row():
    question = "How much does removing the sliding window drop RASST's term accuracy?"
    body = make_body()
    with_body = replace(PAPER, body=stored(body))
    rows = build_rows(question, embed([question])[0], [with_body], embed, floor=0.2)[0]
    edited = replace(body, text=body.text[:body.text.index("Removing")])     # the stored text changed under it
    rows[0].source = replace(with_body, body=replace(with_body.body, body=edited))
    assert not evidence.make_table(rows, question).rows


def test_the_section_is_shown_and_linked_only_after_the_vote():
    question = "How much does removing the sliding window drop RASST's term accuracy?"
    rows = build_rows(question, embed([question])[0], [replace(PAPER, body=stored(make_body()))], embed,
                      floor=0.2)[0]
    made = evidence.make_table(rows, question)
    text = "".join(evidence_text.render_table(made))
    assert "(\u00a74.2 Ablations \u00b7 arxiv.org/html/2601.22777v1#S4.SS2)" in text
    assert evidence_text.is_table(text)
    before = answer_text_html(text, [], reveal=False)
    assert "\u00a74.2 Ablations" in before and "arxiv.org/html" not in before
    after = answer_text_html(text, [], reveal=True)
    assert '<a href="https://arxiv.org/html/2601.22777v1#S4.SS2"' in after
    assert "[\u00a74.2 Ablations](https://arxiv.org/html/2601.22777v1#S4.SS2)" in evidence_text.table_markdown(
        question, made)
    assert table.EvidenceTable.from_json(made.to_json()) == made


def test_the_store_keeps_one_body_per_paper_and_a_new_version_replaces_it(tmp_path):
    store = FulltextStore(tmp_path / "fulltext.sqlite3")
    first = stored(make_body(version="v1"))
    store.put(first.body, first.sentences, "m", first.vectors, "html", first.terms)
    second = stored(make_body(version="v2"))
    store.put(second.body, second.sentences, "m", second.vectors, "html", second.terms)
    got = store.get(["2601.22777", "2601.00000"], "m")
    assert list(got) == ["2601.22777"] and got["2601.22777"].body.version == "v2"
    assert got["2601.22777"].sentences == second.sentences and got["2601.22777"].terms == second.terms
    assert np.allclose(got["2601.22777"].vectors, second.vectors, atol=1e-3)
    assert store.get(["2601.22777"], "another embedder") == {}
    store.note("2601.00000", "no_html", "html", "arXiv has no HTML page for this paper.")
    store.note("2601.22777", "timeout", "html", "slow")            # a stored body stays through a failed re-read
    assert store.with_text(["2601.22777", "2601.00000"]) == {"2601.22777"}
    assert store.counts() == {"ok": 1, "no_html": 1}
    with pytest.raises(ValueError):
        store.put(first.body, first.sentences[:-1], "m", first.vectors, "html")   # all or nothing
    assert store.get(["2601.22777"], "m")["2601.22777"].body.version == "v2"


def test_a_broken_store_file_finds_nothing_and_the_answer_quotes_abstracts(tmp_path):
    path = tmp_path / "fulltext.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    store = FulltextStore(path)
    assert store.get(["2601.22777"], "m") == {} and store.with_text(["2601.22777"]) == set()
    assert store.counts() == {"ok": 0}                             # moved aside and made anew (store.derived_file)
    assert (tmp_path / "fulltext.sqlite3.corrupt").exists()


def test_a_first_look_quotes_only_the_sentences_it_has_a_vector_for():
    """A body still being read (features.fulltext.first_look) holds every sentence but vectors for some: the row
    never quotes one without (its zero vector would read as unrelated, or the mask as nothing)."""
    question = "How much does removing the sliding window drop RASST's term accuracy?"
    whole = stored(make_body())
    texts = [whole.body.text[s[0]:s[1]] for s in whole.sentences]
    answer = next(n for n, text in enumerate(texts) if text.startswith("Removing the sliding window"))
    embedded = np.ones(len(texts), dtype=bool)
    embedded[answer] = False
    look = replace(whole, embedded=embedded)      # its vector kept: only the mask says it has none yet
    def candidates(body):
        return [span.text for span, *_ in evidence.body_candidates(replace(PAPER, body=body), question,
                                                                   embed([question])[0])]

    assert candidates(look) and not any(text.startswith("Removing the sliding window") for text in candidates(look))
    assert any(text.startswith("Removing the sliding window") for text in candidates(whole))


LEANING = [
    ("5 Setup", "S5", "5 Setup",
     "Most of our experiments were conducted on V100 GPUs. An exception is the evaluation of the Infinity model, "
     "which requires FlashAttention, a feature not supported on V100. As a result, we ran the Infinity experiments "
     "on A5000 GPUs."),
    ("5 Setup", "S5", "5 Setup", "However, the Infinity experiments used the same prompts as the others."),
    ("6 Results", "S6", "6 Results",
     "Four games are won by a single press, yet the agent pressed another button on every run and missed the win. "
     "This identifies a failure mode: without a strong hypothesis the agent's choice of button is biased."),
]


def _quoted(question: str, scoped: bool = False) -> list[str]:
    """The body quotes of the paper's row, as the table shows them: across the library, or asked about the paper."""
    with_body = replace(PAPER, body=stored(make_body(given=LEANING)))
    vector = embed([question])[0]
    rows = (passages.passage_rows(question, vector, [with_body], embed, learned_roles=False) if scoped
            else build_rows(question, vector, [with_body], embed, floor=0.2)[0])
    return [q.text for q in evidence.make_table(rows, question).rows[0].quotes if q.source == table.BODY]


@pytest.mark.parametrize("scoped", [False, True])
def test_a_sentence_that_leans_on_the_one_before_is_quoted_with_it(scoped):
    """Seen in eval fulltext: 'As a result, we ran the Infinity experiments on A5000 GPUs.' was quoted alone for why
    they ran on other GPUs; the reason is the sentence before."""
    quoted = _quoted("On which GPUs were the Infinity experiments run?", scoped)
    joined = ("An exception is the evaluation of the Infinity model, which requires FlashAttention, a feature not "
              "supported on V100. As a result, we ran the Infinity experiments on A5000 GPUs.")
    assert any(joined in q for q in quoted)
    assert sum("As a result" in q for q in quoted) == 1                    # never a second time
    assert not any(q.startswith("As a result") for q in quoted)


def test_a_quote_never_takes_a_sentence_from_another_paragraph():
    quoted = _quoted("Did the Infinity experiments use the same prompts as the others?", scoped=True)
    assert "However, the Infinity experiments used the same prompts as the others." in quoted


@pytest.mark.parametrize("scoped", [False, True])
def test_a_why_question_quotes_the_sentence_after_that_explains(scoped):
    explains = "This identifies a failure mode: without a strong hypothesis the agent's choice of button is biased."
    assert any(explains in q for q in _quoted("Why does the agent miss games that a single press would win?", scoped))
    assert not any(explains in q and q != explains for q in _quoted(
        "Which games does the agent miss that a single press would win?", scoped))


def test_quotes_that_overlap_once_in_context_are_shown_as_one():
    with_body = replace(PAPER, body=stored(make_body(given=LEANING)))
    spans = [span for span, *_ in evidence.body_candidates(with_body, "Infinity V100 A5000 GPUs", embed(
        ["Infinity V100 A5000 GPUs"])[0], count=8)]
    spans = sorted((s for s in spans if "Infinity" in s.text and s.section == "5 Setup" and "However" not in s.text),
                   key=lambda s: s.position)
    assert len(spans) == 2            # "An exception …" and "As a result, …", each on its own
    shown, roles = evidence.in_context(with_body, spans, ["other", "result"], "Infinity V100 A5000 GPUs")
    assert len(shown) == len(roles) == 1 and shown[0].text.startswith("An exception") and shown[0].text.endswith(
        "A5000 GPUs.")
    assert table.verbatim(table.Quote(table.BODY, shown[0].start, shown[0].end, shown[0].text, "other"),
                          with_body.body.body.text)


def test_quotes_that_follow_each_other_are_shown_as_one():
    """Seen on the page: "Most of our experiments were conducted on V100 GPUs." … "An exception is …" read as if
    something stood between them."""
    with_body = replace(PAPER, body=stored(make_body(given=LEANING)))
    spans = sorted((span for span, *_ in evidence.body_candidates(with_body, "V100 GPUs", embed(["V100 GPUs"])[0],
                                                                   count=8) if span.section == "5 Setup"),
                   key=lambda s: s.position)
    first = next(s for s in spans if s.text.startswith("Most of our experiments"))
    exception = next(s for s in spans if s.text.startswith("An exception"))
    shown, _ = evidence.in_context(with_body, [first, exception], ["other", "other"], "V100 GPUs")
    assert len(shown) == 1 and shown[0].text.startswith("Most of our") and shown[0].text.endswith("on V100.")
    assert table.verbatim(table.Quote(table.BODY, shown[0].start, shown[0].end, shown[0].text, "other"),
                          with_body.body.body.text)
    later = next(s for s in spans if s.text.startswith("However"))       # the next paragraph: "\n\n" between
    assert len(evidence.in_context(with_body, [first, later], ["other", "other"], "V100 GPUs")[0]) == 2


def test_a_short_list_item_that_states_a_number_is_a_span_and_can_be_the_quote():
    """dev2: "Which calendar years get their own dedicated tokens?" is answered by the list item "Years: Years from
    1776 to 2050", four words, which was never a span (five needed)."""
    given = [("3.3 Custom tokens", "S3.SS3", "3 Method", text) for text in (
        "We add whole tokens for elements common in legal and financial documents.",
        "Years: Years from 1776 to 2050", "Markdown: headings and lists")]
    body = make_body(given=given)
    body = replace(body, passages=tuple(replace(p, kind="item") if n else p for n, p in enumerate(body.passages)))
    found = [body.text[s.start:s.end] for s in body_text.body_sentences(body)]
    assert "Years: Years from 1776 to 2050" in found
    assert "Markdown: headings and lists" not in found          # no number: too short to say anything
    question = "Which years get their own tokens?"
    rows = build_rows(question, embed([question])[0], [replace(PAPER, body=stored(body))], embed, floor=0.2)[0]
    assert "Years: Years from 1776 to 2050" in [q.text for q in evidence.make_table(rows, question).rows[0].quotes]


def test_a_paper_names_the_asked_words_its_full_text_never_uses_when_they_are_half_the_question():
    source = replace(PAPER, body=stored(make_body()))
    assert passages.absent_words("Does RASST work for protein folding?", source) == ("protein", "folding")
    # a first look (a body still being read) has no stems yet: the same words from its text
    assert passages.absent_words("Does RASST work for protein folding?",
                                 replace(source, body=replace(source.body, terms=()))) == ("protein", "folding")
    assert passages.absent_words("Does RASST work for protein folding?", PAPER) == ()    # body not read: say nothing
    for used in ("How many GPUs trained the retriever?",     # "GPUs" as written
                 "Which GPU trained the retriever?",         # "GPU" inside "GPUs"
                 "How wide are the sliding windows?",        # "windows": the stem of "window"
                 "Does dropping the window hurt?",           # "dropping": the stem of the body's "drops"
                 "Which glossary terms does the retriever expect?",  # one word of four is absent: no line
                 "Summarize the paper for me", ""):
        assert passages.absent_words(used, source) == (), used


def test_the_words_a_paper_never_uses_are_a_line_of_the_table_its_checks_and_downloads_keep():
    question = "Does RASST work for protein folding?"
    source = replace(PAPER, body=stored(make_body()))
    rows = passages.passage_rows(question, embed([question])[0], [source], embed)
    made = evidence.make_table(rows, question, chosen=True)
    made = replace(made, rows=tuple(replace(row, absent=passages.absent_words(question, source)) for row in made.rows))
    text = "".join(evidence_text.render_table(made))
    line = "Words of the question found nowhere in its full text: protein, folding."
    assert text.splitlines()[-1] == line and evidence_text.is_table(text)
    assert line in evidence_text.table_markdown(question, made)
    assert table.EvidenceTable.from_json(made.to_json()) == made
    assert not evidence_text.is_table(text.replace("protein", "\u201cprotein\u201d"))   # never a quote mark in it
    assert not evidence_text.is_table(text + "\nWords of the question found nowhere")


LIMITED = PASSAGES[:3] + [
    ("4.3 Serving", "S4.SS3", "4 Experiments", "The translation API is rate-limited to ten calls a second."),
    ("7 Limitations", "S7", "7 Limitations",
     "We tested only two language pairs. Speech from noisy rooms was never evaluated. The retriever stays weak on "
     "accented speech. The glossary must be given in advance."),
]


def test_a_question_asking_only_for_the_limitations_is_answered_by_the_papers_limitations_section():
    source = replace(PAPER, body=stored(make_body(given=LIMITED)))
    section = ["We tested only two language pairs.", "Speech from noisy rooms was never evaluated.",
               "The retriever stays weak on accented speech.", "The glossary must be given in advance."]
    for question in ("What are the limitations of RASST?", "What are the limitations?",
                     "Which weaknesses does the paper admit?"):
        (row,) = passages.passage_rows(question, embed([question])[0], [source], embed)
        # the section's sentences, shown as one quote (one paragraph), not "… is rate-limited …"; all of them, though
        # "weak" gives one a word of "weaknesses"
        assert [span.text for span in row.spans] == [" ".join(section)], question
    # a question that asks more than the kind ("noisy rooms" is no word of the paper's title or abstract) is
    # answered as before: by its words, wherever they are
    specific = "Which limitation concerns noisy rooms?"
    assert not passages.dedicated_positions(specific, source)
    (row,) = passages.passage_rows(specific, embed([specific])[0], [source], embed)
    assert "Speech from noisy rooms was never evaluated." in [span.text for span in row.spans]
    assert not passages.dedicated_positions("What are the limitations?", replace(source, body=stored(make_body())))


def test_a_question_asking_only_whether_the_code_is_available_is_answered_by_a_section_on_its_availability():
    given = PASSAGES[:3] + [("4.3 Serving", "S4.SS3", "4 Experiments", "The code path of the decoder is cached."),
                            ("Code availability", "S9", "Code availability",
                             "All scripts and trained retrievers are released as a versioned archive.")]
    source = replace(PAPER, body=stored(make_body(given=given)))
    for question in ("Is the code available?", "Did they release their code?"):
        (row,) = passages.passage_rows(question, embed([question])[0], [source], embed)
        assert [span.text for span in row.spans] == [
            "All scripts and trained retrievers are released as a versioned archive."], question


def test_asked_only_whether_the_code_is_available_a_chosen_paper_quotes_its_repository_link():
    given = PASSAGES[:3] + [("4.3 Serving", "S4.SS3", "4 Experiments", "The code path of the decoder is cached."),
                            ("6 Conclusion", "S6", "6 Conclusion",
                             "Our training code is on GitHub at https://github.com/ann/rasst. We thank the reviewers.")]
    source = replace(PAPER, body=stored(make_body(given=given)))
    question = "Where can I find the code?"
    rows = passages.passage_rows(question, embed([question])[0], [source], embed)
    made = evidence.make_table(rows, question, chosen=True)
    assert [q.text for q in made.rows[0].quotes] == ["Our training code is on GitHub at https://github.com/ann/rasst."]
    assert evidence_text.is_table("".join(evidence_text.render_table(made)))
    # nor asked about the paper for anything else (a link would crowd out answers: one of dev2's was lost so)
    other = "Which training code did they put on GitHub?"                 # a question about the training setup
    rows = passages.passage_rows(other, embed([other])[0], [source], embed)
    assert rows and not any("https://" in span.text for row in rows for span in row.spans)
    # across the library (and in Adaptive, whose checks drop a link its abstract lacks) a link is never quoted
    library = evidence.body_candidates(source, question, embed([question])[0], count=20)
    assert library and not any("https://" in span.text for span, *_ in library)
