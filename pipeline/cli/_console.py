"""What a person sees on a terminal: progress while a job runs, a short summary when it ends,
tables (rich ones, and the plain aligned text `botstats sql` prints).

On a terminal (stderr is a TTY) a rich progress line; elsewhere (cron, CI, pipes) a plain log line
every few seconds, so logs stay readable. The library never prints: it calls back, this renders.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

if TYPE_CHECKING:
    from ..harvester import HarvestReport, ProgressFn

log = logging.getLogger("botstats.progress")
PLAIN_EVERY = 5.0  # seconds between plain progress lines


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


@contextmanager
def harvest_progress(enabled: bool = True) -> Iterator[ProgressFn | None]:
    """A progress callback for :func:`pipeline.harvester.harvest`."""
    if not enabled:
        yield None
        return
    if not sys.stderr.isatty():
        last = [time.monotonic()]

        def plain(report: HarvestReport) -> None:
            now = time.monotonic()
            if now - last[0] >= PLAIN_EVERY:
                last[0] = now
                log.info("harvest %s: %d bots seen, %d fetched, %d up to date, %d new records, "
                         "%d requests", report.run_id, report.bots_seen, report.bots_fetched,
                         report.bots_up_to_date, report.stats_added, report.requests)

        yield plain
        return
    columns = (SpinnerColumn(), TextColumn("[bold]harvest"), BarColumn(), MofNCompleteColumn(),
               TextColumn("bots  {task.fields[detail]}"), TimeElapsedColumn())
    with Progress(*columns, console=stderr_console(), transient=True) as bar:
        task = bar.add_task("harvest", total=None, detail="")

        def rich_update(report: HarvestReport) -> None:
            done = report.bots_fetched + report.bots_up_to_date
            bar.update(task, completed=done, total=max(report.bots_seen, done) or None,
                       detail=f"{report.stats_added:,} new records  {report.requests:,} requests")

        yield rich_update


def harvest_summary(report: HarvestReport) -> Table:
    r = report
    shard = "" if r.shard.whole else f" (shard {r.shard})"
    table = Table(title=f"harvest {r.run_id}{shard}: {r.status}", show_header=False, box=None,
                  title_justify="left", padding=(0, 2))
    rows: list[tuple[str, Any]] = [
        ("bots", f"{r.bots_seen:,} seen, {r.bots_new:,} new, {r.bots_removed:,} removed"),
        ("stat requests", f"{r.bots_fetched:,} full lists, {r.bots_up_to_date:,} already up to date"),
        ("records", f"{r.stats_added:,} new, {r.stats_updated:,} changed"),
        ("rejects", f"{r.rejects:,} (kept in table rejects)"),
        ("errors", f"{r.errors:,}" + (" (see harvest_errors; retried next run)" if r.errors else "")),
        ("requests", f"{r.requests:,} ({r.retries:,} retries)"),
        ("time", f"{r.seconds:.1f} s"),
    ]
    if r.commit_retries:
        rows.append(("commits", f"{r.commit_retries:,} retried after colliding with another "
                                f"worker's"))
    if r.new_fields:
        rows.append(("new fields", f"{r.new_fields} (first seen this run; kept in raw)"))
    if r.message:
        rows.append(("note", r.message))
    for key, value in rows:
        table.add_row(key, escape(str(value)))  # messages name settings: "[fields].stat_time"
    return table


def print_table(rows: list[tuple[Any, ...]], headers: list[str], title: str | None = None,
                console: Console | None = None) -> None:
    table = Table(*headers, title=title, title_justify="left")
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    # Off a terminal rich assumes 80 columns and squeezes ids; give tables room instead.
    (console or Console(width=None if sys.stdout.isatty() else 160)).print(table)


def plain_table(frame: Any, more: bool = False) -> str:
    """A polars frame as a plain aligned table (NULL for nulls, numbers right-aligned) and a
    row count; ``more`` says rows were left out."""
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
