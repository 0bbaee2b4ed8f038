"""Issue #41 item 7: admission by what a turn costs. On the tiny profile an A/B answer is quotes the embedder chose
and calls no model, so asks run several at once in their own queue; an answer the model writes waits, one at a
time on the local model, in the queue the deep and SlimPLM answers share."""

from __future__ import annotations

import pytest

from copilot.services import Services
from copilot.ui.chat.ask import QUOTED_ASKS_AT_ONCE, ask_admission
from tests import helpers
from tests.conftest import make_settings

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    helpers.clean_env(monkeypatch)


def test_quoted_answers_run_several_at_once_in_their_own_queue(tmp_path):
    assert ask_admission(Services(make_settings(tmp_path / "tiny"))) == (QUOTED_ASKS_AT_ONCE, "chat-quote")
    assert QUOTED_ASKS_AT_ONCE > 1


def test_answers_the_local_model_writes_wait_for_it_one_at_a_time(tmp_path):
    assert ask_admission(Services(make_settings(tmp_path / "capable", model_profile="capable"))) == (1, "chat-ask")

