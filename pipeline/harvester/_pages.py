"""A whole /stats page validated at once: typed decoding of the usual page in one pass (msgspec), and record by record where a page is unusual, into columns a batch takes as they are."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec.structs import astuple

from ..core import FieldSettings, decode_json
from ._records import (
    _CUSTOM_NUM,
    _CUSTOM_TEXT,
    COUNT_FIELDS,
    EPOCH,
    INT64_MIN,
    MAX_COUNT,
    MAX_RAW_CHARS,
    ONE_US,
    PERCENT_FIELDS,
    UINT64_MAX,
    Invalid,
    StatRow,
    latest_allowed,
    parse_stat,
    parse_time,
    raw_text,
)

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
        return _usual_page(body, items, bot_id, fields, decoders, latest)
    # A long page in chunks: the typed records of one chunk at a time live beside the columns
    # (they cost several times the body).
    page = StatPage()
    for start in range(0, len(items), TYPED_CHUNK):
        chunk = items[start:start + TYPED_CHUNK]
        page.extend(_usual_page(b"[" + b",".join(map(bytes, chunk)) + b"]", chunk, bot_id,
                                fields, decoders, latest))
    return page


TYPED_CHUNK = 16_384  # records decoded typed at once


def _usual_page(body: bytes, items: Sequence[Any], bot_id: str, fields: FieldSettings,
                decoders: tuple[msgspec.json.Decoder[Any], msgspec.json.Decoder[Any]],
                latest: datetime) -> StatPage:
    try:
        return _typed_page(decoders[0].decode(body), items, latest)
    except _NOT_TYPED:
        return _page_by_run(items, bot_id, fields, decoders[1], latest)


def _page_by_run(items: Sequence[Any], bot_id: str, fields: FieldSettings,
                 decoder: msgspec.json.Decoder[Any], latest: datetime) -> StatPage:
    """The page in runs: each run of records that decode typed goes through the typed path
    together, each record that does not through :func:`parse_stat`, in page order."""
    page = StatPage()
    typed: list[Any] = []
    run: list[Any] = []

    def end_run() -> None:
        if not run:
            return
        try:
            page.extend(_typed_page(typed, run, latest))
        except _NOT_TYPED:  # decodes typed, yet not usual: e.g. a naive time, a future one
            page.extend(_raw_page_by_record(run, bot_id, fields, latest))
        typed.clear()
        run.clear()

    for item in items:
        try:
            typed.append(decoder.decode(item))
        except msgspec.DecodeError:  # ValidationError too
            end_run()
            page.extend(_raw_page_by_record([item], bot_id, fields, latest))
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
    custom names) :func:`_typed_page` checks. None when the service gives no stat id (keys are
    then derived record by record) or the field names collide.
    """
    if not fields.stat_id:
        return None
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
            [("stat_id", str | int), ("recorded_at", str | int | float), ("users", Count),
             ("guilds", Count),
             ("shards", Count | None, None), ("memory_load", Percent | None, None),
             ("cpu_load", Percent | None, None), ("commands_executed", Count | None, None),
             ("custom", list[custom] | dict[str, Scalar] | None, None)],  # type: ignore[valid-type]
            rename={"stat_id": fields.stat_id, "recorded_at": fields.stat_time}, gc=False)
    except (TypeError, ValueError):  # e.g. stat_time named like a count field
        return None
    return (msgspec.json.Decoder(list[record]),  # type: ignore[valid-type]
            msgspec.json.Decoder(record))


def _typed_page(records: list[Any], items: Sequence[Any],
                latest: datetime | None = None) -> StatPage:
    if len(records) != len(items) or not records:
        raise _Unusual
    # The records' fields as columns, in StatRecord's order (astuple and zip run in C: half the
    # time of reading each attribute of each record).
    (ids, times, users, guilds, shards, memory_load, cpu_load, commands_executed,
     customs) = zip(*map(astuple, records), strict=True)
    keys = [i.strip() if type(i) is str else str(i) for i in ids]
    # An integer id beyond 64 bits: msgspec keeps it whole where orjson reads a float (which
    # is no id), so it goes record by record.
    if not all(keys) or any(type(i) is int and not INT64_MIN <= i <= UINT64_MAX for i in ids):
        raise _Unusual
    try:
        # Aware ISO strings, the usual case, at C speed: a naive time fails the subtraction.
        recorded_at = [(when - EPOCH) // ONE_US for when in map(datetime.fromisoformat, times)]
    except (TypeError, ValueError):
        recorded_at = _micros(list(times))
    if latest is not None and max(recorded_at) > (latest - EPOCH) // ONE_US:
        raise _Unusual  # a record from the future: the record path words the reason
    page = StatPage(stat_id=keys, recorded_at=recorded_at, users=list(users),
                    guilds=list(guilds), shards=list(shards), memory_load=list(memory_load),
                    cpu_load=list(cpu_load), commands_executed=list(commands_executed))
    page.raw = [bytes(item).decode() for item in items]
    _custom_columns(page, customs)
    return page


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
