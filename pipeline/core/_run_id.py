"""Run ids: one per harvest, trends build or `botstats run`, named in logs, the lock's holder
file, ``harvest_runs`` and the export manifest. They sort by start time (UTC, to the second)
and a random suffix keeps two started in the same second apart."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime


def new_run_id(now: datetime | None = None) -> str:
    """``20261124T083000Z-1a2b3c``: ``now`` (default: the current UTC time) and 3 random bytes."""
    return f"{now or datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
