"""`botstats harvest|status|trends|sql` and the archive's upkeep (`convert-archive`, `compact`,
`backup`, `restore`): fill the archive, look at it, summarise it, query it, keep it."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import click

from ..operate import setup_logging
from ._base import (
    cli,
    handle_errors,
    harvesting,
    print_json,
    print_result,
    report_and_exit,
)
from ._options import common_options, harvest_options, settings_from_flags, stacked

T = TypeVar("T")

if TYPE_CHECKING:
    import polars as pl

    from ..alerts import AlertsReport
    from ..harvester import HarvestOptions


@cli.command("harvest")
@common_options
@harvest_options(
    full_help="Re-read every bot's whole /stats list (default: only bots whose newest record is "
              "not archived yet).",
    removals_help="Believe a complete listing however many bots it would mark removed (by "
                  "default more than [harvest].max_removed_share of them, or an empty listing, "
                  "ends the run partial with nothing marked).")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Show progress (a bar on a terminal, log lines otherwise).")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON instead of a table.")
@handle_errors
def harvest_cmd(harvest: HarvestOptions, progress: bool, as_json: bool) -> None:
    """Archive every bot and its statistics records (incrementally, exactly once).

    Incremental by default: a bot whose newest record is already archived costs one request.
    Exit codes: 0 complete, 3 partial (some bots failed; the next run retries them),
    1 failed, 4 interrupted, 75 another job holds the archive, 2 usage or config error.
    """
    from ..operate import locked_harvest, tell_harvest
    from ._console import harvest_summary, stderr_console

    settings = settings_from_flags()
    setup_logging(settings)
    report = harvesting(progress, lambda stop, on_progress: locked_harvest(
        settings, harvest, stop=stop, on_progress=on_progress))
    _say_told(tell_harvest(settings, report))
    report_and_exit(report, as_json, lambda r: stderr_console().print(harvest_summary(r)))


def _say_told(told: AlertsReport | None) -> None:
    """What a job's alerts delivered or not, on stderr (nothing when there was nothing)."""
    line = told.summary() if told is not None else ""
    if line:
        click.echo(line, err=True)


def _age_option(_ctx: click.Context, _param: click.Parameter,
                value: str | None) -> timedelta | None:
    from ..operate import parse_age

    try:
        return None if value is None else parse_age(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@cli.command("convert-archive")
@common_options
@click.option("--legacy-python", metavar="PYTHON",
              help="A Python with duckdb 2.x to read the old archive (default: install "
                   "duckdb 2.0 into this environment once, from the package index).")
@handle_errors
def convert_archive_cmd(legacy_python: str | None) -> None:
    """Convert an archive of botstats 0.1 (one DuckDB 2.0 file) to the DuckLake layout, once.

    Every table is copied and its rows counted; the old file is kept as
    <db>.pre-ducklake.duckdb until you delete it.
    """
    from ..operate import convert_archive

    report = convert_archive(settings_from_flags(), python=legacy_python,
                             say=lambda text: click.echo(f"botstats: {text}", err=True))
    click.echo(report.message)


@cli.command("compact")
@common_options
@click.option("--keep-days", default=7.0, show_default=True, type=click.FloatRange(0),
              help="Keep snapshots (and the files they read) this many days: a reader's "
                   "snapshot older than that may lose its files.")
@handle_errors
def compact_cmd(keep_days: float) -> None:
    """Merge the archive's small data files and delete the files no kept snapshot reads; merge
    the trend exports' day files of every settled month into one file.

    Each hourly run adds a few small files; run this daily (cron or [schedule]) to keep the
    file count and the disk at what the data needs.
    """
    from ..operate import compact_archive, compact_exports

    settings = settings_from_flags()
    done = compact_archive(settings, keep_days=keep_days)
    click.echo(f"compacted {settings.archive_name}: data files {done.files_before} -> "
               f"{done.files_after}, {done.bytes_before / 1e6:.1f} -> {done.bytes_after / 1e6:.1f} "
               f"MB; {done.snapshots_expired} snapshots expired")
    merged = compact_exports(settings)
    click.echo(f"compacted the exports in {merged.export_dir}: files {merged.files_before} -> "
               f"{merged.files_after} ({len(merged.months)} months merged from their days)")


@cli.command("backup")
@click.argument("dest", type=click.Path(file_okay=False))
@common_options
@handle_errors
def backup_cmd(dest: str) -> None:
    """Copy the archive into folder DEST (again: only what is new since the last backup there).

    Restore with `botstats restore DEST`.
    """
    from ..operate import backup_archive

    settings = settings_from_flags()
    files, size = backup_archive(settings, Path(dest))
    click.echo(f"backed {settings.archive_name} up into {dest}: {files} data files copied "
               f"({size / 1e6:.1f} MB), the catalog as of now")


@cli.command("restore")
@click.argument("source", type=click.Path(exists=True, file_okay=False))
@common_options
@handle_errors
def restore_cmd(source: str) -> None:
    """Put the backup in folder SOURCE in place of the archive (close notebooks first).

    The next harvest reads again what the backup lacks.
    """
    from ..operate import restore_archive

    settings = settings_from_flags()
    files, size = restore_archive(settings, Path(source))
    click.echo(f"restored {settings.archive_name} from {source} ({files} data files copied, "
               f"{size / 1e6:.1f} MB)")


@cli.command("status")
@common_options
@click.option("--runs", default=10, show_default=True, type=click.IntRange(1, 1000),
              help="How many recent runs to show.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option("--max-age", callback=_age_option, metavar="DURATION",
              help="For monitoring: exit 1 unless a harvest completed within DURATION "
                   "(90m, 2h, 1d).")
@handle_errors
def status_cmd(runs: int, as_json: bool, max_age: timedelta | None) -> None:
    """Show recent harvest runs and the archive's size (as of its last commit)."""
    from ..operate import (
        RUN_COLUMNS,
        SHARD_COLUMNS,
        archive_status,
        describe_drift,
        describe_latest,
        describe_undelivered,
        run_lines,
        shard_lines,
    )
    from ._console import print_table

    info = archive_status(settings_from_flags(), runs=runs, max_age=max_age)
    if as_json:
        print_json(info.as_dict())
    else:
        click.echo(f"archive {info.path}  ({info.size_mb:.1f} MB: catalog "
                   f"{info.catalog_mb:.1f}, data {info.data_mb:.1f}; last written "
                   f"{info.published_at})")
        print_table(run_lines(info), list(RUN_COLUMNS) if info.runs else ["run_id"],
                    title="recent runs")
        if info.shards:
            print_table(shard_lines(info), list(SHARD_COLUMNS), title="each shard's last run")
        for line in describe_latest(info.latest_run) if info.latest_run else []:
            click.echo(line)
        for line in describe_drift(info.new_fields):
            click.echo(line)
        for line in describe_undelivered(info.undelivered_alerts):
            click.echo(line)
        print_table(list(info.tables.items()), ["table", "rows"], title="tables")
    if info.stale:
        click.echo(f"botstats: stale: {info.stale}", err=True)
        sys.exit(1)


@cli.command("trends")
@common_options
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Export directory (overrides [exports].dir).")
@click.option("--full", is_flag=True, help="Recompute every day from the whole archive (default: "
              "only the days the records archived since the last export touch).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of a summary.")
@handle_errors
def trends_cmd(out_dir: str | None, full: bool, as_json: bool) -> None:
    """Compute the trend datasets, export them as parquet and create the trend_* views.

    Takes the archive's run lock (like `botstats run`), recomputes the days that records
    archived since the last export touch (from the Monday before the first; --full: all),
    writes only the month partitions whose content changed, and recreates the views.
    """
    from ..operate import locked_trends, tell_trends

    settings = settings_from_flags(**{"exports.dir": out_dir})
    setup_logging(settings)
    report = locked_trends(settings, full=full)
    _say_told(tell_trends(settings))
    print_result(report, as_json, report.summary)


def _params_option(_ctx: click.Context, _param: click.Parameter,
                   items: tuple[str, ...]) -> dict[str, str]:
    from ..analytics import parse_variables

    try:
        return parse_variables(items)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--param") from None


class _Output(NamedTuple):
    """Where and how `botstats sql` gives its result: ``fmt``, the file (None: stdout) and the
    rows a table shows."""

    fmt: str
    path: str | None
    max_rows: int


def _output_options(fn: Callable[..., T]) -> Callable[..., T]:
    """--format, --output and --max-rows, handed to the command as one ``out``: an _Output."""

    @functools.wraps(fn)
    def command(*args: Any, fmt: str, output: str | None, max_rows: int, **more: Any) -> T:
        return fn(*args, out=_Output(fmt, output, max_rows), **more)

    return stacked(command, (
        click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "parquet"]),
                     default="table", show_default=True, help="Output format."),
        click.option("--output", "-o", type=click.Path(dir_okay=False),
                     help="Write the result to this file (required for parquet)."),
        click.option("--max-rows", default=100, show_default=True, type=click.IntRange(1),
                     help="Rows shown in table format (files always get every row).")))


@cli.command("sql")
@click.argument("query", required=False)
@click.option("-f", "--file", "sql_file", type=click.Path(exists=True, dir_okay=False),
              help="Read the SQL from this file (e.g. sql/queries/bot_history.sql).")
@click.option("--param", "-p", "variables", multiple=True, metavar="NAME=VALUE",
              callback=_params_option,
              help="Set a DuckDB variable the query reads as getvariable('NAME'); repeatable.")
@_output_options
@click.option("--attach", "attach", is_flag=True,
              help="Print the SQL that opens the archive read-only in a DuckDB 1.5 session "
                   "(e.g. duckdb -cmd \"$(botstats sql --attach)\") and exit.")
@common_options
@handle_errors
def sql_cmd(query: str | None, sql_file: str | None, variables: dict[str, str], out: _Output,
            attach: bool) -> None:
    """Run SQL against the archive (read-only, as of its last commit): tables and the trend_*
    views.

    Give the query as an argument or with -f FILE. Prints a table, or writes csv/json/parquet
    with --format and --output (csv and json go to stdout without --output). SQL errors exit 2.
    """
    from ..analytics import attach_sql, read_query_file, run_query

    if attach:
        click.echo(attach_sql(settings_from_flags()))
        return
    if (query is None) == (sql_file is None):
        raise click.UsageError("give a QUERY or -f FILE (one of them).")
    if out.fmt == "parquet" and not out.path:
        raise click.UsageError("--format parquet needs --output FILE.")
    text = read_query_file(sql_file) if sql_file else str(query)
    if not text.strip():
        where = f" in {sql_file}" if sql_file else ""
        raise click.UsageError(f"the query{where} is empty: give a SELECT, e.g. "
                               f"\"SELECT count(*) FROM bot_stats\".")
    limit = out.max_rows + 1 if out.fmt == "table" else None
    frame = run_query(settings_from_flags(), text, variables, limit=limit)
    if frame is None:
        click.echo("botstats: the query returned no result set (only comments, or a statement "
                   "such as SET): nothing to show"
                   + (f" or write to {out.path}" if out.path else "") + ".", err=True)
        return
    _write_result(frame, out)


def _write_result(frame: pl.DataFrame, out: _Output) -> None:
    from ..analytics import to_json, write_frame, write_text
    from ._console import plain_table

    if out.fmt == "table":
        table = plain_table(frame.head(out.max_rows), more=frame.height > out.max_rows)
        if out.path:
            write_text(table + "\n", Path(out.path))
        else:
            click.echo(table)
    elif out.path:
        write_frame(frame, Path(out.path), out.fmt)
    elif out.fmt == "csv":
        click.echo(frame.write_csv(), nl=False)
    else:
        click.echo(to_json(frame))
