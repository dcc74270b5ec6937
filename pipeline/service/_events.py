"""Planted events: the unusual days of a bot's series, and the truth a detector is judged by.

With ``ServiceConfig.events`` above 0, a share of the bots get one to three events each, on UTC
days of the history: a viral **spike** (users jump two- to six-fold for a few days, guilds a
little, commands with them, cpu load rises), a **drop** (users and guilds fall for a day or
two), a **level_shift** (a step up or down that stays), an **outage** (no records for some days;
the bot restarts when it comes back) and a **counter_reset** (``commands_executed`` starts over).
As many bots again drift slowly (a ramp over weeks): a **drift** is served as truth too, with
``anomaly`` false, because a detector must *not* flag it.

Everything is a pure function of ``(seed, bot index, the bot's days)``, like the rest of the
data; an event's effect on a day is a set of multipliers (:func:`effect`), so the series' own
noise is the same with or without events. ``GET /_admin/events`` serves :func:`truth`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from random import Random
from typing import Any

KINDS = ("spike", "drop", "level_shift", "outage", "counter_reset")
KIND_WEIGHTS = (40, 10, 30, 12, 8)
DRIFT = "drift"
# Events start once the bot has three weeks of history (a detector needs a baseline first) and
# end before the history does (so each can be told apart from the next); 12 days apart.
SETTLE_DAYS = 21
END_MARGIN_DAYS = 4
APART_DAYS = 12


@dataclass(frozen=True)
class Event:
    """One planted event: from day ``first_day`` (days since the timeline's first UTC day) for
    ``days`` days; a level shift's or a drift's change stays after them."""

    kind: str
    first_day: int
    days: int
    users: float  # users multiplier at its height
    guilds: float
    cpu: float  # cpu load points added while it lasts (a level shift: from then on)

    @property
    def anomaly(self) -> bool:
        return self.kind != DRIFT


@dataclass(frozen=True)
class DayEffect:
    """What the events do to one day of the series."""

    users: float = 1.0
    guilds: float = 1.0
    cpu: float = 0.0
    silent: bool = False  # no record this day (an outage)
    restart: bool = False  # the command counter starts over this day


QUIET = DayEffect()


def plan(seed: int, index: int, first_day: int, last_day: int, share: float) -> tuple[Event, ...]:
    """The events of bot ``index`` whose records run from day ``first_day`` to ``last_day``."""
    if share <= 0:
        return ()
    rng = Random(f"{seed}:events:{index}")
    lo, hi = first_day + SETTLE_DAYS, last_day - END_MARGIN_DAYS
    events: list[Event] = []
    if rng.random() < share and hi - lo >= APART_DAYS:
        taken: list[int] = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            day = rng.randint(lo, hi)
            if any(abs(day - other) < APART_DAYS for other in taken):
                continue
            taken.append(day)
            events.append(_event(rng, rng.choices(KINDS, KIND_WEIGHTS)[0], day))
    if rng.random() < share and last_day - first_day > 2 * SETTLE_DAYS:
        factor = rng.uniform(1.25, 1.7) if rng.random() < 0.5 else rng.uniform(0.6, 0.8)
        start = rng.randint(first_day + 7, last_day - SETTLE_DAYS)
        events.append(Event(DRIFT, start, rng.randint(20, 40), factor, factor, 0.0))
    return tuple(sorted(events, key=lambda e: (e.first_day, e.kind)))


def _event(rng: Random, kind: str, day: int) -> Event:
    if kind == "spike":
        users = rng.uniform(2.0, 6.0)
        return Event(kind, day, rng.randint(1, 3), users, 1 + 0.15 * (users - 1),
                     rng.uniform(10, 25))
    if kind == "drop":
        factor = rng.uniform(0.25, 0.6)
        return Event(kind, day, rng.randint(1, 2), factor, factor, 0.0)
    if kind == "level_shift":
        factor = rng.uniform(1.3, 2.2) if rng.random() < 0.5 else rng.uniform(0.45, 0.77)
        return Event(kind, day, 1, factor, factor, 12 * math.log2(factor))
    if kind == "outage":
        return Event(kind, day, rng.randint(2, 6), 1.0, 1.0, 0.0)
    return Event(kind, day, 1, 1.0, 1.0, 0.0)


def effect(events: tuple[Event, ...], day: int) -> DayEffect:
    """What ``events`` do to day ``day``."""
    users = guilds = 1.0
    cpu = 0.0
    silent = restart = False
    for e in events:
        if day < e.first_day:
            continue
        during = day < e.first_day + e.days
        if e.kind == "level_shift":
            users, guilds, cpu = users * e.users, guilds * e.guilds, cpu + e.cpu
        elif e.kind == DRIFT:
            ramp = min(1.0, (day - e.first_day + 1) / e.days)
            users, guilds = users * e.users ** ramp, guilds * e.guilds ** ramp
        elif e.kind in ("spike", "drop") and during:
            users, guilds, cpu = users * e.users, guilds * e.guilds, cpu + e.cpu
        elif e.kind == "outage":
            silent = silent or during
            restart = restart or day == e.first_day + e.days
        elif e.kind == "counter_reset":
            restart = restart or day == e.first_day
    if not silent and not restart and users == guilds == 1.0 and cpu == 0.0:
        return QUIET
    return DayEffect(users, guilds, cpu, silent, restart)


def truth(bot_id: str, events: tuple[Event, ...], day0: date) -> list[dict[str, Any]]:
    """The events as ``GET /_admin/events`` serves them: UTC dates, factors, and whether it is
    an anomaly (a drift is not). A level shift has no last day: it stays."""
    out = []
    for e in events:
        first = day0 + timedelta(days=e.first_day)
        last = None if e.kind == "level_shift" else first + timedelta(days=e.days - 1)
        out.append({
            "bot_id": bot_id, "kind": e.kind, "first_day": first.isoformat(),
            "last_day": last.isoformat() if last else None, "days": e.days,
            "users_factor": round(e.users, 4), "guilds_factor": round(e.guilds, 4),
            "cpu_points": round(e.cpu, 2), "anomaly": e.anomaly,
        })
    return out
