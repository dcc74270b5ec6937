"""The user snapshot: the configured user (GET /users/@me) and their bots, servers and webhooks, kept per run."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from ..core import (
    ApiError,
    BadResponse,
)
from ..interface import Client, ListPage, user_list_path
from ._batch import Reject
from ._context import Run
from ._ids import not_unique, repeated
from ._paging import FrontPager, Walk, read_paged, shortfall, walk_for
from ._records import (
    Invalid,
    entity_id,
    raw_text,
)


async def user_list(client: Client, user_id: str, what: str) -> list[Any]:
    """A user's bots, servers or webhooks, whole or paged as [service] says; a list that the
    service says is longer than what was read is an error (nothing of it is kept)."""
    shape = client.shapes["user_lists"]
    path = user_list_path(user_id, what)
    endpoint = f"GET {path}"
    if not shape.page_size:
        page = await client.list_whole("user_lists", path)
        more = page.more()
        if more is None and page.records and shape.positional:
            more = await _read_past(client, path, page.records)
        if more is not None:
            raise BadResponse(f"{endpoint} is not the whole list: {more}. The service pages its "
                              f"user lists: set [service].user_lists_page_size (and "
                              f"{shape.setting}); `botstats probe` tells both.")
        return page.records

    async def fetch(walk: Walk, skip: int, limit: int) -> tuple[list[Any], ListPage]:
        if isinstance(walk, FrontPager):
            page = await client.list_front("user_lists", path, limit, after=walk.after)
        else:
            page = await client.list_window("user_lists", path, skip, limit)
        return page.records, page

    walk = walk_for(shape, endpoint, what)
    records = await read_paged(
        fetch, lambda record: json.dumps(record, sort_keys=True, separators=(",", ":")), walk)
    if (short := shortfall(walk)) is not None:
        raise BadResponse(f"{endpoint} was read to its end, yet {short}: nothing of it is kept "
                          f"this run. Check {shape.setting} (`botstats probe` tells).")
    return records


async def _read_past(client: Client, path: str, records: list[Any]) -> str | None:
    """Whether a user list read whole goes on past its ``n`` records: the window ``[n, 2n)``
    holds records it did not (a service that ignores the window sends the same ones again, or
    none). Nothing else tells, where the service says nothing beside a bare array."""
    n = len(records)
    try:
        past = await client.list_window("user_lists", path, n, n)
    except ApiError:
        return None  # cannot tell
    seen = {json.dumps(r, sort_keys=True) for r in records}
    new = [r for r in past.records if json.dumps(r, sort_keys=True) not in seen]
    return f"asked past its {n} records, it sent {len(new)} more" if new else None


async def snapshot_user(run: Run) -> None:
    """Buffer the user snapshot of this run. A record refused is kept in rejects under its kind
    ("user", "user bot", "server", "webhook": the run's verdict judges each, see _verdict); ids
    repeated over different records in a list refuse the run (see _ids)."""
    client, fields, buffer, report = run.client, run.fields, run.buffer, run.report
    try:
        me = await client.me()
    except ApiError as exc:
        buffer.error("GET /users/@me", None, exc)
        return
    try:
        user_id = entity_id(me, fields.user_id, "user")
    except Invalid as exc:
        buffer.reject(Reject("GET /users/@me", None, str(exc), raw_text(me)), kind="user")
        return
    buffer.tally.keep("user", 1)
    buffer.tally.known["user"].add(user_id)
    try:
        lists = await asyncio.gather(user_list(client, user_id, "bots"),
                                     user_list(client, user_id, "servers"),
                                     user_list(client, user_id, "webhooks"))
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
                buffer.reject(Reject(endpoint, None, str(exc), raw_text(record)), kind=kind)
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
