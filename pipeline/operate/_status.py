"""`botstats status`: recent runs and the size of the archive, read as of its last commit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from .. import archive
from ..archive import drift_since
from ..core import Settings, StoreError, parse_duration

RUN_COLUMNS = ("run_id", "status", "mode", "started_at", "seconds", "bots_seen",
               "stats_added", "rejects", "errors", "requests")


SHOWN = 5  # errors and reject reasons shown of the latest run


parse_age = parse_duration  # `status --max-age` reads durations as the config does


def freshness(latest_complete: datetime | None, max_age: timedelta,
              now: datetime | None = None) -> str:
    """Why the archive is stale for a monitor, or '' when its latest complete harvest ended
    within ``max_age``."""
    if latest_complete is None:
        return "no harvest has completed in this archive yet"
    age = (now or datetime.now(UTC)) - latest_complete
    if age <= max_age:
        return ""
    return (f"the latest complete harvest finished {_span(age)} ago, more than {_span(max_age)}: "
            f"check that cron or `botstats schedule` still runs the harvest (the recent runs "
            f"show any that ended otherwise, and why)")


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    return " ".join(parts[:2]) if parts else f"{secs}s"


def archive_status(settings: Settings, *, runs: int = 10,
                   max_age: timedelta | None = None) -> dict[str, Any]:
    """The archive's recent runs, table sizes and latest run; with ``max_age``, also whether
    it is ``stale`` (why, or '') for a monitor."""
    path = settings.db_path
    with archive.reader(settings) as con:
        tables = archive.table_counts(con)
        if "harvest_runs" not in tables:
            raise StoreError(
                f"{path} holds no harvest_runs table: it is not a botstats archive, or no "
                f"harvest has written it yet. Check --db, or run `botstats harvest`.")
        rows = con.execute(
            "SELECT run_id, status, mode, strftime(started_at, '%Y-%m-%d %H:%M:%S'), "
            "round(epoch(finished_at) - epoch(started_at), 1), bots_seen, stats_added, rejects, "
            "errors, requests FROM harvest_runs ORDER BY started_at DESC LIMIT ?",
            [runs],
        ).fetchall()
        latest = _latest_run(con, rows[0][0]) if rows else None
        ((complete,),) = con.execute(
            "SELECT max(finished_at) FROM harvest_runs WHERE status = 'complete'").fetchall()
        drift = drift_since(con, [r[0] for r in rows]) if "record_fields" in tables else []
    catalog, data = archive.disk_bytes(archive.ArchivePaths.of(settings))
    info = {
        "path": str(path),
        "size_mb": (catalog + data) / 1e6,
        "catalog_mb": catalog / 1e6,
        "data_mb": data / 1e6,
        "published_at": datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(
            timespec="seconds"),
        "runs": [dict(zip(RUN_COLUMNS, r, strict=True)) for r in rows],
        "latest_run": latest,
        "latest_complete_at": complete,
        "new_fields": drift,
        "tables": tables,
    }
    if max_age is not None:
        info["max_age_s"] = max_age.total_seconds()
        info["stale"] = freshness(complete, max_age)
    return info


def _latest_run(con: Any, run_id: str) -> dict[str, Any]:
    """Why the latest run ended as it did: its message, its errors (how many, the latest few)
    and the reasons of the records it kept aside, so a partial run needs no query to explain."""
    ((status, message),) = con.execute(
        "SELECT status, message FROM harvest_runs WHERE run_id = ?", [run_id]).fetchall()
    ((errors,),) = con.execute(
        "SELECT count(*) FROM harvest_errors WHERE run_id = ?", [run_id]).fetchall()
    latest_errors = con.execute(
        "SELECT endpoint, error FROM harvest_errors WHERE run_id = ? "
        "ORDER BY seen_at DESC, endpoint LIMIT ?", [run_id, SHOWN]).fetchall()
    reasons = con.execute(
        "SELECT reason, count(*) FROM rejects WHERE run_id = ? GROUP BY reason "
        "ORDER BY count(*) DESC, reason LIMIT ?", [run_id, SHOWN]).fetchall()
    return {
        "run_id": run_id, "status": status, "message": message or "", "errors": errors,
        "latest_errors": [{"endpoint": e, "error": m} for e, m in latest_errors],
        "reject_reasons": [{"reason": r, "records": n} for r, n in reasons],
    }


def describe_latest(latest: dict[str, Any]) -> list[str]:
    """``latest`` (from :func:`archive_status`) as lines for a terminal; none for a run with
    nothing to explain."""
    if not (latest["message"] or latest["errors"] or latest["reject_reasons"]):
        return []
    lines = [f"latest run {latest['run_id']}: {latest['status']}"
             + (f": {latest['message']}" if latest["message"] else "")]
    if latest["errors"]:
        lines.append(f"  {latest['errors']} error(s) in harvest_errors; the latest:")
        lines += [f"    {_error_line(e['endpoint'], e['error'])}" for e in latest["latest_errors"]]
    if latest["reject_reasons"]:
        lines.append("  records it kept aside in rejects, by reason (most frequent first):")
        lines += [f"    {r['records']:>6}  {r['reason']}" for r in latest["reject_reasons"]]
    return lines


def describe_drift(drift: list[dict[str, Any]]) -> list[str]:
    """The record fields first seen by the runs shown, as lines for a terminal."""
    return [f"new {d['kind']} record fields since run {d['run_id']}: "
            f"{', '.join(repr(f) for f in d['fields'])} (kept in raw; map any you need)"
            for d in drift]


def _error_line(endpoint: str, error: str) -> str:
    # Most errors name their request already ("GET http://host/bots/1/stats could not ...").
    path = endpoint.partition(" ")[2].partition("?")[0]
    return error if path and path in error else f"{endpoint}: {error}"
