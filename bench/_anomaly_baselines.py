"""The two baselines bench/anomalies.py runs beside the shipped detector, on ``bot_daily``:

- **plain z**: each day's change (guilds and users minus the day before's, commands run; only
  when the bot also reported the day before), against the mean and standard deviation of the
  changes of the 28 days before (at least 7): flagged when |z| > 3.5;
- **robust z**: botstats' detector before the events (0.2): the same changes against their
  median and MAD over the 28 days before (the mean absolute deviation when the MAD is 0; a
  flat window makes any move infinite), flagged when |0.6745 (x - median) / MAD| > 3.5.

Both give one row per flagged bot, day and metric, with its score.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.analytics.build._jobs import bot_day_key, with_days_ago

WINDOW = 28
MIN_DAYS = 7
THRESHOLD = 3.5
METRICS = ("guilds", "users", "commands_executed")
MAD_Z = 0.6745
MEAN_AD_Z = 1.253314


def deltas(daily: pl.DataFrame) -> pl.DataFrame:
    """Per bot and day: the day's change of each metric (null across a gap) and its key."""
    had_yesterday = pl.col("records_1d_ago").is_not_null()
    return (
        with_days_ago(daily.lazy().select("bot_id", "day", "guilds", "users",
                                          "commands_executed", "records"),
                      ["guilds", "users", "records"], (1,))
        .select(
            "bot_id", "day",
            *[(pl.col(m) - pl.col(f"{m}_1d_ago")).cast(pl.Float64).alias(m)
              for m in ("guilds", "users")],
            pl.when(had_yesterday).then(pl.col("commands_executed")).cast(pl.Float64)
            .alias("commands_executed"),
            _key=bot_day_key(),
        )
        .collect()
    )


def plain_z(daily: pl.DataFrame) -> pl.DataFrame:
    found = []
    frame = deltas(daily)
    for m in METRICS:
        x = pl.col(m)
        scored = frame.select(
            "bot_id", "day", metric=pl.lit(m),
            score=(x - x.rolling_mean_by("_key", f"{WINDOW}i", min_samples=MIN_DAYS,
                                         closed="left"))
            / x.rolling_std_by("_key", f"{WINDOW}i", min_samples=MIN_DAYS, closed="left"),
        )
        found.append(scored.filter(pl.col("score").abs() > THRESHOLD))
    return pl.concat(found)


def robust_z(daily: pl.DataFrame) -> pl.DataFrame:
    frame = deltas(daily)
    key = frame["_key"].to_numpy()
    found = []
    for m in METRICS:
        values = frame[m].to_numpy().astype(np.float64)
        rows, score = _robust_outliers(values, key)
        found.append(pl.DataFrame({
            "bot_id": frame["bot_id"].gather(rows), "day": frame["day"].gather(rows),
            "metric": [m] * len(rows), "score": score}))
    return pl.concat(found)


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
