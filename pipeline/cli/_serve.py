"""`botstats serve`: the embedded bot-listing service in the foreground."""

from __future__ import annotations

import errno
from typing import Any

import click

from ._base import cli


def _service_field_options(fn: Any) -> Any:
    """`serve --stat-time-field created_at ...`: the record field names the service uses, so it
    can play a service that names them apart from the defaults (see `botstats probe`)."""
    for record, key, default in (("bot", "id", "id"), ("bot", "name", "name"),
                                 ("stat", "id", "id"), ("stat", "time", "timestamp"),
                                 ("custom", "name", "name"), ("custom", "value", "value")):
        what = "a custom field's" if record == "custom" else f"a {record} record's"
        fn = click.option(f"--{record}-{key}-field", f"{record}_{key}_field", default=default,
                          show_default=True, help=f"The key of {what} {key}.")(fn)
    return fn


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on; 0 picks a free one (the banner shows it).")
@click.option("--bots", type=click.IntRange(1, 1_000_000), default=200, show_default=True,
              help="Bots in the directory (records are generated on demand: 100k is fine).")
@click.option("--users", type=click.IntRange(0, 1_000_000), default=0, show_default=True,
              help="Users owning the bots; 0 = bots // 5, at least 1.")
@click.option("--seed", type=int, default=1, show_default=True,
              help="Seed of all generated data and credentials: same seed (and --end), same data.")
@click.option("--history-days", type=click.IntRange(1, 3650), default=90, show_default=True,
              help="Days of stat history each bot has at start.")
@click.option("--stats-per-day", type=click.IntRange(1, 1440), default=1, show_default=True,
              help="Stat records per bot per day; must divide 86400 (1, 2, 4, 24, 96, ...).")
@click.option("--max-page-size", type=click.IntRange(min=1), default=100, show_default=True,
              help="Most bots GET /bots returns; a larger limit is silently capped.")
@click.option("--stats-page-size", type=click.IntRange(min=0), default=0, show_default=True,
              help="0: GET /bots/:id/stats sends the whole list. N: it pages with limit "
                   "(default and cap N) and skip, oldest first.")
@click.option("--user-lists-page-size", type=click.IntRange(min=0), default=0, show_default=True,
              help="0: a user's bots, servers and webhooks come whole. N: they page with limit "
                   "(default and cap N) and skip.")
@click.option("--bot-reads-need-token", is_flag=True,
              help="GET /bots, /bots/:id, /stats and /stat want Authorization: Bearer <user "
                   "token> too (401 without).")
@click.option("--end", type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%SZ"]),
              metavar="YYYY-MM-DD[THH:MM:SS]",
              help="Virtual clock at start, UTC (default: now, truncated to the hour).")
@click.option("--credentials-file", type=click.Path(dir_okay=False),
              help="Write every user token and bot API key to this JSON file before serving.")
@click.option("--rate-limit", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Requests/second over all clients (token bucket); excess gets 429 + Retry-After. 0 = off.")
@click.option("--error-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Probability of a random 500/502/503 with a JSON, HTML or empty body.")
@click.option("--latency-ms", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Delay added to every interface response, in milliseconds.")
@click.option("--latency-jitter-ms", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Plus a random 0..J milliseconds per response.")
@click.option("--churn-every", type=click.IntRange(min=0), default=0, show_default=True,
              help="Every N-th GET /bots inserts a new bot at the front and removes one. 0 = off.")
@click.option("--malformed-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Share of stat records served malformed (missing id, cpu_load 150, ...).")
@click.option("--bad-json-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Share of bots whose GET /bots/:id/stats body is always truncated JSON (status 200).")
@click.option("--ignore-skip", is_flag=True,
              help="Broken paging: GET /bots ignores skip and always returns the first page.")
@click.option("--live-interval", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Real seconds per stat interval, so new records keep arriving. 0 = only on POST /_admin/advance.")
@click.option("--listing-cut", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="GET /bots shows only the first (1 - P) of the listing, with status 200 "
                   "(1 = an empty list): an outage that looks like the directory emptying.")
@click.option("--duplicate-every", type=click.IntRange(min=0), default=0, show_default=True,
              help="GET /bots repeats a bot after every N-th position (in the same page or an "
                   "earlier one). 0 = off.")
@click.option("--redirect-to", metavar="URL", default="",
              help="Answer every interface request 307 to this origin (same path and query).")
@click.option("--stall-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Share of bots whose GET /bots/:id/stats body stops half-way for "
                   "--stall-seconds.")
@click.option("--stall-seconds", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="How long a stalling body stops.")
@click.option("--gzip-cut-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Share of bots whose GET /bots/:id/stats body is gzip cut in half "
                   "(Content-Encoding: gzip).")
@click.option("--body-fault-times", type=click.IntRange(min=0), default=0, show_default=True,
              help="/stats answers per bot the stall and gzip faults spoil before answering "
                   "whole. 0 = every one.")
@click.option("--access-log", is_flag=True, help="Log every request to stderr (slows the service down).")
@_service_field_options
def serve_cmd(host: str, port: int, bots: int, users: int, seed: int, history_days: int,
              stats_per_day: int, max_page_size: int, stats_page_size: int,
              user_lists_page_size: int, bot_reads_need_token: bool, end: Any,
              credentials_file: str | None,
              rate_limit: float, error_rate: float, latency_ms: float, latency_jitter_ms: float,
              churn_every: int, malformed_rate: float, bad_json_rate: float, ignore_skip: bool,
              live_interval: float, listing_cut: float, duplicate_every: int, redirect_to: str,
              stall_rate: float, stall_seconds: float, gzip_cut_rate: float,
              body_fault_times: int, access_log: bool, **field_names: str) -> None:
    """Run the embedded bot-listing service in the foreground (Ctrl+C stops it).

    Prints the base URL and a few user tokens and bot API keys; see docs/service.md for the data,
    the admin endpoints and each fault.
    """
    from ..service import Faults, InvalidSetting, ServiceConfig, serve

    try:
        faults = Faults(rate_limit=rate_limit, error_rate=error_rate, latency_ms=latency_ms,
                        latency_jitter_ms=latency_jitter_ms, churn_every=churn_every,
                        malformed_rate=malformed_rate, bad_json_rate=bad_json_rate,
                        ignore_skip=ignore_skip, live_interval=live_interval,
                        listing_cut=listing_cut, duplicate_every=duplicate_every,
                        redirect_to=redirect_to, stall_rate=stall_rate,
                        stall_seconds=stall_seconds, gzip_cut_rate=gzip_cut_rate,
                        body_fault_times=body_fault_times)
        cfg = ServiceConfig(bots=bots, users=users, seed=seed, history_days=history_days,
                            stats_per_day=stats_per_day, max_page_size=max_page_size,
                            stats_page_size=stats_page_size,
                            user_lists_page_size=user_lists_page_size,
                            bot_reads_need_token=bot_reads_need_token, end=end,
                            faults=faults, **field_names)
    except InvalidSetting as exc:
        flag = "--" + exc.field.replace("_", "-")
        raise click.BadParameter(exc.problem, param_hint=f"'{flag}'") from exc
    try:
        serve(cfg, host, port, credentials_file, access_log=access_log)
    except OSError as exc:
        fix = ("choose another --port (0 = any free port)" if exc.errno == errno.EADDRINUSE
               else "check --host (an address of this machine, e.g. 127.0.0.1 or 0.0.0.0) "
                    "and --port")
        raise click.UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; {fix}"
                               ) from exc
