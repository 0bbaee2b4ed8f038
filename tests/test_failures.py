"""Failures that used to be swallowed: each is now told to the user, or logged and counted in `status --json`.
Real stores in a temporary data dir; a failing arXiv is an address nothing listens on."""

from __future__ import annotations

import time

import gradio as gr
import pytest
from starlette.requests import Request as StarletteRequest

from copilot.features import library
from copilot.features import profile as P
from copilot.features.chat import Chat
from copilot.ingest import Ingestor
from copilot.services import Services
from copilot.ui.common import LOCAL_USER, SignInError, current_user
from tests.conftest import import_papers, make_settings, sample_papers
from tests.doubles import ScriptedBackend

QUESTION = "How do large language models use retrieval to answer questions?"


@pytest.fixture
def offline(tmp_path):
    """Services whose arXiv refuses every connection."""
    return Services(make_settings(tmp_path / "data", arxiv_api_url="http://127.0.0.1:9/api/query",
                                  arxiv_timeout=2.0))


def test_profile_papers_are_written_by_the_ingestion_pipeline_with_a_run_record(services):
    papers = sample_papers(3)
    profile = P.save_profile(services, "ann", "I study retrieval.", "retrieval", papers)
    assert profile.notice == "" and profile.paper_ids == [p.id for p in papers]
    [run] = services.runs.recent(1)
    assert (run.source, run.status, run.added) == ("profile:ann", "ok", 3)
    assert {p.id for p in services.store.get_papers(profile.paper_ids)} == set(profile.paper_ids)
    P.save_profile(services, "ann", "I study retrieval, v2.", "retrieval", papers)   # stored: no new run
    assert [r.id for r in services.runs.recent(5)] == [run.id]


def test_papers_that_cannot_be_stored_are_reported_and_counted_and_the_profile_still_saved(offline):
    profile = P.save_profile(offline, "ann", "I study retrieval.", "retrieval", ["2501.00001"])
    assert profile.version == 1 and profile.paper_ids == ["2501.00001"]
    assert "could not be added to the library" in profile.notice
    assert P.load_profile(offline, "ann") == profile
    failures = library.status(offline)["failures"]
    assert failures[P.PROFILE_PAPERS_NOT_STORED]["count"] == 1
    assert "user ann" in failures[P.PROFILE_PAPERS_NOT_STORED]["last_reason"]


def test_profile_papers_respect_a_running_ingestion(services):
    with Ingestor._running:   # another ingestion holds the process's lock
        profile = P.save_profile(services, "ann", "I study retrieval.", "retrieval", sample_papers(2))
    assert "already running" in profile.notice and services.store.count("paper") == 0
    assert library.status(services)["failures"][P.PROFILE_PAPERS_NOT_STORED]["count"] == 1


def test_an_unreadable_profile_is_not_used_and_the_turn_says_so(tmp_path):
    services = Services(make_settings(tmp_path / "data"),
                        llm_backend=ScriptedBackend(["Retrieval grounds the answer [1]."] * 4))
    import_papers(services, 20)
    P.save_profile(services, "ann", "I study retrieval.", "retrieval", [])
    services.db.execute("UPDATE profiles SET paper_ids = '{broken' WHERE user = 'ann'")
    turn = Chat(services).prepare(QUESTION, "ann", personalize=True)
    assert turn.reader == "" and "profile could not be read" in turn.notice
    failures = library.status(services)["failures"]
    assert failures[P.PROFILE_UNREADABLE]["count"] == 1 and "user ann" in failures[P.PROFILE_UNREADABLE]["last_reason"]
    assert Chat(services).prepare(QUESTION, "bob", personalize=True).notice == ""   # no profile: nothing to say


def test_status_counts_nothing_when_nothing_failed(services):
    assert library.status(services)["failures"] == {}


# --- who the user is ------------------------------------------------------------------------------------------
def oauth_request(session: dict | None) -> gr.Request:
    """A request as the app sees it; `session` None means the app runs without OAuth (no session middleware)."""
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}
    if session is not None:
        scope["session"] = session
    return gr.Request(request=StarletteRequest(scope))


def signed_in(name: object = "ann", expires_in: float = 3600) -> dict:
    return {"oauth_info": {"userinfo": {"preferred_username": name}, "expires_at": time.time() + expires_in}}


def test_without_oauth_everyone_is_the_local_user_and_with_it_a_visitor_must_sign_in():
    assert current_user(oauth_request(None)) == LOCAL_USER
    # issue #19: on a Space, visitors who had not signed in shared the local user's profile and questions
    with pytest.raises(SignInError, match="Sign in with Hugging Face"):
        current_user(oauth_request({}))


def test_a_hugging_face_sign_in_is_its_own_user():
    assert current_user(oauth_request(signed_in("ann"))) == "hf:ann"


@pytest.mark.parametrize("session, message", [
    (signed_in("ann", expires_in=-10), "expired"),
    ({"oauth_info": {"expires_at": time.time() + 3600}}, "did not say which account"),
    (signed_in(""), "did not say which account"),
    (signed_in(42), "did not say which account"),
    ({"oauth_info": "garbled"}, "could not be read"),
])
def test_a_failed_sign_in_is_refused_never_the_local_user(session, message):
    with pytest.raises(SignInError, match=message):
        current_user(oauth_request(session))
