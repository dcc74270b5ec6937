"""`botstats run`, the one job a crontab or the scheduler calls: take the archive's run lock,
harvest, then build trends; a harvest or a trends build on its own runs here too, under the
same lock (the archive's upkeep jobs are ``_maintenance``'s).

Trends run after a ``complete`` or ``partial`` harvest (a partial archive is still worth
summarising), never after a ``failed`` or ``interrupted`` one. The run's status, and so its exit
code, is the harvest's, except that a trends failure after a good harvest makes it ``failed``:

    0 complete   3 partial   1 failed   4 interrupted   75 another run holds the lock

Once the run's work is committed, the alerts stage tells what it calls for (``[alerts]``; a run
the lock keeps out tells that too); what it delivered or not is in the report, and never changes
the status or the exit code.

With ``hand_off`` the run stops after the harvest when the trends are due (``trends_pending``)
and lets go of the lock; :func:`finish_run` builds them under the trends lock, in whatever
process the caller chose: `botstats run` re-executes itself (``_process``), so that the trends
and the report do not start from the heap the harvest left.

The scheduler's jobs (:func:`harvest_job`, :func:`trends_job`) are the same steps on their own,
each under the same lock, and tell what they call for as a run does (:func:`tell_harvest`,
:func:`tell_trends`; `botstats harvest` and `botstats trends` too). A ``stop`` event (set by SIGTERM/SIGINT) makes a running harvest finish
its current batch and record the run ``interrupted``; set while waiting for the lock, the job gives
up waiting.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict

from ..core import BotstatsError, LockTimeout, RunStatus, Settings, Shard
from ..harvester import EXIT_CODES, HarvestOptions, HarvestReport, ProgressFn, harvest
from ._lock import (
    TRENDS_SCOPE,
    Held,
    Holder,
    HolderJson,
    Scope,
    Wait,
    advisory_holder,
    holder,
    run_lock,
)
from ._memory import peak_rss_mb

if TYPE_CHECKING:
    from ..alerts import AlertsReport, LockHolder
    from ..analytics import ReportResult, TrendsReport

log = logging.getLogger("botstats.run")

class MemoryJson(TypedDict, total=False):
    """:class:`Memory` in the run report's JSON (a key only once measured or tried)."""

    harvest: float
    fresh_process: bool
    trends: float


@dataclass
class Memory:
    """A run's peak RSS in MB: ``harvest`` at its end; ``trends`` at the run's end (the same
    process's peak, or that of the fresh process the trends ran in: ``fresh_process``, None
    when not tried). None: not measured (yet)."""

    harvest: float | None = None
    trends: float | None = None
    fresh_process: bool | None = None

    def as_dict(self) -> MemoryJson:
        out = MemoryJson()
        if self.harvest is not None:
            out["harvest"] = self.harvest
        if self.fresh_process is not None:
            out["fresh_process"] = self.fresh_process
        if self.trends is not None:
            out["trends"] = self.trends
        return out

    @classmethod
    def of(cls, data: MemoryJson | None) -> Memory:
        """From :meth:`as_dict` (read back as JSON)."""
        data = data or MemoryJson()
        return cls(data.get("harvest"), data.get("trends"), data.get("fresh_process"))


class RunReportJson(TypedDict):
    """:class:`RunReport` as `botstats run --json` prints it and a hand-off carries it."""

    status: str
    exit_code: int
    run_id: str | None
    message: str
    lock_wait_seconds: float
    took_over: HolderJson | None
    harvest: dict[str, Any] | None
    trends: dict[str, Any] | None
    trends_skipped: str | None
    trends_error: str | None
    report: dict[str, Any] | None
    report_error: str | None
    memory: MemoryJson | None
    alerts: dict[str, Any] | None


@dataclass
class RunReport:
    """What `botstats run` did: the harvest, the trends (or why not), and the outcome."""

    status: RunStatus
    harvest: HarvestReport | None = None
    trends: TrendsReport | None = None
    trends_skipped: str = ""  # why trends did not run
    trends_error: str = ""
    report: ReportResult | None = None  # the HTML report refreshed after trends ([report].file)
    report_error: str = ""
    lock_wait: float = 0.0
    took_over: Holder | None = None  # the dead holder whose lock this run took over
    message: str = ""
    trends_pending: bool = False  # harvested; the trends and report are the caller's (finish_run)
    memory: Memory = field(default_factory=Memory)
    alerts: AlertsReport | None = None  # what [alerts] told, after the run's work was committed

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)

    @property
    def run_id(self) -> str | None:
        return self.harvest.run_id if self.harvest else None

    def as_dict(self) -> RunReportJson:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "run_id": self.run_id,
            "message": self.message,
            "lock_wait_seconds": round(self.lock_wait, 3),
            "took_over": self.took_over.as_dict() if self.took_over else None,
            "harvest": self.harvest.as_dict() if self.harvest else None,
            "trends": self.trends.as_dict() if self.trends else None,
            "trends_skipped": self.trends_skipped or None,
            "trends_error": self.trends_error or None,
            "report": self.report.as_dict() if self.report else None,
            "report_error": self.report_error or None,
            "memory": self.memory.as_dict() or None,
            "alerts": self.alerts.as_dict() if self.alerts else None,
        }

    @classmethod
    def resume(cls, data: RunReportJson) -> RunReport:
        """A run handed off after its harvest (its :meth:`as_dict`, read back as JSON), ready
        for :func:`finish_run`."""
        harvested = data.get("harvest")
        return cls(RunStatus(data["status"]), message=str(data.get("message") or ""),
                   lock_wait=float(data.get("lock_wait_seconds") or 0.0),
                   took_over=Holder.of(data.get("took_over")),
                   memory=Memory.of(data.get("memory")),
                   harvest=HarvestReport.from_dict(harvested) if harvested else None,
                   trends_pending=True)



def _noting(lock: Held, on_progress: ProgressFn | None) -> ProgressFn:
    """A progress callback that also writes the harvest's run id into the lock holder file."""

    def progress(report: HarvestReport) -> None:
        lock.note(run_id=report.run_id)
        if on_progress is not None:
            on_progress(report)

    return progress


@dataclass(frozen=True)
class RunOptions:
    """What a run is asked to do: its harvest's options (full, believing removals, of a shard);
    ``full_trends``, recompute the trends from the whole archive; ``lock_timeout``, how long to
    wait for the lock (default ``[run].lock_timeout``); ``hand_off``, return after the harvest
    with ``trends_pending`` set when the trends are due, for :func:`finish_run`."""

    harvest: HarvestOptions = field(default_factory=HarvestOptions)
    full_trends: bool = False
    lock_timeout: float | None = None
    hand_off: bool = False


def run(settings: Settings, options: RunOptions | None = None, *,
        stop: threading.Event | None = None,
        on_progress: ProgressFn | None = None) -> RunReport:
    """Lock, harvest, then trends, as ``options`` ask. Raises LockTimeout (exit 75) when
    another run holds the lock. A run of a shard harvests only that shard; the trends, of the
    whole archive, under the trends lock (one build at a time)."""
    stop, options = stop or threading.Event(), options or RunOptions()
    started = time.monotonic()
    scope = Scope.harvest(options.harvest.shard)
    try:
        with run_lock(settings, "run", scope=scope,
                      wait=Wait(options.lock_timeout, stop)) as lock:
            report = RunReport(RunStatus.RUNNING, lock_wait=time.monotonic() - started,
                               took_over=lock.previous if lock.took_over else None)
            report.harvest = harvest(settings, options.harvest, stop=stop, dead=lock.dead,
                                     on_progress=_noting(lock, on_progress))
            lock.note(run_id=report.harvest.run_id)
            _after_harvest(settings, options, report, lock, stop)
            if not report.trends_pending and not stop.is_set():
                _tell(settings, report, lock)
    except LockTimeout:
        if not stop.is_set():
            _tell_blocked(settings, scope.shard)
            raise
        report = RunReport(RunStatus.INTERRUPTED,
                           message="stopped while waiting for the archive lock")
    if not report.trends_pending:
        _log_end(report)
    return report


def finish_run(settings: Settings, report: RunReport, *, full_trends: bool = False,
               lock_timeout: float | None = None,
               stop: threading.Event | None = None) -> RunReport:
    """The trends and the report of a run handed off after its harvest (``trends_pending``),
    under the trends lock (the archive's run lock, with a SQLite catalog); the run's status
    and exit code as :func:`run` gives them."""
    stop = stop or threading.Event()
    report.trends_pending = False
    try:
        with run_lock(settings, "run", scope=TRENDS_SCOPE, wait=Wait(lock_timeout, stop),
                      run_id=report.run_id) as lock:
            _trends_then_report(settings, report, full_trends)
            if not stop.is_set():
                _tell(settings, report, lock)
    except LockTimeout as exc:  # the lock was free between the harvest and now: anyone's
        report.trends_skipped = ("stopped on request" if stop.is_set()
                                 else f"another job kept the lock: {exc}")
    _log_end(report)
    return report


def _log_end(report: RunReport) -> None:
    if report.trends is not None:
        report.memory.trends = peak_rss_mb()
    log.info("run %s %s (exit %d)", report.run_id, report.status, report.exit_code,
             extra={"run": {k: v for k, v in report.as_dict().items() if k not in ("harvest", "trends")}})


def _after_harvest(settings: Settings, options: RunOptions, report: RunReport, lock: Held,
                   stop: threading.Event) -> None:
    """The run's outcome from its harvest, then the trends when they are due (or handed off)."""
    assert report.harvest is not None
    report.memory.harvest = peak_rss_mb()
    report.status, report.message = report.harvest.status, report.harvest.message
    if report.harvest.status not in (RunStatus.COMPLETE, RunStatus.PARTIAL):
        report.trends_skipped = f"the harvest ended {report.harvest.status}"
        return
    if stop.is_set():
        report.trends_skipped = "stopped on request"
        return
    if options.hand_off:
        report.trends_pending = True
        return
    try:
        with lock.also(TRENDS_SCOPE):
            _trends_then_report(settings, report, options.full_trends)
    except LockTimeout as exc:
        report.trends_skipped = ("stopped on request" if stop.is_set()
                                 else f"another job kept building them: {exc}")


def _tell(settings: Settings, report: RunReport, lock: Held) -> None:
    """What the run calls for, told ([alerts]) once its work is committed: under the trends
    lock, the one every run's alerts take, with the run's status and exit code untouched."""
    if not settings.alerts.destinations:
        return
    from ..alerts import AlertsReport, RunOutcome, notify_run

    harvested = report.harvest
    outcome = RunOutcome(report.run_id, report.status, report.message,
                         harvested.started_at if harvested else None,
                         harvested.shard if harvested else Shard())
    try:
        with lock.also(TRENDS_SCOPE):
            report.alerts = notify_run(settings, settings.alerts, outcome)
    except LockTimeout as exc:
        report.alerts = AlertsReport(error=f"another job kept the trends lock: {exc}")


def _tell_blocked(settings: Settings, shard: Shard) -> None:
    """A run the lock kept out tells that (the holder, when it held too long; the archive,
    when stale); it cannot write the archive, so its ledger rows wait in the spool."""
    if not settings.alerts.destinations:
        return
    from ..alerts import notify_blocked

    try:
        held = (advisory_holder(settings, Scope.harvest(shard)) if settings.shared_catalog
                else holder(settings))
    except BotstatsError as exc:  # the catalog went away meanwhile: tell what can be told
        log.warning("the lock's holder is unknown: %s", exc)
        held = None
    notify_blocked(settings, settings.alerts, _as_told(held), shard)


def _as_told(held: Holder | None) -> LockHolder | None:
    """The lock's holder as an alert names it; None when it says no time it took the lock."""
    from ..alerts import LockHolder

    if held is None:
        return None
    try:
        since = datetime.fromisoformat(held.since)
    except ValueError:
        return None
    return LockHolder(held.job, held.run_id or "", held.pid, held.host,
                      since if since.tzinfo else since.replace(tzinfo=UTC))


def _trends_then_report(settings: Settings, report: RunReport, full_trends: bool) -> None:
    """Trends after a good harvest, then the report; a trends failure fails the run."""
    assert report.harvest is not None
    try:
        report.trends = _build_trends(settings, report.harvest.run_id, full=full_trends)
    except BotstatsError as exc:
        report.trends_error = str(exc)
        report.status = RunStatus.FAILED
        report.message = f"the harvest ended {report.harvest.status}, then trends failed: {exc}"
        log.error("trends after harvest %s failed: %s", report.harvest.run_id, exc)
        return
    report.report, report.report_error = refresh_report(settings)


def refresh_report(settings: Settings) -> tuple[ReportResult | None, str]:
    """Rewrite ``[report].file`` from the new exports, when it is set. A failure is logged and
    returned, not raised: the run's data is archived and exported whatever the report does."""
    if not settings.report.file:
        return None, ""
    from ..analytics import build_report

    try:
        result = build_report(settings)
    except BotstatsError as exc:
        log.error("report %s not refreshed: %s", settings.report.file, exc)
        return None, str(exc)
    log.info("%s", result.summary())
    return result, ""


def _build_trends(settings: Settings, run_id: str | None, *, full: bool = False) -> TrendsReport:
    from ..analytics import build_trends

    trends = build_trends(settings, run_id=run_id, full=full)
    _log_trends(trends)
    return trends


def _log_trends(trends: TrendsReport) -> None:
    log.info("trends %s: %s%s, %d datasets, %d partitions written, %d unchanged, %.1f s",
             trends.run_id, trends.mode, f" from {trends.since}" if trends.since else "",
             len(trends.datasets), trends.written, trends.unchanged, trends.seconds)


def locked_harvest(settings: Settings, options: HarvestOptions | None = None, *,
                   stop: threading.Event | None = None,
                   on_progress: ProgressFn | None = None) -> HarvestReport:
    """One harvest (as ``options`` ask: of a shard, default every bot) under the run lock, its
    run id written where waiting jobs read who holds it."""
    stop, options = stop or threading.Event(), options or HarvestOptions()
    scope = Scope.harvest(options.shard)
    try:
        with run_lock(settings, "harvest", scope=scope, wait=Wait(stop=stop)) as lock:
            report = harvest(settings, options, stop=stop,
                             on_progress=_noting(lock, on_progress), dead=lock.dead)
            lock.note(run_id=report.run_id)
    except LockTimeout:
        if not stop.is_set():
            _tell_blocked(settings, scope.shard)
        raise
    return report


def tell_harvest(settings: Settings, report: HarvestReport) -> AlertsReport | None:
    """What a harvest on its own (`botstats harvest`, the scheduler's harvest job) calls for,
    told as after `botstats run` (its status, a recovery, the exports' events and milestones),
    under the trends lock once the harvest is committed. None when no destination is set."""
    if report.status == RunStatus.INTERRUPTED:
        return None
    from ..alerts import RunOutcome, notify_run

    outcome = RunOutcome(report.run_id, report.status, report.message, report.started_at,
                         report.shard)
    return _tell_alone(settings, lambda: notify_run(settings, settings.alerts, outcome),
                       report.run_id)


def tell_trends(settings: Settings) -> AlertsReport | None:
    """What a trends build on its own (`botstats trends`, the scheduler's trends job) calls
    for: the events and milestones of the exports it wrote. None when no destination is set."""
    from ..alerts import notify_data

    return _tell_alone(settings, lambda: notify_data(settings, settings.alerts))


def _tell_alone(settings: Settings, tell: Callable[[], AlertsReport],
                run_id: str | None = None) -> AlertsReport | None:
    """``tell()`` under the trends lock, the one every run's alerts take (a job on its own
    holds none by then); None when no destination is set."""
    if not settings.alerts.destinations:
        return None
    from ..alerts import AlertsReport

    try:
        with run_lock(settings, "alerts", scope=TRENDS_SCOPE, run_id=run_id):
            return tell()
    except LockTimeout as exc:
        return AlertsReport(error=f"another job kept the trends lock: {exc}")


def locked_trends(settings: Settings, *, full: bool = False,
                  stop: threading.Event | None = None) -> TrendsReport:
    """One trends build under the trends lock (``full``: recomputed from the whole archive).

    A build reads a snapshot and harvests go on beside it; a full one takes long, so what they
    archived meanwhile is built right after, still under the lock (``then``)."""
    from ..analytics import build_trends

    with run_lock(settings, "trends", scope=TRENDS_SCOPE, wait=Wait(stop=stop)):
        report = build_trends(settings, full=full)
        if full and not (stop and stop.is_set()):
            then = build_trends(settings)
            if then.mode != "unchanged":
                _log_trends(then)
                report = dataclasses.replace(report, then=then)
        return report


@dataclass(frozen=True)
class JobResult:
    """What a scheduled job did: its line for the log, and the exit code `botstats` would have
    ended the same job with."""

    line: str
    exit_code: int = 0

    def __str__(self) -> str:
        return self.line


def harvest_job(settings: Settings, stop: threading.Event) -> JobResult:
    """One scheduled harvest; its one-line result for the log."""
    report = locked_harvest(settings, stop=stop)
    told = tell_harvest(settings, report)
    return JobResult(f"harvest {report.run_id} {report.status} (exit {report.exit_code}): "
                     f"{report.bots_seen} bots, {report.stats_added} new records, "
                     f"{report.errors} errors, {report.seconds:.1f} s{_told(told)}",
                     report.exit_code)


def trends_job(settings: Settings, stop: threading.Event) -> JobResult:
    """One scheduled trends build, then the report of ``[report].file`` when set."""
    trends = locked_trends(settings, stop=stop)
    _log_trends(trends)
    result, error = refresh_report(settings)
    note = f"; report failed: {error}" if error else f"; report {result.path}" if result else ""
    told = None if stop.is_set() else tell_trends(settings)
    return JobResult(f"trends {trends.run_id}: {len(trends.datasets)} datasets, "
                     f"{trends.written} partitions written, {trends.unchanged} unchanged{note}"
                     f"{_told(told)}")


def _told(told: AlertsReport | None) -> str:
    """The alerts' part of a job's log line ('' when nothing was to be told)."""
    line = told.summary() if told is not None else ""
    return f"; {line}" if line else ""
