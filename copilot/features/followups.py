"""Chat's follow-ups as the page shows them (issue #49): a question read as a follow-up of the previous turn is
answered rewritten; the page says so and offers to ask the user's own words on their own, with no previous turn."""

from __future__ import annotations

from copilot.features.chat import chat_for
from copilot.methods.followup import asked_words
from copilot.services import Services

__all__ = ["asked_words", "own_words"]


def own_words(services: Services, turn_id: str | None, user: str) -> str:
    """The user's own words of their turn `turn_id` when it was read as a follow-up, else "" (a stored turn keeps
    the question as it was answered, which carries them)."""
    view = chat_for(services).view(turn_id, user) if turn_id else None
    return (view.asked or asked_words(view.question)) if view else ""
