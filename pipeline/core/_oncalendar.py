"""Crontab expressions as systemd OnCalendar= lines, for the timer botstats deploy writes."""

from __future__ import annotations

from ._crontab import parse_crontab


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
