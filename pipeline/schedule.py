"""`botstats schedule` and `botstats cron`: standard crontab expressions, run by APScheduler 3.x or
printed for system cron and systemd.

Crontab expressions are parsed here, once, into explicit value sets (:class:`CronSpec`), and
rendered from those sets for each consumer, because the consumers disagree with crontab:

- APScheduler numbers weekdays from 0 = Monday (crontab: 0 and 7 = Sunday, 1-5 = Mon-Fri), reads
  ``from_crontab`` in the local zone, and ANDs day-of-month with day-of-week where crontab ORs
  them when both are restricted. We give it weekday *names*, an explicit zone, and an
  ``OrTrigger`` for the OR case.
- systemd ``OnCalendar`` has its own syntax (``Mon..Fri *-*-* 09:00:00 UTC``) and also ANDs the
  two day fields: the OR case becomes two ``OnCalendar=`` lines.

The daemon (:func:`run_scheduler`) runs the harvest and trends jobs under the archive's run lock
(so a manual `botstats run` and the daemon never overlap), one instance of each at a time, missed
runs coalesced, and logs every run, skip and miss. SIGTERM or SIGINT sets the jobs' stop event:
the running harvest finishes its current batch and records the run ``interrupted``, then the
scheduler shuts down and the process exits 0.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from .config import Settings
from .errors import BotstatsError, ConfigError
from .lock import prepare_archive_place

log = logging.getLogger("botstats.schedule")

# --- crontab expressions --------------------------------------------------------------------
MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
CRON_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # crontab numbering: index
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] is the value low + i


_FIELDS = {
    "second": _Field("second", 0, 59),
    "minute": _Field("minute", 0, 59),
    "hour": _Field("hour", 0, 23),
    "day": _Field("day", 1, 31),
    "month": _Field("month", 1, 12, MONTHS),
    # 7 is accepted as Sunday and folded onto 0 below.
    "day_of_week": _Field("day_of_week", 0, 7, CRON_WEEKDAYS),
}
_ALLOWED = "*, N, N-M, */S, N-M/S, N/S, comma lists, and names (jan-dec, sun-sat)"


@dataclass(frozen=True)
class CronSpec:
    """A crontab expression as explicit sets of values; ``None`` is ``*`` (every value).

    ``day_of_week`` uses crontab numbering, 0 = Sunday .. 6 = Saturday (7 folded onto 0).
    """

    expr: str
    second: frozenset[int]
    minute: frozenset[int] | None
    hour: frozenset[int] | None
    day: frozenset[int] | None
    month: frozenset[int] | None
    day_of_week: frozenset[int] | None
    # Crontab (Vixie, cronie) runs when EITHER day field matches if neither starts with "*".
    days_or: bool = False


def _value(token: str, spec: _Field, where: str) -> int:
    low = token.lower()
    if spec.names and low in spec.names:
        return spec.low + spec.names.index(low)
    if not token.isdigit():
        raise ConfigError(f"{where}: {spec.name} value {token!r} is not a number"
                          + (f" or a name ({spec.names[0]}..{spec.names[-1]})" if spec.names else "")
                          + ".")
    number = int(token)
    if not spec.low <= number <= spec.high:
        raise ConfigError(f"{where}: {spec.name} value {number} is out of range "
                          f"{spec.low}-{spec.high}.")
    return number


def _parse_field(text: str, spec: _Field, where: str) -> frozenset[int] | None:
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ConfigError(f"{where}: step {step_text!r} in {spec.name} field {text!r} "
                                  f"must be a whole number above 0.")
            step = int(step_text)
        else:
            step = 1
        if base == "*":
            first, last = spec.low, spec.high
            if spec.name == "day_of_week":
                last = 6  # */2 is sun,tue,thu,sat: never Sunday twice through 7
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _value(a, spec, where), _value(b, spec, where)
            if first > last:
                raise ConfigError(f"{where}: range {base!r} in the {spec.name} field runs "
                                  f"backwards; write it as a list, e.g. 'fri,sat,sun'.")
        elif base:
            first = _value(base, spec, where)
            last = spec.high if slash else first  # crontab "5/15" = 5-max/15
        else:
            raise ConfigError(f"{where}: empty element in the {spec.name} field {text!r}. "
                              f"Allowed: {_ALLOWED}.")
        values.update(range(first, last + 1, step))
    if spec.name == "day_of_week" and 7 in values:
        values = (values - {7}) | {0}
    if text == "*":
        return None
    return frozenset(values)


def parse_crontab(expr: str, *, where: str = "cron expression") -> CronSpec:
    """Parse a standard 5-field crontab expression (or a ``@macro``).

    A 6-field expression is read as *seconds first* (``*/3 * * * * *``: every 3 s), a test
    knob for the command-line overrides; config files take 5 fields.
    """
    text = MACROS.get(expr.strip().lower(), expr.strip())
    parts = text.split()
    if len(parts) == 5:
        parts = ["0", *parts]
    if len(parts) != 6:
        raise ConfigError(f"{where}: {expr!r} is not a crontab expression: expected 5 fields "
                          f"'minute hour day month weekday' (e.g. '0 * * * *') or a macro "
                          f"({', '.join(MACROS)}).")
    for part in parts:
        if not re.fullmatch(r"[A-Za-z0-9*,/\-]+", part):
            raise ConfigError(f"{where}: field {part!r} of {expr!r} has characters crontab does "
                              f"not know. Allowed: {_ALLOWED}.")
    names = ("second", "minute", "hour", "day", "month", "day_of_week")
    parsed = {n: _parse_field(p, _FIELDS[n], where) for n, p in zip(names, parts, strict=True)}
    second = parsed.pop("second")
    days_or = not parts[3].startswith("*") and not parts[5].startswith("*")
    return CronSpec(expr=expr, second=second or frozenset(range(60)), days_or=days_or, **parsed)


def crontab_weekdays(field: str) -> str:
    """A standard crontab weekday field as APScheduler weekday names.

    ``"0"`` and ``"7"`` -> ``"sun"``; ``"1-5"`` -> ``"mon,tue,wed,thu,fri"``; ``"*"`` -> ``"*"``.
    (APScheduler would read ``1-5`` as Tue-Sat and reject ``7``.)
    """
    values = _parse_field(field, _FIELDS["day_of_week"], "day_of_week")
    return "*" if values is None else _weekday_names(values)


def _weekday_names(values: frozenset[int]) -> str:
    # Monday first, as people read a week; APScheduler takes any order.
    return ",".join(CRON_WEEKDAYS[d] for d in sorted(values, key=lambda d: (d + 6) % 7))


def _ap_list(values: frozenset[int] | None) -> str:
    return "*" if values is None else ",".join(str(v) for v in sorted(values))


def cron_trigger(expr: str, timezone: str, *, jitter: int = 0, where: str = "cron expression") -> Any:
    """An APScheduler trigger that fires exactly when crontab would, in ``timezone``."""
    from apscheduler.triggers.combining import OrTrigger
    from apscheduler.triggers.cron import CronTrigger

    spec = parse_crontab(expr, where=where)
    zone = ZoneInfo(timezone)

    def make(day: frozenset[int] | None, dow: frozenset[int] | None) -> CronTrigger:
        return CronTrigger(
            second=_ap_list(spec.second if len(spec.second) < 60 else None),
            minute=_ap_list(spec.minute), hour=_ap_list(spec.hour), day=_ap_list(day),
            month=_ap_list(spec.month),
            day_of_week="*" if dow is None else _weekday_names(dow),
            timezone=zone, jitter=jitter or None,
        )

    if spec.days_or:
        return OrTrigger([make(spec.day, None), make(None, spec.day_of_week)],
                         jitter=jitter or None)
    return make(spec.day, spec.day_of_week)


def next_fire_times(trigger: Any, count: int, now: datetime) -> list[datetime]:
    """The next ``count`` fire times of an APScheduler trigger after ``now`` (for --dry-run)."""
    out: list[datetime] = []
    previous = None
    current = now
    while len(out) < count:
        fire = trigger.get_next_fire_time(previous, current)
        if fire is None:
            break
        out.append(fire)
        previous = fire
        current = fire
    return out


# --- systemd OnCalendar and the crontab line ---------------------------------------------------
def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _calendar_list(values: frozenset[int] | None, width: int) -> str:
    if values is None:
        return "*"
    parts = []
    for a, b in _runs(sorted(values)):
        if b - a >= 2:
            parts.append(f"{a:0{width}d}..{b:0{width}d}")
        else:
            parts.extend(f"{v:0{width}d}" for v in range(a, b + 1))
    return ",".join(parts)


def _calendar_weekdays(values: frozenset[int]) -> str:
    names = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
    monday_first = sorted(values, key=lambda d: (d + 6) % 7)
    order = [(d + 6) % 7 for d in monday_first]  # Mon=0 .. Sun=6: runs are consecutive days
    parts = []
    for a, b in _runs(order):
        first, last = names[(a + 1) % 7], names[(b + 1) % 7]
        parts.append(f"{first}..{last}" if b - a >= 2 else ",".join(
            names[(v + 1) % 7] for v in range(a, b + 1)))
    return ",".join(parts)


def on_calendar(expr: str, timezone: str, *, where: str = "cron expression") -> list[str]:
    """systemd ``OnCalendar=`` values equivalent to a crontab expression in ``timezone``."""
    spec = parse_crontab(expr, where=where)
    seconds = _calendar_list(spec.second if len(spec.second) < 60 else None, 2)
    time = f"{_calendar_list(spec.hour, 2)}:{_calendar_list(spec.minute, 2)}:{seconds}"

    def line(day: frozenset[int] | None, dow: frozenset[int] | None) -> str:
        date = f"*-{_calendar_list(spec.month, 2)}-{_calendar_list(day, 2)}"
        prefix = f"{_calendar_weekdays(dow)} " if dow is not None else ""
        return f"{prefix}{date} {time} {timezone}"

    if spec.days_or:
        return [line(spec.day, None), line(None, spec.day_of_week)]
    return [line(spec.day, spec.day_of_week)]


@dataclass(frozen=True)
class Installation:
    """Absolute paths of this installation, for the crontab line and the systemd units."""

    botstats: str  # the console script, or "python -m pipeline"
    config: str | None
    workdir: str
    log_file: str
    flags: tuple[str, ...] = ()  # --db/--base-url typed on this command line, passed on


def this_installation(settings: Settings, config_file: str | None,
                      flags: tuple[str, ...] = ()) -> Installation:
    """This venv's ``botstats`` (next to ``sys.executable``), the config in use, the cwd."""
    script = Path(sys.executable).with_name("botstats")
    if script.exists():
        command = str(script.absolute())
    elif found := shutil.which("botstats"):
        command = str(Path(found).absolute())
    else:
        command = f"{shlex.quote(str(Path(sys.executable).absolute()))} -m pipeline"
    source = config_file or settings.source or None
    config = str(Path(source).absolute()) if source else None
    workdir = Path.cwd().absolute()
    log_file = settings.log.file or str(settings.db_path.parent / "botstats.log")
    return Installation(command, config, str(workdir), str((workdir / log_file).absolute()), flags)


def _command(inst: Installation, *args: str) -> str:
    words = [inst.botstats] if " -m " in inst.botstats else [shlex.quote(inst.botstats)]
    if inst.config:
        words += ["--config", shlex.quote(inst.config)]
    words += [shlex.quote(f) for f in inst.flags]
    return " ".join([*words, *args])


def crontab_text(settings: Settings, inst: Installation) -> str:
    expr = settings.schedule.harvest or "0 * * * *"
    parse_crontab(expr, where="[schedule].harvest")
    run = _command(inst, "run")
    age = max_age_for(expr, settings.schedule.timezone, datetime.now(UTC))
    check = _command(inst, "status", "--max-age", age)
    workdir = shlex.quote(inst.workdir)
    return "\n".join([
        "# botstats: harvest, then trends, on [schedule].harvest. Install with `crontab -e`.",
        "# CRON_TZ is honoured by cronie (Fedora, RHEL, Arch); Debian's cron uses the system zone.",
        "# Exit codes: 0 complete, 3 partial, 1 failed, 4 interrupted, 75 another run active.",
        f"CRON_TZ={settings.schedule.timezone}",
        f"{expr} cd {workdir} && {run} >> {shlex.quote(inst.log_file)} 2>&1",
        "# Optional alert: prints (so cron mails it, with MAILTO set) only when no harvest has",
        f"# completed for twice the longest gap between runs ({age}).",
        f"# {expr} cd {workdir} && {check} > /dev/null",
        "",
    ])


def max_age_for(expr: str, timezone: str, now: datetime) -> str:
    """A `status --max-age` for a harvest on ``expr``: twice the longest gap between its runs
    over the next weeks (a weekday-only schedule has a weekend in it), in one unit."""
    fires = next_fire_times(cron_trigger(expr, timezone), 200, now)
    gaps = [b - a for a, b in zip(fires, fires[1:], strict=False)]
    minutes = math.ceil(2 * max(gaps, default=timedelta(hours=1)).total_seconds() / 60)
    for unit, size in (("d", 1440), ("h", 60)):
        if minutes % size == 0:
            return f"{minutes // size}{unit}"
    return f"{minutes}m"


def systemd_units(settings: Settings, inst: Installation) -> tuple[str, str]:
    """(botstats.service, botstats.timer) for `botstats run` on [schedule].harvest."""
    expr = settings.schedule.harvest or "0 * * * *"
    calendars = on_calendar(expr, settings.schedule.timezone, where="[schedule].harvest")
    service = "\n".join([
        "[Unit]",
        "Description=botstats: harvest the bot-listing service, then build trends",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=oneshot",
        f"WorkingDirectory={inst.workdir}",
        f"ExecStart={_command(inst, 'run')}",
        "# Secrets stay out of the unit: put BOTSTATS_USER_TOKEN=... in this file (mode 600).",
        f"EnvironmentFile=-{inst.workdir}/botstats.env",
        "# 3 = partial (retried next run), 75 = another run held the lock: not unit failures.",
        "SuccessExitStatus=3 75",
        "# SIGTERM: the harvest finishes its current batch and records the run as interrupted.",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=120",
        "",
    ])
    timer = "\n".join([
        "[Unit]",
        "Description=botstats: run on [schedule].harvest",
        "",
        "[Timer]",
        *(f"OnCalendar={c}" for c in calendars),
        "Persistent=true",
        *([f"RandomizedDelaySec={settings.schedule.jitter}"] if settings.schedule.jitter else []),
        "Unit=botstats.service",
        "",
        "[Install]",
        "WantedBy=timers.target",
        "",
    ])
    return service, timer


def cron_text(settings: Settings, config_file: str | None, flags: tuple[str, ...] = ()) -> str:
    """Everything `botstats cron` prints; ``flags`` (e.g. ``--db /abs/x.duckdb``) are passed on."""
    inst = this_installation(settings, config_file, flags)
    service, timer = systemd_units(settings, inst)
    return "\n".join([
        "# --- crontab ---------------------------------------------------------------",
        crontab_text(settings, inst),
        "# --- or systemd: /etc/systemd/system/botstats.service ----------------------",
        service,
        "# --- /etc/systemd/system/botstats.timer -------------------------------------",
        timer,
        "# then: systemctl daemon-reload && systemctl enable --now botstats.timer",
        "",
    ])


# --- the daemon ---------------------------------------------------------------------------------
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


def _default_jobs() -> dict[str, JobFn]:
    from . import runner

    return {"harvest": runner.harvest_job, "trends": runner.trends_job}


def build_scheduler(
    settings: Settings,
    stop: threading.Event,
    *,
    harvest_cron: str | None = None,
    trends_cron: str | None = None,
    jobs: dict[str, JobFn] | None = None,
    running: _Running | None = None,
) -> Any:
    """A BlockingScheduler with the harvest and trends jobs and the listeners that log them.

    ``harvest_cron``/``trends_cron`` override [schedule] (6 fields = seconds first); "" disables.
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
    jobs = jobs or _default_jobs()
    running = running or _Running()
    exprs = {
        "harvest": (sch.harvest if harvest_cron is None else harvest_cron,
                    "[schedule].harvest" if harvest_cron is None else "--harvest-cron"),
        "trends": (sch.trends if trends_cron is None else trends_cron,
                   "[schedule].trends" if trends_cron is None else "--trends-cron"),
    }
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


def run_scheduler(
    settings: Settings,
    *,
    harvest_cron: str | None = None,
    trends_cron: str | None = None,
    jobs: dict[str, JobFn] | None = None,
) -> int:
    """Run the daemon until SIGTERM/SIGINT; return the exit code (0 after a clean stop)."""
    # An archive path no job could write fails every job at every fire time: say so now.
    prepare_archive_place(settings)
    stop = threading.Event()
    running = _Running()
    scheduler = build_scheduler(settings, stop, harvest_cron=harvest_cron,
                                trends_cron=trends_cron, jobs=jobs, running=running)
    if not scheduler.get_jobs():
        raise ConfigError("nothing to schedule: [schedule].harvest and [schedule].trends are "
                          "both empty. Set at least one crontab expression.")
    received: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if received:
            return  # already stopping; a second Ctrl+C is handled by the default handler below
        received.append(name)
        stop.set()
        # A second signal kills us the usual way, for a job that will not finish.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        # wait=False: never block inside a signal handler; running jobs are awaited below.
        scheduler.shutdown(wait=False)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        log.info("scheduler started (pid %s); stop with SIGTERM or Ctrl+C", os.getpid(),
                 extra={"event": "scheduler_started"})
        scheduler.start()
        if running.count:
            log.info("%s received: waiting for the running job to finish its current batch",
                     received[0] if received else "stop")
        running.wait_idle()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("scheduler stopped%s", f" on {received[0]}" if received else "",
             extra={"event": "scheduler_stopped"})
    return 0


def describe_schedule(settings: Settings, *, harvest_cron: str | None = None,
                      trends_cron: str | None = None, count: int = 5,
                      now: datetime | None = None) -> list[tuple[str, str, list[datetime]]]:
    """(job, expression, next run times) for `botstats schedule --dry-run`."""
    sch = settings.schedule
    zone = ZoneInfo(sch.timezone)
    now = now or datetime.now(zone)
    out = []
    for name, expr, where in (
        ("harvest", sch.harvest if harvest_cron is None else harvest_cron, "[schedule].harvest"),
        ("trends", sch.trends if trends_cron is None else trends_cron, "[schedule].trends"),
    ):
        if not expr:
            out.append((name, "(disabled)", []))
            continue
        trigger = cron_trigger(expr, sch.timezone, where=where)
        out.append((name, expr, next_fire_times(trigger, count, now)))
    return out


__all__ = [
    "CronSpec",
    "crontab_weekdays",
    "cron_text",
    "cron_trigger",
    "describe_schedule",
    "next_fire_times",
    "on_calendar",
    "parse_crontab",
    "run_scheduler",
    "systemd_units",
]
