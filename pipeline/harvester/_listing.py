"""Reading the directory: GET /bots paged by the Pager, each page's bots validated and handed to the workers with their newest archived record."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

from .. import archive
from ..archive import BotRow
from ..core import (
    ApiError,
    BadResponse,
    FieldSettings,
    ListingUnstable,
    SkipIgnored,
)
from ._batch import Batch, Db, Reject
from ._context import Run
from ._ids import Identities, not_unique, repeated
from ._paging import FrontPager, shortfall, walk_for
from ._records import (
    Invalid,
    parse_bot,
    raw_text,
)


async def list_directory(run: Run, db: Db,
                         queue: asyncio.Queue[tuple[str, archive.Newest | None] | None]) -> None:
    client, fields, report, buffer, stop = run.client, run.fields, run.report, run.buffer, run.stop
    shape = client.shapes["bots"]
    pager = walk_for(shape, "GET /bots", "bots")
    identities = Identities(fields.bot_id)
    skip = 0
    while not stop.is_set() and not buffer.halted:
        try:
            request = pager.next_request()
            if request is None:
                break
            skip, limit = request
            if isinstance(pager, FrontPager):
                answer = await client.list_front("bots", "/bots", limit, after=pager.after)
            else:
                answer = await client.list_window("bots", "/bots", skip, limit)
            ids, rows = parse_page(answer.records, skip, fields, buffer, pager.seen)
            twice = repeated([r.bot_id for r, _ in rows], [r.raw for r, _ in rows]) or \
                identities.clashes((r.bot_id, record) for r, record in rows)
            if twice:
                buffer.refuse(not_unique("bot_id", fields.bot_id, "GET /bots", twice))
                return
            new = set(pager.feed(skip, ids, answer))
        except ApiError as exc:
            # Without the listing we cannot know which bots exist: what was read is kept,
            # removals are not marked, and the run is partial (or failed if nothing was read).
            # A listing that never settles and one that ignores `skip` alike: with a page cap
            # of 1 the pager cannot tell them apart, so one fault gets one verdict.
            endpoint = f"GET /bots?skip={skip}"
            if isinstance(exc, BadResponse) and exc.body is not None \
                    and not isinstance(exc, ListingUnstable | SkipIgnored):
                buffer.reject(Reject(endpoint, None, f"page is not a JSON array: {exc}",
                                     exc.body), kind=None)
            buffer.error(endpoint, None, exc)
            report.message = f"listing stopped early: {exc}"
            if not pager.seen:
                raise
            return
        # A bot the page repeats is read once (its last copy kept, at its first place).
        fresh = list({r.bot_id: r for r, _ in rows if r.bot_id in new}.values())
        fresh = [r for r in fresh if report.shard.owns(r.bot_id)]
        if not fresh:
            continue
        report.bots_seen += len(fresh)
        if skip == 0:  # a few, to tell references to bots apart (see _verdict)
            buffer.tally.known["bot"].update(r.bot_id for r in fresh)
        buffer.bots.extend(fresh)
        # --full reads every bot's /stats whatever is archived: no need to look.
        newest = {} if run.full else await db.read(archive.newest, [r.bot_id for r in fresh])
        for row in fresh:
            if stop.is_set():
                return
            await queue.put((row.bot_id, newest.get(row.bot_id)))
    if pager.complete and (short := shortfall(pager)) is not None:
        # Read to its end by every sign the pages gave, yet shorter than the service says:
        # the listing is not believed whole, so no bot is marked removed.
        short_read = BadResponse(f"GET /bots was read to its end, yet {short}. Check "
                          f"{shape.setting} and [service].page_size (`botstats probe` tells).")
        buffer.error("GET /bots", None, short_read)
        report.message = f"listing incomplete: {short_read}"
        return
    report.listing_complete = pager.complete


def parse_page(page: list[Any], skip: int, fields: FieldSettings, buffer: Batch,
               seen: Collection[str] = ()) -> tuple[list[str], list[tuple[BotRow, Any]]]:
    """The bot ids of a listing page in order, and the valid bot rows with their records;
    invalid ones rejected. A record at a position the pager has read (``seen`` holds its id or
    placeholder) is not counted again for the run's verdict."""
    ids: list[str] = []
    rows: list[tuple[BotRow, Any]] = []
    for position, record in enumerate(page):
        try:
            row = parse_bot(record, fields)
        except Invalid as exc:
            # A placeholder keeps the page's positions right for the pager.
            placeholder = f"\x00invalid:{skip + position}:{hash(raw_text(record))}"
            buffer.reject(Reject(f"GET /bots?skip={skip}", None, str(exc), raw_text(record)),
                          kind=None if placeholder in seen else "bot")
            ids.append(placeholder)
            continue
        ids.append(row.bot_id)
        rows.append((row, record))
        buffer.tally.saw_fields("bot", record)
    buffer.tally.keep("bot", sum(1 for row, _ in rows if row.bot_id not in seen))
    return ids, rows
