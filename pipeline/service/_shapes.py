"""How this service spells its records where the interface says "not shown": the keys of ids,
names, times and custom fields, ids as text or JSON integers, the stat id's style, the time's
format and the shape of custom fields.

The directory makes every record in one default shape (``_data``); :class:`Shapes` turns it
into the served one on the way out, so the data, and every fault, are the same whatever the
shape. A value it cannot convert (a malformed record's time, a missing id) is left as it is.
"""

from __future__ import annotations

import email.utils
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ._config import ServiceConfig

Record = dict[str, Any]

# The record keys the interface leaves open, per record (default key -> FIELD_DEFAULTS name).
_KEYS = {
    "bot": (("id", "bot_id"), ("name", "bot_name")),
    "stat": (("id", "stat_id"), ("timestamp", "stat_time")),
    "custom": (("name", "custom_name"), ("value", "custom_value")),
    "user": (("id", "user_id"),),
    "server": (("id", "server_id"),),
    "webhook": (("id", "webhook_id"),),
}
# Keys that hold the id of a bot or a user (or a list of them), served as the ids are.
_REFERENCES = {"bot": ("id", "owners"), "stat": ("bot_id",), "user": ("id", "bot_ids"),
               "server": ("id", "owner_id"), "webhook": ("id", "bot_id")}
_STAT_ID_BITS = 60  # past 2**53: a double cannot hold it, so a client must keep it exact
# An epoch time_format's units in a second: JSON integers, exact (nanoseconds are past 2**53).
_PER_SECOND = {"epoch-s": 1, "epoch-ms": 10**3, "epoch-us": 10**6, "epoch-ns": 10**9}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Shapes:
    """The served shape of each kind of record, from a :class:`ServiceConfig`."""

    renames: dict[str, dict[str, str]]  # record kind -> {default key: served key}
    integer_ids: bool
    stat_ids: str
    time_format: str
    custom_object: bool

    @classmethod
    def of(cls, config: ServiceConfig) -> Shapes:
        renames = {kind: {key: config.field_name(name) for key, name in keys
                          if config.field_name(name) != key} for kind, keys in _KEYS.items()}
        return cls(renames, config.id_type == "integer", config.stat_ids, config.time_format,
                   config.custom_shape == "object")

    @property
    def stats_differ(self) -> bool:
        """Stat records are served in another shape than they are made."""
        return bool(self.renames["stat"] or self.renames["custom"] or self.integer_ids
                    or self.stat_ids != "composite" or self.time_format != "iso"
                    or self.custom_object)

    def served(self, kind: str, record: Record) -> Record:
        """A bot, user, server or webhook record (made in the default shape) as served."""
        if self.integer_ids:
            record = {**record, **{key: _integer(record[key]) for key in _REFERENCES[kind]
                                   if key in record}}
        names = self.renames[kind]
        return {names.get(key, key): value for key, value in record.items()} if names else record

    def stat(self, record: Record) -> Record:
        """A stat record as served (``record`` is changed in place and returned renamed)."""
        if "id" in record:
            style = self.stat_ids
            if style == "none":
                del record["id"]
            elif style != "composite":
                record["id"] = self.stat_id(record["id"])
        if self.integer_ids and "bot_id" in record:
            record["bot_id"] = _integer(record["bot_id"])
        if self.time_format != "iso" and "timestamp" in record:
            record["timestamp"] = _served_time(record["timestamp"], self.time_format)
        custom = record.get("custom")
        if isinstance(custom, list):
            names = self.renames["custom"]
            if self.custom_object:
                record["custom"] = {item["name"]: item.get("value") for item in custom
                                    if isinstance(item, dict) and "name" in item}
            elif names:
                record["custom"] = [{names.get(k, k): v for k, v in item.items()}
                                    if isinstance(item, dict) else item for item in custom]
        names = self.renames["stat"]
        return {names.get(key, key): value for key, value in record.items()} if names else record

    def stat_id(self, made: str) -> str | int | None:
        """The id a stat record made with id ``made`` is served with (None: served without)."""
        if self.stat_ids == "none":
            return None
        if self.stat_ids == "composite":
            return made
        digest = hashlib.sha1(made.encode()).hexdigest()
        # 24 hex digits: the shape of a MongoDB ObjectId.
        return digest[:24] if self.stat_ids == "hex" else int(digest, 16) >> (160 - _STAT_ID_BITS)


def _integer(value: Any) -> Any:
    if isinstance(value, list):
        return [_integer(v) for v in value]
    return int(value) if isinstance(value, str) and value.isdigit() else value


def _served_time(value: Any, time_format: str) -> Any:
    """An ISO time as an epoch integer (seconds, milli-, micro- or nanoseconds, cut to whole
    units) or an HTTP date (whole seconds, GMT); anything else (a malformed time) as is."""
    if not isinstance(value, str):
        return value
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return value
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    if time_format == "http-date":
        return email.utils.format_datetime(when.astimezone(UTC), usegmt=True)
    micros = (when - _EPOCH) // timedelta(microseconds=1)
    return micros * _PER_SECOND[time_format] // 10**6
