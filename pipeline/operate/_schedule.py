"""`botstats schedule`: the scheduler daemon, APScheduler 3.x running the harvest and trends
jobs on [schedule]'s crontab expressions (read by :mod:`pipeline.core._crontab`).

Each job runs in a child process of its own (``_children.in_child``), which takes the job's lock
(so a manual `botstats run` and the daemon never overlap): the daemon keeps only the clock, and a
job's memory is that of the same job started by cron. One instance of each job at a time,
missed runs coalesced; every run, skip, miss, failure and a child killed under it is logged,
and the daemon goes on. SIGTERM or SIGINT sets the jobs' stop event, which each forwards to its
child: the running harvest finishes its current batch and records the run ``interrupted``, then
the scheduler shuts down and the process exits 0. A second signal reaches the children too, and
aborts.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from ..core import (
    BotstatsError,
    ConfigError,
    ScheduleSettings,
    Settings,
    cron_trigger,
    next_fire_times,
)
from ._children import Children, in_child
from ._lock import prepare_archive_place
from ._signals import stop_on_signals

log = logging.getLogger("botstats.schedule")

JobFn = Callable[[Settings, threading.Event], Any]


class _Running:
    """Counts jobs in flight so shutdown can wait for them outside the signal handler."""

    def __init__(self) -> None:
        self._count = 0
        self._cond = threading.Condition()

    @contextmanager
    def job(self) -> Iterator[None]:
        with self._cond:
            self._count += 1
        try:
            yield
        finally:
            with self._cond:
                self._count -= 1
                self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._count == 0, timeout)

    @property
    def count(self) -> int:
        return self._count


def _default_jobs(children: Children) -> dict[str, JobFn]:
    return {"harvest": in_child("harvest", children), "trends": in_child("trends", children)}


@dataclass(frozen=True)
class Crons:
    """The jobs' crontab expressions typed as flags (``--harvest-cron``, ``--trends-cron``;
    6 fields = seconds first), over [schedule]'s: None when not typed, '' disables the job."""

    harvest: str | None = None
    trends: str | None = None

    def exprs(self, sch: ScheduleSettings) -> dict[str, tuple[str, str]]:
        """Each job's expression and where it was set."""
        return {
            "harvest": (sch.harvest if self.harvest is None else self.harvest,
                        "[schedule].harvest" if self.harvest is None else "--harvest-cron"),
            "trends": (sch.trends if self.trends is None else self.trends,
                       "[schedule].trends" if self.trends is None else "--trends-cron"),
        }


def build_scheduler(settings: Settings, stop: threading.Event, *, crons: Crons | None = None,
                    jobs: dict[str, JobFn] | None = None,
                    running: _Running | None = None) -> Any:
    """A BlockingScheduler with the harvest and trends jobs and the listeners that log them.

    ``crons`` override [schedule]. ``jobs`` replaces the jobs, run in the daemon's own process
    (tests); by default each runs in a child process.
    """
    from apscheduler.events import (
        EVENT_JOB_ERROR,
        EVENT_JOB_EXECUTED,
        EVENT_JOB_MAX_INSTANCES,
        EVENT_JOB_MISSED,
    )
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.blocking import BlockingScheduler

    sch = settings.schedule
    jobs = jobs or _default_jobs(Children())
    running = running or _Running()
    exprs = (crons or Crons()).exprs(sch)
    scheduler = BlockingScheduler(
        timezone=ZoneInfo(sch.timezone),
        executors={"default": ThreadPoolExecutor(max_workers=len(jobs))},
        # misfire_grace_time 0 = no limit (APScheduler's None; its own default is 1 s).
        job_defaults={"coalesce": True, "max_instances": 1,
                      "misfire_grace_time": sch.misfire_grace_time or None},
    )
    for name, fn in jobs.items():
        expr, where = exprs.get(name, ("", name))
        if not expr:
            log.info("job %s is disabled (%s is empty)", name, where)
            continue
        trigger = cron_trigger(expr, sch.timezone, jitter=sch.jitter, where=where)
        scheduler.add_job(_wrap(name, fn, settings, stop, running), trigger, id=name, name=name)
        log.info("job %s scheduled: %r in %s", name, expr, sch.timezone)

    def on_event(event: Any) -> None:
        name = event.job_id
        if event.code == EVENT_JOB_EXECUTED:
            log.info("job %s finished: %s", name, event.retval,
                     extra={"event": "executed", "job": name, "result": event.retval})
        elif event.code == EVENT_JOB_ERROR:
            log.error("job %s crashed: %r", name, event.exception,
                      exc_info=(type(event.exception), event.exception, event.exception.__traceback__),
                      extra={"event": "error", "job": name})
        elif event.code == EVENT_JOB_MAX_INSTANCES:
            times = getattr(event, "scheduled_run_times", None) or [None]
            log.warning("job %s skipped at %s: the previous run is still going (max_instances=1)",
                        name, _iso(times[-1]),
                        extra={"event": "max_instances", "job": name})
        elif event.code == EVENT_JOB_MISSED:
            log.warning("job %s missed its run at %s (more than misfire_grace_time=%s s late)",
                        name, _iso(getattr(event, "scheduled_run_time", None)),
                        sch.misfire_grace_time,
                        extra={"event": "missed", "job": name})

    scheduler.add_listener(on_event, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR
                           | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
    return scheduler


def _iso(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value else "?"


def _wrap(name: str, fn: JobFn, settings: Settings, stop: threading.Event,
          running: _Running) -> Callable[[], str]:
    def job() -> str:
        with running.job():
            if stop.is_set():
                return "not started: shutting down"
            log.info("job %s started", name, extra={"event": "started", "job": name})
            try:
                return str(fn(settings, stop))
            except BotstatsError as exc:
                if stop.is_set():
                    log.info("job %s not run: shutting down (%s)", name, exc,
                             extra={"event": "stopped", "job": name})
                    return "not run: shutting down"
                # Expected failures (lock held, service down) are one log line, not a traceback.
                log.error("job %s failed: %s", name, exc, extra={"event": "failed", "job": name})
                return f"failed (exit {exc.exit_code})"

    return job


def run_scheduler(settings: Settings, *, crons: Crons | None = None,
                  jobs: dict[str, JobFn] | None = None) -> int:
    """Run the daemon until SIGTERM/SIGINT; return the exit code (0 after a clean stop)."""
    # An archive path no job could write fails every job at every fire time: say so now.
    prepare_archive_place(settings)
    stop = threading.Event()
    running = _Running()
    children = Children()
    scheduler = build_scheduler(settings, stop, crons=crons,
                                jobs=jobs or _default_jobs(children), running=running)
    if not scheduler.get_jobs():
        raise ConfigError("nothing to schedule: [schedule].harvest and [schedule].trends are "
                          "both empty. Set at least one crontab expression.")
    received: list[str] = []

    def on_stop(name: str) -> None:
        received.append(name)
        # wait=False: never block inside a signal handler; running jobs are awaited below.
        scheduler.shutdown(wait=False)
        # The first signal reached the children through the stop event; a second one aborts
        # them (their own second signal) and then this process, the default way.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, _abort_with(children))

    with stop_on_signals(stop, on_stop=on_stop):
        log.info("scheduler started (pid %s); stop with SIGTERM or Ctrl+C", os.getpid(),
                 extra={"event": "scheduler_started"})
        scheduler.start()
        if running.count:
            log.info("%s received: waiting for the running job to finish its current batch",
                     received[0] if received else "stop")
        running.wait_idle()
    log.info("scheduler stopped%s", f" on {received[0]}" if received else "",
             extra={"event": "scheduler_stopped"})
    return 0


def _abort_with(children: Children) -> Callable[[int, Any], None]:
    def abort(signum: int, _frame: Any) -> None:
        children.signal(signum)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    return abort


def describe_schedule(settings: Settings, *, crons: Crons | None = None, count: int = 5,
                      now: datetime | None = None) -> list[tuple[str, str, list[datetime]]]:
    """(job, expression, next run times) for `botstats schedule --dry-run`."""
    sch = settings.schedule
    zone = ZoneInfo(sch.timezone)
    now = now or datetime.now(zone)
    out: list[tuple[str, str, list[datetime]]] = []
    for name, (expr, where) in (crons or Crons()).exprs(sch).items():
        if not expr:
            out.append((name, "(disabled)", []))
            continue
        trigger = cron_trigger(expr, sch.timezone, where=where)
        out.append((name, expr, next_fire_times(trigger, count, now)))
    return out
