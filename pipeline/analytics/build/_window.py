"""The window of an incremental trends run: where it starts, and what it carries in from before.

An incremental run computes from a Monday ``start`` on (whole ISO weeks for resource_health),
for all bots, from the raw records of those days, and writes each dataset's rows from the first
day the changes can alter (``emit``; the days between were computed as context and are the
same as exported). What those days depend on from before ``start`` comes from the previous
export, never from older raw records:

- the **lookback**: ``bot_daily`` rows of the ``lookback_days`` before ``start`` (the 30-day
  growth, the anomaly baseline, rank changes and movers look that far back);
- the **carried state** of each key with rows before ``start``: a bot's last command counter
  (``commands_executed`` is a delta over it) and a text custom field's last value and since
  when it holds (``changed_at``/``changes``);
- each bot's **first day** of records (``bots_first_reporting``);
- the **ranks** of the days bot_ranks' changes look back to (``ranks``): those days' ranks
  are exported already, and ranking them again would rank every bot's day.

Per key, ``_state/bots.parquet`` and ``_state/texts.parquet`` in the export directory keep the
first day and the last row. A key whose last row is before ``start`` is carried from there;
one with rows on both sides of ``start`` is looked up in the export's month partitions, newest
first, stopping once every such key is found (in the common case the month of ``start``).

A full build is the same computation with no start and nothing carried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import NamedTuple

import polars as pl

from ..exports._exports import EMPTY_KEY, Manifest, Part, key_day, partition_order

STATE_DIR = "_state"
BOT_STATE = f"{STATE_DIR}/bots.parquet"
TEXT_STATE = f"{STATE_DIR}/texts.parquet"
BOT_KEY = ("bot_id",)
TEXT_KEY = ("bot_id", "name")
# A state is its base file and, beside it, the rows later runs changed (a run that changed a
# few keys writes those, not every key), listed in the manifest in order; a run writes the base
# again when it changed a quarter of the keys or more, or when STATE_CHANGES files are there.
STATE_CHANGES = 8
DATE = pl.Date
BOT_STATE_SCHEMA = pl.Schema({"bot_id": pl.String, "first_day": DATE, "last_day": DATE,
                              "commands_counter": pl.Int64})
TEXT_STATE_SCHEMA = pl.Schema({"bot_id": pl.String(), "name": pl.String(), "first_day": DATE(),
                               "last_day": DATE(), "value_text": pl.String(),
                               "changed_at": pl.Datetime("us", "UTC")})


@dataclass(frozen=True)
class StateTable:
    """A state the runs carry from one to the next: its base file, its columns, and the key
    that names each of its rows."""

    base: str
    schema: pl.Schema
    key: tuple[str, ...]


BOTS = StateTable(BOT_STATE, BOT_STATE_SCHEMA, BOT_KEY)
TEXTS = StateTable(TEXT_STATE, TEXT_STATE_SCHEMA, TEXT_KEY)


class PreviousExport(NamedTuple):
    """The export an incremental run continues: its directory and the manifest it was
    written with."""

    export_dir: Path
    manifest: Manifest


class WindowUnavailable(Exception):
    """The previous export cannot seed an incremental run (a file is missing or disagrees):
    the caller rebuilds everything."""


def week_start(day: date) -> date:
    """The Monday on or before ``day``."""
    return day - timedelta(days=day.weekday())


@dataclass(frozen=True)
class Window:
    """What a run computes from (``start``; None = everything), what it writes of each dataset
    (``emit``: its first day; absent = ``start``), and what it carries in from before."""

    start: date | None
    lookback: pl.LazyFrame | None = None  # bot_daily rows in [start - lookback_days, start)
    counters: pl.DataFrame | None = None  # bot_id, last_day, commands_counter: last row before
    texts: pl.DataFrame | None = None  # bot_id, name, last_day, value_text, changed_at: same
    bot_firsts: pl.DataFrame | None = None  # bot_id, first_day of bots with rows before start
    text_firsts: pl.DataFrame | None = None  # bot_id, name, first_day: the same for text fields
    emit: Mapping[str, date] = field(default_factory=dict)
    # bot_ranks rows (bot_id, day, guilds, users and the ranks) of the days before its first
    # written day that its rank changes look back to.
    ranks: pl.LazyFrame | None = None
    # A full build's settle line: months wholly before it are written as one file each.
    settled: date | None = None

    def since(self, frame: pl.LazyFrame, column: str) -> pl.LazyFrame:
        """Rows of ``frame`` from ``start`` on: what this run computes."""
        return frame if self.start is None else frame.filter(pl.col(column) >= self.start)

    def emit_from(self, name: str) -> date | None:
        """The first day of dataset ``name`` this run writes (None: every day)."""
        return self.emit.get(name, self.start)

    def emitted(self, name: str, frame: pl.LazyFrame, column: str) -> pl.LazyFrame:
        """Rows of ``frame`` (of dataset ``name``) this run writes."""
        first = self.emit_from(name)
        return frame if first is None else frame.filter(pl.col(column) >= first)

    @property
    def months_before(self) -> date:
        """Rows whose month lies wholly before this day go to their month's file, later ones
        to their day's: a full build writes its settled months whole; an incremental run
        writes days only (``compact`` merges them once their month settles)."""
        return self.settled if self.settled is not None else date.min

    def carried_counters(self, lo: str | None, hi: str | None) -> pl.LazyFrame | None:
        return None if self.counters is None else _bots_in(self.counters.lazy(), lo, hi)

    def carried_texts(self, lo: str | None, hi: str | None) -> pl.LazyFrame | None:
        return None if self.texts is None else _bots_in(self.texts.lazy(), lo, hi)

    def lookback_of(self, lo: str | None, hi: str | None) -> pl.LazyFrame | None:
        return None if self.lookback is None else _bots_in(self.lookback, lo, hi)

    def lookback_ids(self) -> pl.LazyFrame | None:
        """The bot_id of every lookback row: what each slice reads besides its raw records."""
        return None if self.lookback is None else self.lookback.select("bot_id")

    def ranks_of(self, lo: str | None, hi: str | None) -> pl.LazyFrame | None:
        return None if self.ranks is None else _bots_in(self.ranks, lo, hi)


FULL = Window(None)


def _bots_in(frame: pl.LazyFrame, lo: str | None, hi: str | None) -> pl.LazyFrame:
    if lo is not None:
        frame = frame.filter(pl.col("bot_id") >= lo)
    if hi is not None:
        frame = frame.filter(pl.col("bot_id") < hi)
    return frame


def open_window(previous: PreviousExport, start: date, lookback_days: int,
                emit: Mapping[str, date], rank_days: int) -> Window:
    """The window from ``start`` over the ``previous`` export, writing each dataset from its
    day in ``emit``; ``rank_days``: how far bot_ranks' changes look back.

    Raises :class:`WindowUnavailable` when the export cannot seed it."""
    bots, texts = _previous_state(previous, BOTS), _previous_state(previous, TEXTS)
    daily_files = partition_files(previous, "bot_daily", before=start)
    custom_files = partition_files(previous, "custom_daily", before=start)
    first = start - timedelta(days=lookback_days)
    lookback = _rows_between(previous, "bot_daily", "day", first, start)
    counters = carried(bots, BOT_KEY, start, daily_files, "commands_counter")
    carried_texts = carried(texts, TEXT_KEY, start, custom_files,
                            "value_text", "changed_at", where=pl.col("kind") == "text")
    ranked = emit.get("bot_ranks", start)
    ranks = _rows_between(previous, "bot_ranks", "day", ranked - timedelta(days=rank_days),
                          ranked)
    return Window(
        start, lookback, counters, carried_texts,
        bots.filter(pl.col("first_day") < start).select(*BOT_KEY, "first_day"),
        texts.filter(pl.col("first_day") < start).select(*TEXT_KEY, "first_day"),
        emit,
        None if ranks is None else ranks.select(
            "bot_id", "day", "guilds", "users", "guilds_rank", "users_rank"),
    )


def _rows_between(previous: PreviousExport, name: str, column: str, first: date,
                  end: date) -> pl.LazyFrame | None:
    """The exported rows of ``name`` with ``column`` in ``[first, end)``, from the files that
    can hold them; None when none can."""
    files = [f for f, lo, hi in _spans(previous, name) if lo < end and hi >= first]
    if not files:
        return None
    return (pl.scan_parquet(files, hive_partitioning=False)
            .filter(pl.col(column).is_between(first, end, closed="left")))


def _spans(previous: PreviousExport, name: str) -> list[tuple[Path, date, date]]:
    """(file, first day, last day) of each partition of ``name`` that has rows."""
    export_dir, manifest = previous
    return [(export_dir / p["path"], date.fromisoformat(first[:10]),
             date.fromisoformat(last[:10]))
            for p in _parts(manifest, name)
            if p["partition"] != EMPTY_KEY and (first := p["date_min"]) and (last := p["date_max"])]


def _parts(manifest: Manifest, name: str) -> list[Part]:
    """The partitions of dataset ``name`` as ``manifest`` lists them (none when it lacks it)."""
    entry = manifest.get("datasets", {}).get(name)
    return entry["partitions"] if entry else []


def state_files(manifest: Manifest, base: str) -> list[str]:
    """The files of the state whose base is ``base``, oldest first, as ``manifest`` lists them
    (an export that lists none has the base alone)."""
    listed = (manifest.get("source") or {}).get("state", {}).get(base)
    return list(listed) if listed else [base]


def _previous_state(previous: PreviousExport, table: StateTable) -> pl.DataFrame:
    export_dir, manifest = previous
    return read_state(export_dir, state_files(manifest, table.base), table.schema, table.key)


def read_state(export_dir: Path, files: list[str], schema: pl.Schema,
               key: tuple[str, ...]) -> pl.DataFrame:
    """A state from its files: each key's row from the last file that has it."""
    frames = []
    for name in files:
        path = export_dir / name
        try:
            frame = pl.read_parquet(path)
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise WindowUnavailable(f"cannot read {path}: {exc}") from exc
        if frame.schema != schema:
            raise WindowUnavailable(f"{path} has columns {dict(frame.schema)}, not {dict(schema)}")
        frames.append(frame)
    if len(frames) == 1:
        return frames[0]
    return (pl.concat(frames).unique(subset=list(key), keep="last", maintain_order=True)
            .sort(list(key)))


def changed_state(old: pl.DataFrame | None, new: pl.DataFrame, files: list[str],
                  base: str, tag: str) -> tuple[list[str], dict[str, pl.DataFrame]]:
    """What to write of state ``new`` after ``old`` (kept in ``files``): the files the state
    is then in, and the frames to write, by file: the base again (every key), or beside the old
    files the rows that changed (``<base>.<tag>.parquet``), or nothing."""
    changed = new if old is None else new.join(old, on=new.columns, how="anti",
                                               nulls_equal=True, maintain_order="left")
    if old is None or 4 * changed.height >= new.height or len(files) > STATE_CHANGES:
        return [base], {base: new}
    if changed.is_empty():
        return files, {}
    delta = base.removesuffix(".parquet") + f".{tag}.parquet"
    return [*files, delta], {delta: changed}


def partition_files(previous: PreviousExport, name: str, before: date) -> list[Path]:
    """The files of the partitions of ``name`` that begin before ``before``, newest first."""
    export_dir, manifest = previous
    found = [(p["partition"], export_dir / p["path"]) for p in _parts(manifest, name)
             if p["partition"] != EMPTY_KEY and key_day(p["partition"]) < before]
    return [f for _, f in sorted(found, key=lambda kf: partition_order(kf[0]), reverse=True)]


def carried(state: pl.DataFrame, key: tuple[str, ...], start: date, files: list[Path],
            *columns: str, where: pl.Expr | None = None) -> pl.DataFrame:
    """Per key with rows before ``start``: its last row before ``start`` (key, ``last_day`` and
    ``columns``). From the state when the key's last row is before ``start``; else from the
    export's partitions (``files``, newest first), read only until every such key is found."""
    before = state.filter(pl.col("first_day") < start)
    direct = before.filter(pl.col("last_day") < start).select(*key, "last_day", *columns)
    wanted = before.filter(pl.col("last_day") >= start).select(*key)
    found = [direct]
    for file in files:
        if wanted.is_empty():
            break
        rows = pl.scan_parquet(file, hive_partitioning=False).filter(pl.col("day") < start)
        if where is not None:
            rows = rows.filter(where)
        # Each key's last day and its values that day, in one pass: sorting every row read
        # first (a key has a row a day) held twice the memory at 100,000 bots.
        last = (rows.join(wanted.lazy(), on=list(key), how="semi")
                .group_by(key).agg(pl.col("day").max().alias("last_day"),
                                   *[pl.col(c).sort_by("day").last() for c in columns])
                .collect())
        found.append(last.cast(direct.schema))
        wanted = wanted.join(last, on=list(key), how="anti")
    if not wanted.is_empty():
        raise WindowUnavailable(f"the export has no row before {start} for {wanted.row(0)}, "
                                f"which the state says exists")
    return pl.concat(found)


def last_rows(new: pl.DataFrame, key: tuple[str, ...], columns: tuple[str, ...]) -> pl.DataFrame:
    """Per key of ``new`` (rows a run computed: key, ``day``, ``columns``) its first day and
    its last row (``last_day``, ``columns``), sorted by key. Keys never span slices of bots,
    so a run summarises each slice as it is computed and :func:`next_state` takes their
    concatenation."""
    return (new.lazy().sort(*key, "day").group_by(key)
            .agg(pl.col("day").first().alias("first_day"),
                 pl.col("day").last().alias("last_day"), *[pl.col(c).last() for c in columns])
            .sort(*key).collect(engine="in-memory"))


def next_state(summary: pl.DataFrame, key: tuple[str, ...], columns: tuple[str, ...],
               firsts: pl.DataFrame | None, lasts: pl.DataFrame | None) -> pl.DataFrame:
    """The state after a run: per key its first day and its last row (``last_day``,
    ``columns``). ``summary`` is :func:`last_rows` of the rows the run computed;
    ``firsts``/``lasts`` are the keys with rows before the run's start, as the window
    carried them in (None for a full build)."""
    if firsts is None or lasts is None:
        return summary.sort(*key)
    before = firsts.lazy().join(lasts.lazy(), on=list(key), how="left")
    merged = before.join(summary.lazy(), on=list(key), how="full", coalesce=True, suffix="_new")
    has_new = pl.col("last_day_new").is_not_null()
    return merged.select(
        *key,
        first_day=pl.coalesce("first_day", "first_day_new"),
        last_day=pl.coalesce("last_day_new", "last_day"),
        **{c: pl.when(has_new).then(pl.col(f"{c}_new")).otherwise(pl.col(c)) for c in columns},
    ).sort(*key).collect()


def first_days(state: pl.DataFrame) -> pl.LazyFrame:
    """(bot_id, day): each bot's first day of records, from a bot state."""
    return state.lazy().select("bot_id", day=pl.col("first_day"))


def directory_change(listed: pl.LazyFrame, exported: pl.LazyFrame) -> date | None:
    """The first day whose ``bots_first_seen`` or ``bots_removed`` differ between ``listed``
    (computed from the bots table now) and ``exported`` (the previous directory_daily): the
    bots table has no change history of its own, but it is small, and these counts are all
    the datasets take from it. None when they agree."""
    counts = ["bots_first_seen", "bots_removed"]
    joined = listed.select("day", *counts).join(
        exported.select("day", *counts), on="day", how="full", coalesce=True, suffix="_old")
    differs = pl.any_horizontal(
        pl.col(c).fill_null(0) != pl.col(f"{c}_old").fill_null(0) for c in counts)
    day: date | None
    (day,) = joined.filter(differs).select(pl.col("day").min()).collect().row(0)
    return day
