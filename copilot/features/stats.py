"""Chat statistics: does answering from papers + thoughts beat papers alone, by users' votes?

Win rate = thought-augmented wins / decisive votes (A better or B better), with a Wilson 95% score interval.
Ties, both-bad votes, turns without a comparison and failed turns are counted but not in the rate.
Every figure reads each comparison's first vote, and only one cast blind (before the sides were shown): a later
change still decides the turn's thought but never the verdict, and a vote cast after a reveal (e.g. `ask --reveal`)
is counted apart and left out (issue #41).
So a reviewer can judge the rate, it is also broken down by the side the thought-augmented answer was shown on
(a position bias would show as a gap), by user (a few prolific voters can dominate) and by day, with the number
of further decisive votes the interval needs to exclude 50% if the rate stays where it is.

The Wilson interval treats every vote as independent and is valid only for a number of votes fixed in advance.
Beside it (methods/ab_stats.py): the win rate's interval by a cluster bootstrap over users, an anytime-valid
sequential test of "thoughts win more than half" whose verdict may be read after every vote, the share of
decisive votes that went to whichever answer was shown as A (position bias) with both intervals, and one sentence
saying what the verdict means.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone

import numpy as np

from copilot.features.preferences import policy_of
from copilot.methods.ab_stats import Z95, cluster_bootstrap, sequential_test, wilson_interval
from copilot.services import Services
from copilot.store.chat_log import ChatLog, ComparisonVote
from copilot.store.db import Database

__all__ = ["Z95", "chat_stats", "vote_stats", "votes_to_exclude_half", "wilson_interval", "verdict_text"]
MAX_VOTES_PROJECTED = 1_000_000


def votes_to_exclude_half(wins: int, decisive: int) -> int | None:
    """How many more decisive votes, at the current win rate, until the 95% interval excludes 50%: 0 when it
    already does; None when it never will (a rate of exactly 50%) or nothing is known yet."""
    if decisive <= 0:
        return None
    rate = wins / decisive

    def excludes_half(n: int) -> bool:
        low, high = wilson_interval(rate * n, n)
        return low is not None and high is not None and (low > 0.5 or high < 0.5)

    if excludes_half(decisive):
        return 0
    if rate == 0.5 or not excludes_half(MAX_VOTES_PROJECTED):
        return None
    low, high = decisive, MAX_VOTES_PROJECTED           # excludes_half(high) holds, excludes_half(low) does not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if excludes_half(middle) else (middle, high)
    return high - decisive


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


def _day(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).date().isoformat()


def _rate(votes: Sequence[ComparisonVote]) -> dict:
    """Decisive votes, thought wins, win rate and its interval for a group of votes."""
    decisive = [v for v in votes if v.choice in ("thoughts", "raw")]
    wins = sum(v.choice == "thoughts" for v in decisive)
    low, high = wilson_interval(wins, len(decisive))
    return {"decisive_votes": len(decisive), "thought_wins": wins,
            "win_rate": wins / len(decisive) if decisive else None, "ci_low": low, "ci_high": high}


def _grouped(votes: Sequence[ComparisonVote], key: Callable[[ComparisonVote], str]) -> dict[str, list[ComparisonVote]]:
    groups: dict[str, list[ComparisonVote]] = {}
    for vote in votes:
        groups.setdefault(key(vote), []).append(vote)
    return groups


def vote_stats(services: Services) -> dict:
    return chat_stats(services.db)


def _decisive(votes: Sequence[ComparisonVote]) -> list[ComparisonVote]:
    return [v for v in votes if v.choice in ("thoughts", "raw")]


def _cluster_interval(votes: Sequence[ComparisonVote], hit: Callable[[ComparisonVote], bool]) -> dict:
    """The share of decisive `votes` for which `hit` holds, its interval with users resampled whole."""
    by_user = _grouped(votes, lambda v: v.user)
    hits = np.array([sum(hit(v) for v in group) for group in by_user.values()], dtype=float)
    totals = np.array([len(group) for group in by_user.values()], dtype=float)
    low, high = cluster_bootstrap(hits, totals)
    return {"cluster_ci_low": low, "cluster_ci_high": high}


def _position_bias(decisive: Sequence[ComparisonVote]) -> dict:
    """Share of decisive votes that went to the answer shown as A, whatever it held: 0.5 = no position bias."""
    picked_a = sum(v.choice == v.side_a for v in decisive)
    low, high = wilson_interval(picked_a, len(decisive))
    return {"decisive_votes": len(decisive), "picked_a": picked_a,
            "a_share": picked_a / len(decisive) if decisive else None, "ci_low": low, "ci_high": high,
            **_cluster_interval(decisive, lambda v: v.choice == v.side_a)}


def verdict_text(sequential: dict, decisive: int, voters: int, cluster: tuple[float | None, float | None] = (None, None)
                 ) -> str:
    """One sentence saying what the sequential verdict means; `cluster` is the win rate's by-user interval."""
    people = f"{voters} {'person' if voters == 1 else 'people'}"
    votes = f"{decisive} decisive vote{'' if decisive == 1 else 's'}"
    if decisive == 0:
        return "No decisive votes yet, so there is nothing to weigh for or against thoughts."
    if sequential["verdict"] in ("thoughts_help", "thoughts_hurt"):
        side = "the thought-augmented answer" if sequential["verdict"] == "thoughts_help" else "the papers-only answer"
        low, high = cluster
        split = low is not None and high is not None and low <= 0.5 <= high
        scope = ("but the interval that resamples whole users still spans 50%, so the users may disagree among "
                 "themselves" if split else "so it speaks for them and not yet for every user")
        return (f"Verdict since vote {sequential['decided_at_vote']}: the votes favour {side} more strongly than "
                f"voters with no preference would by chance in 1 of 20 histories, even for someone who checked "
                f"after every vote; it rests on {votes} from {people}, {scope}.")
    return (f"No verdict yet: after {votes} from {people} the evidence that thoughts win more "
            f"than half stands at {sequential['evalue']:.3g} of the {sequential['threshold']:g} a verdict needs; "
            f"looking after every vote is allowed, since voters with no preference reach a verdict by chance in "
            f"fewer than 1 of 20 histories.")


def _over_time(decisive: Sequence[ComparisonVote], evalues: Sequence[float]) -> list[dict]:
    points, wins = [], 0
    for seen, (vote, evalue) in enumerate(zip(decisive, evalues), start=1):
        wins += vote.choice == "thoughts"
        point_low, point_high = wilson_interval(wins, seen)
        points.append({"at": _iso(vote.voted_at), "decisive_votes": seen, "win_rate": wins / seen,
                       "ci_low": point_low, "ci_high": point_high, "evalue": evalue})
    return points


def chat_stats(db: Database) -> dict:
    log = ChatLog(db)
    votes = log.comparison_votes()
    counts = {choice: sum(1 for v in votes if v.choice == choice) for choice in ("thoughts", "raw", "tie", "bad")}
    turns = log.turn_counts()
    finished = sum(n for state, n in turns.items() if state != "pending")
    tally = log.vote_counts()
    decisive_votes = _decisive(votes)
    decisive = len(decisive_votes)
    low, high = wilson_interval(counts["thoughts"], decisive)
    sequential = sequential_test(np.array([v.choice == "thoughts" for v in decisive_votes], dtype=np.int64))
    evalues = sequential.pop("evalue_path")
    by_user = _grouped(decisive_votes, lambda v: v.user)
    per_user = sorted((len(group) for group in by_user.values()), reverse=True)
    cluster = _cluster_interval(decisive_votes, lambda v: v.choice == "thoughts")
    return {
        "decisive_votes": decisive,
        "thought_wins": counts["thoughts"],
        "raw_wins": counts["raw"],
        "win_rate": counts["thoughts"] / decisive if decisive else None,
        "ci_low": low,
        "ci_high": high,
        # the same rate's 95% interval with each user's votes resampled together (None with fewer than 2 voters)
        **cluster,
        "more_votes_to_exclude_50": votes_to_exclude_half(counts["thoughts"], decisive),
        # anytime-valid: may be read after every vote (methods/ab_stats.py says why)
        "sequential": sequential,
        "verdict": sequential["verdict"],
        "verdict_text": verdict_text(sequential, decisive, len(by_user),
                                     (cluster["cluster_ci_low"], cluster["cluster_ci_high"])),
        "ties": counts["tie"],
        "both_bad": counts["bad"],
        "no_comparison": turns.get("same_items", 0),
        # both answers the same (memory added nothing): shown as one, never voted on (issue #40)
        "same_answer": turns.get("same_answer", 0),
        "comparisons": turns.get("yes", 0),
        "comparison_share": turns.get("yes", 0) / finished if finished else None,
        "failed_turns": turns.get("failed", 0),
        "unvoted_comparisons": turns.get("yes", 0) - tally["votes"],
        # left out: first votes cast after the sides were shown; kept: changes after the first vote (the first counts)
        "unblinded_votes_left_out": tally["unblinded"],
        "votes_changed_after_first": tally["changed"],
        "votes_blindness_unknown": tally["blindness_unknown"],   # cast before blindness was recorded; counted
        "turns": sum(turns.values()),
        # the thought-augmented answer shown as A vs as B: equal rates (within their intervals) = no position bias
        "by_position": {side: _rate([v for v in votes if (v.side_a == "thoughts") == (side == "A")])
                        for side in ("A", "B")},
        "position_bias": _position_bias(decisive_votes),
        # how many people the decisive votes come from; the share of the most active voter
        "voters": len(by_user),
        "decisive_votes_per_user": per_user,
        "top_voter_share": per_user[0] / decisive if decisive else None,
        "by_user": {user: _rate(group) for user, group in sorted(by_user.items())},
        # written (`model:<name>`, e.g. a signed-in visitor's router model) and quoted (`extractive`) comparisons
        # test different things: each policy's votes apart (issue #50)
        "by_policy": {policy: _rate(group) for policy, group in
                      sorted(_grouped(votes, lambda v: policy_of(v.written, v.model)).items())},
        "by_day": [{"day": day, **_rate(group)} for day, group in _grouped(votes, lambda v: _day(v.voted_at)).items()],
        "over_time": _over_time(decisive_votes, evalues),
    }
