"""The bot endpoints of the interface: the listing, a bot, its stats (whole or paged) and newest record, posting a record.

``_conventions`` says how a list is asked for in parts and answered; these say what it holds."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ._conventions import Items, Window, answer, body, tells_total, total_headers, window
from ._endpoint import (
    DEFAULT_LIMIT,
    MAX_BODY_BYTES,
    _directory,
    _interface,
    _read_refused,
    _unknown_bot,
    error,
)
from ._json import JSONResponse, dumps
from ._payload import validate_stat_payload
from .directory._state import Record
from .directory._truth import Directory


@_interface
async def list_bots(request: Request) -> Response:
    if (refused := _read_refused(request)) is not None:
        return refused
    directory = _directory(request)
    config = directory.config
    part = window(request, config, DEFAULT_LIMIT, config.max_page_size)
    if isinstance(part, Response):
        return part
    if config.faults.ignore_skip:
        part = Window(0, part.limit)
    page = directory.served_page(part.skip, part.limit)
    total = directory.served_length()  # before the request is counted: it may churn
    directory.count_listing_request()
    return answer(request, config, Items.of(page), total, part)


@_interface
async def get_bot(request: Request) -> Response:
    if (refused := _read_refused(request)) is not None:
        return refused
    directory = _directory(request)
    bot_id = request.path_params["bot_id"]
    bot = directory.bot(bot_id)
    return _unknown_bot(bot_id) if bot is None else JSONResponse(bot)


class StatsBodies(NamedTuple):
    """A bot's records as GET /stats and GET /stat send them, encoded once (see
    ``Directory.rendered_stats``). ``None`` for a body that cannot be encoded: the endpoint then
    builds its response the plain way and fails as it always did."""

    stats: bytes | None  # the whole list's answer (its envelope too); cut in half for a bad-JSON bot
    last: bytes | None  # the newest record; None too when there are no records
    has_records: bool
    total: int  # records in the list


def _try_dumps(content: Any) -> bytes | None:
    try:
        return dumps(content)
    except (TypeError, ValueError):
        return None


def _in_order(directory: Directory, records: list[Record]) -> list[Record]:
    """A bot's records (oldest first) in the order its /stats lists them."""
    return records[::-1] if directory.config.stats_order == "newest" else records


def _render_stats(directory: Directory, index: int,
                  records: list[Record]) -> tuple[StatsBodies, int]:
    listed = _in_order(directory, records)
    config, count = directory.config, len(listed)
    if directory.is_bad_json(index):
        # A body cut in half: a strict prefix of a JSON array (or object) is never valid JSON.
        text = body(config, Items(json.dumps(listed, separators=(",", ":")).encode(), count),
                    count)
        stats: bytes | None = text[: max(1, len(text) // 2)]
    else:
        array = _try_dumps(listed)
        stats = None if array is None else body(config, Items(array, count), count)
    last = _try_dumps(records[-1]) if records else None
    bodies = StatsBodies(stats, last, bool(records), count)
    return bodies, len(stats or b"") + len(last or b"") + 200


def _render_items(directory: Directory, index: int,
                  records: list[Record]) -> tuple[list[bytes] | None, int]:
    """A bot's records encoded one by one, in list order, for pages that are sliced from them
    (None when one cannot be encoded)."""
    try:
        items = [dumps(record) for record in _in_order(directory, records)]
    except (TypeError, ValueError):
        return None, 200
    return items, sum(len(item) + 40 for item in items) + 200


def _json_body(body: bytes, headers: dict[str, str] | None = None) -> Response:
    return Response(body, media_type=JSONResponse.media_type, headers=headers)


@_interface
async def get_stats(request: Request) -> Response:
    if (refused := _read_refused(request)) is not None:
        return refused
    directory = _directory(request)
    bot_id = request.path_params["bot_id"]
    index = directory.live_index(bot_id)
    if index is None:
        return _unknown_bot(bot_id)
    config = directory.config.stats_config
    cap = config.stats_page_size
    if cap and not directory.is_bad_json(index):
        part = window(request, config, cap, cap)
        if isinstance(part, Response):
            return part
        return _stats_page(request, directory, index, part)
    bodies: StatsBodies = directory.rendered_stats(index, _render_stats)
    if bodies.stats is None:
        listed = _in_order(directory, directory.served_stats(index))
        return answer(request, config, Items.of(listed), len(listed))
    headers = total_headers(config, bodies.total)
    fault = directory.body_fault(index)
    if fault == "stall":
        return _stalling_body(bodies.stats, config.faults.stall_seconds, headers)
    if fault == "gzip_cut":
        # Compressed, then cut: the HTTP message is whole (its Content-Length says so), the
        # gzip stream in it is not.
        packed = gzip.compress(bodies.stats)
        return Response(packed[: len(packed) // 2], media_type=JSONResponse.media_type,
                        headers={"Content-Encoding": "gzip", **headers})
    return _json_body(bodies.stats, headers)


def _stats_page(request: Request, directory: Directory, index: int, part: Window) -> Response:
    """A page of a bot's /stats. One that tells nothing of the whole list comes from the bot's
    newest records when it lies among them (``Directory.stats_tail``: O(new)); any other is
    sliced from the bot's records encoded once (``Directory.rendered_stats``)."""
    config = directory.config.stats_config
    if not tells_total(config):
        items = directory.stats_tail(index, part.skip, part.limit,
                                     newest_first=config.stats_order == "newest")
        if items is not None:
            return _json_body(Items.joined(items).array)
    listed: list[bytes] | None = directory.rendered_stats(index, _render_items)
    if listed is None:  # a record that cannot be encoded: fails here as it always did
        listed = [dumps(record) for record in _in_order(directory, directory.served_stats(index))]
    page = listed[part.skip:part.skip + part.limit]
    return answer(request, config, Items.joined(page), len(listed), part)


def _stalling_body(content: bytes, seconds: float, headers: dict[str, str]) -> Response:
    """``content`` announced whole (Content-Length) whose second half comes ``seconds`` late."""

    async def halves() -> AsyncIterator[bytes]:
        yield content[: len(content) // 2]
        await asyncio.sleep(seconds)
        yield content[len(content) // 2:]

    return StreamingResponse(halves(), media_type=JSONResponse.media_type,
                             headers={"Content-Length": str(len(content)), **headers})


@_interface
async def get_last_stat(request: Request) -> Response:
    if (refused := _read_refused(request)) is not None:
        return refused
    directory = _directory(request)
    bot_id = request.path_params["bot_id"]
    index = directory.live_index(bot_id)
    if index is None:
        return _unknown_bot(bot_id)
    newest = directory.stats_tail(index, -1, 1)
    if newest:
        return _json_body(newest[0])
    bodies: StatsBodies = directory.rendered_stats(index, _render_stats)
    if not bodies.has_records:
        return error(404, "bot has no stats yet", {"bot_id": bot_id})
    if bodies.last is None:
        return JSONResponse(directory.served_stats(index)[-1])
    return _json_body(bodies.last)


@_interface
async def post_stats(request: Request) -> Response:
    directory = _directory(request)
    bot_id = request.path_params["bot_id"]
    header = request.headers.get("authorization", "").strip()
    # The interface shows the bare key; "Bot <key>" is accepted too.
    key = header[4:].strip() if header[:4].lower() == "bot " else header
    if not key:
        return error(401, "missing bot API key",
                     {"header": "Authorization: <bot API key> (or Bot <bot API key>)"})
    owner = directory.bot_for_key(key)
    if owner is None:
        return error(401, "unknown bot API key", None)
    index = directory.live_index(bot_id)
    if index is None:
        return _unknown_bot(bot_id)
    if owner != index:
        return error(403, "this API key belongs to another bot", {"bot_id": bot_id})
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        return error(413, "body too large", {"max_bytes": MAX_BODY_BYTES})
    try:
        body = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        return error(400, "body is not valid JSON", {"body": str(exc)})
    payload, problems = validate_stat_payload(body)
    if problems:
        return error(400, f"invalid stat payload: {', '.join(problems)}", problems)
    return JSONResponse(directory.post_stat(index, payload), status_code=201)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
