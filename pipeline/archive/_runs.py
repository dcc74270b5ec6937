"""The bookkeeping of harvest runs in harvest_runs: begun, counted batch by batch, finished; and
what a complete listing says about removed bots, each shard about its own."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from datetime import datetime

import duckdb

from ..core import BotstatsError, Shard
from ._commit import RunCounts, committing

log = logging.getLogger("botstats.harvest")


def begin_run(con: duckdb.DuckDBPyConnection, report: RunCounts,
              dead: Callable[[Shard], bool] | None = None) -> None:
    """Record the run ``running``, and mark ``interrupted`` the runs left ``running`` whose
    shard ``dead`` says no live job holds (their process was killed): by default all of them,
    as under a lock that excludes every other writer; with workers beside this one, only those
    whose lock is free."""
    committing(con, report, lambda c, _: _begin(c, report, dead or (lambda _: True)))


def _begin(con: duckdb.DuckDBPyConnection, report: RunCounts,
           dead: Callable[[Shard], bool]) -> None:
    running = con.execute(
        "SELECT run_id, coalesce(shard, 0), coalesce(shards, 1) FROM harvest_runs "
        "WHERE status = 'running'").fetchall()
    stale = [run_id for run_id, k, n in running if dead(Shard(k, n))]
    if stale:
        con.execute(
            "UPDATE harvest_runs SET status = 'interrupted', finished_at = now(), "
            "message = 'the run ended without recording its end (its process was killed, or "
            "the archive could not be written: see its log); its whole batches are kept and a "
            "later run completes the work' WHERE list_contains(?, run_id)", [stale])
    for run_id in stale:
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
        "INSERT INTO harvest_runs (run_id, started_at, status, mode, base_url, pid, host, "
        "shard, shards) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
        [report.run_id, report.started_at, report.mode, report.base_url, os.getpid(),
         socket.gethostname(), report.shard.k, report.shard.n],
    )


def finish_run(con: duckdb.DuckDBPyConnection, report: RunCounts) -> None:
    """Record the run's end and its counters; a failure is logged (the run's batches are kept
    whatever its row says)."""
    try:
        committing(con, report, lambda c, _: c.execute(
            "UPDATE harvest_runs SET status = ?, finished_at = ?, message = ? WHERE run_id = ?",
            [report.status, report.finished_at, report.message or None, report.run_id]))
    except (duckdb.Error, BotstatsError) as exc:
        log.error("could not record the end of run %s: %s", report.run_id, exc)


def live_bots(con: duckdb.DuckDBPyConnection, shard: Shard,
              not_seen_since: datetime | None = None) -> int:
    """The shard's bots the archive holds as listed (not removed); with ``not_seen_since``,
    those no listing has shown since then: the ones :func:`mark_removed` would mark."""
    sql = f"SELECT count(*) FROM bots WHERE removed_at IS NULL AND {shard.sql('bot_id')}"
    if not_seen_since is None:
        return int(con.execute(sql).fetchall()[0][0])
    return int(con.execute(sql + " AND last_seen_at < ?", [not_seen_since]).fetchall()[0][0])


def mark_removed(con: duckdb.DuckDBPyConnection, report: RunCounts) -> int:
    """The run's shard's bots that its complete listing no longer shows keep their history and
    get ``removed_at``; how many."""
    return committing(con, report, lambda c, _: _mark_removed(c, report))


def _mark_removed(con: duckdb.DuckDBPyConnection, report: RunCounts) -> int:
    count = live_bots(con, report.shard, report.started_at)
    if count:
        con.execute(f"UPDATE bot_listing SET removed_at = ? WHERE removed_at IS NULL AND "
                    f"{report.shard.sql('bot_id')} AND bot_id IN (SELECT bot_id FROM "
                    f"bot_last_seen WHERE last_seen_at < ?)",
                    [report.started_at, report.started_at])
    report.bots_removed = count
    return int(count)
