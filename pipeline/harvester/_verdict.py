"""The loud failure: a field name in the config that rejects nearly every record of a run fails the run, saying which records carry what instead."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from ._shapes import Candidate, custom_keys, id_candidates, time_candidates

NEARLY_ALL = 0.9  # share of a run's records rejected that makes the run fail


MIN_RECORDS = 5  # fewer records seen than this prove nothing


SAMPLES = 20  # records kept per reason to look for what they carry instead


# Reasons (records.py's words) that blame a field name, and the [fields] key each one names.
_FIELD_REASONS = (
    (re.compile(r"^missing timestamp field '(.+)'$"), "stat", "stat_time", "a time"),
    (re.compile(r"^timestamp field '(.+)' is not"), "stat", "stat_time", "a time"),
    (re.compile(r"^missing id field '(.+)'$"), "stat", "stat_id", "an id"),
    (re.compile(r"^missing bot id field '(.+)'$"), "bot", "bot_id", "an id"),
    (re.compile(r"^custom field without '(.+)'"), "stat", "custom_name", "a custom field's name"),
)


@dataclass
class RecordTally:
    """What one run saw of the records: how many were kept and rejected (by reason, with a few
    raw samples), and the top-level fields of the records (for schema drift)."""

    accepted: Counter[str] = field(default_factory=Counter)  # "stat" / "bot" -> records kept
    rejected: Counter[str] = field(default_factory=Counter)  # reason -> records
    samples: dict[str, list[str]] = field(default_factory=dict)  # reason -> raw records
    fields: dict[str, set[str]] = field(default_factory=dict)  # "stat" / "bot" -> field names

    def keep(self, kind: str, count: int) -> None:
        self.accepted[kind] += count

    def reject(self, reason: str, raw: str) -> None:
        self.rejected[reason] += 1
        kept = self.samples.setdefault(reason, [])
        if len(kept) < SAMPLES and raw not in kept:  # a listing re-read shows a bot again
            kept.append(raw)

    def saw_fields(self, kind: str, record: Any) -> None:
        """Note the top-level fields of a record (decoded, or its JSON text)."""
        if isinstance(record, str | bytes | bytearray | memoryview):
            try:
                record = orjson.loads(bytes(record) if not isinstance(record, str) else record)
            except orjson.JSONDecodeError:
                return
        if isinstance(record, dict):
            self.fields.setdefault(kind, set()).update(record)


def field_verdict(fields: Any, tally: RecordTally) -> str | None:
    """Why the run must not end complete when a ``[fields]`` name rejected nearly every record
    of a kind, naming the field, what the records carry instead and the fix; None otherwise."""
    for kind in ("bot", "stat"):
        blamed: Counter[tuple[str, str, str]] = Counter()
        for reason, count in tally.rejected.items():
            for pattern, of, key, what in _FIELD_REASONS:
                match = pattern.match(reason)
                if of == kind and match and match[1] == getattr(fields, key, None):
                    blamed[(key, match[1], what)] += count
        rejected = sum(blamed.values())
        seen = rejected + tally.accepted[kind]
        if not blamed or seen < MIN_RECORDS or rejected < NEARLY_ALL * seen:
            continue
        (key, name, what), _ = blamed.most_common(1)[0]
        samples = [orjson.loads(raw) for reason, raws in tally.samples.items()
                   if f"'{name}'" in reason for raw in raws if _json_object(raw)]
        return _advice(kind, key, name, what, samples, rejected, seen)
    return None


def _json_object(raw: str) -> bool:
    try:
        return isinstance(orjson.loads(raw), dict)
    except orjson.JSONDecodeError:
        return False


def _advice(kind: str, key: str, name: str, what: str, samples: list[dict[str, Any]],
            rejected: int, seen: int) -> str:
    if key == "stat_time":
        found = time_candidates(samples)
    elif key == "custom_name":
        keys = custom_keys(samples)
        found = [Candidate(keys[0], "the key of every custom field")] if keys else []
    else:
        found = id_candidates(samples, exclude=("bot_id",) if kind == "stat" else ())
    counted = (f"{rejected} of {seen} {kind} records this run were rejected for it; they are "
               f"kept whole in table rejects, and the next run after the fix archives them.")
    if found:
        best = found[0]
        return (f"{kind} records have no '{name}'; they carry '{best.field}' ({best.why}): set "
                f"[fields].{key} = \"{best.field}\" or run `botstats probe`. {counted}")
    return (f"{kind} records have no '{name}', and no field of theirs reads as {what}: set "
            f"[fields].{key} to the field that holds it (see a record in table rejects) or run "
            f"`botstats probe`. {counted}")
