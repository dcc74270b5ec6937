"""`botstats alerts test|list`: try every destination of [alerts], and read the ledger."""

from __future__ import annotations

import sys

import click

from ..operate import setup_logging
from ._base import cli, handle_errors, print_json
from ._options import common_options, settings_from_flags


@cli.group("alerts")
def alerts_group() -> None:
    """Alerts ([alerts]): send a sample to every destination, or show what was told.

    Runs tell after their work is committed (`botstats run`); each alert is kept in the
    archive's ledger with what each destination answered (docs/alerts.md).
    """


@alerts_group.command("test")
@click.option("--json", "as_json", is_flag=True, help="Print what each destination answered "
                                                       "as JSON.")
@common_options
@handle_errors
def alerts_test(as_json: bool) -> None:
    """Send a sample alert to every destination and say what each answered (nothing is
    recorded). Exit 1 if one was not delivered, 2 if there is no destination."""
    from ..alerts import send_test

    settings = settings_from_flags()
    setup_logging(settings)
    if not settings.alerts.destinations:
        click.echo(f"botstats: no alert destinations in {settings.source or 'the settings'}: "
                   f"declare one as [alerts.destinations.NAME] (docs/alerts.md)", err=True)
        sys.exit(2)
    results = send_test(settings, settings.alerts)
    if as_json:
        print_json([r.as_dict() for r in results])
    else:
        for result in results:
            click.echo(result.line())
    sys.exit(0 if all(r.delivery.delivered for r in results) else 1)


@alerts_group.command("list")
@click.option("--limit", type=click.IntRange(min=1), default=30, show_default=True,
              help="How many rows of the ledger to show, newest first.")
@click.option("--undelivered", is_flag=True,
              help="Only the alerts not yet delivered (the next run tries them again).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@common_options
@handle_errors
def alerts_list(limit: int, undelivered: bool, as_json: bool) -> None:
    """Show the alerts ledger: when each alert was tried, where, and what was answered."""
    from ..alerts import ledger_rows
    from ._console import print_table

    rows = ledger_rows(settings_from_flags(), limit=limit, undelivered=undelivered)
    if as_json:
        print_json([r.as_dict() for r in rows])
        return
    if not rows:
        click.echo("no alerts not yet delivered" if undelivered else "no alerts told yet")
        return
    print_table([(r.tried_at.strftime("%Y-%m-%d %H:%M"), r.destination, r.kind, r.outcome,
                  r.title, r.answer) for r in rows],
                ["tried (UTC)", "destination", "kind", "outcome", "alert", "answer"],
                title="alerts, newest first")
