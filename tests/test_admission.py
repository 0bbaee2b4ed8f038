"""Issue #41 item 7: admission by what a turn costs. On the tiny profile an A/B answer is quotes the embedder chose
and calls no model, so asks run several at once in their own queue; an answer the model writes waits, one at a
time on the local model, in the queue the deep and SlimPLM answers share.

Measured on the Chat tab as the app wires it (`ui.chat.build`), served by Gradio on loopback and asked through
gradio_client: each answer is a stand-in that holds its slot for a while and notes when it ran, so the test reads
how many asks the queue let in at once, not the numbers it was configured with."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import gradio as gr
import pytest
from gradio_client import Client

from copilot.services import Services
from copilot.ui import chat as chat_ui
from copilot.ui.chat import ask as ask_ui
from copilot.ui.chat import deep as deep_ui
from copilot.ui.chat.ask import QUOTED_ASKS_AT_ONCE
from tests import helpers
from tests.conftest import make_settings

HOLD_S = 1.5            # each stand-in answer holds its slot this long


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    helpers.clean_env(monkeypatch)


class Slots:
    """When each stand-in answer ran: (kind, start, end)."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()

    def hold(self, kind: str) -> None:
        started = time.monotonic()
        time.sleep(HOLD_S)
        with self.lock:
            self.ran.append((kind, started, time.monotonic()))

    def most_at_once(self, kinds: tuple[str, ...] = ("ask", "deep")) -> int:
        spans = [(start, end) for kind, start, end in self.ran if kind in kinds]
        return max(sum(start <= at < end for start, end in spans) for at, _ in spans)


@contextmanager
def chat_tab(services: Services, slots: Slots, monkeypatch):
    """The Chat tab of `services` on a loopback port, its answers replaced by stand-ins; → a client."""
    def ask_view(services, question, personalize, previous_turn, request, oauth_token=None, model=None, papers=None):
        slots.hold("ask")
        yield "", question, "", gr.update(visible=False), "", None, ""

    def deep_view(services, question, turn_id, request):
        slots.hold("deep")
        yield question, "", gr.update(visible=False)

    monkeypatch.setattr(ask_ui, "ask_view", ask_view)
    monkeypatch.setattr(deep_ui, "deep_view", deep_view)
    with gr.Blocks() as page:
        chat_ui.build(services)
    port = helpers.free_port()
    page.queue(default_concurrency_limit=None).launch(server_name="127.0.0.1", server_port=port,
                                                      prevent_thread_lock=True, quiet=True)
    try:
        yield Client(f"http://127.0.0.1:{port}/", verbose=False)
    finally:
        page.close()


def test_quoted_answers_run_several_at_once_in_their_own_queue(tmp_path, monkeypatch):
    services = Services(make_settings(tmp_path / "tiny"))
    assert not services.model_profile.writes
    slots = Slots()
    with chat_tab(services, slots, monkeypatch) as client:
        jobs = [client.submit(f"Question {n}?", False, api_name="/ask") for n in range(QUOTED_ASKS_AT_ONCE + 2)]
        for job in jobs:
            job.result(timeout=60)
    assert len(slots.ran) == QUOTED_ASKS_AT_ONCE + 2
    assert slots.most_at_once() == QUOTED_ASKS_AT_ONCE, slots.ran          # several at once, and no more


def test_answers_the_local_model_writes_wait_for_it_one_at_a_time(tmp_path, monkeypatch):
    services = Services(make_settings(tmp_path / "capable", model_profile="capable"))
    assert services.model_profile.writes
    slots = Slots()
    with chat_tab(services, slots, monkeypatch) as client:
        deep = client.submit("A deep question?", api_name="/ask_deep")
        time.sleep(0.3)                             # the deep answer holds the local model first
        jobs = [deep] + [client.submit(f"Question {n}?", False, api_name="/ask") for n in range(3)]
        for job in jobs:
            job.result(timeout=60)
    assert sorted(kind for kind, _, _ in slots.ran) == ["ask", "ask", "ask", "deep"]
    assert slots.most_at_once() == 1, slots.ran        # one queue with the deep answers, one at a time
