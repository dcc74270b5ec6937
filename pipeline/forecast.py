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

A bot with fewer than ``MIN_DAYS`` days of values in the window gets no forecast. Everything is a
small polars function on a LazyFrame, so it runs per slice of bots inside the trends job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
import polars as pl

METRICS = ("guilds", "users")
HORIZONS = (7, 30, 90)
WINDOW_DAYS = 84
MIN_DAYS = 7
Z80 = 1.2815515655446004  # the 90th percentile of a standard normal: a central 80% interval
MAD_SIGMA = 1.482602218505602  # MAD -> standard deviation of a normal
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
    keys = ["bot_id", "metric"]
    t = pl.col("t")
    y = pl.col("y")
    recent = (
        series.with_columns(as_of=pl.col("day").max().over(keys))
        .with_columns(t=(pl.col("day") - pl.col("as_of")).dt.total_days().cast(pl.Float64),
                      y=pl.col("value").clip(lower_bound=0).log1p())
        .filter(pl.col("t") > -window)
        .with_columns(span=-t.min().over(keys), history_days=pl.len().over(keys))
        .filter(pl.col("history_days") >= min_days)
        .with_columns(
            early=t <= -pl.col("span") * 2 / 3,
            late=t >= -pl.col("span") / 3,
        )
    )
    slopes = recent.group_by(keys).agg(
        pl.col("as_of").first(),
        pl.col("history_days").first().cast(pl.Int64),
        last_value=pl.col("value").sort_by("t").last(),
        _y_early=y.filter("early").median(), _t_early=t.filter("early").median(),
        _y_late=y.filter("late").median(), _t_late=t.filter("late").median(),
        _n_early=pl.col("early").sum(), _n_late=pl.col("late").sum(),
    ).with_columns(
        slope=(pl.col("_y_late") - pl.col("_y_early")) / (pl.col("_t_late") - pl.col("_t_early"))
    )
    levels = recent.join(slopes.select(*keys, "slope"), on=keys).group_by(keys).agg(
        level=(y - pl.col("slope") * t).filter("late").median(),
    )
    spread = (
        recent.join(slopes.select(*keys, "slope"), on=keys)
        .join(levels, on=keys)
        .with_columns(_resid=y - pl.col("level") - pl.col("slope") * t)
        .group_by(keys)
        .agg(_dev=(pl.col("_resid") - pl.col("_resid").median()).abs())
        .with_columns(
            # When most days are one value (a small bot's count barely moves) the MAD is 0;
            # the mean absolute deviation, scaled to a normal sigma, stands in.
            sigma=pl.when(pl.col("_dev").list.median() > 0)
            .then(pl.col("_dev").list.median() * MAD_SIGMA)
            .otherwise(pl.col("_dev").list.mean() * MEAN_AD_SIGMA)
        )
    )
    sigma = pl.col("sigma")
    return (
        slopes.join(levels, on=keys).join(spread, on=keys)
        .with_columns(
            sigma_level=MEDIAN_SE * sigma / pl.col("_n_late").sqrt(),
            sigma_slope=MEDIAN_SE * sigma * (1 / pl.col("_n_late") + 1 / pl.col("_n_early")).sqrt()
            / (pl.col("_t_late") - pl.col("_t_early")),
        )
        .select(*MODEL_COLUMNS)
    )


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


def reach(model: dict[str, object], target: float, *, max_days: int = REACH_MAX_DAYS) -> Reach:
    """When the model row ``model`` (a dict of :data:`MODEL_COLUMNS`) reaches ``target``: the
    first day its median path, and each edge of its 80% band, is at or above it."""
    as_of = model["as_of"]
    last = float(model["last_value"])  # type: ignore[arg-type]
    assert isinstance(as_of, date)
    base = Reach(str(model["bot_id"]), str(model["metric"]), float(target), as_of, last, "reached")
    if last >= target:
        return base
    h = np.arange(1, max_days + 1, dtype=np.float64)
    level, slope = float(model["level"]), float(model["slope"])  # type: ignore[arg-type]
    sd = np.sqrt(float(model["sigma"]) ** 2 + float(model["sigma_level"]) ** 2  # type: ignore[arg-type]
                 + (h * float(model["sigma_slope"])) ** 2)  # type: ignore[arg-type]
    z = pl.select(student_t80(pl.lit(float(model["history_days"])))).item()  # type: ignore[arg-type]
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


__all__ = ["HORIZONS", "METRICS", "MODEL_COLUMNS", "Reach", "bot_forecast", "fit",
           "metric_series", "predict", "reach"]
