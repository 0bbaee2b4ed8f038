"""Blind against a reader (issue #30): thoughts written by the packaged model through the product's own thought
step, then several compared turns read in Chromium before the vote by guessers of the thought-augmented side.

Each guesser reads only what a person can see or select on the page before voting: the columns' markup, the
sources region, the answers' words (raw ids in them), their lengths. After reading, a tie vote reveals the truth.
The structural guessers must find no signal at all; the accuracies are written to a JSON file for the record."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from copilot.features import chat_thoughts
from copilot.features.chat import Chat
from copilot.services import Services
from tests.comparisons import KEEP_MEMORY_ROWS, thought_with_a_new_row
from tests.conftest import make_settings
from tests.e2e.test_chat_page import ANSWER_TIMEOUT_MS, SHAPE, ask, open_chat

SEED_QUESTIONS = ["How do retrieval-augmented language models cite their sources?",
                  "What makes reasoning models overthink simple problems?",
                  "How are vision-language models evaluated on charts and documents?",
                  "Which methods make large language model inference cheaper?"]
COMPARED_QUESTIONS = ["How do language models use retrieved documents when they answer questions?",
                      "Which methods make reasoning in large language models more efficient?"]
RAW_ID = re.compile(r"\[(?:\d{4}\.\d{4,5}(?:v\d+)?|T[0-9a-z]{6,}|\d{5,})\]|\b\d{4}\.\d{4,5}\b")
REPORT = Path("/tmp/blind-guessers.json")
# The columns' structure apart from the answer's own words: citation marks and line breaks are part of what the
# answer says (the words and length guessers read those); everything else must be the same on both sides.
# An evidence table's rows are elements of the answer's text: how many there are is what the answer says (the
# thought side may hold more papers: issue #40), so inside the text only the kinds of element must be the same.
STRUCTURE = """(column) => {
  const answer = column.querySelector('.chat-answer').cloneNode(true);
  const describe = el => [el.tagName, [...el.attributes].map(a => a.name + '=' + (a.name === 'data-label' ? '?' :
    a.value)).sort().join(' ')].join(' ');
  const text = answer.querySelector('.chat-answer-text');
  const kinds = text ? [...new Set([...text.querySelectorAll('*')].filter(el => !el.matches('.chat-cite, br'))
    .map(describe))].sort() : [];
  if (text) text.replaceChildren();
  answer.querySelectorAll('.chat-cite, br').forEach(el => el.remove());
  return [kinds, ...[answer, ...answer.querySelectorAll('*')].map(el => [describe(el), el.children.length])];
}"""


def thoughts_by_the_packaged_model(preloaded, tmp_path) -> tuple[str, list[str]]:
    """A data dir whose memory holds thoughts the packaged model's turns left (each first question has nothing to
    compare, so its thought is made at once from its answer)."""
    data_dir = tmp_path / "guess-data"
    shutil.copytree(preloaded(60), data_dir)
    chat = Chat(Services(make_settings(data_dir, answer_max_tokens=64, top_k=4, thought_row_margin=KEEP_MEMORY_ROWS)))
    with pytest.MonkeyPatch.context() as patch:     # on 60 papers these unvoted answers are under the floor (#49)
        patch.setattr(chat_thoughts, "UNVOTED_FLOOR", 0.0)
        for question in SEED_QUESTIONS:
            chat.ask(question, "local", wait=True)
    texts = [t["text"] for t in chat.memory.list(20, user="local")]
    assert texts, "the packaged model's turns left no thought to compare with"
    compared = [q for q in COMPARED_QUESTIONS if thought_with_a_new_row(chat.services, q)]
    assert compared, "no paper outside the pool clears the floor for any question"
    return str(data_dir), compared + texts


def read_turn(page) -> dict:
    """What the pre-vote page shows of both columns, then the truth revealed by a tie vote."""
    columns = {side: page.locator(f"#chat-answer-{side}").evaluate(SHAPE) for side in ("a", "b")}
    for side in ("a", "b"):
        columns[side]["structure"] = page.locator(f"#chat-answer-{side}").evaluate(STRUCTURE)
    texts = {side: page.locator(f"#chat-answer-{side} .chat-answer-text").inner_text() for side in ("a", "b")}
    sources = {side: page.locator(f"#chat-answer-{side} details").inner_text() for side in ("a", "b")}
    previews = {side: page.locator(f"#chat-answer-{side} .chat-sources li").all_inner_texts() for side in ("a", "b")}
    page.locator("#chat-vote-tie").click()
    expect(page.locator("#chat-vote-status")).to_contain_text("Vote recorded")
    expect(page.locator(".chat-answer", has_text="papers + thoughts")).to_have_count(1)
    truth = "a" if page.locator("#chat-answer-a").inner_text().find("papers + thoughts") >= 0 else "b"
    return {"columns": columns, "texts": texts, "sources": sources, "previews": previews, "truth": truth}


def rows_by_paper(text: str) -> dict[str, str]:
    """An answer's rows by their paper's title (its header line: [label] title · authors · date), each row's text
    without its label."""
    rows = {}
    for block in text.split("\n\n"):
        if re.match(r"\[\d+\] ", block):
            unlabelled = block.split("] ", 1)[1]
            rows[unlabelled.split(" \u00b7 ", 1)[0]] = unlabelled
    return rows


def shared_rows_length(texts: dict[str, str]) -> dict[str, int]:
    """Each side's length over the rows of the papers both sides show: what its answer says of the same papers."""
    rows = {side: rows_by_paper(texts[side]) for side in ("a", "b")}
    both = rows["a"].keys() & rows["b"].keys()
    return {side: sum(len(rows[side][paper]) for paper in both) for side in ("a", "b")}


def guesses(turn: dict) -> dict[str, str | None]:
    """Each guesser's pick of the thought side, or None when what it reads does not differ between the sides."""
    columns, texts, sources, previews = turn["columns"], turn["texts"], turn["sources"], turn["previews"]

    def sentence_like(items: list[str]) -> int:      # a thought's preview is its own sentence, a paper's its title
        return sum(bool(RAW_ID.search(item)) or item.rstrip("…").rstrip().endswith(".") for item in items)

    def pick(score_a: float, score_b: float) -> str | None:
        return None if score_a == score_b else ("a" if score_a > score_b else "b")

    return {
        "markup": pick(len(columns["a"]["structure"]), len(columns["b"]["structure"]))
        if columns["a"]["structure"] != columns["b"]["structure"] else None,
        "source_region": pick(len(sources["a"]), len(sources["b"])) if sources["a"] != sources["b"] else None,
        "source_count": pick(columns["a"]["sources"], columns["b"]["sources"]),
        "sentence_like_preview": pick(sentence_like(previews["a"]), sentence_like(previews["b"])),
        "raw_ids": pick(len(RAW_ID.findall(texts["a"])), len(RAW_ID.findall(texts["b"]))),
        "longer_answer": pick(len(texts["a"]), len(texts["b"])),
        "longer_on_the_same_papers": pick(*shared_rows_length(texts).values()),
        "higher_labels": pick(sum(map(int, re.findall(r"\[(\d+)\]", texts["a"]))),
                              sum(map(int, re.findall(r"\[(\d+)\]", texts["b"])))),
        "more_citations": pick(len(set(re.findall(r"\[\d+\]", texts["a"]))),
                               len(set(re.findall(r"\[\d+\]", texts["b"])))),
    }


def test_guessers_cannot_tell_the_thought_side_before_the_vote(app_server, preloaded, tmp_path, page):
    data_dir, thought_texts = thoughts_by_the_packaged_model(preloaded, tmp_path)
    url = app_server(env={"COPILOT_DATA_DIR": data_dir, "COPILOT_TOP_K": "4", "COPILOT_ANSWER_MAX_TOKENS": "64",
                          "COPILOT_THOUGHT_ROW_MARGIN": str(KEEP_MEMORY_ROWS),
                          "COPILOT_LLM_TIMEOUT": "900"})
    open_chat(page, url)
    turns = []
    # a thought's own words make it the nearest item; two thoughts' words together also reach papers the plain
    # retrieval of those words misses, so the two answers differ (a turn whose answers come out the same is shown
    # as one and has nothing to guess: issue #40)
    texts = [" ".join(text[:300].split()) for text in thought_texts[:6]]
    mixed = [" ".join(f"{a[:150]} {b[:150]}".split()) for a, b in zip(texts, texts[1:] + texts[:1]) if a != b]
    for question in texts + mixed:
        if len(turns) >= 3:
            break
        ask(page, question)
        # this turn's notice (the last turn's time and vote buttons are still on the page until it replaces them)
        expect(page.locator("#chat-notice .chat-question")).to_contain_text(question[:60], timeout=120_000)
        expect(page.locator("#chat-notice .chat-time")).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
        page.wait_for_timeout(1000)          # the columns and the vote row settle after the notice
        if page.locator("#chat-vote-row").is_visible() and page.locator("#chat-answer-b .chat-answer-text").count():
            turns.append(read_turn(page))
    assert turns, "no compared turn: the thoughts were never retrieved"
    picked = [guesses(turn) for turn in turns]
    report = {name: {"turns": len(turns), "abstained": sum(p[name] is None for p in picked),
                     "right": sum(p[name] == t["truth"] for p, t in zip(picked, turns))} for name in picked[0]}
    shown = [{side: turn["texts"][side][:300] for side in ("a", "b")} | {"thoughts": turn["truth"]} for turn in turns]
    REPORT.write_text(json.dumps({"guessers": report, "turns": shown}, indent=2))
    assert all(turn["texts"]["a"].strip() and turn["texts"]["b"].strip() for turn in turns)
    # nothing to read: no signal at all
    # one row budget and one labelling rule on both sides (issue #47): the same labels [1] … [n] on each
    for name in ("markup", "source_region", "source_count", "sentence_like_preview", "raw_ids", "higher_labels",
                 "more_citations", "longer_on_the_same_papers"):
        assert report[name]["abstained"] == len(turns), (name, report)
    for turn in turns:                   # no side repeats a label
        for side in ("a", "b"):
            labels = re.findall(r"^\[(\d+)\]", turn["texts"][side], re.M)
            assert labels == [str(n) for n in range(1, len(labels) + 1)], (side, turn["texts"][side][:400])
    # the longer answer: the sides differ by which papers they show, never by how many (higher_labels) nor by what
    # they quote of a paper both show (longer_on_the_same_papers, above: its row reads the same on both sides), so
    # a length difference is only the length of the different papers' quotes, which follow what those papers say
    shared = 0
    for turn in turns:
        rows = {side: rows_by_paper(turn["texts"][side]) for side in ("a", "b")}
        assert len(rows["a"]) == len(rows["b"]) > 0, turn["texts"]
        both = rows["a"].keys() & rows["b"].keys()
        assert all(rows["a"][paper] == rows["b"][paper] for paper in both), turn["texts"]
        assert turn["texts"]["a"].split("\n\n", 1)[0] == turn["texts"]["b"].split("\n\n", 1)[0]   # the intro
        shared += len(both)
    assert shared, "no paper shown on both sides: nothing to compare the rows of"
    assert report["longer_answer"]["turns"] == len(turns)
