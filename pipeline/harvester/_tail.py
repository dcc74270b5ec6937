"""A bot's new records: its newest record checked against the archive (GET /bots/:id/stat), then what is new of its /stats read, paged or whole, without re-reading its history."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .. import archive
from ..core import (
    ApiError,
    BadResponse,
    FieldSettings,
    ListingUnstable,
    NotFound,
    SkipIgnored,
    decode_json,
    first_line,
)
from ..interface import Client, ListPage, RawArray, split_array, stats_path
from ._batch import ERROR_CHARS, Batch, Reject
from ._context import Run
from ._ids import repeated, stat_keys_not_unique
from ._paging import (
    ANCHOR_WINDOW,
    FrontPager,
    Keying,
    Marks,
    Order,
    Pager,
    TailRead,
    Walk,
    read_paged,
    shortfall,
    walk_for,
)
from ._records import (
    Invalid,
    StatPage,
    parse_stats,
    parse_stats_raw,
    stat_key,
)
from ._verdict import MISSING_CHECKS, STAT_READ, STATS_READ


async def harvest_bot(run: Run, bot_id: str, newest: archive.Newest | None,
                      order: OrderHint) -> None:
    client, fields, report, buffer, full = run.client, run.fields, run.report, run.buffer, run.full
    keying = Keying(bot_id, fields)
    endpoint = f"GET /bots/{bot_id}/stat"
    page_size = client.shapes["stats"].page_size
    last_key = None
    listed: int | None = None  # the list's length as a paged read found it
    said: str | None = None  # why the service says the read is not the whole list
    read = STAT_READ
    try:
        if newest is not None and not full:
            # A bot with nothing archived skips this check: its /stats is needed anyway.
            buffer.tally.request(read).tried += 1
            last = await client.bot_last_stat(bot_id)
            try:
                last_key = stat_key(last, bot_id, fields)
            except Invalid:
                pass  # the newest record is malformed: read them all, it lands in rejects
            if last_key == newest.stat_id:
                report.bots_up_to_date += 1
                return
        elif not page_size:
            # A first (or --full) read of a whole list: GET /stat, asked first, must be among
            # what /stats sends, or /stats sent only a page of it (records are only added).
            last_key = await newest_key(client, bot_id, fields)
        endpoint, read = f"GET /bots/{bot_id}/stats", STATS_READ
        buffer.tally.request(read).tried += 1
        if page_size:
            paged = await stats_pages(client, keying, None if full else newest,
                                      last_key, order)
            records, listed, said = paged.records, paged.listed, paged.said
        else:
            whole = await client.list_whole("stats", stats_path(bot_id), raw=True)
            records = whole.items
            if (more := whole.more()) is not None:
                said = f"{endpoint} is not the whole list: {more}"
    except NotFound as exc:
        # The bot left between the listing and now (or has no records, at some services): not
        # an error alone, but counted, and the bot looked up (see _verdict: most answered 404).
        buffer.tally.failed(read, "404", first_line(exc, ERROR_CHARS), bot_id)
        await look_up(client, buffer, bot_id)
        return
    except (SkipIgnored, ListingUnstable) as exc:
        buffer.error(endpoint, bot_id, exc)  # paging /stats failed: nothing of it is kept
        buffer.tally.failed(read, type(exc).__name__, first_line(exc, ERROR_CHARS))
        return
    except BadResponse as exc:
        why = f"not a JSON list of records: {first_line(exc, ERROR_CHARS)}"
        buffer.reject(Reject(endpoint, bot_id, why, exc.body or ""), kind=None)
        buffer.tally.failed(read, "a body that is not a JSON list", first_line(exc, ERROR_CHARS))
        return
    except ApiError as exc:
        buffer.error(endpoint, bot_id, exc)
        buffer.tally.failed(read, str(exc.status or type(exc).__name__), first_line(exc, ERROR_CHARS))
        return
    report.bots_fetched += 1
    received_at = datetime.now(UTC)
    cut = None
    if isinstance(records, RawArray):
        length = len(records.items)
        part = slice(None) if full or newest is None or page_size else \
            new_part(records.items, newest, last_key, keying)
        body, items = (records.body, records.items) if part == slice(None) else \
            subarray(records.items[part])
        if not page_size and newest is not None and not full:
            cut = cut_newest_first(records.items, part, newest, last_key, keying)
        page = parse_stats_raw(body, items, bot_id, fields, received_at=received_at)
        del body, items  # see below
    else:
        page = parse_stats(records, bot_id, fields, received_at=received_at)
        length = len(records)
    if last_key is not None and not page_size and not holds(page, last_key, bot_id, fields):
        cut = (f"{endpoint} lacks the bot's newest record ({last_key}, which GET "
               f"/bots/{bot_id}/stat returned)")
    if said and not page_size:
        cut = said
    if cut is not None and (newest is None or full) and buffer.tally.cut is None:
        # A first read that is only a page: the run would archive part of every bot's
        # records as if it were all. It fails for the setting, writing only its evidence.
        buffer.tally.cut = (
            f"{cut}: the service pages /stats, and [service].stats_page_size = 0 reads only "
            f"its first page ({length} records here), so this run would archive part of each "
            f"bot's records. Set [service].stats_page_size to the service's page size "
            f"({length} if that is it) and [service].stats_paging to how it pages; `botstats "
            f"probe` finds both.")
    if cut is not None:
        buffer.error(endpoint, bot_id, BadResponse(
            f"{cut}: the service seems to page /stats. Set [service].stats_page_size to its "
            f"page size (now {page_size}) and [service].stats_paging to how it pages "
            f"(`botstats probe` tells both); the records read are archived and the bot is read "
            f"again next run."))
    elif said:
        buffer.error(endpoint, bot_id, BadResponse(
            f"{said}: the read is not the whole list. Check [service].stats_paging and "
            f"[service].stats_page_size (`botstats probe` tells both); the records read are "
            f"archived and the bot is read again next run."))
    if len(set(page.stat_id)) < len(page) and (twice := repeated(page.stat_id, page.raw)):
        buffer.refuse(stat_keys_not_unique(fields, endpoint, page.stat_id, page.raw, twice))
        return
    buffer.tally.read(page)
    if not page_size and last_key is None and length:  # nothing showed whether it was cut
        buffer.tally.read_whole(bot_id, length, first_record(records))
    checked = full or newest is None
    if newest is not None and not full:
        page, checked = newer(page, newest)
    buffer.add_page(bot_id, page, checked=checked,
                    listed=listed if page_size else length, again=newest is not None)
    # The body and the page's objects go as soon as the batch holds them (a bot's /stats may
    # be tens of MB): not kept alive through the batch's write.
    del records, page


async def newest_key(client: Client, bot_id: str, fields: FieldSettings) -> str | None:
    """The key of the record ``GET /stat`` answers; None when it cannot tell (no record, a
    failed read, a record without a readable key): the check it serves is then not made."""
    try:
        return stat_key(await client.bot_last_stat(bot_id), bot_id, fields)
    except (ApiError, Invalid):
        return None


def new_part(items: Sequence[Any], newest: archive.Newest, last_key: str | None,
             keying: Keying) -> slice:
    """The records of a whole /stats list newer than the bot's newest archived one (the
    anchor), whichever way the list is ordered: all of them when the anchor is not found. The
    list's length at the last read says where to look (that far from its oldest end), so an
    hourly run decodes what is new, not the bot's whole history; the list's first record
    being the newest (``GET /stat``'s) says it is newest first."""
    if not newest.listed or not items:
        return slice(None)
    if _list_order(items, last_key, keying) is Order.NEWEST_FIRST:
        around = len(items) - newest.listed
        at = _find(items, newest.stat_id, range(around - ANCHOR_WINDOW, around + ANCHOR_WINDOW),
                   keying)
        return slice(None) if at is None else slice(0, at)
    at = _find(items, newest.stat_id,
               range(newest.listed - ANCHOR_WINDOW, newest.listed + ANCHOR_WINDOW), keying)
    return slice(None) if at is None else slice(at + 1, None)


def first_record(records: RawArray | list[Any]) -> Any:
    """The first record of a /stats answer, decoded (None when it does not decode)."""
    if not isinstance(records, RawArray):
        return records[0]
    try:
        return decode_json(bytes(records.items[0]))
    except ValueError:
        return None


async def look_up(client: Client, buffer: Batch, bot_id: str) -> None:
    """Whether ``GET /bots/<id>`` finds a bot whose records answered 404, for the first few:
    a service that answers 404 for a bot without records still finds the bot, while ids that
    do not address bots find nothing (see _verdict)."""
    found = buffer.tally.bots_found
    if len(found) >= MISSING_CHECKS:
        return
    try:
        await client.bot(bot_id)
    except NotFound:
        found.append(False)
    except ApiError:
        return  # cannot tell
    else:
        found.append(True)


def cut_newest_first(items: Sequence[Any], part: slice, newest: archive.Newest,
                     last_key: str | None, keying: Keying) -> str | None:
    """Why a whole newest-first /stats list looks cut (None: it does not): it lacks the bot's
    newest archived record, and even its last (oldest) record is newer. A service that pages
    newest first sends its first page when asked for the whole list; read so, the records
    between that page and the archive would be lost without a word."""
    if part != slice(None) or len(items) < 2:
        return None
    if _list_order(items, last_key, keying) is not Order.NEWEST_FIRST:
        return None
    oldest = keying.mark(bytes(items[-1]))
    if oldest.at is None or oldest.at <= newest.recorded_at or \
            _find(items, newest.stat_id, range(len(items)), keying) is not None:
        return None
    return (f"GET /bots/{keying.bot_id}/stats lists {len(items)} records newest first, all "
            f"newer than the bot's newest archived record ({newest.stat_id})")


def _list_order(items: Sequence[Any], last_key: str | None, keying: Keying) -> Order:
    """Newest first when the list opens with ``GET /stat``'s record and does not end with it."""
    if last_key is None or len(items) < 2:
        return Order.UNKNOWN
    first = keying.mark(bytes(items[0])).key
    last = keying.mark(bytes(items[-1])).key
    if first == last_key and last != last_key:
        return Order.NEWEST_FIRST
    return Order.OLDEST_FIRST if last == last_key else Order.UNKNOWN


def _find(items: Sequence[Any], key: str, where: range, keying: Keying) -> int | None:
    """Where the record keyed ``key`` lies among ``items`` at the places ``where`` (clipped to
    the list); None: not there."""
    for i in range(max(0, where.start), min(len(items), where.stop)):
        if keying.mark(bytes(items[i])).key == key:
            return i
    return None


def subarray(items: list[Any]) -> tuple[bytes, list[Any]]:
    """A JSON array of ``items`` (raw record texts) and its items, as the client splits one."""
    body = b"[" + b",".join(bytes(item) for item in items) + b"]"
    split = split_array(body)
    assert split is not None  # each item was a JSON value of an array that split
    return split.body, split.items


def newer(page: StatPage, newest: archive.Newest) -> tuple[StatPage, bool]:
    """The records of ``page`` newer than the bot's newest archived one, and whether any of
    them needs its key checked against the archive: only a record stamped exactly as the newest
    (and keyed otherwise) can be archived already. Records at or before the newest are not
    rewritten by an hourly run; `harvest --full` compares every record."""
    at = newest.recorded_at
    rows = [i for i, t in enumerate(page.recorded_at) if t >= at]
    rows = [i for i in rows if page.recorded_at[i] > at or page.stat_id[i] != newest.stat_id]
    tied = any(page.recorded_at[i] == at for i in rows)
    return page.select(rows), tied


def holds(page: StatPage, key: str, bot_id: str, fields: FieldSettings) -> bool:
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


class OrderHint:
    """How the service orders /stats, as the run's reads have seen it. The first read from a
    tail settles it and reads that start meanwhile wait for that one (a request or two, once a
    run), so every other read tries the right end first."""

    def __init__(self) -> None:
        self.order = Order.UNKNOWN
        self._settling: asyncio.Event | None = None

    async def hint(self) -> tuple[Order, bool]:
        """The order to try first, and whether this read is the one that settles it."""
        if self.order is Order.UNKNOWN and self._settling is None:
            self._settling = asyncio.Event()
            return Order.UNKNOWN, True
        if self._settling is not None:
            await self._settling.wait()
        return self.order, False

    def settle(self, seen: Order) -> None:
        """What the settling read saw; unknown leaves the next read to settle it."""
        settling, self._settling = self._settling, None
        if seen is not Order.UNKNOWN:
            self.order = seen
        if settling is not None:
            settling.set()


@dataclass(frozen=True)
class StatsRead:
    """A bot's /stats read page by page: its ``records`` as one list, the list's length as
    ``listed`` (None: the read did not reach its end), and ``said``, why the service says the
    list holds more than was read (None: it does not)."""

    records: RawArray | list[Any]
    listed: int | None
    said: str | None = None


async def stats_pages(client: Client, keying: Keying, newest: archive.Newest | None,
                      last_key: str | None, order: OrderHint) -> StatsRead:
    """A bot's /stats list from a service that pages it, as one list; records are told apart by
    their JSON text, valid or not.

    With the bot's newest archived record known and a list paged by position, only the pages
    where what is new lies are read (:class:`~._paging.TailRead`), whichever way the service
    orders the list; ``order`` is the run's hint of that order, and learns what this read saw.
    A list paged from the front (a next URL, a cursor) is read whole."""
    shape = client.shapes["stats"]
    path = stats_path(keying.bot_id)
    what = f"GET {path}"
    totals: list[int] = []

    async def fetch(walk: Walk | None, skip: int, limit: int) -> tuple[list[bytes], ListPage]:
        if isinstance(walk, FrontPager):
            page = await client.list_front("stats", path, limit, after=walk.after, raw=True)
        else:
            page = await client.list_window("stats", path, skip, limit, raw=True)
        if page.total is not None:
            totals.append(page.total)
        if isinstance(page.items, RawArray):
            return [bytes(item) for item in page.items.items], page
        # A page only the lenient decoder read (NaN, lone surrogates, ...) is spelled again in
        # ASCII JSON, which that decoder reads back as it was.
        return [json.dumps(r, separators=(",", ":")).encode() for r in page.items], page

    def walk(start: int, whole: bool) -> Pager:
        made = walk_for(shape, what, "records", start=start, reread_head=whole)
        assert isinstance(made, Pager)
        return made

    if newest is None or not shape.positional:  # a first read, --full, or from the front
        whole = walk_for(shape, what, "records")
        kept = await read_paged(fetch, _text_key, whole)
        short = shortfall(whole)
        return StatsRead(_joined(kept), len(kept),
                         None if short is None else f"{what} was read to its end, yet {short}")
    hint, settles = await order.hint()
    read = TailRead(shape.page_size, newest.stat_id, newest.recorded_at, last_key,
                    newest.listed, walk, hint)
    kept = []
    try:
        while (request := read.next_request()) is not None:
            skip, limit = request
            items, _ = await fetch(None, skip, limit)
            keys = [_text_key(item) for item in items]
            new = set(read.feed(skip, keys, Marks(items, keying)))
            for item, item_key in zip(items, keys, strict=True):
                if item_key in new:
                    new.discard(item_key)  # a record twice in one page is kept once
                    kept.append(item)
    finally:
        if settles:
            order.settle(read.found)
    length = None if read.found is Order.NEWEST_FIRST and not read.whole \
        else read.start + len(kept)
    said = None
    if length is not None and totals and totals[-1] > length:
        said = f"the service says {what} holds {totals[-1]} records, and the read ended at {length}"
    return StatsRead(_joined(kept), length, said)


def _text_key(text: bytes) -> str:
    return text.decode("utf-8", "replace")


def _joined(texts: list[bytes]) -> RawArray | list[Any]:
    body = b"[" + b",".join(texts) + b"]"
    return split_array(body) or decode_json(body)
