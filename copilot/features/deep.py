"""Deep answers in Chat (RAT, issue #15): a zero-shot step-by-step draft, then each step checked against papers
and stored thoughts and the whole draft so far revised (features/longform.py). The finished answer can become a
thought through Chat's confidence and merge steps, with every item retrieved in the run as its sources; an
answer stopped half-way (the user left, the model failed) never does.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass, field

from copilot.features.chat import ChatError, clean_question
from copilot.features.longform import (
    Longform,
    LongformOptions,
    needs_a_writer,
    own_questions_only,
    stream_longform,
)
from copilot.llm import LLMError
from copilot.methods.thought_retriever import ThoughtMemory, ThoughtOutcome, labels_to_ids, think
from copilot.prompts import DEEP_ANSWER_TASK
from copilot.records import Evidence
from copilot.services import Services


class DeepAnswerFailed(ChatError):
    """The model failed on the draft; nothing was stored."""


@dataclass
class DeepAnswer:
    question: str
    run: Longform
    notice: str = ""
    thought: dict = field(default_factory=dict)     # the thought step's outcome, once it ran

    @property
    def done(self) -> bool:
        return self.run.done

    def as_dict(self) -> dict:
        record = {"mode": "deep", "question": self.question, "answer": self.run.text, **self.run.as_dict()}
        record.pop("text")
        record["notice"], record["thought"] = self.notice, self.thought
        return record


def paper_and_thought_search(services: Services, user: str | None, k: int):
    """Papers ∪ the thoughts `user` may see, nearest in meaning to a query, best first."""
    where = ThoughtMemory.visible_where(user)

    def search(query: str) -> list[Evidence]:
        vector = services.embedder.embed_one(query)
        found = services.store.search("paper", vector, k) + services.store.search("thought", vector, k, where=where)
        return sorted(own_questions_only(found, user), key=lambda item: -item.score)
    return search


def stream_deep(services: Services, question: str | None, user: str = "local",
                opts: LongformOptions | None = None) -> Iterator[DeepAnswer]:
    """The deep answer as it grows (the last one has done=True). Raises ChatError on bad input, an empty library
    or a failed draft."""
    if not services.model_profile.writes:
        raise ChatError(needs_a_writer("A deep answer"))
    text, notice = clean_question(question, services.settings.max_input_chars)
    if services.store.count("paper") == 0:
        raise ChatError("The library is empty: import papers first (Library tab, or `python -m copilot import`).")
    opts = opts or LongformOptions.from_settings(services.settings)
    task = DEEP_ANSWER_TASK.format(steps=opts.steps, question=text)
    answer = DeepAnswer(text, Longform(task), notice)
    try:
        search = paper_and_thought_search(services, user, opts.retrieve_k * (opts.steps + 1))
        for answer.run in stream_longform(services.llm, task, search, opts):
            yield answer
    except LLMError as error:
        raise DeepAnswerFailed(f"The model failed while drafting: {error}") from None


def keep_as_thought(services: Services, answer: DeepAnswer, user: str) -> ThoughtOutcome:
    """Chat's thought step on a finished deep answer: confidence, then the merge test, then memory with lineage to
    every item retrieved in the run."""
    if not answer.done:
        raise ChatError("the deep answer is not finished; an unfinished answer is never stored")
    memory = services.thought_memory
    items = answer.run.numbering.items
    outcome = think(services.llm, memory, answer.question, labels_to_ids(answer.run.text, items), items,
                    origin="deep", user=user, max_tokens=services.generation.answer_tokens)
    answer.thought = {"status": outcome.status, "thought_id": outcome.thought_id,
                      "reason": outcome.draft.reason or None, "sources": len(items)}
    return outcome


def keep_in_background(services: Services, answer: DeepAnswer, user: str) -> Future:
    """`keep_as_thought` on Chat's background thread (the page does not wait for it)."""
    return services.thought_jobs.submit(-abs(hash((answer.question, answer.run.seconds))), keep_as_thought, services,
                                        answer, user)


DEEP_THOUGHT = {"stored": "Kept as a thought ({thought_id}), made from all {sources} items retrieved in the run.",
                "redundant": "Not kept as a thought: memory already holds something this close.",
                "not_an_answer": "Not kept as a thought: {reason}."}
THOUGHT_WAIT_S = 30


def thought_step_text(thought: dict) -> str:
    """One sentence on what the thought step did with a finished deep answer."""
    template = DEEP_THOUGHT.get(thought.get("status", ""), "Thought step: {status}.")
    values = {"reason": "the thought step found no real answer"}
    values.update({key: value for key, value in thought.items() if value is not None})
    return template.format(**values)


def keep_and_report(services: Services, answer: DeepAnswer, user: str, wait_s: float = THOUGHT_WAIT_S) -> str:
    """Start the thought step of a finished deep answer in the background and wait up to `wait_s` for it; a
    sentence on its outcome, or that it is still running (it goes on without the page)."""
    job = keep_in_background(services, answer, user)
    wait([job], timeout=wait_s)
    if not job.done():
        return "The thought step is still running in the background."
    if job.exception() is not None:
        return f"The thought step failed: {job.exception()}"
    return thought_step_text(answer.thought)


def ask_deep(services: Services, question: str | None, user: str = "local", keep: bool = True) -> dict:
    """A deep answer without a UI: the final text, its citations, the trace and, with `keep`, the thought step."""
    answer = None
    for answer in stream_deep(services, question, user):  # noqa: B007 - drained to its last value
        pass
    assert answer is not None           # stream_deep yields at least once or raises
    if keep and answer.run.text:
        keep_as_thought(services, answer, user)
    return answer.as_dict()
