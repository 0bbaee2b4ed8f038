"""The Ask tab's answer columns are blind until the vote: a papers-only answer and a papers + thoughts answer
render to the same markup but for their text; the vote reveals sides, kinds, arXiv links, ids and lineage."""

from __future__ import annotations

import re
from dataclasses import replace

from copilot.features.chat_view import AnswerView, TurnView, VoteView
from copilot.store.chat_log import SourceRecord
from copilot.ui.chat.render import answer_html, turn_outputs

PAPER_1 = SourceRecord(id="2501.00001", kind="paper", title="Graph retrieval",
                       preview="Graph retrieval We study graph-based retrieval for question answering " * 3, score=0.9)
PAPER_2 = SourceRecord(id="2501.00002", kind="paper", title="Dense <b>retrievers</b>",
                       preview="Dense <b>retrievers</b> Dense retrievers embed queries and passages " * 3, score=0.8)
THOUGHT = SourceRecord(id="Tabc1234567", kind="thought", title="Graphs help retrieval",
                       preview="Graphs help retrieval because linked papers share evidence; <script>x</script> " * 3,
                       score=0.95)
LINEAGE = {"Tabc1234567": [{"id": "2501.00001", "title": "Graph retrieval"}]}


def answer(label: str, kind: str, sources: list[SourceRecord], text: str, seconds: float = 3.5) -> AnswerView:
    return AnswerView(label=label, kind=kind, text=text, error=None, done=True, seconds=seconds,
                      thought_augmented=kind == "thoughts", sources=tuple(sources))


RAW = answer("A", "raw", [PAPER_1, PAPER_2], "Graphs help [1]. Dense models too [2].", seconds=2.0)
AUGMENTED = answer("B", "thoughts", [THOUGHT, PAPER_1], "Linked papers share evidence [1][2].", seconds=9.0)


def without_text(markup: str) -> str:
    """The markup with every text node emptied and the A/B label (a position, not a side) made neutral."""
    return re.sub(r">[^<]*<", "><", markup).replace('data-label="A"', 'data-label="X"').replace(
        'data-label="B"', 'data-label="X"')


def test_before_the_vote_both_sides_render_the_same_markup_but_for_the_answers_words():
    raw, augmented = answer_html(RAW, reveal=False), answer_html(AUGMENTED, reveal=False)
    assert without_text(raw) == without_text(augmented)
    assert without_text(raw) == (
        '<div class="chat-answer" data-label="X"><h3></h3><div class="chat-answer-text">'
        '<span class="chat-cite"></span><span class="chat-cite"></span></div>'
        '<details open><summary></summary><p class="chat-sources-hidden"></p></details></div>')
    for markup in (raw, augmented):
        assert "<a " not in markup and "arxiv" not in markup
        assert "2501.0000" not in markup and "Tabc" not in markup and "thought" not in markup
        assert " s<" not in markup and "chat-badge" not in markup       # no per-answer time, no side badge
        assert "Graph retrieval" not in markup and "Graphs help retrieval" not in markup   # no source text
    # the sources' region is the same text on both sides: not their number, kinds or previews
    region = re.compile(r"<details.*</details>")
    assert region.search(raw).group(0) == region.search(augmented).group(0)
    assert "Sources (" not in raw + augmented


def test_raw_ids_in_the_answer_become_neutral_labels_and_unknown_ones_are_dropped_until_the_vote():
    text = "From the thought [Tabc1234567] and the paper [2501.00001]; not retrieved: [Tzzz9999999] [2409.99999] [7]."
    markup = answer_html(answer("B", "thoughts", [THOUGHT, PAPER_1], text), reveal=False)
    body = re.search(r'<div class="chat-answer-text">(.*?)</div>', markup).group(1)
    assert body == ('From the thought <span class="chat-cite">[1]</span> and the paper '
                    '<span class="chat-cite">[2]</span>; not retrieved: [7].')
    revealed = answer_html(answer("B", "thoughts", [THOUGHT, PAPER_1], text), reveal=True)
    assert "[Tzzz9999999] [2409.99999] [7]." in revealed


def test_a_comparison_is_shown_only_once_both_answers_are_written():
    writing = TurnView(turn_id="t1", comparison="pending", question="q", user="local", retrieval_s=0.1,
                       answers=(RAW, replace(AUGMENTED, done=False, text="Linked papers")))
    _, a, b = turn_outputs(writing)
    assert without_text(a) == without_text(b) and "Linked papers" not in a + b and "Graphs help" not in a + b
    assert "shown together" in a


def test_a_comparison_is_shown_while_its_papers_full_text_is_read():
    """Issue #59: with both answers written, the comparison waits only for its papers' bodies (up to 10 s): both
    answers are shown from abstracts meanwhile, blind, under the line saying what is still being read."""
    reading = TurnView(turn_id="t1", comparison="pending", question="q", user="local", retrieval_s=0.1,
                       answers=(RAW, AUGMENTED))
    notice, a, b = turn_outputs(reading, "Reading the full text of 3 papers in these answers…")
    assert "shown together" not in a + b
    assert "Graphs help" in a and "Linked papers share evidence" in b
    assert without_text(a) == without_text(b) and "chat-badge" not in a + b and "Sources (" not in a + b
    assert "Reading the full text of 3 papers" in notice


def test_the_vote_reveals_sides_kinds_links_ids_times_and_lineage():
    raw = answer_html(RAW, reveal=True, lineage=LINEAGE)
    augmented = answer_html(AUGMENTED, reveal=True, lineage=LINEAGE)
    assert "papers only" in raw and "papers + thoughts" in augmented
    assert '<span class="chat-answer-time">2.0 s</span>' in raw and "9.0 s" in augmented
    assert '<a href="https://arxiv.org/abs/2501.00002" target="_blank" rel="noopener">Dense &lt;b&gt;' in raw
    assert "<code>2501.00001</code>" in raw
    assert '<li class="chat-source chat-source-thought"><span class="chat-source-label">[1]</span>' in augmented
    assert "<code>Tabc1234567</code>" in augmented
    assert ('<div class="chat-lineage">Rests on: <a href="https://arxiv.org/abs/2501.00001" target="_blank" '
            'rel="noopener">2501.00001 Graph retrieval</a></div>') in augmented
    # a citation of a paper links to it; a citation of a thought stays a label
    assert '<span class="chat-cite"><a href="https://arxiv.org/abs/2501.00001"' in augmented
    assert '<span class="chat-cite">[1]</span>' in augmented
    noted = replace(RAW, notes=["The prompt had 9,000 tokens, more than the <model>'s context."])
    assert "chat-notes" not in answer_html(noted, reveal=False)        # the checks' notes wait for the vote
    assert "<li>The prompt had 9,000 tokens, more than the &lt;model&gt;&#x27;s context.</li>" in answer_html(
        noted, reveal=True)
    quick = answer_html(replace(RAW, seconds=0.04), reveal=True)    # a table from stored vectors: not "0.0 s"
    assert '<span class="chat-answer-time">under 0.1 s</span>' in quick
    forgotten = answer_html(AUGMENTED, reveal=True, lineage={})
    assert "Rests on: not known (the thought is no longer in memory)" in forgotten


def view(vote=None, done=True) -> TurnView:
    answers = (replace(RAW, done=done), replace(AUGMENTED, done=done))
    return TurnView(turn_id="t1", comparison="yes" if done else "pending", question="How do graphs help?",
                    user="local", vote=vote, retrieval_s=0.5, answers=answers)


def test_turn_shows_only_the_total_time_until_the_vote():
    notice, a, b = turn_outputs(view())
    assert '<div class="chat-time">Answered in 11.5 s</div>' in notice
    assert without_text(a) == without_text(b)
    assert "chat-answer-time" not in a + b
    writing, a, b = turn_outputs(view(done=False))
    assert "chat-time" not in writing
    _, a, b = turn_outputs(view(vote=VoteView("thoughts", "B", 0)), lineage=LINEAGE)
    assert "papers only" in a and "papers + thoughts" in b and "Rests on:" in b


def test_a_turn_without_comparison_says_why_and_its_one_answer_takes_the_width():
    """Issue #20: the right column was empty on the first questions with no word on why (the notice says it);
    issue #39: half the page then said "No second answer": the second column is hidden instead. A past turn can be
    reopened with its answers, sources and the user's vote."""
    from copilot.ui.chat.ask import columns
    from copilot.ui.chat.render import history_choices, reopened_outputs

    single = TurnView(turn_id="t1", comparison="same_items", question="What <i>is</i> RAG?", user="local",
                      answers=(replace(RAW, label="A"),), retrieval_s=0.1, created_at=1_760_000_000.0)
    notice, a, b = turn_outputs(single)
    assert "No comparison yet" in notice and "vote" in notice
    assert "Graphs help" in a and b == ""
    assert columns((notice, a, b))[2]["visible"] is False
    assert columns(turn_outputs(replace(single, comparison="yes", answers=(RAW, AUGMENTED))))[2]["visible"] is True

    voted = TurnView(turn_id="t2", comparison="yes", question="Which retrievers?", user="local",
                     answers=(RAW, AUGMENTED), retrieval_s=0.1, created_at=1_760_000_100.0,
                     vote=VoteView("thoughts", "B", 0))
    notice, a, b, status = reopened_outputs(voted)
    assert "reopened from your history" in notice and "Your vote: B" in status
    assert "chat-badge" in a                                    # voted: the sides are revealed
    _, _, _, status = reopened_outputs(replace(voted, vote=None))
    assert "Not voted yet" in status
    notice, *_ = reopened_outputs(single)
    assert "&lt;i&gt;is&lt;/i&gt;" in notice and "<i>" not in notice
    [(label, turn_id)] = history_choices([{"id": "t1", "question": "x" * 300, "created_at": 1_760_000_000.0}])
    assert turn_id == "t1" and len(label) < 120


def test_labels_follow_the_order_of_first_use_so_the_same_quote_has_the_same_label_on_both_sides():
    """A thought ranked first shifted the papers' labels by one on the thought side: [3] there was [2] here."""
    quote = "Graph retrieval helps."
    raw = answer("A", "raw", [PAPER_2, PAPER_1], f"[2] “{quote}”\n\n[1] “Dense.”")
    augmented = answer("B", "thoughts", [THOUGHT, PAPER_2, PAPER_1], f"[3] “{quote}”\n\n[2] “Dense.”")
    a, b = answer_html(raw, reveal=False), answer_html(augmented, reveal=False)
    assert a.replace('data-label="A"><h3>Answer A', "X") == b.replace('data-label="B"><h3>Answer B', "X")
    revealed = answer_html(augmented, reveal=True)
    assert revealed.index("2501.00001") < revealed.index("2501.00002") < revealed.index("Tabc1234567")
    assert '<a href="https://arxiv.org/abs/2501.00001" target="_blank" rel="noopener">[1]</a>' in revealed


TABLE_RAW = ("Evidence from 2 papers of the library, most relevant first:\n\n"
             "[1] Graph retrieval · Ann Lee, Bo Chen et al. · 2025-01-02 · arXiv:2501.00001\n"
             "\u201cWe study graph-based retrieval for question answering.\u201d\n\n"
             "[2] Dense retrievers · Dee Wu · 2025-01-03 · arXiv:2501.00002\n"
             "\u201cDense retrievers embed queries \u2026 and passages.\u201d")
TABLE_THOUGHTS = ("Evidence from 1 paper of the library, most relevant first:\n\n"
                  "[1] Graph retrieval · Ann Lee, Bo Chen et al. · 2025-01-02 · arXiv:2501.00001\n"
                  "\u201cWe study graph-based retrieval for question answering.\u201d")


def test_evidence_tables_are_blind_until_the_vote_and_link_their_papers_after_it():
    """Issue #39: both sides show the table in the same markup; a row's arXiv id (which can differ in number
    between the sides) is hidden until the vote, then links to the paper."""
    raw = answer_html(answer("A", "raw", [PAPER_1, PAPER_2], TABLE_RAW), reveal=False)
    augmented = answer_html(answer("B", "thoughts", [THOUGHT, PAPER_1], TABLE_THOUGHTS), reveal=False)
    def structure(markup: str) -> str:     # as the e2e guessers read it: citation marks and line breaks are words
        return without_text(markup).replace('<span class="chat-cite"></span>', "").replace("<br>", "")

    assert structure(raw) == structure(augmented)
    for markup in (raw, augmented):
        assert "arXiv" not in markup and "2501.0000" not in markup and "<a " not in markup
        assert "Graph retrieval · Ann Lee, Bo Chen et al. · 2025-01-02<br>" in markup
    revealed = answer_html(answer("A", "raw", [PAPER_1, PAPER_2], TABLE_RAW), reveal=True)
    assert '· <a href="https://arxiv.org/abs/2501.00002" target="_blank" rel="noopener">arXiv:2501.00002</a>' \
        in revealed
