"""Answers from the real packaged model (one thread) over 300 real papers: what a researcher reads is grounded.

Every citation is the label of an item that was retrieved for that answer, nothing loops, nothing repeats the
instructions; the raw model output already holds to that (the answer grammar), and the shown text does too.
"""

from __future__ import annotations

from copilot.features.chat import Chat
from copilot.grounding import cited, cut_loop, drop_echo
from copilot.prompts import CANNOT_ANSWER, CHAT_ANSWER
from copilot.services import Services
from tests.conftest import import_papers

QUESTIONS = [
    "How do retrieval-augmented language models reduce hallucinations?",
    "What are the main ways to make large language model inference faster?",
    "How can reinforcement learning improve reasoning in language models?",
    "Which benchmarks measure code generation by language models?",
    "How do vision-language models answer questions about images?",
]


class RawOutputs:
    """Wraps the real backend to keep each call's raw text (before the output checks)."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.model = inner, inner.name, inner.model
        self.obeys_grammar = inner.obeys_grammar
        self.texts: list[str] = []

    def stream(self, messages, max_tokens, temperature, usage, grammar=None):
        is_answer = messages[0]["content"] == CHAT_ANSWER.system     # not a background thought job
        if is_answer:
            self.texts.append("")
        for piece in self.inner.stream(messages, max_tokens, temperature, usage, grammar=grammar):
            if is_answer:
                self.texts[-1] += piece
            yield piece


def test_five_questions_get_grounded_answers_from_the_local_model(settings):
    """The writing path (COPILOT_MODEL_PROFILE=capable) on the packaged model; by default it quotes
    (test_quotes_real)."""
    from copilot.llm import build_llm
    from tests.conftest import make_settings

    settings = make_settings(settings.data_dir, model_profile="capable")

    raw = RawOutputs(build_llm(settings, None).backend)   # the configured local model, its outputs recorded
    services = Services(settings, llm_backend=raw)
    import_papers(services, 300)
    chat = Chat(services)
    answered = 0
    for question in QUESTIONS:
        turn = chat.prepare(question, "local")
        for _ in chat.stream(turn):
            pass
        for answer, output in zip(turn.answers, raw.texts[-len(turn.answers):]):
            assert answer.error is None, answer.error
            labels = {str(n) for n in range(1, len(answer.sources) + 1)}
            for text in (output, answer.text):
                assert set(cited(text)) <= labels, (question, text)
                assert not cut_loop(text)[1], (question, text)
                assert not drop_echo(text, [CHAT_ANSWER.system])[1], (question, text)
            assert answer.text == CANNOT_ANSWER or cited(answer.text), (question, answer.text)
            answered += bool(cited(answer.text))
    # these questions are about topics the 300 papers cover: most answers must say something, with a source
    # (a grammar that let the model decline made every answer the cannot-answer sentence once)
    assert answered >= len(QUESTIONS)
