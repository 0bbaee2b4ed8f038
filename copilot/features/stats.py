"""Chat statistics: does answering from papers + thoughts beat papers alone, by users' votes?

Win rate = thought-augmented wins / decisive votes (A better or B better), with a Wilson 95% score interval.
Ties, both-bad votes, turns without a comparison and failed turns are counted but not in the rate.
So a reviewer can judge the rate, it is also broken down by the side the thought-augmented answer was shown on
(a position bias would show as a gap), by user (a few prolific voters can dominate) and by day, with the number
of further decisive votes the interval needs to exclude 50% if the rate stays where it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from copilot.services import Services
from copilot.store.chat_log import ChatLog, ComparisonVote
from copilot.store.db import Database

Z95 = 1.959963984540054
MAX_VOTES_PROJECTED = 1_000_000


def wilson_interval(successes: float, trials: float, z: float = Z95) -> tuple[float | None, float | None]:
    """Wilson score interval for a binomial proportion; (None, None) with no trials."""
    if trials <= 0:
        return None, None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def votes_to_exclude_half(wins: int, decisive: int) -> int | None:
    """How many more decisive votes, at the current win rate, until the 95% interval excludes 50%: 0 when it
    already does; None when it never will (a rate of exactly 50%) or nothing is known yet."""
    if decisive <= 0:
        return None
    rate = wins / decisive

    def excludes_half(n: int) -> bool:
        low, high = wilson_interval(rate * n, n)
        return low > 0.5 or high < 0.5

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
    groups: dict[str, list[dict]] = {}
    for vote in votes:
        groups.setdefault(key(vote), []).append(vote)
    return groups


def vote_stats(services: Services) -> dict:
    return chat_stats(services.db)


def chat_stats(db: Database) -> dict:
    log = ChatLog(db)
    votes = log.comparison_votes()
    counts = {choice: sum(1 for v in votes if v.choice == choice) for choice in ("thoughts", "raw", "tie", "bad")}
    turns = log.turn_counts()
    decisive = counts["thoughts"] + counts["raw"]
    low, high = wilson_interval(counts["thoughts"], decisive)
    over_time, wins, seen = [], 0, 0
    for vote in votes:
        if vote.choice not in ("thoughts", "raw"):
            continue
        seen += 1
        wins += vote.choice == "thoughts"
        point_low, point_high = wilson_interval(wins, seen)
        over_time.append({"at": _iso(vote.voted_at), "decisive_votes": seen, "win_rate": wins / seen,
                          "ci_low": point_low, "ci_high": point_high})
    by_user = _grouped([v for v in votes if v.choice in ("thoughts", "raw")], lambda v: v.user)
    per_user = sorted((len(group) for group in by_user.values()), reverse=True)
    return {
        "decisive_votes": decisive,
        "thought_wins": counts["thoughts"],
        "raw_wins": counts["raw"],
        "win_rate": counts["thoughts"] / decisive if decisive else None,
        "ci_low": low,
        "ci_high": high,
        "more_votes_to_exclude_50": votes_to_exclude_half(counts["thoughts"], decisive),
        "ties": counts["tie"],
        "both_bad": counts["bad"],
        "no_comparison": turns.get("same_items", 0),
        "failed_turns": turns.get("failed", 0),
        "unvoted_comparisons": turns.get("yes", 0) - len(votes),
        "turns": sum(turns.values()),
        # the thought-augmented answer shown as A vs as B: equal rates (within their intervals) = no position bias
        "by_position": {side: _rate([v for v in votes if (v.side_a == "thoughts") == (side == "A")])
                        for side in ("A", "B")},
        # how many people the decisive votes come from; the share of the most active voter
        "voters": len(by_user),
        "decisive_votes_per_user": per_user,
        "top_voter_share": per_user[0] / decisive if decisive else None,
        "by_user": {user: _rate(group) for user, group in sorted(by_user.items())},
        "by_day": [{"day": day, **_rate(group)} for day, group in _grouped(votes, lambda v: _day(v.voted_at)).items()],
        "over_time": over_time,
    }
