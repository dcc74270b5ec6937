"""Forecasts: where each bot's guilds and users are heading, with an 80% interval.

The method, chosen by backtest (``bench/forecast.py``; figures in ``bench/README.md``, reasons in
``docs/design.md``), is a robust log-linear trend per bot and metric:

* the series is the bot's daily value (``bot_daily``) over the last ``WINDOW_DAYS`` days it has,
  in log space (``log1p``), so growth is a percentage per day and a forecast never goes below 0;
* the slope joins the median of the window's first third to the median of its last third (in
  value and in day): a spike day or a noisy week moves a median very little;
* the level is the median of the last third with the slope taken out: where the bot is now;
* the spread is the robust standard deviation (MAD) of what is left around that line. The
  80% interval at ``h`` days adds up three variances: a day's own noise, the level's and the
  slope's uncertainty (the latter grows with ``h``).

A bot with fewer than ``MIN_DAYS`` days of values in the window gets no forecast. Each step is a
function on a LazyFrame, so it runs per slice of bots inside the trends job; the fit itself puts
every series in one matrix (a row per bot and metric, a column per day) and takes its medians
along rows with numpy, since a median per group of a filtered column is slow in polars.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from functools import partial
from typing import Any

import numpy as np
import polars as pl

from ._jobs import MAD_SIGMA

METRICS = ("guilds", "users")
HORIZONS = (7, 30, 90)
WINDOW_DAYS = 84
MIN_DAYS = 7
Z80 = 1.2815515655446004  # the 90th percentile of a standard normal: a central 80% interval
MEAN_AD_SIGMA = 1.2533141373155  # mean absolute deviation -> standard deviation of a normal
MAD_EFFICIENCY = 0.37  # a MAD's asymptotic efficiency against the standard deviation (normal data)
MEDIAN_SE = 1.2533141373155  # standard error of a median, in sigmas / sqrt(n)
REACH_MAX_DAYS = 3650  # "not at the current pace" beyond ten years

MODEL_COLUMNS = ("bot_id", "metric", "as_of", "history_days", "last_value", "level", "slope",
                 "sigma", "sigma_level", "sigma_slope")


def metric_series(daily: pl.LazyFrame) -> pl.LazyFrame:
    """``bot_daily`` rows as (bot_id, metric, day, value): one row per bot, metric and day with
    a value (days without one are left out, never filled)."""
    return (
        daily.select("bot_id", "day", *METRICS)
        .unpivot(list(METRICS), index=["bot_id", "day"], variable_name="metric",
                 value_name="value")
        .filter(pl.col("value").is_not_null())
        .with_columns(pl.col("value").cast(pl.Float64))
    )


def fit(series: pl.LazyFrame, *, window: int = WINDOW_DAYS,
        min_days: int = MIN_DAYS) -> pl.LazyFrame:
    """One model row per bot and metric (see the module docstring), from :func:`metric_series`.

    ``as_of`` is the bot's last day with a value; ``t`` below is days before it (0 or less).
    ``level`` and ``slope`` are in log1p space (``slope`` per day); ``sigma*`` are standard
    deviations in that space.
    """
    # An integer per (bot, metric): grouping and windows on it avoid hashing and sorting strings.
    metric_index = pl.col("metric").replace_strict(
        {m: i for i, m in enumerate(METRICS)}, return_dtype=pl.Int64)
    key = (pl.col("bot_id").cast(pl.Categorical).to_physical().cast(pl.Int64) * len(METRICS)
           + metric_index)
    recent = (
        series.with_columns(_key=key)
        .with_columns(as_of=pl.col("day").max().over("_key"))
        # _col: the day's column in a (series x window) matrix; the last day is the last column.
        .with_columns(_col=(pl.col("day") - pl.col("as_of")).dt.total_days() + (window - 1))
        .filter(pl.col("_col") >= 0)
        .with_columns(history_days=pl.len().over("_key").cast(pl.Int64))
        .filter(pl.col("history_days") >= min_days)
    )
    return recent.map_batches(partial(_fit_matrix, window=window), schema=MODEL_SCHEMA)


MODEL_SCHEMA = pl.Schema({
    "bot_id": pl.String, "metric": pl.String, "as_of": pl.Date, "history_days": pl.Int64,
    "last_value": pl.Float64, "level": pl.Float64, "slope": pl.Float64, "sigma": pl.Float64,
    "sigma_level": pl.Float64, "sigma_slope": pl.Float64,
})


def _fit_matrix(rows: pl.DataFrame, *, window: int) -> pl.DataFrame:
    """The fit of :func:`fit` on every series at once: one row of a matrix per series, one
    column per day of the window (NaN where the series has no value), medians along rows."""
    keys, series = np.unique(rows["_key"].to_numpy(), return_inverse=True)
    column = rows["_col"].to_numpy()
    y = np.full((len(keys), window), np.nan)
    y[series, column] = np.log1p(np.clip(rows["value"].to_numpy(), 0, None))
    t = np.broadcast_to(np.arange(1 - window, 1, dtype=np.float64), y.shape)
    valid = ~np.isnan(y)
    span = -np.where(valid, t, np.inf).min(axis=1, keepdims=True)
    early = valid & (t <= -span * 2 / 3)
    late = valid & (t >= -span / 3)
    distance = row_medians(t, late) - row_medians(t, early)
    slope = (row_medians(y, late) - row_medians(y, early)) / distance
    level = row_medians(y - slope[:, None] * t, late)
    resid = y - level[:, None] - slope[:, None] * t
    dev = np.abs(resid - row_medians(resid, valid)[:, None])
    mad = row_medians(dev, valid)
    # When most days are one value (a small bot's count barely moves) the MAD is 0; the mean
    # absolute deviation, scaled to a normal sigma, stands in.
    mean_ad = np.nanmean(dev, axis=1)
    sigma = np.where(mad > 0, mad * MAD_SIGMA, mean_ad * MEAN_AD_SIGMA)
    n_early, n_late = early.sum(axis=1), late.sum(axis=1)
    # Each series' row on its last day (column window - 1), in matrix row order.
    last = np.flatnonzero(column == window - 1)
    last = last[np.argsort(series[last])]
    return rows[last].select(
        "bot_id", "metric", "as_of", "history_days", pl.col("value").alias("last_value"),
    ).with_columns(
        level=level, slope=slope, sigma=sigma,
        sigma_level=MEDIAN_SE * sigma / np.sqrt(n_late),
        sigma_slope=MEDIAN_SE * sigma * np.sqrt(1 / n_late + 1 / n_early) / distance,
    )


def row_medians(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The median of each row's values where ``mask`` is set (NaN for a row with none)."""
    picked = np.sort(np.where(mask, values, np.nan), axis=1)  # NaNs sort last
    count = mask.sum(axis=1)
    k = np.maximum(count, 1)
    lo = np.take_along_axis(picked, ((k - 1) // 2)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(picked, (k // 2)[:, None], axis=1)[:, 0]
    return np.where(count > 0, (lo + hi) / 2, np.nan)


def student_t80(days: pl.Expr) -> pl.Expr:
    """The 90th percentile of Student's t for a sigma estimated from ``days`` values.

    A MAD has the precision of a standard deviation from about ``MAD_EFFICIENCY`` of the
    values, less the two fitted parameters; Cornish-Fisher's expansion of the quantile in
    1/df is exact to three decimals from 5 degrees of freedom on.
    """
    df = ((days - 2) * MAD_EFFICIENCY).clip(lower_bound=5.0)
    z = Z80
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def predict(model: pl.LazyFrame, horizons: pl.LazyFrame | tuple[int, ...] = HORIZONS) -> pl.LazyFrame:
    """Forecast rows: each model row at each horizon (days after ``as_of``): ``day``,
    ``forecast`` (the median path) and the 80% interval ``lo80``..``hi80``. ``horizons`` is a
    tuple of days, or a frame with ``horizon_days`` (and bot_id and/or metric to join on,
    any other column carried along)."""
    if isinstance(horizons, tuple):
        horizons = pl.LazyFrame({"horizon_days": list(horizons)}, schema={"horizon_days": pl.Int64})
    on = [c for c in ("bot_id", "metric") if c in horizons.collect_schema().names()]
    rows = model.join(horizons, on=on, how="inner") if on else model.join(horizons, how="cross")
    h = pl.col("horizon_days").cast(pl.Float64)
    center = pl.col("level") + pl.col("slope") * h
    sd = (pl.col("sigma") ** 2 + pl.col("sigma_level") ** 2
          + (h * pl.col("sigma_slope")) ** 2).sqrt()
    z = student_t80(pl.col("history_days"))
    return rows.with_columns(
        day=pl.col("as_of") + pl.duration(days=pl.col("horizon_days")),
        forecast=center.exp() - 1,
        lo80=((center - z * sd).exp() - 1).clip(lower_bound=0.0),
        hi80=(center + z * sd).exp() - 1,
        daily_growth_pct=pl.col("slope").exp().sub(1).mul(100),
    )


def bot_forecast(daily: pl.LazyFrame) -> pl.LazyFrame:
    """The ``bot_forecast`` dataset from ``bot_daily`` rows of whole bots: per bot, metric
    (guilds, users) and horizon (7, 30, 90 days after the bot's last day), the forecast, its
    80% interval, the daily growth it implies, and the model behind it (so a reader can ask
    for any other horizon or target with :func:`predict` or :func:`reach`)."""
    return predict(fit(metric_series(daily))).select(
        "bot_id", "metric", "as_of", "horizon_days", "day", "forecast", "lo80", "hi80",
        "daily_growth_pct", *MODEL_COLUMNS[3:],
    )


def latest(outlook: pl.LazyFrame) -> pl.LazyFrame:
    """Each bot's current rows of ``bot_forecast``: those of its latest ``as_of``. (An
    incremental trends run adds a recomputed bot's new rows; its older ones stay when they
    were made before the days that run recomputed.)"""
    return outlook.filter(pl.col("as_of") == pl.col("as_of").max().over("bot_id", "metric"))


@dataclass(frozen=True)
class Reach:
    """When a bot's metric reaches ``target`` at its current pace.

    ``status``: ``reached`` (already there: ``last_value`` >= target), ``on_pace`` (``day``
    is the median path's crossing, ``earliest``..``latest`` the 80% band's; ``latest`` None
    when the band's low edge does not get there within ``REACH_MAX_DAYS``), or
    ``not_on_pace`` (the median path does not get there within ``REACH_MAX_DAYS``).
    """

    bot_id: str
    metric: str
    target: float
    as_of: date
    last_value: float
    status: str
    day: date | None = None
    earliest: date | None = None
    latest: date | None = None

    def sentence(self) -> str:
        what = f"{self.bot_id} {self.metric} {self.target:,.0f}"
        if self.status == "reached":
            return f"{what}: already there ({self.last_value:,.0f} on {self.as_of})."
        if self.status == "not_on_pace":
            return (f"{what}: not at the current pace ({self.last_value:,.0f} on {self.as_of}; "
                    f"not within {REACH_MAX_DAYS // 365} years).")
        latest = f"{self.latest}" if self.latest else f"after {self.as_of + timedelta(REACH_MAX_DAYS)}"
        return (f"{what}: at the current pace, about {self.day}; 80% between {self.earliest} "
                f"and {latest} ({self.last_value:,.0f} on {self.as_of}).")

    def as_dict(self) -> dict[str, object]:
        return {k: (str(v) if isinstance(v, date) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Model:
    """One bot's fitted model for one metric: a row of :data:`MODEL_COLUMNS`."""

    bot_id: str
    metric: str
    as_of: date
    history_days: int
    last_value: float
    level: float
    slope: float
    sigma: float
    sigma_level: float
    sigma_slope: float

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Model:
        """The model in a row of ``bot_forecast`` (its other columns ignored)."""
        return cls(**{name: row[name] for name in MODEL_COLUMNS})


def reach(model: Model, target: float, *, max_days: int = REACH_MAX_DAYS) -> Reach:
    """When ``model`` reaches ``target``: the first day its median path, and each edge of its
    80% band, is at or above it."""
    as_of = model.as_of
    last = float(model.last_value)
    assert isinstance(as_of, date)
    base = Reach(str(model.bot_id), str(model.metric), float(target), as_of, last, "reached")
    if last >= target:
        return base
    h = np.arange(1, max_days + 1, dtype=np.float64)
    level, slope = float(model.level), float(model.slope)
    sd = np.sqrt(float(model.sigma) ** 2 + float(model.sigma_level) ** 2
                 + (h * float(model.sigma_slope)) ** 2)
    z = pl.select(student_t80(pl.lit(float(model.history_days)))).item()
    goal = math.log1p(target)
    center = level + slope * h

    def first(path: np.ndarray) -> date | None:
        hits = np.flatnonzero(path >= goal)
        return as_of + timedelta(days=int(h[hits[0]])) if hits.size else None

    day = first(center)
    if day is None:
        return Reach(**{**base.__dict__, "status": "not_on_pace"})
    return Reach(**{**base.__dict__, "status": "on_pace", "day": day,
                    "earliest": first(center + z * sd), "latest": first(center - z * sd)})
