"""What records look like when the interface does not say: which field holds a record's id, its
time, its name, what a custom field's keys are, and what types the counts come as.

Pure functions over decoded records (no I/O), shared by ``botstats probe`` (which reads a few
records and proposes ``[fields]``) and the harvest (which, when a field name in config rejects
nearly every record, says which field the records carry instead). A field is a candidate by its
values (every record has one; an id is unique; a time reads as ISO 8601 or epoch seconds or
milliseconds of a plausible date) and is ranked by its name.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# Names seen for these fields in public APIs, best first: they rank candidates, never make one.
ID_NAMES = ("id", "_id", "uuid", "key", "stat_id", "statId", "record_id", "bot_id", "botId",
            "client_id")
TIME_NAMES = ("timestamp", "created_at", "createdAt", "recorded_at", "time", "date", "ts",
              "posted_at", "updated_at")
NAME_NAMES = ("name", "username", "title", "display_name", "displayName", "tag")
CUSTOM_NAME_NAMES = ("name", "key", "field", "label", "id")
CUSTOM_VALUE_NAMES = ("value", "val", "data", "content")
# Plausible epochs: 2000-01-01 .. 2100-01-01, in seconds or milliseconds.
EPOCH_LOW, EPOCH_HIGH = 946_684_800, 4_102_444_800
_ISO_SHAPE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


def time_kind(value: Any) -> str | None:
    """How ``value`` reads as a time: 'an ISO 8601 time', 'epoch seconds', 'epoch
    milliseconds'; None when it does not (or is not a plausible date)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if EPOCH_LOW <= value <= EPOCH_HIGH:
            return "epoch seconds"
        if EPOCH_LOW * 1000 <= value <= EPOCH_HIGH * 1000:
            return "epoch milliseconds"
        return None
    if isinstance(value, str) and _ISO_SHAPE.match(value.strip()):
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        return "an ISO 8601 time" if EPOCH_LOW <= when.timestamp() <= EPOCH_HIGH else None
    return None


def _objects(records: Iterable[Any]) -> list[dict[str, Any]]:
    return [r for r in records if isinstance(r, dict)]


def _rank(name: str, preferred: Sequence[str]) -> tuple[int, str]:
    return (preferred.index(name) if name in preferred else len(preferred), name)


def _common_fields(records: list[dict[str, Any]]) -> list[str]:
    """Fields every record has (in the first record's order)."""
    if not records:
        return []
    return [k for k in records[0] if all(k in r for r in records)]


@dataclass(frozen=True)
class Candidate:
    """A field that may hold what is sought, and why: 'distinct in all 20 records', 'an ISO 8601
    time' (in every record)."""

    field: str
    why: str


def time_candidates(records: Iterable[Any]) -> list[Candidate]:
    """Fields whose value reads as a time of one kind in every record, best name first."""
    objects = _objects(records)
    out = []
    for name in _common_fields(objects):
        kinds = {time_kind(r[name]) for r in objects}
        if len(kinds) == 1 and None not in kinds:
            out.append(Candidate(name, str(kinds.pop())))
    return sorted(out, key=lambda c: _rank(c.field, TIME_NAMES))


def id_candidates(records: Iterable[Any], *, exclude: Iterable[str] = ()) -> list[Candidate]:
    """Fields holding a non-empty string or integer, distinct in every record, best name first.
    With a single record, only a field with an id's name qualifies."""
    objects = _objects(records)
    skip = set(exclude)
    out = []
    for name in _common_fields(objects):
        values = [r[name] for r in objects]
        if name in skip or not all(_is_ident(v) for v in values):
            continue
        if len(objects) > 1 and len({str(v) for v in values}) == len(values):
            out.append(Candidate(name, f"distinct in all {len(objects)} records"))
        elif len(objects) == 1 and name in ID_NAMES:
            out.append(Candidate(name, "named like an id (one record seen)"))
    return sorted(out, key=lambda c: _rank(c.field, ID_NAMES))


def name_candidates(records: Iterable[Any], *, exclude: Iterable[str] = ()) -> list[Candidate]:
    """Text fields named like a name, present in every record."""
    objects = _objects(records)
    skip = set(exclude)
    out = [Candidate(n, "text in every record") for n in _common_fields(objects)
           if n in NAME_NAMES and n not in skip and all(isinstance(r[n], str) for r in objects)]
    return sorted(out, key=lambda c: _rank(c.field, NAME_NAMES))


def _is_ident(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return (isinstance(value, int) or (isinstance(value, str) and bool(value.strip())))


def custom_keys(records: Iterable[Any], custom: str = "custom") -> tuple[str, str] | None:
    """(name key, value key) of the custom fields of stat records: the keys every item has, the
    name one holding text distinct within a record; None when no record has custom fields."""
    items: list[list[dict[str, Any]]] = [
        [i for i in r[custom] if isinstance(i, dict)] for r in _objects(records)
        if isinstance(r.get(custom), list) and r[custom]]
    flat = [i for group in items for i in group]
    keys = _common_fields(flat)
    if not keys:
        return None
    names = [k for k in keys if all(isinstance(i[k], str) for i in flat)
             and all(len({i[k] for i in g}) == len(g) for g in items)]
    if not names:
        return None
    name = sorted(names, key=lambda k: _rank(k, CUSTOM_NAME_NAMES))[0]
    values = [k for k in keys if k != name]
    if not values:
        return None
    return name, sorted(values, key=lambda k: _rank(k, CUSTOM_VALUE_NAMES))[0]


def value_types(records: Iterable[Any], name: str) -> dict[str, int]:
    """How often ``name`` comes as each JSON type (integer, number, numeric text, text, null,
    missing, ...)."""
    counts: Counter[str] = Counter()
    for r in _objects(records):
        counts[_type_of(r[name]) if name in r else "missing"] += 1
    return dict(counts.most_common())


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer-valued number" if value.is_integer() else "number"
    if isinstance(value, str):
        try:
            float(value)
            return "numeric text"
        except ValueError:
            return "text"
    return "array" if isinstance(value, list) else "object"
