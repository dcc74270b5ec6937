"""`botstats status`: recent runs and the size of the archive, read as of its last commit."""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb

from .. import archive
from ..alerts import Row, undelivered
from ..archive import NewFields, drift_since
from ..core import Settings, StoreError, parse_duration

RUN_COLUMNS = ("run_id", "shard", "status", "mode", "started_at", "seconds", "bots_seen",
               "stats_added", "rejects", "errors", "requests")
SHARD_COLUMNS = ("shard", "run_id", "status", "started_at", "finished_at", "message")
# A run's shard as K/N, '' for a run of the whole directory (0/1, or before shards existed).
_SHARD_SQL = ("CASE WHEN coalesce(shards, 1) > 1 THEN shard::VARCHAR || '/' || shards::VARCHAR "
              "ELSE '' END")


SHOWN = 5  # errors and reject reasons shown of the latest run


@dataclass(frozen=True)
class RunLine:
    """A recent run, as `botstats status` lists it (the fields of :data:`RUN_COLUMNS`)."""

    run_id: str
    shard: str  # K/N, '' for a run of the whole directory
    status: str
    mode: str
    started_at: str
    seconds: float | None  # None while it runs (or when it died running)
    bots_seen: int
    stats_added: int
    rejects: int
    errors: int
    requests: int


@dataclass(frozen=True)
class ShardLast:
    """A shard's last run (the fields of :data:`SHARD_COLUMNS`, None for a shard with no run
    yet), and when it last completed."""

    shard: str
    run_id: str | None = None
    status: str | None = None
    started_at: str | None = None
    finished_at: datetime | None = None
    message: str | None = None
    complete_at: datetime | None = None


@dataclass(frozen=True)
class ErrorSeen:
    endpoint: str
    error: str


@dataclass(frozen=True)
class RejectReason:
    reason: str
    records: int


@dataclass(frozen=True)
class LatestRun:
    """Why the latest run ended as it did: its message, its errors (how many, the latest few)
    and the reasons of the records it kept aside."""

    run_id: str
    status: str
    message: str
    errors: int
    latest_errors: tuple[ErrorSeen, ...]
    reject_reasons: tuple[RejectReason, ...]


@dataclass(frozen=True)
class ArchiveStatus:
    """What `botstats status` shows: the archive's size, recent runs, each shard's last run,
    the latest run's story, new record fields and table sizes; with a ``max_age``, whether it
    is ``stale`` (why, or '')."""

    path: str
    size_mb: float
    catalog_mb: float
    data_mb: float
    published_at: str
    runs: tuple[RunLine, ...]
    shards: tuple[ShardLast, ...]
    latest_run: LatestRun | None
    latest_complete_at: datetime | None
    new_fields: tuple[NewFields, ...]
    undelivered_alerts: tuple[Row, ...]
    tables: dict[str, int]
    max_age_s: float | None = None
    stale: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """For `status --json` (``max_age_s`` and ``stale`` only when asked for)."""
        data = asdict(self)
        data["undelivered_alerts"] = [row.as_dict() for row in self.undelivered_alerts]
        if self.max_age_s is None:
            del data["max_age_s"], data["stale"]
        return data


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
                   max_age: timedelta | None = None) -> ArchiveStatus:
    """The archive's recent runs, each shard's last run (when the latest run was one of N
    shards), table sizes and latest run; with ``max_age``, also whether it is ``stale`` (why,
    or '') for a monitor."""
    paths = archive.ArchivePaths.of(settings)
    with archive.reader(settings) as con:
        tables = archive.table_counts(con)
        if "harvest_runs" not in tables:
            raise StoreError(
                f"{paths.where} holds no harvest_runs table: it is not a botstats archive, or "
                f"no harvest has written it yet. Check --db, or run `botstats harvest`.")
        rows = con.execute(
            f"SELECT run_id, {_SHARD_SQL}, status, mode, "
            "strftime(started_at, '%Y-%m-%d %H:%M:%S'), "
            "round(epoch(finished_at) - epoch(started_at), 1), bots_seen, stats_added, rejects, "
            "errors, requests FROM harvest_runs ORDER BY started_at DESC LIMIT ?",
            [runs],
        ).fetchall()
        latest = _latest_run(con, rows[0][0]) if rows else None
        shards = _shards(con)
        ((complete,),) = con.execute(
            "SELECT max(finished_at) FROM harvest_runs WHERE status = 'complete'").fetchall()
        drift = drift_since(con, [r[0] for r in rows]) if "record_fields" in tables else []
        waiting = undelivered(con, limit=SHOWN) if "alerts" in tables else []
        catalog, data = archive.disk_bytes(paths, con)
        published = _published(con, paths)
    stale = None
    if max_age is not None:
        stale = _shards_freshness(shards, max_age) if shards else freshness(complete, max_age)
    return ArchiveStatus(
        path=paths.dsn if paths.shared else str(paths.catalog),
        size_mb=(catalog + data) / 1e6, catalog_mb=catalog / 1e6, data_mb=data / 1e6,
        published_at=published, runs=tuple(RunLine(*r) for r in rows), shards=tuple(shards),
        latest_run=latest, latest_complete_at=complete, new_fields=tuple(drift),
        undelivered_alerts=tuple(waiting), tables=tables,
        max_age_s=None if max_age is None else max_age.total_seconds(), stale=stale)


def _published(con: duckdb.DuckDBPyConnection, paths: archive.ArchivePaths) -> str:
    """When the archive was last written: its newest snapshot's time (a PostgreSQL catalog),
    the catalog file's time (SQLite)."""
    if paths.shared:
        when = archive.last_commit(con)
        return when.astimezone(UTC).isoformat(timespec="seconds") if when else ""
    return datetime.fromtimestamp(paths.catalog.stat().st_mtime, UTC).isoformat(
        timespec="seconds")


def _shards(con: duckdb.DuckDBPyConnection) -> list[ShardLast]:
    """When the latest run was one of N shards: the last run of each of the N (None for a
    shard with no run yet), and when each last completed."""
    ((n,),) = con.execute("SELECT coalesce(max_by(shards, started_at), 1) FROM harvest_runs"
                          ).fetchall()
    if n <= 1:
        return []
    found = con.execute(
        "SELECT shard, arg_max(run_id, started_at), arg_max(status, started_at), "
        "strftime(max(started_at), '%Y-%m-%d %H:%M:%S'), arg_max(finished_at, started_at), "
        "arg_max(coalesce(message, ''), started_at), "
        "max(finished_at) FILTER (WHERE status = 'complete') "
        "FROM harvest_runs WHERE shards = ? GROUP BY shard", [n]).fetchall()
    by_shard = {r[0]: r for r in found}
    return [ShardLast(f"{k}/{n}", *by_shard[k][1:]) if k in by_shard else ShardLast(f"{k}/{n}")
            for k in range(n)]


def _shards_freshness(shards: list[ShardLast], max_age: timedelta,
                      now: datetime | None = None) -> str:
    """Why the archive is stale: each shard whose latest complete harvest is older than
    ``max_age`` (or missing), or '' when every shard is fresh."""
    late = [(s.shard, freshness(s.complete_at, max_age, now)) for s in shards]
    late = [(shard, why) for shard, why in late if why]
    return "; ".join(f"shard {shard}: {why}" for shard, why in late)


def _latest_run(con: duckdb.DuckDBPyConnection, run_id: str) -> LatestRun:
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
    return LatestRun(run_id, status, message or "", errors,
                     tuple(ErrorSeen(e, m) for e, m in latest_errors),
                     tuple(RejectReason(r, n) for r, n in reasons))


def describe_latest(latest: LatestRun) -> list[str]:
    """``latest`` (from :func:`archive_status`) as lines for a terminal; none for a run with
    nothing to explain."""
    if not (latest.message or latest.errors or latest.reject_reasons):
        return []
    lines = [f"latest run {latest.run_id}: {latest.status}"
             + (f": {latest.message}" if latest.message else "")]
    if latest.errors:
        lines.append(f"  {latest.errors} error(s) in harvest_errors; the latest:")
        lines += [f"    {_error_line(e.endpoint, e.error)}" for e in latest.latest_errors]
    if latest.reject_reasons:
        lines.append("  records it kept aside in rejects, by reason (most frequent first):")
        lines += [f"    {r.records:>6}  {r.reason}" for r in latest.reject_reasons]
    return lines


def describe_drift(drift: tuple[NewFields, ...]) -> list[str]:
    """The record fields first seen by the runs shown, as lines for a terminal."""
    return [f"new {d.kind} record fields since run {d.run_id}: "
            f"{', '.join(repr(f) for f in d.fields)} (kept in raw; map any you need)"
            for d in drift]


def describe_undelivered(rows: tuple[Row, ...]) -> list[str]:
    """The alerts not yet delivered (the latest few), as lines for a terminal."""
    if not rows:
        return []
    return ["alerts not yet delivered (the next run tries again; `botstats alerts list`):"] + [
        f"  {r.tried_at.isoformat(timespec='seconds')}  {r.destination}  {r.kind}: {r.title}  "
        f"({r.answer})" for r in rows]


def run_lines(info: ArchiveStatus) -> list[tuple[Any, ...]]:
    """The recent runs as rows of :data:`RUN_COLUMNS`."""
    return [astuple(r) for r in info.runs]


def shard_lines(info: ArchiveStatus) -> list[tuple[Any, ...]]:
    """Each shard's last run as rows of :data:`SHARD_COLUMNS`."""
    return [astuple(s)[:len(SHARD_COLUMNS)] for s in info.shards]


def _error_line(endpoint: str, error: str) -> str:
    # Most errors name their request already ("GET http://host/bots/1/stats could not ...").
    path = endpoint.partition(" ")[2].partition("?")[0]
    return error if path and path in error else f"{endpoint}: {error}"
