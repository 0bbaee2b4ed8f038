"""The evidence table (issue #39) and verbatim quotes (issue #41 item 4), unit tier: a bag-of-words stand-in for
the embedder (tests/test_quotes.embed), so the rules are exact. Real abstracts with the real embedder:
test_quotes_real.py and the answers bench."""

from __future__ import annotations

import pytest

from copilot.methods import evidence, evidence_text, quotes
from copilot.methods.evidence import Source, build_rows, cue_roles
from copilot.methods.evidence_groups import group_rows
from copilot.methods.slim import check_main_answer
from copilot.methods.thought_drafts import table_thought
from copilot.methods.thought_retriever import check_answer
from copilot.records import Evidence
from copilot.table import Quote, verbatim
from tests.test_quotes import embed

pytestmark = pytest.mark.unit

KV = Source("2503.00001", "WindowKV: task-adaptive window selection for the KV cache",
            ("Ann Lee", "Bo Chen", "Cy Park"), "2025-03-20",
            "The KV cache has become one of the foundational components of long-context inference. However, "
            "its memory footprint remains a challenge for long inputs. We propose WindowKV, which keeps the KV "
            "cache windows that matter for the task. WindowKV compresses the KV cache to 12% of its memory "
            "while keeping accuracy on LongBench.", 0.6)
XKV = Source("2503.00002", "xKV: cross-layer SVD for KV cache compression", ("Dee Wu",), "2025-03-25",
             "Large language models are increasingly used with long contexts. We introduce xKV, a cross-layer SVD "
             "that compresses the KV cache of several layers at once. xKV saves up to 6.8x memory of the KV cache "
             "over per-layer compression.", 0.55)
PROTEIN = Source("2503.00003", "Protein folding with transformers", ("Eve Ng", "Fu Li"), "2025-01-02",
                 "We predict protein structures from amino acid sequences with a transformer model.", 0.2)
QUESTION = "Which methods compress the KV cache and how much memory do they save?"


def is_verbatim(row) -> bool:
    """Every quote of a row is the slice of its abstract it says it is."""
    found = row.quotes()
    return bool(found) and all(verbatim(quote, row.source.abstract) for quote in found)


def rows_for(question, sources, floor=0.2):
    return build_rows(question, embed([question])[0], sources, embed, floor=floor)[0]


def test_cues_tell_background_from_what_a_paper_does_and_finds():
    sentences = ["Retrieval-augmented generation has become a standard tool.",
                 "However, multi-hop questions remain a challenge.",
                 "We propose HopRAG, a graph over passages.",
                 "HopRAG improves exact match by 7.5 points over the baseline.",
                 "We study how retrievers fail on multi-hop questions."]
    assert cue_roles(sentences) == ["background", "background", "method", "result", "objective"]
    # a setting that opens with a connective is still the setting
    assert evidence.cue_role("Additionally, while 3D Gaussian Splatting excels in small scenes, its use in large "
                             "scenes is hindered by limited video memory.", opens_abstract=False) == "background"


def test_a_row_quotes_what_the_paper_does_or_finds_never_its_background_or_title():
    rows = rows_for(QUESTION, [KV, XKV, PROTEIN])
    assert [row.source.paper_id for row in rows][:2] and PROTEIN.paper_id not in [r.source.paper_id for r in rows]
    for row in rows:
        assert "has become" not in row.quote and "remains a challenge" not in row.quote
        assert row.quote != row.source.title and is_verbatim(row)
        assert "background" not in row.roles
    kv = next(row for row in rows if row.source is KV)
    assert "12%" in kv.quote                                  # how much: the sentence with the number


def test_a_question_about_nothing_in_the_library_gets_no_rows():
    assert rows_for("What is the best recipe for banana bread with walnuts?", [KV, XKV, PROTEIN], floor=0.3) == []


def test_a_paper_the_question_names_comes_first():
    rows = rows_for("What does Protein folding with transformers propose?", [KV, XKV, PROTEIN])
    assert rows[0].source is PROTEIN
    assert rows[0].quote.startswith("We predict protein structures")     # the restating title is not the quote


@pytest.mark.parametrize("abstract", [
    " ".join(f"token{n}" for n in range(160)),                                             # no punctuation
    "We compress the cache, " * 40 + "and we save memory.",                                # one run-on sentence
    r"We bound the error by $O(n^{2}\log n)$ for $k \in [0, 1]$. We save $3.2\times$ memory of the cache.",
])
def test_odd_abstracts_split_into_bounded_verbatim_spans_marked_where_cut(abstract):
    spans = evidence.spans_of(abstract)
    assert spans and all(len(s.text.split()) <= evidence.MAX_QUOTE_WORDS for s in spans)
    assert all(s.text in " ".join(abstract.split()) for s in spans)
    source = Source("2501.00009", "Odd", (), "2025-01-01", abstract, 0.5)
    for row in rows_for("How much cache memory do we save by compression? token5 token150", [source], floor=-1):
        assert is_verbatim(row)
        if row.spans[0].cut_before:
            assert row.quote.startswith(evidence_text.ELLIPSIS)
        if row.spans[-1].cut_after:
            assert row.quote.endswith(evidence_text.ELLIPSIS)


def test_a_quote_is_verbatim_only_as_the_slice_it_names():
    start = KV.abstract.index("We propose WindowKV")
    end = KV.abstract.index(".", start) + 1
    assert verbatim(Quote("abstract", start, end, KV.abstract[start:end]), KV.abstract)
    assert not verbatim(Quote("abstract", start, end, KV.abstract[start:end].replace("  ", " ") + " "), KV.abstract)
    assert not verbatim(Quote("abstract", start + 1, end + 1, KV.abstract[start:end]), KV.abstract)    # moved
    assert not verbatim(Quote("abstract", start, 10 ** 6, KV.abstract[start:]), KV.abstract)            # past its end


# A paper's own spacing and closing marks, which the splitter and the answer checks used to change: "FastDec.)"
# lost its ")" when the next sentence was joined on, and "Token Choice ;and" became "Token Choice;and".
ODD = Source("2503.00007", "FastDec: token choice for decoding", ("Ida Ro",), "2025-03-07",
             "We propose a decoding scheme for the KV cache (called FastDec.) Experiments show FastDec saves 40% of "
             "the KV cache memory with Token Choice ;and it keeps accuracy , at 2x speed.", 0.6)


def test_a_sentence_keeps_the_closing_marks_after_its_full_stop():
    spans = evidence.spans_of(ODD.abstract)
    assert spans[0].text.endswith("(called FastDec.)") and spans[1].text.startswith("Experiments show")
    assert all(ODD.abstract[span.start:span.end] == span.text for span in spans)


def test_the_table_renders_its_rows_and_passes_the_checks_unchanged():
    made = evidence.make_table(rows_for(QUESTION, [KV, XKV, PROTEIN, ODD]), QUESTION)
    text = "".join(evidence_text.render_table(made))
    assert [row.label for row in made.rows] == [str(n) for n in range(1, len(made.rows) + 1)]
    odd = next(row for row in made.rows if row.paper_id == ODD.paper_id)
    assert all(verbatim(quote, ODD.abstract) for quote in odd.quotes)
    assert "Token Choice ;and it keeps accuracy , at 2x speed." in text
    assert next(row for row in made.rows if row.paper_id == KV.paper_id).authors[:2] == ("Ann Lee", "Bo Chen")
    assert evidence_text.is_table(text) and quotes.is_quoted_answer(text)
    items = [Evidence(s.paper_id, "paper", s.title, s.abstract, s.score) for s in (KV, XKV, PROTEIN, ODD)]
    assert check_answer(text, items, quoted=True).text == text.strip()
    assert check_main_answer(text, items, quoted=True).text == text.strip()   # Adaptive's checks move no row's label
    for row in made.rows:                                               # every quote still stands in the text
        for quote in row.quotes:
            assert quote.shown in check_answer(text, items, quoted=True).text
    draft, lineage = table_thought(made, text, items, embed, QUESTION, floor=0.1)
    assert draft.confidence == 1 and {pid for pid, _ in lineage} <= set(made.paper_ids)
    assert not evidence_text.is_table(text + "\n\nAnd a sentence of the model's own.")


def test_rows_fall_into_groups_headed_by_a_phrase_of_their_own_quotes():
    def paper(n, text):
        return Source(f"2504.0000{n}", f"Paper {n}", ("A",), "2025-04-01", text, 0.5)
    sources = [paper(1, "We propose token eviction that drops cold tokens from the cache during decoding."),
               paper(2, "Our token eviction policy drops cold tokens from the cache and keeps recent ones."),
               paper(3, "We apply 2-bit quantization to keys and values stored in the cache."),
               paper(4, "With 2-bit quantization of keys and values the cache shrinks eightfold.")]
    question = "How is the cache made smaller?"
    rows, vectors = build_rows(question, embed([question])[0], sources, embed, floor=0.05)
    assert len(rows) == 4 and group_rows(rows, vectors, question)
    groups = {row.source.paper_id: row.group for row in rows}
    assert groups["2504.00001"] == groups["2504.00002"] != groups["2504.00003"] == groups["2504.00004"]
    for row in rows:
        assert row.group in row.quote                                       # the heading is the rows' own words
    made = evidence.make_table(rows, question)
    assert evidence_text.is_table("".join(evidence_text.render_table(made)))
    assert {r.group for r in made.rows} == set(groups.values())
    assert not group_rows(rows[:3], vectors[:3], question)                  # fewer than four rows: no groups


def test_downloads_hold_every_row_with_its_link():
    made = evidence.make_table(rows_for(QUESTION, [KV, XKV]), QUESTION)
    csv_text, markdown = evidence_text.table_csv(QUESTION, made), evidence_text.table_markdown(QUESTION, made)
    for row in made.rows:
        assert f"https://arxiv.org/abs/{row.paper_id}" in csv_text and row.paper_id in markdown
        assert all(quote.shown in csv_text for quote in row.quotes)
    assert csv_text.count("\n") == len(made.rows) + 1 and markdown.count("\n| ") == len(made.rows) + 1


# --- issue #41 item 4 -----------------------------------------------------------------------------------------
def test_strip_ids_leaves_quoted_text_as_written():
    text = "Scores are normalised to [0, 1]. It is \u201cfast\u201d , see [sic] and 2503.16965 rows."
    assert quotes.strip_ids(text) == text
    assert quotes.strip_ids("Dense beats sparse [2] [2503.16965v2] (arXiv:2501.00001).") == "Dense beats sparse."


def test_the_most_direct_answer_is_not_dropped_for_restating_the_question():
    question = "Does dense retrieval beat BM25 on question answering benchmarks?"
    texts = ["Dense passage retrieval\nDense retrieval beats BM25 on question answering benchmarks. "
             "We train a dual encoder on question-passage pairs."]
    found = [sentence for _, sentence, _ in quotes.candidates(question, texts)]
    assert "Dense retrieval beats BM25 on question answering benchmarks." in found
    source = Source("2501.00001", "Dense passage retrieval", (), "2025-01-01", texts[0].split("\n")[1], 0.5)
    assert rows_for(question, [source])[0].quote.startswith("Dense retrieval beats BM25")


def test_the_filters_a_question_states_are_read_from_it():
    from datetime import date

    from copilot.features.evidence_search import implied_filters

    newest = date(2026, 3, 1)
    recent = implied_filters("Which recent papers compress the KV cache?", newest)
    assert recent.date_from == date(2025, 3, 1) and recent.date_to is None and not recent.categories
    year = implied_filters("What did cs.cl papers in 2025 find about RAG?", newest)
    assert (year.date_from, year.date_to, year.categories) == (date(2025, 1, 1), date(2025, 12, 31), ["cs.CL"])
    assert implied_filters("RAG since 2025", newest).date_to is None
    assert not implied_filters("How do dense retrievers compare with BM25?", newest).any


def test_a_paper_the_question_names_by_its_arxiv_id_comes_first_whatever_its_words():
    from dataclasses import replace

    question = "What does 2503.00003 find?"
    assert rows_for(question, [KV, XKV, PROTEIN], floor=0.3) == []            # its words match nothing
    rows = rows_for(question, [KV, XKV, replace(PROTEIN, named=True)], floor=0.3)
    assert rows[0].source.paper_id == PROTEIN.paper_id and rows[0].quote.startswith("We predict protein")


def test_rows_keep_the_retrievals_order_and_drop_papers_far_from_the_question():
    """Search's fused order ranks the rows, not one sentence's score; a paper is a row when its own cosine clears the
    paper floor or its best sentence clears the floor (a short question embeds poorly against a whole abstract)."""
    from dataclasses import replace

    stray = Source("2503.00004", "Serving web pages at the edge", ("Gil Ho",), "2025-02-02",
                   "We propose EdgeServe, a system that serves cached web pages from nearby servers.", 0.25)
    terse = Source("2503.00005", "Notes on caches", ("Hal Wu",), "2025-02-03",
                   "Our scheme compresses the KV cache and saves memory of the KV cache.", 0.1)
    sources = [replace(XKV, rank=0), replace(stray, rank=1), replace(KV, rank=2), replace(terse, rank=3)]
    rows = rows_for(QUESTION, sources)
    assert [row.source.paper_id for row in rows] == [XKV.paper_id, KV.paper_id, terse.paper_id]
    assert rows_for(QUESTION, sources, floor=0.99) == []        # no sentence near the question: no rows at all
    assert len(build_rows(QUESTION, embed([QUESTION])[0], sources, embed, max_rows=1, floor=0.2)[0]) == 1


def test_a_named_paper_quotes_what_it_proposes_then_what_it_finds():
    """"What does the paper X propose?": the row opens with the paper's own "we introduce …" sentence, even when
    another method sentence shares more of the title's words, then a result."""
    abstract = ("Sparse attention for long video transformers is studied with sparse attention masks. "
                "In this paper, we introduce StripeNet, which attends along learned stripes of frames. "
                "We train sparse attention long video transformers with stripe masks on four datasets. "
                "StripeNet cuts memory by 41% at equal accuracy.")
    paper = Source("2503.00009", "Sparse attention for long video transformers", ("Ann Lee",), "2025-03-01",
                   abstract, 0.5)
    rows = rows_for('What does the paper "Sparse attention for long video transformers" propose?', [paper, XKV])
    assert rows[0].source is paper
    assert rows[0].quote.startswith("In this paper, we introduce StripeNet") and "41%" in rows[0].quote
    assert is_verbatim(rows[0])


HOP = Source("2504.00004", "HopRAG: a passage graph for multi-hop retrieval", ("Gil Ma",), "2025-04-08",
             "Retrieval-augmented generation systems often struggle with multi-hop questions due to irrelevant "
             "context retrieval. To address these limitations of retrieval-augmented generation, we propose HopRAG, "
             "a graph over passages for multi-hop questions. HopRAG improves exact match on multi-hop questions by "
             "7.5 points over retrieval-augmented generation baselines.", 0.6)


def test_a_question_about_limits_quotes_the_sentence_that_states_one():
    """"What are the limits of …?" is answered by the abstract's own statement of a limitation, though abstracts
    state it in their setting (background); a sentence about removing one ("To address these limitations") is not
    such a statement, and any other question still gets what the paper does or finds."""
    asked = "What are the limits of retrieval-augmented generation for multi-hop questions?"
    [row] = rows_for(asked, [HOP])
    assert row.quote.startswith("Retrieval-augmented generation systems often struggle") and row.roles == ["limitation"]
    assert is_verbatim(row)
    [why] = rows_for("Why does retrieval-augmented generation fail on multi-hop questions?", [HOP])
    assert "due to irrelevant context retrieval" in why.quote
    [plain] = rows_for("Which methods improve retrieval-augmented generation for multi-hop questions?", [HOP])
    assert "struggle" not in plain.quote and "background" not in plain.roles
    assert not evidence.states(evidence.limit_cue(asked), "To address these limitations, we propose HopRAG.")
    assert evidence.limit_cue("Which methods compress the KV cache?") is None


def test_a_papers_key_finding_is_never_its_background():
    """Trends summaries and profile drafts on the tiny profile quote each paper's key sentence: the one nearest a
    target among those that say what the paper does or finds, even when its setting is nearer; an abstract that
    opens with its finding ("We show that …") may be quoted by its first sentence."""
    text = f"{KV.title}\n{KV.abstract}"
    setting = "The KV cache has become one of the foundational components of long-context inference."
    target = embed([setting])[0]
    assert quotes.key_sentences(target[None, :], [text], embed) == [setting]          # the plain nearest
    found = evidence.key_findings(target[None, :], [text], embed, learned_roles=False)[0]
    assert found is not None and found != setting and "its memory footprint remains" not in found
    assert found in KV.abstract
    opens_with_finding = ("Title\nWe show that small models trained with feedback match larger ones on math "
                          "benchmarks. The models are trained on public data.")
    first = "We show that small models trained with feedback match larger ones on math benchmarks."
    assert evidence.key_findings(embed([first]), [opens_with_finding], embed, learned_roles=False) == [first]
    assert evidence.key_findings(target[None, :], ["Title\nDeep learning has become popular."], embed,
                                 learned_roles=False) == [None]
