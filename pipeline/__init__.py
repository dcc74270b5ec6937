"""botstats: archive a bot-listing service's statistics into DuckDB and compute trends.

Data flows one way: service <- client <- harvest -> store -> trends -> exports.
"""

from __future__ import annotations

from .config import Settings, load_settings
from .errors import (
    ApiError,
    AuthError,
    BadRequest,
    BadResponse,
    BotstatsError,
    ConfigError,
    ExportError,
    LockTimeout,
    NotFound,
    RateLimited,
    ServerError,
    StoreError,
    Unreachable,
)

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AuthError",
    "BadRequest",
    "BadResponse",
    "BotstatsError",
    "ConfigError",
    "ExportError",
    "LockTimeout",
    "NotFound",
    "RateLimited",
    "ServerError",
    "Settings",
    "StoreError",
    "Unreachable",
    "__version__",
    "load_settings",
]
