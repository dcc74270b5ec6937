"""Trends: polars jobs over the archive, their parquet exports, and the ``trend_*`` views.

:func:`build_trends` is the one entry point the CLI and the scheduler call. Memory stays
bounded however large the archive grows: ``bot_stats`` is read through Arrow in slices of whole
bots (``CHUNK_ROWS``), each slice is reduced to one row per bot and UTC day at once, and the
per-bot jobs run on that slice; their rows go to month folders of scratch parquet
(:class:`~pipeline.exports.MonthSpill`), from which each export partition is written a month at
a time. Only bot_ranks (a month at a time) and directory_daily (streamed) look across bots;
movers keep each slice's top and rank the union.

=================  ==========================================================================
bot_daily          per bot and day: last users/guilds/shards, mean and p95 load, commands run
bot_growth         per bot and day: 1/7/30-day change and percent, 7-day means, 30-day CDGR
bot_ranks          per bot and day: rank by guilds and users, rank change over 1 and 7 days
movers             per day: top gainers/losers over 7 and 30 days, absolute and percent
anomalies          bot-days whose daily delta has a robust z-score above the threshold
resource_health    per bot and week: p95 load and days above the health threshold
custom_daily       per bot, day and custom field: numeric stats, or the text value and changes
directory_daily    per day: totals, bots reporting, bots first seen, first reporting, removed
=================  ==========================================================================

Each job is a small function LazyFrame -> LazyFrame, testable on a ten-row frame. Days are UTC
calendar days of ``recorded_at``. Days without a record are never invented: an N-day change
compares with the bot's value on exactly day-N and is null when the bot has no record that day.

For notebooks: :func:`load_dataset` / :func:`scan_dataset` read an export back, and the views
``trend_<dataset>`` in the archive read the same files from SQL.
"""

from __future__ import annotations

import difflib
import secrets
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

from . import exports, store
from .config import Settings, TrendSettings
from .errors import ExportError, QueryError, StoreError
from .exports import DatasetExport, MonthSpill


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
    "SELECT bot_id, recorded_at, users, guilds, shards, cpu_load, memory_load, commands_executed "
    "FROM bot_stats"
)
_CUSTOM_SQL = "SELECT bot_id, recorded_at, name, value_text, value_num FROM bot_stat_custom"
_BOTS_SQL = "SELECT bot_id, first_seen_at, removed_at FROM bots"


# --- the jobs ---------------------------------------------------------------------------------
def utc_day(column: str) -> pl.Expr:
    """The UTC calendar day of a timestamp column, whatever zone the connection handed over."""
    return pl.col(column).dt.convert_time_zone("UTC").dt.date()


def bot_daily(stats: pl.LazyFrame) -> pl.LazyFrame:
    """One row per bot and UTC day from raw ``bot_stats`` rows (any order, whole bots).

    ``commands_executed`` is the number run during the day: each record adds ``cur - prev`` over
    the bot's previous non-null counter value, or ``cur`` when the counter went down (it was
    reset and counted up from 0 again). A bot's first record adds nothing (what it ran before is
    unknown), so a day whose records add nothing is null, not 0. After a gap, the first record
    carries what ran during the gap.
    """
    cmd = pl.col("commands_executed")
    prev = pl.col("_prev")
    # One integer sort key (bot code, then second) sorts about twice as fast as (string, time);
    # records of one bot within the same second keep their archive order.
    bot_code = pl.col("bot_id").cast(pl.Categorical).to_physical().cast(pl.Int64)
    order = bot_code * (1 << 34) + pl.col("recorded_at").dt.epoch("s")
    return (
        stats.with_columns(_order=order)
        .sort("_order", maintain_order=True)
        .with_columns(
            day=utc_day("recorded_at"),
            _prev=cmd.forward_fill().shift(1).over("bot_id"),
        )
        .with_columns(
            _delta=pl.when(prev.is_null()).then(None).when(cmd >= prev).then(cmd - prev).otherwise(cmd),
            _reset=cmd < prev,
        )
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
        )
        .with_columns(commands_executed=pl.when(pl.col("_cmd_n") > 0).then(pl.col("_cmd_sum")))
        .select(
            "bot_id", "day", "users", "guilds", "shards",
            "cpu_load_mean", "cpu_load_p95", "memory_load_mean", "memory_load_p95",
            "commands_executed", "commands_resets", "records",
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
    daily: pl.LazyFrame, *, window: int, threshold: float, min_days: int
) -> pl.LazyFrame:
    """Bot-days whose daily delta is far outside the bot's own trailing behaviour.

    Deltas per metric: guilds and users minus their value on the previous day, and the day's
    ``commands_executed``; all three only when the bot also has a record the day before (a
    delta across a gap would mix several days). The baseline is the deltas of the ``window``
    days before (the day itself excluded); with fewer than ``min_days`` of them there is no
    score. ``score`` is the robust z (see ``MAD_Z``); rows with ``|score| > threshold`` are kept.
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
    flag = partial(_flag_anomalies, window=window, threshold=threshold, min_days=min_days)
    return deltas.map_batches(flag, schema=_ANOMALY_SCHEMA)


_ANOMALY_SCHEMA = pl.Schema({
    "bot_id": pl.String, "day": pl.Date, "metric": pl.String, "value": pl.Float64,
    "baseline_median": pl.Float64, "baseline_mad": pl.Float64, "baseline_days": pl.Int64,
    "score": pl.Float64,
})


def _flag_anomalies(deltas: pl.DataFrame, *, window: int, threshold: float,
                    min_days: int) -> pl.DataFrame:
    day = deltas["_key"].to_numpy()
    found = []
    for metric in ANOMALY_METRICS:
        values = deltas[metric].to_numpy().astype(np.float64)
        hits = robust_outliers(values, day, window=window, min_days=min_days, threshold=threshold)
        rows = pl.Series(hits.pop("row"))
        found.append(pl.DataFrame({
            "bot_id": deltas["bot_id"].gather(rows), "day": deltas["day"].gather(rows),
            "metric": [metric] * len(rows), "value": values[rows.to_numpy()],
            "baseline_median": hits["median"], "baseline_mad": hits["mad"],
            "baseline_days": hits["count"], "score": hits["score"],
        }, schema=_ANOMALY_SCHEMA))
    return pl.concat(found)


def robust_outliers(
    values: np.ndarray, day: np.ndarray, *, window: int, min_days: int, threshold: float
) -> dict[str, np.ndarray]:
    """Rows whose value is more than ``threshold`` robust z away from its trailing baseline.

    The baseline of row i is the non-NaN values of the rows whose day is in
    ``[day[i] - window, day[i] - 1]``; with fewer than ``min_days`` of them there is no score.
    ``day`` is sorted, one row per day within a series, and different series lie more than
    ``window`` apart (``bot_day_key`` does that). So the baseline is always the last few of
    the ``window`` rows before i: a fixed sliding window with a prefix blanked out.

    Returns ``row`` (indices), ``median``, ``mad``, ``count`` and ``score`` of the hits.
    """
    n = len(values)
    hits: dict[str, list[np.ndarray]] = {k: [] for k in ("row", "median", "mad", "count", "score")}
    padded = np.concatenate([np.full(window, np.nan), values])
    # How many of the rows before i are within the window (days only decrease going back).
    within = np.arange(n) - np.searchsorted(day, day - window, side="left")
    columns = np.arange(window)  # column j of a window row is the value window - j rows back
    for a in range(0, n, _SCORE_BLOCK):
        b = min(a + _SCORE_BLOCK, n)
        win = sliding_window_view(padded[a : b + window - 1], window)
        win = np.where(columns[None, :] < (window - within[a:b])[:, None], np.nan, win)
        k = np.count_nonzero(~np.isnan(win), axis=1)
        med = _median_of_sorted(np.sort(win, axis=1), k)
        dev = np.abs(win - med[:, None])
        mad = _median_of_sorted(np.sort(dev, axis=1), k)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_ad = np.nansum(dev, axis=1) / k
            diff = values[a:b] - med
            score = np.where(
                mad > 0, MAD_Z * diff / mad,
                np.where(mean_ad > 0, diff / (MEAN_AD_Z * mean_ad),
                         np.where(diff == 0, 0.0, np.sign(diff) * np.inf)),
            )
            keep = (k >= max(min_days, 1)) & (np.abs(score) > threshold)  # NaN compares False
        rows = np.flatnonzero(keep)
        for name, column in (("row", rows + a), ("median", med[rows]), ("mad", mad[rows]),
                             ("count", k[rows]), ("score", score[rows])):
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


def custom_daily(custom: pl.LazyFrame) -> pl.LazyFrame:
    """Per bot, UTC day and custom field name.

    A record whose value is numeric (``value_num``, booleans as 0/1) feeds a ``numeric`` row:
    ``records``, ``value_last``, ``value_min``, ``value_max``, ``value_mean``. Any other value
    feeds a ``text`` row: ``value_text`` (last of the day), ``changed_at`` (when that value first
    appeared after a different one, possibly days earlier) and ``changes`` (how many times the
    value changed that day; the field's first value counts as one). Null values are skipped.
    """
    ordered = custom.with_columns(day=utc_day("recorded_at")).sort(
        "bot_id", "name", "recorded_at", maintain_order=True
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
    texts = (
        ordered.filter(pl.col("value_num").is_null() & text.is_not_null())
        .with_columns(_changed=changed)
        .with_columns(
            _since=pl.when("_changed").then(pl.col("recorded_at")).forward_fill().over("bot_id", "name")
        )
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


def directory_daily(daily: pl.LazyFrame, bots: pl.LazyFrame) -> pl.LazyFrame:
    """Per day: ``bots_reporting`` (bots with a record), ``guilds`` and ``users`` summed over
    them (null when none reported), ``bots_first_seen`` and ``bots_removed`` (from the ``bots``
    table: when the listing first showed a bot / stopped showing it) and
    ``bots_first_reporting`` (bots whose first stat record is that day)."""
    reporting = daily.group_by("day").agg(
        bots_reporting=pl.len().cast(pl.Int64), guilds=pl.col("guilds").sum(),
        users=pl.col("users").sum(),
    )
    first_reporting = (
        daily.group_by("bot_id").agg(pl.col("day").min())
        .group_by("day").agg(bots_first_reporting=pl.len().cast(pl.Int64))
    )
    first_seen = bots.group_by(day=utc_day("first_seen_at")).agg(
        bots_first_seen=pl.len().cast(pl.Int64)
    )
    removed = (
        bots.filter(pl.col("removed_at").is_not_null())
        .group_by(day=utc_day("removed_at"))
        .agg(bots_removed=pl.len().cast(pl.Int64))
    )
    parts = [reporting, first_reporting, first_seen, removed]
    days = pl.concat([p.select("day") for p in parts]).unique()
    for part in parts:
        days = days.join(part, on="day", how="left")
    counts = ["bots_reporting", "bots_first_seen", "bots_first_reporting", "bots_removed"]
    return days.with_columns(pl.col(counts).fill_null(0)).select(
        "day", "bots_reporting", "guilds", "users", *counts[1:]
    )


# --- reading the archive ----------------------------------------------------------------------
def bot_slices(con: duckdb.DuckDBPyConnection, max_rows: int = CHUNK_ROWS) -> list[tuple[str | None, str | None]]:
    """Half-open bot_id ranges ``[lo, hi)`` (None = unbounded) of about ``max_rows`` stats each.

    Every per-bot job runs slice by slice: whole bots, so nothing crosses a slice boundary.
    """
    counts = pl.from_arrow(con.sql(
        "SELECT bot_id, count(*) AS n FROM bot_stats GROUP BY bot_id ORDER BY bot_id"
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


def read_slice(con: duckdb.DuckDBPyConnection, sql: str, lo: str | None, hi: str | None) -> pl.DataFrame:
    """Rows of ``sql`` (a SELECT over a table with bot_id) for bots in ``[lo, hi)``, via Arrow."""
    conditions, params = [], {}
    if lo is not None:
        conditions.append("bot_id >= $lo")
        params["lo"] = lo
    if hi is not None:
        conditions.append("bot_id < $hi")
        params["hi"] = hi
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    frame = pl.from_arrow(con.sql(sql + where, params=params or None).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def compute_slices(con: duckdb.DuckDBPyConnection, t: TrendSettings, spill: MonthSpill,
                   max_rows: int = CHUNK_ROWS) -> pl.DataFrame:
    """Run the per-bot jobs slice by slice, adding their rows to ``spill``; return the movers.

    Each slice's movers are its own top; the top of their union is the top of all bots, so the
    movers merge as they come and stay small.
    """
    def keep(name: str, frame: pl.DataFrame) -> None:
        # Slices come in bot_id order, so a bot-major month is in export order as it is read.
        spill.add(name, in_order(frame, DATASETS[name].order), DATASETS[name].time_column)

    top: pl.DataFrame | None = None
    for lo, hi in bot_slices(con, max_rows):
        stats = read_slice(con, _STATS_SQL, lo, hi).lazy()
        daily = bot_daily(stats).collect(engine=IN_MEMORY)
        keep("bot_daily", daily)
        health = resource_health(stats, daily.lazy(), threshold=t.health_threshold)
        keep("resource_health", health.collect(engine=STREAMING))
        del stats
        growth = bot_growth(daily.lazy()).collect(engine=IN_MEMORY)
        keep("bot_growth", growth)
        found = movers(growth.lazy(), min_guilds=t.movers_min_guilds, top=t.movers_top)
        top = found.collect(engine=STREAMING) if top is None else rank_movers(
            pl.concat([top, found.collect(engine=STREAMING)]).lazy(), top=t.movers_top
        ).collect(engine=IN_MEMORY)
        del growth
        odd = anomalies(daily.lazy(), window=t.anomaly_window, threshold=t.anomaly_threshold,
                        min_days=t.anomaly_min_days)
        keep("anomalies", odd.collect(engine=IN_MEMORY))
        custom = custom_daily(read_slice(con, _CUSTOM_SQL, lo, hi).lazy())
        keep("custom_daily", custom.collect(engine=STREAMING))
    assert top is not None  # bot_slices always gives at least one slice
    return top


def ranks_by_month(spill: MonthSpill) -> Iterator[tuple[str, pl.DataFrame]]:
    """bot_ranks one month at a time: that month's daily rows, plus the days before it that
    the rank changes look back to."""
    months = spill.months("bot_daily")
    if not months:
        yield exports.EMPTY_KEY, bot_ranks(spill.scan("bot_daily")).collect()
    reach = timedelta(days=max(RANK_DAYS))
    for i, key in enumerate(months):
        first = date(int(key[6:10]), int(key[11:13]), 1)
        daily = spill.scan("bot_daily", months[max(0, i - 1) : i + 1])
        ranked = bot_ranks(daily.filter(pl.col("day") >= first - reach))
        yield key, ranked.filter(pl.col("day") >= first).collect(engine=IN_MEMORY)


def dataset_parts(con: duckdb.DuckDBPyConnection, t: TrendSettings, spill: MonthSpill,
                  max_rows: int = CHUNK_ROWS) -> dict[str, Iterator[tuple[str, pl.DataFrame]]]:
    """Every dataset as (month key, rows) parts in export order, computed through ``spill``.

    The per-bot jobs run now; the parts are read back (or, for bot_ranks, computed) a month at
    a time as they are consumed.
    """
    top = compute_slices(con, t, spill, max_rows)
    bots = read_slice(con, _BOTS_SQL, None, None).lazy()
    directory = directory_daily(spill.scan("bot_daily"), bots).collect(engine=STREAMING)
    sources: dict[str, Iterator[tuple[str, pl.DataFrame]]] = {
        "bot_ranks": ranks_by_month(spill),
        "movers": exports.month_parts(top, "day"),
        "directory_daily": exports.month_parts(directory, "day"),
    }
    for name in ("bot_daily", "bot_growth", "anomalies", "resource_health", "custom_daily"):
        sources[name] = spill.parts(name)
    return {name: _ordered(sources[name], spec.order) for name, spec in DATASETS.items()}


def _ordered(parts: Iterator[tuple[str, pl.DataFrame]],
             order: tuple[str, ...]) -> Iterator[tuple[str, pl.DataFrame]]:
    for key, part in parts:
        yield key, in_order(part, order)


def compute(con: duckdb.DuckDBPyConnection, t: TrendSettings,
            max_rows: int = CHUNK_ROWS) -> dict[str, pl.DataFrame]:
    """Every dataset as one DataFrame, for tests and notebooks (:func:`build_trends` streams
    them to the exports a month at a time instead)."""
    with tempfile.TemporaryDirectory(prefix="botstats-trends-") as scratch:
        parts = dataset_parts(con, t, MonthSpill(Path(scratch)), max_rows)
        return {name: pl.concat([frame for _, frame in months]) for name, months in parts.items()}


# --- the run ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrendsReport:
    """What :func:`build_trends` did: per dataset rows and partitions written/unchanged."""

    run_id: str
    export_dir: Path
    archive: Path
    datasets: tuple[DatasetExport, ...]
    views: tuple[str, ...]
    seconds: float

    @property
    def written(self) -> int:
        return sum(len(d.written) for d in self.datasets)

    @property
    def unchanged(self) -> int:
        return sum(len(d.unchanged) for d in self.datasets)

    def summary(self) -> str:
        lines = [
            f"trends {self.run_id}: {len(self.datasets)} datasets in {self.seconds:.1f} s; "
            f"partitions {self.written} written, {self.unchanged} unchanged",
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
            "views": list(self.views),
            "datasets": [
                {"name": d.name, "rows": d.rows, "partitions": d.partitions,
                 "written": list(d.written), "unchanged": list(d.unchanged),
                 "removed": list(d.removed), "date_min": d.date_min, "date_max": d.date_max}
                for d in self.datasets
            ],
        }


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def build_trends(settings: Settings, *, run_id: str | None = None) -> TrendsReport:
    """Compute every dataset from the archive, export it, and (re)create the trend_* views.

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
                parts = dataset_parts(con, settings.trends, batch.spill())
                for name, spec in DATASETS.items():
                    results.append(batch.stage(name, parts[name], time_column=spec.time_column))
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
    return TrendsReport(run_id, export_dir, settings.db_path, tuple(results), tuple(views),
                        time.monotonic() - started)


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
