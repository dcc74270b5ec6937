"""Planted events: the unusual days of a bot's series, and the truth a detector is judged by.

With ``ServiceConfig.events`` above 0, a share of the bots get one to three events each, on UTC
days of the history from the bot's second day on: a viral **spike** (users jump two- to
six-fold for a few days, guilds a little, commands with them, cpu load rises), a **drop**
(users and guilds fall for a day or two), a **level_shift** (a step up or down that stays), an
**outage** (no records for some days; the bot restarts when it comes back) and a
**counter_reset** (``commands_executed`` starts over). A share of the spikes, drops and level
shifts are **near the floor**: their size is 1 to 1.5 times the smallest change botstats'
detector can report on that bot that day with its default settings (see :func:`floor`), the
bot's size being what its earlier level shifts and drift left it at (:func:`moved`); the
others are at least 1.5 times it, and a bot too small for any sensible change to pass its floor
(a bot of one or two guilds) gets none: a detector must not see those. As
many bots again drift slowly (a ramp over weeks): a **drift** is served as truth too, with
``anomaly`` false, because a detector must *not* flag it.

The series keep their own routine life beside the planted events: a spiky bot's random spikes
and every bot's random restarts (its command counter starting over) go on. They are drawn from
``(seed, bot index, day or slot)`` rather than from the series' random stream, so the truth
lists them (``routine_spike``, ``routine_restart``, ``anomaly`` false) without making a
record; they are real moves of the data, not planted events.

Everything is a pure function of ``(seed, bot index, the bot's days)``, like the rest of the
data; an event's effect on a day is a set of multipliers (:func:`effect`), so the series' own
noise is the same with or without events. ``GET /_admin/events`` serves :func:`truth`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from random import Random
from typing import Any, NamedTuple

KINDS = ("spike", "drop", "level_shift", "outage", "counter_reset")
KIND_WEIGHTS = (40, 10, 30, 12, 8)
DRIFT = "drift"
ROUTINE_SPIKE = "routine_spike"
ROUTINE_RESTART = "routine_restart"
# Events start on a bot's second day (a detector has one day to judge it by) and end before
# the history does (so each can be told apart from the next); 12 days apart. Drifts start a
# week in and ramp over three weeks or more.
FIRST_DAY = 1
END_MARGIN_DAYS = 4
APART_DAYS = 12
SETTLE_DAYS = 21
# A share of the spikes, drops and level shifts are near the floor: 1 to NEAR_FLOOR_MAX times
# the smallest change the detector reports on the bot (its defaults: [trends].anomaly_min_pct,
# anomaly_min_users and anomaly_threshold usual spreads; a step that holds 4 days is judged
# on their mean, so half as many spreads).
NEAR_FLOOR_SHARE = 0.3
NEAR_FLOOR_MAX = 1.5
MAX_FACTOR = 6.0  # a bot too small for a change of this size to pass its floor gets no event
FLOOR_PCT = 20.0
FLOOR_USERS = 100.0
FLOOR_SPREADS = 5.0
HOLD_SPREADS = FLOOR_SPREADS / 2
LEVEL_DAYS = 7  # the detector's usual level is the median of this many days before


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
    near_floor: bool = False

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


@dataclass(frozen=True)
class Scale:
    """What the floors of an event depend on, on one day: the bot's expected guilds and users
    and one day's noise of log users (a standard deviation)."""

    guilds: float
    users: float
    noise: float


def floor(kind: str, up: bool, scale: Scale) -> float | None:
    """The smallest change (a log ratio, > 0) botstats' detector, with its default settings,
    reports as an event of ``kind`` on a bot of ``scale``: past the relative floor, the
    absolute floor in users, and the threshold of usual spreads (the spread of a day's
    distance from the median of the days before, never less than one guild: users come in
    guild-sized lumps). None when no change down can pass the absolute floor."""
    pct = FLOOR_PCT / 100
    share = FLOOR_USERS / max(scale.users, 1.0)
    if up:
        relative, absolute = math.log1p(pct), math.log1p(share)
    else:
        if share >= 1:
            return None
        relative, absolute = -math.log1p(-pct), -math.log1p(-share)
    spreads = HOLD_SPREADS if kind == "level_shift" else FLOOR_SPREADS
    # The detector's usual spread is that of a day's distance from the median of the 7 days
    # before, which is noisier than the day by that median's own noise.
    spread = scale.noise * math.sqrt(1 + math.pi / (2 * LEVEL_DAYS))
    return max(relative, absolute, spreads * max(spread, 1 / max(scale.guilds, 1.0)))


class Days(NamedTuple):
    """The UTC days a bot's records run on, ``first`` to ``last`` (days since the timeline's
    first UTC day)."""

    first: int
    last: int


def plan(seed: int, index: int, days: Days, share: float,
         scale: Callable[[int], Scale] | None = None) -> tuple[Event, ...]:
    """The events of bot ``index`` whose records run on ``days``; ``scale`` gives the bot's
    size on a day, for the floors (without it, none is minded). Each event is sized, in day
    order, against the bot as the events before it left it (a level shift or a drift moves the
    floors of the events after it: :func:`moved`)."""
    if share <= 0:
        return ()
    first_day, last_day = days
    rng = Random(f"{seed}:events:{index}")
    lo, hi = first_day + FIRST_DAY, last_day - END_MARGIN_DAYS
    drawn: list[_Draw] = []
    if rng.random() < share and hi - lo >= APART_DAYS:
        for _ in range(rng.choice((1, 1, 2, 3))):
            day = rng.randint(lo, hi)
            if any(abs(day - other.day) < APART_DAYS for other in drawn):
                continue
            near = rng.random() < NEAR_FLOOR_SHARE
            drawn.append(_draw(rng, rng.choices(KINDS, KIND_WEIGHTS)[0], day, near))
    events: list[Event] = []
    if rng.random() < share and last_day - first_day > 2 * SETTLE_DAYS:
        factor = rng.uniform(1.25, 1.7) if rng.random() < 0.5 else rng.uniform(0.6, 0.8)
        start = rng.randint(first_day + 7, last_day - SETTLE_DAYS)
        events.append(Event(DRIFT, start, rng.randint(20, 40), factor, factor, 0.0))
    for d in sorted(drawn, key=lambda d: d.day):
        event = _event(d, None if scale is None else moved(scale(d.day), tuple(events), d.day))
        if event is not None:
            events.append(event)
    return tuple(sorted(events, key=lambda e: (e.first_day, e.kind)))


def moved(scale: Scale, events: tuple[Event, ...], day: int) -> Scale:
    """The bot of ``scale`` on ``day`` as ``events`` (those before it) left it."""
    now = effect(events, day)
    return Scale(scale.guilds * now.guilds, scale.users * now.users, scale.noise)


@dataclass(frozen=True)
class _Draw:
    """What an event draws from the bot's stream, before its size is set against the floor."""

    kind: str
    day: int
    near: bool
    factor: float = 1.0
    days: int = 1
    cpu: float = 0.0
    draw: float = 1.0  # where in the near-floor band (1 to NEAR_FLOOR_MAX)


def _draw(rng: Random, kind: str, day: int, near: bool) -> _Draw:
    if kind == "spike":
        factor, days, cpu = rng.uniform(2.0, 6.0), rng.randint(1, 3), rng.uniform(10, 25)
        return _Draw(kind, day, near, factor, days, cpu, rng.uniform(1.0, NEAR_FLOOR_MAX))
    if kind == "drop":
        factor, days = rng.uniform(0.25, 0.6), rng.randint(1, 2)
        return _Draw(kind, day, near, factor, days, draw=rng.uniform(1.0, NEAR_FLOOR_MAX))
    if kind == "level_shift":
        factor = rng.uniform(1.3, 2.2) if rng.random() < 0.5 else rng.uniform(0.45, 0.77)
        return _Draw(kind, day, near, factor, draw=rng.uniform(1.0, NEAR_FLOOR_MAX))
    if kind == "outage":
        return _Draw(kind, day, near, days=rng.randint(2, 6))
    return _Draw(kind, day, near)


def _event(d: _Draw, scale: Scale | None) -> Event | None:
    """The event ``d`` drew, on a bot of ``scale``: near its floor (1 to NEAR_FLOOR_MAX times
    it) when ``d.near``, else of its drawn size but never nearer the floor than that. None when
    no change of a sensible size (at most MAX_FACTOR) passes the floor: a detector must not see
    those."""
    if d.kind in ("outage", "counter_reset"):
        return Event(d.kind, d.day, d.days, 1.0, 1.0, 0.0)
    users = _sized(d, scale)
    if users is None:
        return None
    if d.kind == "spike":
        return Event(d.kind, d.day, d.days, users, 1 + 0.15 * (users - 1), d.cpu, d.near)
    if d.kind == "drop":
        return Event(d.kind, d.day, d.days, users, users, 0.0, d.near)
    return Event(d.kind, d.day, 1, users, users, 12 * math.log2(users), d.near)


def _sized(d: _Draw, scale: Scale | None) -> float | None:
    """``d.factor`` (a multiplier of users) against the floor of a bot of ``scale``: 1 to
    NEAR_FLOOR_MAX times the floor away from 1 when near, else at least NEAR_FLOOR_MAX times
    it; None when that is beyond MAX_FACTOR either way."""
    if scale is None:
        return d.factor
    up = d.factor > 1
    least = floor(d.kind, up, scale)
    if least is None or least * NEAR_FLOOR_MAX > math.log(MAX_FACTOR):
        return None
    size = least * d.draw if d.near else max(abs(math.log(d.factor)), least * NEAR_FLOOR_MAX)
    return math.exp(size if up else -size)


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


@dataclass(frozen=True)
class Routine:
    """A routine day of a bot's own life: a spike of a spiky bot (``factor``), or a restart."""

    kind: str  # ROUTINE_SPIKE or ROUTINE_RESTART
    day: int
    factor: float = 1.0


def truth(bot_id: str, events: tuple[Event, ...], day0: date,
          routine: tuple[Routine, ...] = ()) -> list[dict[str, Any]]:
    """The events as ``GET /_admin/events`` serves them: UTC dates, factors, whether it is an
    anomaly (a drift and the routine days are not) and near the floor. A level shift has no
    last day: it stays. The routine days follow the events."""
    out = []
    for e in events:
        first = day0 + timedelta(days=e.first_day)
        last = None if e.kind == "level_shift" else first + timedelta(days=e.days - 1)
        out.append({
            "bot_id": bot_id, "kind": e.kind, "first_day": first.isoformat(),
            "last_day": last.isoformat() if last else None, "days": e.days,
            "users_factor": round(e.users, 4), "guilds_factor": round(e.guilds, 4),
            "cpu_points": round(e.cpu, 2), "anomaly": e.anomaly, "near_floor": e.near_floor,
        })
    for r in routine:
        day = (day0 + timedelta(days=r.day)).isoformat()
        out.append({
            "bot_id": bot_id, "kind": r.kind, "first_day": day, "last_day": day, "days": 1,
            "users_factor": round(r.factor, 4), "guilds_factor": round(r.factor, 4),
            "cpu_points": 15.0 if r.kind == ROUTINE_SPIKE else 0.0, "anomaly": False,
            "near_floor": False,
        })
    return out
