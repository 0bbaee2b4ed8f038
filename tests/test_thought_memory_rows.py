"""Thought memory that adds something (issue #40), through the real embedder, Chroma and the chat path on the tiny
profile: a voted table becomes a thought of its rows, searched by their vector, reached by the same need
in other words; its papers join the thought side's candidates; both tables of a turn get one row budget."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from copilot.features import chat_thoughts
from copilot.features.chat import Chat
from copilot.methods.thought_drafts import ROW_THOUGHT_FLOOR
from tests.comparisons import KEEP_MEMORY_ROWS, remember_papers_beyond_the_pool
from tests.helpers import clean_env

QUESTION = "Which methods make large language models reason better with reinforcement learning?"
OTHER_WORDS = "Does reinforcement learning improve how LLMs reason?"


@pytest.fixture
def chat(library200, monkeypatch):
    clean_env(monkeypatch)
    monkeypatch.setattr(chat_thoughts, "UNVOTED_FLOOR", 0.0)    # a first turn's unvoted table becomes a thought here
    chat = Chat(library200)
    for row in chat.memory.thoughts.list_live(limit=1000):    # each test starts from an empty memory
        chat.memory.delete(row.id)
    yield chat
    chat.wait_for_all(timeout=120)


def run(chat: Chat, question: str, user: str):
    turn = chat.prepare(question, user)
    for _ in chat.stream(turn):
        pass
    return turn


def preferred_thought(chat: Chat, turn, user: str):
    """Vote for the thought side when there is a vote; → (the thought's id, the table it was made from)."""
    if turn.comparison == "yes":
        chat.vote(turn.id, "thoughts", user)
    job = [j for j in chat.wait_for_thoughts(turn.id, timeout=120) if j["superseded_at"] is None][-1]
    assert job["status"] == "stored", job
    stored = chat.log.turn(turn.id)
    return job["thought_id"], stored.answer(job["answer"]).table


def test_a_voted_table_becomes_its_rows_and_the_same_need_in_other_words_reaches_it(chat):
    first = run(chat, QUESTION, "alice")
    thought_id, table = preferred_thought(chat, first, "alice")
    assert table and table.rows
    rows = table.rows
    thought = chat.memory.get(thought_id, "bob")
    embed = chat.services.embedder.embed

    def quoted(row) -> str:
        return " \u2026 ".join(q.shown for q in row.quotes)
    close = [r for r, v in zip(rows, embed([quoted(r) for r in rows]))
             if float(np.dot(v, embed([QUESTION])[0])) >= ROW_THOUGHT_FLOOR]
    assert close, "no row of the table is close to its question"
    assert thought["text"].splitlines() == [f"{' '.join(r.title.split())}: \u201c{quoted(r)}\u201d" for r in close]
    assert QUESTION not in thought["text"]
    assert set(thought["root_sources"]) == {r.paper_id for r in close}          # lineage to the rows' papers
    vector = chat.memory.thoughts.vectors_of([thought_id])[thought_id]
    assert float(np.dot(vector, chat.services.embedder.embed_one(thought["text"]))) > 0.99   # searched by its rows
    later = run(chat, OTHER_WORDS, "bob")
    stored = chat.log.turn(later.id)
    assert thought_id in [s.id for s in stored.thoughts.sources]
    assert all(s.kind == "paper" for s in stored.raw.sources)
    raw_ids = [s.id for s in stored.raw.sources]
    assert [s.id for s in stored.thoughts.sources if s.kind == "paper"] == raw_ids    # memory took no paper away
    chat.vote(first.id, "raw", "alice") if first.comparison == "yes" else chat.request_thought(first.id, None, "t")
    chat.wait_for_all(timeout=120)
    assert chat.memory.get(thought_id) is None          # the vote that made it changed: retracted


def test_both_tables_of_a_turn_get_one_row_budget(chat):
    """Memory holding papers beyond the pool that bear on the question: without one budget the thought side's table
    was longer, and a reader guessing "the longer answer" found it (2 of 3 last session)."""
    first = run(chat, QUESTION, "carol")
    pool = [s.id for s in chat.log.turn(first.id).raw.sources]
    raw_rows = len(chat.log.turn(first.id).raw.table.rows)
    near = [e.id for e in chat.services.store.search("paper", chat.services.embedder.embed_one(QUESTION), 60)]
    beyond = [pid for pid in near if pid not in pool][:8]
    chat.request_thought(first.id, None, "test")
    chat.wait_for_all(timeout=120)
    chat.memory.add(QUESTION, [(pid, "paper") for pid in beyond], origin="test", user="carol",
                    check_redundant=False)
    turn = run(chat, QUESTION, "carol")
    stored = chat.log.turn(turn.id)
    assert stored.comparison in ("yes", "same_answer"), stored.comparison
    counts = [len(stored.raw.table.rows), len(stored.thoughts.table.rows)]
    assert counts[0] == raw_rows and counts[0] == counts[1], counts
    for side in (stored.raw, stored.thoughts):       # one labelling rule: 1, 2, … as shown, never a label twice
        labels = re.findall(r"^\[(\d+)\] ", side.text or "", re.M)
        assert labels == [str(n) for n in range(1, counts[0] + 1)], (labels, side.text)
    if stored.comparison == "yes":
        shown = set(stored.thoughts.table.paper_ids)
        assert shown & set(beyond)                   # the thought side differs by which papers, not how many


def test_each_table_of_a_turn_is_built_once(chat, monkeypatch):
    """The one row budget counted both tables' rows by building them, and each answer then built its table again:
    the chat ranking that decides which of a thought's papers may join ran twice for the thought side. Each side's
    table is built once now, and holds the rows a table built for the budget holds; building them counts in the
    answers' own times (built up front, they had left each answer 0.0 s on the page)."""
    from copilot.features import answers
    from copilot.methods import evidence

    first = run(chat, QUESTION, "erin")
    remember_papers_beyond_the_pool(chat, first.id, QUESTION, "erin")
    calls = {"ranking": 0, "rows": 0}

    def counted(name, real):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(answers, "table_paper_hits", counted("ranking", answers.table_paper_hits))
    monkeypatch.setattr(evidence, "build_rows", counted("rows", evidence.build_rows))
    with pytest.MonkeyPatch.context() as keep:      # both answers shown, so both are timed (tests.comparisons)
        keep.setattr(chat.services, "settings",
                     chat.services.settings.model_copy(update={"thought_row_margin": KEEP_MEMORY_ROWS}))
        turn = chat.prepare(QUESTION, "erin")
        items = {a.kind: a.sources for a in turn.answers}
        assert any(s.kind == "thought" for s in items.get("thoughts", [])), "no thought reached the turn"
        started = time.perf_counter()
        for _ in chat.stream(turn):
            pass
        wall = time.perf_counter() - started
        assert calls == {"ranking": 1, "rows": 2}, calls
        assert sum(answer.seconds or 0.0 for answer in turn.answers) >= 0.9 * wall, [a.seconds for a in turn.answers]
        monkeypatch.undo()
        stored = chat.log.turn(turn.id)
        expected = answers.answer_tables(chat.services, QUESTION, [items["raw"], items["thoughts"]])
        assert [stored.raw.table.paper_ids, stored.thoughts.table.paper_ids] == [t.paper_ids for t in expected]
