"""A harvest's transactions, retried when they collide with another worker's.

DuckLake checks conflicts per table when a transaction commits: two transactions that both touch
a table one of them deletes from (an UPDATE or a MERGE deletes and inserts) collide, and the one
that commits second fails with "Transaction conflict". Every harvest transaction goes through
:func:`committing`, which also writes the run's counters into its own ``harvest_runs`` row, so
any two concurrent ones collide: one commits, and the other runs again from BEGIN, against what
the first committed. The N workers' writes are thereby serializable: a check-then-insert on a
key any worker may write (a reject of the listing, which every shard reads; a record field seen
for the first time) stays exactly once. On a SQLite catalog, with one writer, nothing collides.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import datetime
from typing import Protocol, TypeVar

import duckdb

from ..core import Shard, StoreError
from ._sql import rollback

log = logging.getLogger("botstats.harvest")
T = TypeVar("T")


class RunCounts(Protocol):
    """What a run reports and keeps in ``harvest_runs`` (``HarvestReport`` is one)."""

    run_id: str
    mode: str
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
    commit_retries: int
    shard: Shard

    @property
    def status(self) -> str:  # read only here: a str, or a str enum (RunStatus)
        ...


_COUNTERS = ("bots_seen", "bots_new", "bots_removed", "bots_fetched", "stats_added",
             "stats_updated", "requests", "retries", "rejects", "errors", "commit_retries")


# The counters a batch's write adds to (the others are counted as requests are made).
WRITE_COUNTERS = ("bots_new", "stats_added", "stats_updated", "rejects")


def save_counters(con: duckdb.DuckDBPyConnection, report: RunCounts) -> None:
    sets = ", ".join(f"{c} = ?" for c in _COUNTERS)
    con.execute(f"UPDATE harvest_runs SET {sets} WHERE run_id = ?",
                [getattr(report, c) for c in _COUNTERS] + [report.run_id])


# How long a transaction keeps trying while other workers' commits win: a loser waits for
# them to finish, so this bounds a pile-up, not a normal run.
PATIENCE = 300.0
_FIRST_WAIT, _LONGEST_WAIT = 0.05, 2.0


def is_conflict(exc: BaseException) -> bool:
    """Whether DuckLake refused a commit because another transaction changed what it touched
    (retrying it from the start is safe), as opposed to any other failure."""
    text = str(exc)
    return isinstance(exc, duckdb.Error) and (
        "Transaction conflict" in text or "maximum retry count" in text)


def committing(con: duckdb.DuckDBPyConnection, report: RunCounts,
               work: Callable[[duckdb.DuckDBPyConnection, bool], T],
               patience: float = PATIENCE) -> T:
    """``work(con, retried)``, then the run's counters, in one transaction; return what
    ``work`` returned. A collision rolls the counters ``work`` added to back and runs it again
    (``retried`` True: what it knew before BEGIN may be stale), waiting a little longer each
    time, for up to ``patience`` seconds. Any other failure is raised as it is, rolled back."""
    deadline = time.monotonic() + patience
    wait = _FIRST_WAIT
    retried = False
    while True:
        counted = {c: getattr(report, c) for c in WRITE_COUNTERS}
        try:
            con.execute("BEGIN TRANSACTION")
            result = work(con, retried)
            save_counters(con, report)
            con.execute("COMMIT")
            return result
        except BaseException as exc:
            rollback(con)
            for name, value in counted.items():  # the summary counts committed rows only
                setattr(report, name, value)
            if not is_conflict(exc):
                raise
            if time.monotonic() + wait > deadline:
                raise StoreError(
                    f"run {report.run_id} could not commit for {patience:g} s: other workers' "
                    f"commits kept colliding with it. Its committed batches are kept; run it "
                    f"again (fewer workers at once collide less).") from exc
        report.commit_retries += 1
        retried = True
        log.debug("run %s: a commit collided with another worker's; retrying", report.run_id)
        time.sleep(random.uniform(wait / 2, wait))
        wait = min(wait * 2, _LONGEST_WAIT)


__all__ = ["PATIENCE", "RunCounts", "WRITE_COUNTERS", "committing", "is_conflict", "save_counters"]
