"""The harvester: archive the whole directory into DuckDB, incrementally and exactly once.

One run:

1. records itself in ``harvest_runs`` (status ``running``) and marks any run a killed process
   left ``running`` as ``interrupted``;
2. snapshots the configured user (me, bots, servers, webhooks) when a user token is set;
3. pages through ``GET /bots`` with :class:`~pipeline.listing.Pager` (no bot lost or
   read twice, whatever the service does), and for each listing page looks up, in one query,
   the newest archived record of its bots;
4. hands bots to ``concurrency`` workers: a bot whose newest record (``GET /bots/:id/stat``) is
   already archived costs that one request; any other bot's ``/stats`` is read and validated;
5. buffers rows column-wise and writes them in batches through polars, one transaction per
   batch that also carries the run's counters, so a run killed at any moment leaves whole
   batches only and the next run (records keyed by id, upserted) completes the work;
6. marks bots missing from a *complete* listing as removed, unless that listing collapsed
   (:mod:`pipeline.removals`), and ends the run ``complete``, ``partial`` (some bots failed:
   retried next run; or a listing not believed), ``failed`` or ``interrupted``.

DuckDB work happens on one dedicated thread so HTTP never waits on a write.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, TypeVar

import duckdb
import polars as pl

from . import archive, store
from .archive import BotRow
from .client import Client, RawArray, split_array
from .concurrency import AimdLimit, workers
from .config import FieldSettings, Settings
from .drift import describe as describe_fields
from .drift import note_fields
from .errors import ApiError, BadResponse, BotstatsError, ListingUnstable, NotFound, SkipIgnored
from .json_codec import decode_json
from .listing import Pager
from .records import (
    Invalid,
    StatPage,
    entity_id,
    parse_bot,
    parse_stats,
    parse_stats_raw,
    raw_text,
    stat_key,
)
from .redact import redact_url
from .removals import judge_removals
from .run_id import new_run_id
from .shapes import RecordTally, field_verdict

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
    new_fields: str = ""  # record fields the archive had not seen before this run (drift)

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



def harvest(
    settings: Settings,
    *,
    full: bool = False,
    accept_removals: bool = False,
    on_progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
) -> HarvestReport:
    """Run one harvest into the archive named by ``settings``; return what it did.

    ``accept_removals`` believes a complete listing however many bots it would mark removed
    (see :mod:`pipeline.removals`).

    The caller holds the run lock (``pipeline.lock``) when other runs may start; the DuckDB
    file lock alone would make a second writer wait and then fail.
    """
    report = HarvestReport(run_id=new_run_id(), mode="full" if full else "incremental",
                           base_url=redact_url(settings.service.base_url))
    with store.writer(settings) as con:
        archive.begin_run(con, report)
        db = _Db(con)
        try:
            asyncio.run(_harvest(settings, report, db, full, accept_removals, on_progress,
                                 stop or threading.Event()))
        except (KeyboardInterrupt, asyncio.CancelledError):
            report.status, report.message = "interrupted", "interrupted by the user"
            raise
        except BotstatsError as exc:
            report.status, report.message = "failed", str(exc)
        finally:
            db.shutdown()
            report.finished_at = datetime.now(UTC)
            archive.finish_run(con, report)
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
    accept_removals: bool,
    on_progress: ProgressFn | None,
    stop: threading.Event,
) -> None:
    buffer = _Batch(db, report, settings.store.batch_rows,
                    new_only=await db.call(archive.nothing_archived))
    known_live = await db.call(archive.live_bots)  # before this run writes any bot
    async with Client(settings) as client:
        try:
            if settings.user_token:
                await _snapshot_user(client, settings, report, buffer)
            tasks = workers(settings.service.concurrency, settings.service.max_connections)
            queue: asyncio.Queue[tuple[str, archive.Newest | None] | None] = asyncio.Queue(
                maxsize=tasks * 4)
            pool = _Workers(lambda: _worker(client, settings, report, buffer, queue, full, stop,
                                            on_progress, pool), tasks, client.gate.control)
            pool.grow()
            try:
                await _list(client, settings, report, buffer, db, queue, full, stop)
            finally:
                for _ in pool.close():
                    await queue.put(None)
                await asyncio.gather(*pool.tasks)
        finally:
            report.requests = client.stats.requests
            report.retries = client.stats.retries
            await buffer.flush()
    refused = ""
    if report.listing_complete and not stop.is_set():
        verdict = judge_removals(known_live, await db.call(archive.live_bots, report.started_at),
                                 report.bots_seen, settings.harvest.max_removed_share,
                                 accept_removals)
        if verdict.believed:
            report.bots_removed = await db.call(archive.mark_removed, report)
        else:
            refused = verdict.message
            log.warning("removals not believed: %s", refused)
    drift = await db.call(note_fields, report.run_id, buffer.tally.fields, datetime.now(UTC))
    if drift:
        report.new_fields = describe_fields(drift)
        log.warning("the service sends record fields this archive has not seen before: %s "
                    "(kept in the raw column)", report.new_fields)
    if stop.is_set():
        report.status, report.message = "interrupted", "stopped on request after the current batch"
    elif report.errors or not report.listing_complete or refused:
        report.status = "partial"
        failed = (f"{report.errors} request(s) failed after retries or read incomplete data; see "
                  f"harvest_errors. The next run tries them again.") if report.errors else ""
        report.message = report.message or " ".join(filter(None, (refused, failed)))
    else:
        report.status = "complete"
    verdict = field_verdict(settings.fields, buffer.tally)
    if verdict is not None and not stop.is_set():
        report.status, report.message = "failed", verdict


async def _list(
    client: Client,
    settings: Settings,
    report: HarvestReport,
    buffer: _Batch,
    db: _Db,
    queue: asyncio.Queue[tuple[str, archive.Newest | None] | None],
    full: bool,
    stop: threading.Event,
) -> None:
    pager = Pager(page_size=settings.service.page_size)
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
        # A bot the page repeats is read once (its last copy kept, at its first place).
        fresh = list({r.bot_id: r for r in rows if r.bot_id in new}.values())
        if not fresh:
            continue
        report.bots_seen += len(fresh)
        buffer.bots.extend(fresh)
        # --full reads every bot's /stats whatever is archived: no need to look.
        newest = {} if full else await db.read(archive.newest, [r.bot_id for r in fresh])
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
        buffer.tally.saw_fields("bot", record)
    buffer.tally.keep("bot", len(rows))
    return ids, rows


class _Workers:
    """The tasks that harvest bots: as many as the window of ``concurrency = "auto"`` holds,
    up to ``most`` (a fixed concurrency: that many from the start). Tasks waiting at the gate
    for a place in the window would cost a wake-up per request, a few percent of a harvest on
    loopback, where the window stays near its start."""

    def __init__(self, make: Callable[[], Coroutine[Any, Any, None]], most: int,
                 control: AimdLimit | None) -> None:
        self._make, self._most, self._control = make, most, control
        self._closed = False
        self.tasks: list[asyncio.Task[None]] = []

    def grow(self) -> None:
        """Start tasks up to the window (all of ``most`` without a control)."""
        want = self._most if self._control is None else min(self._most, self._control.window)
        while not self._closed and len(self.tasks) < want:
            self.tasks.append(asyncio.create_task(self._make()))

    def close(self) -> list[asyncio.Task[None]]:
        """No more tasks; the ones to stop (a None each)."""
        self._closed = True
        return list(self.tasks)


async def _worker(
    client: Client,
    settings: Settings,
    report: HarvestReport,
    buffer: _Batch,
    queue: asyncio.Queue[tuple[str, archive.Newest | None] | None],
    full: bool,
    stop: threading.Event,
    on_progress: ProgressFn | None,
    pool: _Workers,
) -> None:
    while (item := await queue.get()) is not None:
        pool.grow()
        if stop.is_set():
            continue  # drain: the lister stops feeding, the queue empties, None arrives
        bot_id, newest = item
        await _harvest_bot(client, settings, report, buffer, bot_id, newest, full)
        if on_progress is not None:
            report.requests = client.stats.requests
            report.retries = client.stats.retries
            on_progress(report)


async def _harvest_bot(
    client: Client,
    settings: Settings,
    report: HarvestReport,
    buffer: _Batch,
    bot_id: str,
    newest: archive.Newest | None,
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
    received_at = datetime.now(UTC)
    if isinstance(records, RawArray):
        length = len(records.items)
        start = 0 if full or newest is None else _after_newest(records.items, newest, bot_id,
                                                                 fields)
        body, items = (records.body, records.items) if not start else \
            _subarray(records.items[start:])
        page = parse_stats_raw(body, items, bot_id, fields, received_at=received_at)
        del body, items  # see below
    else:
        page = parse_stats(records, bot_id, fields, received_at=received_at)
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
    # The body and the page's objects go as soon as the batch holds them (a bot's /stats may
    # be tens of MB): not kept alive through the batch's write.
    del records, page
    if buffer.full:
        await buffer.flush()


# How far from where the last read ended the newest archived record is looked for in a whole
# /stats list: records dropped or inserted before it shift it by as many places.
_ANCHOR_WINDOW = 8


def _after_newest(items: list[Any], newest: archive.Newest, bot_id: str,
                  fields: FieldSettings) -> int:
    """Where the records after the bot's newest archived one start in a whole /stats list (0:
    not found, decode them all). The list's length at the last read says where to look, so an
    hourly run decodes what is new, not the bot's whole history."""
    if not newest.listed:
        return 0
    lo = max(0, newest.listed - _ANCHOR_WINDOW)
    for i in range(lo, min(len(items), newest.listed + _ANCHOR_WINDOW)):
        try:
            if stat_key(decode_json(bytes(items[i])), bot_id, fields) == newest.stat_id:
                return i + 1
        except (Invalid, ValueError):
            continue
    return 0


def _subarray(items: list[Any]) -> tuple[bytes, list[Any]]:
    """A JSON array of ``items`` (raw record texts) and its items, as the client splits one."""
    body = b"[" + b",".join(bytes(item) for item in items) + b"]"
    split = split_array(body)
    assert split is not None  # each item was a JSON value of an array that split
    return split.body, split.items


def _newer(page: StatPage, newest: archive.Newest) -> tuple[StatPage, bool]:
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
                      pager: Pager) -> list[T]:
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
                reread_head: bool = True) -> Pager:
    return Pager(
        page_size=page_size, what=what, items=items, start=start, reread_head=reread_head,
        skip_advice=f"the list cannot be paged: set [service].{setting} = 0 if the service "
                    f"sends whole lists.",
        unstable_advice="Nothing of this list is archived this run; it is read again next run.")


async def _stats_pages(client: Client, bot_id: str, page_size: int, fields: FieldSettings,
                       newest: archive.Newest | None, listed: list[int]) -> RawArray | list[Any]:
    """A bot's /stats list from a service that pages it, as one list; records are told apart by
    their JSON text, valid or not. ``listed`` receives the length of the list.

    With the bot's newest archived record known, the read starts a few records before where
    the last read ended and walks back until a page holds that record, so an hourly run reads
    what is new, a few records before it and an empty page; the records before are not read.
    """

    read: dict[tuple[int, int], list[bytes]] = {}  # the page _tail_start stood on, read once

    async def texts(limit: int, skip: int) -> list[bytes]:
        if (limit, skip) in read:
            return read.pop((limit, skip))
        page = await client.bot_stats_raw(bot_id, limit=limit, skip=skip)
        if isinstance(page, RawArray):
            return [bytes(item) for item in page.items]
        # A page only the lenient decoder read (NaN, lone surrogates, ...) is spelled again in
        # ASCII JSON, which that decoder reads back as it was.
        return [json.dumps(r, separators=(",", ":")).encode() for r in page]

    what = f"GET /bots/{bot_id}/stats"
    tail = None
    if newest is not None and newest.listed:
        tail = await _tail_start(texts, page_size, newest, bot_id, fields, read)
    start = tail or 0
    pager = _paged_list(what, "records", "stats_page_size", page_size, start=start,
                        reread_head=tail is None)
    kept = await _read_paged(texts, lambda text: text.decode("utf-8", "replace"), pager)
    listed.append(start + len(kept))
    body = b"[" + b",".join(kept) + b"]"
    return split_array(body) or decode_json(body)


async def _tail_start(texts: Callable[[int, int], Awaitable[list[bytes]]], page_size: int,
                      newest: archive.Newest, bot_id: str, fields: FieldSettings,
                      read: dict[tuple[int, int], list[bytes]]) -> int | None:
    """Where to start reading a paged /stats list so that the first page holds the bot's newest
    archived record: a few records before where the last read ended, further back (a page, two,
    four...) while the record is not there (records inserted or dropped before it). The page it
    stands on is left in ``read`` for the pager. None: not found even at 0; read it all."""
    assert newest.listed
    back = min(page_size, _ANCHOR_WINDOW)
    while True:
        start = max(0, newest.listed - back)
        page = await texts(page_size, start)
        read[(page_size, start)] = page
        for text in page:
            try:
                if stat_key(decode_json(text), bot_id, fields) == newest.stat_id:
                    return start
            except (Invalid, ValueError):
                continue
        if start == 0:
            return None
        del read[(page_size, start)]
        back = page_size if back < page_size else back * 2


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
# The StatPage columns a batch takes as they are (bot_id is added, the same for a whole page).
STAT_COLUMNS = [c for c in archive.STAT_SCHEMA if c != "bot_id"]


def _frame(columns: dict[str, list[Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Buffered columns as a frame, taken out of ``columns`` one by one so each list (and the
    objects only it holds) is freed as soon as polars has copied it: a batch is never held
    twice over. ``recorded_at`` is buffered as microseconds since the epoch, which polars reads
    a hundred times faster than datetime objects."""
    series = [pl.Series(name, columns.pop(name), dtype=pl.Int64 if name == "recorded_at" else dtype)
              for name, dtype in schema.items()]
    return pl.DataFrame(series).with_columns(pl.col("recorded_at").cast(schema["recorded_at"]))


class _Batch:
    """Rows waiting for the next write, kept column-wise (cheap to append, cheap to frame)."""

    def __init__(self, db: _Db, report: HarvestReport, batch_rows: int, *,
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
        self.tally.keep("stat", len(page))
        if page.raw:
            self.tally.saw_fields("stat", page.raw[-1])  # the newest: one decode per bot

    def reject(self, endpoint: str, bot_id: str | None, reason: str, raw: str) -> None:
        self.tally.reject(reason, raw)
        self.rejects.append({"endpoint": endpoint, "bot_id": bot_id, "reason": reason, "raw": raw})

    def error(self, endpoint: str, bot_id: str | None, exc: Exception) -> None:
        self.report.errors += 1
        log.warning("%s failed: %s", endpoint, _first_line(exc))
        self.errors.append({"endpoint": endpoint, "bot_id": bot_id, "error": _first_line(exc)})

    async def flush(self) -> None:
        async with self._lock:
            frames = archive.Frames(
                stats=_frame(self.stats, archive.STAT_SCHEMA).with_columns(
                    _check=pl.Series(self.check, dtype=pl.Boolean)),
                custom=_frame(self.custom, archive.CUSTOM_SCHEMA),
                bots=self.bots, rejects=self.rejects, errors=self.errors,
                users=self.users, snapshots=self.snapshots, distinct=self.distinct,
                listed=self.listed,
            )
            self._reset()
            if frames.empty:
                return
            await self.db.call(archive.write_batch, frames, self.report, self.new_only)
