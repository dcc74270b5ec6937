"""Reading the directory: GET /bots paged by the Pager, each page's bots validated and handed to the workers with their newest archived record."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from .. import archive
from ..archive import BotRow
from ..core import (
    ApiError,
    BadResponse,
    FieldSettings,
    ListingUnstable,
    Settings,
    SkipIgnored,
)
from ..interface import Client
from ._batch import Batch, Db
from ._pager import Pager
from ._records import (
    Invalid,
    parse_bot,
    raw_text,
)
from ._report import HarvestReport


async def list_directory(
    client: Client,
    settings: Settings,
    report: HarvestReport,
    buffer: Batch,
    db: Db,
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
            ids, rows = parse_page(page, skip, fields, buffer)
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
        fresh = [r for r in fresh if report.shard.owns(r.bot_id)]
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


def parse_page(page: list[Any], skip: int, fields: FieldSettings,
                buffer: Batch) -> tuple[list[str], list[BotRow]]:
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
