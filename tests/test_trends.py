"""Trend datasets, checked against values worked out by hand.

The archive is conftest's TREND_* fixture (days D1..D10 = 2025-01-25..2025-02-03): alpha grows
steadily with a guild spike on D8 and a counter reset on D4; beta shrinks and has no record on
D4-D5 (an outage); gamma is tiny; delta reports on D3 and D10 only; epsilon is listed, never reports, and
is removed on D6. Thresholds: movers_min_guilds 10, movers_top 2, anomaly_window 7,
anomaly_min_days 3, anomaly_threshold 3.5, health_threshold 80. The arithmetic is in the
comments next to each expected value.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from typing import Any

import polars as pl
import pytest
from conftest import TREND_BOTS, TREND_CUSTOM, TREND_STATS, trend_settings_for, write_trend_archive

from pipeline.analytics.build import _slices as slices_module
from pipeline.analytics.build._build import DATASETS
from pipeline.analytics.build._jobs import bot_daily, bot_growth, bot_ranks, movers
from pipeline.analytics.build._keyed import spread
from pipeline.analytics.build._slices import _day_groups, bot_slices, compute, in_order
from pipeline.analytics.exports._datasets import load_dataset
from pipeline.archive import _store as store
from pipeline.core._errors import ExportError
from pipeline.core._settings import Settings

D = {n: date(2025, 1, 24 + n) if n <= 7 else date(2025, 2, n - 7) for n in range(1, 11)}


def rows(settings: Settings, name: str, **where: Any) -> list[dict[str, Any]]:
    frame = load_dataset(settings, name)
    for column, value in where.items():
        frame = frame.filter(pl.col(column) == value)
    return frame.sort(list(DATASETS[name].order)).to_dicts()


def pick(row: dict[str, Any], *columns: str) -> tuple[Any, ...]:
    return tuple(row[c] for c in columns)


# --- bot_daily -------------------------------------------------------------------------------
def test_bot_daily_alpha_by_hand(trends_built: Settings) -> None:
    alpha = {r["day"]: r for r in rows(trends_built, "bot_daily", bot_id="alpha")}
    assert sorted(alpha) == [D[n] for n in range(1, 11)]
    cols = ("users", "guilds", "shards", "cpu_load_mean", "cpu_load_p95", "memory_load_mean",
            "memory_load_p95", "commands_executed", "commands_resets", "records")
    # D1: one record; the first counter value adds nothing (what ran before it is unknown).
    assert pick(alpha[D[1]], *cols) == (1000, 100, 1, 10.0, 10.0, 50.0, 50.0, None, 0, 1)
    # D2: 1050 - 1000 = 50 commands.
    assert pick(alpha[D[2]], *cols) == (1100, 110, 1, 20.0, 20.0, 50.0, 50.0, 50, 0, 1)
    # D3: records at 10:00 and 23:30 UTC (sent as 00:30+01:00, still D3 in UTC). Last users
    # and guilds are the 23:30 ones; its shards is null, so shards is the 10:00 value (2).
    # cpu 30 and 90: mean 60, p95 = 30 + 0.95 * (90 - 30) = 87. Commands (1110 - 1050) +
    # (1150 - 1110) = 100.
    assert pick(alpha[D[3]], *cols) == (1220, 122, 2, 60.0, pytest.approx(87.0), 50.0, 50.0,
                                        100, 0, 2)
    # D4: the counter went 1150 -> 30: a reset, so 30 commands ran, and one reset is counted.
    assert pick(alpha[D[4]], *cols) == (1300, 130, 1, 40.0, 40.0, 50.0, 50.0, 30, 1, 1)
    # D5..D10: 80-30, 135-80, 180-135, 230-180, 290-230, 340-290.
    assert [alpha[D[n]]["commands_executed"] for n in range(5, 11)] == [50, 55, 45, 50, 60, 50]
    assert pick(alpha[D[8]], "guilds", "cpu_load_p95", "memory_load_p95") == (260, 95.0, 85.0)


def test_bot_daily_gap_and_counts(trends_built: Settings) -> None:
    beta = rows(trends_built, "bot_daily", bot_id="beta")
    # No rows are invented for beta's gap (D4, D5).
    assert [r["day"] for r in beta] == [D[n] for n in (1, 2, 3, 6, 7, 8, 9, 10)]
    assert pick(beta[3], "users", "guilds", "shards", "cpu_load_mean", "commands_executed",
                "records") == (2500, 40, None, None, None, 1)
    assert len(load_dataset(trends_built, "bot_daily")) == 10 + 8 + 10 + 2


def test_bot_daily_counter_after_a_null_and_a_gap() -> None:
    t0 = datetime(2025, 3, 1, 12, tzinfo=UTC)
    stats = pl.LazyFrame({
        "bot_id": ["b"] * 4,
        "recorded_at": [t0, t0.replace(hour=18), t0.replace(day=3, hour=1), t0.replace(day=3)],
        "users": [1, 2, 3, 4], "guilds": [1, 2, 3, 4], "shards": [None] * 4,
        "cpu_load": [None] * 4, "memory_load": [None] * 4,
        "commands_executed": [10, None, 25, 5],
    }).cast({"shards": pl.Int64, "cpu_load": pl.Float64, "memory_load": pl.Float64})
    out = bot_daily(stats).collect().sort("day")
    # Mar 1: 10 is the first value (nothing), the null adds nothing -> null, not 0.
    # Mar 3: 25 - 10 = 15 (what ran over the gap lands on the first day after it), then the
    # counter reset to 5: +5.
    assert out.select("day", "commands_executed", "commands_resets").rows() == [
        (date(2025, 3, 1), None, 0), (date(2025, 3, 3), 20, 1)]


# --- bot_growth ------------------------------------------------------------------------------
def test_bot_growth_by_hand(trends_built: Settings) -> None:
    alpha = {r["day"]: r for r in rows(trends_built, "bot_growth", bot_id="alpha")}
    d8 = alpha[D[8]]
    # 260 vs D7 160: +100, 62.5 %; vs D1 100: +160, 160 %; no record 30 days before.
    assert pick(d8, "guilds_change_1d", "guilds_pct_1d", "guilds_change_7d", "guilds_pct_7d",
                "guilds_change_30d", "guilds_pct_30d", "guilds_cdgr_30d") == (
        100, 62.5, 160, 160.0, None, None, None)
    # Mean of D2..D8: (110 + 122 + 130 + 140 + 151 + 160 + 260) / 7.
    assert d8["guilds_mean_7d"] == pytest.approx(1073 / 7)
    assert d8["users_mean_7d"] == pytest.approx(10730 / 7)
    assert pick(alpha[D[3]], "guilds_change_1d") == (12,)
    assert alpha[D[3]]["guilds_pct_1d"] == pytest.approx(12 / 110 * 100)

    beta = {r["day"]: r for r in rows(trends_built, "bot_growth", bot_id="beta")}
    # D6 follows the gap: no record on D5 or D-1 (2025-01-23), so no 1- or 7-day change; the
    # 7-day mean uses the days that have one: (50 + 48 + 46 + 40) / 4.
    assert pick(beta[D[6]], "guilds_change_1d", "guilds_change_7d") == (None, None)
    assert beta[D[6]]["guilds_mean_7d"] == pytest.approx(46.0)
    # D10: 35 vs 37 -> -2; vs D3 46 -> -11, -23.913 %; mean of D6..D10 (40+39+38+37+35)/5.
    assert pick(beta[D[10]], "guilds_change_1d", "guilds_change_7d") == (-2, -11)
    assert beta[D[10]]["guilds_pct_7d"] == pytest.approx(-11 / 46 * 100)
    assert beta[D[10]]["guilds_mean_7d"] == pytest.approx(37.8)

    delta = rows(trends_built, "bot_growth", bot_id="delta")
    # Two records exactly 7 days apart: a 7-day change, no 1-day change.
    assert pick(delta[1], "guilds_change_1d", "guilds_change_7d", "guilds_pct_7d",
                "users_change_7d", "users_pct_7d") == (None, 200, 10.0, 0, 0.0)


def test_bot_growth_30_days_and_cdgr() -> None:
    daily = pl.LazyFrame({
        "bot_id": ["b", "b", "b", "c"],
        "day": [date(2025, 1, 1), date(2025, 1, 31), date(2025, 2, 1), date(2025, 1, 31)],
        "guilds": [100, 200, 0, 5], "users": [0, 10, 20, 5],
    })
    out = {(r["bot_id"], r["day"]): r for r in bot_growth(daily).collect().to_dicts()}
    jan31 = out[("b", date(2025, 1, 31))]
    assert pick(jan31, "guilds_change_30d", "guilds_pct_30d") == (100, 100.0)
    # (200 / 100) ** (1 / 30) - 1, as a percentage per day.
    assert jan31["guilds_cdgr_30d"] == pytest.approx((2 ** (1 / 30) - 1) * 100)
    # From 0 users there is no percent change and no growth rate.
    assert pick(jan31, "users_change_30d", "users_pct_30d", "users_cdgr_30d") == (10, None, None)
    # Feb 1 has no record 30 days before (Jan 2); the 1-day change crosses the month.
    feb1 = out[("b", date(2025, 2, 1))]
    assert pick(feb1, "guilds_change_1d", "guilds_pct_1d", "guilds_change_30d") == (-200, -100.0,
                                                                                    None)
    assert out[("c", date(2025, 1, 31))]["guilds_change_30d"] is None  # another bot's Jan 1


# --- bot_ranks -------------------------------------------------------------------------------
def test_bot_ranks_by_hand(trends_built: Settings) -> None:
    ranks = {(r["bot_id"], r["day"]): r for r in rows(trends_built, "bot_ranks")}
    cols = ("guilds_rank", "users_rank", "guilds_rank_change_1d", "guilds_rank_change_7d",
            "users_rank_change_1d", "users_rank_change_7d")
    # D3: delta 2000 > alpha 122 > beta 46 > gamma 3; users delta 5000 > beta 2800 > alpha 1220.
    assert pick(ranks[("alpha", D[3])], *cols) == (2, 3, -1, None, -1, None)
    # D4: only alpha and gamma report; gamma climbs from 4th to 2nd.
    assert pick(ranks[("gamma", D[4])], *cols) == (2, 2, 2, None, 2, None)
    assert pick(ranks[("alpha", D[4])], *cols) == (1, 1, 1, None, 2, None)
    # D8: alpha passes beta in users (2600 > 2300): up one since D7, and since D1.
    assert pick(ranks[("alpha", D[8])], *cols) == (1, 1, 0, 0, 1, 1)
    assert pick(ranks[("beta", D[8])], *cols) == (2, 2, 0, 0, -1, -1)
    # D6, after beta's gap: no rank on D5 to compare with.
    assert pick(ranks[("beta", D[6])], *cols) == (2, 1, None, None, None, None)
    # D10: delta is back on top; alpha 2nd, was 1st on D9 and 2nd on D3.
    assert pick(ranks[("alpha", D[10])], *cols) == (2, 2, -1, 0, -1, 1)
    assert pick(ranks[("delta", D[10])], *cols) == (1, 1, None, 0, None, 0)


def test_bot_ranks_ties_share_the_best_rank() -> None:
    daily = pl.LazyFrame({"bot_id": ["a", "b", "c", "d"], "day": [date(2025, 1, 1)] * 4,
                          "guilds": [10, 30, 30, None], "users": [1, 2, 3, 4]})
    out = dict(bot_ranks(daily).collect().select("bot_id", "guilds_rank").rows())
    assert out == {"b": 1, "c": 1, "a": 3, "d": None}


# --- movers ----------------------------------------------------------------------------------
def test_movers_by_hand(trends_built: Settings) -> None:
    everything = rows(trends_built, "movers")
    # 7-day windows end on D8, D9, D10 (no 30-day window in ten days). gamma never takes part
    # (2-3 guilds a week before, under the minimum of 10); delta only on D10.
    assert {r["window_days"] for r in everything} == {7}
    assert {r["bot_id"] for r in everything} == {"alpha", "beta", "delta"}
    assert len(everything) == 8 + 8 + 10
    cols = ("metric", "measure", "direction", "rank", "bot_id", "start_value", "end_value",
            "change")
    d10 = [r for r in everything if r["day"] == D[10]]
    assert [pick(r, *cols) for r in d10] == [
        ("guilds", "abs", "gainer", 1, "delta", 2000, 2200, 200),
        ("guilds", "abs", "gainer", 2, "alpha", 122, 280, 158),
        ("guilds", "abs", "loser", 1, "beta", 46, 35, -11),
        ("guilds", "pct", "gainer", 1, "alpha", 122, 280, 158),  # 129.5 %
        ("guilds", "pct", "gainer", 2, "delta", 2000, 2200, 200),  # 10 %
        ("guilds", "pct", "loser", 1, "beta", 46, 35, -11),
        # delta's users did not move (5000 -> 5000): neither a gainer nor a loser.
        ("users", "abs", "gainer", 1, "alpha", 1220, 2800, 1580),
        ("users", "abs", "loser", 1, "beta", 2800, 2100, -700),
        ("users", "pct", "gainer", 1, "alpha", 1220, 2800, 1580),
        ("users", "pct", "loser", 1, "beta", 2800, 2100, -700),
    ]
    assert [r["pct_change"] for r in d10[:2]] == [10.0, pytest.approx(158 / 122 * 100)]
    assert d10[-1]["pct_change"] == pytest.approx(-25.0)


def test_movers_minimum_size_and_top() -> None:
    growth = pl.LazyFrame({
        "bot_id": ["tiny", "big", "mid", "flat"], "day": [date(2025, 1, 8)] * 4,
        "guilds": [3, 1100, 150, 100], "users": [0, 0, 0, 0],
        "guilds_change_7d": [2, 100, 50, 0], "guilds_pct_7d": [200.0, 10.0, 50.0, 0.0],
        "users_change_7d": [None] * 4, "users_pct_7d": [None] * 4,
        "guilds_change_30d": [None] * 4, "guilds_pct_30d": [None] * 4,
        "users_change_30d": [None] * 4, "users_pct_30d": [None] * 4,
    }).cast({c: pl.Int64 for c in ("users_change_7d", "guilds_change_30d", "users_change_30d")})
    growth = growth.cast({c: pl.Float64 for c in ("users_pct_7d", "guilds_pct_30d",
                                                  "users_pct_30d")})
    out = movers(growth, min_guilds=100, top=1).collect()
    # tiny (1 -> 3 guilds, +200 %) is under the minimum; top=1 keeps one bot per list.
    assert out.select("measure", "direction", "bot_id").rows() == [
        ("abs", "gainer", "big"), ("pct", "gainer", "mid")]


# --- anomalies (the detector's cases: tests/test_anomalies.py) -------------------------------
def test_anomalies_by_hand(trends_built: Settings) -> None:
    found = rows(trends_built, "anomalies")
    assert [pick(r, "bot_id", "day", "kind", "metric", "first_day", "last_day", "days")
            for r in found] == [
        # alpha's counter went 1150 -> 30 on D4, its first restart: a counter reset.
        ("alpha", D[4], "counter_reset", "commands_executed", D[4], D[4], 1),
        # beta reported D1..D3, nothing on D4-D5 (2 days: the outage minimum), then D6.
        ("beta", D[6], "outage", None, D[4], D[5], 2),
        # alpha's guilds 160 -> 260 on D8 and the days after (users = guilds x 10): one event,
        # led by users (log(2601/...) is a hair larger than guilds'), open: D11 is not there.
        ("alpha", D[8], "spike", "users", D[8], D[10], 3),
    ]
    reset, outage, spike = found
    assert (reset["summary"], reset["severity"]) == (
        "commands counter reset (the bot restarted)", 0.0)
    # beta's users on D3 were 2,800: 2 days without them is 5,600 user-days, log10 = 3.748.
    assert outage["summary"] == "no stats for 2 days (2025-01-28 to 2025-01-29)"
    assert outage["severity"] == pytest.approx(math.log10(1 + 2800 * 2), abs=1e-3)
    # Guilds on D8, in log(1 + g): the median of D1..D7 is log(131) = 4.8752. Each day's
    # distance from the median of the 7 days before (from D4, with 3 of them): 0.1657,
    # 0.1879, 0.2117, 0.2377; their median, 0.1998, is alpha's usual growth over that lag, so
    # the usual D8 is exp(4.8752 + 0.1998) - 1 = 159.0 guilds. D8's 260 is log(261/160.0) =
    # 0.4895 off: x1.63. The distances' MAD is 0.0230 (spread 1.4826 x 0.0230 = 0.0341), so
    # the score is 0.4895 / 0.0341 = 14.3; D9 and D10 are as far off their projected level.
    assert spike["summary"] == "users +63% for 3 days so far"
    assert spike["also"] == "guilds +63%, cpu +45 points"  # cpu p95 95 against a median of 50
    assert spike["ratio"] == pytest.approx(2601 / (1 + spike["baseline_median"]))
    assert spike["baseline_median"] == pytest.approx(10 * 160.0, rel=0.01)
    assert spike["score"] == pytest.approx(14.3, rel=0.02)
    assert all(r["score"] is None or math.isfinite(r["score"]) for r in found)


# --- resource_health, custom_daily, directory_daily -----------------------------------------
def test_resource_health_by_hand(trends_built: Settings) -> None:
    cols = ("bot_id", "week", "cpu_load_p95", "memory_load_p95", "days", "cpu_hot_days",
            "memory_hot_days", "hot_days")
    # Only alpha reports load. Week of Mon 01-20: D1, D2: cpu 10, 20 -> p95 19.5.
    # Week of 01-27 (D3..D9): cpu 30, 90, 40, 50, 60, 70, 95, 20 -> sorted, p95 at 0.95 * 7 =
    # 6.65 -> 90 + 0.65 * 5 = 93.25; memory 50 x 7 and 85 -> 50 + 0.65 * 35 = 72.75. Hot
    # days (daily p95 > 80): cpu on D3 (87) and D8 (95), memory on D8 (85) -> 2 days in all.
    assert [pick(r, *cols) for r in rows(trends_built, "resource_health")] == [
        ("alpha", date(2025, 1, 20), pytest.approx(19.5), 50.0, 2, 0, 0, 0),
        ("alpha", date(2025, 1, 27), pytest.approx(93.25), pytest.approx(72.75), 7, 2, 1, 2),
        ("alpha", date(2025, 2, 3), 30.0, 50.0, 1, 0, 0, 0),
    ]


def test_custom_daily_by_hand(trends_built: Settings) -> None:
    got = [pick(r, "name", "day", "kind", "records", "value_last", "value_min", "value_max",
                "value_mean", "value_text", "changed_at", "changes")
           for r in rows(trends_built, "custom_daily")]
    d3_2330 = datetime(2025, 1, 27, 23, 30, tzinfo=UTC)
    d1_noon = datetime(2025, 1, 25, 12, tzinfo=UTC)
    assert got == [
        ("latency", D[1], "numeric", 1, 100.0, 100.0, 100.0, 100.0, None, None, None),
        ("latency", D[2], "numeric", 1, 120.0, 120.0, 120.0, 120.0, None, None, None),
        ("latency", D[3], "numeric", 2, 90.0, 80.0, 90.0, 85.0, None, None, None),
        ("latency", D[4], "numeric", 1, 110.0, 110.0, 110.0, 110.0, None, None, None),
        # A boolean is numeric (true = 1); the null "note" is skipped.
        ("premium", D[4], "numeric", 1, 1.0, 1.0, 1.0, 1.0, None, None, None),
        # The first value counts as a change; D3 went 1.0 -> 1.1 -> 1.2.
        ("version", D[1], "text", 1, None, None, None, None, "1.0", d1_noon, 1),
        ("version", D[2], "text", 1, None, None, None, None, "1.0", d1_noon, 0),
        ("version", D[3], "text", 2, None, None, None, None, "1.2", d3_2330, 2),
        ("version", D[4], "text", 1, None, None, None, None, "1.2", d3_2330, 0),
    ]


def test_directory_daily_by_hand(trends_built: Settings) -> None:
    cols = ("day", "bots_reporting", "guilds", "users", "bots_first_seen",
            "bots_first_reporting", "bots_removed")
    assert [pick(r, *cols) for r in rows(trends_built, "directory_daily")] == [
        (D[1], 3, 100 + 50 + 2, 1000 + 3000 + 10, 3, 3, 0),
        (D[2], 3, 110 + 48 + 2, 1100 + 2900 + 10, 0, 0, 0),
        # delta and epsilon are listed; only delta reports.
        (D[3], 4, 122 + 46 + 3 + 2000, 1220 + 2800 + 15 + 5000, 2, 1, 0),
        (D[4], 2, 130 + 3, 1300 + 15, 0, 0, 0),
        (D[5], 2, 140 + 4, 1400 + 20, 0, 0, 0),
        (D[6], 3, 151 + 40 + 4, 1510 + 2500 + 20, 0, 0, 1),  # epsilon removed
        (D[7], 3, 160 + 39 + 5, 1600 + 2400 + 25, 0, 0, 0),
        (D[8], 3, 260 + 38 + 5, 2600 + 2300 + 25, 0, 0, 0),
        (D[9], 3, 270 + 37 + 6, 2700 + 2200 + 30, 0, 0, 0),
        (D[10], 4, 280 + 35 + 6 + 2200, 2800 + 2100 + 30 + 5000, 0, 0, 0),
    ]


# --- the run as a whole ----------------------------------------------------------------------
def test_slices_of_a_few_bots_give_the_same_datasets(trend_archive: Settings) -> None:
    """Reading the archive a few bots at a time (bounded memory) changes nothing."""
    with store.reader(trend_archive) as con:
        whole = compute(con, trend_archive.trends)
        sliced = compute(con, trend_archive.trends, max_rows=5)
        assert len(bot_slices(con, 5)) == 4  # one bot per slice: alpha has 11 rows, beta 8...
    assert set(whole) == set(DATASETS)
    for name in DATASETS:
        assert sliced[name].equals(whole[name]), name


@pytest.mark.parametrize("held", ["in files", "in memory"])
def test_slices_read_in_groups_from_one_scan_give_the_same_datasets(
        trend_archive: Settings, monkeypatch: pytest.MonkeyPatch, held: str) -> None:
    """A group's slices come from one scan, split into a stream per slice, batch by batch: a
    group of three slices, a group of one (read directly), batches of a few rows; the streams
    in scratch files (a full build's groups) or in memory (a few days' records, in groups of
    at most MEMORY_ROWS raw rows)."""
    if held == "in files":
        monkeypatch.setattr(slices_module, "MEMORY_GROUPS", 0)
        monkeypatch.setattr(slices_module, "GROUP_SLICES", 3)
    else:
        monkeypatch.setattr(slices_module, "MEMORY_ROWS", 25)  # alpha + beta, gamma + delta
    monkeypatch.setattr(slices_module, "SCAN_BATCH_ROWS", 4)
    with store.reader(trend_archive) as con:
        whole = compute(con, trend_archive.trends)
        assert len(bot_slices(con, 5)) == 4
        sliced = compute(con, trend_archive.trends, max_rows=5)
    for name in DATASETS:
        assert sliced[name].equals(whole[name]), name


def test_keyed_files_keep_each_keys_rows_in_order(tmp_path: Any) -> None:
    schema = pl.Schema({"bot_id": pl.String, "n": pl.Int64})
    batches = [pl.DataFrame({"bot_id": ["c", "a", "d"], "n": [0, 1, 2]}, schema=schema),
               pl.DataFrame({"bot_id": ["b", "a"], "n": [3, 4]}, schema=schema)]
    keys = {"a": 0, "b": 1, "c": 2, "d": 2}
    files = spread(batches, lambda rows: rows["bot_id"].replace_strict(keys), tmp_path, schema)
    assert files.take(2)["n"].to_list() == [0, 2]
    held = spread(batches, lambda rows: rows["bot_id"].replace_strict(keys), tmp_path / "no",
                  schema, in_memory=True)
    assert held.take(2)["n"].to_list() == [0, 2] and not (tmp_path / "no").exists()
    held.close()
    assert files.take(0)["n"].to_list() == [1, 4]
    assert files.take(5).schema == schema and files.take(5).height == 0  # a key without rows
    files.close()
    assert list(tmp_path.iterdir()) == []  # every file deleted: taken or closed


def test_an_empty_archive_builds_empty_datasets(tmp_path: Any) -> None:
    settings = trend_settings_for(tmp_path)
    write_trend_archive(settings)
    from pipeline.analytics.build._build import build_trends

    report = build_trends(settings)
    assert [(d.name, d.rows, d.written) for d in report.datasets] == [
        (name, 0, ("empty",)) for name in DATASETS]
    assert load_dataset(settings, "bot_growth").columns[:4] == ["bot_id", "day", "guilds", "users"]


def test_in_order_sorts_only_when_needed() -> None:
    frame = pl.DataFrame({"a": ["x", "x", "y"], "b": [1, 2, 0]})
    assert in_order(frame, ("a", "b")) is frame
    shuffled = frame[[2, 0, 1]]
    assert in_order(shuffled, ("a", "b")).equals(frame)


def test_load_dataset_names_the_datasets(trends_built: Settings) -> None:
    with pytest.raises(ExportError, match="Did you mean 'bot_growth'"):
        load_dataset(trends_built, "bot_grwth")


def test_fixture_data_is_what_the_comments_say(trend_archive: Settings) -> None:
    """Guard for the hand arithmetic above: the archive holds exactly the fixture rows."""
    with store.reader(trend_archive) as con:
        assert con.execute("SELECT count(*) FROM bot_stats").fetchall() == [(len(TREND_STATS),)]
        assert con.execute("SELECT count(*) FROM bot_stat_custom").fetchall() == [
            (len(TREND_CUSTOM),)]
        assert con.execute("SELECT count(*) FROM bots").fetchall() == [(len(TREND_BOTS),)]
        late = con.execute("SELECT recorded_at FROM bot_stats WHERE bot_id = 'alpha' AND "
                           "guilds = 122").fetchall()[0][0]
    assert late == datetime(2025, 1, 27, 23, 30, tzinfo=UTC)


def test_slices_count_the_lookback_rows_a_bot_reads_too(trend_archive: Settings) -> None:
    # An hourly run reads a record or two of each bot, and up to a row a day of its lookback:
    # slices cut by raw records alone held every bot.
    with store.reader(trend_archive) as con:
        plain = bot_slices(con, 20)
        (first,) = con.execute("SELECT min(bot_id) FROM bot_stats").fetchall()[0]
        heavy = bot_slices(con, 20, carried=pl.LazyFrame({"bot_id": [first] * 25}))
    assert len(heavy) > len(plain)
    assert heavy[0][0] is None and heavy[0][1] is not None  # the heavy bot alone first
    with store.reader(trend_archive) as con:
        (second,) = con.execute("SELECT min(bot_id) FROM bot_stats WHERE bot_id > ?",
                                [first]).fetchall()[0]
    assert heavy[0][1] == second


def test_days_are_ranked_in_groups_of_about_max_rows() -> None:
    days = [date(2026, 3, d) for d in (1, 1, 1, 2, 2, 3, 4, 4, 4, 4, 4)]
    groups = _day_groups(pl.LazyFrame({"day": days}), 4)
    assert groups == [[date(2026, 3, 1)], [date(2026, 3, 2), date(2026, 3, 3)],
                      [date(2026, 3, 4)]]  # a day alone may hold more
