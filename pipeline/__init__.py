"""botstats: archive a bot-listing service's statistics into a DuckLake and compute trends.

Data flows one way: service <- client <- harvest -> store -> trends -> exports.
"""

from __future__ import annotations

from typing import Any

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

__version__ = "0.2.0"


def open_archive(db: str = "data/archive.ducklake") -> Any:
    """The archive at ``db``, read-only, as a DuckDB connection whose default catalog is the
    archive: ``pipeline.open_archive().sql("FROM bot_stats").pl()``. Close it when done."""
    from .store import open_archive as _open

    return _open(db)


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
    "open_archive",
]
