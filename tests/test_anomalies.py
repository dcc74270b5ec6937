"""The anomaly detector on daily series made to order: what is an event (and of which kind, how
big, how severe), what is not (noise of small counts, flat series, growth, drifts, routine
restarts), and that a row depends only on the days around it, which is what lets an
incremental trends run equal a full build (tests/test_trends_incremental.py runs the whole)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline.analytics.build._anomalies import HOLD_DAYS, anomalies, lookback_days
from pipeline.analytics.build._jobs import bot_daily
from pipeline.core import TrendSettings
from pipeline.service import Directory, ServiceConfig

T = TrendSettings()
DAY0 = date(2026, 1, 1)


def series(bot: str, guilds: list[float], *, users_per_guild: float = 50.0,
           users: list[float] | None = None, commands: list[float | None] | None = None,
           resets: list[int] | None = None, missing: set[int] = frozenset(),  # type: ignore[assignment]
           cpu: list[float] | None = None, records: list[int] | None = None) -> pl.DataFrame:
    """bot_daily rows of one bot: day i is DAY0 + i; days in ``missing`` have no row."""
    n = len(guilds)
    users = users or [g * users_per_guild for g in guilds]
    commands = commands or [g * 10 for g in guilds]
    rows = [{"bot_id": bot, "day": DAY0 + timedelta(days=i), "guilds": round(guilds[i]),
             "users": round(users[i]),
             "commands_executed": None if commands[i] is None else round(commands[i]),
             "commands_resets": (resets or [0] * n)[i],
             "cpu_load_p95": (cpu or [40.0] * n)[i], "records": (records or [2] * n)[i]}
            for i in range(n) if i not in missing]
    return pl.DataFrame(rows, schema={"bot_id": pl.String, "day": pl.Date, "guilds": pl.Int64,
                                      "users": pl.Int64, "commands_executed": pl.Int64,
                                      "commands_resets": pl.Int64, "cpu_load_p95": pl.Float64,
                                      "records": pl.Int64})


def noisy(level: float, n: int, *, sd: float = 0.02, growth: float = 0.0,
          seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    return [level * (1 + growth) ** i * (1 + rng.uniform(-1, 1) * sd * math.sqrt(3))
            for i in range(n)]


def found(*frames: pl.DataFrame, t: TrendSettings = T, **kw: Any) -> list[dict[str, Any]]:
    return anomalies(pl.concat(frames).lazy(), t, **kw).collect().to_dicts()


def d(i: int) -> date:
    return DAY0 + timedelta(days=i)


def test_a_viral_spike_is_one_row_with_its_size_in_a_persons_terms() -> None:
    guilds = noisy(2000, 60, sd=0.002)
    users = [g * 50 for g in guilds]
    commands = [g * 10 for g in guilds]
    users[45] *= 3.4  # one viral day: users x3.4, guilds a little, commands and load with them
    guilds[45] *= 1.2
    commands[45] *= 3.0
    cpu = [40.0] * 60
    cpu[45] = 62.0
    (row,) = found(series("v", guilds, users=users, commands=commands, cpu=cpu))
    assert (row["kind"], row["metric"], row["day"], row["first_day"], row["last_day"],
            row["days"]) == ("spike", "users", d(45), d(45), d(45), 1)
    assert row["ratio"] == pytest.approx(3.4, rel=0.05)
    assert row["summary"] == "users x3.4 for 1 day"
    assert row["also"] == "guilds +20%, commands x3.0, cpu +22 points"
    assert math.isfinite(row["score"]) and row["score"] > T.anomaly_threshold
    # Severity: log10 of the user-days it moved, 100,000 usual users x 2.4 x 1 day.
    assert row["severity"] == pytest.approx(math.log10(1 + 100_000 * 2.4), abs=0.03)


def test_a_drop_of_two_days_and_a_level_shift() -> None:
    drop = noisy(800, 60, seed=2)
    drop[40] *= 0.4
    drop[41] *= 0.45
    shift = noisy(5000, 60, seed=3)
    shift[40:] = [g * 0.7 for g in shift[40:]]
    rows = found(series("drop", drop), series("shift", shift))
    assert [(r["bot_id"], r["kind"], r["first_day"], r["last_day"], r["days"]) for r in rows] == [
        ("drop", "drop", d(40), d(41), 2), ("shift", "level_shift", d(40), None, None)]
    assert rows[0]["ratio"] == pytest.approx(0.4, rel=0.05)
    assert rows[0]["summary"] == f"users {(rows[0]['ratio'] - 1) * 100:+.0f}% for 2 days"
    assert rows[1]["summary"] == f"users -30% since {d(40)}"
    assert rows[1]["also"] == "guilds -30%, commands -30%"


def test_an_outage_is_dated_when_the_bot_is_back_and_its_restart_is_part_of_it() -> None:
    resets = [0] * 60
    resets[44] = 1
    (row,) = found(series("o", noisy(300, 60), missing={40, 41, 42, 43}, resets=resets))
    assert (row["kind"], row["day"], row["first_day"], row["last_day"], row["days"]) == (
        "outage", d(44), d(40), d(43), 4)
    assert row["summary"] == f"no stats for 4 days ({d(40)} to {d(43)})"
    assert row["also"] == "counter reset"
    # A bot that never reported daily (here: every third day) is not "out" between reports.
    sparse = set(range(60)) - set(range(0, 60, 3))
    assert found(series("sparse", noisy(300, 60), missing=sparse)) == []


def test_counter_resets_are_events_unless_routine() -> None:
    once, weekly = [0] * 60, [1 if i % 7 == 0 else 0 for i in range(60)]
    once[30] = 1
    commands: list[float | None] = [5000.0] * 60
    commands[30] = 40  # the reset day's count misses what ran before the restart: not a drop
    rows = found(series("once", noisy(500, 60), resets=once, commands=commands),
                 series("weekly", noisy(500, 60, seed=4), resets=weekly))
    # The weekly one restarts routinely: only its first reset (none in the window before) is.
    assert [(r["bot_id"], r["kind"], r["day"]) for r in rows] == [
        ("weekly", "counter_reset", d(0)), ("once", "counter_reset", d(30))]
    assert all(r["severity"] == 0 for r in rows)


@pytest.mark.parametrize(("what", "guilds", "users_per_guild"), [
    # 12 guilds, moving by one from day to day: 8% steps, and users with them.
    ("small integer counts", [12 + (i * 7 % 3) - 1 for i in range(80)], 80.0),
    # Perfectly flat for weeks, then one more guild: no infinite score, no event.
    ("a flat series that moves by one", [100] * 60 + [101] * 20, 50.0),
    ("steady growth (1.5% a day)", noisy(300, 80, growth=0.015), 50.0),
    ("steady decline (1% a day)", noisy(3000, 80, growth=-0.01), 50.0),
    ("a slow drift (+60% over 30 days)",
     [g * 1.6 ** min(1, max(0, i - 30) / 30) for i, g in enumerate(noisy(900, 80))], 50.0),
    ("noise of 6% a day", noisy(5000, 80, sd=0.06), 50.0),
])
def test_what_is_not_an_event(what: str, guilds: list[float], users_per_guild: float) -> None:
    assert found(series("quiet", guilds, users_per_guild=users_per_guild)) == [], what


def test_floors_the_settings_set() -> None:
    guilds = noisy(40, 60, sd=0.005)
    guilds[45] = 52  # +30%, but 12 guilds and 600 users: an event at the default floors
    assert [r["kind"] for r in found(series("f", guilds))] == ["spike"]
    higher = replace(T, anomaly_min_guilds=20, anomaly_min_users=1000)
    assert found(series("f", guilds), t=higher) == []
    assert found(series("f", guilds), t=replace(T, anomaly_min_pct=35.0)) == []
    # Commands alone must double (or halve): x1.6 is a busy day, x2.5 an event.
    commands = [g * 100 for g in noisy(500, 60, sd=0.005)]
    busy, burst = list(commands), list(commands)
    busy[45] *= 1.6
    burst[45] *= 2.5
    assert found(series("c", noisy(500, 60, sd=0.005), commands=busy)) == []
    (row,) = found(series("c", noisy(500, 60, sd=0.005), commands=burst))
    assert (row["metric"], row["summary"]) == ("commands_executed", "commands x2.5 for 1 day")


def test_a_day_still_going_is_not_a_drop_of_commands() -> None:
    # Two records a day; today has one so far: its commands are half a day's.
    commands = [g * 100 for g in noisy(500, 60, sd=0.005)]
    commands[-1] *= 0.4
    records = [2] * 59 + [1]
    assert found(series("today", noisy(500, 60, sd=0.005), commands=commands,
                        records=records)) == []
    # The same count on a whole day is an event.
    (row,) = found(series("today", noisy(500, 60, sd=0.005), commands=commands))
    assert row["summary"] == "commands -60% for 1 day so far"


@pytest.mark.parametrize("at", [1, 6, 14])
def test_a_young_bot_is_judged_on_the_days_it_has(at: int) -> None:
    # Users x5 on the bot's 2nd, 7th and 15th day: against one day, six, fourteen.
    guilds = noisy(1000, 30, sd=0.01)
    users = [g * 50 for g in guilds]
    users[at] *= 5
    (row,) = found(series("young", guilds, users=users))
    assert (row["kind"], row["metric"], row["day"]) == ("spike", "users", d(at))
    assert row["ratio"] == pytest.approx(5, rel=0.05)
    assert row["evidence"] == f"x{row['ratio']:.1f} on day {at + 1} of its history"
    assert row["baseline_days"] == at and math.isfinite(row["score"])


@pytest.mark.parametrize(("what", "guilds"), [
    ("a fast start (10% a day)", noisy(20, 30, growth=0.10)),
    ("a noisy start (6% a day)", noisy(3000, 30, sd=0.06)),
    ("a small bot's first weeks", [11 + (i * 5 % 3) - 1 for i in range(30)]),
])
def test_a_young_bots_usual_life_is_not_an_event(what: str, guilds: list[float]) -> None:
    assert found(series("young", guilds)) == [], what


def test_a_young_bots_spike_does_not_make_its_noise() -> None:
    """A spike on a new bot's second day is two outlying day-to-day changes among a few: the
    noise its next days are judged by is that of its other changes, so a step of +25% on its
    10th day is seen."""
    guilds = noisy(20000, 20, sd=0.01)
    guilds[1] *= 3.0
    guilds[9:] = [g * 1.25 for g in guilds[9:]]
    rows = found(series("y", guilds))
    assert [(r["kind"], r["day"]) for r in rows] == [("spike", d(1)), ("level_shift", d(9))]
    assert rows[1]["evidence"] == "+25% on day 10 of its history"


def test_a_young_bot_judges_a_fall_from_its_third_day() -> None:
    # Its first day may have been a spike: the second day's fall from it is not judged.
    guilds = noisy(1000, 30, sd=0.005)
    guilds[0] *= 3
    assert found(series("young", guilds)) == []
    guilds = noisy(1000, 30, sd=0.005)
    guilds[3] *= 0.4  # a drop on its 4th day, against three
    (row,) = found(series("young", guilds))
    assert (row["kind"], row["day"], row["evidence"]) == ("drop", d(3),
                                                         "-60% on day 4 of its history")


@pytest.mark.parametrize(("what", "curve"), [
    # Growth that levels off: a logistic curve, 8% a day at first.
    ("a saturating curve", [4000 / (1 + math.exp(-0.08 * (i - 30))) for i in range(90)]),
    # Growth, then decline: 3% a day up, then 3% a day down, turning within a few days.
    ("a turning curve", [1000 * math.exp(-0.03 * (math.sqrt((i - 45) ** 2 + 16) - 4))
                         for i in range(90)]),
])
def test_a_bending_curve_is_not_an_event(what: str, curve: list[float]) -> None:
    rng = np.random.default_rng(5)
    guilds = [g * (1 + rng.uniform(-1, 1) * 0.01) for g in curve]
    assert found(series("bends", guilds)) == [], what


def test_a_three_day_spike_is_a_spike_and_a_later_jump_its_own_event() -> None:
    guilds = noisy(2000, 70, sd=0.005)
    users = [g * 50 for g in guilds]
    for i in (40, 41, 42):
        users[i] *= 3
    users[42 + 1] *= 1.1  # back on the fourth day, give or take noise
    users[47] *= 4  # a new jump, four days after the last one ended
    rows = found(series("s", guilds, users=users))
    assert [(r["kind"], r["day"], r["days"]) for r in rows] == [
        ("spike", d(40), 3), ("spike", d(47), 1)]
    assert rows[0]["evidence"].startswith("x3.0 against its usual ")


def test_a_spike_of_two_days_is_judged_on_both() -> None:
    """Near the floor, neither day of a two-day spike is 5 usual spreads off on its own; the
    mean of the two, back the day after, is (its noise is that of two days, not one)."""
    guilds = noisy(5000, 60, sd=0.04)
    users = [g * 50 for g in guilds]
    spiked = [u * 1.25 if i in (40, 41) else u for i, u in enumerate(users)]
    (row,) = found(series("s", guilds, users=spiked))
    assert (row["kind"], row["day"], row["days"]) == ("spike", d(40), 2)
    assert row["score"] > T.anomaly_threshold and row["summary"].endswith("for 2 days")
    for day in (40, 41):  # either day alone is not an event
        alone = [u * 1.25 if i == day else u for i, u in enumerate(users)]
        assert found(series("s", guilds, users=alone)) == []


def test_a_spike_at_the_end_is_open_and_settles_later() -> None:
    guilds = noisy(1000, 60)
    guilds[58:] = [g * 2.5 for g in guilds[58:]]
    (row,) = found(series("s", guilds))
    assert row["summary"] == "users x2.5 for 2 days so far"
    longer = guilds + [g * 2.5 for g in noisy(1000, 3, seed=9)]
    (row,) = found(series("s", longer))
    assert (row["kind"], row["summary"]) == ("level_shift", f"users x2.5 since {d(58)}")


@pytest.fixture(scope="module")
def planted_daily() -> pl.DataFrame:
    """bot_daily of the embedded service's data with planted events (no HTTP needed here)."""
    directory = Directory(ServiceConfig(bots=40, history_days=80, stats_per_day=2, events=0.5,
                                        end=datetime(2026, 11, 1, 12)))
    rows = [{"bot_id": r["bot_id"], "stat_id": r["id"], "recorded_at": r["timestamp"],
             "users": r["users"], "guilds": r["guilds"], "shards": r["shards"],
             "cpu_load": float(r["cpu_load"]), "memory_load": float(r["memory_load"]),
             "commands_executed": r["commands_executed"]}
            for b in directory.bot_ids() for r in directory.stats(b)]
    stats = pl.DataFrame(rows).with_columns(pl.col("recorded_at").str.to_datetime(time_zone="UTC"))
    return bot_daily(stats.lazy()).collect()


def test_a_row_depends_only_on_the_days_around_it(planted_daily: pl.DataFrame) -> None:
    """The two facts an incremental run relies on: a row of day t reads no day before t -
    lookback_days, and none after t + HOLD_DAYS (so it is settled HOLD_DAYS later)."""
    everything = anomalies(planted_daily.lazy(), T).collect()
    assert everything.height >= 10 and set(everything["kind"]) >= {"spike", "level_shift"}
    last = planted_daily["day"].max()
    for start in (last - timedelta(days=40), last - timedelta(days=19), last - timedelta(days=6)):
        recent = planted_daily.filter(pl.col("day") >= start - timedelta(days=lookback_days(T)))
        part = anomalies(recent.lazy(), T, since=start).collect()
        assert part.equals(everything.filter(pl.col("day") >= start)), start
        upto = planted_daily.filter(pl.col("day") <= start)
        then = anomalies(upto.lazy(), T).collect()
        settled = pl.col("day") <= start - timedelta(days=HOLD_DAYS)
        assert then.filter(settled).equals(everything.filter(settled)), start
