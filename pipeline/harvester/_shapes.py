"""What records look like when the interface does not say: which field holds a record's id, its
time, its name, what a custom field's keys are, and what types the counts come as.

Pure functions over decoded records (no I/O), shared by ``botstats probe`` (which reads a few
records and proposes ``[fields]``) and the harvest (which, when a field name in config refuses
a kind of record, says which field the records carry instead). A field is a candidate by its
values and its name: an id is in every record, unique, an id's shape and no reference to
another resource (:func:`id_candidates`); a time reads as one kind of time of a plausible date
in every record; names rank candidates.
"""

from __future__ import annotations

import email.utils
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..core import canonical_json
from ._records import COUNT_FIELDS, EPOCH_TEXT, PERCENT_FIELDS, Invalid, parse_time

# Names seen for these fields in public APIs, best first: they rank candidates, never make one.
TIME_NAMES = ("timestamp", "created_at", "createdAt", "recorded_at", "time", "date", "ts",
              "posted_at", "updated_at")
NAME_NAMES = ("name", "display_name", "displayName", "title", "username", "tag")
CUSTOM_NAME_NAMES = ("name", "key", "field", "label", "id")
CUSTOM_VALUE_NAMES = ("value", "val", "data", "content")
# A record's own id, by kind of record, best first (bots are Discord applications: client_id).
OWN_ID_NAMES = {
    "bot": ("id", "_id", "bot_id", "botId", "client_id", "clientId", "uuid", "snowflake", "key"),
    "stat": ("id", "_id", "stat_id", "statId", "record_id", "recordId", "uuid", "key"),
    "user": ("id", "_id", "user_id", "userId", "uid", "uuid", "snowflake", "key"),
    "server": ("id", "_id", "server_id", "serverId", "guild_id", "guildId", "uuid", "snowflake",
               "key"),
    "webhook": ("id", "_id", "webhook_id", "webhookId", "hook_id", "hookId", "uuid", "key"),
}
# Words that name a resource: a field `<word>_id` / `<word>Id` of a word another kind owns is a
# reference to that resource, not the record's own id.
_RESOURCE_WORDS = {"bot": {"bot", "client", "application", "app"}, "stat": {"stat", "record"},
                   "user": {"user", "owner", "author", "creator", "member", "account"},
                   "server": {"server", "guild"}, "webhook": {"webhook", "hook"},
                   "": {"parent", "channel", "team", "org", "organization", "target"}}
_REFERENCE = re.compile(r"^(?P<word>[A-Za-z]+?)_?(?:id|Id|ID|_ids|Ids)$")
# Fields named like these hold a name, a medium, a link or a figure, whatever their values.
_NOT_ID_WORDS = ("name", "title", "tag", "avatar", "icon", "banner", "image", "picture", "photo",
                 "splash", "url", "link", "website", "invite", "hash", "description", "prefix",
                 "count", "points", "total", "load", "executed", "users", "guilds", "shards")
# Fields that tell apart the records a bot posts at one time (one per shard, process, ...),
# best first: they rank candidates, never make one.
PART_NAMES = ("shard_id", "shardId", "shard", "cluster_id", "clusterId", "cluster",
              "instance_id", "instanceId", "instance", "process_id", "processId", "worker_id",
              "workerId", "worker", "node_id", "nodeId", "node", "seq", "sequence")
# A record's figures: what it measures, which tells nothing of which record it is.
FIGURES = frozenset({*COUNT_FIELDS, *PERCENT_FIELDS, "custom"})
MAX_ID_CHARS = 128
# Plausible epochs: 2000-01-01 .. 2100-01-01, in seconds or milliseconds. (Microseconds and
# nanoseconds are read too, but not guessed: a 64-bit snowflake id reads as nanoseconds.)
EPOCH_LOW, EPOCH_HIGH = 946_684_800, 4_102_444_800
_EPOCH_UNITS = (("seconds", 1), ("milliseconds", 10**3))
_ISO_SHAPE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


def time_kind(value: Any) -> str | None:
    """How ``value`` reads as a time: 'an ISO 8601 time', 'epoch seconds' or 'epoch
    milliseconds' ('... as text' when the number comes as text), 'an HTTP date'; None when it
    does not, or is no plausible date (2000-2100). ``_records.parse_time`` reads them all."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        for unit, scale in _EPOCH_UNITS:
            if EPOCH_LOW * scale <= value <= EPOCH_HIGH * scale:
                return f"epoch {unit}"
        return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if EPOCH_TEXT.match(text):
        kind = time_kind(float(text))
        return f"{kind} as text" if kind else None
    if _ISO_SHAPE.match(text):
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            return None
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        return "an ISO 8601 time" if EPOCH_LOW <= when.timestamp() <= EPOCH_HIGH else None
    if text[:1].isalpha():
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        return "an HTTP date" if EPOCH_LOW <= when.timestamp() <= EPOCH_HIGH else None
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


def id_candidates(records: Iterable[Any], kind: str, *,
                  foreign: Collection[str] = ()) -> list[Candidate]:
    """Fields of ``kind`` records ("bot", "stat", "user", "server", "webhook") that may be their
    own id, best first (the kind's id names, then the rest by name). A candidate

    1. is in every record, a non-empty string without spaces (at most 128 characters) or a
       JSON integer (a float, a boolean, a list or an object is no id);
    2. is unique across the records, which must be two or more (one record proves nothing;
       ``botstats probe`` asks the service instead, where the interface can address it);
    3. looks like an id: no link or path, no time, and not named like a name, a medium or a
       figure (``username``, ``avatar``, ``*_count`` ...);
    4. is no reference to another resource: no value is among ``foreign`` (ids the caller knows
       of bots, users ...), and it is not named ``<other resource>_id``.
    """
    objects = _objects(records)
    out = []
    for name in _common_fields(objects):
        values = [r[name] for r in objects]
        if not all(_looks_like_id(v) for v in values) or not _named_like_an_id(name, kind):
            continue
        if any(str(v).strip() in foreign for v in values):
            continue
        if len(objects) == 1:
            out.append(Candidate(name, "an id's shape (one record seen)"))
        elif len({str(v).strip() for v in values}) == len(values):
            out.append(Candidate(name, f"unique in all {len(objects)} records"))
    return sorted(out, key=lambda c: _rank(c.field, OWN_ID_NAMES[kind]))


def decided_id(candidates: Sequence[Candidate], kind: str) -> Candidate | None:
    """The candidate to take without asking the service: the only one, or the best when it is
    named like ``kind``'s id and the next is not. None: none, or too close to call."""
    if len(candidates) == 1:
        return candidates[0]
    own = OWN_ID_NAMES[kind]
    if candidates and candidates[0].field in own and candidates[1].field not in own:
        return candidates[0]
    return None


def _looks_like_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if not isinstance(value, str):
        return False
    text = value.strip()
    # Digits may be an id or a time alike (a snowflake is in the range of epoch nanoseconds):
    # only a date spelled as one is taken for a time here.
    return (0 < len(text) <= MAX_ID_CHARS and not any(c.isspace() for c in text)
            and "://" not in text and not text.startswith("/")
            and time_kind(text) not in ("an ISO 8601 time", "an HTTP date"))


def _named_like_an_id(name: str, kind: str) -> bool:
    """Not named like a non-id (a name, a link, a figure), nor like another resource's id."""
    if name in OWN_ID_NAMES[kind]:
        return True
    lowered = name.lower()
    if any(word in lowered for word in _NOT_ID_WORDS) or name in TIME_NAMES:
        return False
    reference = _REFERENCE.match(name)
    if reference is None:
        return True
    word = reference["word"].lower()
    return not any(word in words for other, words in _RESOURCE_WORDS.items() if other != kind)


@dataclass(frozen=True)
class KeyChoice:
    """How stat records without an id are told apart (``[fields].stat_key``): "time", "fields"
    (``fields``: the time field, then the field that tells apart records at one time) or
    "content"; and why."""

    key: str
    fields: tuple[str, ...]
    why: str


def stat_key_choice(groups: Sequence[Sequence[Any]], time_field: str) -> KeyChoice:
    """How to tell apart stat records that carry no id: ``groups`` are the records of a few
    bots, one list each; ``time_field`` holds their time.

    1. "time" when no two records of a bot share a time (a record read twice is one);
    2. else "fields": the time and a field that differs among the records at each shared time,
       with a key's values (text or integers; absent counts as null), not a figure of the record
       (a count, a load, custom fields) nor named like one, the best named first (a shard, a
       cluster, an instance ..., then a name ending in id);
    3. else "content": a hash of each record's canonical JSON.
    """
    tied: list[list[dict[str, Any]]] = []
    read = 0
    for group in groups:
        at: dict[str, dict[str, dict[str, Any]]] = {}  # time -> canonical JSON -> record
        for record in _objects(group):
            try:
                when = parse_time(record.get(time_field)).isoformat()
            except Invalid:
                continue
            read += 1
            at.setdefault(when, {})[canonical_json(record)] = record
        tied += [list(alike.values()) for alike in at.values() if len(alike) > 1]
    seen = f"{read} records of {len(groups)} bot{'s' if len(groups) != 1 else ''}"
    if not tied:
        return KeyChoice("time", (time_field,), f"no two of the {seen} read share a time")
    times = "1 time holds" if len(tied) == 1 else f"{len(tied)} times hold"
    shared = f"in the {seen} read, {times} several records of a bot"
    parts = _part_candidates(tied, time_field)
    if parts:
        also = f"; '{parts[1]}' differs too" if len(parts) == 2 else \
            f"; {', '.join(repr(p) for p in parts[1:])} differ too" if parts[1:] else ""
        return KeyChoice("fields", (time_field, parts[0]),
                         f"{shared}, and '{parts[0]}' differs among the records at each{also}")
    return KeyChoice("content", (), f"{shared}, and no field but their figures tells them "
                                    f"apart: each record is known by its whole content")


def _part_candidates(tied: Sequence[Sequence[dict[str, Any]]], time_field: str) -> list[str]:
    """Fields whose values differ among the records at each shared time, best first."""
    names = list(dict.fromkeys(name for records in tied for r in records for name in r))
    out = []
    for name in names:
        lowered = name.lower()
        if name == time_field or name in FIGURES or name in TIME_NAMES or \
                any(word in lowered for word in _NOT_ID_WORDS):
            continue
        values = [[r.get(name) for r in records] for records in tied]
        if any(isinstance(v, float | bool | dict | list) for vs in values for v in vs):
            continue  # a measure, a flag or a structure names no record
        if all(len({canonical_json(v) for v in vs}) == len(vs) for vs in values):
            out.append(name)
    return sorted(out, key=lambda n: (_rank(n, PART_NAMES)[0], not n.lower().endswith("id"), n))


def name_candidates(records: Iterable[Any], *, exclude: Iterable[str] = ()) -> list[Candidate]:
    """Text fields named like a name, present in every record."""
    objects = _objects(records)
    skip = set(exclude)
    out = [Candidate(n, "text in every record") for n in _common_fields(objects)
           if n in NAME_NAMES and n not in skip and all(isinstance(r[n], str) for r in objects)]
    return sorted(out, key=lambda c: _rank(c.field, NAME_NAMES))


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
