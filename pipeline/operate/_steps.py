"""One step on its own, under the run lock: botstats harvest, botstats trends, and the scheduler's jobs."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ..core import Settings, Shard
from ..harvester import HarvestReport, ProgressFn, harvest
from ._lock import run_lock
from ._runner import _log_trends, _noting, refresh_report
from ._scope import TRENDS_SCOPE, Scope

if TYPE_CHECKING:
    from ..analytics import TrendsReport


def locked_harvest(settings: Settings, *, full: bool = False, accept_removals: bool = False,
                   stop: threading.Event | None = None,
                   on_progress: ProgressFn | None = None,
                   shard: Shard | None = None) -> HarvestReport:
    """One harvest (of ``shard``: default every bot) under the run lock, its run id written
    where waiting jobs read who holds it."""
    stop = stop or threading.Event()
    scope = Scope.harvest(shard)
    with run_lock(settings, "harvest", scope=scope, stop=stop) as lock:
        report = harvest(settings, full=full, accept_removals=accept_removals, stop=stop,
                         on_progress=_noting(lock, on_progress), shard=scope.shard,
                         dead=lock.dead)
        lock.note(run_id=report.run_id)
    return report


def locked_trends(settings: Settings, *, full: bool = False,
                  stop: threading.Event | None = None) -> TrendsReport:
    """One trends build under the run lock (``full``: recomputed from the whole archive)."""
    from ..analytics import build_trends

    with run_lock(settings, "trends", scope=TRENDS_SCOPE, stop=stop):
        return build_trends(settings, full=full)


def harvest_job(settings: Settings, stop: threading.Event) -> str:
    """One scheduled harvest; returns a one-line result for the log."""
    report = locked_harvest(settings, stop=stop)
    return (f"harvest {report.run_id} {report.status} (exit {report.exit_code}): "
            f"{report.bots_seen} bots, {report.stats_added} new records, {report.errors} errors, "
            f"{report.seconds:.1f} s")


def trends_job(settings: Settings, stop: threading.Event) -> str:
    """One scheduled trends build, then the report of ``[report].file`` when set."""
    trends = locked_trends(settings, stop=stop)
    _log_trends(trends)
    result, error = refresh_report(settings)
    note = f"; report failed: {error}" if error else f"; report {result.path}" if result else ""
    return (f"trends {trends.run_id}: {len(trends.datasets)} datasets, "
            f"{trends.written} partitions written, {trends.unchanged} unchanged{note}")
