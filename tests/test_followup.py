"""Follow-up questions: rewritten into standalone questions from the previous turn, and retrieved for as such."""

from __future__ import annotations

from copilot.features.chat import Chat
from copilot.methods.followup import PreviousTurn, standalone_question
from copilot.services import Services
from tests.conftest import import_papers
from tests.doubles import ScriptedBackend

PREVIOUS = PreviousTurn(
    question="How do language models retrieve evidence?",
    answer="Source [3] shows that dense retrieval helps.\nSource [1] reports that reranking helps too.\n",
    source_titles=["Reranking passages with LLMs", "Sparse retrieval today", "Dense retrieval at scale"])


def test_the_second_paper_mentioned_is_the_second_one_cited():
    rewrite = standalone_question("Can you say more about the second paper you mentioned?", PREVIOUS)
    assert rewrite.rewritten
    assert rewrite.question == 'Can you say more about the paper "Reranking passages with LLMs"?'


def test_first_and_last_and_numbered_references():
    assert standalone_question("What data does the first paper use?", PREVIOUS).question == (
        'What data does the paper "Dense retrieval at scale" use?')
    assert standalone_question("Who wrote the last one?", PREVIOUS).question == (
        'Who wrote the paper "Reranking passages with LLMs"?')
    assert standalone_question("Is source 2 peer reviewed?", PREVIOUS).question == (
        'Is the paper "Sparse retrieval today" peer reviewed?')


def test_a_vague_follow_up_carries_the_previous_question():
    assert standalone_question("How does it compare with BM25?", PREVIOUS).rewritten
    rewrite = standalone_question("Tell me more about that.", PREVIOUS)
    assert rewrite.question == "Tell me more about that. (follow-up to: How do language models retrieve evidence?)"


def test_a_new_question_is_left_alone():
    long_with_pronouns = ("This is a question about evaluation: how do benchmarks measure whether it is the "
                          "reasoning or the memorisation that improves?")
    for question in ("What is RLHF?", "Which benchmarks measure code generation?", long_with_pronouns):
        assert standalone_question(question, PREVIOUS) == type(standalone_question(question, None))(question, False)


def test_a_reference_beyond_the_sources_is_not_invented():
    rewrite = standalone_question("And the fifth paper?", PREVIOUS)
    assert "fifth" in rewrite.question and '"' not in rewrite.question


def test_a_follow_up_in_chat_retrieves_for_the_paper_it_refers_to(settings):
    backend = ScriptedBackend([lambda messages: "Source [1] shows that it works well.",
                               lambda messages: "Source [1] reports more detail here."])
    services = Services(settings, llm_backend=backend)
    papers = import_papers(services, 60)
    chat = Chat(services)
    first = chat.prepare("How do vision-language models handle hallucination?", "local")
    for _ in chat.stream(first):
        pass
    cited_title = first.answers[0].sources[0].title
    follow = chat.prepare("Can you say more about the first paper you mentioned?", "local", previous_turn=first.id)
    assert follow.asked == "Can you say more about the first paper you mentioned?"
    assert cited_title in follow.question
    assert follow.answers[0].sources[0].title == cited_title        # retrieval used the rewritten question
    assert follow.view().asked == follow.asked
    for _ in chat.stream(follow):
        pass
    assert chat.view(follow.id, "local").asked == follow.asked      # reopened, the turn keeps the user's words
    other_user = chat.prepare("Can you say more about the first paper you mentioned?", "mallory",
                              previous_turn=first.id)
    assert other_user.asked == "" and cited_title not in other_user.question   # another user's turn is not read
    assert len(papers) == 60


def test_ask_after_a_turn_reads_the_follow_up_in_its_context(settings):
    backend = ScriptedBackend([lambda m: "Source [1] shows that it works well."] * 4)
    services = Services(settings, llm_backend=backend)
    import_papers(services, 30)
    chat = Chat(services)
    first = chat.ask("How do vision-language models handle hallucination?", "local")
    follow = chat.ask("Tell me more about that.", "local", previous_turn=first["turn_id"])
    assert follow["asked"] == "Tell me more about that."
    assert follow["question"] == ("Tell me more about that. (follow-up to: How do vision-language models handle "
                                  "hallucination?)")


def _last(outputs):
    return list(outputs)[-1]


def test_ask_it_on_its_own_asks_the_users_own_words_with_no_previous_turn(services):
    """Issue #49: the page says when a question was read as a follow-up, and one click asks it as a new question (the
    UI's handlers, as the buttons call them; the tiny default profile answers with quotes, no model call)."""
    from copilot.features.chat import chat_for
    from copilot.ui.chat.ask import alone_shown, ask_alone_view, ask_view, reopen_view
    from copilot.ui.chat.render import ASK_ALONE

    import_papers(services, 60)
    first = _last(ask_view(services, "How do vision-language models handle hallucination?", False, None, None))
    words = "Does it work for diffusion models too?"           # read as a follow-up of the first question
    follow = _last(ask_view(services, words, False, first[5], None))
    assert "read as a follow-up" in follow[0] and ASK_ALONE in follow[0] and words in follow[0]
    assert alone_shown(services, follow[5], None)["visible"] is True
    assert alone_shown(services, first[5], None)["visible"] is False
    assert "read as a follow-up" in reopen_view(services, follow[5], None)[0]      # reopened from the history too

    alone = _last(ask_alone_view(services, False, follow[5], None))
    view = chat_for(services).view(alone[5], "local")
    assert alone[5] not in (first[5], follow[5]) and view.question == words and view.asked == ""
    assert "read as a follow-up" not in alone[0] and words in alone[0]
    assert alone_shown(services, alone[5], None)["visible"] is False
    # nothing to ask on its own without a follow-up shown
    assert "Only a question read as a follow-up" in _last(ask_alone_view(services, False, first[5], None))[0]
