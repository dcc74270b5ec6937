"""The HTTP surface: the interface's endpoints, their auth and errors, and the admin extras.

Every interface endpoint goes through ``_interface`` (rate limit, latency, random 5xx);
``/_admin/*`` never does. Errors are always ``{"error": message, "details": ...}``.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import wraps
from typing import Any, NamedTuple

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from ._config import ServiceConfig
from ._directory import Directory, Record
from ._faults import FaultInjector
from ._json import JSONResponse, dumps
from ._payload import validate_stat_payload

DEFAULT_LIMIT = 20
DEFAULT_SKIP = 0
MAX_BODY_BYTES = 64 * 1024
MAX_ADVANCE = 100_000

Endpoint = Callable[[Request], Awaitable[Response]]


def error(status: int, message: str, details: Any = None,
          headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "details": details}, status_code=status, headers=headers)


def _directory(request: Request) -> Directory:
    directory: Directory = request.app.state.directory
    return directory


def _interface(endpoint: Endpoint) -> Endpoint:
    """Apply the request-level faults before the endpoint runs."""

    @wraps(endpoint)
    async def wrapper(request: Request) -> Response:
        target = _directory(request).config.faults.redirect_to
        if target:
            # Another origin: a client that follows it would hand that host its credentials.
            query = f"?{request.url.query}" if request.url.query else ""
            return RedirectResponse(target.rstrip("/") + request.url.path + query, 307)
        injector: FaultInjector = request.app.state.faults
        replaced = await injector.before()
        if replaced is not None:
            return replaced
        return await endpoint(request)

    return wrapper


def _query_int(request: Request, name: str, default: int) -> int | JSONResponse:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    # Digits only: "-1", "1.5", "1e3", " 5" and "" are all refused, not coerced.
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        return error(400, f"query parameter {name!r} must be a non-negative integer",
                     {name: raw})
    return int(raw)


def _paging(request: Request, default_limit: int) -> tuple[int, int] | JSONResponse:
    """(limit, skip) of a paged read, or the 400 for a bad one."""
    limit = _query_int(request, "limit", default_limit)
    if isinstance(limit, Response):
        return limit
    skip = _query_int(request, "skip", DEFAULT_SKIP)
    if isinstance(skip, Response):
        return skip
    return limit, skip


def _unknown_bot(bot_id: str) -> JSONResponse:
    return error(404, "unknown bot", {"bot_id": bot_id})


def _read_refused(request: Request) -> JSONResponse | None:
    """With ``bot_reads_need_token``, the bot reads want a user token like the user endpoints
    (the interface leaves their auth open; many real services ask for one)."""
    if not _directory(request).config.bot_reads_need_token:
        return None
    user = _authenticated_user(request)
    return user if isinstance(user, JSONResponse) else None


# --- bots ------------------------------------------------------------------------------
@_interface
async def list_bots(request: Request) -> Response:
    if (refused := _read_refused(request)) is not None:
        return refused
    directory = _directory(request)
    paging = _paging(request, DEFAULT_LIMIT)
    if isinstance(paging, Response):
        return paging
    limit, skip = paging
    if directory.config.faults.ignore_skip:
        skip = 0
    # Asking for more than the cap silently returns fewer: clients must not read a short
    # page as the last one.
    page = directory.served_page(skip, min(limit, directory.config.max_page_size))
    directory.count_listing_request()
    return JSONResponse(page)


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

    stats: bytes | None  # cut in half for a bad-JSON bot
    last: bytes | None  # the newest record; None too when there are no records
    has_records: bool


def _try_dumps(content: Any) -> bytes | None:
    try:
        return dumps(content)
    except (TypeError, ValueError):
        return None


def _render_stats(directory: Directory, index: int,
                  records: list[Record]) -> tuple[StatsBodies, int]:
    if directory.is_bad_json(index):
        # A body cut in half: a strict prefix of a JSON array is never valid JSON.
        text = json.dumps(records, separators=(",", ":"))
        stats: bytes | None = text[: max(1, len(text) // 2)].encode("utf-8")
    else:
        stats = _try_dumps(records)
    last = _try_dumps(records[-1]) if records else None
    bodies = StatsBodies(stats, last, bool(records))
    return bodies, len(stats or b"") + len(last or b"") + 200


def _json_body(body: bytes) -> Response:
    return Response(body, media_type=JSONResponse.media_type)


@_interface
async def get_stats(request: Request) -> Response:
    if (refused := _read_refused(request)) is not None:
        return refused
    directory = _directory(request)
    bot_id = request.path_params["bot_id"]
    index = directory.live_index(bot_id)
    if index is None:
        return _unknown_bot(bot_id)
    cap = directory.config.stats_page_size
    if cap and not directory.is_bad_json(index):
        paging = _paging(request, cap)
        if isinstance(paging, Response):
            return paging
        limit, skip = paging
        limit = min(limit, cap)
        items = directory.stats_tail(index, skip, limit)
        if items is not None:
            return _json_body(b"[" + b",".join(items) + b"]")
        return JSONResponse(directory.served_stats(index)[skip:skip + limit])
    bodies: StatsBodies = directory.rendered_stats(index, _render_stats)
    if bodies.stats is None:
        return JSONResponse(directory.served_stats(index))
    fault = directory.body_fault(index)
    if fault == "stall":
        return _stalling_body(bodies.stats, directory.config.faults.stall_seconds)
    if fault == "gzip_cut":
        # Compressed, then cut: the HTTP message is whole (its Content-Length says so), the
        # gzip stream in it is not.
        packed = gzip.compress(bodies.stats)
        return Response(packed[: len(packed) // 2], media_type=JSONResponse.media_type,
                        headers={"Content-Encoding": "gzip"})
    return _json_body(bodies.stats)


def _stalling_body(body: bytes, seconds: float) -> Response:
    """``body`` announced whole (Content-Length) whose second half comes ``seconds`` late."""

    async def halves() -> AsyncIterator[bytes]:
        yield body[: len(body) // 2]
        await asyncio.sleep(seconds)
        yield body[len(body) // 2:]

    return StreamingResponse(halves(), media_type=JSONResponse.media_type,
                             headers={"Content-Length": str(len(body))})


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


# --- users -----------------------------------------------------------------------------
def _authenticated_user(request: Request) -> int | JSONResponse:
    header = request.headers.get("authorization", "").strip()
    scheme, _, token = header.partition(" ")
    challenge = {"WWW-Authenticate": "Bearer"}
    if not header:
        return error(401, "missing user token", {"header": "Authorization: Bearer <user token>"},
                     challenge)
    if scheme.lower() != "bearer" or not token.strip():
        return error(401, "expected 'Authorization: Bearer <user token>'", None, challenge)
    user = _directory(request).user_for_token(token.strip())
    if user is None:
        return error(401, "unknown user token", None, challenge)
    return user


def _target_user(request: Request) -> int | JSONResponse:
    me = _authenticated_user(request)
    if isinstance(me, JSONResponse):
        return me
    user_id = request.path_params.get("user_id")
    if user_id is None or user_id == "@me":  # /users/@me/bots etc. work too
        return me
    user = _directory(request).user_index(user_id)
    return error(404, "unknown user", {"user_id": user_id}) if user is None else user


def _user_endpoint(render: Callable[[Directory, int], Any], *, a_list: bool = False) -> Endpoint:
    @_interface
    async def endpoint(request: Request) -> Response:
        user = _target_user(request)
        if isinstance(user, Response):
            return user
        directory = _directory(request)
        content = render(directory, user)
        cap = directory.config.user_lists_page_size
        if a_list and cap:
            paging = _paging(request, cap)
            if isinstance(paging, Response):
                return paging
            limit, skip = paging
            content = content[skip:skip + min(limit, cap)]
        return JSONResponse(content)

    return endpoint


get_me = _user_endpoint(Directory.user_record)
get_user = _user_endpoint(Directory.user_record)
get_user_bots = _user_endpoint(Directory.user_bots, a_list=True)
get_user_servers = _user_endpoint(Directory.user_servers, a_list=True)
get_user_webhooks = _user_endpoint(Directory.user_webhooks, a_list=True)


# --- admin (outside the interface, never faulted) -------------------------------------
async def admin_health(request: Request) -> Response:
    summary = _directory(request).summary()
    injector: FaultInjector = request.app.state.faults
    summary.update(status="ok", rate_limited=injector.rejected, injected_errors=injector.injected)
    return JSONResponse(summary)


async def admin_advance(request: Request) -> Response:
    intervals = _query_int(request, "intervals", 1)
    if isinstance(intervals, Response):
        return intervals
    if intervals > MAX_ADVANCE:
        return error(400, f"intervals must be at most {MAX_ADVANCE}", {"intervals": intervals})
    directory = _directory(request)
    directory.advance(intervals)
    return JSONResponse({"advanced": intervals, **directory.summary()})


async def admin_churn(request: Request) -> Response:
    times = _query_int(request, "times", 1)
    if isinstance(times, Response):
        return times
    directory = _directory(request)
    changes = [directory.churn() for _ in range(min(times, MAX_ADVANCE))]
    return JSONResponse({"added": [a for a, _ in changes], "removed": [r for _, r in changes]})


async def admin_grow(request: Request) -> Response:
    count = _query_int(request, "bots", 1)
    if isinstance(count, Response):
        return count
    return JSONResponse({"added": _directory(request).grow(min(count, MAX_ADVANCE))})


async def admin_warm(request: Request) -> Response:
    started = time.perf_counter()
    bots = _directory(request).warm()
    return JSONResponse({"warmed": bots, "seconds": round(time.perf_counter() - started, 3)})


# --- app -------------------------------------------------------------------------------
async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error(404, "no such endpoint", {"method": request.method, "path": request.url.path})
    if exc.status_code == 405:
        return error(405, "method not allowed", {"method": request.method,
                                                 "path": request.url.path}, exc.headers)
    return error(exc.status_code, str(exc.detail), None, exc.headers)


async def _crash(request: Request, exc: Exception) -> Response:
    return error(500, "internal server error", {"exception": type(exc).__name__})


def create_app(config: ServiceConfig) -> Starlette:
    """The service as an ASGI app; ``app.state.directory`` is its live Directory."""
    routes = [
        Route("/users/@me", get_me, methods=["GET"]),
        Route("/users/{user_id}", get_user, methods=["GET"]),
        Route("/users/{user_id}/bots", get_user_bots, methods=["GET"]),
        Route("/users/{user_id}/servers", get_user_servers, methods=["GET"]),
        Route("/users/{user_id}/webhooks", get_user_webhooks, methods=["GET"]),
        Route("/bots", list_bots, methods=["GET"]),
        Route("/bots/{bot_id}", get_bot, methods=["GET"]),
        Route("/bots/{bot_id}/stats", get_stats, methods=["GET"]),
        Route("/bots/{bot_id}/stats", post_stats, methods=["POST"]),
        Route("/bots/{bot_id}/stat", get_last_stat, methods=["GET"]),
        Route("/_admin/health", admin_health, methods=["GET"]),
        Route("/_admin/advance", admin_advance, methods=["POST"]),
        Route("/_admin/churn", admin_churn, methods=["POST"]),
        Route("/_admin/grow", admin_grow, methods=["POST"]),
        Route("/_admin/warm", admin_warm, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error,
                                                       Exception: _crash})
    app.state.config = config
    app.state.directory = Directory(config)
    app.state.faults = FaultInjector(config.faults, config.seed)
    return app
