"""The harvester: archive the whole directory into DuckDB, incrementally and exactly once.

One run:

1. records itself in ``harvest_runs`` (status ``running``) and marks any run a killed process
   left ``running`` as ``interrupted``;
2. snapshots the configured user (me, bots, servers, webhooks) when a user token is set;
3. pages through ``GET /bots`` with :class:`~pipeline.listing.ListingPager` (no bot lost or
   read twice, whatever the service does), and for each listing page looks up, in one query,
   the newest archived record of its bots;
4. hands bots to ``concurrency`` workers: a bot whose newest record (``GET /bots/:id/stat``) is
   already archived costs that one request; any other bot's ``/stats`` is read and validated;
5. buffers rows column-wise and writes them in batches through polars, one transaction per
   batch that also carries the run's counters, so a run killed at any moment leaves whole
   batches only and the next run (records keyed by id, upserted) completes the work;
6. marks bots missing from a *complete* listing as removed, and ends the run ``complete``,
   ``partial`` (some bots failed: retried next run), ``failed`` or ``interrupted``.

DuckDB work happens on one dedicated thread so HTTP never waits on a write.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, TypeVar

import duckdb
import polars as pl

from . import store
from .client import Client, RawArray, decode_json, redact_url, split_array
from .config import FieldSettings, Settings
from .errors import ApiError, BadResponse, BotstatsError, NotFound, StoreError
from .listing import ListingPager, ListingUnstable, SkipIgnored
from .records import (
    BotRow,
    Invalid,
    StatPage,
    entity_id,
    parse_bot,
    parse_stats,
    parse_stats_raw,
    raw_text,
    same_record,
    stat_key,
)

log = logging.getLogger("botstats.harvest")
T = TypeVar("T")

# Exit codes of `botstats harvest` (and `botstats run`), documented in the README.
EXIT_CODES = {"complete": 0, "failed": 1, "partial": 3, "interrupted": 4}


@dataclass
class HarvestReport:
    """What a run did; also the row it leaves in ``harvest_runs``."""

    run_id: str
    mode: str
    status: str = "running"
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    base_url: str = ""
    bots_seen: int = 0
    bots_new: int = 0
    bots_removed: int = 0
    bots_fetched: int = 0
    bots_up_to_date: int = 0
    stats_added: int = 0
    stats_updated: int = 0
    requests: int = 0
    retries: int = 0
    rejects: int = 0
    errors: int = 0
    listing_complete: bool = False
    message: str = ""

    @property
    def seconds(self) -> float:
        end = self.finished_at or datetime.now(UTC)
        return (end - self.started_at).total_seconds()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 3)
        return out


ProgressFn = Callable[[HarvestReport], None]


def new_run_id() -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def harvest(
    settings: Settings,
    *,
    full: bool = False,
    on_progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
) -> HarvestReport:
    """Run one harvest into the archive named by ``settings``; return what it did.

    The caller holds the run lock (``pipeline.lock``) when other runs may start; the DuckDB
    file lock alone would make a second writer wait and then fail.
    """
    report = HarvestReport(run_id=new_run_id(), mode="full" if full else "incremental",
                           base_url=redact_url(settings.service.base_url))
    with store.writer(settings) as con:
        _begin_run(con, report)
        db = _Db(con)
        try:
            asyncio.run(_harvest(settings, report, db, full, on_progress, stop or threading.Event()))
        except (KeyboardInterrupt, asyncio.CancelledError):
            report.status, report.message = "interrupted", "interrupted by the user"
            raise
        except BotstatsError as exc:
            report.status, report.message = "failed", str(exc)
        finally:
            db.shutdown()
            report.finished_at = datetime.now(UTC)
            _finish_run(con, report)
    log.info("harvest %s %s", report.run_id, report.status, extra={"report": report.as_dict()})
    return report


# --- the async part ----------------------------------------------------------------------------
class _Db:
    """Every DuckDB write on one thread: the connection is used by one thread at a time and the
    event loop never blocks on a write. Lookups (:meth:`read`) run on a second thread with their
    own cursor: behind a batch being written, the lister would wait and the workers run dry."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="botstats-db")
        self._reader = store.cursor(con)  # sees committed batches, like the writer between batches
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


async def _harvest(
    settings: Settings,
    report: HarvestReport,
    db: _Db,
    full: bool,
    on_progress: ProgressFn | None,
    stop: threading.Event,
) -> None:
    buffer = _Batch(db, report, settings.store.batch_rows,
                    new_only=await db.call(_nothing_archived))
    async with Client(settings) as client:
        try:
            if settings.user_token:
                await _snapshot_user(client, settings, report, buffer)
            queue: asyncio.Queue[tuple[str, Newest | None] | None] = asyncio.Queue(
                maxsize=settings.service.concurrency * 4
            )
            workers = [
                asyncio.create_task(_worker(client, settings, report, buffer, queue, full, stop,
                                            on_progress))
                for _ in range(settings.service.concurrency)
            ]
            try:
                await _list(client, settings, report, buffer, db, queue, full, stop)
            finally:
                for _ in workers:
                    await queue.put(None)
                await asyncio.gather(*workers)
        finally:
            report.requests = client.stats.requests
            report.retries = client.stats.retries
            await buffer.flush()
    if report.listing_complete and not stop.is_set():
        report.bots_removed = await db.call(_mark_removed, report)
    if stop.is_set():
        report.status, report.message = "interrupted", "stopped on request after the current batch"
    elif report.errors or not report.listing_complete:
        report.status = "partial"
        report.message = report.message or (
            f"{report.errors} request(s) failed after retries or read incomplete data; see "
            f"harvest_errors. The next run tries them again."
        )
    else:
        report.status = "complete"


async def _list(
    client: Client,
    settings: Settings,
    report: HarvestReport,
    buffer: _Batch,
    db: _Db,
    queue: asyncio.Queue[tuple[str, Newest | None] | None],
    full: bool,
    stop: threading.Event,
) -> None:
    pager = ListingPager(page_size=settings.service.page_size)
    fields = settings.fields
    skip = 0
    while not stop.is_set():
        try:
            request = pager.next_request()
            if request is None:
                break
            skip, limit = request
            page = await client.list_bots(limit=limit, skip=skip)
            ids, rows = _parse_page(page, skip, fields, buffer)
            new = set(pager.feed(skip, ids))
        except SkipIgnored:
            raise  # the directory cannot be paged at all: the run fails, saying why
        except ApiError as exc:
            # Without the listing we cannot know which bots exist: what was read is kept,
            # removals are not marked, and the run is partial (or failed if nothing was read).
            endpoint = f"GET /bots?skip={skip}"
            if isinstance(exc, BadResponse) and exc.body is not None \
                    and not isinstance(exc, ListingUnstable):
                buffer.reject(endpoint, None, f"page is not a JSON array: {exc}", exc.body)
            buffer.error(endpoint, None, exc)
            report.message = f"listing stopped early: {exc}"
            if not pager.seen:
                raise
            return
        fresh = [r for r in rows if r.bot_id in new]
        if not fresh:
            continue
        report.bots_seen += len(fresh)
        buffer.bots.extend(fresh)
        # --full reads every bot's /stats whatever is archived: no need to look.
        newest = {} if full else await db.read(_newest, [r.bot_id for r in fresh])
        for row in fresh:
            if stop.is_set():
                return
            await queue.put((row.bot_id, newest.get(row.bot_id)))
    report.listing_complete = pager.complete


def _parse_page(page: list[Any], skip: int, fields: FieldSettings,
                buffer: _Batch) -> tuple[list[str], list[BotRow]]:
    """The bot ids of a listing page in order, and the valid bot rows; invalid ones rejected."""
    ids: list[str] = []
    rows: list[BotRow] = []
    for position, record in enumerate(page):
        try:
            row = parse_bot(record, fields)
        except Invalid as exc:
            buffer.reject(f"GET /bots?skip={skip}", None, str(exc), raw_text(record))
            # A placeholder keeps the page's positions right for the pager.
            ids.append(f"\x00invalid:{skip + position}:{hash(raw_text(record))}")
            continue
        ids.append(row.bot_id)
        rows.append(row)
    return ids, rows


async def _worker(
    client: Client,
    settings: Settings,
    report: HarvestReport,
    buffer: _Batch,
    queue: asyncio.Queue[tuple[str, Newest | None] | None],
    full: bool,
    stop: threading.Event,
    on_progress: ProgressFn | None,
) -> None:
    while (item := await queue.get()) is not None:
        if stop.is_set():
            continue  # drain: the lister stops feeding, the queue empties, None arrives
        bot_id, newest = item
        await _harvest_bot(client, settings, report, buffer, bot_id, newest, full)
        if on_progress is not None:
            report.requests = client.stats.requests
            report.retries = client.stats.retries
            on_progress(report)


@dataclass(frozen=True)
class Newest:
    """A bot's newest archived record: its key and time (microseconds since the epoch), and how
    long the bot's /stats list was when last read (None: not known)."""

    stat_id: str
    recorded_at: int
    listed: int | None


async def _harvest_bot(
    client: Client,
    settings: Settings,
    report: HarvestReport,
    buffer: _Batch,
    bot_id: str,
    newest: Newest | None,
    full: bool,
) -> None:
    fields = settings.fields
    endpoint = f"GET /bots/{bot_id}/stat"
    page_size = settings.service.stats_page_size
    last_key = None
    listed: list[int] = []
    try:
        if newest is not None and not full:
            # A bot with nothing archived skips this check: its /stats is needed anyway.
            last = await client.bot_last_stat(bot_id)
            try:
                last_key = stat_key(last, bot_id, fields)
            except Invalid:
                pass  # the newest record is malformed: read them all, it lands in rejects
            if last_key == newest.stat_id:
                report.bots_up_to_date += 1
                return
        endpoint = f"GET /bots/{bot_id}/stats"
        if page_size:
            records = await _stats_pages(client, bot_id, page_size, fields,
                                         None if full else newest, listed)
        else:
            records = await client.bot_stats_raw(bot_id)
    except NotFound:
        return  # no records yet, or the bot left between the listing and now
    except (SkipIgnored, ListingUnstable) as exc:
        buffer.error(endpoint, bot_id, exc)  # paging /stats failed: nothing of it is kept
        return
    except BadResponse as exc:
        buffer.reject(endpoint, bot_id, f"not a JSON list of records: {_first_line(exc)}",
                      exc.body or "")
        return
    except ApiError as exc:
        buffer.error(endpoint, bot_id, exc)
        return
    report.bots_fetched += 1
    if isinstance(records, RawArray):
        page = parse_stats_raw(records.body, records.items, bot_id, fields)
        length = len(records.items)
    else:
        page = parse_stats(records, bot_id, fields)
        length = len(records)
    if last_key is not None and not page_size and not _holds(page, last_key, bot_id, fields):
        buffer.error(endpoint, bot_id, BadResponse(
            f"{endpoint} lacks the bot's newest record ({last_key}, which GET /bots/{bot_id}/stat "
            f"returned): the service seems to page /stats. Set [service].stats_page_size to its "
            f"page size (now {page_size}); the records read are archived and the bot is read "
            f"again next run."))
    checked = full or newest is None
    if newest is not None and not full:
        page, checked = _newer(page, newest)
    buffer.add_page(endpoint, bot_id, page, checked=checked,
                    listed=listed[0] if listed else length)
    if buffer.full:
        await buffer.flush()


def _newer(page: StatPage, newest: Newest) -> tuple[StatPage, bool]:
    """The records of ``page`` newer than the bot's newest archived one, and whether any of
    them needs its key checked against the archive: only a record stamped exactly as the newest
    (and keyed otherwise) can be archived already. Records at or before the newest are not
    rewritten by an hourly run; `harvest --full` compares every record."""
    at = newest.recorded_at
    rows = [i for i, t in enumerate(page.recorded_at) if t >= at]
    rows = [i for i in rows if page.recorded_at[i] > at or page.stat_id[i] != newest.stat_id]
    tied = any(page.recorded_at[i] == at for i in rows)
    return page.select(rows), tied


def _holds(page: StatPage, key: str, bot_id: str, fields: FieldSettings) -> bool:
    """Whether the record keyed ``key`` is in ``page``, archived or rejected (a record can have
    a good key and a bad count)."""
    if key in page.stat_id:
        return True
    for _, raw in page.rejects:
        try:
            if stat_key(decode_json(raw.encode()), bot_id, fields) == key:
                return True
        except (Invalid, ValueError):
            continue
    return False


async def _read_paged(fetch: Callable[[int, int], Awaitable[list[T]]], key: Callable[[T], str],
                      pager: ListingPager) -> list[T]:
    """Every item of a list the service pages, once each and in order: ``fetch(limit, skip)``
    reads a page, ``pager`` pages as the listing is paged (an overlap, an empty page to end,
    ``skip`` checked), ``key`` tells items apart (the overlap re-reads some)."""
    kept: list[T] = []
    while (request := pager.next_request()) is not None:
        skip, limit = request
        items = await fetch(limit, skip)
        keys = [key(item) for item in items]
        new = set(pager.feed(skip, keys))
        for item, item_key in zip(items, keys, strict=True):
            if item_key in new:
                new.discard(item_key)  # an item twice in one page is kept once
                kept.append(item)
    return kept


def _paged_list(what: str, items: str, setting: str, page_size: int, *, start: int = 0,
                reread_head: bool = True) -> ListingPager:
    return ListingPager(
        page_size=page_size, what=what, items=items, start=start, reread_head=reread_head,
        skip_advice=f"the list cannot be paged: set [service].{setting} = 0 if the service "
                    f"sends whole lists.",
        unstable_advice="Nothing of this list is archived this run; it is read again next run.")


async def _stats_pages(client: Client, bot_id: str, page_size: int, fields: FieldSettings,
                       newest: Newest | None, listed: list[int]) -> RawArray | list[Any]:
    """A bot's /stats list from a service that pages it, as one list; records are told apart by
    their JSON text, valid or not. ``listed`` receives the length of the list.

    With the bot's newest archived record known, the read starts a page before where the last
    read ended and walks back (a page, two, four...) until a page holds that record, so an
    hourly run reads what is new plus a page; the records before it are not read at all.
    """

    async def texts(limit: int, skip: int) -> list[bytes]:
        page = await client.bot_stats_raw(bot_id, limit=limit, skip=skip)
        if isinstance(page, RawArray):
            return [bytes(item) for item in page.items]
        # A page only the lenient decoder read (NaN, lone surrogates, ...) is spelled again in
        # ASCII JSON, which that decoder reads back as it was.
        return [json.dumps(r, separators=(",", ":")).encode() for r in page]

    what = f"GET /bots/{bot_id}/stats"
    start = 0
    if newest is not None and newest.listed:
        start = await _tail_start(texts, page_size, newest, bot_id, fields)
    pager = _paged_list(what, "records", "stats_page_size", page_size, start=start,
                        reread_head=start == 0)
    kept = await _read_paged(texts, lambda text: text.decode("utf-8", "replace"), pager)
    listed.append(start + len(kept))
    body = b"[" + b",".join(kept) + b"]"
    return split_array(body) or decode_json(body)


async def _tail_start(texts: Callable[[int, int], Awaitable[list[bytes]]], page_size: int,
                      newest: Newest, bot_id: str, fields: FieldSettings) -> int:
    """Where to start reading a paged /stats list so that the first page holds the bot's newest
    archived record: a page before the end of the last read, further back (doubling) while the
    record is not there (records inserted or dropped before it), 0 at worst."""
    assert newest.listed
    back = page_size
    while True:
        start = max(0, newest.listed - back)
        if start == 0:
            return 0
        for text in await texts(page_size, start):
            try:
                if stat_key(decode_json(text), bot_id, fields) == newest.stat_id:
                    return start
            except (Invalid, ValueError):
                continue
        back *= 2


async def _user_list(fetch: Callable[..., Awaitable[list[Any]]], user_id: str, what: str,
                     page_size: int) -> list[Any]:
    """A user's bots, servers or webhooks (``fetch`` is the client's method), whole or paged."""
    if not page_size:
        return await fetch(user_id)
    return await _read_paged(
        lambda limit, skip: fetch(user_id, limit=limit, skip=skip),
        lambda record: json.dumps(record, sort_keys=True, separators=(",", ":")),
        _paged_list(f"GET /users/{user_id}/{what}", what, "user_lists_page_size", page_size))


def _first_line(exc: Exception) -> str:
    return str(exc).split("\n", 1)[0][:300]


async def _snapshot_user(client: Client, settings: Settings, report: HarvestReport,
                         buffer: _Batch) -> None:
    fields = settings.fields
    try:
        me = await client.me()
        user_id = entity_id(me, fields.user_id, "user")
        size = settings.service.user_lists_page_size
        lists = await asyncio.gather(_user_list(client.user_bots, user_id, "bots", size),
                                     _user_list(client.user_servers, user_id, "servers", size),
                                     _user_list(client.user_webhooks, user_id, "webhooks", size))
    except Invalid as exc:
        buffer.reject("GET /users/@me", None, str(exc), raw_text(me))
        return
    except ApiError as exc:
        buffer.error("GET /users/@me", None, exc)
        return
    now = datetime.now(UTC)
    buffer.users.append({"run_id": report.run_id, "user_id": user_id, "is_me": True,
                         "raw": raw_text(me), "fetched_at": now})
    for table, key, id_field, what, records in (
        ("user_bots", "bot_id", fields.bot_id, "bot", lists[0]),
        ("user_servers", "server_id", fields.server_id, "server", lists[1]),
        ("user_webhooks", "webhook_id", fields.webhook_id, "webhook", lists[2]),
    ):
        for record in records:
            try:
                rid = entity_id(record, id_field, what)
            except Invalid as exc:
                buffer.reject(f"GET /users/{user_id}/{table[5:]}", None, str(exc), raw_text(record))
                continue
            buffer.snapshots.setdefault(table, []).append(
                {"run_id": report.run_id, "user_id": user_id, key: rid,
                 "raw": raw_text(record), "fetched_at": now}
            )


# --- batching and writing ------------------------------------------------------------------------
STAT_SCHEMA = {
    "stat_id": pl.String, "bot_id": pl.String, "recorded_at": pl.Datetime("us", "UTC"),
    "users": pl.Int64, "guilds": pl.Int64, "shards": pl.Int64, "memory_load": pl.Float64,
    "cpu_load": pl.Float64, "commands_executed": pl.Int64, "raw": pl.String,
}
CUSTOM_SCHEMA = {
    "stat_id": pl.String, "bot_id": pl.String, "recorded_at": pl.Datetime("us", "UTC"),
    "name": pl.String, "value_text": pl.String, "value_num": pl.Float64,
}


ERROR_SCHEMA = {"endpoint": pl.String, "bot_id": pl.String, "error": pl.String}

# The StatPage columns a batch takes as they are (bot_id is added, the same for a whole page).
STAT_COLUMNS = [c for c in STAT_SCHEMA if c != "bot_id"]


def _frame(columns: dict[str, list[Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Buffered columns as a frame; ``recorded_at`` is buffered as microseconds since the epoch,
    which polars reads a hundred times faster than datetime objects."""
    return pl.DataFrame(columns, schema={**schema, "recorded_at": pl.Int64}).with_columns(
        pl.col("recorded_at").cast(schema["recorded_at"]))


class _Batch:
    """Rows waiting for the next write, kept column-wise (cheap to append, cheap to frame)."""

    def __init__(self, db: _Db, report: HarvestReport, batch_rows: int, *,
                 new_only: bool = False) -> None:
        self.db = db
        self.new_only = new_only  # see _write_stats
        self.report = report
        self.batch_rows = batch_rows
        self._lock = asyncio.Lock()
        self._reset()

    def _reset(self) -> None:
        self.stats: dict[str, list[Any]] = {k: [] for k in STAT_SCHEMA}
        self.custom: dict[str, list[Any]] = {k: [] for k in CUSTOM_SCHEMA}
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
        return len(self.stats["stat_id"]) >= self.batch_rows

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

    def reject(self, endpoint: str, bot_id: str | None, reason: str, raw: str) -> None:
        self.rejects.append({"endpoint": endpoint, "bot_id": bot_id, "reason": reason, "raw": raw})

    def error(self, endpoint: str, bot_id: str | None, exc: Exception) -> None:
        self.report.errors += 1
        log.warning("%s failed: %s", endpoint, _first_line(exc))
        self.errors.append({"endpoint": endpoint, "bot_id": bot_id, "error": _first_line(exc)})

    async def flush(self) -> None:
        async with self._lock:
            frames = _Frames(
                stats=_frame(self.stats, STAT_SCHEMA).with_columns(
                    _check=pl.Series(self.check, dtype=pl.Boolean)),
                custom=_frame(self.custom, CUSTOM_SCHEMA),
                bots=self.bots, rejects=self.rejects, errors=self.errors,
                users=self.users, snapshots=self.snapshots, distinct=self.distinct,
                listed=self.listed,
            )
            self._reset()
            if frames.empty:
                return
            await self.db.call(_write, frames, self.report, self.new_only)


@dataclass
class _Frames:
    stats: pl.DataFrame
    custom: pl.DataFrame
    bots: list[BotRow]
    rejects: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    users: list[dict[str, Any]]
    snapshots: dict[str, list[dict[str, Any]]]
    distinct: bool = False  # no stat key twice (custom field names are unique per record)
    listed: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.stats.height or self.bots or self.rejects or self.errors or self.users
                    or self.snapshots or self.listed)


def _write(con: duckdb.DuckDBPyConnection, f: _Frames, report: HarvestReport,
           new_only: bool = False) -> None:
    """One transaction: the batch's rows and the run's counters land together or not at all."""
    now = datetime.now(UTC)
    run_id = report.run_id
    counted = {c: getattr(report, c) for c in _WRITE_COUNTERS}
    try:
        con.execute("BEGIN TRANSACTION")
        if f.bots:
            report.bots_new += _write_bots(con, f.bots, run_id, now)
        if f.stats.height or f.listed:
            added, updated = _write_stats(con, f, run_id, now, new_only)
            report.stats_added += added
            report.stats_updated += updated
        if f.rejects:
            report.rejects += _write_rejects(con, f.rejects, run_id, now)
        if f.errors:
            store.run(con, "INSERT INTO harvest_errors BY NAME SELECT * FROM errors_in",
                      errors_in=pl.DataFrame(f.errors, schema=ERROR_SCHEMA).with_columns(
                          run_id=pl.lit(run_id), seen_at=pl.lit(now)))
        if f.users:
            _insert_snapshot(con, "users", f.users, run_id)
        for table, rows in f.snapshots.items():
            _insert_snapshot(con, table, rows, run_id)
        _save_counters(con, report)
        con.execute("COMMIT")
    except duckdb.Error as exc:
        store.rollback(con)
        for name, value in counted.items():  # the summary counts committed rows only
            setattr(report, name, value)
        raise StoreError(
            f"writing a batch of run {run_id} failed: {exc}. The archive keeps every batch "
            f"committed before this one and none of this one: fix what the error says (a full "
            f"disk, say) and run again, and the next run completes the work."
        ) from exc


def _insert_snapshot(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]],
                     run_id: str) -> None:
    """A user snapshot's rows, each key once per run (a snapshot is taken once per run)."""
    keys = [c for c in rows[0] if c not in ("raw", "fetched_at", "is_me")]
    store.run(
        con, f"INSERT INTO {table} BY NAME SELECT * FROM snap_in ANTI JOIN "
        f"(SELECT * FROM {table} WHERE run_id = ?) USING ({', '.join(keys)})", [run_id],
        snap_in=pl.DataFrame(rows).unique(subset=keys, keep="last", maintain_order=True))


def _write_bots(con: duckdb.DuckDBPyConnection, rows: list[BotRow], run_id: str,
                now: datetime) -> int:
    # Frames are named apart from tables, so no SQL reads a frame where it means a table.
    bots_in = pl.DataFrame(
        {"bot_id": [r.bot_id for r in rows], "name": [r.name for r in rows],
         "raw": [r.raw for r in rows]},
        schema={"bot_id": pl.String, "name": pl.String, "raw": pl.String},
    ).unique(subset="bot_id", keep="last").with_columns(
        first_seen_at=pl.lit(now), last_seen_at=pl.lit(now), run_id=pl.lit(run_id))
    ((new_count,),) = store.run(
        con, "SELECT count(*) FROM bots_in n ANTI JOIN bots o USING (bot_id)", bots_in=bots_in)
    store.run(
        con,
        "MERGE INTO bots USING bots_in AS n ON bots.bot_id = n.bot_id "
        "WHEN MATCHED THEN UPDATE SET name = n.name, raw = n.raw, last_seen_at = n.last_seen_at, "
        "removed_at = NULL, run_id = n.run_id "
        "WHEN NOT MATCHED THEN INSERT BY NAME",
        bots_in=bots_in,
    )
    return int(new_count)


def _write_stats(con: duckdb.DuckDBPyConnection, f: _Frames, run_id: str, now: datetime,
                 new_only: bool = False) -> tuple[int, int]:
    """The batch's records (new ones added, changed ones rewritten, custom fields with them)
    and each bot's newest archived record; (added, changed)."""
    batch_in = _stats_in(f.stats, run_id, now, f.distinct)
    added, changed = _write_records(con, f, batch_in, run_id, new_only)
    _update_latest(con, batch_in, changed, f.listed)
    return added, changed.height


def _update_latest(con: duckdb.DuckDBPyConnection, batch_in: pl.DataFrame,
                   changed: pl.DataFrame, listed: dict[str, int]) -> None:
    """``bot_latest_stat`` after the batch: a bot's newest record in the batch replaces the one
    kept unless that one is newer (the service may have dropped records the archive keeps), and
    the length of each bot's /stats list as read."""
    newest_in = batch_in.group_by("bot_id").agg(
        pl.col("stat_id").sort_by("recorded_at").last(), pl.col("recorded_at").max())
    lengths = pl.DataFrame({"bot_id": list(listed), "stats_listed": list(listed.values())},
                           schema={"bot_id": pl.String, "stats_listed": pl.Int64})
    latest_in = newest_in.join(lengths, on="bot_id", how="full", coalesce=True)
    store.run(
        con, "MERGE INTO bot_latest_stat AS t USING latest_in AS n ON t.bot_id = n.bot_id "
        "WHEN MATCHED THEN UPDATE SET "
        "stat_id = CASE WHEN n.recorded_at >= t.recorded_at THEN n.stat_id ELSE t.stat_id END, "
        "recorded_at = greatest(t.recorded_at, n.recorded_at), "
        "stats_listed = coalesce(n.stats_listed, t.stats_listed) "
        "WHEN NOT MATCHED AND n.stat_id IS NOT NULL THEN INSERT BY NAME",
        latest_in=latest_in)
    if changed.height:
        # A rewritten record may have moved back in time: its bots' newest is looked up again
        # (a scan of bot_stats, only when the service changed records).
        store.run(
            con, "UPDATE bot_latest_stat AS t SET stat_id = n.stat_id, recorded_at = n.recorded_at "
            "FROM (SELECT bot_id, arg_max(stat_id, recorded_at) AS stat_id, max(recorded_at) AS "
            "recorded_at FROM bot_stats SEMI JOIN changed_in USING (bot_id) GROUP BY bot_id) AS n "
            "WHERE t.bot_id = n.bot_id",
            changed_in=changed.select("bot_id").unique())


def _write_records(con: duckdb.DuckDBPyConnection, f: _Frames, batch_in: pl.DataFrame,
                   run_id: str, new_only: bool) -> tuple[int, pl.DataFrame]:
    """Insert the batch's new records; rewrite those the service changed; (added, changed).

    Rows the reader knows to be new (newer than their bot's newest archived record, or of a bot
    with nothing archived) are inserted as they are; only the others are looked up in
    ``bot_stats``, so an hourly run never scans the archive."""
    custom = f.custom
    if new_only:
        # Nothing was archived when the run started and each bot is read once: every key is new.
        checked = batch_in.clear()
    else:
        checked = batch_in.filter("_check")
    fresh = batch_in.filter(~pl.col("_check")) if checked.height else batch_in
    changed = _keys([])
    if checked.height:
        archived = _archived(con, checked)
        fresh = pl.concat([fresh, checked.join(archived.select("bot_id", "stat_id"),
                                               on=["bot_id", "stat_id"], how="anti",
                                               maintain_order="left")])
        changed = _update_changed(con, checked, archived)
    fresh = fresh.drop("_check")
    if fresh.height:
        store.run(con, "INSERT INTO bot_stats BY NAME SELECT * FROM batch_in", batch_in=fresh)
    if custom.height:
        _write_custom(con, custom, run_id, fresh.select("bot_id", "stat_id"), changed,
                      f.distinct, every=fresh.height == batch_in.height)
    return fresh.height, changed


def _archived(con: duckdb.DuckDBPyConnection, checked: pl.DataFrame) -> pl.DataFrame:
    """The archived text of those ``checked`` records that are in ``bot_stats`` (keys, raw)."""
    rows = store.run(
        con, "SELECT t.bot_id, t.stat_id, t.raw::VARCHAR FROM bot_stats AS t SEMI JOIN "
        "(SELECT bot_id, stat_id FROM batch_in) AS b USING (bot_id, stat_id)",
        batch_in=checked.select("bot_id", "stat_id"))
    return pl.DataFrame(rows, schema={"bot_id": pl.String, "stat_id": pl.String,
                                      "old_raw": pl.String}, orient="row")


def _keys(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"bot_id": pl.String, "stat_id": pl.String}, orient="row")


def _write_custom(con: duckdb.DuckDBPyConnection, custom: pl.DataFrame, run_id: str,
                  added: pl.DataFrame, changed: pl.DataFrame, distinct: bool, *,
                  every: bool = False) -> None:
    """Custom fields belong to their stat record: they are written with a new record and
    replaced with a changed one, never compared on their own (the stat's key already makes
    them exactly-once)."""
    custom_in = _custom_in(custom, run_id, distinct)
    if not every:
        touched = pl.concat([added, changed])
        if touched.is_empty():
            return
        custom_in = custom_in.join(touched, on=["bot_id", "stat_id"], how="semi",
                                   maintain_order="left")
    if changed.height:
        store.run(con, "DELETE FROM bot_stat_custom WHERE (bot_id, stat_id) IN "
                  "(SELECT bot_id, stat_id FROM changed_in)", changed_in=changed)
    if custom_in.height:
        store.run(con, "INSERT INTO bot_stat_custom BY NAME SELECT * FROM custom_in",
                  custom_in=custom_in)


# Duplicate keys inside one batch: keep the last copy the service sent. maintain_order: rows
# land in the order the service sent them (bot by bot, oldest first).
def _stats_in(stats: pl.DataFrame, run_id: str, now: datetime, distinct: bool) -> pl.DataFrame:
    if not distinct:
        stats = stats.unique(subset=["bot_id", "stat_id"], keep="last", maintain_order=True)
    return stats.with_columns(run_id=pl.lit(run_id), archived_at=pl.lit(now))


def _custom_in(custom: pl.DataFrame, run_id: str, distinct: bool) -> pl.DataFrame:
    if not distinct:
        custom = custom.unique(subset=["bot_id", "stat_id", "name"], keep="last",
                               maintain_order=True)
    return custom.with_columns(run_id=pl.lit(run_id))


def _nothing_archived(con: duckdb.DuckDBPyConnection) -> bool:
    """No stat (nor custom field) archived yet: a first harvest, or --full into a fresh file."""
    ((found,),) = con.execute(
        "SELECT EXISTS (SELECT 1 FROM bot_stats) OR EXISTS (SELECT 1 FROM bot_stat_custom)"
    ).fetchall()
    return not found


def _update_changed(con: duckdb.DuckDBPyConnection, checked: pl.DataFrame,
                    archived: pl.DataFrame) -> pl.DataFrame:
    """Rewrite the records the service changed since we archived them (an unchanged record is
    never rewritten); return their keys.

    A record whose text differs is compared as JSON: the same record spelled another way (keys
    reordered, or archived canonically by an older botstats) is unchanged."""
    spelled_apart = checked.join(archived, on=["bot_id", "stat_id"], how="inner").filter(
        pl.col("old_raw") != pl.col("raw"))
    changed = _keys([(bot_id, stat_id) for bot_id, stat_id, old, new in spelled_apart.select(
        "bot_id", "stat_id", "old_raw", "raw").iter_rows() if not same_record(old, new)])
    if changed.is_empty():
        return changed
    store.run(
        con, "UPDATE bot_stats AS t SET recorded_at = b.recorded_at, users = b.users, "
        "guilds = b.guilds, shards = b.shards, memory_load = b.memory_load, "
        "cpu_load = b.cpu_load, commands_executed = b.commands_executed, raw = b.raw, "
        "run_id = b.run_id, archived_at = b.archived_at "
        "FROM (SELECT * FROM batch_in SEMI JOIN changed_in USING (bot_id, stat_id)) AS b "
        "WHERE t.bot_id = b.bot_id AND t.stat_id = b.stat_id",
        batch_in=checked.drop("_check"), changed_in=changed)
    return changed


def _write_rejects(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]], run_id: str,
                   now: datetime) -> int:
    rejects_in = (
        pl.DataFrame(rows, schema={"endpoint": pl.String, "bot_id": pl.String,
                                   "reason": pl.String, "raw": pl.String})
        .with_columns(
            # The same bad record seen again next run is the same reject: kept once.
            reject_key=pl.concat_str(
                [pl.col("endpoint").str.replace(r"\?.*$", ""), pl.col("bot_id").fill_null(""),
                 pl.col("reason"), pl.col("raw").fill_null("")], separator="\x1f"
            ).hash().cast(pl.String),
            run_id=pl.lit(run_id), seen_at=pl.lit(now))
        .unique(subset="reject_key", keep="first")
    )
    new = pl.DataFrame(store.run(
        con, "SELECT reject_key FROM rejects_in ANTI JOIN rejects USING (reject_key)",
        rejects_in=rejects_in.select("reject_key")), schema={"reject_key": pl.String},
        orient="row")
    if new.height:
        store.run(con, "INSERT INTO rejects BY NAME SELECT * FROM rejects_in",
                  rejects_in=rejects_in.join(new, on="reject_key", how="semi"))
    return new.height


def _newest(con: duckdb.DuckDBPyConnection, bot_ids: list[str]) -> dict[str, Newest]:
    """The newest archived record of each bot in one listing page (one query per page, on
    ``bot_latest_stat``: one row per bot, whatever the size of ``bot_stats``)."""
    rows = store.run(
        con, "SELECT bot_id, stat_id, epoch_us(recorded_at), stats_listed FROM bot_latest_stat "
        "SEMI JOIN page_in USING (bot_id)",
        page_in=pl.DataFrame({"bot_id": bot_ids}, schema={"bot_id": pl.String}))
    return {bot_id: Newest(stat_id, at, listed) for bot_id, stat_id, at, listed in rows}


def _begin_run(con: duckdb.DuckDBPyConnection, report: HarvestReport) -> None:
    stale = con.execute("SELECT run_id FROM harvest_runs WHERE status = 'running'").fetchall()
    if stale:
        con.execute(
            "UPDATE harvest_runs SET status = 'interrupted', finished_at = now(), "
            "message = 'the run ended without recording its end (its process was killed, or "
            "the archive could not be written: see its log); its whole batches are kept and a "
            "later run completes the work' WHERE status = 'running'")
    for (run_id,) in stale:
        log.warning("run %s had not recorded its end (killed, or the archive could not be "
                    "written); marked interrupted", run_id)
    previous = con.execute("SELECT base_url FROM harvest_runs WHERE base_url IS NOT NULL "
                           "ORDER BY started_at DESC LIMIT 1").fetchall()
    if previous and previous[0][0] != report.base_url:
        log.warning("this archive was last harvested from %s and this run reads %s: if that is "
                    "another service, its bots will be marked removed once this listing is "
                    "complete (their history is kept); point --db at another archive for it",
                    previous[0][0], report.base_url)
    con.execute(
        "INSERT INTO harvest_runs (run_id, started_at, status, mode, base_url, pid, host) "
        "VALUES (?, ?, 'running', ?, ?, ?, ?)",
        [report.run_id, report.started_at, report.mode, report.base_url, os.getpid(),
         socket.gethostname()],
    )


_COUNTERS = ("bots_seen", "bots_new", "bots_removed", "bots_fetched", "stats_added",
             "stats_updated", "requests", "retries", "rejects", "errors")


# The counters a batch's write adds to (the others are counted as requests are made).
_WRITE_COUNTERS = ("bots_new", "stats_added", "stats_updated", "rejects")


def _save_counters(con: duckdb.DuckDBPyConnection, report: HarvestReport) -> None:
    sets = ", ".join(f"{c} = ?" for c in _COUNTERS)
    con.execute(f"UPDATE harvest_runs SET {sets} WHERE run_id = ?",
                [getattr(report, c) for c in _COUNTERS] + [report.run_id])


def _finish_run(con: duckdb.DuckDBPyConnection, report: HarvestReport) -> None:
    try:
        _save_counters(con, report)
        con.execute(
            "UPDATE harvest_runs SET status = ?, finished_at = ?, message = ? WHERE run_id = ?",
            [report.status, report.finished_at, report.message or None, report.run_id],
        )
    except duckdb.Error as exc:
        log.error("could not record the end of run %s: %s", report.run_id, exc)


def _mark_removed(con: duckdb.DuckDBPyConnection, report: HarvestReport) -> int:
    """Bots a complete listing no longer shows keep their history and get ``removed_at``."""
    ((count,),) = con.execute(
        "SELECT count(*) FROM bots WHERE removed_at IS NULL AND last_seen_at < ?",
        [report.started_at]).fetchall()
    if count:
        con.execute("UPDATE bots SET removed_at = ? WHERE removed_at IS NULL AND last_seen_at < ?",
                    [report.started_at, report.started_at])
    con.execute("UPDATE harvest_runs SET bots_removed = ? WHERE run_id = ?",
                [count, report.run_id])
    return int(count)


