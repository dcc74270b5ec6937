"""Trends: polars jobs over the archive, their parquet exports, and the ``trend_*`` views.

:func:`build_trends` is the one entry point the CLI and the scheduler call. Memory stays
bounded however large the archive grows: ``bot_stats`` is read through Arrow in slices of whole
bots (``CHUNK_ROWS``), each slice is reduced to one row per bot and UTC day at once, and the
per-bot jobs run on that slice; their rows go to month folders of scratch parquet
(:class:`~pipeline.exports.MonthSpill`), from which each export partition is written a month at
a time. Only bot_ranks (a month at a time) and directory_daily (streamed) look across bots;
movers keep each slice's top and rank the union.

Runs are incremental: :func:`plan_run` finds the first day the archive's changes since the
previous export touch, and only the days from the Monday before it are recomputed, from the raw
records of those days plus what :mod:`pipeline.trend_window` carries in from the export (see
docs/trends.md). A full build is the same computation over every day.

=================  ==========================================================================
bot_daily          per bot and day: last users/guilds/shards, mean and p95 load, commands run
bot_growth         per bot and day: 1/7/30-day change and percent, 7-day means, 30-day CDGR
bot_ranks          per bot and day: rank by guilds and users, rank change over 1 and 7 days
movers             per day: top gainers/losers over 7 and 30 days, absolute and percent
anomalies          bot-days whose daily delta has a robust z-score above the threshold
resource_health    per bot and week: p95 load and days above the health threshold
custom_daily       per bot, day and custom field: numeric stats, or the text value and changes
directory_daily    per day: totals, bots reporting, bots first seen, first reporting, removed
bot_forecast       per bot, metric and horizon: forecast and 80% interval (pipeline/forecast.py)
=================  ==========================================================================

Each job is a small function LazyFrame -> LazyFrame, testable on a ten-row frame. Days are UTC
calendar days of ``recorded_at``. Days without a record are never invented: an N-day change
compares with the bot's value on exactly day-N and is null when the bot has no record that day.

For notebooks: :func:`load_dataset` / :func:`scan_dataset` read an export back, and the views
``trend_<dataset>`` in the archive read the same files from SQL.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import string
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Final

import duckdb
import numpy as np
import polars as pl
from numpy.lib.stride_tricks import sliding_window_view

from . import archive, exports, forecast, store, trend_window
from .config import Settings, TrendSettings
from .errors import ExportError, QueryError, StoreError
from .exports import DatasetExport, MonthSpill
from .run_id import new_run_id
from .trend_window import FULL, Window


@dataclass(frozen=True)
class Dataset:
    name: str
    time_column: str  # partitions are months of this column
    order: tuple[str, ...]  # row order of the export (stable bytes, so reruns hash the same)
    about: str


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset("bot_daily", "day", ("bot_id", "day"),
                "per bot and UTC day: last users/guilds/shards, mean and p95 load, commands run"),
        Dataset("bot_growth", "day", ("bot_id", "day"),
                "per bot and day: 1/7/30-day change and percent, 7-day means, 30-day CDGR"),
        Dataset("bot_ranks", "day", ("bot_id", "day"),
                "per bot and day: rank by guilds and users, rank change over 1 and 7 days"),
        Dataset("movers", "day",
                ("day", "window_days", "metric", "measure", "direction", "rank"),
                "per day: top gainers and losers over 7 and 30 days, absolute and percent"),
        Dataset("anomalies", "day", ("day", "bot_id", "metric"),
                "bot-days whose daily delta is far outside the bot's trailing behaviour"),
        Dataset("resource_health", "week", ("bot_id", "week"),
                "per bot and ISO week: p95 cpu/memory load and days above the threshold"),
        Dataset("custom_daily", "day", ("bot_id", "name", "day", "kind"),
                "per bot, day and custom field: numeric stats, or text value and changes"),
        Dataset("directory_daily", "day", ("day",),
                "per day: total guilds/users, bots reporting, first seen, first reporting, removed"),
        # bot_forecast: computed by pipeline/forecast.py from each slice's bot_daily.
        Dataset("bot_forecast", "as_of", ("bot_id", "metric", "horizon_days"),
                "per bot, metric and horizon (7/30/90 days): forecast and 80% interval"),
    )
}

# Whole bots per slice read from the archive: about 70 bytes a row, so ~35 MB of raw stats
# in memory at a time whatever the archive size.
CHUNK_ROWS = 500_000
GROWTH_DAYS = (1, 7, 30)
RANK_DAYS = (1, 7)
MOVER_DAYS = (7, 30)
SIZE_METRICS = ("guilds", "users")
ANOMALY_METRICS = ("guilds", "users", "commands_executed")
# Iglewicz & Hoaglin's modified z-score is 0.6745 (x - median) / MAD; when more than half the
# window is one value the MAD is 0 and the mean absolute deviation, scaled to match a normal
# sigma, stands in (as IBM SPSS does). Both 0 (a perfectly flat window): any move is infinite.
MAD_Z = 0.6745
MEAN_AD_Z = 1.253314
_SCORE_BLOCK = 200_000  # rows of trailing windows held at once (x window x 8 bytes)
# Engines, chosen by measurement (bench/trends.py): the daily jobs binary-search and gather
# whole columns, which the in-memory engine does several times faster; the grouping of a raw
# slice's weeks and the movers' per-day top-k peak lower on the streaming engine.
STREAMING: Final = "streaming"
IN_MEMORY: Final = "in-memory"

_STATS_SQL = (
    "SELECT bot_id, stat_id, recorded_at, users, guilds, shards, cpu_load, memory_load, commands_executed "
    "FROM bot_stats"
)
_CUSTOM_SQL = "SELECT bot_id, stat_id, recorded_at, name, value_text, value_num FROM bot_stat_custom"
_BOTS_SQL = "SELECT bot_id, first_seen_at, removed_at FROM bots"


# --- the jobs ---------------------------------------------------------------------------------
def utc_day(column: str) -> pl.Expr:
    """The UTC calendar day of a timestamp column, whatever zone the connection handed over."""
    return pl.col(column).dt.convert_time_zone("UTC").dt.date()


def bot_daily(stats: pl.LazyFrame, carry: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """One row per bot and UTC day from raw ``bot_stats`` rows (any order, whole bots).

    ``commands_executed`` is the number run during the day: each record adds ``cur - prev`` over
    the bot's previous non-null counter value, or ``cur`` when the counter went down (it was
    reset and counted up from 0 again). A bot's first record adds nothing (what it ran before is
    unknown), so a day whose records add nothing is null, not 0. After a gap, the first record
    carries what ran during the gap. ``commands_counter`` is the counter's last non-null value
    up to the end of the day (carried over days without one): what the next day counts from.

    ``carry`` (bot_id, commands_counter) is each bot's counter before ``stats`` begin, when
    they start in the middle of its history. Records at the same instant are taken in
    ``stat_id`` order (when given), so any slice of the archive orders them alike.
    """
    cmd = pl.col("commands_executed")
    prev = pl.col("_prev")
    rows = stats.with_columns(_seq=pl.lit(1, pl.Int8))
    if carry is not None:
        carried = carry.select("bot_id", "commands_counter", _seq=pl.lit(0, pl.Int8))
        rows = pl.concat([carried.rename({"commands_counter": "commands_executed"}), rows],
                         how="diagonal_relaxed")
    # An integer bot code sorts faster than the string; the carried row comes first.
    bot_code = pl.col("bot_id").cast(pl.Categorical).to_physical().cast(pl.Int64)
    ties = ["stat_id"] if "stat_id" in stats.collect_schema() else []
    return (
        rows.with_columns(_bot=bot_code)
        .sort("_bot", "_seq", "recorded_at", *ties, maintain_order=True)
        .with_columns(
            day=utc_day("recorded_at"),
            _prev=cmd.forward_fill().shift(1).over("bot_id"),
            _counter=cmd.forward_fill().over("bot_id"),
        )
        .with_columns(
            _delta=pl.when(prev.is_null()).then(None).when(cmd >= prev).then(cmd - prev).otherwise(cmd),
            _reset=cmd < prev,
        )
        .filter(pl.col("_seq") == 1)
        .group_by("bot_id", "day")
        .agg(
            pl.col("users").last(ignore_nulls=True),
            pl.col("guilds").last(ignore_nulls=True),
            pl.col("shards").last(ignore_nulls=True),
            cpu_load_mean=pl.col("cpu_load").mean(),
            cpu_load_p95=pl.col("cpu_load").quantile(0.95, "linear"),
            memory_load_mean=pl.col("memory_load").mean(),
            memory_load_p95=pl.col("memory_load").quantile(0.95, "linear"),
            _cmd_sum=pl.col("_delta").sum(),
            _cmd_n=pl.col("_delta").count(),
            commands_resets=pl.col("_reset").sum().cast(pl.Int64),
            records=pl.len().cast(pl.Int64),
            commands_counter=pl.col("_counter").last(),
        )
        .with_columns(commands_executed=pl.when(pl.col("_cmd_n") > 0).then(pl.col("_cmd_sum")))
        .select(
            "bot_id", "day", "users", "guilds", "shards",
            "cpu_load_mean", "cpu_load_p95", "memory_load_mean", "memory_load_p95",
            "commands_executed", "commands_resets", "records", "commands_counter",
        )
    )


def bot_day_key() -> pl.Expr:
    """An Int64 ordered like (bot_id, day) in a frame sorted by them: bot ordinal << 32 | day.

    Day numbers of one bot differ by their distance in days; keys of different bots differ by
    more than 2**31, so "N days back" is a plain ``key - N`` lookup.
    """
    new_bot = (pl.col("bot_id") != pl.col("bot_id").shift(1)).fill_null(True)
    day = pl.col("day").cast(pl.Int32).cast(pl.Int64)
    return new_bot.cum_sum().cast(pl.Int64) * (1 << 32) + day


def with_days_ago(daily: pl.LazyFrame, columns: list[str], days: tuple[int, ...]) -> pl.LazyFrame:
    """Add ``<column>_<N>d_ago``: the bot's value on exactly day-N, for each N in ``days``.

    ``daily`` has one row per (bot_id, day). A bot with no record on day-N gets null: gaps are
    not filled from neighbouring days. The result is sorted by (bot_id, day).
    """
    keyed = daily.sort("bot_id", "day").with_columns(_key=bot_day_key())
    key = pl.col("_key")
    looked_up: list[pl.Expr] = []
    for n in days:
        # A binary search on the sorted key instead of a self-join: same answer, no hash table.
        at = key.search_sorted(key - n).clip(upper_bound=pl.len() - 1)
        found = key.gather(at) == key - n
        looked_up += [pl.when(found).then(pl.col(c).gather(at)).alias(f"{c}_{n}d_ago")
                      for c in columns]
    return keyed.with_columns(looked_up).drop("_key")


def bot_growth(daily: pl.LazyFrame) -> pl.LazyFrame:
    """Per bot and day: change and percent change of guilds and users over 1, 7 and 30 days,
    7-day rolling means and the 30-day compound daily growth rate.

    Changes compare with exactly day-N (null without a record then); percentages are of the
    day-N value (null when it is 0). ``*_mean_7d`` averages the days with a record among the
    seven ending on ``day``. ``*_cdgr_30d`` is ``((v / v_30d_ago) ** (1/30) - 1) * 100``, percent
    per day, null unless both values exist and the old one is above 0.
    """
    base = daily.select("bot_id", "day", "guilds", "users")
    joined = with_days_ago(base, list(SIZE_METRICS), GROWTH_DAYS)
    columns: list[pl.Expr] = []
    for m in SIZE_METRICS:
        value = pl.col(m)
        for n in GROWTH_DAYS:
            ago = pl.col(f"{m}_{n}d_ago")
            columns.append((value - ago).alias(f"{m}_change_{n}d"))
        for n in GROWTH_DAYS:
            ago = pl.col(f"{m}_{n}d_ago")
            columns.append(pl.when(ago != 0).then((value - ago) / ago * 100).alias(f"{m}_pct_{n}d"))
        columns.append(
            value.cast(pl.Float64).rolling_mean_by("day", window_size="7d").over("bot_id")
            .alias(f"{m}_mean_7d")
        )
        ago30 = pl.col(f"{m}_30d_ago")
        columns.append(
            pl.when((ago30 > 0) & (value >= 0))
            .then(((value / ago30) ** (1 / 30) - 1) * 100)
            .alias(f"{m}_cdgr_30d")
        )
    return joined.select("bot_id", "day", "guilds", "users", *columns)


def bot_ranks(daily: pl.LazyFrame) -> pl.LazyFrame:
    """Per bot and day: rank by guilds and by users among the bots reporting that day.

    Rank 1 is the largest; ties share the best rank ("min" ranking). ``*_rank_change_Nd`` is
    the rank on exactly day-N minus today's rank, so climbing is positive; null when the bot
    had no rank that day.
    """
    ranked = daily.select("bot_id", "day", "guilds", "users").with_columns(
        pl.col(m).rank("min", descending=True).over("day").cast(pl.Int64).alias(f"{m}_rank")
        for m in SIZE_METRICS
    )
    rank_cols = [f"{m}_rank" for m in SIZE_METRICS]
    joined = with_days_ago(ranked, rank_cols, RANK_DAYS)
    changes = [
        (pl.col(f"{m}_rank_{n}d_ago") - pl.col(f"{m}_rank")).alias(f"{m}_rank_change_{n}d")
        for m in SIZE_METRICS
        for n in RANK_DAYS
    ]
    return joined.select("bot_id", "day", "guilds", "users", *rank_cols, *changes)


def movers(growth: pl.LazyFrame, *, min_guilds: int, top: int) -> pl.LazyFrame:
    """Per day, window (7, 30), metric (guilds, users), measure (abs, pct) and direction: the
    ``top`` bots by change, ranked from 1.

    Only bots with at least ``min_guilds`` guilds on the window's first day take part, so a
    bot going from 1 to 3 guilds does not top the percent list. Gainers grew (change > 0),
    losers shrank (change < 0); ties go to the smaller bot_id.
    """
    groups = ["day", "window_days", "metric", "measure", "direction"]
    tops = []
    for n in MOVER_DAYS:
        start_guilds = pl.col("guilds") - pl.col(f"guilds_change_{n}d")
        in_window = growth.filter(pl.col(f"guilds_change_{n}d").is_not_null()
                                  & (start_guilds >= min_guilds))
        for m in SIZE_METRICS:
            for measure, value in (("abs", pl.col(f"{m}_change_{n}d").cast(pl.Float64)),
                                   ("pct", pl.col(f"{m}_pct_{n}d"))):
                for direction, sign in (("gainer", 1.0), ("loser", -1.0)):
                    # A partial top-k per day on two narrow columns, instead of sorting every
                    # bot every day; bot_id breaks ties so exactly `top` survive.
                    tops.append(
                        in_window.select("day", "bot_id", _score=value * sign)
                        .filter(pl.col("_score") > 0)
                        .group_by("day")
                        .agg(pl.col("bot_id", "_score").top_k_by(["_score", "bot_id"], k=top,
                                                                 reverse=[False, True]))
                        .explode("bot_id", "_score")
                        .with_columns(window_days=pl.lit(n, pl.Int64), metric=pl.lit(m),
                                      measure=pl.lit(measure), direction=pl.lit(direction))
                    )

    def pick(template: str) -> pl.Expr:
        """The column ``template`` names for each row's window and metric."""
        expr = pl.lit(None)
        for n in MOVER_DAYS:
            for m in SIZE_METRICS:
                expr = pl.when((pl.col("window_days") == n) & (pl.col("metric") == m)).then(
                    pl.col(template.format(n=n, m=m))).otherwise(expr)
        return expr

    change = pick("{m}_change_{n}d")
    end_value = pick("{m}")
    candidates = pl.concat(tops).join(growth, on=["bot_id", "day"], how="left").select(
        *groups, "bot_id",
        (end_value - change).alias("start_value"), end_value.alias("end_value"),
        change.alias("change"), pick("{m}_pct_{n}d").alias("pct_change"),
    )
    return rank_movers(candidates, top=top)


def rank_movers(candidates: pl.LazyFrame, *, top: int) -> pl.LazyFrame:
    """Rank mover rows within each list and keep the ``top``: the last step of :func:`movers`,
    and how the movers of several slices of bots merge (the top of a union of tops)."""
    groups = ["day", "window_days", "metric", "measure", "direction"]
    value = pl.when(pl.col("measure") == "abs").then(pl.col("change").cast(pl.Float64))
    sign = pl.when(pl.col("direction") == "gainer").then(1.0).otherwise(-1.0)
    return (
        candidates.with_columns(_score=value.otherwise(pl.col("pct_change")) * sign)
        .sort([*groups, "_score", "bot_id"], descending=[False] * len(groups) + [True, False])
        .with_columns(rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(groups))
        .filter(pl.col("rank") <= top)
        .select(*groups, "rank", "bot_id", "start_value", "end_value", "change", "pct_change")
    )


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


def resource_health(stats: pl.LazyFrame, daily: pl.LazyFrame, *, threshold: float) -> pl.LazyFrame:
    """Per bot and ISO week (``week`` is its Monday): p95 cpu and memory load over the week's
    records, days with a record, and days whose p95 load was above ``threshold`` percent
    (``cpu_hot_days``, ``memory_hot_days``, ``hot_days`` for either). Bot-weeks without any
    load figure are left out."""
    week = pl.col("day").dt.truncate("1w")
    load = (
        stats.with_columns(week=utc_day("recorded_at").dt.truncate("1w"))
        .group_by("bot_id", "week")
        .agg(
            cpu_load_p95=pl.col("cpu_load").quantile(0.95, "linear"),
            memory_load_p95=pl.col("memory_load").quantile(0.95, "linear"),
        )
    )
    cpu_hot = pl.col("cpu_load_p95") > threshold
    memory_hot = pl.col("memory_load_p95") > threshold
    days = (
        daily.with_columns(week=week)
        .group_by("bot_id", "week")
        .agg(
            days=pl.len().cast(pl.Int64),
            cpu_hot_days=cpu_hot.sum().cast(pl.Int64),
            memory_hot_days=memory_hot.sum().cast(pl.Int64),
            hot_days=(cpu_hot | memory_hot).sum().cast(pl.Int64),
        )
    )
    return (
        load.join(days, on=["bot_id", "week"], how="inner")
        .filter(pl.col("cpu_load_p95").is_not_null() | pl.col("memory_load_p95").is_not_null())
        .select("bot_id", "week", "cpu_load_p95", "memory_load_p95", "days",
                "cpu_hot_days", "memory_hot_days", "hot_days")
    )


def custom_daily(custom: pl.LazyFrame, carry: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """Per bot, UTC day and custom field name.

    A record whose value is numeric (``value_num``, booleans as 0/1) feeds a ``numeric`` row:
    ``records``, ``value_last``, ``value_min``, ``value_max``, ``value_mean``. Any other value
    feeds a ``text`` row: ``value_text`` (last of the day), ``changed_at`` (when that value first
    appeared after a different one, possibly days earlier) and ``changes`` (how many times the
    value changed that day; the field's first value counts as one). Null values are skipped.

    ``carry`` (bot_id, name, value_text, changed_at) is each text field's value before
    ``custom`` begins, when it starts in the middle of the history. Records at the same
    instant are taken in ``stat_id`` order (when given).
    """
    rows = custom.with_columns(_seq=pl.lit(1, pl.Int8))
    if carry is not None:
        rows = pl.concat([carry.select("bot_id", "name", "value_text", "changed_at",
                                       _seq=pl.lit(0, pl.Int8)), rows], how="diagonal_relaxed")
    ties = ["stat_id"] if "stat_id" in custom.collect_schema() else []
    ordered = rows.with_columns(day=utc_day("recorded_at")).sort(
        "bot_id", "name", "_seq", "recorded_at", *ties, maintain_order=True
    )
    keys = ["bot_id", "day", "name"]
    numeric = (
        ordered.filter(pl.col("value_num").is_not_null())
        .group_by(keys)
        .agg(
            records=pl.len().cast(pl.Int64),
            value_last=pl.col("value_num").last(),
            value_min=pl.col("value_num").min(),
            value_max=pl.col("value_num").max(),
            value_mean=pl.col("value_num").mean(),
        )
        .with_columns(kind=pl.lit("numeric"))
    )
    text = pl.col("value_text")
    changed = (text != text.shift(1)).fill_null(True).over("bot_id", "name")
    since = pl.when("_changed").then(pl.col("recorded_at"))
    if carry is not None:
        since = pl.when(pl.col("_seq") == 0).then(pl.col("changed_at")).otherwise(since)
    texts = (
        ordered.filter(pl.col("value_num").is_null() & text.is_not_null())
        .with_columns(_changed=changed)
        .with_columns(_since=since.forward_fill().over("bot_id", "name"))
        .filter(pl.col("_seq") == 1)
        .group_by(keys)
        .agg(
            records=pl.len().cast(pl.Int64),
            value_text=text.last(),
            changed_at=pl.col("_since").last(),
            changes=pl.col("_changed").sum().cast(pl.Int64),
        )
        .with_columns(kind=pl.lit("text"))
    )
    return pl.concat([numeric, texts], how="diagonal_relaxed").select(
        "bot_id", "day", "name", "kind", "records", "value_last", "value_min", "value_max",
        "value_mean", "value_text", "changed_at", "changes",
    )


def directory_daily(daily: pl.LazyFrame, bots: pl.LazyFrame,
                    first_days: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """Per day: ``bots_reporting`` (bots with a record), ``guilds`` and ``users`` summed over
    them (null when none reported), ``bots_first_seen`` and ``bots_removed`` (from the ``bots``
    table: when the listing first showed a bot / stopped showing it) and
    ``bots_first_reporting`` (bots whose first stat record is that day). ``first_days``
    (bot_id, day) gives each bot's first day when ``daily`` is not its whole history."""
    reporting = daily.group_by("day").agg(
        bots_reporting=pl.len().cast(pl.Int64), guilds=pl.col("guilds").sum(),
        users=pl.col("users").sum(),
    )
    if first_days is None:
        first_days = daily.group_by("bot_id").agg(pl.col("day").min())
    first_reporting = first_days.group_by("day").agg(
        bots_first_reporting=pl.len().cast(pl.Int64))
    parts = [reporting, first_reporting, *listing_days(bots)]
    days = pl.concat([p.select("day") for p in parts]).unique()
    for part in parts:
        days = days.join(part, on="day", how="left")
    counts = ["bots_reporting", "bots_first_seen", "bots_first_reporting", "bots_removed"]
    return days.with_columns(pl.col(counts).fill_null(0)).select(
        "day", "bots_reporting", "guilds", "users", *counts[1:]
    )


def listing_days(bots: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Per day, from the ``bots`` table: (day, bots_first_seen) and (day, bots_removed)."""
    first_seen = bots.group_by(day=utc_day("first_seen_at")).agg(
        bots_first_seen=pl.len().cast(pl.Int64)
    )
    removed = (
        bots.filter(pl.col("removed_at").is_not_null())
        .group_by(day=utc_day("removed_at"))
        .agg(bots_removed=pl.len().cast(pl.Int64))
    )
    return first_seen, removed


# --- reading the archive ----------------------------------------------------------------------
def bot_slices(con: duckdb.DuckDBPyConnection, max_rows: int = CHUNK_ROWS,
               since: date | None = None) -> list[tuple[str | None, str | None]]:
    """Half-open bot_id ranges ``[lo, hi)`` (None = unbounded) of about ``max_rows`` stats each
    (recorded from UTC day ``since`` on, when given).

    Every per-bot job runs slice by slice: whole bots, so nothing crosses a slice boundary.
    """
    where = "" if since is None else f" WHERE recorded_at >= {store.literal(_day_start(since))}"
    counts = pl.from_arrow(con.sql(
        f"SELECT bot_id, count(*) AS n FROM bot_stats{where} GROUP BY bot_id ORDER BY bot_id"
    ).to_arrow_table())
    assert isinstance(counts, pl.DataFrame)
    if counts.height == 0:
        return [(None, None)]
    starts = (
        counts.with_columns(_slice=(pl.col("n").cum_sum() - pl.col("n")) // max_rows)
        .group_by("_slice", maintain_order=True).agg(pl.col("bot_id").first())
        ["bot_id"].to_list()
    )
    bounds: list[str | None] = [None, *starts[1:], None]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def read_slice(con: duckdb.DuckDBPyConnection, sql: str, lo: str | None, hi: str | None,
               since: date | None = None) -> pl.DataFrame:
    """Rows of ``sql`` (a SELECT over a table with bot_id) for bots in ``[lo, hi)``, via Arrow;
    only those recorded from UTC day ``since`` on, when given."""
    conditions: list[str] = []
    if lo is not None:
        conditions.append(f"bot_id >= {store.literal(lo)}")
    if hi is not None:
        conditions.append(f"bot_id < {store.literal(hi)}")
    if since is not None:
        conditions.append(f"recorded_at >= {store.literal(_day_start(since))}")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    frame = pl.from_arrow(con.sql(sql + where).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def with_lookback(daily: pl.DataFrame, lookback: pl.LazyFrame | None) -> pl.LazyFrame:
    """The recomputed daily rows after the exported ones the windows look back over."""
    if lookback is None:
        return daily.lazy()
    return pl.concat([lookback.select(daily.columns).cast(daily.schema), daily.lazy()])


def compute_slices(con: duckdb.DuckDBPyConnection, t: TrendSettings, spill: MonthSpill,
                   max_rows: int = CHUNK_ROWS, window: Window = FULL) -> pl.DataFrame:
    """Run the per-bot jobs slice by slice, adding their rows to ``spill``; return the movers.

    Each slice's movers are its own top; the top of their union is the top of all bots, so the
    movers merge as they come and stay small. With a ``window``, only its days are computed.
    """
    def keep(name: str, frame: pl.DataFrame) -> None:
        # Slices come in bot_id order, so a bot-major month is in export order as it is read.
        spill.add(name, in_order(frame, DATASETS[name].order), DATASETS[name].time_column)

    top: pl.DataFrame | None = None
    start = window.start
    for lo, hi in bot_slices(con, max_rows, since=start):
        stats = read_slice(con, _STATS_SQL, lo, hi, since=start).lazy()
        daily = bot_daily(stats, window.carried_counters(lo, hi)).collect(engine=IN_MEMORY)
        keep("bot_daily", daily)
        health = resource_health(stats, daily.lazy(), threshold=t.health_threshold)
        keep("resource_health", health.collect(engine=STREAMING))
        del stats
        history = with_lookback(daily, window.lookback_of(lo, hi)).collect(engine=IN_MEMORY)
        growth = window.since(bot_growth(history.lazy()), "day").collect(engine=IN_MEMORY)
        keep("bot_growth", growth)
        found = movers(growth.lazy(), min_guilds=t.movers_min_guilds, top=t.movers_top)
        top = found.collect(engine=STREAMING) if top is None else rank_movers(
            pl.concat([top, found.collect(engine=STREAMING)]).lazy(), top=t.movers_top
        ).collect(engine=IN_MEMORY)
        del growth
        odd = anomalies(history.lazy(), window=t.anomaly_window, threshold=t.anomaly_threshold,
                        min_days=t.anomaly_min_days, since=start)
        keep("anomalies", window.since(odd, "day").collect(engine=IN_MEMORY))
        custom = custom_daily(read_slice(con, _CUSTOM_SQL, lo, hi, since=start).lazy(),
                              window.carried_texts(lo, hi))
        keep("custom_daily", custom.collect(engine=STREAMING))
        # bot_forecast: each recomputed bot's model over its last WINDOW_DAYS (the lookback
        # reaches that far); a bot with nothing new keeps its exported rows.
        ahead = forecast.bot_forecast(history.lazy())
        keep("bot_forecast", window.since(ahead, "as_of").collect(engine=IN_MEMORY))
    assert top is not None  # bot_slices always gives at least one slice
    return top


def ranks_by_month(spill: MonthSpill, window: Window = FULL) -> Iterator[tuple[str, pl.DataFrame]]:
    """bot_ranks one month at a time: that month's daily rows, plus the days before it that
    the rank changes look back to (from the window's lookback before its start)."""
    months = spill.months("bot_daily")
    if not months:
        yield exports.EMPTY_KEY, bot_ranks(spill.scan("bot_daily")).collect()
    reach = timedelta(days=max(RANK_DAYS))
    for i, key in enumerate(months):
        first = date(int(key[6:10]), int(key[11:13]), 1)
        daily = spill.scan("bot_daily", months[max(0, i - 1) : i + 1])
        if window.lookback is not None and window.start is not None and (
                first - reach < window.start):
            columns = daily.collect_schema().names()
            daily = pl.concat([window.lookback.select(columns), daily], how="vertical_relaxed")
        ranked = bot_ranks(daily.filter(pl.col("day") >= first - reach))
        yield key, window.since(ranked.filter(pl.col("day") >= first), "day").collect(engine=IN_MEMORY)


@dataclass(frozen=True)
class Computed:
    """Every dataset as (month key, rows) parts, and the state the next run starts from."""

    parts: dict[str, Iterator[tuple[str, pl.DataFrame]]]
    bot_state: pl.DataFrame
    text_state: pl.DataFrame


def dataset_parts(con: duckdb.DuckDBPyConnection, t: TrendSettings, spill: MonthSpill,
                  max_rows: int = CHUNK_ROWS, window: Window = FULL) -> Computed:
    """Every dataset as (month key, rows) parts in export order, computed through ``spill``:
    the days of ``window`` only (all of them by default).

    The per-bot jobs run now; the parts are read back (or, for bot_ranks, computed) a month at
    a time as they are consumed.
    """
    top = compute_slices(con, t, spill, max_rows, window)
    bot_state = trend_window.next_state(
        spill.scan("bot_daily"), trend_window.BOT_KEY, ("commands_counter",),
        window.bot_firsts, window.counters)
    text_state = trend_window.next_state(
        spill.scan("custom_daily").filter(pl.col("kind") == "text"), trend_window.TEXT_KEY,
        ("value_text", "changed_at"), window.text_firsts, window.texts)
    bots = read_slice(con, _BOTS_SQL, None, None).lazy()
    directory = directory_daily(spill.scan("bot_daily"), bots,
                                trend_window.first_days(bot_state))
    sources: dict[str, Iterator[tuple[str, pl.DataFrame]]] = {
        "bot_ranks": ranks_by_month(spill, window),
        "movers": exports.month_parts(top, "day"),
        "directory_daily": exports.month_parts(
            window.since(directory, "day").collect(engine=STREAMING), "day"),
    }
    for name in ("bot_daily", "bot_growth", "anomalies", "resource_health", "custom_daily",
                 "bot_forecast"):
        sources[name] = spill.parts(name)
    parts = {name: _ordered(sources[name], spec.order) for name, spec in DATASETS.items()}
    return Computed(parts, bot_state.cast(trend_window.BOT_STATE_SCHEMA),
                    text_state.cast(trend_window.TEXT_STATE_SCHEMA))


def _ordered(parts: Iterator[tuple[str, pl.DataFrame]],
             order: tuple[str, ...]) -> Iterator[tuple[str, pl.DataFrame]]:
    for key, part in parts:
        yield key, in_order(part, order)


def compute(con: duckdb.DuckDBPyConnection, t: TrendSettings,
            max_rows: int = CHUNK_ROWS) -> dict[str, pl.DataFrame]:
    """Every dataset as one DataFrame, for tests and notebooks (:func:`build_trends` streams
    them to the exports a month at a time instead)."""
    with tempfile.TemporaryDirectory(prefix="botstats-trends-") as scratch:
        parts = dataset_parts(con, t, MonthSpill(Path(scratch)), max_rows).parts
        return {name: pl.concat([frame for _, frame in months]) for name, months in parts.items()}


# --- the run ----------------------------------------------------------------------------------
# Part of the fingerprint of an export: a version of the datasets' columns and meaning. A run
# whose fingerprint differs from the previous export's rebuilds everything.
TRENDS_FORMAT = 2


def lookback_days(t: TrendSettings) -> int:
    """Days before an incremental run's start that its windows read (growth 30 days, the
    anomaly baseline and the day before it, ranks and movers, the forecast's window)."""
    return max(max(GROWTH_DAYS), max(MOVER_DAYS), max(RANK_DAYS), t.anomaly_window + 1,
               forecast.WINDOW_DAYS)


def fingerprint(t: TrendSettings) -> str:
    """What an export's rows depend on besides the archive: the settings and TRENDS_FORMAT."""
    text = json.dumps({"format": TRENDS_FORMAT, **dataclasses.asdict(t)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Plan:
    """What a run recomputes: a window (FULL = everything), or None when nothing is new."""

    window: Window | None
    watermark: str | None  # the archive's change watermark the export will be up to
    reason: str

    @property
    def mode(self) -> str:
        if self.window is None:
            return "unchanged"
        return "full" if self.window.start is None else "incremental"


def plan_run(con: duckdb.DuckDBPyConnection, t: TrendSettings, export_dir: Path,
             manifest: dict[str, Any], *, full: bool = False) -> Plan:
    """Full, incremental from a Monday, or nothing to do: decided from the archive's changes
    since the watermark in ``manifest`` (the previous export) and from the bots table."""
    def rebuild(reason: str) -> Plan:
        return Plan(FULL, archive.changes_since(con, None).watermark, reason)

    source = manifest.get("source") or {}
    if full:
        return rebuild("--full")
    if "watermark" not in source:
        return rebuild("no previous incremental export")
    if source.get("trends") != fingerprint(t):
        return rebuild("the [trends] settings or the datasets' columns changed")
    try:
        changes = archive.changes_since(con, source["watermark"])
    except (TypeError, ValueError) as exc:
        return rebuild(f"the export's watermark is unreadable ({exc})")
    missing = [p for d in manifest.get("datasets", {}).values() for p in d.get("partitions", [])
               if not (export_dir / p["path"]).is_file()]
    if set(manifest.get("datasets", {})) != set(DATASETS) or missing:
        return rebuild("files of the previous export are missing")
    bots = read_slice(con, _BOTS_SQL, None, None).lazy()
    first_seen, removed = listing_days(bots)
    listed = first_seen.join(removed, on="day", how="full", coalesce=True)
    exported = scan_export(export_dir, manifest, "directory_daily")
    days = [d for d in (changes.first_day, trend_window.directory_change(listed, exported))
            if d is not None]
    if not days:
        return Plan(None, changes.watermark, "nothing new since the last export")
    start = trend_window.week_start(min(days))
    try:
        window = trend_window.open_window(export_dir, manifest, start, lookback_days(t))
    except trend_window.WindowUnavailable as exc:
        return rebuild(f"the previous export cannot be continued: {exc}")
    return Plan(window, changes.watermark, "changes since the last export")


def scan_export(export_dir: Path, manifest: dict[str, Any], name: str) -> pl.LazyFrame:
    """Every partition of dataset ``name`` as ``manifest`` lists them."""
    files = [export_dir / p["path"] for p in manifest["datasets"][name]["partitions"]]
    return pl.scan_parquet(files, hive_partitioning=False)


@dataclass(frozen=True)
class TrendsReport:
    """What :func:`build_trends` did: per dataset rows and partitions written/unchanged."""

    run_id: str
    export_dir: Path
    archive: Path
    datasets: tuple[DatasetExport, ...]
    views: tuple[str, ...]
    seconds: float
    mode: str = "full"  # full | incremental | unchanged (nothing new: nothing computed)
    since: date | None = None  # an incremental run's first recomputed day
    reason: str = ""

    @property
    def written(self) -> int:
        return sum(len(d.written) for d in self.datasets)

    @property
    def unchanged(self) -> int:
        return sum(len(d.unchanged) for d in self.datasets)

    def summary(self) -> str:
        how = f"incremental from {self.since}" if self.mode == "incremental" else self.mode
        lines = [
            f"trends {self.run_id}: {how} ({self.reason}); {len(self.datasets)} datasets in "
            f"{self.seconds:.1f} s; partitions {self.written} written, {self.unchanged} unchanged",
            f"{'dataset':<16} {'rows':>10} {'written':>8} {'unchanged':>10} {'removed':>8}  days",
        ]
        for d in self.datasets:
            span = f"{d.date_min}..{d.date_max}" if d.date_min else "-"
            lines.append(f"{d.name:<16} {d.rows:>10} {len(d.written):>8} "
                         f"{len(d.unchanged):>10} {len(d.removed):>8}  {span}")
        lines.append(f"exports: {self.export_dir}")
        lines.append(f"views:   {', '.join(self.views)} (in {self.archive})")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "export_dir": str(self.export_dir),
            "archive": str(self.archive), "seconds": round(self.seconds, 3),
            "mode": self.mode, "since": self.since.isoformat() if self.since else None,
            "reason": self.reason,
            "views": list(self.views),
            "datasets": [
                {"name": d.name, "rows": d.rows, "partitions": d.partitions,
                 "written": list(d.written), "unchanged": list(d.unchanged),
                 "removed": list(d.removed), "date_min": d.date_min, "date_max": d.date_max}
                for d in self.datasets
            ],
        }


def build_trends(settings: Settings, *, run_id: str | None = None,
                 full: bool = False) -> TrendsReport:
    """Compute the datasets from the archive, export them, and (re)create the trend_* views.

    Incremental unless ``full``: only the days the archive's changes since the previous
    export touch are recomputed (from the Monday on or before the first), and only the month
    partitions from there are rewritten; a run with nothing new computes and writes nothing.
    The previous export's settings differing, or its files missing, make a full rebuild.

    Runs in the archive's writer connection, which also (re)creates the views. Callers hold the
    run lock around it, as for a harvest.
    """
    started = time.monotonic()
    if not store.exists(settings):
        # The writer would create an empty archive; trends of nothing help nobody.
        raise StoreError(
            f"there is no archive at {settings.db_path} yet. Run `botstats harvest` (or "
            f"`botstats demo`) first, or point --db at an existing archive."
        )
    written_at = store.now_utc()
    run_id = run_id or new_run_id(written_at)
    export_dir = settings.export_dir.resolve()
    results: list[DatasetExport] = []
    with store.writer(settings) as con:
        with exports.export_batch(export_dir, run_id=run_id, written_at=written_at,
                                  compression=settings.exports.compression) as batch:
            try:
                plan = plan_run(con, settings.trends, export_dir, batch.previous, full=full)
                batch.source = {"trends": fingerprint(settings.trends),
                                "watermark": plan.watermark}
                if plan.window is None:
                    results = [batch.keep(name) for name in DATASETS]
                else:
                    results = _stage_window(con, settings.trends, batch, plan.window)
            except duckdb.Error as exc:
                raise StoreError(f"cannot read the archive for trends: {exc}") from exc
            except pl.exceptions.PolarsError as exc:
                # polars appends the whole query plan; the first line is the message.
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise ExportError(f"a trend job failed: {first}") from exc
            except OSError as exc:
                raise ExportError(
                    f"cannot write scratch files under {export_dir}: {exc.strerror or exc}. "
                    f"Check free space and permissions of [exports].dir (or --out)."
                ) from exc
        views = create_views(con, export_dir)
    since = plan.window.start if plan.window is not None else None
    return TrendsReport(run_id, export_dir, settings.db_path, tuple(results), tuple(views),
                        time.monotonic() - started, plan.mode, since, plan.reason)


def _stage_window(con: duckdb.DuckDBPyConnection, t: TrendSettings, batch: exports.ExportBatch,
                  window: Window) -> list[DatasetExport]:
    """Compute the window's days and stage them: months before its start stay as exported;
    its start's month is the exported rows before the start plus the recomputed ones."""
    computed = dataset_parts(con, t, batch.spill(), window=window)
    results = []
    for name, spec in DATASETS.items():
        parts = computed.parts[name]
        key = None
        if window.start is not None:
            key = trend_window.month_key(window.start)
            old = batch.previous_file(name, key)
            before = None if old is None else pl.read_parquet(old).filter(
                pl.col(spec.time_column) < window.start)
            parts = _ordered(trend_window.with_rows_before(parts, before, key), spec.order)
        results.append(batch.stage(name, parts, time_column=spec.time_column, keep_before=key))
    batch.stage_file(trend_window.BOT_STATE, computed.bot_state)
    batch.stage_file(trend_window.TEXT_STATE, computed.text_state)
    return results


def in_order(frame: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
    """``frame`` sorted by ``columns``; a linear check first, since most jobs already are."""
    ahead = pl.lit(False)  # some earlier column already increased
    tied = pl.lit(True)  # every column so far equals the previous row's
    for c in columns:
        col, prev = pl.col(c), pl.col(c).shift(1)
        ahead = ahead | (tied & (col > prev))
        tied = tied & (col == prev)
    ok = (ahead | tied).fill_null(True).all()  # the first row has no previous one
    nulls = pl.any_horizontal(pl.col(columns).null_count() > 0)
    sorted_, has_nulls = frame.select(ok, nulls).row(0)
    return frame if sorted_ and not has_nulls else frame.sort(columns, maintain_order=True)


def create_views(con: duckdb.DuckDBPyConnection, export_dir: Path) -> list[str]:
    """Run every ``sql/views/*.sql`` with ``${export_dir}`` set to the absolute export path."""
    literal = export_dir.resolve().as_posix().replace("'", "''")
    names = []
    for file in sorted((store.sql_dir() / "views").glob("*.sql")):
        sql = string.Template(file.read_text(encoding="utf-8")).substitute(export_dir=literal)
        try:
            con.execute(sql)
        except duckdb.Error as exc:
            raise ExportError(f"cannot create the views of {file}: {exc}") from exc
        names.append(file.stem)
    return names


# --- reading results back ---------------------------------------------------------------------
def _check_dataset(name: str) -> Dataset:
    if name not in DATASETS:
        close = difflib.get_close_matches(name, list(DATASETS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ExportError(f"unknown dataset {name!r}.{hint} Datasets: {', '.join(DATASETS)}.")
    return DATASETS[name]


def scan_dataset(settings: Settings, name: str) -> pl.LazyFrame:
    """The last export of one dataset, lazily (e.g. ``scan_dataset(s, "bot_growth")``)."""
    _check_dataset(name)
    files = exports.dataset_files(settings.export_dir.resolve(), name)
    return pl.scan_parquet(files, hive_partitioning=False)


def load_dataset(settings: Settings, name: str) -> pl.DataFrame:
    """The last export of one dataset as a DataFrame, for notebooks."""
    return scan_dataset(settings, name).collect()


__all__ = [
    "DATASETS",
    "Dataset",
    "QueryError",
    "TrendsReport",
    "anomalies",
    "bot_daily",
    "bot_growth",
    "bot_ranks",
    "build_trends",
    "in_order",
    "compute",
    "compute_slices",
    "dataset_parts",
    "create_views",
    "custom_daily",
    "directory_daily",
    "load_dataset",
    "movers",
    "rank_movers",
    "ranks_by_month",
    "resource_health",
    "scan_dataset",
    "robust_outliers",
    "with_days_ago",
]
