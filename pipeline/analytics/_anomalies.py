"""Anomalies: bot-days whose daily delta is far outside the bot's own trailing behaviour."""

from __future__ import annotations

from datetime import date
from functools import partial

import numpy as np
import polars as pl
from numpy.lib.stride_tricks import sliding_window_view

from ._jobs import bot_day_key, with_days_ago

ANOMALY_METRICS = ("guilds", "users", "commands_executed")


# Iglewicz & Hoaglin's modified z-score is 0.6745 (x - median) / MAD; when more than half the
# window is one value the MAD is 0 and the mean absolute deviation, scaled to match a normal
# sigma, stands in (as IBM SPSS does). Both 0 (a perfectly flat window): any move is infinite.
MAD_Z = 0.6745


MEAN_AD_Z = 1.253314


_SCORE_BLOCK = 200_000  # rows of trailing windows held at once (x window x 8 bytes)


def anomalies(
    daily: pl.LazyFrame, *, window: int, threshold: float, min_days: int,
    since: date | None = None,
) -> pl.LazyFrame:
    """Bot-days whose daily delta is far outside the bot's own trailing behaviour.

    Deltas per metric: guilds and users minus their value on the previous day, and the day's
    ``commands_executed``; all three only when the bot also has a record the day before (a
    delta across a gap would mix several days). The baseline is the deltas of the ``window``
    days before (the day itself excluded); with fewer than ``min_days`` of them there is no
    score. ``score`` is the robust z (see ``MAD_Z``); rows with ``|score| > threshold`` are kept.
    With ``since``, only days from then on are scored (earlier rows are baseline only).
    """
    sized = ["guilds", "users"]
    had_yesterday = pl.col("records_1d_ago").is_not_null()
    deltas = (
        with_days_ago(daily.select("bot_id", "day", *sized, "commands_executed", "records"),
                      [*sized, "records"], (1,))
        .select(
            "bot_id",
            "day",
            *[(pl.col(m) - pl.col(f"{m}_1d_ago")).cast(pl.Float64).alias(m) for m in sized],
            pl.when(had_yesterday).then(pl.col("commands_executed")).cast(pl.Float64)
            .alias("commands_executed"),
            _key=bot_day_key(),
        )
    )
    flag = partial(_flag_anomalies, window=window, threshold=threshold, min_days=min_days,
                   since=since)
    return deltas.map_batches(flag, schema=_ANOMALY_SCHEMA)


_ANOMALY_SCHEMA = pl.Schema({
    "bot_id": pl.String, "day": pl.Date, "metric": pl.String, "value": pl.Float64,
    "baseline_median": pl.Float64, "baseline_mad": pl.Float64, "baseline_days": pl.Int64,
    "score": pl.Float64,
})


def _flag_anomalies(deltas: pl.DataFrame, *, window: int, threshold: float,
                    min_days: int, since: date | None) -> pl.DataFrame:
    day = deltas["_key"].to_numpy()
    scored = None if since is None else np.flatnonzero((deltas["day"] >= since).to_numpy())
    found = []
    for metric in ANOMALY_METRICS:
        values = deltas[metric].to_numpy().astype(np.float64)
        hits = robust_outliers(values, day, window=window, min_days=min_days, threshold=threshold,
                               rows=scored)
        rows = pl.Series(hits.pop("row"))
        found.append(pl.DataFrame({
            "bot_id": deltas["bot_id"].gather(rows), "day": deltas["day"].gather(rows),
            "metric": [metric] * len(rows), "value": values[rows.to_numpy()],
            "baseline_median": hits["median"], "baseline_mad": hits["mad"],
            "baseline_days": hits["count"], "score": hits["score"],
        }, schema=_ANOMALY_SCHEMA))
    return pl.concat(found)


def robust_outliers(
    values: np.ndarray, day: np.ndarray, *, window: int, min_days: int, threshold: float,
    rows: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Rows whose value is more than ``threshold`` robust z away from its trailing baseline.

    The baseline of row i is the non-NaN values of the rows whose day is in
    ``[day[i] - window, day[i] - 1]``; with fewer than ``min_days`` of them there is no score.
    ``day`` is sorted, one row per day within a series, and different series lie more than
    ``window`` apart (``bot_day_key`` does that). So the baseline is always the last few of
    the ``window`` rows before i: a fixed sliding window with a prefix blanked out.

    ``rows`` (sorted indices) limits the scoring to those rows; all others still make
    baselines. Returns ``row`` (indices), ``median``, ``mad``, ``count`` and ``score`` of the
    hits.
    """
    n = len(values)
    hits: dict[str, list[np.ndarray]] = {k: [] for k in ("row", "median", "mad", "count", "score")}
    padded = np.concatenate([np.full(window, np.nan), values])
    # How many of the rows before i are within the window (days only decrease going back).
    within = np.arange(n) - np.searchsorted(day, day - window, side="left")
    columns = np.arange(window)  # column j of a window row is the value window - j rows back
    for a in range(0, n if rows is None else len(rows), _SCORE_BLOCK):
        if rows is None:
            at = np.arange(a, min(a + _SCORE_BLOCK, n))
            win = sliding_window_view(padded[a : at[-1] + window], window)
        else:  # row i's window is padded[i : i + window], as in the view above
            at = rows[a : a + _SCORE_BLOCK]
            win = padded[at[:, None] + columns[None, :]]
        win = np.where(columns[None, :] < (window - within[at])[:, None], np.nan, win)
        k = np.count_nonzero(~np.isnan(win), axis=1)
        med = _median_of_sorted(np.sort(win, axis=1), k)
        dev = np.abs(win - med[:, None])
        mad = _median_of_sorted(np.sort(dev, axis=1), k)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_ad = np.nansum(dev, axis=1) / k
            diff = values[at] - med
            score = np.where(
                mad > 0, MAD_Z * diff / mad,
                np.where(mean_ad > 0, diff / (MEAN_AD_Z * mean_ad),
                         np.where(diff == 0, 0.0, np.sign(diff) * np.inf)),
            )
            keep = (k >= max(min_days, 1)) & (np.abs(score) > threshold)  # NaN compares False
        hit = np.flatnonzero(keep)
        for name, column in (("row", at[hit]), ("median", med[hit]), ("mad", mad[hit]),
                             ("count", k[hit]), ("score", score[hit])):
            hits[name].append(column)
    empty = {"row": np.int64, "count": np.int64}
    return {name: np.concatenate(parts) if parts else np.empty(0, empty.get(name, np.float64))
            for name, parts in hits.items()}


def _median_of_sorted(rows: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Median of the first ``count`` entries of each sorted row (NaNs sort last); NaN if none."""
    k = np.maximum(count, 1)
    lo = np.take_along_axis(rows, ((k - 1) // 2)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(rows, (k // 2)[:, None], axis=1)[:, 0]
    return np.where(count > 0, (lo + hi) / 2, np.nan)
