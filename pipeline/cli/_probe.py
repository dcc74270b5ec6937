"""`botstats probe`: what the service does where the interface leaves it open."""

from __future__ import annotations

import click

from ._base import cli, handle_errors, print_json
from ._options import common_options, settings_from_flags, user_token_option


@cli.command("probe")
@common_options
@user_token_option
@click.option("--bot-key", help="A bot's API key (default: $BOTSTATS_BOT_KEY), for --post.")
@click.option("--post", "post_bot", metavar="BOT_ID",
              help="Also post one stat record for BOT_ID (its newest counts again) to see what "
                   "the service answers. Never done without this flag and a bot key.")
@click.option("--max-requests", type=click.IntRange(min=1), default=60, show_default=True,
              help="Most requests the probe makes (429 retries included).")
@click.option("--write", "write_file", type=click.Path(dir_okay=False),
              help="Merge the settings it decides into this config file (created if missing; "
                   "its comments and other settings are kept).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@handle_errors
def probe_cmd(bot_key: str | None, post_bot: str | None, max_requests: int,
              write_file: str | None, as_json: bool) -> None:
    """Find out what the service does where the interface leaves it open, and propose settings.

    A few polite reads (GET only unless --post): the listing's page size, cap, skip and order;
    which fields are ids, names and times; whether /stats and the user lists are paged; auth of
    bot reads; rate-limit headers and error bodies. Each finding comes with its evidence.
    """
    from pathlib import Path

    from ..probe import run_probe, write_settings

    settings = settings_from_flags(**({"bot_key": bot_key} if bot_key else {}))
    report = run_probe(settings, max_requests=max_requests, post_bot=post_bot)
    written = write_settings(report, Path(write_file)) if write_file else []
    if as_json:
        print_json({**report.as_dict(), "written": written, "written_to": write_file})
        return
    click.echo("\n".join(report.lines()))
    if write_file:
        click.echo(f"\nwrote {len(written)} settings into {write_file}: {', '.join(written)}")
