"""Vote statistics a reviewer can check: win rate by position, by user and by day, and how many more decisive
votes the 95% interval needs to exclude 50% at the current rate. Rows are written straight into a real SQLite."""

from __future__ import annotations

import pytest

from copilot.features.stats import chat_stats, votes_to_exclude_half, wilson_interval
from copilot.store.db import Database

DAY = 86_400.0


@pytest.fixture
def db(tmp_path):
    return Database(tmp_path / "copilot.db")


def add_vote(db: Database, n: int, choice: str, side_a: str, user: str, at: float) -> None:
    turn_id = f"t{n}"
    db.execute("INSERT INTO chat_turns (id, user, created_at, question, question_chars, comparison, side_a, backend,"
               " model, embedder) VALUES (?,?,?,?,?,?,?,?,?,?)",
               (turn_id, user, at, "q", 1, "yes", side_a, "scripted", "m", "e"))
    db.execute("INSERT INTO chat_votes (turn_id, user, choice, label, voted_at) VALUES (?,?,?,?,?)",
               (turn_id, user, choice, "A", at))


def test_breakdowns_by_position_user_and_day(db):
    votes = [("thoughts", "thoughts", "ann", 0), ("thoughts", "thoughts", "ann", 0), ("raw", "thoughts", "bob", 0),
             ("thoughts", "raw", "ann", 1), ("raw", "raw", "cy", 1), ("tie", "raw", "cy", 1),
             ("bad", "thoughts", "bob", 2)]
    for n, (choice, side_a, user, day) in enumerate(votes):
        add_vote(db, n, choice, side_a, user, 1_767_225_600 + day * DAY + n)   # 2026-01-01 UTC onwards
    stats = chat_stats(db)
    assert (stats["decisive_votes"], stats["thought_wins"]) == (5, 3)
    a, b = stats["by_position"]["A"], stats["by_position"]["B"]
    assert (a["decisive_votes"], a["thought_wins"], b["decisive_votes"], b["thought_wins"]) == (3, 2, 2, 1)
    assert (a["ci_low"], a["ci_high"]) == wilson_interval(2, 3)
    assert stats["voters"] == 3 and stats["decisive_votes_per_user"] == [3, 1, 1]
    assert stats["top_voter_share"] == pytest.approx(3 / 5)
    assert {u: (r["decisive_votes"], r["thought_wins"]) for u, r in stats["by_user"].items()} == {
        "ann": (3, 3), "bob": (1, 0), "cy": (1, 0)}
    assert [(d["day"], d["decisive_votes"], d["thought_wins"]) for d in stats["by_day"]] == [
        ("2026-01-01", 3, 2), ("2026-01-02", 2, 1), ("2026-01-03", 0, 0)]
    assert stats["more_votes_to_exclude_50"] == votes_to_exclude_half(3, 5)


def brute_force_votes_needed(wins: int, decisive: int) -> int:
    rate, n = wins / decisive, decisive
    while True:
        low, high = wilson_interval(rate * n, n)
        if low > 0.5 or high < 0.5:
            return n - decisive
        n += 1


@pytest.mark.parametrize("wins, decisive", [(8, 10), (3, 5), (1, 4), (55, 100), (45, 100)])
def test_votes_needed_matches_a_brute_force_search(wins, decisive):
    assert votes_to_exclude_half(wins, decisive) == brute_force_votes_needed(wins, decisive) > 0


def test_votes_needed_edge_cases():
    assert votes_to_exclude_half(20, 20) == 0           # the interval already excludes 50%
    assert votes_to_exclude_half(5, 10) is None         # at exactly 50% it never will
    assert votes_to_exclude_half(0, 0) is None          # nothing known yet
    assert votes_to_exclude_half(60, 100) == 0          # Wilson low 0.5020
    assert votes_to_exclude_half(8, 10) == 1            # 80% of 10: low 0.4902; of 11: 0.5045
    assert votes_to_exclude_half(45, 100) == 285        # 45% needs 385 votes for the high end to drop below 50%


def test_the_win_rate_plot_counts_votes_on_its_x_axis_not_milliseconds():
    """Votes seconds apart drew a time axis with sub-millisecond ticks (issue #20): x is the vote count."""
    from copilot.ui.chat.stats import stats_figure

    points = [{"at": f"2026-11-23T10:00:0{i}", "decisive_votes": i + 1, "win_rate": 0.5, "ci_low": 0.1,
               "ci_high": 0.9} for i in range(3)]
    figure = stats_figure({"over_time": points})
    line = figure.data[-1]
    assert list(line.x) == [1, 2, 3]
    assert figure.layout.xaxis.dtick == 1 and figure.layout.xaxis.tickformat == "d"
    assert "2026-11-23 10:00" in line.customdata[0]


def test_the_stats_tab_says_the_verdict_in_a_sentence_and_shows_the_intervals_and_position_bias(db):
    """Issue #30: the tab shows, beside today's figures, the by-user interval, the anytime-valid evidence with its
    sentence, and the position bias; the plot shows the evidence, not a shrinking cumulative interval."""
    from copilot.ui.chat.stats import plot_update, stats_figure, stats_html

    for n in range(30):
        add_vote(db, n, "thoughts" if n % 3 else "raw", "thoughts" if n % 2 else "raw", f"user{n % 4}",
                 1_767_225_600 + n)
    stats = chat_stats(db)
    markup = stats_html(stats)
    assert markup.startswith('<p class="chat-stats-verdict">') and stats["verdict_text"].split(":")[0] in markup
    assert "each user&#x27;s votes resampled together" in markup and "Position bias" in markup
    assert f"{stats['sequential']['evalue']:.3g}" in markup and "user0" not in markup     # no user names
    figure = stats_figure(stats)
    assert [trace.name for trace in figure.data] == ["evidence (verdict at 20)", "thought-augmented win rate"]
    assert figure.layout.yaxis2.type == "log"
    assert plot_update(stats)["visible"] is True


def test_no_empty_chart_before_the_first_decisive_vote(db):
    from copilot.ui.chat.stats import plot_update

    assert plot_update(chat_stats(db)) == {"__type__": "update", "value": None, "visible": False}


def test_only_an_admin_or_the_single_local_user_may_download_everyones_preference_data(tmp_path):
    from copilot.features.preferences import may_export
    from copilot.services import Services
    from tests.conftest import make_settings

    alone = Services(make_settings(tmp_path / "a"))
    assert may_export(alone, "local") and not may_export(alone, "hf:someone")
    shared = Services(make_settings(tmp_path / "b", auth="ann:pw1234567,bob:pw7654321", admins=["ann"]))
    assert may_export(shared, "ann") and not may_export(shared, "bob") and not may_export(shared, "local")


def comparison_turn(db: Database, turn_id: str, user: str = "ann", side_a: str = "thoughts", at: float = 1.0) -> None:
    db.execute("INSERT INTO chat_turns (id, user, created_at, question, question_chars, comparison, side_a, backend,"
               " model, embedder) VALUES (?,?,?,?,?,?,?,?,?,?)",
               (turn_id, user, at, "q", 1, "yes", side_a, "scripted", "m", "e"))


def test_a_vote_changed_after_the_reveal_never_enters_the_verdict(db):
    """Issue #41: the first vote, cast blind, is the one counted; changing it after the reveal keeps the change
    (it decides the thought) but never rewrites the experiment, its verdict or the vote at which it was reached."""
    from copilot.store.chat_log import ChatLog

    log = ChatLog(db)
    for n in range(8):   # 8 blind votes for papers only, each then changed to thoughts once the sides were shown
        comparison_turn(db, f"t{n}", user=f"u{n % 3}", at=float(n))
        log.record_vote(f"t{n}", f"u{n % 3}", "raw", "B", at=10.0 + n)
        log.record_vote(f"t{n}", f"u{n % 3}", "thoughts", "A", at=100.0 + n)
    stats = chat_stats(db)
    assert (stats["thought_wins"], stats["raw_wins"]) == (0, 8)
    assert stats["verdict"] == "thoughts_hurt" and stats["votes_changed_after_first"] == 8
    assert [p["at"] for p in stats["over_time"]][:1] == ["1970-01-01T00:00:10+00:00"]   # first votes, in their order
    assert log.vote("t0").choice == "thoughts" and log.vote("t0").first_choice == "raw" and log.vote("t0").blind


def test_a_vote_cast_after_the_sides_were_shown_is_recorded_unblinded_and_left_out(db):
    from copilot.store.chat_log import ChatLog

    log = ChatLog(db)
    comparison_turn(db, "blind")
    comparison_turn(db, "shown")
    log.record_vote("blind", "ann", "thoughts", "A", at=5.0)
    log.reveal("shown", at=6.0)                  # e.g. `ask --reveal` printed the sources and sides
    log.record_vote("shown", "ann", "raw", "B", at=7.0)
    stats = chat_stats(db)
    assert (stats["decisive_votes"], stats["thought_wins"], stats["raw_wins"]) == (1, 1, 0)
    assert stats["unblinded_votes_left_out"] == 1 and stats["unvoted_comparisons"] == 0
    assert log.vote("shown").blind is False and log.vote("shown").counted is False
    assert [r["blind"] for r in db.query("SELECT blind FROM chat_vote_log ORDER BY id")] == [1, 0]
