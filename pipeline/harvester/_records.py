"""Validation of the records the service sends: turn raw JSON into archive rows, or a reason.

The interface leaves record fields open, so field names come from ``[fields]`` in config, and
no type is trusted: a count may arrive as a string, a timestamp as epoch seconds. What cannot be
read honestly is not guessed: it becomes a reject with a reason, kept in the ``rejects`` table.
These functions are pure, so every rule is a unit test.

A whole ``/stats`` page as received goes through :func:`parse_stats_raw`: a page whose records
all have the usual shape is decoded by msgspec straight into typed records (types and ranges
checked in C) and turned into columns; any page with anything unusual goes record by record
through :func:`parse_stat`, which words the reasons. Both give the same rows, so the rules live
in one place.
"""

from __future__ import annotations

import email.utils
import functools
import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..archive import BotRow
from ..core import FieldSettings, canonical_json, parse_duration

COUNT_FIELDS = ("users", "guilds", "shards", "commands_executed")
REQUIRED_COUNTS = ("users", "guilds")  # required by the creation payload
PERCENT_FIELDS = ("memory_load", "cpu_load")
MAX_RAW_CHARS = 1_000_000
MAX_COUNT = 2**63 - 1  # counts are BIGINT in the archive (and in the interface)
INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1  # what orjson reads as an integer
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_US = timedelta(microseconds=1)


class Invalid(ValueError):
    """A record that cannot be archived; the message is the reason kept in `rejects`."""


@dataclass(frozen=True, slots=True)
class StatRow:
    stat_id: str
    recorded_at: datetime
    users: int
    guilds: int
    shards: int | None
    memory_load: float | None
    cpu_load: float | None
    commands_executed: int | None
    raw: str
    custom: tuple[tuple[str, str | None, float | None], ...]  # (name, value_text, value_num)


def _ident(value: Any, what: str) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, float | dict | list):
        raise Invalid(f"{what} must be a string or integer, got {_show(value)}")
    text = str(value).strip()
    if not text:
        raise Invalid(f"{what} is empty")
    return text


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_time(value: Any, what: str = "timestamp") -> datetime:
    """A time as services send one, to an aware UTC datetime: ISO 8601 (naive means UTC), epoch
    seconds, milliseconds, microseconds or nanoseconds (told apart by size: every one of them
    is a date between 1973 and 5138 in exactly one unit), as a number or as numeric text, or an
    RFC 2822 / HTTP date."""
    if isinstance(value, bool) or value is None:
        raise Invalid(f"{what} is missing" if value is None else f"{what} is not a time: {value}")
    if isinstance(value, int | float):
        return _epoch(value, what)
    if isinstance(value, str):
        text = value.strip()
        if _EPOCH_TEXT.match(text):
            return _epoch(float(text) if "." in text else int(text), what)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            dated = _rfc2822(text)
            if dated is None:
                raise Invalid(f"{what} is not an ISO 8601 time: {_show(value)}") from None
            parsed = dated
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    raise Invalid(f"{what} is not a time: {_show(value)}")


# Epoch numbers from 1e8 up in text ("1732560000", "1732560000123.5"); shorter digit strings
# are left to ISO 8601 (e.g. "20241125", a basic-format date).
_EPOCH_TEXT = re.compile(r"^-?\d{9,}(\.\d+)?$")
# Units per second of each epoch unit, by the size where it starts (1e11 seconds is year 5138).
_EPOCH_UNITS = ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3), (0.0, 1.0))


def _epoch(value: int | float, what: str) -> datetime:
    if not math.isfinite(value):
        raise Invalid(f"{what} is not a time: {value}")
    per_second = next(units for size, units in _EPOCH_UNITS if abs(value) >= size)
    try:
        if isinstance(value, int):  # exact to the microsecond, even in nanoseconds
            return EPOCH + timedelta(microseconds=value * 1_000_000 // int(per_second))
        return datetime.fromtimestamp(value / per_second, UTC)
    except (OverflowError, OSError, ValueError):
        raise Invalid(f"{what} is out of range: {value}") from None


def _rfc2822(text: str) -> datetime | None:
    """'Tue, 15 Nov 1994 08:12:31 GMT' (HTTP dates and e-mail dates), or None."""
    if not text[:1].isalpha():
        return None
    try:
        return email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None


def parse_count(value: Any, name: str) -> int:
    """A non-negative whole number; integral floats and numeric strings are accepted."""
    number = _number(value, name)
    if number != int(number):
        raise Invalid(f"{name} must be a whole number, got {_show(value)}")
    if number < 0:
        raise Invalid(f"{name} must not be negative, got {_show(value)}")
    if number > MAX_COUNT:
        raise Invalid(f"{name} is larger than the archive holds (2^63-1), got {_show(value)}")
    return int(number)


def parse_percent(value: Any, name: str) -> float:
    number = _number(value, name)
    if not 0 <= number <= 100:
        raise Invalid(f"{name} must be a percentage from 0 to 100, got {_show(value)}")
    return float(number)


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool):
        raise Invalid(f"{name} must be a number, got {_show(value)}")
    if isinstance(value, int | float):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise Invalid(f"{name} must be a number, got {_show(value)}") from None
    else:
        raise Invalid(f"{name} must be a number, got {_show(value)}")
    if not math.isfinite(number):
        raise Invalid(f"{name} must be a finite number, got {_show(value)}")
    return number


def stat_key(record: Any, bot_id: str, fields: FieldSettings) -> str:
    """The archive key of a stat: the service's id, or sha1(bot_id, timestamp) when it has none."""
    if not isinstance(record, dict):
        raise Invalid(f"a stat record must be a JSON object, got {_show(record)}")
    if fields.stat_id:
        if fields.stat_id not in record:
            raise Invalid(f"missing id field '{fields.stat_id}'")
        return _ident(record[fields.stat_id], f"id field '{fields.stat_id}'")
    if fields.stat_time not in record:
        raise Invalid(f"missing timestamp field '{fields.stat_time}'")
    when = parse_time(record[fields.stat_time], f"timestamp field '{fields.stat_time}'")
    return hashlib.sha1(f"{bot_id}\x1f{when.isoformat()}".encode()).hexdigest()


def latest_allowed(fields: FieldSettings, received_at: datetime | None = None) -> datetime:
    """The latest time a record received at ``received_at`` (default now) may carry:
    ``[fields].max_future_skew`` after it."""
    return (received_at or datetime.now(UTC)) + _skew(fields.max_future_skew)


@functools.cache
def _skew(text: str) -> timedelta:
    return parse_duration(text)


def parse_stat(record: Any, bot_id: str, fields: FieldSettings, *,
               raw: str | None = None, latest: datetime | None = None) -> StatRow:
    """Validate one stat record; raise :class:`Invalid` with the reason. ``raw`` is the record's
    JSON text as received, kept as is (else its canonical JSON is). ``latest`` is the latest
    time a record may carry (:func:`latest_allowed`, the default)."""
    key = stat_key(record, bot_id, fields)
    if fields.stat_time not in record:
        raise Invalid(f"missing timestamp field '{fields.stat_time}'")
    recorded_at = parse_time(record[fields.stat_time], f"timestamp field '{fields.stat_time}'")
    if recorded_at > (latest or latest_allowed(fields)):
        # No receipt time in the reason: the same record refused again is the same reject.
        raise Invalid(f"timestamp field '{fields.stat_time}' is {recorded_at.isoformat()}, more "
                      f"than [fields].max_future_skew ({fields.max_future_skew}) after botstats "
                      f"received it: the service's clock runs ahead. Each run reads it again and "
                      f"archives it once that time is no longer ahead")
    for name in REQUIRED_COUNTS:
        if record.get(name) is None:
            raise Invalid(f"missing required field '{name}'")
    counts = {n: None if record.get(n) is None else parse_count(record[n], n) for n in COUNT_FIELDS}
    percents = {
        n: None if record.get(n) is None else parse_percent(record[n], n) for n in PERCENT_FIELDS
    }
    users, guilds = counts["users"], counts["guilds"]
    assert users is not None and guilds is not None  # REQUIRED_COUNTS, checked above
    return StatRow(
        stat_id=key,
        recorded_at=recorded_at,
        users=users,
        guilds=guilds,
        shards=counts["shards"],
        memory_load=percents["memory_load"],
        cpu_load=percents["cpu_load"],
        commands_executed=counts["commands_executed"],
        raw=canonical_json(record) if raw is None else raw,
        custom=parse_custom(record.get("custom"), fields),
    )


def parse_custom(value: Any, fields: FieldSettings) -> tuple[tuple[str, str | None, float | None], ...]:
    """Custom fields as (name, text, number); text is kept for every value, number when numeric.
    They come as a list of objects keyed by ``[fields].custom_name`` and ``custom_value``, or as
    one object of name -> value."""
    if value is None:
        return ()
    if isinstance(value, dict):
        pairs = [(_ident(name, "custom field name"), raw) for name, raw in value.items()]
    elif isinstance(value, list):
        pairs = []
        for item in value:
            if not isinstance(item, dict) or fields.custom_name not in item:
                raise Invalid(f"custom field without '{fields.custom_name}': {_show(item)}")
            if fields.custom_value not in item and len(item) > 1:
                # Something else holds its value: a value taken as missing would be wrong.
                raise Invalid(f"custom field without '{fields.custom_value}': {_show(item)}")
            pairs.append((_ident(item[fields.custom_name], f"custom field '{fields.custom_name}'"),
                          item.get(fields.custom_value)))
    else:
        raise Invalid(f"custom must be a list or an object, got {_show(value)}")
    # A repeated name: the last one wins.
    return tuple({name: (name, *_custom_value(raw)) for name, raw in pairs}.values())


def _custom_value(value: Any) -> tuple[str | None, float | None]:
    if value is None:
        return None, None
    if isinstance(value, bool):
        return ("true" if value else "false"), float(value)
    if isinstance(value, int | float):
        return canonical_json(value), _finite(value)
    if isinstance(value, str):
        return value, None
    return canonical_json(value), None


def _finite(value: int | float) -> float | None:
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float: kept as text only
        return None
    return number if math.isfinite(number) else None


# _custom_value by exact type, for the typed page path (which admits only these types).
_CUSTOM_TEXT: dict[type, Callable[[Any], str | None]] = {
    str: lambda v: v, type(None): lambda v: None, bool: lambda v: "true" if v else "false",
    int: str, float: canonical_json,
}
_CUSTOM_NUM: dict[type, Callable[[Any], float | None]] = {
    str: lambda v: None, type(None): lambda v: None, bool: float, int: _finite, float: _finite,
}


def parse_bot(record: Any, fields: FieldSettings) -> BotRow:
    if not isinstance(record, dict):
        raise Invalid(f"a bot record must be a JSON object, got {_show(record)}")
    if fields.bot_id not in record:
        raise Invalid(f"missing bot id field '{fields.bot_id}'")
    bot_id = _ident(record[fields.bot_id], f"bot id field '{fields.bot_id}'")
    name = record.get(fields.bot_name)
    return BotRow(bot_id=bot_id, name=None if name is None else str(name), raw=canonical_json(record))


def raw_text(value: Any) -> str:
    """What a reject keeps of a payload: its JSON, or the text as received, truncated."""
    text = value if isinstance(value, str) else canonical_json(value)
    return text[:MAX_RAW_CHARS]


def entity_id(record: Any, field: str, what: str) -> str:
    """The id of a user, server or webhook record (for the snapshot tables); ``what`` names the
    record ("user", "server", ...) in the reason, worded as :func:`parse_bot` words its own."""
    if not isinstance(record, dict):
        raise Invalid(f"a {what} record must be a JSON object, got {_show(record)}")
    if field not in record:
        raise Invalid(f"missing {what} id field '{field}'")
    return _ident(record[field], f"{what} id field '{field}'")
