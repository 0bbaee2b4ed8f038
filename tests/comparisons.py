"""Making a turn a real blind comparison on the tiny profile, for the tests that must see votes.

A thought that re-quotes the papers the plain retrieval already shows changes no table, and the turn is shown as one
answer with nothing to vote on (issue #40). `thought_with_a_new_row` seeds a thought resting on a paper that the
plain retrieval leaves out of the table's pool but whose own sentences clear the table's floor, and keeps it only
when the question's two tables then differ: that turn is a comparison."""

from __future__ import annotations

from copilot.features.chat import Chat
from copilot.services import Services

# COPILOT_THOUGHT_ROW_MARGIN for the tests that must see a comparison: a memory row keeps its place whatever the row
# it pushes out. On the small libraries these tests use, no paper beyond a test question's pool beats the papers-only
# row it would push out by the shipped margin (issue #49 item 3; the best came within 0.065), so without it no
# turn of theirs is a comparison; tests/test_no_displacing.py holds the rule itself.
KEEP_MEMORY_ROWS = -1.0


def thought_with_a_new_row(services: Services, question: str, top_k: int | None = None, user: str = "local",
                           tries: int = 40, text: str | None = None) -> str | None:
    """Add a thought on `question` (visible to `user`; its words `text`, the question's by default) whose paper makes
    the question's two tables differ; its id, or None when no paper of the library does that. `top_k`: the app's
    (its settings' by default)."""
    from copilot.features.answers import answer_tables
    from copilot.features.evidence_search import table_paper_hits
    from copilot.records import Evidence

    top_k = top_k or services.settings.top_k
    embedding = services.embedder.embed_one(question)
    hits = table_paper_hits(services, question, embedding, round(1.5 * top_k))
    pool = {pid for pid, _ in hits}
    if not answer_tables(services, question, [[Evidence(pid, "paper", "", "", score) for pid, score in hits]])[0]:
        return None              # the papers-only side would be the no-answer line: a question of another kind
    chat = Chat(services)
    for hit in services.store.search("paper", embedding, tries):
        if hit.id in pool:
            continue
        if answer_tables(services, question, [[Evidence(hit.id, "paper", hit.title, hit.text, hit.score)]])[0]:
            made = chat.memory.add(text or question, [(hit.id, "paper")], origin="test", user=user,
                                   check_redundant=False)
            if made and tables_differ(services, question, user):
                return made
            if made:            # its paper does not make it into the table: try the next one
                chat.memory.thoughts.mark_retracted([made])
                chat.memory.drop_vectors([made])
    return None


def tables_differ(services: Services, question: str, user: str = "local") -> bool:
    """Whether the question's two tables (one row budget, as a turn shows them) differ, without recording a turn."""
    from copilot.features.answers import answer_tables, question_ranking

    chat = Chat(services)
    embedding = services.embedder.embed_cached([question])[0]
    ranking = question_ranking(services, question, embedding, round(1.5 * services.settings.top_k))
    found = chat._retrieve(question, embedding, user, ranking)
    if found.same_items:
        return False
    raw, augmented = answer_tables(services, question, [found.raw, found.augmented], ranking)
    return set(raw.content()) != set(augmented.content())


def remember_papers_beyond_the_pool(chat: Chat, first_turn_id: str, question: str, user: str) -> None:
    """After the turn `first_turn_id` on `question`: its own thought, then one on the 8 papers nearest the question
    that its papers-only pool left out (memory that could push a papers-only row out)."""
    pool = [s.id for s in chat.log.turn(first_turn_id).raw.sources]
    near = [e.id for e in chat.services.store.search("paper", chat.services.embedder.embed_one(question), 60)]
    chat.request_thought(first_turn_id, None, "test")
    chat.wait_for_all(timeout=120)
    chat.memory.add(question, [(pid, "paper") for pid in near if pid not in pool][:8], origin="test", user=user,
                    check_redundant=False)
