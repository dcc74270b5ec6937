"""Reading the archive for trends: whole bots a slice at a time, each slice run through the per-bot jobs into a spill of the rows the run writes, and the datasets assembled from it."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Final

import duckdb
import polars as pl
import pyarrow as pa

from ... import archive
from ...core import TrendSettings
from ..exports import _exports as exports
from ..exports._datasets import DATASETS
from ..exports._exports import Spill
from . import _forecast as forecast
from . import _window as trend_window
from ._anomalies import anomalies
from ._frames import detached
from ._jobs import (
    bot_daily,
    bot_growth,
    bot_names,
    custom_daily,
    directory_daily,
    movers,
    rank_changes,
    rank_movers,
    ranked_by_day,
    resource_health,
)
from ._keyed import KeyedFiles, spread
from ._window import FULL, Window

# Rows a slice reads (its bots' raw records and their lookback's daily rows): what a slice's
# jobs hold at a time, whatever the directory's size or its history (bench/README.md).
CHUNK_ROWS = 25_000


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


BOTS_SQL = "SELECT bot_id, name, first_seen_at, removed_at FROM bots"


def bot_slices(con: duckdb.DuckDBPyConnection, max_rows: int = CHUNK_ROWS,
               since: date | None = None,
               carried: pl.LazyFrame | None = None) -> list[tuple[str | None, str | None]]:
    """Half-open bot_id ranges ``[lo, hi)`` (None = unbounded) of about ``max_rows`` rows each:
    the bots' stats (recorded from UTC day ``since`` on, when given) plus what each slice also
    reads of them from before (``carried``: bot_id per row, the window's lookback). A bot's
    lookback is up to a row per day of the forecast's window, so counting raw rows alone made
    one slice of every bot in an hourly run.

    Every per-bot job runs slice by slice: whole bots, so nothing crosses a slice boundary.
    """
    return _slices_of(_bot_counts(con, since, carried), max_rows)


def _bot_counts(con: duckdb.DuckDBPyConnection, since: date | None,
                carried: pl.LazyFrame | None) -> pl.DataFrame:
    """Per bot: ``raw``, its stats recorded from ``since`` on, and ``n``, those plus its rows
    in ``carried``."""
    where = "" if since is None else f" WHERE recorded_at >= {archive.literal(_day_start(since))}"
    counts = pl.from_arrow(con.sql(
        f"SELECT bot_id, count(*) AS raw FROM bot_stats{where} GROUP BY bot_id"
    ).to_arrow_table())
    assert isinstance(counts, pl.DataFrame)
    counts = counts.with_columns(n=pl.col("raw"))
    if carried is not None:
        more = carried.group_by("bot_id").agg(n=pl.len()).collect(engine=STREAMING)
        counts = (pl.concat([counts, more.with_columns(raw=pl.lit(0)).cast(counts.schema)
                             .select(counts.columns)])
                  .group_by("bot_id").agg(pl.col("raw").sum(), pl.col("n").sum()))
    return counts.sort("bot_id")


def _slices_of(counts: pl.DataFrame, max_rows: int) -> list[tuple[str | None, str | None]]:
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
    frame = pl.from_arrow(con.sql(sql + _where(lo, hi, since)).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def _where(lo: str | None, hi: str | None, since: date | None) -> str:
    conditions: list[str] = []
    if lo is not None:
        conditions.append(f"bot_id >= {archive.literal(lo)}")
    if hi is not None:
        conditions.append(f"bot_id < {archive.literal(hi)}")
    if since is not None:
        conditions.append(f"recorded_at >= {archive.literal(_day_start(since))}")
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


# Slices one scan of the archive serves: a scan per slice read the whole window once for each
# (quadratic in the archive for a full build); a scan per group writes each slice's rows to a
# file of its own, and the open files stay well under the process's limit.
GROUP_SLICES = 128
# Rows the group's scan hands over at a time: what it holds besides the slices' files.
SCAN_BATCH_ROWS = 65_536
# An incremental run's few days of records are read in groups of at most MEMORY_ROWS raw rows
# (each a scan of those days), held in memory compressed: their scratch files would be most of
# what an hourly run writes. When that would take more than MEMORY_GROUPS scans (a full build,
# a late record), groups of GROUP_SLICES slices go to scratch files instead.
MEMORY_ROWS = 200_000
MEMORY_GROUPS = 8


@dataclass(frozen=True)
class GroupScan:
    """How a group of slices is read from the archive (``con``): the bot ranges of its
    ``slices``, their records from UTC day ``since`` on (None: all of them), spread over
    scratch files in ``folder`` or, ``in_memory``, over buffers."""

    con: duckdb.DuckDBPyConnection
    slices: list[tuple[str | None, str | None]]
    folder: Path
    since: date | None = None
    in_memory: bool = False


class SliceReads:
    """The rows of ``sql`` for each slice of a group, from one scan of the archive (spread over
    a file per slice, :mod:`._keyed`). :meth:`read` gives a slice's rows, the same frame as
    :func:`read_slice`; a group of one slice is read directly, as there is nothing to share.
    """

    def __init__(self, scan: GroupScan, sql: str) -> None:
        self._scan, self._sql = scan, sql
        self._files: KeyedFiles | None = None
        group = scan.slices
        if len(group) > 1:
            reader = scan.con.sql(sql + _where(group[0][0], group[-1][1], scan.since)
                                  ).to_arrow_reader(SCAN_BATCH_ROWS)
            schema = pl.DataFrame(reader.schema.empty_table()).schema
            # Slice k holds the bots from its lo on: a row's slice is how many later los it passed.
            starts = pl.Series([lo for lo, _ in group[1:]], dtype=pl.String)
            self._files = spread(
                (_frame(batch) for batch in reader),
                lambda rows: starts.search_sorted(rows["bot_id"], side="right"), scan.folder,
                schema, in_memory=scan.in_memory)

    @property
    def slices(self) -> list[tuple[str | None, str | None]]:
        return self._scan.slices

    def read(self, k: int) -> pl.DataFrame:
        if self._files is None:
            lo, hi = self._scan.slices[k]
            return read_slice(self._scan.con, self._sql, lo, hi, since=self._scan.since)
        return self._files.take(k)

    def close(self) -> None:
        if self._files is not None:
            self._files.close()


def _frame(batch: pa.RecordBatch) -> pl.DataFrame:
    frame = pl.from_arrow(batch)
    assert isinstance(frame, pl.DataFrame)
    return frame


def slice_groups(slices: list[tuple[str | None, str | None]],
                 size: int) -> list[list[tuple[str | None, str | None]]]:
    return [slices[i:i + size] for i in range(0, len(slices), size)]


def _groups_by_rows(slices: list[tuple[str | None, str | None]], counts: pl.DataFrame,
                    rows: int = 0) -> list[list[tuple[str | None, str | None]]]:
    """Consecutive slices in groups of at most ``rows`` raw rows (``MEMORY_ROWS``) each, a
    slice alone if it holds more."""
    rows = rows or MEMORY_ROWS
    los = pl.Series([lo or "" for lo, _ in slices], dtype=pl.String)
    per_slice = (counts.with_columns(_slice=los.search_sorted(counts["bot_id"], side="right") - 1)
                 .group_by("_slice").agg(pl.col("raw").sum()))
    raw = dict(per_slice.iter_rows())
    groups: list[list[tuple[str | None, str | None]]] = []
    held = 0
    for k, bounds in enumerate(slices):
        n = int(raw.get(k, 0))
        if not groups or held + n > rows:
            groups.append([])
            held = 0
        groups[-1].append(bounds)
        held += n
    return groups


def with_lookback(daily: pl.DataFrame, lookback: pl.LazyFrame | None) -> pl.LazyFrame:
    """The recomputed daily rows after the exported ones the windows look back over."""
    if lookback is None:
        return daily.lazy()
    return pl.concat([lookback.select(daily.columns).cast(daily.schema), daily.lazy()])


@dataclass(frozen=True)
class Sliced:
    """What the per-bot jobs left besides their spilled rows: the movers, the slices, and each
    bot's and text field's last computed row (for the next state)."""

    top: pl.DataFrame
    slices: list[tuple[str | None, str | None]]
    bot_lasts: pl.DataFrame
    text_lasts: pl.DataFrame


# What the next run carries of a bot's and a text field's last computed row (_window).
BOT_STATE_COLUMNS = ("commands_counter",)
TEXT_STATE_COLUMNS = ("value_text", "changed_at")


# Datasets in bot order: each slice's rows, sorted, are that stretch of the export, so a
# partition is staged by streaming its spilled chunks. The others are small and sorted whole.
STREAMED = ("bot_daily", "bot_growth", "bot_ranks", "resource_health", "custom_daily",
            "bot_forecast")


def _keeper(spill: Spill, window: Window) -> Callable[[str, pl.LazyFrame | pl.DataFrame], None]:
    """Spill the rows of a dataset this run writes (``window.emitted``), sorted, under their
    partitions."""
    def keep(name: str, frame: pl.LazyFrame | pl.DataFrame) -> None:
        spec = DATASETS[name]
        rows = window.emitted(name, frame.lazy(), spec.time_column).collect(engine=IN_MEMORY)
        spill.add(name, in_order(rows, spec.order), spec.time_column, window.months_before)
    return keep


def compute_slices(con: duckdb.DuckDBPyConnection, t: TrendSettings, spill: Spill,
                   max_rows: int = CHUNK_ROWS, window: Window = FULL) -> Sliced:
    """Run the per-bot jobs slice by slice, adding the rows the run writes to ``spill``.

    Each slice's movers are its own top; the top of their union is the top of all bots, so the
    movers merge as they come and stay small. With a ``window``, only its days are computed
    (from its start), and of each dataset only the days it writes are kept.
    """
    jobs = _SliceJobs(t, window, _keeper(spill, window))
    gathered = _Gathered()
    start = window.start
    counts = _bot_counts(con, start, window.lookback_ids())
    slices = _slices_of(counts, max_rows)
    reads = spill.root / "_reads"
    small = int(counts["raw"].sum()) <= MEMORY_ROWS * MEMORY_GROUPS
    groups = _groups_by_rows(slices, counts) if small else slice_groups(slices, GROUP_SLICES)
    for group in groups:
        scan = GroupScan(con, group, reads, since=start, in_memory=small)
        stats_reads = SliceReads(scan, _STATS_SQL)
        custom_reads = SliceReads(scan, _CUSTOM_SQL)
        try:
            _compute_group(stats_reads, custom_reads, jobs, gathered)
        finally:
            stats_reads.close()
            custom_reads.close()
    assert gathered.top is not None  # bot_slices always gives at least one slice
    return Sliced(gathered.top, slices, pl.concat(gathered.bots), pl.concat(gathered.texts))


@dataclass(frozen=True)
class _SliceJobs:
    """What the jobs of every slice share: the settings, the window they compute, and
    ``keep``, which spills the rows of a dataset the run writes (:func:`_keeper`)."""

    t: TrendSettings
    window: Window
    keep: Callable[[str, pl.LazyFrame | pl.DataFrame], None]


@dataclass
class _Gathered:
    """What the jobs leave besides their spilled rows, slice after slice: the movers' top so
    far, and each slice's last rows per bot and per text field (for the next state)."""

    top: pl.DataFrame | None = None
    bots: list[pl.DataFrame] = field(default_factory=list)
    texts: list[pl.DataFrame] = field(default_factory=list)

    def add_movers(self, found: pl.DataFrame, top: int) -> None:
        """The ``top`` movers of the slices so far and ``found``, a slice's own top."""
        self.top = detached(found if self.top is None else rank_movers(
            pl.concat([self.top, found]).lazy(), top=top).collect(engine=IN_MEMORY))


def _compute_group(stats_reads: SliceReads, custom_reads: SliceReads, jobs: _SliceJobs,
                   gathered: _Gathered) -> None:
    """The per-bot jobs over each slice of a group (the slices both reads share), what they
    leave added to ``gathered``."""
    t, window, keep = jobs.t, jobs.window, jobs.keep
    for k, (lo, hi) in enumerate(stats_reads.slices):
        stats = stats_reads.read(k).lazy()
        daily = bot_daily(stats, window.carried_counters(lo, hi)).collect(engine=IN_MEMORY)
        keep("bot_daily", daily)
        gathered.bots.append(detached(trend_window.last_rows(daily, trend_window.BOT_KEY,
                                                             BOT_STATE_COLUMNS)))
        health = resource_health(stats, daily.lazy(), threshold=t.health_threshold)
        keep("resource_health", health.collect(engine=STREAMING))
        del stats
        history = with_lookback(daily, window.lookback_of(lo, hi)).collect(engine=IN_MEMORY)
        growth = window.since(bot_growth(history.lazy()), "day").collect(engine=IN_MEMORY)
        keep("bot_growth", growth)
        found = movers(growth.lazy(), min_guilds=t.movers_min_guilds, top=t.movers_top)
        gathered.add_movers(found.collect(engine=STREAMING), t.movers_top)
        del growth
        keep("anomalies", anomalies(history.lazy(), t, since=window.emit_from("anomalies")))
        custom = custom_daily(custom_reads.read(k).lazy(), window.carried_texts(lo, hi))
        texts = custom.collect(engine=STREAMING)
        keep("custom_daily", texts)
        gathered.texts.append(detached(trend_window.last_rows(
            texts.filter(pl.col("kind") == "text"), trend_window.TEXT_KEY, TEXT_STATE_COLUMNS)))
        del texts
        # bot_forecast: each recomputed bot's model over its last WINDOW_DAYS (the lookback
        # reaches that far), written as of the days this run writes; a bot with nothing new
        # keeps its exported rows.
        keep("bot_forecast", forecast.bot_forecast(history.lazy()))


RANKED = "_ranked_days"  # scratch: each day's ranks, a chunk per group of days


def rank_slices(spill: Spill, sliced: Sliced, window: Window = FULL,
                max_rows: int = CHUNK_ROWS) -> None:
    """bot_ranks into ``spill``, in bounded memory: the days it writes are ranked across every
    bot, a group of days of about ``max_rows`` rows at a time, then each slice of bots gets its
    rank changes from those days and, before them, from the ranks exported for the days the
    changes look back to (``window.ranks``)."""
    keep = _keeper(spill, window)
    columns = ["bot_id", "day", "guilds", "users"]
    days = window.emitted("bot_ranks", spill.scan("bot_daily"), "day").select(columns)
    ranked_any = False
    for rows in _day_group_rows(days, max_rows, spill.root / "_reads"):
        spill.add(RANKED, ranked_by_day(rows.lazy()).sort("bot_id", "day").collect(
            engine=IN_MEMORY), "day", window.months_before)
        ranked_any = True
    for lo, hi in sliced.slices:
        ranked = (_bots_in_range(spill.scan(RANKED), lo, hi) if ranked_any
                  else ranked_by_day(days.clear()))
        before = window.ranks_of(lo, hi)
        if before is not None:
            ranked = pl.concat([before.cast(ranked.collect_schema()), ranked])
        keep("bot_ranks", rank_changes(ranked))


def _day_group_rows(source: pl.LazyFrame, max_rows: int, folder: Path) -> Iterator[pl.DataFrame]:
    """The rows of ``source`` a group of days at a time (:func:`_day_groups`); several groups
    come from one scan, spread over a stream per group (in memory when they are few rows)."""
    counts = _day_counts(source)
    groups = _day_groups_of(counts, max_rows)
    if len(groups) <= 1:
        if groups:
            yield source.collect(engine=STREAMING)
        return
    firsts = pl.Series([days[0] for days in groups[1:]], dtype=pl.Date)
    files = spread(source.collect_batches(chunk_size=SCAN_BATCH_ROWS, engine=STREAMING),
                   lambda rows: firsts.search_sorted(rows["day"], side="right"), folder,
                   source.collect_schema(), in_memory=int(counts["n"].sum()) <= MEMORY_ROWS)
    try:
        for k in range(len(groups)):
            yield files.take(k)
    finally:
        files.close()


def _day_counts(rows: pl.LazyFrame) -> pl.DataFrame:
    return rows.group_by("day").agg(n=pl.len()).sort("day").collect(engine=STREAMING)


def _day_groups(rows: pl.LazyFrame, max_rows: int) -> list[list[date]]:
    """The days of ``rows`` in order, grouped so that each group holds about ``max_rows``
    rows (a day alone may hold more)."""
    return _day_groups_of(_day_counts(rows), max_rows)


def _day_groups_of(counts: pl.DataFrame, max_rows: int) -> list[list[date]]:
    groups: list[list[date]] = []
    held = 0
    for day, n in counts.iter_rows():
        if not groups or held + n > max_rows:
            groups.append([])
            held = 0
        groups[-1].append(day)
        held += n
    return groups


def _bots_in_range(frame: pl.LazyFrame, lo: str | None, hi: str | None) -> pl.LazyFrame:
    if lo is not None:
        frame = frame.filter(pl.col("bot_id") >= lo)
    if hi is not None:
        frame = frame.filter(pl.col("bot_id") < hi)
    return frame


@dataclass(frozen=True)
class Computed:
    """Every dataset as (partition key, rows) parts of the rows the run writes, and the state
    the next run starts from."""

    parts: dict[str, Iterator[tuple[str, pl.DataFrame | pl.LazyFrame]]]
    bot_state: pl.DataFrame
    text_state: pl.DataFrame


def dataset_parts(con: duckdb.DuckDBPyConnection, t: TrendSettings, spill: Spill,
                  max_rows: int = CHUNK_ROWS, window: Window = FULL) -> Computed:
    """Every dataset as (partition key, rows) parts in export order, computed through
    ``spill``: the days ``window`` writes of each (all of them by default).

    The per-bot jobs run now; the parts are read back a partition at a time as they are
    consumed: the bot-ordered datasets as scans of their spilled chunks, streamed into the
    export.
    """
    sliced = compute_slices(con, t, spill, max_rows, window)
    rank_slices(spill, sliced, window, max_rows)
    bot_state = trend_window.next_state(sliced.bot_lasts, trend_window.BOT_KEY,
                                        BOT_STATE_COLUMNS, window.bot_firsts, window.counters)
    text_state = trend_window.next_state(sliced.text_lasts, trend_window.TEXT_KEY,
                                         TEXT_STATE_COLUMNS, window.text_firsts, window.texts)
    bots = read_slice(con, BOTS_SQL, None, None).lazy()
    # bot_daily's spill holds the days the run writes of it, which are those it writes of the
    # directory's totals too.
    directory = directory_daily(spill.scan("bot_daily"), bots, trend_window.first_days(bot_state))
    months_before = window.months_before

    def small(name: str, frame: pl.LazyFrame | pl.DataFrame) -> Iterator[tuple[str, pl.DataFrame]]:
        spec = DATASETS[name]
        rows = window.emitted(name, frame.lazy(), spec.time_column).collect(engine=IN_MEMORY)
        return exports.partitions(rows, spec.time_column, months_before)

    sources: dict[str, Iterator[tuple[str, pl.DataFrame]]] = {
        "movers": small("movers", sliced.top),
        "directory_daily": small("directory_daily", directory),
        "anomalies": spill.parts("anomalies"),
        "bot_names": exports.partitions(bot_names(bots).collect(engine=IN_MEMORY), "first_seen"),
    }
    parts: dict[str, Iterator[tuple[str, pl.DataFrame | pl.LazyFrame]]] = {
        name: ordered_parts(sources[name], DATASETS[name].order) for name in sources}
    for name in STREAMED:
        parts[name] = spill.streamed_parts(name)
    return Computed({name: parts[name] for name in DATASETS},
                    bot_state.cast(trend_window.BOT_STATE_SCHEMA),
                    text_state.cast(trend_window.TEXT_STATE_SCHEMA))


def ordered_parts(parts: Iterator[tuple[str, pl.DataFrame]],
                  order: tuple[str, ...]) -> Iterator[tuple[str, pl.DataFrame]]:
    for key, part in parts:
        yield key, in_order(part, order)


def compute(con: duckdb.DuckDBPyConnection, t: TrendSettings,
            max_rows: int = CHUNK_ROWS) -> dict[str, pl.DataFrame]:
    """Every dataset as one DataFrame, for tests and notebooks (:func:`._build.build_trends` streams
    them to the exports a month at a time instead)."""
    with tempfile.TemporaryDirectory(prefix="botstats-trends-") as scratch:
        parts = dataset_parts(con, t, Spill(Path(scratch)), max_rows).parts
        return {name: pl.concat([frame.lazy() for _, frame in months]).collect()
                for name, months in parts.items()}


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
