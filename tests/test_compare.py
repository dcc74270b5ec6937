"""`botstats compare` and `botstats forecast` on the embedded service's data, against values
worked out here from the archive's raw records (never through the code under test)."""

from __future__ import annotations

import json
import math
import statistics
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import query

from pipeline.cli import cli
from pipeline.core._settings import Settings

WINDOW = 84  # days of history the forecast looks at (docs/design.md)
LOCAL = 21  # days the damped trend looks at, and its damping a day ahead
DAMPING = 0.98


def botstats(settings: Settings, *args: str) -> Result:
    config = Path(str(settings.db_path) + ".config.toml")
    config.write_text(f'[store]\ndb = "{settings.db_path}"\n'
                      f'[exports]\ndir = "{settings.export_dir}"\n')
    return CliRunner().invoke(cli, ["--config", str(config), *args], env={"BOTSTATS_CONFIG": ""})


def days_of(settings: Settings, metric: str) -> dict[str, dict[date, int]]:
    """Each bot's value on each UTC day: its last record of the day with a value."""
    rows = query(settings, f"""
        SELECT bot_id, CAST(timezone('UTC', recorded_at) AS DATE), arg_max({metric}, recorded_at)
        FROM bot_stats WHERE {metric} IS NOT NULL GROUP BY ALL""")
    out: dict[str, dict[date, int]] = {}
    for bot, day, value in rows:
        out.setdefault(bot, {})[day] = value
    return out


def hand_model(series: dict[date, int], days: int = WINDOW) -> tuple[date, float, float]:
    """(last day, level, slope per day) in log1p space: the line from the median of the first
    third of the last ``days`` days to the median of the last third, through the last third."""
    as_of = max(series)
    points = [((d - as_of).days, math.log1p(v)) for d, v in series.items()
              if (d - as_of).days > -days]
    span = -min(t for t, _ in points)
    early = [(t, y) for t, y in points if t <= -span * 2 / 3]
    late = [(t, y) for t, y in points if t >= -span / 3]
    slope = ((statistics.median(y for _, y in late) - statistics.median(y for _, y in early))
             / (statistics.median(t for t, _ in late) - statistics.median(t for t, _ in early)))
    level = statistics.median(y - slope * t for t, y in late)
    return as_of, level, slope


def hand_path(series: dict[date, int], model: str, h: int) -> float:
    """The log1p forecast ``h`` days after the last day: the trend's line, or the line of the
    last LOCAL days with its slope damped by DAMPING a day."""
    if model == "trend":
        _, level, slope = hand_model(series)
        return level + slope * h
    assert model == "damped", model
    _, level, slope = hand_model(series, LOCAL)
    return level + slope * sum(DAMPING ** k for k in range(1, h + 1))


def chosen(settings: Settings) -> dict[tuple[str, str], str]:
    """The model bot_forecast says it chose, per (bot, metric)."""
    rows = query(settings, "SELECT DISTINCT bot_id, metric, model FROM trend_bot_forecast")
    return {(bot, metric): model for bot, metric, model in rows}


def rank(values: dict[str, dict[date, int]], bot: str, day: date) -> int:
    mine = values[bot][day]
    return 1 + sum(1 for other in values.values() if other.get(day, -1) > mine)


@pytest.fixture(scope="module")
def guilds(exported_archive: Settings) -> dict[str, dict[date, int]]:
    return days_of(exported_archive, "guilds")


@pytest.fixture(scope="module")
def users(exported_archive: Settings) -> dict[str, dict[date, int]]:
    return days_of(exported_archive, "users")


def biggest(values: dict[str, dict[date, int]], n: int) -> list[str]:
    """The n bots largest on the last day, among those with a value 7 and 30 days before."""
    last = max(max(v) for v in values.values())
    full = [b for b, v in values.items()
            if {last, last - timedelta(days=7), last - timedelta(days=30)} <= set(v)]
    return sorted(full, key=lambda b: -values[b][last])[:n]


def test_compare_shows_each_bots_numbers_worked_out_from_the_archive(
        exported_archive: Settings, guilds: dict[str, dict[date, int]],
        users: dict[str, dict[date, int]]) -> None:
    models = chosen(exported_archive)
    # Bots whose models can be worked out by hand here (a saturating curve is left to
    # tests/test_trends.py); the largest of them.
    bots = [b for b in biggest(guilds, 40) if {models[(b, "guilds")], models[(b, "users")]}
            <= {"trend", "damped"}][:3]
    assert {models[(b, m)] for b in bots for m in ("guilds", "users")} >= {"trend"}
    result = botstats(exported_archive, "compare", *bots, "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert [b["bot_id"] for b in shown["bots"]] == bots  # in the order asked
    for row in shown["bots"]:
        bot = row["bot_id"]
        for metric, values in (("guilds", guilds), ("users", users)):
            v = values[bot]
            day = max(v)
            assert row["day"] == str(day)
            assert row[metric] == v[day]
            for n in (7, 30):
                change = v[day] - v[day - timedelta(days=n)]
                assert row[f"{metric}_change_{n}d"] == change
                assert row[f"{metric}_pct_{n}d"] == pytest.approx(
                    change / v[day - timedelta(days=n)] * 100)
            assert row[f"{metric}_cdgr_30d"] == pytest.approx(
                ((v[day] / v[day - timedelta(days=30)]) ** (1 / 30) - 1) * 100)
            assert row[f"{metric}_rank"] == rank(values, bot, day)
            assert row[f"{metric}_rank_change_7d"] == (
                rank(values, bot, day - timedelta(days=7)) - rank(values, bot, day))
            model = models[(bot, metric)]
            assert row[f"{metric}_forecast_30d"] == pytest.approx(
                math.expm1(hand_path(v, model, 30)))
            assert row[f"{metric}_model"] == {"trend": "trend", "damped": "damped trend"}[model]
            assert row[f"{metric}_lo80_30d"] < row[f"{metric}_forecast_30d"] < row[f"{metric}_hi80_30d"]


def test_compare_prints_the_bots_side_by_side(exported_archive: Settings,
                                              guilds: dict[str, dict[date, int]]) -> None:
    a, b = biggest(guilds, 2)
    result = botstats(exported_archive, "compare", a, b)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [a, b]
    day = max(guilds[a])
    assert lines[3].split() == ["guilds", f"{guilds[a][day]:,}", f"{guilds[b][day]:,}"]
    assert any(line.startswith("guilds in 30d, 80%") for line in lines)
    assert any(line.startswith("guilds model") for line in lines)


@pytest.mark.parametrize(("args", "code", "words"), [
    (["compare", "only-one"], 2, ["2 to 4 bot ids, got 1"]),
    (["compare", "a", "b", "c", "d", "e"], 2, ["2 to 4 bot ids, got 5"]),
    (["forecast", "x"], 2, ["give one target: --guilds N or --users N"]),
    (["forecast", "x", "--guilds", "0"], 2, ["0 is not in the range x>=1"]),
    # An unknown bot is "not found" (exit 1, like a 404 from the service).
    (["compare", "nope", "nada"], 1, ["no trend data for bot nope, nada", "botstats sql"]),
    (["forecast", "nope", "--guilds", "10"], 1, ["no trend data for bot nope"]),
])
def test_bad_requests_are_refused_with_what_to_do(exported_archive: Settings, args: list[str],
                                                  code: int, words: list[str]) -> None:
    result = botstats(exported_archive, *args)
    assert result.exit_code == code, result.output
    for word in words:
        assert word in result.output


def grower_and_decliner(values: dict[str, dict[date, int]],
                        models: dict[tuple[str, str], str]) -> tuple[str, str]:
    """The bots growing and shrinking fastest (by the trend's slope) among those whose guilds
    forecast is the trend."""
    slopes = {b: hand_model(v)[2] for b, v in values.items()
              if len(v) >= 30 and models.get((b, "guilds")) == "trend"}
    return max(slopes, key=lambda b: slopes[b]), min(slopes, key=lambda b: slopes[b])


def test_forecast_names_the_day_the_pace_reaches_the_target(
        exported_archive: Settings, guilds: dict[str, dict[date, int]]) -> None:
    bot, _ = grower_and_decliner(guilds, chosen(exported_archive))
    as_of, level, slope = hand_model(guilds[bot])
    assert slope > 0
    target = round(guilds[bot][as_of] * 1.5)
    day = as_of + timedelta(days=math.ceil((math.log1p(target) - level) / slope))
    result = botstats(exported_archive, "forecast", bot, "--guilds", str(target))
    assert result.exit_code == 0, result.output
    assert f"at the current pace, about {day}; 80% between " in result.output
    shown = json.loads(botstats(exported_archive, "forecast", bot, "--guilds", str(target),
                                "--json").output)
    assert shown["status"] == "on_pace" and shown["day"] == str(day)
    assert shown["earliest"] <= shown["day"] <= shown["latest"]


def test_forecast_of_a_shrinking_bot_is_not_at_the_current_pace(
        exported_archive: Settings, guilds: dict[str, dict[date, int]]) -> None:
    _, bot = grower_and_decliner(guilds, chosen(exported_archive))
    assert hand_model(guilds[bot])[2] < 0
    result = botstats(exported_archive, "forecast", bot, "--guilds", str(max(guilds[bot].values()) * 2))
    assert result.exit_code == 0, result.output
    assert "not at the current pace" in result.output


def test_forecast_of_a_target_already_passed_says_so(
        exported_archive: Settings, users: dict[str, dict[date, int]]) -> None:
    bot = biggest(users, 1)[0]
    last = max(users[bot])
    result = botstats(exported_archive, "forecast", bot, "--users", "10")
    assert result.exit_code == 0, result.output
    assert f"already there ({users[bot][last]:,} on {last})" in result.output


def test_every_bot_with_a_week_of_values_has_a_forecast_at_each_horizon(
        exported_archive: Settings, guilds: dict[str, dict[date, int]]) -> None:
    rows: list[Any] = query(exported_archive, "SELECT bot_id, horizon_days, day - as_of "
                                              "FROM trend_bot_forecast WHERE metric = 'guilds'")
    expected = {b for b, v in guilds.items() if len([d for d in v if (max(v) - d).days < WINDOW]) >= 7}
    assert {r[0] for r in rows} == expected
    assert all(r[1] == r[2] for r in rows)
    assert sorted({r[1] for r in rows}) == [7, 30, 90]
