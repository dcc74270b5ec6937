"""Telling: after a run's own work is committed, read the facts and the ledger, decide, send,
and record what each destination answered. Also `botstats alerts test` and the ledger's
listing.

Telling never puts the run at risk: it starts after everything the run writes is committed,
its sending is bounded by ``[alerts].budget``, and whatever goes wrong in it (a destination
down, the ledger unwritable, a fault of ours) is logged and said in the run's summary, never
raised: the run's status and exit code are the run's own.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb

from .. import archive
from ..core import AlertSettings, BotstatsError, Destination, Settings, Shard, redact_url
from . import _alert as words
from . import _ledger as ledger
from ._alert import Alert, LockHolder, RunOutcome
from ._decide import Facts, Plan, decide
from ._facts import read_events, read_milestones, read_runs
from ._ledger import Entry, Spool
from ._messages import GROUPED, LABELS, Message, render
from ._send import Delivery, Sleep, send_all

log = logging.getLogger("botstats.alerts")


@dataclass
class AlertsReport:
    """What a run told: a ledger row per alert and destination (delivered, failed, given up),
    or why telling could not happen at all (``error``)."""

    entries: list[Entry] = field(default_factory=list)
    error: str = ""

    @property
    def delivered(self) -> list[Entry]:
        return [e for e in self.entries if e.delivered]

    @property
    def undelivered(self) -> list[Entry]:
        return [e for e in self.entries if e.outcome == "failed"]

    def summary(self) -> str:
        """One line for the run's summary ('' when there was nothing to tell)."""
        if self.error:
            return f"alerts: not sent: {self.error}"
        if not self.entries:
            return ""
        parts = []
        if self.delivered:
            parts.append("delivered " + _per_destination(self.delivered))
        if self.undelivered:
            reasons = {e.destination: e.answer for e in self.undelivered}
            parts.append("NOT delivered " + _per_destination(self.undelivered)
                         + " (" + "; ".join(f"{d}: {a}" for d, a in reasons.items()) + ")")
        given_up = [e for e in self.entries if e.outcome == "given_up"]
        if given_up:
            parts.append("given up " + _per_destination(given_up))
        return "alerts: " + "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        def row(e: Entry) -> dict[str, Any]:
            return {"destination": e.destination, "kind": e.alert.kind, "key": e.alert.key,
                    "title": e.alert.title, "tries": e.tries, "answer": e.answer}

        return {"delivered": [row(e) for e in self.delivered],
                "undelivered": [row(e) for e in self.undelivered],
                "given_up": [row(e) for e in self.entries if e.outcome == "given_up"],
                "error": self.error or None}


def _per_destination(entries: list[Entry]) -> str:
    counts: dict[str, dict[str, int]] = {}
    for e in entries:
        kinds = counts.setdefault(e.destination, {})
        kinds[e.alert.kind] = kinds.get(e.alert.kind, 0) + 1
    return ", ".join(f"to {d} ({', '.join(_count(k, n) for k, n in kinds.items())})"
                     for d, kinds in counts.items())


def _count(kind: str, n: int) -> str:
    """'run failed', 'resolved x2', '1 event', '3 events'."""
    label = LABELS.get(kind, kind)
    if kind in GROUPED:
        return f"{n} {label}{'s' if n > 1 else ''}"
    return f"{label} x{n}" if n > 1 else label


@dataclass(frozen=True)
class Clock:
    """The time telling goes by: the moment it reads (one for all it decides, says and
    records) and how it waits between tries. Tests fix the moment and record the waits."""

    now: datetime
    sleep: Sleep = time.sleep

    @classmethod
    def wall(cls) -> Clock:
        """The wall clock's time, now, and real waits."""
        return cls(datetime.now(UTC))


@dataclass(frozen=True)
class _Occasion:
    """What calls for telling: ``run``, the run that just ended (None for a trends build on its
    own, and for a run the lock kept out), the ``shard`` it is about, and the lock's ``holder``
    (known to a run it kept out). ``locked``: the caller holds the lock, so the exports are
    read and the ledger written (else the rows wait in the spool); ``conditions``: the runs'
    state is told (a trends build on its own tells what the exports hold, the harvests the
    rest)."""

    run: RunOutcome | None
    shard: Shard
    holder: LockHolder | None = None
    locked: bool = True
    conditions: bool = True


def notify_run(settings: Settings, config: AlertSettings, run: RunOutcome, *,
               clock: Clock | None = None) -> AlertsReport:
    """Tell what the run that just ended calls for. The caller holds the run lock and has
    committed the run's work; nothing is raised."""
    return _guarded(lambda: _tell(settings, config, _Occasion(run, run.shard), clock))


def notify_data(settings: Settings, config: AlertSettings, *,
                clock: Clock | None = None) -> AlertsReport:
    """Tell what the exports call for after a trends build on its own (`botstats trends`, the
    scheduler's trends job): their events and milestones (the harvests tell the runs' state).
    The caller holds the trends lock; nothing is raised."""
    return _guarded(lambda: _tell(settings, config, _Occasion(None, Shard(), conditions=False),
                                  clock))


def notify_blocked(settings: Settings, config: AlertSettings,
                   holder: LockHolder | None,
                   shard: Shard | None = None, *, clock: Clock | None = None) -> AlertsReport:
    """Tell what a run that could not get the lock sees: the lock held too long, the archive
    stale. It reads the archive but cannot write it: its rows go to the spool. Nothing is
    raised."""
    occasion = _Occasion(None, shard or Shard(), holder, locked=False)
    return _guarded(lambda: _tell(settings, config, occasion, clock))


def _guarded(tell: Callable[[], AlertsReport]) -> AlertsReport:
    try:
        return tell()
    except BotstatsError as exc:
        log.error("alerts not sent: %s", exc)
        return AlertsReport(error=str(exc))
    except Exception as exc:  # a fault of ours must not change the run's outcome either
        log.exception("alerts not sent: %s", exc)
        return AlertsReport(error=f"{type(exc).__name__}: {exc}")


@contextmanager
def _archive(settings: Settings, locked: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    with archive.writer(settings) if locked else archive.reader(settings) as con:
        yield con


def _tell(settings: Settings, config: AlertSettings, occasion: _Occasion,
          clock: Clock | None) -> AlertsReport:
    if not config.destinations:
        return AlertsReport()
    clock = clock or Clock.wall()
    now, run, locked = clock.now, occasion.run, occasion.locked
    spool = Spool(settings.lock_path)
    # One session for the reads, the sending and the writes: the run holds the lock meanwhile.
    with _archive(settings, locked) as con:
        memory = ledger.read(con, now)
        memory.add(spool.read())
        # The exports are the lock holder's to write meanwhile: only a run that holds it
        # reads them, and only for the kinds some destination takes.
        wanted = {k for d in config.destinations for k in d.kinds} if locked else set()
        facts = Facts(now, run, read_runs(con, run, occasion.shard), shard=occasion.shard,
                      holder=occasion.holder,
                      events=tuple(read_events(settings, config, now.date())
                                   if "event" in wanted else ()),
                      milestones=tuple(read_milestones(settings, config, now.date())
                                       if "milestone" in wanted else ()),
                      conditions=occasion.conditions)
        entries = _send(decide(facts, memory, config), config, place(settings), clock,
                        run.run_id if run else None)
        if locked:
            spool.drain(con, now)
            if entries:
                ledger.write(con, entries, now)
    if not locked and entries:
        spool.append(entries)
    report = AlertsReport(entries)
    _log(report)
    return report


def place(settings: Settings) -> str:
    """Where the alerts come from, for their footer: this host and the archive."""
    return f"botstats on {socket.gethostname()} · {redact_url(settings.archive_name)}"


def _send(plan: Plan, config: AlertSettings, where: str, clock: Clock,
          run_id: str | None) -> list[Entry]:
    by_name = {d.name: d for d in config.destinations}
    now = clock.now
    messages: dict[Destination, list[Message]] = {
        by_name[name]: render(by_name[name].type, alerts, where, now)
        for name, alerts in plan.sends.items() if alerts}
    deliveries = send_all(messages, budget=config.budget, timeout=config.timeout,
                          sleep=clock.sleep)
    entries = list(plan.given_up)
    for dest, msgs in messages.items():
        for message, delivery in zip(msgs, deliveries[dest.name], strict=True):
            entries += [_entry(alert, dest, delivery, now, run_id)
                        for alert in message.alerts]
    return entries


def _entry(alert: Alert, dest: Destination, delivery: Delivery, at: datetime,
           run_id: str | None) -> Entry:
    return Entry(alert, dest.name, "delivered" if delivery.delivered else "failed",
                 delivery.tries, delivery.answer, at, run_id)


def _log(report: AlertsReport) -> None:
    for e in report.delivered:
        log.info("alert %s delivered to %s: %s", e.alert.key, e.destination, e.alert.title)
    for e in report.undelivered:
        log.warning("alert %s NOT delivered to %s (%s); tried again next run", e.alert.key,
                    e.destination, e.answer)


@dataclass(frozen=True)
class TestResult:
    """What one destination answered `botstats alerts test`."""

    destination: Destination
    delivery: Delivery

    def line(self) -> str:
        verdict = "delivered" if self.delivery.delivered else "NOT delivered"
        return (f"{self.destination.name} ({self.destination.where()}): {verdict}: "
                f"{self.delivery.answer}")

    def as_dict(self) -> dict[str, Any]:
        return {"destination": self.destination.name, "where": self.destination.where(),
                "delivered": self.delivery.delivered, "tries": self.delivery.tries,
                "answer": self.delivery.answer}


def send_test(settings: Settings, config: AlertSettings, *,
              clock: Clock | None = None) -> list[TestResult]:
    """A sample alert to every destination (nothing is recorded); what each answered."""
    clock = clock or Clock.wall()
    now, where = clock.now, place(settings)
    messages = {d: render(d.type, [words.sample(d.name, now)], where, now)
                for d in config.destinations}
    deliveries = send_all(messages, budget=config.budget, timeout=config.timeout,
                          sleep=clock.sleep)
    return [TestResult(d, deliveries[d.name][0]) for d in config.destinations]


def ledger_rows(settings: Settings, *, limit: int = 50,
                undelivered: bool = False) -> list[ledger.Row]:
    """The ledger, newest first (``undelivered``: what the next runs try again)."""
    with archive.reader(settings) as con:
        return ledger.rows(con, limit=limit, undelivered=undelivered)


__all__ = ["AlertsReport", "Clock", "TestResult", "ledger_rows", "notify_blocked",
           "notify_run", "place", "send_test"]
