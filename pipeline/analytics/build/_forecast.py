"""Forecasts: where each bot's guilds and users are heading, with an 80% interval.

Per bot and metric, three candidate models are fitted to the bot's daily values (``bot_daily``)
over the last ``WINDOW_DAYS`` days it has, in log space (``log1p``: growth is a percentage per
day, and a forecast never goes below 0), and the one that forecast the bot's own last
``BACKTEST_DAYS`` best, fitted on the days before them, is kept (``model``):

* ``trend``: a robust log-linear trend. The slope joins the median of the window's first third
  to the median of its last third (in value and in day): a spike day or a noisy week moves a
  median very little; the level is the median of the last third with the slope taken out.
* ``damped``: the same over the last ``LOCAL_DAYS`` days only, its slope damped by ``DAMPING``
  a day ahead: where the bot is going now, for a while (growth that turned, or is slowing).
* ``saturating``: a curve that levels off, ``a + b * damping ** t``: its slopes shrink by
  ``damping`` a day, read from how the slope fell between the window's thirds (medians again).
  A bot whose slope did not fall has no such curve.

Every model forecasts ``level + slope * (damping + damping**2 + ... + damping**h)`` at ``h``
days (``damping`` 1 for the trend: ``level + slope * h``). Its spread ``sigma`` is the robust
standard deviation (MAD) of what the model leaves around the window's days; the 80% interval
at ``h`` days adds three variances: a day's own noise, the level's and the slope's uncertainty
(the latter grows with the horizon), widened by how much the model missed in its backtest
beyond what those said (``backtest_mape`` keeps its error).

A bot with fewer than ``MIN_DAYS`` days of values in the window gets no forecast, and one with
too few for a backtest the trend. Each step is a function on a LazyFrame, so it runs per slice
of bots inside the trends job; the fits put every series in one matrix (a row per bot and
metric, a column per day) and take medians along rows with numpy, since a median per group of
a filtered column is slow in polars.
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

from ._jobs import MAD_SIGMA, MEAN_AD_SIGMA, MEDIAN_SE

METRICS = ("guilds", "users")
HORIZONS = (7, 30, 90)
WINDOW_DAYS = 84
MIN_DAYS = 7
MODELS = ("trend", "damped", "saturating")
LOCAL_DAYS = 21  # the damped trend's window
DAMPING = 0.98  # the damped trend's slope, a day further ahead
BACKTEST_DAYS = 28  # each bot's last days, forecast from the ones before to choose its model
BACKTEST_ORIGINS = (BACKTEST_DAYS, BACKTEST_DAYS // 2)  # days before the end, each scored
BACKTEST_MIN_DAYS = 21  # days of values before them that a backtest needs
MIN_DAMPING = 0.8  # a saturating curve's slope halves in 3 days at the fastest
MAX_DAMPING = 0.995  # ... and in 140 days at the slowest (slower is a trend)
Z80 = 1.2815515655446004  # the 90th percentile of a standard normal: a central 80% interval
MAD_EFFICIENCY = 0.37  # a MAD's asymptotic efficiency against the standard deviation (normal data)
REACH_MAX_DAYS = 3650  # "not at the current pace" beyond ten years

# How the report and compare name each model.
MODEL_WORDS = {"trend": "trend", "damped": "damped trend", "saturating": "saturating curve"}

MODEL_COLUMNS = ("bot_id", "metric", "as_of", "history_days", "last_value", "level", "slope",
                 "sigma", "sigma_level", "sigma_slope", "model", "damping", "backtest_mape")


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


def fit(series: pl.LazyFrame, *, window: int = WINDOW_DAYS, min_days: int = MIN_DAYS,
        models: tuple[str, ...] = MODELS) -> pl.LazyFrame:
    """One model row per bot and metric (see the module docstring), from :func:`metric_series`:
    the one of ``models`` chosen by backtest.

    ``as_of`` is the bot's last day with a value; ``t`` below is days before it (0 or less).
    ``level`` and ``slope`` are in log1p space (``slope`` per day, before damping); ``sigma*``
    are standard deviations in that space.
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
    unknown = sorted(set(models) - set(MODELS))
    if unknown or not models:
        raise ValueError(f"unknown forecast models {unknown}: the models are {', '.join(MODELS)}")
    return recent.map_batches(partial(_fit_matrix, window=window, models=models),
                              schema=MODEL_SCHEMA)


MODEL_SCHEMA = pl.Schema({
    "bot_id": pl.String, "metric": pl.String, "as_of": pl.Date, "history_days": pl.Int64,
    "last_value": pl.Float64, "level": pl.Float64, "slope": pl.Float64, "sigma": pl.Float64,
    "sigma_level": pl.Float64, "sigma_slope": pl.Float64, "model": pl.String,
    "damping": pl.Float64, "backtest_mape": pl.Float64,
})


@dataclass
class _Fit:
    """One model fitted to every row of a matrix (NaN where it does not fit a row)."""

    level: np.ndarray
    slope: np.ndarray
    damping: np.ndarray
    sigma: np.ndarray
    sigma_level: np.ndarray
    sigma_slope: np.ndarray

    def path(self, h: np.ndarray) -> np.ndarray:
        """log1p forecasts at horizons ``h`` (days, a row per series or one for all)."""
        out: np.ndarray = self.level[:, None] + self.slope[:, None] * ahead(
            self.damping[:, None], h)
        return out

    def sd(self, h: np.ndarray) -> np.ndarray:
        """Standard deviation of a day's value at horizons ``h``, the model taken as right. The
        slope's uncertainty is not damped: whether a bot bends is uncertain too."""
        out: np.ndarray = np.sqrt(self.sigma[:, None] ** 2 + self.sigma_level[:, None] ** 2
                                  + (h * self.sigma_slope[:, None]) ** 2)
        return out

    def pick(self, rows: np.ndarray, other: _Fit) -> _Fit:
        """This fit on ``rows``, ``other`` elsewhere."""
        return _Fit(*(np.where(rows, mine, theirs) for mine, theirs in
                      zip(self.__dict__.values(), other.__dict__.values(), strict=True)))


def ahead(damping: np.ndarray | float, h: np.ndarray | float) -> np.ndarray:
    """How many days of slope ``h`` days ahead add up to: ``h`` undamped, else
    ``damping + damping**2 + ... + damping**h``."""
    d = np.asarray(damping, dtype=np.float64)
    hh = np.asarray(h, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        damped = d * (1 - d ** hh) / (1 - d)
    out: np.ndarray = np.where(d >= 1, hh, damped)
    return out


def _fit_matrix(rows: pl.DataFrame, *, window: int, models: tuple[str, ...]) -> pl.DataFrame:
    """The fit of :func:`fit` on every series at once: one row of a matrix per series, one
    column per day of the window (NaN where the series has no value), medians along rows."""
    keys, series = np.unique(rows["_key"].to_numpy(), return_inverse=True)
    column = rows["_col"].to_numpy()
    y = np.full((len(keys), window), np.nan)
    y[series, column] = np.log1p(np.clip(rows["value"].to_numpy(), 0, None))
    fits = _fit_all(y, models)
    choice, error, scale = _choose(y, models, fits)
    chosen = fits[models[0]]
    for k, name in enumerate(models[1:], start=1):
        chosen = fits[name].pick(choice == k, chosen)
    # Each series' row on its last day (column window - 1), in matrix row order.
    last = np.flatnonzero(column == window - 1)
    last = last[np.argsort(series[last])]
    n = np.count_nonzero(~np.isnan(y), axis=1)
    return rows[last].select(
        "bot_id", "metric", "as_of", "history_days", pl.col("value").alias("last_value"),
    ).with_columns(
        level=chosen.level, slope=chosen.slope,
        sigma=chosen.sigma * scale, sigma_level=chosen.sigma_level * scale,
        sigma_slope=chosen.sigma_slope * scale,
        model=pl.Series(np.array(models, dtype=object)[choice], dtype=pl.String),
        damping=chosen.damping,
        backtest_mape=pl.Series(np.where(n > 0, error, np.nan)).fill_nan(None),
    )


def _fit_all(y: np.ndarray, models: tuple[str, ...]) -> dict[str, _Fit]:
    """Each of ``models`` fitted to every row of ``y`` (its last column is t = 0)."""
    t = np.broadcast_to(np.arange(1 - y.shape[1], 1, dtype=np.float64), y.shape)
    valid = ~np.isnan(y)
    makers = {"trend": lambda: _trend(y, t, valid),
              "damped": lambda: _damped(y, t, valid),
              "saturating": lambda: _saturating(y, t, valid)}
    return {name: makers[name]() for name in models}


def _thirds(t: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first, middle and last third of each row's days with a value (by day)."""
    span = -np.where(valid, t, np.inf).min(axis=1, keepdims=True)
    early = valid & (t <= -span * 2 / 3)
    late = valid & (t >= -span / 3)
    return early, valid & ~early & ~late, late


def _trend(y: np.ndarray, t: np.ndarray, valid: np.ndarray,
           damping: float = 1.0) -> _Fit:
    """The robust log-linear trend over the days of ``valid`` (see the module docstring)."""
    early, _, late = _thirds(t, valid)
    distance = row_medians(t, late) - row_medians(t, early)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = (row_medians(y, late) - row_medians(y, early)) / distance
    level = row_medians(y - slope[:, None] * t, late)
    sigma = _spread(y - level[:, None] - slope[:, None] * t, valid)
    n_early, n_late = early.sum(axis=1), late.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sigma_level = MEDIAN_SE * sigma / np.sqrt(n_late)
        sigma_slope = MEDIAN_SE * sigma * np.sqrt(1 / n_late + 1 / n_early) / distance
    return _Fit(level, slope, np.full(len(y), damping), sigma, sigma_level, sigma_slope)


def _damped(y: np.ndarray, t: np.ndarray, valid: np.ndarray) -> _Fit:
    """The trend of the last LOCAL_DAYS days, damped by DAMPING a day."""
    recent = valid & (t > -LOCAL_DAYS)
    ok = recent.sum(axis=1) >= MIN_DAYS
    fitted = _trend(y, t, recent, DAMPING)
    return _Fit(*(np.where(ok, v, np.nan) for v in fitted.__dict__.values()))


def _saturating(y: np.ndarray, t: np.ndarray, valid: np.ndarray) -> _Fit:
    """``a + b * damping ** t``: a curve whose slope shrinks by ``damping`` a day, read from the
    medians of the window's thirds (the slope between the last two against the first two)."""
    early, middle, late = _thirds(t, valid)
    ey, my, ly = row_medians(y, early), row_medians(y, middle), row_medians(y, late)
    et, mt, lt = row_medians(t, early), row_medians(t, middle), row_medians(t, late)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = ((ly - my) / (lt - mt)) / ((my - ey) / (mt - et))
        damping = ratio ** (1 / ((lt - et) / 2))
    ok = (ratio > 0) & (ratio < 1) & (damping >= MIN_DAMPING) & (damping <= MAX_DAMPING)
    damping = np.where(ok, damping, 0.9)
    x = damping[:, None] ** t
    with np.errstate(invalid="ignore", divide="ignore"):
        b = (ly - ey) / (row_medians(x, late) - row_medians(x, early))
    a = row_medians(y - b[:, None] * x, late)
    sigma = _spread(y - a[:, None] - b[:, None] * x, valid)
    n_early, n_late = early.sum(axis=1), late.sum(axis=1)
    # As a damped trend: slope * (d + ... + d**h) = b * (d**h - 1).
    slope = b * (damping - 1) / damping
    with np.errstate(invalid="ignore", divide="ignore"):
        sigma_level = MEDIAN_SE * sigma / np.sqrt(n_late)
        sigma_slope = (MEDIAN_SE * sigma * np.sqrt(1 / n_late + 1 / n_early)
                       * np.abs(slope / (ly - ey)))
    fitted = _Fit(a + b, slope, damping, sigma, sigma_level, sigma_slope)
    return _Fit(*(np.where(ok, v, np.nan) for v in fitted.__dict__.values()))


def _spread(resid: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The robust standard deviation of each row's residuals: MAD x 1.4826, or, when most days
    are one value (a small bot's count barely moves: a MAD of 0), the mean absolute deviation
    scaled to a normal sigma."""
    dev = np.abs(resid - row_medians(resid, valid)[:, None])
    mad = row_medians(dev, valid)
    # nanmean's own arithmetic, without its warning for a row with no day (NaN there too).
    counted = valid & ~np.isnan(dev)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_ad = np.where(counted, dev, 0.0).sum(axis=1) / counted.sum(axis=1)
    out: np.ndarray = np.where(mad > 0, mad * MAD_SIGMA, mean_ad * MEAN_AD_SIGMA)
    return out


def _choose(y: np.ndarray, models: tuple[str, ...],
            fits: dict[str, _Fit]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``y``: the index of the model in ``models`` that forecast its last
    BACKTEST_DAYS best from the days before (the first that fits when there is no backtest),
    its backtest's mean absolute percentage error, and how much wider its interval should
    be than its own spreads say (at least 1)."""
    n = len(y)
    allowed = np.array([~np.isnan(fits[m].level) for m in models])
    # Without a backtest, the first model allowed (the first of all when none is).
    choice = np.where(allowed.any(axis=0), np.argmax(allowed, axis=0), 0)
    origin = y.shape[1] - BACKTEST_DAYS
    before, after = y[:, :origin], y[:, origin:]
    held = ~np.isnan(after)
    rows = np.flatnonzero((np.count_nonzero(~np.isnan(before), axis=1) >= BACKTEST_MIN_DAYS)
                          & (held.sum(axis=1) >= MIN_DAYS) & allowed.any(axis=0))
    error, scale = np.full(n, np.nan), np.ones(n)
    if len(rows) == 0:
        return choice, error, scale
    h = np.arange(1, BACKTEST_DAYS + 1, dtype=np.float64)[None, :]
    past = _fit_all(before[rows], models)
    errors = np.zeros((len(models), len(rows)))
    for days in BACKTEST_ORIGINS:
        cut = y.shape[1] - days
        fitted_then = past if days == BACKTEST_DAYS else _fit_all(y[rows, :cut], models)
        later, seen = y[rows, cut:], ~np.isnan(y[rows, cut:])
        for k, name in enumerate(models):
            then = fitted_then[name]
            miss = np.where(seen, np.abs(later - then.path(h[:, :days])), 0.0)
            with np.errstate(invalid="ignore", divide="ignore"):
                score = miss.sum(axis=1) / seen.sum(axis=1)
            # An origin with no day after it says nothing; a model that does not fit (then or
            # now), or is not allowed, is out.
            score = np.where(seen.any(axis=1), score, 0.0)
            out = np.isnan(then.level) | np.isnan(score) | ~allowed[k, rows]
            errors[k] += np.where(out, np.inf, score)
    best = np.where(np.isfinite(errors).any(axis=0), np.argmin(errors, axis=0), choice[rows])
    choice[rows] = best
    fitted = past[models[0]]
    for k, name in enumerate(models[1:], start=1):
        fitted = past[name].pick(best == k, fitted)
    path = fitted.path(h)
    actual = np.expm1(after[rows])
    scored = held[rows] & (actual > 0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ape = np.where(scored, np.abs(np.expm1(path) - actual) / actual, 0.0)
        error[rows] = np.where(scored.any(axis=1), 100 * ape.sum(axis=1) / scored.sum(axis=1),
                               np.nan)
        # The interval: as wide again as the backtest's misses were beyond what the model's
        # own spreads said (the median miss of a normal is 0.6745 of its sd), never narrower.
        z = np.where(held[rows], np.abs(after[rows] - path) / fitted.sd(h), np.nan)
        scale[rows] = np.clip(np.nan_to_num(_nanmedian(z) / 0.6745, nan=1.0), 1.0, None)
    return choice, error, scale


def _nanmedian(values: np.ndarray) -> np.ndarray:
    return row_medians(np.nan_to_num(values, nan=0.0), ~np.isnan(values))


def row_medians(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The median of each row's values where ``mask`` is set (NaN for a row with none)."""
    # Only the columns some row uses are sorted (a third of the window's, for a third).
    used = mask.any(axis=0)
    if not used.all():
        values, mask = values[:, used], mask[:, used]
    picked = np.sort(np.where(mask, values, np.nan), axis=1)  # NaNs sort last
    count = mask.sum(axis=1)
    k = np.maximum(count, 1)
    lo = np.take_along_axis(picked, ((k - 1) // 2)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(picked, (k // 2)[:, None], axis=1)[:, 0]
    out: np.ndarray = np.where(count > 0, (lo + hi) / 2, np.nan)
    return out


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
    damping = pl.col("damping").fill_null(1.0)
    days = pl.when(damping >= 1).then(h).otherwise(damping * (1 - damping.pow(h)) / (1 - damping))
    center = pl.col("level") + pl.col("slope") * days
    sd = (pl.col("sigma") ** 2 + pl.col("sigma_level") ** 2
          + (h * pl.col("sigma_slope")) ** 2).sqrt()
    z = student_t80(pl.col("history_days"))
    return rows.with_columns(
        day=pl.col("as_of") + pl.duration(days=pl.col("horizon_days")),
        forecast=center.exp() - 1,
        lo80=((center - z * sd).exp() - 1).clip(lower_bound=0.0),
        hi80=(center + z * sd).exp() - 1,
        # The growth of the next day: a damped slope grows the first day by slope x damping.
        daily_growth_pct=(pl.col("slope") * damping.clip(upper_bound=1.0)).exp().sub(1).mul(100),
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

    def sentence(self, name: str | None = None) -> str:
        """The answer in words; ``name`` (the bot's, from ``bot_names``) leads it, with the id."""
        who = f"{name} ({self.bot_id})" if name else self.bot_id
        what = f"{who} {self.metric} {self.target:,.0f}"
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
    model: str = "trend"
    damping: float = 1.0
    backtest_mape: float | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Model:
        """The model in a row of ``bot_forecast`` (its other columns ignored; a row of an
        export older than the model choice is a trend)."""
        return cls(**{name: row[name] for name in MODEL_COLUMNS if name in row})


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
    days = ahead(float(model.damping if model.damping is not None else 1.0), h)
    level, slope = float(model.level), float(model.slope)
    sd = np.sqrt(float(model.sigma) ** 2 + float(model.sigma_level) ** 2
                 + (h * float(model.sigma_slope)) ** 2)
    z = pl.select(student_t80(pl.lit(float(model.history_days)))).item()
    goal = math.log1p(target)
    center = level + slope * days

    def first(path: np.ndarray) -> date | None:
        hits = np.flatnonzero(path >= goal)
        return as_of + timedelta(days=int(h[hits[0]])) if hits.size else None

    day = first(center)
    if day is None:
        return Reach(**{**base.__dict__, "status": "not_on_pace"})
    return Reach(**{**base.__dict__, "status": "on_pace", "day": day,
                    "earliest": first(center + z * sd), "latest": first(center - z * sd)})
