"""Statistics of the blind A/B vote that stay true when people look every day and when votes cluster by user.

Plain numpy, no I/O. Three tools:

- **An anytime-valid test of "thoughts win more than half"**: a mixture sequential probability ratio test. For the
  first n decisive votes with s thought wins, the e-value is the likelihood ratio of "each vote goes to thoughts
  with probability p" against p = 1/2, averaged over p uniform on [1/2, 1]:

      E(n, s) = 2 ∫_{1/2}^{1} (2p)^s (2(1-p))^(n-s) dp = Σ_{k=0}^{s} C(n+1, k) / ((n+1) · C(n, s)).

  (The closed form: the integral is an incomplete beta function, which for whole numbers is a binomial tail.)
  Why it may be read after every vote: for each p ≥ 1/2, one vote multiplies (2p)^x (2(1-p))^(1-x) onto the
  product, whose expectation is 2(1-p) + q(4p-2) ≤ 1 whenever the vote's own chance q of going to thoughts is at
  most 1/2; an average over p of such products keeps the property. So under the null — *every decisive vote, given
  all the votes before it, goes to thoughts with probability at most 1/2* (voters may differ from each other and
  change over time, as long as none prefers thoughts) — E is a non-negative supermartingale starting at 1, and
  Ville's inequality gives P(E ever reaches 1/α) ≤ α. The verdict "thoughts help" is declared the first time
  E ≥ 20 (α = 5 %), and it stands once declared: the guarantee covers every vote at which anyone might have looked,
  with no need to fix the number of votes in advance. The mirror test (s ↔ n − s) gives "papers alone win more
  than half".
  What it does not cover: users who disagree with each other (some prefer thoughts, some do not) make the
  vote-level null false even when the average user is indifferent; the cluster bootstrap below is the check for
  that, and the verdict sentence names how many people the votes come from.
- **A cluster bootstrap interval** of a rate: users are resampled with replacement (all of a user's votes travel
  together), the rate is the ratio of summed counts, the interval the 2.5th and 97.5th percentiles. Seeded.
- **The Wilson interval** of a proportion, which treats votes as independent (kept for comparison).
"""

from __future__ import annotations

import math

import numpy as np

ALPHA = 0.05
THRESHOLD = 1.0 / ALPHA             # E ≥ 20: the verdict
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 20261125
Z95 = 1.959963984540054


def wilson_interval(successes: float, trials: float, z: float = Z95) -> tuple[float | None, float | None]:
    """Wilson score interval for a binomial proportion; (None, None) with no trials."""
    if trials <= 0:
        return None, None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _log_factorials(n: int) -> np.ndarray:
    """log k! for k = 0..n."""
    return np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))))


def log_evalue(n: int, wins: int) -> float:
    """log E(n, s): the mixture e-value of `wins` thought wins in `n` decisive votes (0.0 when n = 0)."""
    if not 0 <= wins <= n:
        raise ValueError(f"wins must lie between 0 and the number of votes, not {wins} of {n}")
    lf = _log_factorials(n + 1)
    k = np.arange(wins + 1)
    tail = np.logaddexp.reduce(lf[n + 1] - lf[k] - lf[n + 1 - k])
    return float(tail - math.log(n + 1) - (lf[n] - lf[wins] - lf[n - wins]))


def log_evalue_path(thought_won: np.ndarray) -> np.ndarray:
    """log E after each vote of a sequence of decisive votes (1 = thoughts won), as a float array of its length."""
    wins = np.cumsum(np.asarray(thought_won, dtype=np.int64))
    if wins.size == 0:
        return np.zeros(0)
    lf = _log_factorials(wins.size + 1)
    path = np.empty(wins.size)
    for index, s in enumerate(wins):
        n = index + 1
        k = np.arange(s + 1)
        path[index] = (np.logaddexp.reduce(lf[n + 1] - lf[k] - lf[n + 1 - k]) - math.log(n + 1)
                       - (lf[n] - lf[s] - lf[n - s]))
    return path


def log_evalue_table(max_n: int) -> np.ndarray:
    """log E(n, s) for every n ≤ max_n and s ≤ n in one (max_n+1)² array (NaN where s > n), for simulations."""
    lf = _log_factorials(max_n + 1)
    m = np.arange(1, max_n + 2)[:, None]                       # m = n + 1
    k = np.arange(max_n + 1)[None, :]
    valid = k <= m
    log_choose = np.where(valid, lf[m] - lf[k] - lf[np.clip(m - k, 0, None)], -np.inf)
    tails = np.logaddexp.accumulate(log_choose, axis=1)       # log Σ_{j≤s} C(n+1, j)
    n = m - 1
    inside = k <= n
    table = tails - np.log(m) - np.where(inside, lf[n] - lf[k] - lf[np.clip(n - k, 0, None)], 0.0)
    table[~inside] = np.nan
    return table


def first_crossing(log_path: np.ndarray, threshold: float = THRESHOLD) -> int | None:
    """The vote count (1-based) at which the e-value first reached `threshold`, or None."""
    reached = np.flatnonzero(np.asarray(log_path) >= math.log(threshold) - 1e-12)
    return int(reached[0]) + 1 if reached.size else None


def sequential_test(thought_won: np.ndarray, threshold: float = THRESHOLD) -> dict:
    """The anytime-valid verdict over an ordered sequence of decisive votes (1 = thoughts won)."""
    outcomes = np.asarray(thought_won, dtype=np.int64)
    help_path = log_evalue_path(outcomes)
    hurt_path = log_evalue_path(1 - outcomes)
    helped, hurt = first_crossing(help_path, threshold), first_crossing(hurt_path, threshold)
    verdict = ("thoughts_help" if helped and (not hurt or helped <= hurt) else
               "thoughts_hurt" if hurt else "undecided")
    return {"verdict": verdict, "alpha": 1.0 / threshold, "threshold": threshold,
            "evalue": float(np.exp(help_path[-1])) if outcomes.size else 1.0,
            "max_evalue": float(np.exp(help_path.max())) if outcomes.size else 1.0,
            "evalue_raw": float(np.exp(hurt_path[-1])) if outcomes.size else 1.0,
            "decided_at_vote": helped if verdict == "thoughts_help" else hurt if verdict == "thoughts_hurt" else None,
            "evalue_path": [float(v) for v in np.exp(help_path)]}


def cluster_bootstrap(successes: np.ndarray, trials: np.ndarray, draws: int = BOOTSTRAP_DRAWS,
                      seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval of Σ successes / Σ trials with whole clusters (users) resampled; (None, None) with fewer
    than two clusters that have trials (one cluster's rate has no between-cluster spread to measure)."""
    successes, trials = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    keep = trials > 0
    successes, trials = successes[keep], trials[keep]
    if trials.size < 2:
        return None, None
    weights = np.random.default_rng(seed).multinomial(trials.size, np.full(trials.size, 1.0 / trials.size),
                                                      size=draws)
    rates = (weights @ successes) / (weights @ trials)
    tail = (1.0 - level) / 2
    low, high = np.quantile(rates, [tail, 1.0 - tail])
    return float(low), float(high)
