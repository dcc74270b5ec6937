"""The two baselines bench/anomalies.py runs beside the shipped detector, on ``bot_daily``:

- **plain z**: each day's change (guilds and users minus the day before's, commands run; only
  when the bot also reported the day before), against the mean and standard deviation of the
  changes of the 28 days before (at least 7): flagged when |z| > 3.5;
- **robust z**: botstats' detector before the events (0.2): the same changes against their
  median and MAD over the 28 days before (the mean absolute deviation when the MAD is 0; a
  flat window makes any move infinite), flagged when |0.6745 (x - median) / MAD| > 3.5.

Both apply the shipped detector's floors (its default settings): a change counts only when it
is at least ``anomaly_min_pct`` of the day before, and ``anomaly_min_guilds`` guilds or
``anomaly_min_users`` users (commands run must double or halve, and move that many). And both
name a kind, as simply as a daily change allows: a ``level_shift`` when the 3 days after stay
past half the change, else a ``spike`` (up) or a ``drop`` (down). Outages and counter resets
are not theirs to find.

Both give one row per flagged bot, day and metric, with its score and kind.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.analytics.build._jobs import bot_day_key, with_days_ago
from pipeline.core import TrendSettings

WINDOW = 28
MIN_DAYS = 7
THRESHOLD = 3.5
METRICS = ("guilds", "users", "commands_executed")
MAD_Z = 0.6745
MEAN_AD_Z = 1.253314
HOLD_DAYS = 3
FLOORS = TrendSettings()
COMMANDS_MIN_RATIO = 2.0


def deltas(daily: pl.DataFrame) -> pl.DataFrame:
    """Per bot and day: the day's change of each metric (null across a gap), whether it passes
    the floors (``<metric>_big``), the kind it would be, and the key."""
    had_yesterday = pl.col("records_1d_ago").is_not_null()
    frame = with_days_ago(daily.lazy().select("bot_id", "day", "guilds", "users",
                                              "commands_executed", "records"),
                          ["guilds", "users", "commands_executed", "records"], (1,))
    columns: list[pl.Expr] = []
    for m in ("guilds", "users"):
        before, now = pl.col(f"{m}_1d_ago").cast(pl.Float64), pl.col(m).cast(pl.Float64)
        change = now - before
        least = FLOORS.anomaly_min_guilds if m == "guilds" else FLOORS.anomaly_min_users
        columns += [change.alias(m), (
            (change.abs() >= FLOORS.anomaly_min_pct / 100 * before) & (change.abs() >= least)
        ).alias(f"{m}_big")]
    ran = pl.when(had_yesterday).then(pl.col("commands_executed")).cast(pl.Float64)
    usual = pl.col("commands_executed_1d_ago").cast(pl.Float64)
    columns += [ran.alias("commands_executed"), (
        ((ran >= COMMANDS_MIN_RATIO * usual) | (ran <= usual / COMMANDS_MIN_RATIO))
        & ((ran - usual).abs() >= FLOORS.anomaly_min_users)).alias("commands_executed_big")]
    # Whether the next HOLD_DAYS days (of the same bot, on exactly those days) stay past half
    # the day's step: the step held.
    ahead_columns: list[pl.Expr] = []
    for m in METRICS:
        series = pl.col(m).cast(pl.Float64)
        for k in range(1, HOLD_DAYS + 1):
            same = (pl.col("bot_id").shift(-k) == pl.col("bot_id")) & (
                pl.col("day").shift(-k) == pl.col("day") + pl.duration(days=k))
            ahead_columns.append(pl.when(same).then(series.shift(-k)).alias(f"_{m}_ahead_{k}"))
        half = pl.col(f"{m}_1d_ago").cast(pl.Float64) + (series - pl.col(f"{m}_1d_ago")) / 2
        ahead_columns += [half.alias(f"_{m}_half"), (series > half).alias(f"_{m}_up")]
    for m in METRICS:
        held = pl.lit(True)
        for k in range(1, HOLD_DAYS + 1):
            ahead, half = pl.col(f"_{m}_ahead_{k}"), pl.col(f"_{m}_half")
            held = held & pl.when(pl.col(f"_{m}_up")).then(ahead >= half).otherwise(ahead <= half)
        columns.append(held.fill_null(False).alias(f"{m}_held"))
    return (
        frame.with_columns(ahead_columns)
        .with_columns(columns)
        .with_columns(_key=bot_day_key())
        .collect()
    )


def _kind(m: str) -> pl.Expr:
    return (pl.when(pl.col(f"{m}_held")).then(pl.lit("level_shift"))
            .when(pl.col(m) > 0).then(pl.lit("spike")).otherwise(pl.lit("drop")))


def plain_z(daily: pl.DataFrame) -> pl.DataFrame:
    found = []
    frame = deltas(daily)
    for m in METRICS:
        x = pl.col(m)
        scored = frame.select(
            "bot_id", "day", metric=pl.lit(m), kind=_kind(m), big=pl.col(f"{m}_big"),
            score=(x - x.rolling_mean_by("_key", f"{WINDOW}i", min_samples=MIN_DAYS,
                                         closed="left"))
            / x.rolling_std_by("_key", f"{WINDOW}i", min_samples=MIN_DAYS, closed="left"),
        )
        found.append(scored.filter((pl.col("score").abs() > THRESHOLD) & pl.col("big"))
                     .drop("big"))
    return pl.concat(found)


def robust_z(daily: pl.DataFrame) -> pl.DataFrame:
    frame = deltas(daily)
    key = frame["_key"].to_numpy()
    found = []
    for m in METRICS:
        values = frame[m].to_numpy().astype(np.float64)
        rows, score = _robust_outliers(values, key)
        picked = frame[rows].select("bot_id", "day", kind=_kind(m), big=pl.col(f"{m}_big"))
        found.append(picked.with_columns(metric=pl.lit(m), score=score)
                     .filter(pl.col("big")).drop("big"))
    return pl.concat(found).select("bot_id", "day", "metric", "kind", "score")


def _robust_outliers(values: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(values)
    padded = np.concatenate([np.full(WINDOW, np.nan), values])
    within = np.arange(n) - np.searchsorted(key, key - WINDOW, side="left")
    columns = np.arange(WINDOW)
    rows, scores = [], []
    for a in range(0, n, 100_000):
        at = np.arange(a, min(a + 100_000, n))
        win = np.lib.stride_tricks.sliding_window_view(padded[a: at[-1] + WINDOW], WINDOW)
        win = np.where(columns[None, :] < (WINDOW - within[at])[:, None], np.nan, win)
        k = np.count_nonzero(~np.isnan(win), axis=1)
        med = _median(np.sort(win, axis=1), k)
        dev = np.abs(win - med[:, None])
        mad = _median(np.sort(dev, axis=1), k)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_ad = np.nansum(dev, axis=1) / k
            diff = values[at] - med
            score = np.where(mad > 0, MAD_Z * diff / mad,
                             np.where(mean_ad > 0, diff / (MEAN_AD_Z * mean_ad),
                                      np.where(diff == 0, 0.0, np.sign(diff) * np.inf)))
            keep = (k >= MIN_DAYS) & (np.abs(score) > THRESHOLD)
        rows.append(at[keep])
        scores.append(score[keep])
    return np.concatenate(rows), np.concatenate(scores)


def _median(rows: np.ndarray, count: np.ndarray) -> np.ndarray:
    k = np.maximum(count, 1)
    lo = np.take_along_axis(rows, ((k - 1) // 2)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(rows, (k // 2)[:, None], axis=1)[:, 0]
    return np.where(count > 0, (lo + hi) / 2, np.nan)
