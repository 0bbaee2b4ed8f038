"""Issue #59's screens below the browser: LaTeX citations in Trends quotes, appendix sections named as a reader does,
a section link whose title holds parentheses, thought memory's source counts instead of a level, Related's scores
closed by default, Trends against a near-empty earlier window and its labels, quotes that keep their subject."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pytest

from copilot.body import Body, Passage, Section
from copilot.methods import body_text, quotes, topics
from copilot.readable import readable
from copilot.records import Paper


@pytest.mark.parametrize("raw, shown", [
    (r"as Liu~\cite{wang2024stylemamba} showed", "as Liu showed"),
    (r"we call it \emph{ReverBERT}, a model", "we call it ReverBERT, a model"),
    (r"see Fig.~3 and Liu~et al.~\citep[see][p.~4]{a,b}.", "see Fig. 3 and Liu et al.."),
    ("a page at https://x.org/~me and ~740K tokens", "a page at https://x.org/~me and ~740K tokens"),
])
def test_citations_and_ties_of_an_abstract_are_shown_as_text(raw, shown):
    assert readable(raw) == shown


def test_trends_quotes_show_no_latex():
    from copilot.ui.trends import linked

    html = linked(r"“Liu~\cite{wang2024stylemamba} propose \emph{ReverBERT}.” [2503.12345]")
    assert "\\" not in html and "~" not in html and "ReverBERT" in html and "arxiv.org/abs/2503.12345" in html


def _body(*sections: tuple[str, str]) -> Body:
    made = tuple(Section(title, anchor, title) for title, anchor in sections)
    return Body("2606.17107", "v1", "html", "x", made, (Passage(0, 1, 0, "paragraph"),))


@pytest.mark.parametrize("title, anchor, label", [
    ("4.2 Ablations", "S4.SS2", "4.2 Ablations"),
    ("Appendix E Full Model Results", "A5", "Appendix E Full Model Results"),
    ("E.1 Prompting Strategy", "A5.SS1", "Appendix E.1 Prompting Strategy"),
    ("-E1", "A5.SS1", "Appendix E.1"),
    ("-N", "A14", "Appendix N"),
    ("A component-level circuit.", "A1.SS0.SSS0.Px1", "Appendix A Circuits \u203a A component-level circuit."),
    ("A component-level circuit.", "S3.SS0.SSS0.Px2", "3 Method \u203a A component-level circuit."),
])
def test_sections_are_named_as_a_reader_names_them(title, anchor, label):
    """LaTeXML's appendix numbering ("§-E1", "§-N") and a paragraph whose title begins with "A" (issue #59)."""
    body = _body(("Appendix A Circuits", "A1"), ("3 Method", "S3"), (title, anchor))
    assert body_text.section_label(body, body.sections[-1]) == label


def test_a_section_link_is_a_link_when_its_title_holds_parentheses():
    from copilot.ui.chat.render import answer_text_html

    text = ("Evidence from 1 paper of the library, most relevant first:\n\n“We find X.” (§Appendix B (Ablations) › "
            "Setup · arxiv.org/html/2606.17107v1#A2.SS0.SSS0.Px1)")
    shown = answer_text_html(text, (), reveal=True)
    assert 'href="https://arxiv.org/html/2606.17107v1#A2.SS0.SSS0.Px1"' in shown
    assert "· arxiv.org/html" not in shown
    hidden = answer_text_html(text, (), reveal=False)
    assert "arxiv.org/html" not in hidden and "(§Appendix B (Ablations) › Setup)" in hidden


def test_memory_says_what_a_thought_was_made_from_not_its_level():
    from copilot.ui.chat.memory import memory_html

    thought = {"id": "T0123456789", "created_at": 0.0, "level": 2.0, "origin": "chat", "text": "t", "question": "q",
               "sources": [{"kind": "paper", "id": "2503.00001", "title": "a"},
                           {"kind": "paper", "id": "2503.00002", "title": "b"},
                           {"kind": "thought", "id": "T9876543210"}],
               "root_papers": [{"id": "2503.00001", "title": "a"}]}
    html = memory_html([thought])
    assert "level" not in html and "made from 2 papers and 1 thought" in html


def test_corpus_count_has_a_thousands_separator():
    import inspect

    from copilot.ui import library

    assert "{info['papers']:,}" in inspect.getsource(library)


def _papers(n: int, day: date) -> list[Paper]:
    return [Paper(id=f"2503.{i:05d}", title=f"paper {i}", abstract="", authors=[], categories=["cs.CL"],
                  published=day) for i in range(n)]


def test_no_arrows_against_an_earlier_window_of_too_few_papers():
    """Issue #59: against a window of 1 paper, seven of eight topics read "rising" by more than 50 points."""
    rng = np.random.default_rng(0)
    start, end = date(2025, 3, 19), date(2025, 4, 30)
    vectors = rng.normal(size=(60, 8)).astype(np.float32)
    few = rng.normal(size=(2, 8)).astype(np.float32)
    made = topics.build_topics(_papers(60, start + timedelta(days=3)), vectors, start, end, few, k=4)
    assert all(t.rising is None and t.falling is None and t.change is None for t in made)
    enough = rng.normal(size=(topics.MIN_PREVIOUS_PAPERS, 8)).astype(np.float32)
    made = topics.build_topics(_papers(60, start + timedelta(days=3)), vectors, start, end, enough, k=4)
    assert all(t.rising is not None for t in made)


def test_topic_labels_are_whole_words_used_by_several_papers():
    documents = ["DeepSeek-R1 reasoning with long chains of thought and reinforcement training"] * 3 + [
        "REK REK REK REK REK clinical notes retrieval", "clinical notes summarization with retrieval",
        "clinical notes and retrieval for hospitals"]
    terms = topics.topic_terms(documents, [0, 0, 0, 1, 1, 1])
    assert "deepseek-r1" in terms[0] and not any(t.endswith("-") for ts in terms for t in ts)
    assert "rek" not in terms[1] and "clinical" in " ".join(terms[1])


@pytest.mark.parametrize("piece, alone", [
    ("where reasoning continues even after reaching a confident answer.", False),
    ("specifically designed to determine when retrieval is needed and what to retrieve for LLMs is useful.", False),
    ("and (2) a hierarchical evaluation pipeline that scores each answer", False),
    ("we show that retrieval helps small models", True),
    ("GPT-4o reaches 90% accuracy", True),
    ("(2) the pipeline reduces cost by half", True),
])
def test_a_piece_of_a_sentence_reads_alone_only_with_its_subject_and_verb(piece, alone):
    assert quotes.reads_alone(piece) is alone


def test_a_piece_without_its_subject_is_quoted_with_its_whole_sentence_or_not_at_all():
    """The real shape of issue #59's quote: a long sentence cut at a comma before "where …"."""
    sentence = ("We study overthinking in large reasoning models trained with reinforcement learning on math and "
                "code benchmarks of several sizes and domains, where reasoning continues even after reaching a "
                "confident answer and the extra tokens add cost without improving the accuracy of the final answer.")
    assert any(p.startswith("where") for p in quotes.split_sentences(sentence, max_words=25))   # the bounded cut
    assert quotes.statements(sentence, max_words=25) == [sentence]                  # the whole sentence instead
    assert quotes.statement_pieces(sentence, 0, len(sentence), 25) == [(0, len(sentence), False, False)]
    endless = sentence[:-1] + ", " + ", ".join(["which the longer runs repeat over many more steps"] * 12) + "."
    kept = quotes.statements(endless, max_words=25)            # too long to quote whole: only what reads alone
    assert kept and kept[0].startswith("We study") and not any(p.startswith(("where", "which")) for p in kept)
    assert all(len(p.split()) <= 25 for p in kept)


def test_evidence_spans_keep_their_subject():
    from copilot.methods.evidence import spans_of

    abstract = ("Large reasoning models overthink. We study overthinking in large reasoning models trained with "
                "reinforcement learning on math and code benchmarks of several sizes and domains, where reasoning "
                "continues even after reaching a confident answer and the extra tokens add cost without improving "
                "the accuracy of the final answer, and we propose an early exit that keeps accuracy.")
    spans = spans_of(abstract)
    assert not any(s.text.startswith(("where", "and ")) for s in spans), [s.text for s in spans]
    assert all(abstract[s.start:s.end] and " ".join(abstract[s.start:s.end].split()) == s.text for s in spans)


def test_profile_says_what_arxiv_was_asked_in_words():
    """Issue #59: Profile showed `(arXiv query au:&quot;qi zhang&quot;)`, escaped twice, the query's syntax."""
    from copilot.features.profile_lookup import query_in_words
    from copilot.methods.authors import parse_author_name

    name = parse_author_name("Qi Zhang")
    assert query_in_words(name, 'au:"qi zhang"') == "the full name Qi Zhang"
    assert query_in_words(name, "au:zhang_q") == "the surname Zhang with the initial Q"
    assert query_in_words(parse_author_name("del maestro"), "au:del_maestro") == "the surname Del Maestro"
    assert query_in_words(name, "") == ""
