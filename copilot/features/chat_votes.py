"""A Chat turn's vote: which answer the user preferred, blind. A vote is committed to SQLite before `vote` returns,
every vote and change of vote is logged, and in the same transaction it decides the turn's one thought
(features.chat_thoughts)."""

from __future__ import annotations

import time

from copilot.errors import UserError
from copilot.features import fulltext
from copilot.features.chat_thoughts import THOUGHT_FROM, TurnThoughts
from copilot.features.limits import check_rate
from copilot.features.signin import Writer
from copilot.records import storable_text
from copilot.store.chat_log import RAW, THOUGHTS

CHOICES = (THOUGHTS, RAW, "tie", "bad")
JUDGEMENTS = ("keep", "dismiss")        # a one-answer turn's: remember this answer, or not useful
VOTE_CHOICES = (*CHOICES, "A", "B")     # A/B: the side as shown


class ChatError(UserError, ValueError):
    """Bad input, or an action the turn does not allow; the message says what to do."""


class TurnVotes(TurnThoughts):
    """The vote of a turn (part of features.chat.Chat)."""

    def vote(self, turn_id: str, choice: str, user: str, writer: Writer | None = None) -> dict:
        """Record (or change) the user's vote; committed before returning, and every vote logged (two tabs voting
        at once leave one final vote and two log rows). In the same transaction the vote decides the turn's one
        thought (`_choose_thought`); the thought job runs in the background."""
        turn_id = storable_text(turn_id).strip()
        turn = self.log.turn(turn_id)
        if turn is None:
            raise ChatError(f"no turn with id {turn_id[:40]!r}")
        if turn.user != user:
            raise ChatError("this turn belongs to another user")
        choice = _normalise_choice(choice, turn.side_a)
        if turn.comparison != "yes":
            reason = {"same_items": "both retrievals found the same items, so there was one answer",
                      "same_answer": "both answers were the same (memory added nothing), so there was one answer",
                      "failed": "one of the answers failed", "pending": "the answers are not finished"}
            raise ChatError(f"this turn cannot be voted on: {reason.get(turn.comparison, turn.comparison)}")
        label = choice if choice not in (THOUGHTS, RAW) else ("A" if choice == turn.side_a else "B")
        current = self.log.vote(turn_id)
        counted = current is None and turn.revealed_at is None   # the first vote, cast before the sides were shown
        if current is not None and THOUGHT_FROM[current.choice] != THOUGHT_FROM[choice]:
            # a change that remakes the turn's thought is an LLM call on the one thought thread: it counts
            check_rate(self.services, user, None, "changing a vote")
        now = time.time()
        with self.db.transaction():   # the vote, its log row and the turn's thought commit together
            previous = self.log.record_vote(turn_id, user, choice, label, now)
            job_id, retracted = self._choose_thought(turn_id, THOUGHT_FROM[choice], "vote")
        self._after_choice(job_id, retracted, writer)     # a signed-in voter's model drafts the thought
        liked = [a for kind, a in ((RAW, turn.raw), (THOUGHTS, turn.thoughts)) if choice in (kind, "tie")]
        fulltext.read_soon(self.services, [row.paper_id for a in liked if a.table for row in a.table.rows],
                           fulltext.SOON)             # papers a researcher found useful: read them ahead
        return {"turn_id": turn_id, "choice": choice, "label": label, "previous": previous,
                "changed": previous is not None and previous != choice, "recorded": True,
                "counted": counted and previous is None}


    def judge(self, turn_id: str, choice: str, user: str, writer: Writer | None = None) -> dict:
        """A one-answer turn judged by its user (#59 item 11): 'keep' makes the answer's thought as a preferred
        answer's is (no quality floor: the user is the judge), 'dismiss' makes none (and retracts one already made).
        Recorded as a judgement, apart from the votes: no blind statistic counts it."""
        turn_id = storable_text(turn_id).strip()
        choice = (choice or "").strip().lower()
        if choice not in JUDGEMENTS:
            raise ChatError(f"a judgement is one of {', '.join(JUDGEMENTS)}, not {str(choice)[:40]!r}")
        turn = self.log.turn(turn_id)
        if turn is None:
            raise ChatError(f"no turn with id {turn_id[:40]!r}")
        if turn.user != user:
            raise ChatError("this turn belongs to another user")
        if turn.comparison not in ("same_items", "same_answer"):
            raise ChatError("only a turn with one answer is judged this way; a comparison gets a vote")
        if turn.scope:
            raise ChatError("a question about chosen papers makes no thought: it is one answer from those papers, "
                            "and memory is never asked about them")
        kept = THOUGHTS if turn.thoughts.text and not turn.thoughts.error else RAW
        if choice == "keep" and (not turn.answer(kept).text or turn.answer(kept).error):
            raise ChatError("this turn's answer failed: there is nothing to remember")
        current = self.log.judgement(turn_id)
        if current is not None and current != choice:
            check_rate(self.services, user, None, "changing a judgement")
        with self.db.transaction():
            previous = self.log.record_judgement(turn_id, user, choice)
            job_id, retracted = self._choose_thought(turn_id, kept if choice == "keep" else None, "judgement")
        self._after_choice(job_id, retracted, writer)
        return {"turn_id": turn_id, "judgement": choice, "previous": previous, "recorded": True}

    def judgement(self, turn_id: str) -> str | None:
        """A one-answer turn's judgement ('keep' | 'dismiss'), None if not judged."""
        return self.log.judgement(turn_id)


def _normalise_choice(choice: str, side_a: str) -> str:
    value = (choice or "").strip().lower()
    if value in ("a", "b"):
        return side_a if value == "a" else (RAW if side_a == THOUGHTS else THOUGHTS)
    if value not in CHOICES:
        raise ChatError(f"choice must be one of {', '.join(CHOICES)} (or A/B), not {str(choice)[:40]!r}")
    return value


