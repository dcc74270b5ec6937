"""`botstats report|compare|forecast`: read the trend exports back, as an HTML report, bots side by
side, and when a bot reaches a size."""

from __future__ import annotations

from pathlib import Path

import click

from ._base import cli, handle_errors, print_result
from ._options import ID, common_options, settings_from_flags


@cli.command("report")
@common_options
@click.option("--out", type=click.Path(dir_okay=False),
              help="The HTML file to write (default: [report].file, else report.html in the "
                   "export directory).")
@click.option("--bot", "bot_ids", multiple=True, type=ID, metavar="ID",
              help="A bot to give a section of its own (repeatable; default: [report].bots).")
@click.option("--days", type=click.IntRange(min=1), help="Days of history shown (default: "
              "[report].days, 90).")
@click.option("--compare/--no-compare", default=None,
              help="Also show the --bot bots (2 to 4) side by side (default: [report].compare).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@handle_errors
def report_cmd(out: str | None, bot_ids: tuple[str, ...], days: int | None,
               compare: bool | None, as_json: bool) -> None:
    """Write one self-contained HTML report from the trend exports: the directory over time,
    top movers, rank changes, anomalies, resource health, and for each --bot its history,
    forecast band, commands, load and custom series. Opens offline; nothing is fetched."""
    from ..analytics import build_report

    result = build_report(settings_from_flags(), out=Path(out) if out else None,
                          bot_ids=list(bot_ids) or None, days=days, compare=compare)
    print_result(result, as_json, result.summary)


@cli.command("compare")
@common_options
@click.argument("bot_ids", nargs=-1, required=True, type=ID, metavar="BOT BOT [BOT BOT]")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON instead of a table.")
@handle_errors
def compare_cmd(bot_ids: tuple[str, ...], as_json: bool) -> None:
    """Up to four bots side by side, from the trend exports: latest guilds and users, 7 and
    30-day change, compound daily growth, rank and its 7-day change, and the 30-day forecast."""
    from ..analytics import MAX_BOTS, compare

    if not 2 <= len(bot_ids) <= MAX_BOTS:
        raise click.UsageError(f"give 2 to {MAX_BOTS} bot ids, got {len(bot_ids)}.")
    result = compare(settings_from_flags(), list(bot_ids))
    print_result(result, as_json, result.table)


@cli.command("forecast")
@common_options
@click.argument("bot_id", type=ID)
@click.option("--guilds", type=click.IntRange(min=1), help="When does the bot reach this many guilds?")
@click.option("--users", type=click.IntRange(min=1), help="When does the bot reach this many users?")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON instead of a sentence.")
@handle_errors
def forecast_cmd(bot_id: str, guilds: int | None, users: int | None, as_json: bool) -> None:
    """When will BOT_ID reach --guilds N (or --users N) at its current pace, with the 80%
    range of days, from the bot_forecast export."""
    from ..analytics import forecast_reach

    if guilds is not None and users is None:
        metric, target = "guilds", guilds
    elif users is not None and guilds is None:
        metric, target = "users", users
    else:
        raise click.UsageError("give one target: --guilds N or --users N.")
    result = forecast_reach(settings_from_flags(), bot_id, metric, float(target))
    print_result(result, as_json, result.sentence)
