"""What every endpoint of the interface shares: the directory, faults applied, query parameters read, JSON errors."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from functools import wraps
from http import HTTPStatus
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from ._config import ServiceConfig
from ._faults import FaultInjector
from ._json import JSONResponse
from .directory._truth import Directory

DEFAULT_LIMIT = 20


MAX_BODY_BYTES = 64 * 1024


MAX_ADVANCE = 100_000


Endpoint = Callable[[Request], Awaitable[Response]]


def error(status: int, message: str, details: Any = None,
          headers: Mapping[str, str] | None = None) -> JSONResponse:
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
        limited, quota = injector.rate_limited()
        if limited is not None:
            return limited
        replaced = await injector.before()
        if replaced is None:
            response = await endpoint(request)
            if response.status_code >= 400:
                response = _restyled(response, _directory(request).config)
        else:
            response = replaced
        response.headers.update(quota)
        return response

    return wrapper


def _restyled(response: Response, config: ServiceConfig) -> Response:
    """An error of an endpoint (always ``{"error", "details"}``) in the style and with the
    status this service uses (``error_style``, ``not_found_status``, ``auth_status``)."""
    status = {404: config.not_found_status, 401: config.auth_status}.get(
        response.status_code, response.status_code)
    style = config.error_style
    if style == "json" and status == response.status_code:
        return response
    said = json.loads(bytes(response.body))
    headers = {k: v for k, v in response.headers.items()
               if k.lower() not in ("content-length", "content-type")}
    if style == "json":
        return JSONResponse(said, status_code=status, headers=headers)
    if style == "problem":  # RFC 7807
        return JSONResponse({"type": "about:blank", "title": HTTPStatus(status).phrase,
                             "status": status, "detail": said["error"]}, status_code=status,
                            headers=headers, media_type="application/problem+json")
    if style == "text":
        return PlainTextResponse(said["error"], status_code=status, headers=headers)
    return Response(b"", status_code=status, headers=headers)


def _query_int(request: Request, name: str, default: int) -> int | JSONResponse:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    # Digits only: "-1", "1.5", "1e3", " 5" and "" are all refused, not coerced.
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        return error(400, f"query parameter {name!r} must be a non-negative integer",
                     {name: raw})
    return int(raw)


def _unknown_bot(bot_id: str) -> JSONResponse:
    return error(404, "unknown bot", {"bot_id": bot_id})


def _read_refused(request: Request) -> JSONResponse | None:
    """With ``bot_reads_need_token``, the bot reads want a user token like the user endpoints
    (the interface leaves their auth open; many real services ask for one)."""
    if not _directory(request).config.bot_reads_need_token:
        return None
    user = _authenticated_user(request)
    return user if isinstance(user, JSONResponse) else None


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
