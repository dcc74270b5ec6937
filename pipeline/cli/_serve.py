"""`botstats serve`: the embedded bot-listing service in the foreground."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

import click

from ._base import cli
from ._options import stacked


def _service_field_options(fn: Any) -> Any:
    """`serve --stat-time-field created_at ...`: the record field names the service uses, so it
    can play a service that names them apart from the defaults (see `botstats probe`)."""
    for record, key, default in (("bot", "id", "id"), ("bot", "name", "name"),
                                 ("stat", "id", "id"), ("stat", "time", "timestamp"),
                                 ("custom", "name", "name"), ("custom", "value", "value"),
                                 ("user", "id", "id"), ("server", "id", "id"),
                                 ("webhook", "id", "id")):
        what = "a custom field's" if record == "custom" else f"a {record} record's"
        fn = click.option(f"--{record}-{key}-field", f"{record}_{key}_field", default=default,
                          show_default=True, help=f"The key of {what} {key}.")(fn)
    return fn


# The directory the service generates, a flag each, named as their `ServiceConfig` field, and
# the faults it can play, named as their `Faults` field: (flag, type, default, help).
_RATE, _SHARE, _COUNT = click.FloatRange(min=0), click.FloatRange(0, 1), click.IntRange(min=0)
_DIRECTORY: tuple[tuple[str, Any, Any, str], ...] = (
    ("bots", click.IntRange(1, 1_000_000), 200,
     "Bots in the directory (records are generated on demand: 100k is fine)."),
    ("users", click.IntRange(0, 1_000_000), 0, "Users owning the bots; 0 = bots // 5, at least 1."),
    ("seed", int, 1,
     "Seed of all generated data and credentials: same seed (and --end), same data."),
    ("history-days", click.IntRange(1, 3650), 90, "Days of stat history each bot has at start."),
    ("stats-per-day", click.IntRange(1, 1440), 1,
     "Stat records per bot per day; must divide 86400 (1, 2, 4, 24, 96, ...)."),
    ("max-page-size", click.IntRange(min=1), 100,
     "Most bots GET /bots returns; a larger page size is capped (see --over-cap)."),
    ("stats-page-size", _COUNT, 0, "0: GET /bots/:id/stats sends the whole list. N: it pages "
                                   "like GET /bots (--paging; page size default and cap N), in "
                                   "--stats-order."),
    ("user-lists-page-size", _COUNT, 0, "0: a user's bots, servers and webhooks come whole. N: "
                                        "they page like GET /bots (--paging; page size default "
                                        "and cap N)."),
    ("bot-reads-need-token", bool, False, "GET /bots, /bots/:id, /stats and /stat want "
                                          "Authorization: Bearer <user token> too (401 without)."),
    ("stats-order", click.STRING, "oldest", "How GET /bots/:id/stats orders a bot's records, "
                                            "paged or whole: oldest or newest first."),
    ("events", _SHARE, 0.0, "Share of bots with planted events (spikes, drops, level shifts, "
                            "outages, counter resets; as many drift slowly), served as truth "
                            "by GET /_admin/events. 0 = none."),
)
# How the service spells what the interface leaves open, named as their `ServiceConfig` field
# (choices in service.SHAPE_CHOICES, the default first).
_SHAPES: tuple[tuple[str, Any, Any, str], ...] = (
    ("id-type", click.Choice(["text", "integer"]), "text",
     "Ids of bots, users, servers and webhooks (and references to them) as JSON text or "
     "integers (64-bit)."),
    ("stat-ids", click.Choice(["composite", "hex", "integer", "none"]), "composite",
     "Stat ids as '<bot id>-<n>', 24 hex digits, 60-bit integers, or no id field at all."),
    ("time-format", click.Choice(["iso", "epoch-s", "epoch-ms", "epoch-us", "epoch-ns",
                                  "http-date"]), "iso",
     "Stat times as ISO 8601 text, epoch seconds, milli-, micro- or nanoseconds, or HTTP "
     "dates."),
    ("custom-shape", click.Choice(["list", "object"]), "list",
     "Custom fields as a list of {name, value} objects, or one object {name: value}."),
    ("error-style", click.Choice(["json", "problem", "text", "empty"]), "json",
     "Error bodies: {\"error\", \"details\"}, RFC 7807 problem+json, plain text, or none."),
    ("not-found-status", click.Choice(["404", "400", "410", "422"]), "404",
     "The status of an unknown bot or user (and of a bot without records at /stat)."),
    ("auth-status", click.Choice(["401", "403"]), "401", "The status of refused credentials."),
)
# How the lists that page are asked for a part and answered, named as their `ServiceConfig`
# field (choices in service.PAGINGS and service.OVER_CAPS, the default first).
_CONVENTIONS: tuple[tuple[str, Any, Any, str], ...] = (
    ("paging", click.Choice(["skip", "offset", "page", "link", "next-url", "cursor"]), "skip",
     "How the lists that page are asked for a part: limit & skip, limit & offset, page & "
     "per_page, the same with a Link header, a next URL or a cursor in the answer "
     "(docs/service.md)."),
    ("stats-paging", click.Choice(["", "skip", "offset", "page", "link", "next-url", "cursor"]),
     "", "A family of its own for GET /bots/:id/stats when it pages ('': --paging's)."),
    ("list-envelope", click.STRING, "", "'': lists are bare JSON arrays. KEY: an object holding "
                                        "the list under KEY, with total, count and the paging's "
                                        "keys (needed by --paging next-url and cursor)."),
    ("total-header", bool, False, "Every list answer carries X-Total-Count (the whole list's "
                                  "length)."),
    ("over-cap", click.Choice(["cap", "400"]), "cap",
     "A page size above the cap is capped silently, or answered 400 naming the cap."),
    ("repeated-times", _SHARE, 0.0, "Share of bots posting one record per shard: two records "
                                    "at the same time, told apart by shard_id."),
)
_FAULTS: tuple[tuple[str, Any, Any, str], ...] = (
    ("rate-limit", _RATE, 0.0, "Requests/second over all clients (token bucket); excess gets "
                               "429 (+ the headers of --rate-limit-headers). 0 = off."),
    ("error-rate", _SHARE, 0.0, "Probability of a random 500/502/503 with a JSON, HTML or "
                                "empty body."),
    ("latency-ms", _RATE, 0.0, "Delay added to every interface response, in milliseconds."),
    ("latency-jitter-ms", _RATE, 0.0, "Plus a random 0..J milliseconds per response."),
    ("churn-every", _COUNT, 0,
     "Every N-th GET /bots inserts a new bot at the front and removes one. 0 = off."),
    ("malformed-rate", _SHARE, 0.0,
     "Share of stat records served malformed (missing id, cpu_load 150, ...)."),
    ("bad-json-rate", _SHARE, 0.0,
     "Share of bots whose GET /bots/:id/stats body is always truncated JSON (status 200)."),
    ("ignore-skip", bool, False,
     "Broken paging: GET /bots ignores skip and always returns the first page."),
    ("live-interval", _RATE, 0.0, "Real seconds per stat interval, so new records keep "
                                  "arriving. 0 = only on POST /_admin/advance."),
    ("listing-cut", _SHARE, 0.0, "GET /bots shows only the first (1 - P) of the listing, with "
                                 "status 200 (1 = an empty list): an outage that looks like the "
                                 "directory emptying."),
    ("duplicate-every", _COUNT, 0, "GET /bots repeats a bot after every N-th position (in the "
                                   "same page or an earlier one). 0 = off."),
    ("redirect-to", str, "",
     "Answer every interface request 307 to this origin (same path and query)."),
    ("stall-rate", _SHARE, 0.0,
     "Share of bots whose GET /bots/:id/stats body stops half-way for --stall-seconds."),
    ("stall-seconds", _RATE, 30.0, "How long a stalling body stops."),
    ("gzip-cut-rate", _SHARE, 0.0, "Share of bots whose GET /bots/:id/stats body is gzip cut "
                                   "in half (Content-Encoding: gzip)."),
    ("body-fault-times", _COUNT, 0, "/stats answers per bot the stall and gzip faults spoil "
                                    "before answering whole. 0 = every one."),
    ("rate-burst", _RATE, 0.0, "Requests the --rate-limit bucket holds (its burst). 0 = a "
                               "second's worth."),
    ("rate-limit-headers", click.STRING, "retry-after",
     "How a rate-limited answer tells the limit: retry-after, retry-after-date, x-reset-after, "
     "x-reset-epoch, x-reset-epoch-ms, x-reset-delta, http-date, github-403 (a 403), ratelimit, "
     "ratelimit-policy or none (docs/service.md)."),
    ("hostile-names", bool, False, "Every 4th bot's name and custom field names hold markup, "
                                   "a </script>, an SVG onload and template expressions."),
)


def _names(table: tuple[tuple[str, Any, Any, str], ...]) -> tuple[str, ...]:
    return tuple(flag.replace("-", "_") for flag, *_ in table)


def _table_options(table: tuple[tuple[str, Any, Any, str], ...]) -> Callable[[Any], Any]:
    """A decorator adding a click option for each row of ``table``, in its order."""
    return lambda fn: stacked(fn, (_table_option(*row) for row in table))


def _table_option(flag: str, kind: Any, default: Any, text: str) -> Callable[[Any], Any]:
    if kind is bool:
        return click.option(f"--{flag}", is_flag=True, help=text)
    if kind is str:
        return click.option(f"--{flag}", metavar="URL", default=default, help=text)
    return click.option(f"--{flag}", type=kind, default=default, show_default=True, help=text)


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on; 0 picks a free one (the banner shows it).")
@_table_options(_DIRECTORY)
@_table_options(_SHAPES)
@_table_options(_CONVENTIONS)
@click.option("--end", type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%SZ"]),
              metavar="YYYY-MM-DD[THH:MM:SS]",
              help="Virtual clock at start, UTC (default: now, truncated to the hour).")
@click.option("--credentials-file", type=click.Path(dir_okay=False),
              help="Write every user token and bot API key to this JSON file before serving.")
@_table_options(_FAULTS)
@click.option("--access-log", is_flag=True, help="Log every request to stderr (slows the service down).")
@_service_field_options
def serve_cmd(host: str, port: int, end: Any, credentials_file: str | None, access_log: bool,
              **options: Any) -> None:
    """Run the embedded bot-listing service in the foreground (Ctrl+C stops it).

    Prints the base URL and a few user tokens and bot API keys; see docs/service.md for the data,
    the admin endpoints and each fault.
    """
    from ..service import Faults, InvalidSetting, ServiceConfig, serve

    try:
        faults = Faults(**{name: options.pop(name) for name in _names(_FAULTS)})
        shapes = {name: options.pop(name) for name in _names(_SHAPES)}
        shapes["not_found_status"] = int(shapes["not_found_status"])
        shapes["auth_status"] = int(shapes["auth_status"])
        cfg = ServiceConfig(**{name: options.pop(name) for name in _names(_DIRECTORY)},
                            **{name: options.pop(name) for name in _names(_CONVENTIONS)},
                            **shapes, end=end, faults=faults,
                            field_names={name.removesuffix("_field"): value
                                         for name, value in options.items()})
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
