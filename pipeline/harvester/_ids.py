"""Ids are never merged: a field taken as records' id whose values repeat over records that
differ, in what the service returned (a listing page, a bot's ``/stats``, a user's list), is
refused before anything of the run is written, since keyed by it two records would become one
row. The same record shown twice (a listing that repeats a bot, a page read again) is one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core import FieldSettings, IdsNotUnique, decode_json, same_record
from ._shapes import OWN_ID_NAMES, stat_key_choice

SHOWN = 3  # repeated values a message names
_ID_NAMES = frozenset(name for names in OWN_ID_NAMES.values() for name in names)


def repeated(keys: Sequence[str], raws: Sequence[str]) -> list[str]:
    """The keys that come twice or more with records that differ (JSON compared, so spelling
    aside), in the order they first repeat."""
    first: dict[str, str] = {}
    out: list[str] = []
    for key, raw in zip(keys, raws, strict=True):
        seen = first.setdefault(key, raw)
        if seen is not raw and key not in out and not same_record(seen, raw):
            out.append(key)
    return out


class Identities:
    """What tells a bot the listing shows again (a page read again, the bot updated between two
    reads) from another bot under the same id, across the pages of a run: the values of the
    record's *other* id fields (``id`` when ``[fields].bot_id = "username"``). Only bots that
    have such fields are remembered, by a hash of them."""

    def __init__(self, id_field: str) -> None:
        self._id_field = id_field
        self._others: dict[str, int] = {}

    def clashes(self, records: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
        """The ids among ``records`` ((id, record)) met before with other id fields."""
        out = []
        for key, record in records:
            sign = self._sign(record)
            if sign is not None and self._others.setdefault(key, sign) != sign:
                out.append(key)
        return out

    def _sign(self, record: Mapping[str, Any]) -> int | None:
        others = tuple(sorted((name, str(value)) for name, value in record.items()
                              if name != self._id_field and name in _ID_NAMES
                              and isinstance(value, str | int) and not isinstance(value, bool)))
        return hash(others) if others else None


def not_unique(setting: str, name: str, where: str, values: Sequence[str]) -> IdsNotUnique:
    """The refusal: ``[fields].<setting> = "<name>"`` repeats ``values`` in ``where``."""
    return IdsNotUnique(
        f"[fields].{setting} = \"{name}\" is not unique in {where}: {_shown(values)} each name "
        f"several different records, so they would become one row. {_NOTHING} Set "
        f"[fields].{setting} to the field that tells them apart (`botstats probe` finds it).")


def stat_keys_not_unique(fields: FieldSettings, where: str, keys: Sequence[str],
                         raws: Sequence[str], twice: Sequence[str]) -> IdsNotUnique:
    """The refusal of a bot's records (``keys`` and ``raws``, ``twice`` the keys that repeat
    over records that differ), keyed as ``[fields]`` says: with the times they share, and the
    key the records call for (:func:`~._shapes.stat_key_choice`) when it is not the one set."""
    keying = fields.stat_keying
    if keying == "id":
        return not_unique("stat_id", fields.stat_id, where, twice)
    records = [_decoded(raw) for raw in raws]
    repeated_keys = set(twice)
    times = list(dict.fromkeys(
        str(record.get(fields.stat_time)) for key, record in zip(keys, records, strict=True)
        if key in repeated_keys and isinstance(record, dict)))
    if keying == "time":
        said = "[fields].stat_id is \"\"" if fields.stat_key == "id" else \
            "[fields].stat_key is \"time\""
        head = (f"{said} (records are told apart by [fields].stat_time = "
                f"\"{fields.stat_time}\")")
    else:
        head = (f"[fields].stat_key_fields = {_names(fields.stat_key_fields)} do not tell "
                f"records apart")
    choice = stat_key_choice([records], fields.stat_time)
    if choice.key == "fields" and choice.fields != fields.stat_key_fields:
        fix = (f"Set [fields].stat_key = \"fields\" and [fields].stat_key_fields = "
               f"{_names(choice.fields)}: {choice.why}")
    elif choice.key == "content":
        fix = f"Set [fields].stat_key = \"content\": {choice.why}"
    else:
        fix = ("Set [fields].stat_key and stat_key_fields to what tells them apart (`botstats "
               "probe` finds it)")
    return IdsNotUnique(f"{head}, and {where} holds different records at the same time: "
                        f"{_shown(times)}, so they would become one row. {_NOTHING} {fix}.")


_NOTHING = "Nothing of this run was archived but its rejects and errors."


def _shown(values: Sequence[str]) -> str:
    return ", ".join(f'"{v}"' for v in values[:SHOWN]) + (" ..." if len(values) > SHOWN else "")


def _names(names: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{name}"' for name in names) + "]"


def _decoded(raw: str) -> Any:
    try:
        return decode_json(raw)
    except ValueError:
        return None
