"""Trends: polars jobs over the archive, their parquet exports, and the ``trend_*`` views.

:func:`build_trends` is the one entry point the CLI and the scheduler call. Memory stays
bounded however large the archive grows: ``bot_stats`` is read through Arrow in slices of whole
bots (``CHUNK_ROWS``), each slice is reduced to one row per bot and UTC day at once, and the
per-bot jobs run on that slice; the rows the run writes go to a spill
(:class:`~pipeline.analytics.exports._exports.Spill`: chunks per partition, in memory while they
are few), from which each export partition is written at a time. Only bot_ranks (a group of
days at a time) and directory_daily look across bots; movers keep each slice's top and rank the
union.

Runs are incremental: :func:`plan_run` finds the first day the archive's changes since the
previous export touch; the days from the Monday of its week are computed, from the raw records
of those days plus what :mod:`._window` carries in from the export, and of each dataset only
the days those changes can alter are written, each day a file (docs/trends.md). A full build is
the same computation over every day.

=================  ==========================================================================
bot_daily          per bot and day: last users/guilds/shards, mean and p95 load, commands run
bot_growth         per bot and day: 1/7/30-day change and percent, 7-day means, 30-day CDGR
bot_ranks          per bot and day: rank by guilds and users, rank change over 1 and 7 days
movers             per day: top gainers/losers over 7 and 30 days, absolute and percent
anomalies          per event: its kind (spike, drop, shift, outage, reset), size, severity
resource_health    per bot and week: p95 load and days above the health threshold
custom_daily       per bot, day and custom field: numeric stats, or the text value and changes
directory_daily    per day: totals, bots reporting, bots first seen, first reporting, removed
bot_forecast       per bot, metric and horizon: forecast and 80% interval (build/_forecast.py)
bot_names          per bot: its name as the listing shows it now (whole every run)
=================  ==========================================================================

Each job is a small function LazyFrame -> LazyFrame, testable on a ten-row frame. Days are UTC
calendar days of ``recorded_at``. Days without a record are never invented: an N-day change
compares with the bot's value on exactly day-N and is null when the bot has no record that day.

For notebooks: :func:`pipeline.load_dataset` / :func:`pipeline.scan_dataset` read an export
back, and the views ``trend_<dataset>`` in the archive read the same files from SQL.
"""

from __future__ import annotations

import string
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from ... import archive
from ...core import ExportError, Settings, StoreError, TrendSettings, first_line, new_run_id
from ..exports import _exports as exports
from ..exports._datasets import DATASETS
from ..exports._exports import DatasetExport
from . import _slices as slices
from . import _window as trend_window
from ._plan import fingerprint, plan_run
from ._slices import dataset_parts
from ._window import Window


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
    # The incremental run that followed a long one for the commits that landed meanwhile.
    then: TrendsReport | None = None

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
        if self.then is not None:
            lines.append(f"then, for what was archived meanwhile: "
                         f"{self.then.summary().splitlines()[0]}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "export_dir": str(self.export_dir),
            "archive": str(self.archive), "seconds": round(self.seconds, 3),
            "mode": self.mode, "since": self.since.isoformat() if self.since else None,
            "reason": self.reason,
            "views": list(self.views),
            "then": self.then.as_dict() if self.then is not None else None,
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
    export touch are recomputed (from the Monday on or before the first), and only the days
    they can alter are rewritten; a run with nothing new computes and writes nothing.
    The previous export's settings differing, or its files missing, make a full rebuild.

    Reads one snapshot of the archive (:func:`pipeline.archive.snapshot`), so a harvest may
    commit meanwhile: its records are the next run's. Writes the archive only to (re)create the
    views, and only when they are missing or name another export directory. Callers hold the
    trends lock around it, which keeps two builds apart, not a build from a harvest.
    """
    started = time.monotonic()
    if not archive.exists(settings):
        # The writer would create an empty archive; trends of nothing help nobody.
        raise StoreError(
            f"there is no archive at {settings.db_path} yet. Run `botstats harvest` (or "
            f"`botstats demo`) first, or point --db at an existing archive."
        )
    written_at = archive.now_utc()
    run_id = run_id or new_run_id(written_at)
    export_dir = settings.export_dir.resolve()
    results: list[DatasetExport] = []
    with archive.snapshot(settings) as con:
        with exports.export_batch(export_dir, run_id=run_id, written_at=written_at,
                                  compression=settings.exports.compression) as batch:
            try:
                plan = plan_run(con, settings.trends, export_dir, batch.previous, full=full)
                batch.source = {"trends": fingerprint(settings.trends),
                                "watermark": plan.watermark}
                if plan.window is None:
                    results = [batch.keep(name) for name in DATASETS]
                    batch.source["state"] = (batch.previous.get("source") or {}).get("state", {})
                else:
                    results = _stage_window(con, settings.trends, batch, plan.window)
            except duckdb.Error as exc:
                raise StoreError(f"cannot read the archive for trends: {exc}") from exc
            except pl.exceptions.PolarsError as exc:
                # polars appends the whole query plan; the first line is the message.
                raise ExportError(f"a trend job failed: {first_line(exc)}") from exc
            except OSError as exc:
                raise ExportError(
                    f"cannot write scratch files under {export_dir}: {exc.strerror or exc}. "
                    f"Check free space and permissions of [exports].dir (or --out)."
                ) from exc
    views = ensure_views(settings, export_dir)
    since = plan.window.start if plan.window is not None else None
    return TrendsReport(run_id, export_dir, settings.db_path, tuple(results), tuple(views),
                        time.monotonic() - started, plan.mode, since, plan.reason)


def _stage_window(con: duckdb.DuckDBPyConnection, t: TrendSettings, batch: exports.ExportBatch,
                  window: Window) -> list[DatasetExport]:
    """Compute the window's days and stage what it writes of each dataset: the days before it
    writes stay as exported (a month file that reaches into them keeps its earlier rows)."""
    computed = dataset_parts(con, t, batch.spill(), slices.CHUNK_ROWS, window=window)
    results = []
    for name, spec in DATASETS.items():
        emit_from = None if spec.whole else window.emit_from(name)
        results.append(batch.stage(name, computed.parts[name], time_column=spec.time_column,
                                   emit_from=emit_from))
    assert batch.source is not None
    batch.source["state"] = {
        table.base: _stage_state(batch, window, table, frame)
        for table, frame in ((trend_window.BOTS, computed.bot_state),
                             (trend_window.TEXTS, computed.text_state))}
    return results


def _stage_state(batch: exports.ExportBatch, window: Window, table: trend_window.StateTable,
                 frame: pl.DataFrame) -> list[str]:
    """Stage the run's state ``frame`` of ``table``: the keys it changed beside the previous
    state's files, or the whole state again (a full build; many keys changed); the files it
    is then in."""
    files = trend_window.state_files(batch.previous, table.base)
    old = None
    if window.start is not None:  # an incremental run: the previous state is whole and read
        old = trend_window.read_state(batch.export_dir, files, table.schema, table.key)
    listed, writes = trend_window.changed_state(old, frame, files, table.base, batch.run_id)
    for relpath, rows in writes.items():
        batch.stage_file(relpath, rows)
    for relpath in set(files) - set(listed):
        batch.remove_file(relpath)
    return listed


@dataclass(frozen=True)
class ExportCompaction:
    """What :func:`compact_exports` did: files before and after, the months merged."""

    export_dir: Path
    files_before: int
    files_after: int
    months: tuple[str, ...]  # dataset/month=YYYY-MM written from its days


def compact_exports(settings: Settings, *, run_id: str | None = None) -> ExportCompaction:
    """Merge the day files of every month that has settled (:func:`~pipeline.analytics.exports._exports.settle_line` of the newest
    day exported) into its month's file, dropping bot_forecast's superseded rows there; an
    export batch like a trends run's (atomic, the manifest last). Callers hold the trends
    lock. Nothing to do (or no export yet): nothing is touched."""
    export_dir = settings.export_dir.resolve()
    manifest = exports.read_manifest(export_dir)
    datasets = manifest.get("datasets", {})

    def count() -> int:
        return sum(len(d.get("partitions", [])) for d in
                   exports.read_manifest(export_dir).get("datasets", {}).values())

    daily = datasets.get("bot_daily")
    newest = daily["date_max"] if daily else None
    before = count()
    if not newest or set(datasets) != set(DATASETS):
        return ExportCompaction(export_dir, before, before, ())
    settled = exports.settle_line(date.fromisoformat(newest[:10]))
    written_at = archive.now_utc()
    merged: list[str] = []
    with exports.export_batch(export_dir, run_id=run_id or new_run_id(written_at),
                              written_at=written_at,
                              compression=settings.exports.compression) as batch:
        for name, spec in DATASETS.items():
            done = batch.merge_days(name, settled=settled, latest_by=spec.current_by)
            merged += [f"{name}/{key}" for key in done.written]
    return ExportCompaction(export_dir, before, count(), tuple(merged))


# How long creating the views keeps trying while harvest commits land on the catalog.
VIEWS_PATIENCE = 60.0


def view_statements(export_dir: Path) -> dict[str, str]:
    """Each ``sql/views/*.sql`` by view name, ``${export_dir}`` the absolute export path."""
    literal = export_dir.resolve().as_posix().replace("'", "''")
    return {file.stem: string.Template(file.read_text(encoding="utf-8")).substitute(
                export_dir=literal)
            for file in sorted((archive.sql_dir() / "views").glob("*.sql"))}


def ensure_views(settings: Settings, export_dir: Path) -> list[str]:
    """The trend_* views over ``export_dir``, (re)created only when the archive lacks them or
    has them otherwise (another export directory, a botstats with other views): a build then
    commits nothing to the archive, and never waits for a harvest's commits."""
    statements = view_statements(export_dir)
    with duckdb.connect() as scratch:  # the views as DuckDB spells them back
        scratch.execute("SET TimeZone = 'UTC'")
        for sql in statements.values():
            scratch.execute(sql)
        wanted = _views_in(scratch, "memory")
    with archive.reader(settings) as con:
        if _views_in(con, archive.ALIAS) == wanted:
            return list(statements)
    deadline = time.monotonic() + VIEWS_PATIENCE
    while True:
        try:
            with archive.writer(settings) as con:
                return create_views(con, export_dir)
        except (duckdb.Error, StoreError) as exc:
            if not archive.is_busy(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _views_in(con: duckdb.DuckDBPyConnection, database: str) -> dict[str, str]:
    return dict(con.execute(
        "SELECT view_name, sql FROM duckdb_views() WHERE database_name = ? AND "
        "view_name LIKE 'trend\\_%' ESCAPE '\\'", [database]).fetchall())


def create_views(con: duckdb.DuckDBPyConnection, export_dir: Path) -> list[str]:
    """Run every ``sql/views/*.sql`` with ``${export_dir}`` set to the absolute export path,
    all in one transaction: a reader sees the old views or the new ones, never a mix, and the
    archive's catalog takes one commit instead of one a view."""
    names = []
    con.execute("BEGIN TRANSACTION")
    try:
        for name, sql in view_statements(export_dir).items():
            try:
                con.execute(sql)
            except duckdb.Error as exc:
                if archive.is_busy(exc):
                    raise
                raise ExportError(f"cannot create the view {name} (sql/views/{name}.sql): "
                                  f"{exc}") from exc
            names.append(name)
        con.execute("COMMIT")
    except BaseException:
        archive.rollback(con)
        raise
    return names


