"""A bot's new records: its newest record checked against the archive (GET /bots/:id/stat), then what is new of its /stats read, paged or whole, without re-reading its history."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from .. import archive
from ..core import (
    ApiError,
    BadResponse,
    FieldSettings,
    ListingUnstable,
    NotFound,
    Settings,
    SkipIgnored,
    decode_json,
)
from ..interface import Client, RawArray, split_array
from ._batch import Batch, first_line
from ._ids import not_unique, repeated
from ._paged import paged_list, read_paged
from ._pages import StatPage, parse_stats, parse_stats_raw
from ._records import Invalid, stat_key
from ._report import HarvestReport
from ._verdict import MISSING_CHECKS, STAT_READ, STATS_READ


async def harvest_bot(
    client: Client,
    settings: Settings,
    report: HarvestReport,
    buffer: Batch,
    bot_id: str,
    newest: archive.Newest | None,
    full: bool,
) -> None:
    fields = settings.fields
    endpoint = f"GET /bots/{bot_id}/stat"
    page_size = settings.service.stats_page_size
    last_key = None
    listed: list[int] = []
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
        endpoint, read = f"GET /bots/{bot_id}/stats", STATS_READ
        buffer.tally.request(read).tried += 1
        if page_size:
            records = await stats_pages(client, bot_id, page_size, fields,
                                         None if full else newest, listed)
        else:
            records = await client.bot_stats_raw(bot_id)
    except NotFound as exc:
        # The bot left between the listing and now (or has no records, at some services): not
        # an error alone, but counted, and the bot looked up (see _verdict: most answered 404).
        buffer.tally.failed(read, "404", first_line(exc), bot_id)
        await look_up(client, buffer, bot_id)
        return
    except (SkipIgnored, ListingUnstable) as exc:
        buffer.error(endpoint, bot_id, exc)  # paging /stats failed: nothing of it is kept
        buffer.tally.failed(read, type(exc).__name__, first_line(exc))
        return
    except BadResponse as exc:
        buffer.reject(endpoint, bot_id, f"not a JSON list of records: {first_line(exc)}",
                      exc.body or "", kind=None)
        buffer.tally.failed(read, "a body that is not a JSON list", first_line(exc))
        return
    except ApiError as exc:
        buffer.error(endpoint, bot_id, exc)
        buffer.tally.failed(read, str(exc.status or type(exc).__name__), first_line(exc))
        return
    report.bots_fetched += 1
    received_at = datetime.now(UTC)
    if isinstance(records, RawArray):
        length = len(records.items)
        start = 0 if full or newest is None else after_newest(records.items, newest, bot_id,
                                                                 fields)
        body, items = (records.body, records.items) if not start else \
            subarray(records.items[start:])
        page = parse_stats_raw(body, items, bot_id, fields, received_at=received_at)
        del body, items  # see below
    else:
        page = parse_stats(records, bot_id, fields, received_at=received_at)
        length = len(records)
    if last_key is not None and not page_size and not holds(page, last_key, bot_id, fields):
        buffer.error(endpoint, bot_id, BadResponse(
            f"{endpoint} lacks the bot's newest record ({last_key}, which GET /bots/{bot_id}/stat "
            f"returned): the service seems to page /stats. Set [service].stats_page_size to its "
            f"page size (now {page_size}); the records read are archived and the bot is read "
            f"again next run."))
    if len(set(page.stat_id)) < len(page) and (twice := repeated(page.stat_id, page.raw)):
        field = ("stat_id", fields.stat_id) if fields.stat_id else ("stat_time", fields.stat_time)
        buffer.refuse(not_unique(*field, endpoint, twice, derived=not fields.stat_id))
        return
    buffer.tally.read(page)
    if not page_size and last_key is None and length:  # nothing showed whether it was cut
        buffer.tally.read_whole(bot_id, length, first_record(records))
    checked = full or newest is None
    if newest is not None and not full:
        page, checked = newer(page, newest)
    buffer.add_page(endpoint, bot_id, page, checked=checked,
                    listed=listed[0] if listed else length, again=newest is not None)
    # The body and the page's objects go as soon as the batch holds them (a bot's /stats may
    # be tens of MB): not kept alive through the batch's write.
    del records, page


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


# How far from where the last read ended the newest archived record is looked for in a whole
# /stats list: records dropped or inserted before it shift it by as many places.
_ANCHOR_WINDOW = 8


def after_newest(items: list[Any], newest: archive.Newest, bot_id: str,
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


async def stats_pages(client: Client, bot_id: str, page_size: int, fields: FieldSettings,
                       newest: archive.Newest | None, listed: list[int]) -> RawArray | list[Any]:
    """A bot's /stats list from a service that pages it, as one list; records are told apart by
    their JSON text, valid or not. ``listed`` receives the length of the list.

    With the bot's newest archived record known, the read starts a few records before where
    the last read ended and walks back until a page holds that record, so an hourly run reads
    what is new, a few records before it and an empty page; the records before are not read.
    """

    read: dict[tuple[int, int], list[bytes]] = {}  # the page tail_start stood on, read once

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
        tail = await tail_start(texts, page_size, newest, bot_id, fields, read)
    start = tail or 0
    pager = paged_list(what, "records", "stats_page_size", page_size, start=start,
                        reread_head=tail is None)
    kept = await read_paged(texts, lambda text: text.decode("utf-8", "replace"), pager)
    listed.append(start + len(kept))
    body = b"[" + b",".join(kept) + b"]"
    return split_array(body) or decode_json(body)


async def tail_start(texts: Callable[[int, int], Awaitable[list[bytes]]], page_size: int,
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
