"""Reading the archive for trends: whole bots a slice at a time, each slice run through the per-bot jobs into month spills, and the datasets assembled from them."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Final

import duckdb
import polars as pl

from .. import archive
from ..core import TrendSettings
from . import _exports as exports
from . import _forecast as forecast
from . import _window as trend_window
from ._anomalies import anomalies
from ._datasets import DATASETS
from ._exports import MonthSpill
from ._jobs import (
    RANK_DAYS,
    bot_daily,
    bot_growth,
    bot_names,
    bot_ranks,
    custom_daily,
    directory_daily,
    movers,
    rank_movers,
    resource_health,
)
from ._window import FULL, Window

# Whole bots per slice read from the archive: about 70 bytes a row, so ~35 MB of raw stats
# in memory at a time whatever the archive size.
CHUNK_ROWS = 500_000


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


_BOTS_SQL = "SELECT bot_id, name, first_seen_at, removed_at FROM bots"


def bot_slices(con: duckdb.DuckDBPyConnection, max_rows: int = CHUNK_ROWS,
               since: date | None = None) -> list[tuple[str | None, str | None]]:
    """Half-open bot_id ranges ``[lo, hi)`` (None = unbounded) of about ``max_rows`` stats each
    (recorded from UTC day ``since`` on, when given).

    Every per-bot job runs slice by slice: whole bots, so nothing crosses a slice boundary.
    """
    where = "" if since is None else f" WHERE recorded_at >= {archive.literal(_day_start(since))}"
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
        conditions.append(f"bot_id >= {archive.literal(lo)}")
    if hi is not None:
        conditions.append(f"bot_id < {archive.literal(hi)}")
    if since is not None:
        conditions.append(f"recorded_at >= {archive.literal(_day_start(since))}")
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
        odd = anomalies(history.lazy(), t, since=start)
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
        "bot_names": exports.month_parts(bot_names(bots).collect(engine=IN_MEMORY), "first_seen"),
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
