"""Forecasts that bend: per bot and metric, the model its own backtest chose among a log-linear
trend, a damped trend and a saturating curve, on daily series made to order; the model is a
column of bot_forecast, and the forecast, its interval and "when does it reach N" follow it."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, timedelta

import numpy as np
import polars as pl
import pytest

from pipeline.analytics.build._forecast import (
    BACKTEST_DAYS,
    MODELS,
    Model,
    bot_forecast,
    fit,
    metric_series,
    predict,
    reach,
)

DAY0 = date(2026, 1, 1)


def daily(bot: str, guilds: list[float], *, noise: float = 0.01, seed: int = 1) -> pl.DataFrame:
    """bot_daily rows (guilds, users = 50 a guild) of one bot, day i = DAY0 + i, with noise."""
    rng = np.random.default_rng(seed)
    values = [g * (1 + rng.uniform(-1, 1) * noise * math.sqrt(3)) for g in guilds]
    return pl.DataFrame({
        "bot_id": bot, "day": [DAY0 + timedelta(days=i) for i in range(len(values))],
        "guilds": [round(v) for v in values], "users": [round(v * 50) for v in values],
    })


def steady(n: int, growth: float = 0.01, start: float = 2000) -> list[float]:
    return [start * (1 + growth) ** i for i in range(n)]


def levelling_off(n: int, middle: int = 70) -> list[float]:
    """A logistic curve 5% a day at first, past its middle on day ``middle``."""
    return [20_000 / (1 + math.exp(-0.05 * (i - middle))) for i in range(n)]


def turning(n: int, peak: int = 60) -> list[float]:
    """2% a day up, then 2% a day down, turning on day ``peak``."""
    return [5000 * math.exp(-0.02 * (math.sqrt((i - peak) ** 2 + 9) - 3)) for i in range(n)]


def models_of(frame: pl.DataFrame) -> dict[str, str]:
    rows = fit(metric_series(frame.lazy())).collect()
    return dict(rows.filter(pl.col("metric") == "guilds").select("bot_id", "model").rows())


def test_each_bot_gets_the_model_its_own_backtest_chose() -> None:
    frame = pl.concat([daily("steady", steady(90)), daily("levels", levelling_off(90)),
                       daily("turns", turning(90))])
    chosen = models_of(frame)
    assert chosen["steady"] == "trend"
    assert chosen["levels"] in ("damped", "saturating")
    assert chosen["turns"] == "damped"


@pytest.mark.parametrize(("curve", "after"), [("levels", levelling_off), ("turns", turning)])
def test_a_bending_bot_is_forecast_closer_than_by_the_trend(
        curve: str, after: Callable[[int], list[float]]) -> None:
    # 90 days known, the 30 after held back: the chosen model misses them by less than the
    # trend over the whole window does.
    path = after(120)
    known, truth = path[:90], path[90:]
    series = metric_series(daily(curve, known).lazy())
    horizons = tuple(range(1, 31))
    ahead = predict(fit(series), horizons).filter(pl.col("metric") == "guilds").collect()
    trend = predict(fit(series, models=("trend",)), horizons).filter(
        pl.col("metric") == "guilds").collect()

    def miss(rows: pl.DataFrame) -> float:
        forecast = rows.sort("horizon_days")["forecast"].to_numpy()
        return float(np.mean(np.abs(forecast - truth) / truth))

    assert miss(ahead) < miss(trend) / 2


def test_bot_forecast_names_the_model_and_its_backtest() -> None:
    frame = pl.concat([daily("steady", steady(90)), daily("short", steady(BACKTEST_DAYS + 10))])
    rows = bot_forecast(frame.lazy()).collect()
    assert {"model", "damping", "backtest_mape"} <= set(rows.columns)
    assert set(rows["model"]) <= set(MODELS)
    steady_rows = rows.filter(pl.col("bot_id") == "steady")
    errors = steady_rows["backtest_mape"].to_list()
    assert all(0 <= e < 10 for e in errors)
    # Too short a history for a backtest: the trend, and no backtest error.
    short = rows.filter(pl.col("bot_id") == "short")
    assert set(short["model"]) == {"trend"} and short["backtest_mape"].null_count() == short.height
    assert (rows["lo80"] <= rows["forecast"]).all() and (rows["forecast"] <= rows["hi80"]).all()


def test_a_damped_forecast_bends_and_reach_follows_it() -> None:
    rows = fit(metric_series(daily("turns", turning(90)).lazy())).filter(
        pl.col("metric") == "guilds").collect()
    model = Model.of(rows.row(0, named=True))
    assert model.model == "damped" and 0 < model.damping < 1
    ahead = predict(rows.lazy(), (1, 30, 90, 365)).collect().sort("horizon_days")
    # Heading down, and levelling off: the damped slope adds up to a finite change.
    forecast = ahead["forecast"].to_list()
    assert forecast[0] > forecast[1] > forecast[2] > forecast[3]
    assert forecast[3] == pytest.approx(forecast[2], rel=0.2)
    growth = steady(90, growth=0.02)
    grown = fit(metric_series(daily("grows", growth).lazy()), models=("damped",)).filter(
        pl.col("metric") == "guilds").collect()
    damped = Model.of(grown.row(0, named=True))
    # A damped grower gets to a little more than it is now, and not to ten times as much.
    assert reach(damped, damped.last_value * 1.05).status == "on_pace"
    assert reach(damped, damped.last_value * 10).status == "not_on_pace"


def test_a_model_row_without_a_model_column_is_a_trend() -> None:
    # bot_forecast written before the models were chosen has no model columns.
    row = {"bot_id": "b", "metric": "guilds", "as_of": DAY0, "history_days": 30,
           "last_value": 100.0, "level": math.log1p(100), "slope": 0.01, "sigma": 0.01,
           "sigma_level": 0.001, "sigma_slope": 0.0001}
    model = Model.of(row)
    assert (model.model, model.damping) == ("trend", 1.0)
    assert reach(model, 200).day == DAY0 + timedelta(days=math.ceil(
        (math.log1p(200) - math.log1p(100)) / 0.01))
