"""Rows on their way to the archive: buffered column-wise, written a batch at a time in one transaction (records, bots, rejects, errors and the run's counters together), every DuckDB call on one thread so HTTP never waits on a write."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from typing import Any, TypeVar

import duckdb
import polars as pl

from .. import archive
from ..archive import BotRow
from ._pages import StatPage
from ._report import HarvestReport
from ._verdict import RecordTally

T = TypeVar("T")
log = logging.getLogger("botstats.harvest")


class Db:
    """Every DuckDB write on one thread: the connection is used by one thread at a time and the
    event loop never blocks on a write. Lookups (:meth:`read`) run on a second thread with their
    own cursor: behind a batch being written, the lister would wait and the workers run dry."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="botstats-db")
        self._reader = archive.cursor(con)  # sees committed batches, like the writer between batches
        self._read_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="botstats-db-read")

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, self.con, *args)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._read_pool, fn, self._reader, *args)

    def shutdown(self) -> None:
        self._read_pool.shutdown(wait=True)
        self._reader.close()
        self._pool.shutdown(wait=True)


def first_line(exc: Exception) -> str:
    return str(exc).split("\n", 1)[0][:300]


# Bot rows (with rejects and errors: rows that each carry a record's JSON text) a batch holds
# before it is written, whatever its stat rows: an hourly run adds about one record a bot, so a
# bound on stat rows alone kept every bot's row until the run's end (docs/design.md).
BATCH_BOT_ROWS = 8_192

# The StatPage columns a batch takes as they are (bot_id is added, the same for a whole page).
STAT_COLUMNS = [c for c in archive.STAT_SCHEMA if c != "bot_id"]


def frame_of(columns: dict[str, list[Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Buffered columns as a frame, taken out of ``columns`` one by one so each list (and the
    objects only it holds) is freed as soon as polars has copied it: a batch is never held
    twice over. ``recorded_at`` is buffered as microseconds since the epoch, which polars reads
    a hundred times faster than datetime objects."""
    series = [pl.Series(name, columns.pop(name), dtype=pl.Int64 if name == "recorded_at" else dtype)
              for name, dtype in schema.items()]
    return pl.DataFrame(series).with_columns(pl.col("recorded_at").cast(schema["recorded_at"]))


class Batch:
    """Rows waiting for the next write, kept column-wise (cheap to append, cheap to frame)."""

    def __init__(self, db: Db, report: HarvestReport, batch_rows: int, *,
                 new_only: bool = False) -> None:
        self.db = db
        self.new_only = new_only  # see _write_stats
        self.report = report
        self.batch_rows = batch_rows
        self._lock = asyncio.Lock()
        self.tally = RecordTally()  # the whole run's, across batches
        self._reset()

    def _reset(self) -> None:
        self.stats: dict[str, list[Any]] = {k: [] for k in archive.STAT_SCHEMA}
        self.custom: dict[str, list[Any]] = {k: [] for k in archive.CUSTOM_SCHEMA}
        self.bots: list[BotRow] = []
        self.rejects: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.users: list[dict[str, Any]] = []
        self.snapshots: dict[str, list[dict[str, Any]]] = {}
        self.check: list[bool] = []  # per stat row: may its key be archived already?
        self.listed: dict[str, int] = {}  # per bot read: the length of its /stats list
        self._bot_ids: set[str] = set()
        self.distinct = True  # no stat key twice in this batch: the write need not dedupe

    @property
    def full(self) -> bool:
        """A buffer reached its bound in rows: stat rows ``batch_rows``, or bot rows, rejects
        and errors ``BATCH_BOT_ROWS``."""
        return (len(self.stats["stat_id"]) >= self.batch_rows
                or len(self.bots) + len(self.rejects) + len(self.errors) >= BATCH_BOT_ROWS)

    def add_page(self, endpoint: str, bot_id: str, page: StatPage, *, checked: bool = True,
                 listed: int | None = None) -> None:
        """A validated /stats page: its rows extend the columns (C-speed), its rejects are kept.
        ``checked``: its keys may be archived already (else they are new for sure)."""
        if bot_id in self._bot_ids or len(set(page.stat_id)) < len(page):
            self.distinct = False
        self._bot_ids.add(bot_id)
        self.check.extend(repeat(checked, len(page)))
        if listed is not None:
            self.listed[bot_id] = listed
        s = self.stats
        for column in STAT_COLUMNS:
            s[column].extend(getattr(page, column))
        s["bot_id"].extend(repeat(bot_id, len(page)))
        c = self.custom
        rows = page.custom_row
        c["stat_id"].extend([page.stat_id[i] for i in rows])
        c["recorded_at"].extend([page.recorded_at[i] for i in rows])
        c["bot_id"].extend(repeat(bot_id, len(rows)))
        c["name"].extend(page.custom_name)
        c["value_text"].extend(page.custom_text)
        c["value_num"].extend(page.custom_num)
        for reason, raw in page.rejects:
            self.reject(endpoint, bot_id, reason, raw)
        self.tally.keep("stat", len(page))
        if page.raw:
            self.tally.saw_fields("stat", page.raw[-1])  # the newest: one decode per bot

    def reject(self, endpoint: str, bot_id: str | None, reason: str, raw: str) -> None:
        self.tally.reject(reason, raw)
        self.rejects.append({"endpoint": endpoint, "bot_id": bot_id, "reason": reason, "raw": raw})

    def error(self, endpoint: str, bot_id: str | None, exc: Exception) -> None:
        self.report.errors += 1
        log.warning("%s failed: %s", endpoint, first_line(exc))
        self.errors.append({"endpoint": endpoint, "bot_id": bot_id, "error": first_line(exc)})

    async def flush(self) -> None:
        async with self._lock:
            frames = archive.Frames(
                stats=frame_of(self.stats, archive.STAT_SCHEMA).with_columns(
                    _check=pl.Series(self.check, dtype=pl.Boolean)),
                custom=frame_of(self.custom, archive.CUSTOM_SCHEMA),
                bots=self.bots, rejects=self.rejects, errors=self.errors,
                users=self.users, snapshots=self.snapshots, distinct=self.distinct,
                listed=self.listed,
            )
            self._reset()
            if frames.empty:
                return
            await self.db.call(archive.write_batch, frames, self.report, self.new_only)
