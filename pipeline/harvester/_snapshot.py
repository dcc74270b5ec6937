"""The user snapshot: the configured user (GET /users/@me) and their bots, servers and webhooks, kept per run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from ..core import (
    ApiError,
    Settings,
)
from ..interface import Client
from ._batch import Batch
from ._paged import paged_list, read_paged
from ._records import (
    Invalid,
    entity_id,
    raw_text,
)
from ._report import HarvestReport


async def user_list(fetch: Callable[..., Awaitable[list[Any]]], user_id: str, what: str,
                     page_size: int) -> list[Any]:
    """A user's bots, servers or webhooks (``fetch`` is the client's method), whole or paged."""
    if not page_size:
        return await fetch(user_id)
    return await read_paged(
        lambda limit, skip: fetch(user_id, limit=limit, skip=skip),
        lambda record: json.dumps(record, sort_keys=True, separators=(",", ":")),
        paged_list(f"GET /users/{user_id}/{what}", what, "user_lists_page_size", page_size))


async def snapshot_user(client: Client, settings: Settings, report: HarvestReport,
                         buffer: Batch) -> None:
    fields = settings.fields
    try:
        me = await client.me()
        user_id = entity_id(me, fields.user_id, "user")
        size = settings.service.user_lists_page_size
        lists = await asyncio.gather(user_list(client.user_bots, user_id, "bots", size),
                                     user_list(client.user_servers, user_id, "servers", size),
                                     user_list(client.user_webhooks, user_id, "webhooks", size))
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
