"""The options every command shares, remembered on the context so a flag typed before or after the command name means the same."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..core import Settings, Shard, load_settings

if TYPE_CHECKING:
    from ..harvester import HarvestOptions

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Ctx:
    """What the shared options typed so far say: the config file, and the flags to layer over
    config and environment. A flag typed after the command wins over the same one before it."""

    config: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    # main() ran: this process is the botstats command, not a caller that invoked `cli` itself
    # (a test's CliRunner, a script), so a command may re-execute it (`botstats run`).
    entry_point: bool = False


def _remember(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        typed = ctx.ensure_object(Ctx)
        if value is None:
            return value
        if key == "config":
            typed.config = value
        else:
            typed.overrides[key] = value
        return value

    return callback


def _shared(*decls: str, key: str, **kw: Any) -> Callable[[F], F]:
    return click.option(*decls, expose_value=False, callback=_remember(key), **kw)


config_option = _shared("--config", key="config", type=click.Path(dir_okay=False),
                        help="Config file (default: $BOTSTATS_CONFIG, else ./config.toml).")


base_url_option = _shared("--base-url", key="service.base_url",
                          help="Service base URL (overrides [service].base_url).")


db_option = _shared("--db", key="store.db", help="Archive path, its catalog file (overrides [store].db).")


catalog_option = _shared("--catalog", key="store.catalog", metavar="DSN",
                         help="The archive's PostgreSQL catalog, a connection string (overrides "
                              "[store].catalog; keep its password in PGPASSWORD, not here).")


user_token_option = _shared("--user-token", key="user_token",
                            help="User token for the user endpoints (default: "
                                 "$BOTSTATS_USER_TOKEN). Sent as 'Bearer <token>'.")


def common_options(fn: Callable[..., T]) -> Callable[..., T]:
    """--config/--base-url/--db/--catalog: accepted on every command as well as on the group."""
    return config_option(base_url_option(db_option(catalog_option(fn))))


def typed() -> Ctx:
    """The shared options typed on this command line (group and command)."""
    return click.get_current_context().ensure_object(Ctx)


def settings_from_flags(**more: Any) -> Settings:
    """defaults < config file < BOTSTATS_* environment < the flags typed < ``more``."""
    ctx = typed()
    return load_settings(ctx.config, overrides={**ctx.overrides, **more})


class _Id(click.ParamType[str]):
    """A user or bot id: any text but an empty one (which would name another endpoint)."""

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if not text.strip():
            self.fail("an id cannot be empty.", param, ctx)
        return text


ID = _Id()


class _ShardType(click.ParamType[Shard]):
    """``K/N``: shard K (from 0) of N."""

    name = "K/N"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Shard:
        if isinstance(value, Shard):
            return value
        try:
            return Shard.parse(str(value))
        except ValueError as exc:
            self.fail(f"{exc}.", param, ctx)


shard_option = click.option(
    "--shard", type=_ShardType(), metavar="K/N",
    help="Harvest only the bots whose id hashes to shard K of N (K from 0 to N-1), beside "
         "workers harvesting the other shards into the same archive (docs/operating.md).")


def stacked(fn: Callable[..., T], decorators: Iterable[Callable[[Any], Any]]) -> Callable[..., T]:
    """``fn`` under ``decorators`` as if written above it in this order (the first outermost,
    so click lists the options in this order)."""
    for decorate in reversed(tuple(decorators)):
        fn = decorate(fn)
    return fn


def harvest_options(full_help: str, removals_help: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """--full, --accept-removals and --shard, handed to the command as one ``harvest``:
    :class:`~pipeline.harvester.HarvestOptions` (`harvest` and `run` word the first two)."""

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def command(*args: Any, full: bool, accept_removals: bool, shard: Shard | None,
                    **more: Any) -> T:
            return fn(*args, harvest=_harvest_options(full, accept_removals, shard), **more)

        return stacked(command, (click.option("--full", is_flag=True, help=full_help),
                                 click.option("--accept-removals", is_flag=True,
                                              help=removals_help),
                                 shard_option))

    return decorate


def _harvest_options(full: bool, accept_removals: bool, shard: Shard | None) -> HarvestOptions:
    from ..harvester import HarvestOptions  # on use: the CLI starts without the harvester

    return HarvestOptions(full=full, accept_removals=accept_removals, shard=shard)
