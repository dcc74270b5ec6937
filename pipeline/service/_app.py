"""The HTTP surface: the interface's endpoints, their auth and errors, and the admin extras.

Every interface endpoint goes through ``_interface`` (rate limit, latency, random 5xx);
``/_admin/*`` never does. Errors are always ``{"error": message, "details": ...}``.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._admin import (
    admin_advance,
    admin_churn,
    admin_events,
    admin_grow,
    admin_health,
    admin_warm,
)
from ._bots import get_bot, get_last_stat, get_stats, list_bots, post_stats
from ._config import ServiceConfig
from ._endpoint import error
from ._faults import FaultInjector
from ._users import get_me, get_user, get_user_bots, get_user_servers, get_user_webhooks
from .directory._truth import Directory


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
        Route("/_admin/events", admin_events, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error,
                                                       Exception: _crash})
    app.state.config = config
    app.state.directory = Directory(config)
    app.state.faults = FaultInjector(config.faults, config.seed)
    return app
