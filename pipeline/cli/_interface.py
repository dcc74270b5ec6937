"""`botstats users|bots|post-stat`: the bot-listing interface by hand, one request each."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import click

from ._base import cli, handle_errors, print_json, run_async
from ._options import ID, common_options, settings_from_flags, stacked, user_token_option

if TYPE_CHECKING:
    from ..core import Settings
    from ..interface import Client

T = TypeVar("T")


def _call_client(settings: Settings, method: Callable[[Client], Coroutine[Any, Any, T]]) -> T:
    """Open one client, make one call, close it: each command is one `asyncio.run`."""
    from ..interface import Client

    async def call() -> T:
        async with Client(settings) as client:
            return await method(client)

    return run_async(call())


@cli.group("users")
def users_group() -> None:
    """Read users: the current user, a user, and a user's bots, servers and webhooks.

    Needs a user token: $BOTSTATS_USER_TOKEN or --user-token.
    """


class _Read(NamedTuple):
    """A `botstats GROUP NAME [ARG]` command: one GET, printed as JSON. ``method``: the client's
    method it calls; ``arg``: the id it takes; ``paged`` = (what one page holds, what is paged,
    what --skip skips) adds --limit/--skip for a service that pages the list; ``user`` adds
    --user-token."""

    name: str
    method: str
    help_text: str
    arg: str | None
    paged: tuple[str, str, str] | None = None
    user: bool = False


def _read_command(group: click.Group, read: _Read) -> None:
    """Add ``read`` to ``group``."""
    paged = read.paged

    def command(limit: int | None = None, skip: int = 0, **args: str) -> None:
        paging = {"limit": limit, "skip": skip} if paged else {}
        print_json(_call_client(settings_from_flags(),
                                lambda c: getattr(c, read.method)(*args.values(), **paging)))

    decorators: list[Callable[[Any], Any]] = [group.command(read.name, help=read.help_text)]
    if read.arg:
        decorators.append(click.argument(read.arg, type=ID))
    if paged:
        each, what, items = paged
        decorators += [
            click.option("--limit", type=click.IntRange(min=1),
                         help=f"Ask one page of this many{each} (limit/skip), for a service that "
                              f"pages {what}; default: no paging parameters sent."),
            click.option("--skip", type=click.IntRange(min=0), default=0, show_default=True,
                         help=f"{items} to skip (with --limit)."),
        ]
    decorators += [*([user_token_option] if read.user else []), common_options, handle_errors]
    stacked(command, decorators)


USER_LIST = ("", "the list", "Items")
_read_command(users_group, _Read("me", "me", "Print the current user (GET /users/@me).",
                                 arg=None, user=True))
for _name, _method, _help, _paged in (
    ("get", "user", "Print the user USER_ID (GET /users/:user_id).", None),
    ("bots", "user_bots", "Print the bots of user USER_ID (GET /users/:user_id/bots).", USER_LIST),
    ("servers", "user_servers", "Print the servers of user USER_ID (GET /users/:user_id/servers).",
     USER_LIST),
    ("webhooks", "user_webhooks",
     "Print the webhooks of user USER_ID (GET /users/:user_id/webhooks).", USER_LIST),
):
    _read_command(users_group, _Read(_name, _method, _help, "user_id", _paged, user=True))


@cli.group("bots")
def bots_group() -> None:
    """Read bots: a page of bots, one bot, its stat records, its last stat. No credentials."""


@bots_group.command("list")
@click.option("--limit", type=click.IntRange(min=1),
              help="Bots per page (default: [service].page_size). The service may return fewer.")
@click.option("--skip", type=click.IntRange(min=0), default=0, show_default=True,
              help="Bots to skip (offset).")
@common_options
@handle_errors
def bots_list(limit: int | None, skip: int) -> None:
    """Print one page of bots (GET /bots?limit=N&skip=N)."""
    print_json(_call_client(settings_from_flags(), lambda c: c.list_bots(limit=limit, skip=skip)))


for _name, _method, _help, _paged in (
    ("get", "bot", "Print the bot BOT_ID (GET /bots/:bot_id).", None),
    ("stats", "bot_stats", "Print the stat records of bot BOT_ID (GET /bots/:bot_id/stats).",
     (" records", "/stats", "Records")),
    ("stat", "bot_last_stat",
     "Print the most recent stat record of bot BOT_ID (GET /bots/:bot_id/stat).", None),
):
    _read_command(bots_group, _Read(_name, _method, _help, "bot_id", _paged))


def _custom_option(_ctx: click.Context, _param: click.Parameter,
                   pairs: tuple[str, ...]) -> list[tuple[str, Any]]:
    from ._args import parse_custom

    try:
        return parse_custom(pairs)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


# A stat record's standard fields as post-stat's options: (flag, its range, required, help).
_METRICS: tuple[tuple[str, click.IntRange, bool, str], ...] = (
    ("users", click.IntRange(min=0), True, "Count of bot users."),
    ("guilds", click.IntRange(min=0), True, "Count of bot guilds."),
    ("shards", click.IntRange(min=0), False, "Count of bot shards."),
    ("memory-load", click.IntRange(0, 100), False, "Percent of memory in use."),
    ("cpu-load", click.IntRange(0, 100), False, "Percent of CPU in use."),
    ("commands-executed", click.IntRange(min=0), False, "Count of executed commands."),
)


def _metric_options(fn: Callable[..., T]) -> Callable[..., T]:
    """An option per standard field (:data:`_METRICS`), handed to the command as one
    ``metrics``: each field's name and value (None: not given)."""
    names = [flag.replace("-", "_") for flag, *_ in _METRICS]

    @functools.wraps(fn)
    def command(*args: Any, **given: Any) -> T:
        metrics = {name: given.pop(name) for name in names}
        return fn(*args, metrics=metrics, **given)

    return stacked(command, (click.option(f"--{flag}", type=kind, required=required, help=text)
                             for flag, kind, required, text in _METRICS))


@cli.command("post-stat")
@click.argument("bot_id", type=ID)
@_metric_options
@click.option("--custom", "custom", multiple=True, metavar="NAME=VALUE", callback=_custom_option,
              help="Custom field (repeatable); VALUE is read as integer, number, true/false, "
                   "else text.")
@click.option("--bot-key", help="The bot's API key (default: $BOTSTATS_BOT_KEY). Sent as-is.")
@common_options
@handle_errors
def post_stat(bot_id: str, metrics: dict[str, int | None], custom: list[tuple[str, Any]],
              bot_key: str | None) -> None:
    """Publish one stat record for bot BOT_ID (POST /bots/:bot_id/stats) and print it.

    Not retried on a server error or timeout (the record may have been stored): check with
    `botstats bots stat BOT_ID` before posting again.
    """
    from ..interface import stat_payload

    settings = settings_from_flags(**({"bot_key": bot_key} if bot_key else {}))
    payload = stat_payload(settings.fields, metrics, custom)
    print_json(_call_client(settings, lambda c: c.post_stat(bot_id, payload)))
