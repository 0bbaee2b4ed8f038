"""Users: who a request belongs to comes from the login (COPILOT_AUTH or Hugging Face OAuth), never from input;
each user's profile, turns and votes are theirs; thought memory is shared by default, and with
COPILOT_PRIVATE_THOUGHTS new thoughts are seen only by their user.
"""

from __future__ import annotations

import gradio as gr
import pytest

from copilot.features.chat import Chat, ChatError
from copilot.features.memory import delete_thought, memory_view
from copilot.features.profile import load_profile, save_profile
from copilot.services import Services
from copilot.ui.common import LOCAL_USER, current_user
from tests.conftest import import_papers, make_settings
from tests.doubles import ScriptedBackend

QUESTION = "How do language models retrieve evidence before they answer?"
THOUGHT_TEXT = "Language models retrieve evidence from papers before they answer questions about them."


def reply(messages) -> str:
    return "0" if "Step 1:" in messages[-1]["content"] else "Retrieval grounds the answer [x]."


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("users") / "data"
    import_papers(Services(make_settings(data_dir)), 20)
    return data_dir


def services_for(data_dir, **overrides) -> Services:
    return Services(make_settings(data_dir, **overrides), llm_backend=ScriptedBackend([reply] * 100))


def finished_turn(chat: Chat, user: str, question: str = QUESTION):
    turn = chat.prepare(question, user)
    for _ in chat.stream(turn):
        pass
    return turn


def test_the_user_comes_from_the_login_only():
    assert current_user(gr.Request(username="alice", session_hash="s1")) == "alice"
    assert current_user(gr.Request(session_hash="s2")) == LOCAL_USER   # no login: the single local user
    assert current_user(None) == LOCAL_USER


def test_user_b_cannot_read_or_change_user_a_profile(data_dir):
    services = services_for(data_dir)
    alice = save_profile(services, "alice", "I study retrieval for language models.", "retrieval, LLM", [])
    assert load_profile(services, "bob") is None                       # B reads nothing of A's
    save_profile(services, "bob", "I study robots.", "robots", [])      # B saving writes B's profile only
    again = load_profile(services, "alice")
    assert (again.text, again.version, again.keywords) == (alice.text, 1, alice.keywords)
    assert load_profile(services, "bob").text == "I study robots."
    assert load_profile(services, "Alice") is None                      # no case-folding into A's profile


def test_user_b_cannot_vote_on_or_list_user_a_turns(data_dir):
    services = services_for(data_dir)
    chat = Chat(services)
    chat.memory.add(THOUGHT_TEXT, [(services.store.papers.get(limit=1)["ids"][0], "paper")], origin="test",
                    user="alice", check_redundant=False)
    turn = finished_turn(chat, "alice")
    assert turn.comparison == "yes", "the setup must give a comparison"
    chat.vote(turn.id, "A", "alice")
    for choice in ("B", "tie", "bad"):
        with pytest.raises(ChatError, match="another user"):
            chat.vote(turn.id, choice, "bob")
    stored = services.db.query("SELECT user, choice, label FROM chat_votes WHERE turn_id = ?", (turn.id,))
    assert stored == [{"user": "alice", "choice": chat.view(turn.id).vote.choice, "label": "A"}]
    assert len(services.db.query("SELECT * FROM chat_vote_log WHERE turn_id = ?", (turn.id,))) == 1
    assert turn.id not in {t["id"] for t in chat.recent_turns("bob")}
    assert turn.id in {t["id"] for t in chat.recent_turns("alice")}


def test_thoughts_are_shared_by_default(data_dir, tmp_path):
    import shutil

    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    services = services_for(copy)
    chat = Chat(services)
    thought = chat.memory.add(THOUGHT_TEXT, [(services.store.papers.get(limit=1)["ids"][0], "paper")],
                              origin="chat", user="alice", check_redundant=False)
    bob_turn = chat.prepare(QUESTION, "bob")
    assert thought in {s.id for a in bob_turn.answers for s in a.sources}
    assert thought in {t["id"] for t in memory_view(services, "", user="bob")}


def test_a_thought_looked_up_by_id_and_deleted_meanwhile_still_lists(data_dir, tmp_path, monkeypatch):
    """The Memory tab's id lookup reads the thought once: deleted by another request right after that read, the
    list shows it as read (reading it twice put a None in the list, and the page failed)."""
    import shutil

    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    services = services_for(copy)
    memory = services.thought_memory
    thought = memory.add(THOUGHT_TEXT, [(services.store.papers.get(limit=1)["ids"][0], "paper")], origin="chat",
                         user="alice", check_redundant=False)
    read = memory.get

    def read_then_deleted(thought_id, user=None, include_hidden=False):
        found = read(thought_id, user, include_hidden)
        memory.delete(thought_id)                   # another request (an admin) deletes it in between
        return found

    monkeypatch.setattr(memory, "get", read_then_deleted)
    assert [t["id"] for t in memory_view(services, thought, user="alice")] == [thought]


def test_private_thoughts_setting_keeps_new_thoughts_to_their_user(data_dir, tmp_path):
    import shutil

    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    paper = Services(make_settings(copy)).store.papers.get(limit=1)["ids"][0]
    shared_services = services_for(copy)
    shared = Chat(shared_services).memory.add("Older shared note: " + THOUGHT_TEXT, [(paper, "paper")],
                                              origin="chat", user="carol", check_redundant=False)

    services = services_for(copy, private_thoughts=True)
    chat = Chat(services)
    private = chat.memory.add(THOUGHT_TEXT, [(paper, "paper")], origin="chat", user="alice", check_redundant=False)

    def seen_in_turn(user: str) -> set[str]:
        return {s.id for a in chat.prepare(QUESTION, user).answers for s in a.sources}

    assert private in seen_in_turn("alice") and shared in seen_in_turn("alice")
    assert private not in seen_in_turn("bob") and shared in seen_in_turn("bob")
    assert private in {t["id"] for t in memory_view(services, "", user="alice")}
    assert private not in {t["id"] for t in memory_view(services, "", user="bob")}
    assert private not in {t["id"] for t in memory_view(services, THOUGHT_TEXT, user="bob")}
    seen_by_bob = memory_view(services, private, user="bob")
    assert not seen_by_bob or seen_by_bob[0]["id"] != private
    assert delete_thought(services, private, user="bob") is False        # B cannot delete A's private thought
    assert chat.memory.get(private) is not None
    # turning the setting off later does not publish what was made private
    assert private not in seen_in_turn_with(services_for(copy), "bob")
    assert delete_thought(services, private, user="alice") is True


def seen_in_turn_with(services: Services, user: str) -> set[str]:
    return {s.id for a in Chat(services).prepare(QUESTION, user).answers for s in a.sources}


def test_a_shared_thought_keeps_its_question_to_its_user_and_only_they_or_an_admin_delete_it(data_dir, tmp_path):
    # issue #19: the Memory tab showed other users' questions word for word, and anyone could delete any thought
    import shutil

    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    services = services_for(copy, admins="hf:root, keeper")
    chat = Chat(services)
    paper = services.store.papers.get(limit=1)["ids"][0]
    thought = chat.memory.add(THOUGHT_TEXT, [(paper, "paper")], origin="chat", user="alice",
                              question="What does my confidential grant proposal claim?", check_redundant=False)
    seen_by_bob = {t["id"]: t for t in memory_view(services, "", user="bob")}
    assert thought in seen_by_bob and seen_by_bob[thought]["question"] == ""        # still shared for retrieval
    assert "confidential" not in str(seen_by_bob[thought])
    assert {t["id"]: t for t in memory_view(services, "", user="alice")}[thought]["question"].endswith("claim?")
    assert delete_thought(services, thought, user="bob") is False
    assert delete_thought(services, thought, user="alice") is True
    again = chat.memory.add("Another note: " + THOUGHT_TEXT, [(paper, "paper")], origin="chat", user="alice",
                            check_redundant=False)
    assert services.settings.admins == ["hf:root", "keeper"]
    assert delete_thought(services, again, user="keeper") is True                   # an admin may


def test_the_merge_check_weighs_only_thoughts_the_writing_user_could_retrieve(data_dir, tmp_path):
    """Issue #30: with private thoughts, bob's private thought made alice's same thought 'redundant' although alice
    can never retrieve it. Redundancy (ε = 0.85) is judged against papers, shared thoughts and her own."""
    import shutil

    # its own text: other tests of this module store THOUGHT_TEXT in the shared data dir
    PRIVATE_NOTE = "Hybrid search over citation links and text finds the follow-up work that keyword search misses."

    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    paper = Services(make_settings(copy)).store.papers.get(limit=1)["ids"][0]
    shared_note = "Older shared note: sparse and dense retrievers disagree most on rare technical terms."
    shared = Chat(services_for(copy)).memory.add(shared_note, [(paper, "paper")], origin="chat", user="carol")
    memory = Chat(services_for(copy, private_thoughts=True)).memory
    bobs = memory.add(PRIVATE_NOTE, [(paper, "paper")], origin="chat", user="bob")
    assert shared and bobs

    alices, merge = memory.add_checked(PRIVATE_NOTE, [(paper, "paper")], origin="chat", user="alice")
    assert alices and alices != bobs and merge.nearest_id != bobs              # bob's private thought is not weighed
    again, merge = memory.add_checked(PRIVATE_NOTE, [(paper, "paper")], origin="chat", user="alice")
    assert again is None and merge.redundant and merge.nearest_id == alices    # her own thought is
    from_shared, merge = memory.add_checked(shared_note, [(paper, "paper")], origin="chat", user="alice")
    assert from_shared is None and merge.nearest_id == shared and merge.similarity >= 0.85   # so is a shared one
    bob_again, merge = memory.add_checked(PRIVATE_NOTE, [(paper, "paper")], origin="chat", user="bob")
    assert bob_again is None and merge.nearest_id == bobs                      # and bob's own, for bob
