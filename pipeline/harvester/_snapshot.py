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
from ._ids import not_unique, repeated
from ._paging import paged_list, read_paged
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
    """Buffer the user snapshot of this run. A record refused is kept in rejects under its kind
    ("user", "user bot", "server", "webhook": the run's verdict judges each, see _verdict); ids
    repeated over different records in a list refuse the run (see _ids)."""
    fields = settings.fields
    try:
        me = await client.me()
    except ApiError as exc:
        buffer.error("GET /users/@me", None, exc)
        return
    try:
        user_id = entity_id(me, fields.user_id, "user")
    except Invalid as exc:
        buffer.reject("GET /users/@me", None, str(exc), raw_text(me), kind="user")
        return
    buffer.tally.keep("user", 1)
    buffer.tally.known["user"].add(user_id)
    size = settings.service.user_lists_page_size
    try:
        lists = await asyncio.gather(user_list(client.user_bots, user_id, "bots", size),
                                     user_list(client.user_servers, user_id, "servers", size),
                                     user_list(client.user_webhooks, user_id, "webhooks", size))
    except ApiError as exc:
        buffer.error(f"GET /users/{user_id}/...", None, exc)
        return
    now = datetime.now(UTC)
    snapshot: dict[str, list[dict[str, Any]]] = {}
    for table, key, kind, records in (
        ("user_bots", "bot_id", "user bot", lists[0]),
        ("user_servers", "server_id", "server", lists[1]),
        ("user_webhooks", "webhook_id", "webhook", lists[2]),
    ):
        endpoint = f"GET /users/{user_id}/{table[5:]}"
        setting = "bot_id" if kind == "user bot" else key
        what = kind.split()[-1]
        rows: list[dict[str, Any]] = []
        for record in records:
            try:
                rid = entity_id(record, getattr(fields, setting), what)
            except Invalid as exc:
                buffer.reject(endpoint, None, str(exc), raw_text(record), kind=kind)
                continue
            rows.append({"run_id": report.run_id, "user_id": user_id, key: rid,
                         "raw": raw_text(record), "fetched_at": now})
        twice = repeated([r[key] for r in rows], [r["raw"] for r in rows])
        if twice:
            buffer.refuse(not_unique(setting, getattr(fields, setting), endpoint, twice))
            return
        buffer.tally.keep(kind, len(rows))
        if kind == "user bot":
            buffer.tally.known["bot"].update(r[key] for r in rows)
        snapshot[table] = rows
    buffer.users.append({"run_id": report.run_id, "user_id": user_id, "is_me": True,
                         "raw": raw_text(me), "fetched_at": now})
    for table, rows in snapshot.items():
        if rows:
            buffer.snapshots.setdefault(table, []).extend(rows)
