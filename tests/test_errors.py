"""One error family: every feature's error is a `copilot.errors.UserError`, so the command line and the UI catch
one class, and the command line prints it as one line and exits 2 without a catch of its own."""

from __future__ import annotations

import pytest

from copilot.errors import UserError
from copilot.features.chat import ChatError
from copilot.features.profile import ProfileError
from copilot.features.related import RelatedError
from copilot.features.trends import TrendsError
from tests.helpers import clean_env


@pytest.mark.parametrize("error", [ChatError, TrendsError, RelatedError, ProfileError])
def test_every_feature_error_is_a_user_error(error):
    assert issubclass(error, UserError)
    assert issubclass(error, ValueError)      # callers that caught ValueError still do


def test_a_feature_error_reaches_the_command_line_as_one_line(tmp_path, monkeypatch, capsys):
    from copilot.cli import main

    clean_env(monkeypatch)
    monkeypatch.setenv("COPILOT_DATA_DIR", str(tmp_path))
    assert main(["related", "--arxiv-id", "not-an-id"]) == 2          # RelatedError, no catch in cli/related.py
    err = capsys.readouterr().err
    assert err.startswith("error: not an arXiv id") and err.count("\n") == 1
