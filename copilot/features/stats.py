"""Chat statistics: does answering from papers + thoughts beat papers alone, by users' votes?

Win rate = thought-augmented wins / decisive votes (A better or B better), with a Wilson 95% score interval.
Ties, both-bad votes, turns without a comparison and failed turns are counted but not in the rate.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from copilot.store.db import Database

Z95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float | None, float | None]:
    """Wilson score interval for a binomial proportion; (None, None) with no trials."""
    if trials <= 0:
        return None, None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


def chat_stats(db: Database) -> dict:
    votes = db.query("SELECT v.choice, v.voted_at FROM chat_votes v JOIN chat_turns t ON t.id = v.turn_id"
                     " WHERE t.comparison = 'yes' ORDER BY v.voted_at")
    counts = {choice: sum(1 for v in votes if v["choice"] == choice) for choice in ("thoughts", "raw", "tie", "bad")}
    turns = {row["comparison"]: row["n"] for row in
             db.query("SELECT comparison, COUNT(*) AS n FROM chat_turns GROUP BY comparison")}
    decisive = counts["thoughts"] + counts["raw"]
    low, high = wilson_interval(counts["thoughts"], decisive)
    over_time, wins, seen = [], 0, 0
    for vote in votes:
        if vote["choice"] not in ("thoughts", "raw"):
            continue
        seen += 1
        wins += vote["choice"] == "thoughts"
        point_low, point_high = wilson_interval(wins, seen)
        over_time.append({"at": _iso(vote["voted_at"]), "decisive_votes": seen, "win_rate": wins / seen,
                          "ci_low": point_low, "ci_high": point_high})
    return {
        "decisive_votes": decisive,
        "thought_wins": counts["thoughts"],
        "raw_wins": counts["raw"],
        "win_rate": counts["thoughts"] / decisive if decisive else None,
        "ci_low": low,
        "ci_high": high,
        "ties": counts["tie"],
        "both_bad": counts["bad"],
        "no_comparison": turns.get("same_items", 0),
        "failed_turns": turns.get("failed", 0),
        "unvoted_comparisons": turns.get("yes", 0) - len(votes),
        "turns": sum(turns.values()),
        "over_time": over_time,
    }
