"""`botstats run|schedule|cron|demo|config`: the jobs an operator runs, schedules or tries."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..operate import setup_logging
from ._base import (
    cli,
    handle_errors,
    harvesting,
    print_json,
    report_and_exit,
)
from ._options import (
    common_options,
    config_option,
    harvest_options,
    settings_from_flags,
    shard_option,
    stacked,
    typed,
)

T = TypeVar("T")

if TYPE_CHECKING:
    from ..core import Shard
    from ..harvester import HarvestOptions
    from ..operate import DemoOptions, RunReport


@cli.command("config")
@common_options
@handle_errors
def config_cmd() -> None:
    """Print the effective settings as JSON (secrets shown only as set/unset)."""
    from ..core import as_dict

    print_json(as_dict(settings_from_flags()))


def _print_run(report: RunReport) -> None:
    from rich.console import Console

    from ._console import harvest_summary

    if report.harvest is not None:
        Console(highlight=False).print(harvest_summary(report.harvest))
    if report.trends is not None:
        click.echo(report.trends.summary())
    elif report.trends_error:
        click.echo(f"trends: failed: {report.trends_error}")
    elif report.trends_skipped:
        click.echo(f"trends: not run ({report.trends_skipped})")
    if report.report is not None:
        click.echo(report.report.summary())
    elif report.report_error:
        click.echo(f"report: failed: {report.report_error}")
    memory = report.memory
    if memory.trends and memory.fresh_process:
        click.echo(f"memory: peak {memory.harvest} MB harvesting, {memory.trends} MB "
                   f"for the trends and report (a fresh process)")
    elif memory.trends or memory.harvest:
        click.echo(f"memory: peak {memory.trends or memory.harvest} MB")
    if report.alerts is not None and report.alerts.summary():
        click.echo(report.alerts.summary())
    if report.took_over is not None:
        click.echo(f"note: took over the lock of a run that died without releasing it "
                   f"(pid {report.took_over.pid}, run {report.took_over.run_id})")
    click.echo(f"run {report.run_id or '-'}: {report.status} (exit {report.exit_code})")


@cli.command("run")
@common_options
@harvest_options(
    full_help="Re-read every bot's whole /stats list (see `harvest --full`).",
    removals_help="Believe a complete listing however many bots it would mark removed (see "
                  "`harvest --accept-removals`).")
@click.option("--full-trends", is_flag=True, help="Recompute the trends from the whole archive "
              "(see `trends --full`).")
@click.option("--lock-timeout", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Seconds to wait while another job holds the archive lock, then exit 75 "
                   "(overrides [run].lock_timeout).")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Show progress (a bar on a terminal, log lines otherwise).")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON instead of a summary.")
@handle_errors
def run_cmd(harvest: HarvestOptions, full_trends: bool, lock_timeout: float | None,
            progress: bool, as_json: bool) -> None:
    """Harvest, then build trends: the one command a crontab calls.

    Takes the archive's run lock first, so two runs (or a run and `botstats schedule`) never
    overlap. SIGTERM or Ctrl+C finishes the current batch and records the run as interrupted.
    Exit codes: 0 complete, 3 partial, 1 failed, 4 interrupted, 75 another run holds the lock
    (the message names it), 2 usage or config error.
    """
    from ..operate import (
        RunOptions,
        can_hand_off,
        finish_run,
        hand_off,
        resumed,
        run,
        stop_on_signals,
    )

    settings = settings_from_flags(**{"run.lock_timeout": lock_timeout})
    setup_logging(settings)
    report = resumed()  # this process is the fresh image a harvest handed its run to
    if report is None:
        options = RunOptions(harvest, full_trends=full_trends,
                             hand_off=settings.run.fresh_process and typed().entry_point
                             and can_hand_off())
        report = harvesting(progress, lambda stop, on_progress: run(
            settings, options, stop=stop, on_progress=on_progress))
        if report.trends_pending:
            hand_off(report)  # returns only if the exec failed
    if report.trends_pending:
        with stop_on_signals() as stop:
            report = finish_run(settings, report, full_trends=full_trends, stop=stop)
    report_and_exit(report, as_json, _print_run)


@cli.command("schedule")
@common_options
@click.option("--harvest-cron", metavar="EXPR",
              help="Override [schedule].harvest. A crontab expression; 6 fields = seconds first "
                   "(e.g. '*/5 * * * * *', for tests); '' disables the job.")
@click.option("--trends-cron", metavar="EXPR",
              help="Override [schedule].trends, like --harvest-cron.")
@click.option("--dry-run", is_flag=True, help="Print each job's next 5 run times and exit.")
@handle_errors
def schedule_cmd(harvest_cron: str | None, trends_cron: str | None, dry_run: bool) -> None:
    """Run the harvest and trends jobs on [schedule]'s crontab expressions, in the foreground.

    Standard crontab numbering (0 and 7 = Sunday, 1-5 = Mon-Fri) in [schedule].timezone (UTC
    by default). One run of each job at a time, missed runs coalesced, every run, skip and miss
    logged; jobs take the archive lock, so a manual `botstats run` never overlaps them.
    SIGTERM or Ctrl+C: the running job finishes its current batch (the run is recorded as
    interrupted), then the scheduler exits 0.
    """
    from ..operate import Crons, describe_schedule, run_scheduler

    settings = settings_from_flags()
    setup_logging(settings)
    crons = Crons(harvest_cron, trends_cron)
    if dry_run:
        for name, expr, times in describe_schedule(settings, crons=crons):
            click.echo(f"{name}: {expr}  ({settings.schedule.timezone})")
            for when in times:
                click.echo(f"  {when:%a %Y-%m-%d %H:%M:%S %Z}")
        return
    sys.exit(run_scheduler(settings, crons=crons))


@cli.command("cron")
@common_options
@shard_option
@handle_errors
def cron_cmd(shard: Shard | None) -> None:
    """Print a crontab line and a systemd service + timer that call `botstats run`.

    They use absolute paths to this installation's botstats and config file, and
    [schedule].harvest in [schedule].timezone. With --shard K/N, for the worker of shard K:
    `botstats run --shard K/N`, units named botstats-shard-K.
    """
    from ..operate import cron_text

    settings = settings_from_flags()
    flags: tuple[str, ...] = ()
    if "store.db" in typed().overrides:
        flags += ("--db", str(settings.db_path.absolute()))
    if "service.base_url" in typed().overrides:
        flags += ("--base-url", settings.service.base_url)
    if "store.catalog" in typed().overrides:  # without its password: that goes in the env file
        flags += ("--catalog", settings.store.catalog)
    click.echo(cron_text(settings, typed().config, flags, shard=shard), nl=False)


def _divides_a_day(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
    if 86_400 % value:
        raise click.BadParameter(f"{value} does not divide 86400 (try 1, 2, 4, 24).")
    return value


def _demo_options(fn: Callable[..., T]) -> Callable[..., T]:
    """--bots, --days, --stats-per-day, --events and --fresh, handed to the command as one
    ``options``: :class:`~pipeline.operate.DemoOptions`, with the --config typed."""

    @functools.wraps(fn)
    def command(*args: Any, bots: int, days: int, stats_per_day: int, events: float,
                fresh: bool, **more: Any) -> T:
        from ..operate import DemoOptions

        options = DemoOptions(bots=bots, days=days, stats_per_day=stats_per_day, events=events,
                              config=typed().config, fresh=fresh)
        return fn(*args, options=options, **more)

    return stacked(command, (
        click.option("--bots", type=click.IntRange(1, 100_000), default=200, show_default=True,
                     help="Bots the embedded service lists."),
        click.option("--days", type=click.IntRange(1, 3650), default=90, show_default=True,
                     help="Days of history per bot."),
        click.option("--stats-per-day", type=click.IntRange(1, 1440), default=2,
                     show_default=True, callback=_divides_a_day,
                     help="Stat records per bot per day (must divide 86400)."),
        click.option("--events", type=click.FloatRange(0, 1), default=0.1, show_default=True,
                     help="Share of bots the service plants events on (spikes, level shifts, "
                          "outages, ...; GET /_admin/events has the truth). 0 = none."),
        click.option("--fresh", is_flag=True,
                     help="Delete a previous demo's archive and exports in --dir first.")))


@cli.command("demo")
@click.option("--dir", "directory", default="data", show_default=True, type=click.Path(file_okay=False),
              help="Where the archive (archive.ducklake) and exports (exports/) go.")
@_demo_options
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@config_option
@handle_errors
def demo_cmd(directory: str, options: DemoOptions, as_json: bool) -> None:
    """Start the embedded service, run harvest + trends against it, show what was written.

    The archive goes to DIR/archive.ducklake (default data/, the default [store].db, so
    `botstats sql` and the notebook find it without flags).
    """
    from rich.console import Console

    from ..operate import botstats_command, demo, next_steps
    from ._console import print_table

    # Logging follows the user's settings (the demo's own overrides are applied inside).
    setup_logging(settings_from_flags())
    report = harvesting(not as_json, lambda stop, on_progress: demo(
        directory, options, stop=stop, on_progress=on_progress))
    if as_json:
        print_json(report.as_dict())
        sys.exit(report.run.exit_code)
    out = Console(highlight=False)
    _print_run(report.run)
    click.echo()
    print_table(list(report.tables.items()), ["table", "rows"],
                title=f"archive: {report.settings.db_path}", console=out)
    print_table(list(report.datasets.items()), ["dataset", "rows"],
                title=f"exports: {report.settings.export_dir}", console=out)
    click.echo(next_steps(report, directory, botstats_command(absolute=False)))
    sys.exit(report.run.exit_code)
