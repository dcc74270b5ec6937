"""The `botstats` command: parse, call one library function, print. No logic lives here.

Exit codes: 0 ok; 1 the service answered with an error or could not be reached;
2 usage or config error; see README for the harvest/run codes.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from datetime import timedelta
from functools import wraps
from typing import Any, NoReturn, TypeVar

import click

from . import __version__
from .config import Settings, load_settings
from .errors import BotstatsError
from .logs import setup_logging

T = TypeVar("T")

EXIT_OK = 0
EXIT_API = 1
EXIT_USAGE = 2


def _fail(exc: BotstatsError) -> None:
    click.echo(f"botstats: error: {exc}", err=True)
    sys.exit(exc.exit_code)


def handle_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """Turn our errors into a one-line message and the documented exit code (no traceback)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except BotstatsError as exc:
            _fail(exc)
        except KeyboardInterrupt:
            click.echo("botstats: interrupted", err=True)
            sys.exit(130)
        raise AssertionError("unreachable")

    return wrapper


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


class Ctx:
    """What the group options give every command: the flags to layer over config and env."""

    def __init__(self, config: str | None, overrides: dict[str, Any]) -> None:
        self.config = config
        self.overrides = overrides

    def settings(self, **more: Any) -> Settings:
        return load_settings(self.config, overrides={**self.overrides, **more})


pass_ctx = click.make_pass_decorator(Ctx)


def common_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--config/--base-url/--db are accepted on every command as well as on the group."""
    fn = click.option("--config", "config_file", type=click.Path(dir_okay=False),
                      help="Config file (default: $BOTSTATS_CONFIG, else ./config.toml).")(fn)
    fn = click.option("--base-url", help="Service base URL (overrides [service].base_url).")(fn)
    fn = click.option("--db", help="DuckDB archive path (overrides [store].db).")(fn)
    return fn


def settings_from(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None,
                  **more: Any) -> Settings:
    cfg = config_file or ctx.config
    overrides = {**ctx.overrides, "service.base_url": base_url or ctx.overrides.get("service.base_url"),
                 "store.db": db or ctx.overrides.get("store.db"), **more}
    return load_settings(cfg, overrides=overrides)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="botstats")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Config file (default: $BOTSTATS_CONFIG, else ./config.toml).")
@click.option("--base-url", help="Service base URL (overrides [service].base_url).")
@click.option("--db", help="DuckDB archive path (overrides [store].db).")
@click.option("--user-token", help="User token for the user endpoints (default: $BOTSTATS_USER_TOKEN).")
@click.option("--log-format", type=click.Choice(["text", "json"]), help="Log format (overrides [log].format).")
@click.option("--log-file", help="Also append logs to this file (overrides [log].file).")
@click.pass_context
def cli(click_ctx: click.Context, config_file: str | None, base_url: str | None, db: str | None,
        user_token: str | None, log_format: str | None, log_file: str | None) -> None:
    """botstats: archive a bot-listing service into DuckDB and compute trends.

    Settings come from defaults < config.toml < BOTSTATS_* environment < these flags.
    """
    click_ctx.obj = Ctx(config_file, {
        "service.base_url": base_url, "store.db": db, "user_token": user_token,
        "log.format": log_format, "log.file": log_file,
    })


# --- config -------------------------------------------------------------------------------
@cli.command("config")
@common_options
@pass_ctx
@handle_errors
def config_cmd(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None) -> None:
    """Print the effective settings as JSON (secrets shown only as set/unset)."""
    from .config import as_dict

    print_json(as_dict(settings_from(ctx, config_file, base_url, db)))


# --- service (embedded bot-listing service) ------------------------------------------------
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
@click.option("--access-log", is_flag=True, help="Log every request to stderr (slows the service down).")
def serve_cmd(host: str, port: int, bots: int, users: int, seed: int, history_days: int,
              stats_per_day: int, max_page_size: int, stats_page_size: int,
              user_lists_page_size: int, bot_reads_need_token: bool, end: Any,
              credentials_file: str | None,
              rate_limit: float, error_rate: float, latency_ms: float, latency_jitter_ms: float,
              churn_every: int, malformed_rate: float, bad_json_rate: float, ignore_skip: bool,
              live_interval: float, access_log: bool) -> None:
    """Run the embedded bot-listing service in the foreground (Ctrl+C stops it).

    Prints the base URL and a few user tokens and bot API keys; see docs/service.md for the data,
    the admin endpoints and each fault.
    """
    from .service import Faults, ServiceConfig, serve

    try:
        faults = Faults(rate_limit=rate_limit, error_rate=error_rate, latency_ms=latency_ms,
                        latency_jitter_ms=latency_jitter_ms, churn_every=churn_every,
                        malformed_rate=malformed_rate, bad_json_rate=bad_json_rate,
                        ignore_skip=ignore_skip, live_interval=live_interval)
        cfg = ServiceConfig(bots=bots, users=users, seed=seed, history_days=history_days,
                            stats_per_day=stats_per_day, max_page_size=max_page_size,
                            stats_page_size=stats_page_size,
                            user_lists_page_size=user_lists_page_size,
                            bot_reads_need_token=bot_reads_need_token, end=end,
                            faults=faults)
    except ValueError as exc:
        # "stats_per_day=7 is not allowed: ..." -> Invalid value for '--stats-per-day': 7 ...
        name, _, problem = str(exc).partition("=")
        flag = "--" + name.removeprefix("Faults.").replace("_", "-")
        raise click.BadParameter(problem, param_hint=f"'{flag}'") from exc
    try:
        serve(cfg, host, port, credentials_file, access_log=access_log)
    except OSError as exc:
        fix = ("choose another --port (0 = any free port)" if exc.errno == errno.EADDRINUSE
               else "check --host (an address of this machine, e.g. 127.0.0.1 or 0.0.0.0) "
                    "and --port")
        raise click.UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; {fix}"
                               ) from exc



# --- client (the interface by hand) --------------------------------------------------------
class _Id(click.ParamType):
    """A user or bot id: any text but an empty one (which would name another endpoint)."""

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if not text.strip():
            self.fail("an id cannot be empty.", param, ctx)
        return text


ID = _Id()


def _call_client(settings: Settings, method: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
    """Open one client, make one call, close it: each command is one `asyncio.run`."""
    from .client import Client

    async def call() -> T:
        async with Client(settings) as client:
            return await method(client)

    return run_async(call())


def _user_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--user-token",
                      help="User token (default: $BOTSTATS_USER_TOKEN). Sent as 'Bearer <token>'.")(fn)
    return common_options(fn)


def _user_settings(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None,
                   user_token: str | None) -> Settings:
    # Only a token typed here may override one given to the group.
    extra = {"user_token": user_token} if user_token else {}
    return settings_from(ctx, config_file, base_url, db, **extra)


@cli.group("users")
def users_group() -> None:
    """Read users: the current user, a user, and a user's bots, servers and webhooks.

    Needs a user token: $BOTSTATS_USER_TOKEN or --user-token.
    """


@users_group.command("me")
@_user_options
@pass_ctx
@handle_errors
def users_me(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None,
             user_token: str | None) -> None:
    """Print the current user (GET /users/@me)."""
    settings = _user_settings(ctx, config_file, base_url, db, user_token)
    print_json(_call_client(settings, lambda c: c.me()))


def _user_read_command(name: str, method: str, help_text: str, *, a_list: bool) -> None:
    """`botstats users NAME USER_ID`: one GET of a user endpoint, printed as JSON; a list takes
    --limit/--skip, for a service that pages it."""

    def command(ctx: Ctx, user_id: str, config_file: str | None, base_url: str | None,
                db: str | None, user_token: str | None, limit: int | None = None,
                skip: int = 0) -> None:
        settings = _user_settings(ctx, config_file, base_url, db, user_token)
        paging = {"limit": limit, "skip": skip} if a_list else {}
        print_json(_call_client(settings, lambda c: getattr(c, method)(user_id, **paging)))

    decorators = [users_group.command(name, help=help_text), click.argument("user_id", type=ID)]
    if a_list:
        decorators += [
            click.option("--limit", type=click.IntRange(min=1),
                         help="Ask one page of this many (limit/skip), for a service that pages "
                              "the list; default: no paging parameters sent."),
            click.option("--skip", type=click.IntRange(min=0), default=0, show_default=True,
                         help="Items to skip (with --limit)."),
        ]
    decorators += [_user_options, pass_ctx, handle_errors]
    for decorate in reversed(decorators):
        command = decorate(command)


for _name, _method, _help, _list in (
    ("get", "user", "Print the user USER_ID (GET /users/:user_id).", False),
    ("bots", "user_bots", "Print the bots of user USER_ID (GET /users/:user_id/bots).", True),
    ("servers", "user_servers", "Print the servers of user USER_ID (GET /users/:user_id/servers).",
     True),
    ("webhooks", "user_webhooks",
     "Print the webhooks of user USER_ID (GET /users/:user_id/webhooks).", True),
):
    _user_read_command(_name, _method, _help, a_list=_list)


@cli.group("bots")
def bots_group() -> None:
    """Read bots: a page of bots, one bot, its stat records, its last stat. No credentials."""


@bots_group.command("list")
@click.option("--limit", type=click.IntRange(min=1),
              help="Bots per page (default: [service].page_size). The service may return fewer.")
@click.option("--skip", type=click.IntRange(min=0), default=0, show_default=True,
              help="Bots to skip (offset).")
@common_options
@pass_ctx
@handle_errors
def bots_list(ctx: Ctx, limit: int | None, skip: int, config_file: str | None,
              base_url: str | None, db: str | None) -> None:
    """Print one page of bots (GET /bots?limit=N&skip=N)."""
    settings = settings_from(ctx, config_file, base_url, db)
    print_json(_call_client(settings, lambda c: c.list_bots(limit=limit, skip=skip)))


@bots_group.command("get")
@click.argument("bot_id", type=ID)
@common_options
@pass_ctx
@handle_errors
def bots_get(ctx: Ctx, bot_id: str, config_file: str | None, base_url: str | None,
             db: str | None) -> None:
    """Print the bot BOT_ID (GET /bots/:bot_id)."""
    settings = settings_from(ctx, config_file, base_url, db)
    print_json(_call_client(settings, lambda c: c.bot(bot_id)))


@bots_group.command("stats")
@click.argument("bot_id", type=ID)
@click.option("--limit", type=click.IntRange(min=1),
              help="Ask one page of this many records (limit/skip), for a service that pages "
                   "/stats; default: no paging parameters sent.")
@click.option("--skip", type=click.IntRange(min=0), default=0, show_default=True,
              help="Records to skip (with --limit).")
@common_options
@pass_ctx
@handle_errors
def bots_stats(ctx: Ctx, bot_id: str, limit: int | None, skip: int, config_file: str | None,
               base_url: str | None, db: str | None) -> None:
    """Print the stat records of bot BOT_ID (GET /bots/:bot_id/stats)."""
    settings = settings_from(ctx, config_file, base_url, db)
    print_json(_call_client(settings, lambda c: c.bot_stats(bot_id, limit=limit, skip=skip)))


@bots_group.command("stat")
@click.argument("bot_id", type=ID)
@common_options
@pass_ctx
@handle_errors
def bots_stat(ctx: Ctx, bot_id: str, config_file: str | None, base_url: str | None,
              db: str | None) -> None:
    """Print the most recent stat record of bot BOT_ID (GET /bots/:bot_id/stat)."""
    settings = settings_from(ctx, config_file, base_url, db)
    print_json(_call_client(settings, lambda c: c.bot_last_stat(bot_id)))


def _custom_value(raw: str) -> int | float | bool | str:
    """--custom values: an integer, a finite number, true/false, else the text itself."""
    import math
    import re

    if re.fullmatch(r"[+-]?\d+", raw):
        return int(raw)
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if math.isfinite(number):  # "nan"/"inf" are not JSON numbers: keep them as text
        return number
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return raw


def _parse_custom(_ctx: click.Context, _param: click.Parameter,
                  pairs: tuple[str, ...]) -> list[tuple[str, Any]]:
    parsed = []
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}.")
        parsed.append((name.strip(), _custom_value(raw)))
    return parsed


@cli.command("post-stat")
@click.argument("bot_id", type=ID)
@click.option("--users", type=click.IntRange(min=0), required=True, help="Count of bot users.")
@click.option("--guilds", type=click.IntRange(min=0), required=True, help="Count of bot guilds.")
@click.option("--shards", type=click.IntRange(min=0), help="Count of bot shards.")
@click.option("--memory-load", type=click.IntRange(0, 100), help="Percent of memory in use.")
@click.option("--cpu-load", type=click.IntRange(0, 100), help="Percent of CPU in use.")
@click.option("--commands-executed", type=click.IntRange(min=0), help="Count of executed commands.")
@click.option("--custom", "custom", multiple=True, metavar="NAME=VALUE", callback=_parse_custom,
              help="Custom field (repeatable); VALUE is read as integer, number, true/false, "
                   "else text.")
@click.option("--bot-key", help="The bot's API key (default: $BOTSTATS_BOT_KEY). Sent as-is.")
@common_options
@pass_ctx
@handle_errors
def post_stat(ctx: Ctx, bot_id: str, users: int, guilds: int, shards: int | None,
              memory_load: int | None, cpu_load: int | None, commands_executed: int | None,
              custom: list[tuple[str, Any]], bot_key: str | None, config_file: str | None,
              base_url: str | None, db: str | None) -> None:
    """Publish one stat record for bot BOT_ID (POST /bots/:bot_id/stats) and print it.

    Not retried on a server error or timeout (the record may have been stored): check with
    `botstats bots stat BOT_ID` before posting again.
    """
    settings = settings_from(ctx, config_file, base_url, db,
                             **({"bot_key": bot_key} if bot_key else {}))
    payload: dict[str, Any] = {"users": users, "guilds": guilds}
    optional = {"shards": shards, "memory_load": memory_load, "cpu_load": cpu_load,
                "commands_executed": commands_executed}
    payload.update({k: v for k, v in optional.items() if v is not None})
    if custom:
        name_key, value_key = settings.fields.custom_name, settings.fields.custom_value
        payload["custom"] = [{name_key: name, value_key: value} for name, value in custom]
    print_json(_call_client(settings, lambda c: c.post_stat(bot_id, payload)))


# --- harvest / status -----------------------------------------------------------------------
@cli.command("harvest")
@common_options
@click.option("--full", is_flag=True, help="Re-read every bot's whole /stats list (default: only "
              "bots whose newest record is not archived yet).")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Show progress (a bar on a terminal, log lines otherwise).")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON instead of a table.")
@pass_ctx
@handle_errors
def harvest_cmd(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None,
                full: bool, progress: bool, as_json: bool) -> None:
    """Archive every bot and its statistics records into DuckDB.

    Incremental by default: a bot whose newest record is already archived costs one request.
    Exit codes: 0 complete, 3 partial (some bots failed; the next run retries them),
    1 failed, 4 interrupted, 75 another job holds the archive, 2 usage or config error.
    """
    from .console import harvest_progress, harvest_summary, stderr_console
    from .harvest import harvest
    from .lock import run_lock
    from .runner import stop_on_signals

    settings = settings_from(ctx, config_file, base_url, db)
    setup_logging(settings)
    # SIGTERM/Ctrl-C: finish the current batch, record the run interrupted, exit 4.
    with stop_on_signals(threading.Event()) as stop, \
            run_lock(settings, "harvest", stop=stop), harvest_progress(progress) as on_progress:
        report = harvest(settings, full=full, on_progress=on_progress, stop=stop)
    if as_json:
        print_json(report.as_dict())
    else:
        stderr_console().print(harvest_summary(report))
    sys.exit(report.exit_code)


def _age_option(_ctx: click.Context, _param: click.Parameter,
                value: str | None) -> timedelta | None:
    from .status import parse_age

    try:
        return None if value is None else parse_age(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@cli.command("convert-archive")
@common_options
@click.option("--legacy-python", metavar="PYTHON",
              help="A Python with duckdb 2.x to read the old archive (default: install "
                   "duckdb 2.0 into this environment once, from the package index).")
@pass_ctx
@handle_errors
def convert_archive_cmd(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None,
                        legacy_python: str | None) -> None:
    """Convert an archive of botstats 0.1 (one DuckDB 2.0 file) to the DuckLake layout, once.

    Every table is copied and its rows counted; the old file is kept as
    <db>.pre-ducklake.duckdb until you delete it.
    """
    from .legacy import convert
    from .lock import run_lock

    settings = settings_from(ctx, config_file, base_url, db)
    with run_lock(settings, "convert-archive"):
        report = convert(settings, python=legacy_python,
                         say=lambda text: click.echo(f"botstats: {text}", err=True))
    click.echo(report.message)


@cli.command("compact")
@common_options
@click.option("--keep-days", default=7.0, show_default=True, type=click.FloatRange(0),
              help="Keep snapshots (and the files they read) this many days: a reader's "
                   "snapshot older than that may lose its files.")
@pass_ctx
@handle_errors
def compact_cmd(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None,
                keep_days: float) -> None:
    """Merge the archive's small data files and delete the files no kept snapshot reads.

    Each hourly run adds a few small files; run this daily (cron or [schedule]) to keep the
    file count and the disk at what the data needs.
    """
    from .lock import run_lock
    from .store import ArchivePaths, compact, writer

    settings = settings_from(ctx, config_file, base_url, db)
    with run_lock(settings, "compact"), writer(settings) as con:
        done = compact(con, ArchivePaths.of(settings), keep_days=keep_days)
    click.echo(f"compacted {settings.db_path}: data files {done.files_before} -> "
               f"{done.files_after}, {done.bytes_before / 1e6:.1f} -> {done.bytes_after / 1e6:.1f} "
               f"MB; {done.snapshots_expired} snapshots expired")


@cli.command("backup")
@click.argument("dest", type=click.Path(file_okay=False))
@common_options
@pass_ctx
@handle_errors
def backup_cmd(ctx: Ctx, dest: str, config_file: str | None, base_url: str | None,
               db: str | None) -> None:
    """Copy the archive into folder DEST (again: only what is new since the last backup there).

    Restore with `botstats restore DEST`.
    """
    from pathlib import Path

    from .lock import run_lock
    from .store import ArchivePaths, backup

    settings = settings_from(ctx, config_file, base_url, db)
    with run_lock(settings, "backup"):
        files, size = backup(ArchivePaths.of(settings), Path(dest))
    click.echo(f"backed {settings.db_path} up into {dest}: {files} data files copied "
               f"({size / 1e6:.1f} MB), the catalog as of now")


@cli.command("restore")
@click.argument("source", type=click.Path(exists=True, file_okay=False))
@common_options
@pass_ctx
@handle_errors
def restore_cmd(ctx: Ctx, source: str, config_file: str | None, base_url: str | None,
                db: str | None) -> None:
    """Put the backup in folder SOURCE in place of the archive (close notebooks first).

    The next harvest reads again what the backup lacks.
    """
    from pathlib import Path

    from .lock import run_lock
    from .store import ArchivePaths, restore

    settings = settings_from(ctx, config_file, base_url, db)
    with run_lock(settings, "restore"):
        files, size = restore(Path(source), ArchivePaths.of(settings))
    click.echo(f"restored {settings.db_path} from {source} ({files} data files copied, "
               f"{size / 1e6:.1f} MB)")


@cli.command("status")
@common_options
@click.option("--runs", default=10, show_default=True, type=click.IntRange(1, 1000),
              help="How many recent runs to show.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option("--max-age", callback=_age_option, metavar="DURATION",
              help="For monitoring: exit 1 unless a harvest completed within DURATION "
                   "(90m, 2h, 1d).")
@pass_ctx
@handle_errors
def status_cmd(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None,
               runs: int, as_json: bool, max_age: timedelta | None) -> None:
    """Show recent harvest runs and the archive's size (as of its last commit)."""
    from .console import print_table
    from .status import archive_status, describe_latest, freshness

    settings = settings_from(ctx, config_file, base_url, db)
    info = archive_status(settings, runs=runs)
    stale = ""
    if max_age is not None:
        stale = freshness(info["latest_complete_at"], max_age)
        info["max_age_s"], info["stale"] = max_age.total_seconds(), stale
    if as_json:
        print_json(info)
    else:
        click.echo(f"archive {info['path']}  ({info['size_mb']:.1f} MB: catalog "
                   f"{info['catalog_mb']:.1f}, data {info['data_mb']:.1f}; last written "
                   f"{info['published_at']})")
        print_table([tuple(r.values()) for r in info["runs"]], list(info["runs"][0])
                    if info["runs"] else ["run_id"], title="recent runs")
        for line in describe_latest(info["latest_run"]) if info["latest_run"] else []:
            click.echo(line)
        print_table(list(info["tables"].items()), ["table", "rows"], title="tables")
    if stale:
        click.echo(f"botstats: stale: {stale}", err=True)
        sys.exit(1)


# --- trends / sql ---------------------------------------------------------------------------
@cli.command("trends")
@common_options
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Export directory (overrides [exports].dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of a summary.")
@pass_ctx
@handle_errors
def trends_cmd(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None,
               out_dir: str | None, as_json: bool) -> None:
    """Compute the trend datasets, export them as parquet and create the trend_* views.

    Takes the archive's run lock (like `botstats run`), reads the archive, writes only the
    month partitions whose content changed, and recreates the views in the archive.
    """
    from .lock import run_lock
    from .trends import build_trends

    settings = settings_from(ctx, config_file, base_url, db, **{"exports.dir": out_dir})
    setup_logging(settings)
    with run_lock(settings, "trends"):
        report = build_trends(settings)
    if as_json:
        print_json(report.as_dict())
    else:
        click.echo(report.summary())


def _format_table(frame: Any, more: bool) -> str:
    """A plain aligned table (NULL for nulls, numbers right-aligned), for `botstats sql`."""
    rows = [["NULL" if v is None else str(v) for v in row] for row in frame.iter_rows()]
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(frame.columns)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    out = [line(list(frame.columns)), "  ".join("-" * w for w in widths), *map(line, rows)]
    n = frame.height
    out.append(f"({n} row{'' if n == 1 else 's'}{', more not shown' if more else ''})")
    return "\n".join(out)


@cli.command("sql")
@click.argument("query", required=False)
@click.option("-f", "--file", "sql_file", type=click.Path(exists=True, dir_okay=False),
              help="Read the SQL from this file (e.g. sql/queries/bot_history.sql).")
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE",
              help="Set a DuckDB variable the query reads as getvariable('NAME'); repeatable.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "parquet"]),
              default="table", show_default=True, help="Output format.")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Write the result to this file (required for parquet).")
@click.option("--max-rows", default=100, show_default=True, type=click.IntRange(1),
              help="Rows shown in table format (files always get every row).")
@click.option("--attach", "attach", is_flag=True,
              help="Print the SQL that opens the archive read-only in a DuckDB 1.5 session "
                   "(e.g. duckdb -cmd \"$(botstats sql --attach)\") and exit.")
@common_options
@pass_ctx
@handle_errors
def sql_cmd(ctx: Ctx, query: str | None, sql_file: str | None, params: tuple[str, ...], fmt: str,
            output: str | None, max_rows: int, attach: bool, config_file: str | None,
            base_url: str | None, db: str | None) -> None:
    """Run SQL against the archive (read-only, as of its last commit): tables and the trend_*
    views.

    Give the query as an argument or with -f FILE. Prints a table, or writes csv/json/parquet
    with --format and --output (csv and json go to stdout without --output). SQL errors exit 2.
    """
    from pathlib import Path

    from .archive import read_query_file, run_query
    from .exports import to_json, write_frame, write_text

    if attach:
        from .store import ArchivePaths, attach_statements

        paths = ArchivePaths.of(settings_from(ctx, config_file, base_url, db))
        click.echo(";\n".join(attach_statements(paths, read_only=True)) + ";")
        return
    if (query is None) == (sql_file is None):
        raise click.UsageError("give a QUERY or -f FILE (one of them).")
    if fmt == "parquet" and not output:
        raise click.UsageError("--format parquet needs --output FILE.")
    variables = {}
    for item in params:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE.", param_hint="--param")
        variables[name.strip()] = value
    text = read_query_file(sql_file) if sql_file else str(query)
    if not text.strip():
        where = f" in {sql_file}" if sql_file else ""
        raise click.UsageError(f"the query{where} is empty: give a SELECT, e.g. "
                               f"\"SELECT count(*) FROM bot_stats\".")
    settings = settings_from(ctx, config_file, base_url, db)
    limit = max_rows + 1 if fmt == "table" else None
    frame = run_query(settings, text, variables, limit=limit)
    if frame is None:
        click.echo("botstats: the query returned no result set (only comments, or a statement "
                   "such as SET): nothing to show" + (f" or write to {output}" if output else "")
                   + ".", err=True)
        return
    if fmt == "table":
        table = _format_table(frame.head(max_rows), more=frame.height > max_rows)
        if output:
            write_text(table + "\n", Path(output))
        else:
            click.echo(table)
    elif output:
        write_frame(frame, Path(output), fmt)
    elif fmt == "csv":
        click.echo(frame.write_csv(), nl=False)
    else:
        click.echo(to_json(frame))


# --- run / schedule / cron / demo -----------------------------------------------------------
def _exe() -> str:
    """How to call botstats again in hints: `botstats` if it is on PATH, else this venv's path."""
    import os
    import shutil
    from pathlib import Path

    script = Path(sys.executable).with_name("botstats")
    found = shutil.which("botstats")
    if found and script.exists() and Path(found).resolve() == script.resolve():
        return "botstats"
    if script.exists():
        try:
            return os.path.relpath(script)
        except ValueError:
            return str(script)
    return "python -m pipeline"


def _print_run(report: Any) -> None:
    from rich.console import Console

    from .console import harvest_summary

    if report.harvest is not None:
        Console(highlight=False).print(harvest_summary(report.harvest))
    if report.trends is not None:
        click.echo(report.trends.summary())
    elif report.trends_error:
        click.echo(f"trends: failed: {report.trends_error}")
    elif report.trends_skipped:
        click.echo(f"trends: not run ({report.trends_skipped})")
    if report.took_over:
        click.echo(f"note: took over the lock of a run that died without releasing it "
                   f"(pid {report.took_over.get('pid')}, run {report.took_over.get('run_id')})")
    click.echo(f"run {report.run_id or '-'}: {report.status} (exit {report.exit_code})")


@cli.command("run")
@common_options
@click.option("--full", is_flag=True, help="Re-read every bot's whole /stats list (see `harvest --full`).")
@click.option("--lock-timeout", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Seconds to wait while another job holds the archive lock, then exit 75 "
                   "(overrides [run].lock_timeout).")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Show progress (a bar on a terminal, log lines otherwise).")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON instead of a summary.")
@pass_ctx
@handle_errors
def run_cmd(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None, full: bool,
            lock_timeout: float | None, progress: bool, as_json: bool) -> None:
    """Harvest, then build trends: the one command a crontab calls.

    Takes the archive's run lock first, so two runs (or a run and `botstats schedule`) never
    overlap. SIGTERM or Ctrl+C finishes the current batch and records the run as interrupted.
    Exit codes: 0 complete, 3 partial, 1 failed, 4 interrupted, 75 another run holds the lock
    (the message names it), 2 usage or config error.
    """
    import threading

    from .console import harvest_progress
    from .runner import run, stop_on_signals

    more = {"run.lock_timeout": lock_timeout} if lock_timeout is not None else {}
    settings = settings_from(ctx, config_file, base_url, db, **more)
    setup_logging(settings)
    with stop_on_signals(threading.Event()) as stop, harvest_progress(progress) as on_progress:
        report = run(settings, full=full, stop=stop, on_progress=on_progress)
    if as_json:
        print_json(report.as_dict())
    else:
        _print_run(report)
    sys.exit(report.exit_code)


@cli.command("schedule")
@common_options
@click.option("--harvest-cron", metavar="EXPR",
              help="Override [schedule].harvest. A crontab expression; 6 fields = seconds first "
                   "(e.g. '*/5 * * * * *', for tests); '' disables the job.")
@click.option("--trends-cron", metavar="EXPR",
              help="Override [schedule].trends, like --harvest-cron.")
@click.option("--dry-run", is_flag=True, help="Print each job's next 5 run times and exit.")
@pass_ctx
@handle_errors
def schedule_cmd(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None,
                 harvest_cron: str | None, trends_cron: str | None, dry_run: bool) -> None:
    """Run the harvest and trends jobs on [schedule]'s crontab expressions, in the foreground.

    Standard crontab numbering (0 and 7 = Sunday, 1-5 = Mon-Fri) in [schedule].timezone (UTC
    by default). One run of each job at a time, missed runs coalesced, every run, skip and miss
    logged; jobs take the archive lock, so a manual `botstats run` never overlaps them.
    SIGTERM or Ctrl+C: the running job finishes its current batch (the run is recorded as
    interrupted), then the scheduler exits 0.
    """
    from .schedule import describe_schedule, run_scheduler

    settings = settings_from(ctx, config_file, base_url, db)
    setup_logging(settings)
    if dry_run:
        for name, expr, times in describe_schedule(settings, harvest_cron=harvest_cron,
                                                   trends_cron=trends_cron):
            click.echo(f"{name}: {expr}  ({settings.schedule.timezone})")
            for when in times:
                click.echo(f"  {when:%a %Y-%m-%d %H:%M:%S %Z}")
        return
    sys.exit(run_scheduler(settings, harvest_cron=harvest_cron, trends_cron=trends_cron))


@cli.command("cron")
@common_options
@pass_ctx
@handle_errors
def cron_cmd(ctx: Ctx, config_file: str | None, base_url: str | None, db: str | None) -> None:
    """Print a crontab line and a systemd service + timer that call `botstats run`.

    They use absolute paths to this installation's botstats and config file, and
    [schedule].harvest in [schedule].timezone.
    """
    from .schedule import cron_text

    settings = settings_from(ctx, config_file, base_url, db)
    flags: tuple[str, ...] = ()
    if db or ctx.overrides.get("store.db"):
        flags += ("--db", str(settings.db_path.absolute()))
    if base_url or ctx.overrides.get("service.base_url"):
        flags += ("--base-url", settings.service.base_url)
    click.echo(cron_text(settings, config_file or ctx.config, flags), nl=False)


@cli.command("demo")
@click.option("--dir", "directory", default="data", show_default=True, type=click.Path(file_okay=False),
              help="Where the archive (archive.ducklake) and exports (exports/) go.")
@click.option("--bots", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="Bots the embedded service lists.")
@click.option("--days", type=click.IntRange(1, 3650), default=90, show_default=True,
              help="Days of history per bot.")
@click.option("--stats-per-day", type=click.IntRange(1, 1440), default=2, show_default=True,
              help="Stat records per bot per day (must divide 86400).")
@click.option("--fresh", is_flag=True, help="Delete a previous demo's archive and exports in --dir first.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Config file (default: $BOTSTATS_CONFIG, else ./config.toml).")
@pass_ctx
@handle_errors
def demo_cmd(ctx: Ctx, directory: str, bots: int, days: int, stats_per_day: int, fresh: bool,
             as_json: bool, config_file: str | None) -> None:
    """Start the embedded service, run harvest + trends against it, show what was written.

    The archive goes to DIR/archive.ducklake (default data/, the default [store].db, so
    `botstats sql` and the notebook find it without flags).
    """
    import threading
    from pathlib import Path

    from rich.console import Console

    from .console import harvest_progress, print_table
    from .demo import DEFAULT_DIR, demo
    from .runner import stop_on_signals

    if 86_400 % stats_per_day:
        raise click.BadParameter(f"{stats_per_day} does not divide 86400 (try 1, 2, 4, 24).",
                                 param_hint="'--stats-per-day'")
    # Logging follows the user's settings (the demo's own overrides are applied inside).
    setup_logging(settings_from(ctx, config_file, None, None))
    with stop_on_signals(threading.Event()) as stop, harvest_progress(not as_json) as on_progress:
        report = demo(directory, bots=bots, days=days, stats_per_day=stats_per_day,
                      config=config_file or ctx.config, fresh=fresh, stop=stop,
                      on_progress=on_progress)
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
    exe = _exe()
    db = report.settings.db_path
    db_flag = "" if Path(directory) == Path(DEFAULT_DIR) else f" --db {db}"
    query = ("SELECT bot_id, guilds, guilds_change_7d FROM trend_bot_growth WHERE day = "
             "(SELECT max(day) FROM trend_bot_growth) ORDER BY guilds_change_7d DESC NULLS LAST "
             "LIMIT 5")
    click.echo("\n".join([
        "",
        f"Done in {report.seconds:.1f} s. Three things to try next:",
        "",
        "  1. Query the archive (read-only: safe to keep open while harvests run):",
        f"       {exe}{db_flag} sql \"{query}\"",
        f"       or: duckdb -cmd \"$({exe}{db_flag} sql --attach)\"",
        "  2. Explore it in the notebook:",
        "       .venv/bin/pip install -e '.[notebooks]' jupyterlab",
        "       .venv/bin/jupyter lab notebooks/explore.ipynb",
        "  3. Keep it up to date:",
        f"       {exe}{db_flag} schedule --dry-run    # the next runs of [schedule] in config.toml",
        f"       {exe}{db_flag} schedule              # the scheduler daemon (Ctrl+C stops it)",
        f"       {exe} cron                  # or a crontab line / systemd timer instead",
    ]))
    sys.exit(report.run.exit_code)


def main() -> None:
    try:
        cli(prog_name="botstats")
    except SystemExit as exc:
        _exit(exc.code)
    _exit(0)


def _exit(code: object) -> NoReturn:
    """Exit without tearing the interpreter down: by now every file is written and closed,
    and freeing polars' and DuckDB's module state would take another 0.1 s (a twentieth of a
    harvest) for nothing. Logging is shut down (its files flushed) and the output flushed first."""
    if code is not None and not isinstance(code, int):
        click.echo(code, err=True)  # what SystemExit("message") prints
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`botstats sql ... | head`): nothing to do
            pass
    os._exit(code or 0)
