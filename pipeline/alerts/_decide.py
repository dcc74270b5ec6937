"""What to tell, whom, and when: a pure function of the facts of one run and the ledger's
memory, no I/O (tested on values in memory).

For each destination and each alert of a kind it receives:

- never tried there: tell it;
- tried, never delivered: tell it again, until ``[alerts].give_up_after`` after the first try,
  then record it given up (once; a condition that goes on is tried once a
  ``[alerts].repeat_interval`` after that);
- delivered: a condition that goes on (failed, partial, lock, stale) is told again, as a
  reminder, once ``[alerts].repeat_interval`` has passed since it was last delivered there;
  anything else never again.

A destination told of failing runs is not told the archive is stale besides (the failure's
alert says since when runs have not completed): stale is for runs that do not fail yet do not
complete (interrupted, kept out by the lock), and for destinations that do not take failures.

A complete run ends every condition: each destination told of one (and not yet of its end)
is told "resolved", with how long it was out. A resolved alert that was not delivered is tried
again as it was first said (from the ledger), by any later run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..core import AlertSettings, Destination, Shard, parse_duration
from . import _alert as words
from ._alert import Alert, LockHolder, RunOutcome, Runs
from ._ledger import Entry, Memory


@dataclass(frozen=True)
class Facts:
    """What one run knows when it decides: how it ended (None for a run that never got the
    lock), the shard it harvests, the shard's runs, the lock's holder (only a run the lock kept
    out knows it), and the events and milestones of the exports. ``conditions`` is False for a
    trends build on its own: it tells what the exports hold, and the harvests tell the rest."""

    now: datetime
    run: RunOutcome | None
    runs: Runs
    shard: Shard = field(default_factory=Shard)
    holder: LockHolder | None = None
    events: tuple[Alert, ...] = ()
    milestones: tuple[Alert, ...] = ()
    conditions: bool = True


@dataclass
class Plan:
    """The alerts to send to each destination, in order, and the rows to record without
    sending (alerts given up)."""

    sends: dict[str, list[Alert]] = field(default_factory=dict)
    given_up: list[Entry] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not any(self.sends.values()) and not self.given_up


def _duration(text: str) -> timedelta | None:
    """A duration setting; None when it is "" (off)."""
    return parse_duration(text) if text else None


def conditions(facts: Facts, config: AlertSettings) -> list[Alert]:
    """The conditions that hold now: the run failed or partial, the archive stale, the lock
    held too long."""
    out: list[Alert] = []
    if not facts.conditions:
        return out
    run, runs, now = facts.run, facts.runs, facts.now
    if run is not None and run.status in ("failed", "partial") and run.run_id:
        first_id, began = runs.first_failing or (run.run_id, run.started_at or now)
        out.append(words.failure(run, began, first_id, max(runs.failing_runs, 1), now))
    stale_after = _duration(config.stale_after)
    if stale_after is not None and (run is None or run.status != "complete"):
        shard = run.shard if run is not None else facts.shard
        since = runs.last_complete[1] if runs.last_complete else runs.first_run_at
        if since is not None and now - since >= stale_after:
            out.append(words.stale(shard, runs, since, stale_after, now))
    lock_after = _duration(config.lock_after)
    if facts.holder is not None and lock_after is not None \
            and now - facts.holder.since >= lock_after:
        out.append(words.lock(facts.holder, lock_after, now))
    return out


def decide(facts: Facts, memory: Memory, config: AlertSettings) -> Plan:
    """The plan of one run: what each destination is told (see the module's docstring)."""
    now = facts.now
    repeat = _duration(config.repeat_interval) or timedelta(0)
    give_up = _duration(config.give_up_after) or timedelta(0)
    candidates = [*conditions(facts, config), *facts.events, *facts.milestones]
    plan = Plan()
    run = facts.run
    failing = run.status if run is not None and run.status in ("failed", "partial") else ""
    for dest in config.destinations:
        # A destination told of the failing runs needs no stale alert besides: the failure's
        # own alert says since when runs have not completed.
        inhibited = {"stale"} if failing and dest.takes(failing) else set()
        sends: list[Alert] = []
        for alert in [*_resolutions(facts, memory, dest), *candidates]:
            if not dest.takes(alert.kind) or alert.kind in inhibited:
                continue
            track = memory.track(alert.key, dest.name)
            if track is None:
                sends.append(alert)
            elif track.last_delivered is None:
                if track.latest.outcome == "given_up":
                    # A condition that goes on is tried again once a repeat_interval after.
                    if alert.repeats and now - track.latest.tried_at >= repeat:
                        sends.append(alert)
                    continue
                if now - track.first_try >= give_up:
                    plan.given_up.append(_given_up(alert, dest, now, facts, track.first_try))
                else:
                    sends.append(alert)
            elif alert.repeats and now - track.last_delivered >= repeat:
                sends.append(words.as_reminder(alert))
        if sends:
            plan.sends[dest.name] = _in_order(sends)
    return plan


def _resolutions(facts: Facts, memory: Memory, dest: Destination) -> list[Alert]:
    """Resolved alerts for ``dest``: those said before and not delivered (as first said), and
    new ones when the run is complete."""
    if not dest.takes("resolved"):
        return []
    said = {e.alert.key: e.alert for e in memory.entries
            if e.alert.kind == "resolved" and e.destination == dest.name}
    out = [alert for key, alert in said.items()
           if (track := memory.track(key, dest.name)) and track.last_delivered is None]
    run = facts.run
    if run is not None and run.status == "complete":
        shard = "" if run.shard.whole else str(run.shard)
        out += [words.resolved(told, run.run_id, facts.now)
                for told in memory.unresolved(dest.name, shard)]
    return out


def _given_up(alert: Alert, dest: Destination, now: datetime, facts: Facts,
              first: datetime) -> Entry:
    return Entry(alert, dest.name, "given_up", 0,
                 f"not delivered since {words.stamp(first)}: given up after "
                 f"[alerts].give_up_after", now, facts.run.run_id if facts.run else None)


def _in_order(alerts: list[Alert]) -> list[Alert]:
    """Conditions first, then what ended, events and milestones; each kind in the order found."""
    order = {kind: i for i, kind in enumerate(("failed", "partial", "lock", "stale", "resolved",
                                               "event", "milestone"))}
    return sorted(alerts, key=lambda a: order.get(a.kind, len(order)))
