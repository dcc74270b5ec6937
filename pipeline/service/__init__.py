"""The embedded bot-listing service: a real HTTP implementation of the interface in
``interface/bot-listing-service.md``, with deterministic data and injectable faults.

It stands alone, like a third-party service would: nothing here imports the rest of
``pipeline``. Public API::

    ServiceConfig, Faults          what the directory holds and how the service misbehaves
    InvalidSetting                 the ValueError either raises for a value it does not allow
    Directory                      the state and ground truth (``app.state.directory``)
    create_app(cfg)                the Starlette app
    serve_in_thread(cfg, host, port) -> RunningService   (context manager; .base_url, .directory)
    serve(cfg, host, port, credentials_file)            blocking, for ``botstats serve``

Modules: ``_config`` (value classes), ``_data`` (on-demand records), ``directory/`` (the
Directory: state and ground truth, in parts), ``_shapes`` (how records are spelled: keys, id and
time formats), ``_payload`` (POST validation), ``_faults`` (429/latency/5xx), ``_quota`` (the
rate limit's token bucket and its headers), ``_json`` (orjson bodies), ``_conventions`` (how a
list is paged and answered: the paging families, the list envelope, the total header, the cap),
``_app`` (HTTP) with its endpoints (``_endpoint``, ``_bots``, ``_users``, ``_admin``), ``_server``.
"""

from __future__ import annotations

from ._app import create_app
from ._config import Faults, InvalidSetting, ServiceConfig
from ._data import MALFORMATIONS
from ._payload import validate_stat_payload
from ._server import RunningService, credentials, serve, serve_in_thread, write_credentials
from .directory._credentials import BOT_KEY_PREFIX, USER_TOKEN_PREFIX
from .directory._truth import Directory

__all__ = [
    "BOT_KEY_PREFIX",
    "MALFORMATIONS",
    "USER_TOKEN_PREFIX",
    "Directory",
    "Faults",
    "InvalidSetting",
    "RunningService",
    "ServiceConfig",
    "create_app",
    "credentials",
    "serve",
    "serve_in_thread",
    "validate_stat_payload",
    "write_credentials",
]
