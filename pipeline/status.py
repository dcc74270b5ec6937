"""`botstats status`: recent runs and the size of the archive, read from the published copy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from . import store
from .config import Settings

RUN_COLUMNS = ("run_id", "status", "mode", "started_at", "seconds", "bots_seen",
               "stats_added", "rejects", "errors", "requests")


def archive_status(settings: Settings, *, runs: int = 10) -> dict[str, Any]:
    path = settings.db_path
    with store.reader(settings) as con:
        rows = con.execute(
            "SELECT run_id, status, mode, strftime(started_at, '%Y-%m-%d %H:%M:%S'), "
            "round(epoch(finished_at) - epoch(started_at), 1), bots_seen, stats_added, rejects, "
            "errors, requests FROM harvest_runs ORDER BY started_at DESC LIMIT ?",
            [runs],
        ).fetchall()
        tables = store.table_counts(con)
    stat = path.stat()
    return {
        "path": str(path),
        "size_mb": stat.st_size / 1e6,
        "published_at": datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(timespec="seconds"),
        "runs": [dict(zip(RUN_COLUMNS, r, strict=True)) for r in rows],
        "tables": tables,
    }
