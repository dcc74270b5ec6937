"""What every command shares: the `botstats` group, the options declared once for all of
them, the settings they build, and the edge where our errors become a message and an exit code.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Coroutine, Mapping
from functools import wraps
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

import click

from .. import __version__
from ..core import BotstatsError
from ._options import Ctx, _shared, common_options, typed, user_token_option

if TYPE_CHECKING:
    from ..harvester import ProgressFn

T = TypeVar("T")


def handle_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """Turn our errors into a one-line message and the documented exit code (no traceback)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except BotstatsError as exc:
            click.echo(f"botstats: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("botstats: interrupted", err=True)
            sys.exit(130)

    return wrapper


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


class Result(Protocol):
    """What a command returns: printed as JSON with ``--json``."""

    def as_dict(self) -> Mapping[str, object]: ...


class Report(Result, Protocol):
    """A job's result: it also says the exit code the command ends with."""

    @property
    def exit_code(self) -> int: ...


R = TypeVar("R", bound=Report)


def print_result(result: Result, as_json: bool, text: Callable[[], str]) -> None:
    """A command's result: its ``as_dict()`` as JSON, or ``text()`` for a person."""
    if as_json:
        print_json(result.as_dict())
    else:
        click.echo(text())


def harvesting(progress: bool, job: Callable[[threading.Event, ProgressFn | None], T]) -> T:
    """Run a job that harvests: SIGTERM or Ctrl+C sets its stop event (it finishes the current
    batch and records the run interrupted), and its progress is shown unless ``progress`` is off."""
    from ..operate import stop_on_signals
    from ._console import harvest_progress

    with stop_on_signals() as stop, harvest_progress(progress) as on_progress:
        return job(stop, on_progress)


def report_and_exit(report: R, as_json: bool, show: Callable[[R], None]) -> NoReturn:
    """Print a job's report (as JSON, or ``show`` it) and exit with its exit code."""
    if as_json:
        print_json(report.as_dict())
    else:
        show(report)
    sys.exit(report.exit_code)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="botstats")
@common_options
@user_token_option
@_shared("--log-format", key="log.format", type=click.Choice(["text", "json"]),
         help="Log format (overrides [log].format).")
@_shared("--log-file", key="log.file", help="Also append logs to this file (overrides [log].file).")
def cli() -> None:
    """botstats: archive a bot-listing service into a DuckLake and compute trends.

    Settings come from defaults < config.toml < BOTSTATS_* environment < these flags.
    """
    typed()


def main() -> None:
    """The `botstats` command, and `python -m pipeline`: a process botstats starts itself, so its
    allocators are tuned first, before anything loads polars (``import pipeline`` leaves its host
    as it is). A `botstats run` that re-executes itself for the trends comes back through here."""
    from ..operate import tune_allocators

    tune_allocators()
    try:
        cli(prog_name="botstats", obj=Ctx(entry_point=True))
    except SystemExit as exc:
        exit_now(exc.code)
    exit_now(0)


def exit_now(code: object) -> NoReturn:
    """Exit without tearing the interpreter down: by now every file is written and closed, and
    freeing polars' and DuckDB's module state is slow work for nothing. Logging is shut down
    (its files flushed) and the output flushed first."""
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
