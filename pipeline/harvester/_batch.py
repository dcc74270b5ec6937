"""Rows on their way to the archive: buffered column-wise, written a batch at a time in one transaction (records, bots, rejects, errors and the run's counters together), every DuckDB call on one thread so HTTP never waits on a write."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, NamedTuple, TypeVar

import duckdb
import polars as pl

from .. import archive
from ..archive import BotRow
from ..core import FieldSettings, IdsNotUnique, first_line
from ._records import StatPage
from ._report import HarvestReport
from ._verdict import RunTally, judge

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


# Of an error's first line, what a failed read keeps (in table errors, the log, the verdict).
ERROR_CHARS = 300

# Bot rows (with rejects and errors: rows that each carry a record's JSON text) a batch holds
# before it is written, whatever its stat rows: an hourly run adds about one record a bot, so a
# bound on stat rows alone kept every bot's row until the run's end (docs/design.md).
BATCH_BOT_ROWS = 8_192

# Sightings of listed bots (an id and a time each) a run holds before it writes them with a
# batch: every bot is seen every hour, and written a batch at a time their ids cost a data file
# and a catalog commit per batch (docs/design.md, "Writes proportional to what is new").
SEEN_ROWS = 131_072

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


class Reject(NamedTuple):
    """A row of table ``rejects``: what was read (``endpoint``, the bot's id if any), why it was
    kept aside, and its text as received."""

    endpoint: str
    bot_id: str | None
    reason: str
    raw: str


class Batch:
    """Rows waiting for the next write, kept column-wise (cheap to append, cheap to frame)."""

    def __init__(self, db: Db, report: HarvestReport, batch_rows: int, *,
                 new_only: bool = False, fields: FieldSettings | None = None) -> None:
        self.db = db
        self.new_only = new_only  # see _write_stats
        self.report = report
        self.batch_rows = batch_rows
        self.fields = fields  # judged before each write (see flush)
        self._lock = asyncio.Lock()
        self.tally = RunTally()  # the whole run's, across batches
        # Why the run stops writing: ids that would merge records (raised at its end), or a
        # setting that fails the run (the message of its verdict).
        self.refused: IdsNotUnique | None = None
        self.dropped_for = ""
        # Sightings (bot_id, last_seen_at) of listed bots whose rows were written or dropped,
        # waiting for a write: see flush.
        self._seen: list[pl.DataFrame] = []
        self._seen_rows = 0
        self._reset()

    @property
    def halted(self) -> bool:
        """Nothing more of this run is written: read no more."""
        return self.refused is not None or bool(self.dropped_for)

    def refuse(self, exc: IdsNotUnique) -> None:
        """Keys that would merge records: the run stops, writes nothing but its evidence, and
        fails with ``exc`` (the first one met)."""
        if self.refused is None:
            self.refused = exc
        self.drop_rows()

    def _reset(self) -> None:
        self.stats: dict[str, list[Any]] = {k: [] for k in archive.STAT_SCHEMA}
        self.custom: dict[str, list[Any]] = {k: [] for k in archive.CUSTOM_SCHEMA}
        self.bots: list[BotRow] = []
        self.rejects: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.users: list[dict[str, Any]] = []
        self.snapshots: dict[str, list[dict[str, Any]]] = {}
        self._again: list[tuple[int, str]] = []  # rejects (index, kind) perhaps refused before
        self.check: list[bool] = []  # per stat row: may its key be archived already?
        self.listed: dict[str, int] = {}  # per bot read: the length of its /stats list
        self._bot_ids: set[str] = set()
        self.distinct = True  # no stat key twice in this batch: the write need not dedupe

    def drop_rows(self) -> None:
        """Forget every row waiting to be written but the rejects and errors (the evidence of a
        run failed by a setting, which the next run after the fix needs none of)."""
        rejects, errors, again = self.rejects, self.errors, self._again
        self._reset()
        self.rejects, self.errors, self._again = rejects, errors, again

    @property
    def full(self) -> bool:
        """A buffer reached its bound in rows: stat rows ``batch_rows``; listed bots, bots
        with records, or those with rejects and errors ``BATCH_BOT_ROWS`` (of the listed bots
        :meth:`flush` first keeps only those to write); or sightings ``SEEN_ROWS``."""
        return (len(self.stats["stat_id"]) >= self.batch_rows
                or len(self.bots) >= BATCH_BOT_ROWS
                or len(self._bot_ids) + len(self.rejects) + len(self.errors) >= BATCH_BOT_ROWS
                or self._seen_rows >= SEEN_ROWS)

    def add_page(self, bot_id: str, page: StatPage, *, checked: bool = True,
                 listed: int | None = None, again: bool = False) -> None:
        """A validated /stats page: its rows extend the columns (C-speed), its rejects are kept.
        ``checked``: its keys may be archived already (else they are new for sure). ``again``:
        the bot has records archived, so a reject may be one an earlier run kept."""
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
        endpoint = f"GET /bots/{bot_id}/stats"  # as the tail words it
        for reason, raw in page.rejects:
            self.reject(Reject(endpoint, bot_id, reason, raw), again=again)
        if page.raw:
            self.tally.saw_fields("stat", page.raw[-1])  # the newest: one decode per bot

    def reject(self, row: Reject, kind: str | None = "stat", *, again: bool = False) -> None:
        """A record (of ``kind``, for the run's verdict; None: a body, not a record) kept aside
        in table rejects with its reason; ``again``: perhaps refused by an earlier run (see
        :meth:`settle`)."""
        if kind is not None:
            self.tally.reject(kind, row.reason, row.raw)
            if again:
                self._again.append((len(self.rejects), kind))
        self.rejects.append(row._asdict())

    async def settle(self) -> None:
        """Take the rejects the archive holds already out of the verdict's tally: a bot whose
        bad records come again (its newest is malformed, say) is no news of this run, whereas a
        run that refuses what nothing archived yet (a wrong setting) is judged every time."""
        if not self._again:
            return
        pending, self._again = self._again, []
        held = await self.db.read(archive.held_rejects, [self.rejects[i] for i, _ in pending])
        for (i, kind), known in zip(pending, held, strict=True):
            if known:
                self.tally.unreject(kind, self.rejects[i]["reason"])

    def error(self, endpoint: str, bot_id: str | None, exc: Exception) -> None:
        self.report.errors += 1
        said = first_line(exc, ERROR_CHARS)
        log.warning("%s failed: %s", endpoint, said)
        self.errors.append({"endpoint": endpoint, "bot_id": bot_id, "error": said})

    async def flush(self, *, last: bool = False) -> None:
        """Write what waits, in one transaction, unless it is only listed bots: of those the
        ones whose listing changed are kept, the others become sightings (an hourly listing
        shows every bot, and most are as they were), and what waits is written once a bound
        is reached again. Sightings are written with a batch once they are ``SEEN_ROWS``, and
        with the run's ``last`` one: one file of ids and one commit for a whole listing in
        most runs, rather than one a batch (docs/design.md, "Writes proportional to what is
        new")."""
        async with self._lock:
            await self.settle()
            if self.fields is not None and not self.halted:
                verdict = judge(self.tally, self.fields)
                if verdict is not None and verdict.setting:
                    # A setting fails the run: what waits is keyed or read wrong. Stop here.
                    self.dropped_for = verdict.message
            if self.halted:
                self.drop_rows()
                self._seen, self._seen_rows = [], 0
            elif not last and len(self.bots) >= BATCH_BOT_ROWS:
                await self._keep_changed_bots()
                if not self.full:
                    return
            self._saw([r.bot_id for r in self.bots])
            seen = None
            if self._seen and (last or self._seen_rows >= SEEN_ROWS):
                seen, self._seen, self._seen_rows = pl.concat(self._seen), [], 0
            frames = archive.Frames(
                stats=frame_of(self.stats, archive.STAT_SCHEMA).with_columns(
                    _check=pl.Series(self.check, dtype=pl.Boolean)),
                custom=frame_of(self.custom, archive.CUSTOM_SCHEMA),
                bots=self.bots, rejects=self.rejects, errors=self.errors,
                users=self.users, snapshots=self.snapshots, distinct=self.distinct,
                listed=self.listed, seen=seen,
            )
            self._reset()
            if frames.empty:
                return
            await self.db.call(archive.write_batch, frames, self.report, self.new_only)

    async def _keep_changed_bots(self) -> None:
        """Of the listed bots waiting, keep the rows of those whose listing changed (new,
        changed, back after a removal); the others are only seen."""
        rows, self.bots = self.bots, []  # the lister goes on adding meanwhile
        changed = await self.db.read(archive.listing_changed, rows)
        self._saw([r.bot_id for r in rows if r.bot_id not in changed])
        self.bots[:0] = [r for r in rows if r.bot_id in changed]

    def _saw(self, bot_ids: list[str]) -> None:
        """Listed bots, seen now: sightings to write."""
        if bot_ids:
            self._seen.append(pl.DataFrame({"bot_id": bot_ids}, schema={"bot_id": pl.String})
                              .with_columns(last_seen_at=pl.lit(datetime.now(UTC))))
            self._seen_rows += len(bot_ids)
