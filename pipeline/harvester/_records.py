"""Validation of the records the service sends: turn raw JSON into archive rows, or a reason;
and a whole /stats page validated at once.

The interface leaves record fields open, so field names come from ``[fields]`` in config, and
no type is trusted: a count may arrive as a string, a timestamp as epoch seconds. What cannot be
read honestly is not guessed: it becomes a reject with a reason, kept in the ``rejects`` table.
These functions are pure, so every rule is a unit test.

A whole ``/stats`` page as received goes through :func:`parse_stats_raw`: a page whose records
all have the usual shape is decoded by msgspec straight into typed records (types and ranges
checked in C) and turned into columns; any page with anything unusual goes record by record
through :func:`parse_stat`, which words the reasons. Both give the same rows, so the rules live
in one place."""

from __future__ import annotations

import email.utils
import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, NamedTuple

import msgspec
from msgspec.structs import astuple

from ..archive import BotRow
from ..core import FieldSettings, canonical_json, decode_json, parse_duration

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
        if EPOCH_TEXT.match(text):
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
# are left to ISO 8601 (e.g. "20241125", a basic-format date). The one rule: the probe's guess
# of a time field (_shapes.time_kind) reads text with it too.
EPOCH_TEXT = re.compile(r"^-?\d{9,}(\.\d+)?$")
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
    """The archive key of a stat, as ``[fields].stat_key`` says (:attr:`FieldSettings.stat_keying`):
    the service's id; or, when it gives none, a hash of the bot and the record's time ("time"),
    of the values of ``stat_key_fields`` ("fields"; one a record lacks counts as null, the time
    field as the instant it names) or of the record's canonical JSON ("content")."""
    if not isinstance(record, dict):
        raise Invalid(f"a stat record must be a JSON object, got {_show(record)}")
    keying = fields.stat_keying
    if keying == "id":
        if fields.stat_id not in record:
            raise Invalid(f"missing id field '{fields.stat_id}'")
        return _ident(record[fields.stat_id], f"id field '{fields.stat_id}'")
    if keying == "content":
        return hashed_key(bot_id, canonical_json(record))
    return hashed_key(bot_id, *(_key_part(record, name, fields) for name in key_fields(fields)))


def key_fields(fields: FieldSettings) -> tuple[str, ...]:
    """The fields whose values make a stat's key when it is derived from fields ("time" is
    the time field alone)."""
    return fields.stat_key_fields if fields.stat_keying == "fields" else (fields.stat_time,)


def hashed_key(bot_id: str, *parts: str) -> str:
    """sha1 of the bot and the parts (the key of a record without an id): sha1(bot id, time)
    for a record keyed by its time, as botstats has always keyed them."""
    return hashlib.sha1("\x1f".join((bot_id, *parts)).encode()).hexdigest()


def _key_part(record: dict[str, Any], name: str, fields: FieldSettings) -> str:
    if name == fields.stat_time:
        if name not in record:
            raise Invalid(f"missing timestamp field '{name}'")
        return parse_time(record[name], f"timestamp field '{name}'").isoformat()
    return canonical_json(record.get(name))


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


_ROW_COLUMNS = ("stat_id", "recorded_at", *COUNT_FIELDS, *PERCENT_FIELDS, "raw")


@dataclass(slots=True)
class StatPage:
    """The rows of one ``/stats`` page, column-wise (what the batch writer extends), and its
    rejects. ``recorded_at`` is in microseconds since the epoch: polars builds a column from ints
    far faster than from datetime objects (bench/README.md)."""

    stat_id: list[str] = field(default_factory=list)
    recorded_at: list[int] = field(default_factory=list)
    users: list[int] = field(default_factory=list)
    guilds: list[int] = field(default_factory=list)
    shards: list[int | None] = field(default_factory=list)
    memory_load: list[float | None] = field(default_factory=list)
    cpu_load: list[float | None] = field(default_factory=list)
    commands_executed: list[int | None] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    # one row per custom field: the position of its record in the columns above, name, values
    custom_row: list[int] = field(default_factory=list)
    custom_name: list[str] = field(default_factory=list)
    custom_text: list[str | None] = field(default_factory=list)
    custom_num: list[float | None] = field(default_factory=list)
    rejects: list[tuple[str, str]] = field(default_factory=list)  # (reason, raw)

    def __len__(self) -> int:
        return len(self.stat_id)

    def extend(self, other: StatPage) -> None:
        """``other``'s rows after these (its custom rows pointing at its records, moved)."""
        offset = len(self)
        for name in (*_ROW_COLUMNS, "custom_name", "custom_text", "custom_num", "rejects"):
            getattr(self, name).extend(getattr(other, name))
        self.custom_row.extend(position + offset for position in other.custom_row)

    def select(self, rows: list[int]) -> StatPage:
        """The records at ``rows`` (ascending), with their custom fields; rejects kept."""
        if len(rows) == len(self):
            return self
        page = StatPage(rejects=self.rejects)
        for name in _ROW_COLUMNS:
            column = getattr(self, name)
            setattr(page, name, [column[i] for i in rows])
        where = {old: new for new, old in enumerate(rows)}
        for i, row in enumerate(self.custom_row):
            position = where.get(row)
            if position is not None:
                page.custom_row.append(position)
                page.custom_name.append(self.custom_name[i])
                page.custom_text.append(self.custom_text[i])
                page.custom_num.append(self.custom_num[i])
        return page

    def add(self, row: StatRow) -> None:
        position = len(self.stat_id)
        self.stat_id.append(row.stat_id)
        self.recorded_at.append((row.recorded_at - EPOCH) // ONE_US)
        self.users.append(row.users)
        self.guilds.append(row.guilds)
        self.shards.append(row.shards)
        self.memory_load.append(row.memory_load)
        self.cpu_load.append(row.cpu_load)
        self.commands_executed.append(row.commands_executed)
        self.raw.append(row.raw)
        for name, text, num in row.custom:
            self.custom_row.append(position)
            self.custom_name.append(name)
            self.custom_text.append(text)
            self.custom_num.append(num)


def parse_stats(records: list[Any], bot_id: str, fields: FieldSettings, *,
                received_at: datetime | None = None) -> StatPage:
    """Validate a decoded ``/stats`` page record by record: the rows :func:`parse_stat` accepts
    and, for each record it refuses, the reason and the record's canonical JSON. ``received_at``
    (default now) is when the page arrived: records far ahead of it are refused."""
    page = StatPage()
    latest = latest_allowed(fields, received_at)
    for record in records:
        try:
            page.add(parse_stat(record, bot_id, fields, latest=latest))
        except Invalid as exc:
            page.rejects.append((str(exc), raw_text(record)))
    return page


def parse_stats_raw(body: bytes, items: Sequence[Any], bot_id: str,
                    fields: FieldSettings, *, received_at: datetime | None = None) -> StatPage:
    """Validate a ``/stats`` page as received: ``body`` is the JSON array and ``items`` each
    record's JSON text exactly as sent (what the client splits it into), which is what ``raw``
    keeps.

    A page whose records all have the usual shape is decoded straight into typed records by
    msgspec (types and ranges checked in C, no dict per record) and turned into columns. In a
    page with anything unusual, each unusual record goes through :func:`parse_stat`, which
    words the reasons, and the usual ones around it still take the typed path, so one bad
    record in a page costs one slow record. All give the same rows (tests/test_records_page.py
    holds them to it, and tests/test_properties.py on random pages). ``received_at`` as in
    :func:`parse_stats`.
    """
    decoders = _decoders(fields)
    latest = latest_allowed(fields, received_at)
    if decoders is None or not items:
        return _raw_page_by_record(items, bot_id, fields, latest)
    if len(items) <= TYPED_CHUNK:
        return _usual_page(body, items, _Rules(bot_id, fields, latest), decoders)
    # A long page in chunks: the typed records of one chunk at a time live beside the columns
    # (they cost several times the body).
    page = StatPage()
    for start in range(0, len(items), TYPED_CHUNK):
        chunk = items[start:start + TYPED_CHUNK]
        page.extend(_usual_page(b"[" + b",".join(map(bytes, chunk)) + b"]", chunk,
                                _Rules(bot_id, fields, latest), decoders))
    return page


TYPED_CHUNK = 16_384  # records decoded typed at once


class _Rules(NamedTuple):
    """What a page is judged by: whose it is (a record keyed by its time takes the bot's id),
    the ``[fields]`` it is read by, and the latest time a record may carry."""

    bot_id: str
    fields: FieldSettings
    latest: datetime


def _usual_page(body: bytes, items: Sequence[Any], rules: _Rules,
                decoders: tuple[msgspec.json.Decoder[Any], msgspec.json.Decoder[Any]]) -> StatPage:
    try:
        records = decoders[0].decode(body)
        return _typed_page(records, items, rules.bot_id, rules.fields, rules.latest)
    except _NOT_TYPED:
        return _page_by_run(items, rules, decoders[1])


def _page_by_run(items: Sequence[Any], rules: _Rules,
                 decoder: msgspec.json.Decoder[Any]) -> StatPage:
    """The page in runs: each run of records that decode typed goes through the typed path
    together, each record that does not through :func:`parse_stat`, in page order."""
    page = StatPage()
    typed: list[Any] = []
    run: list[Any] = []

    def end_run() -> None:
        if not run:
            return
        try:
            page.extend(_typed_page(typed, run, rules.bot_id, rules.fields, rules.latest))
        except _NOT_TYPED:  # decodes typed, yet not usual: e.g. a naive time, a future one
            page.extend(_raw_page_by_record(run, rules.bot_id, rules.fields, rules.latest))
        typed.clear()
        run.clear()

    for item in items:
        try:
            typed.append(decoder.decode(item))
        except msgspec.DecodeError:  # ValidationError too
            end_run()
            page.extend(_raw_page_by_record([item], rules.bot_id, rules.fields, rules.latest))
            continue
        run.append(item)
    end_run()
    return page


def _raw_page_by_record(items: Sequence[Any], bot_id: str, fields: FieldSettings,
                        latest: datetime | None = None) -> StatPage:
    page = StatPage()
    latest = latest or latest_allowed(fields)
    for item in items:
        text = _item_text(item)
        try:
            page.add(parse_stat(decode_json(text), bot_id, fields, raw=text, latest=latest))
        except Invalid as exc:
            page.rejects.append((str(exc), text[:MAX_RAW_CHARS]))
        except ValueError as exc:  # not JSON after all (msgspec only skipped over it)
            page.rejects.append((f"a stat record that is not JSON: {exc}", text[:MAX_RAW_CHARS]))
    return page


class _Unusual(Exception):
    """The page is not of the usual shape: read it record by record instead."""


# What tells the typed path that records are not of the usual shape. TypeError and ValueError:
# fromisoformat, naive - aware, a raw that is not UTF-8.
_NOT_TYPED = (_Unusual, msgspec.DecodeError, TypeError, ValueError)  # DecodeError: Validation too


Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]


Percent = Annotated[float, msgspec.Meta(ge=0, le=100)]  # a JSON integer reads as a float too


Scalar = str | int | float | bool | None  # custom values the typed path takes


@functools.cache
def _decoders(fields: FieldSettings) -> tuple[msgspec.json.Decoder[Any],
                                              msgspec.json.Decoder[Any]] | None:
    """Decoders of a whole usual page, and of one usual record, into typed records, for these
    field names.

    Every constraint here is a sufficient condition for :func:`parse_stat` to accept the record
    as the typed path reads it; what it cannot express (stripped ids, aware timestamps, unique
    custom names) :func:`_typed_page` checks. A record keyed otherwise than by its id has no id
    field here: :func:`_typed_page` derives its key. None when the field names collide.
    """
    keyed_by_id = fields.stat_keying == "id"
    try:
        # gc=False: a page's records hold no cycles, and the collector would otherwise walk
        # every one of them on each of its passes. The record types are made here, from the
        # field names: mypy cannot read a type held in a variable (valid-type below).
        custom = msgspec.defstruct(
            "CustomField", [("name", str), ("value", Scalar, None)],
            rename={"name": fields.custom_name, "value": fields.custom_value}, gc=False,
            forbid_unknown_fields=True)  # another key may hold the value: record by record
        record = msgspec.defstruct(
            "StatRecord",
            [*([("stat_id", str | int)] if keyed_by_id else []),
             ("recorded_at", str | int | float), ("users", Count),
             ("guilds", Count),
             ("shards", Count | None, None), ("memory_load", Percent | None, None),
             ("cpu_load", Percent | None, None), ("commands_executed", Count | None, None),
             ("custom", list[custom] | dict[str, Scalar] | None, None)],  # type: ignore[valid-type]
            rename={"stat_id": fields.stat_id, "recorded_at": fields.stat_time}, gc=False)
    except (TypeError, ValueError):  # e.g. stat_time named like a count field
        return None
    return (msgspec.json.Decoder(list[record]),  # type: ignore[valid-type]
            msgspec.json.Decoder(record))


@functools.cache
def _key_decoder(fields: FieldSettings) -> msgspec.json.Decoder[Any]:
    """A decoder of the values of ``stat_key_fields`` other than the time, alone (each
    record's other fields skipped in C)."""
    names = [name for name in fields.stat_key_fields if name != fields.stat_time]
    key = msgspec.defstruct("StatKey", [(f"f{i}", Any, None) for i in range(len(names))],
                            rename={f"f{i}": name for i, name in enumerate(names)}, gc=False)
    return msgspec.json.Decoder(key)


def _typed_page(records: list[Any], items: Sequence[Any], bot_id: str, fields: FieldSettings,
                latest: datetime | None = None) -> StatPage:
    if len(records) != len(items) or not records:
        raise _Unusual
    # The records' fields as columns, in StatRecord's order (astuple and zip run in C: half the
    # time of reading each attribute of each record).
    columns = list(zip(*map(astuple, records), strict=True))
    keyed_by_id = fields.stat_keying == "id"
    ids = columns.pop(0) if keyed_by_id else ()
    (times, users, guilds, shards, memory_load, cpu_load, commands_executed,
     customs) = columns
    try:
        # Aware ISO strings, the usual case, at C speed: a naive time fails the subtraction.
        recorded_at = [(when - EPOCH) // ONE_US for when in map(datetime.fromisoformat, times)]
    except (TypeError, ValueError):
        recorded_at = _micros(list(times))
    if latest is not None and max(recorded_at) > (latest - EPOCH) // ONE_US:
        raise _Unusual  # a record from the future: the record path words the reason
    if keyed_by_id:
        keys = [i.strip() if type(i) is str else str(i) for i in ids]
        # An integer id beyond 64 bits: msgspec keeps it whole where orjson reads a float
        # (which is no id), so it goes record by record.
        if not all(keys) or any(type(i) is int and not INT64_MIN <= i <= UINT64_MAX
                                for i in ids):
            raise _Unusual
    else:
        keys = _derived_keys(items, recorded_at, bot_id, fields)
    page = StatPage(stat_id=keys, recorded_at=recorded_at, users=list(users),
                    guilds=list(guilds), shards=list(shards), memory_load=list(memory_load),
                    cpu_load=list(cpu_load), commands_executed=list(commands_executed))
    page.raw = [bytes(item).decode() for item in items]
    _custom_columns(page, customs)
    return page


def _derived_keys(items: Sequence[Any], recorded_at: list[int], bot_id: str,
                  fields: FieldSettings) -> list[str]:
    """The keys :func:`stat_key` derives for records without an id, from the typed path's
    times and the records' texts."""
    if fields.stat_keying == "content":
        return [hashed_key(bot_id, canonical_json(decode_json(bytes(item)))) for item in items]
    times = [(EPOCH + timedelta(microseconds=us)).isoformat() for us in recorded_at]
    names = key_fields(fields)
    if names == (fields.stat_time,):
        return [hashed_key(bot_id, when) for when in times]
    decoder = _key_decoder(fields)
    keys = []
    for item, when in zip(items, times, strict=True):
        values = iter(astuple(decoder.decode(item)))
        parts = [when if name == fields.stat_time else _scalar_json(next(values))
                 for name in names]
        keys.append(hashed_key(bot_id, *parts))
    return keys


def _scalar_json(value: Any) -> str:
    """A key field's value as :func:`canonical_json` spells it where orjson decoded it: an
    object, a list or an integer beyond 64 bits (which orjson reads as a float) goes record by
    record."""
    if isinstance(value, dict | list) or (
            type(value) is int and not INT64_MIN <= value <= UINT64_MAX):
        raise _Unusual
    return canonical_json(value)


def _micros(times: list[Any]) -> list[int]:
    """Times as :func:`parse_time` reads them (naive ISO as UTC, epoch seconds or ms)."""
    try:
        return [(parse_time(when) - EPOCH) // ONE_US for when in times]
    except Invalid:
        raise _Unusual from None  # the record path words the reason


def _custom_columns(page: StatPage, customs: Sequence[Any]) -> None:
    """Each record's custom fields (a list of typed items, or one object of name -> value) as
    the page's custom rows."""
    rows = [position for position, items in enumerate(customs) if items for _ in items]
    if not rows:
        return
    pairs = [pair for items in customs if items
             for pair in (items.items() if type(items) is dict else map(astuple, items))]
    raw_names, values = zip(*pairs, strict=True)
    names = [n.strip() for n in raw_names]
    # An empty name is refused, and a name repeated in one record keeps its last value: both
    # are the record-by-record path's to handle.
    if not all(names) or len(set(zip(rows, names, strict=True))) != len(names):
        raise _Unusual
    # An integer beyond 64 bits: msgspec keeps it whole where orjson reads a float (other
    # text), so it goes record by record.
    if any(type(v) is int and not INT64_MIN <= v <= UINT64_MAX for v in values):
        raise _Unusual
    page.custom_row = rows
    page.custom_name = names
    page.custom_text = [_CUSTOM_TEXT[type(v)](v) for v in values]
    page.custom_num = [_CUSTOM_NUM[type(v)](v) for v in values]


def _item_text(item: Any) -> str:
    """A record's JSON text as received (bytes that are not UTF-8 shown replaced)."""
    return item if isinstance(item, str) else bytes(item).decode("utf-8", errors="replace")
