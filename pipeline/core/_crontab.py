"""Standard crontab expressions, parsed once into explicit value sets (:class:`CronSpec`) and
rendered from those sets for each consumer, because the consumers disagree with crontab:

- APScheduler numbers weekdays from 0 = Monday (crontab: 0 and 7 = Sunday, 1-5 = Mon-Fri), reads
  ``from_crontab`` in the local zone, and ANDs day-of-month with day-of-week where crontab ORs
  them when both are restricted. We give it weekday *names*, an explicit zone, and an
  ``OrTrigger`` for the OR case.
- systemd ``OnCalendar`` has its own syntax (``Mon..Fri *-*-* 09:00:00 UTC``) and also ANDs the
  two day fields: the OR case becomes two ``OnCalendar=`` lines.

Nothing of ours but the error tree (:mod:`._errors`) is imported here, so the config can validate its
crontab strings without importing the scheduler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from ._errors import ConfigError

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
