"""The bookkeeping of harvest runs in harvest_runs: begun, counted batch by batch, finished; and what a complete listing says about removed bots."""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime
from typing import Protocol

import duckdb

log = logging.getLogger("botstats.harvest")


class RunCounts(Protocol):
    """What a run reports and keeps in ``harvest_runs`` (``HarvestReport`` is one)."""

    run_id: str
    mode: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    base_url: str
    message: str
    bots_seen: int
    bots_new: int
    bots_removed: int
    bots_fetched: int
    stats_added: int
    stats_updated: int
    requests: int
    retries: int
    rejects: int
    errors: int


def begin_run(con: duckdb.DuckDBPyConnection, report: RunCounts) -> None:
    stale = con.execute("SELECT run_id FROM harvest_runs WHERE status = 'running'").fetchall()
    if stale:
        con.execute(
            "UPDATE harvest_runs SET status = 'interrupted', finished_at = now(), "
            "message = 'the run ended without recording its end (its process was killed, or "
            "the archive could not be written: see its log); its whole batches are kept and a "
            "later run completes the work' WHERE status = 'running'")
    for (run_id,) in stale:
        log.warning("run %s had not recorded its end (killed, or the archive could not be "
                    "written); marked interrupted", run_id)
    previous = con.execute("SELECT base_url FROM harvest_runs WHERE base_url IS NOT NULL "
                           "ORDER BY started_at DESC LIMIT 1").fetchall()
    if previous and previous[0][0] != report.base_url:
        log.warning("this archive was last harvested from %s and this run reads %s: if that is "
                    "another service, its bots will be marked removed once this listing is "
                    "complete (their history is kept); point --db at another archive for it",
                    previous[0][0], report.base_url)
    con.execute(
        "INSERT INTO harvest_runs (run_id, started_at, status, mode, base_url, pid, host) "
        "VALUES (?, ?, 'running', ?, ?, ?, ?)",
        [report.run_id, report.started_at, report.mode, report.base_url, os.getpid(),
         socket.gethostname()],
    )


_COUNTERS = ("bots_seen", "bots_new", "bots_removed", "bots_fetched", "stats_added",
             "stats_updated", "requests", "retries", "rejects", "errors")


# The counters a batch's write adds to (the others are counted as requests are made).
_WRITE_COUNTERS = ("bots_new", "stats_added", "stats_updated", "rejects")


def save_counters(con: duckdb.DuckDBPyConnection, report: RunCounts) -> None:
    sets = ", ".join(f"{c} = ?" for c in _COUNTERS)
    con.execute(f"UPDATE harvest_runs SET {sets} WHERE run_id = ?",
                [getattr(report, c) for c in _COUNTERS] + [report.run_id])


def finish_run(con: duckdb.DuckDBPyConnection, report: RunCounts) -> None:
    try:
        save_counters(con, report)
        con.execute(
            "UPDATE harvest_runs SET status = ?, finished_at = ?, message = ? WHERE run_id = ?",
            [report.status, report.finished_at, report.message or None, report.run_id],
        )
    except duckdb.Error as exc:
        log.error("could not record the end of run %s: %s", report.run_id, exc)


def live_bots(con: duckdb.DuckDBPyConnection, not_seen_since: datetime | None = None) -> int:
    """Bots the archive holds as listed (not removed); with ``not_seen_since``, those no
    listing has shown since then: the ones :func:`mark_removed` would mark."""
    sql = "SELECT count(*) FROM bots WHERE removed_at IS NULL"
    if not_seen_since is None:
        return int(con.execute(sql).fetchall()[0][0])
    return int(con.execute(sql + " AND last_seen_at < ?", [not_seen_since]).fetchall()[0][0])


def mark_removed(con: duckdb.DuckDBPyConnection, report: RunCounts) -> int:
    """Bots a complete listing no longer shows keep their history and get ``removed_at``."""
    count = live_bots(con, report.started_at)
    if count:
        con.execute("UPDATE bots SET removed_at = ? WHERE removed_at IS NULL AND last_seen_at < ?",
                    [report.started_at, report.started_at])
    con.execute("UPDATE harvest_runs SET bots_removed = ? WHERE run_id = ?",
                [count, report.run_id])
    return int(count)
