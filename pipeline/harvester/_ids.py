"""Ids are never merged: a field taken as records' id whose values repeat over records that
differ, in what the service returned (a listing page, a bot's ``/stats``, a user's list), is
refused before anything of the run is written, since keyed by it two records would become one
row. The same record shown twice (a listing that repeats a bot, a page read again) is one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core import IdsNotUnique, same_record
from ._shapes import OWN_ID_NAMES

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


def not_unique(setting: str, name: str, where: str, values: Sequence[str], *,
               derived: bool = False) -> IdsNotUnique:
    """The refusal: ``[fields].<setting> = "<name>"`` repeats ``values`` in ``where``."""
    shown = ", ".join(f'"{v}"' for v in values[:SHOWN]) + (" ..." if len(values) > SHOWN else "")
    if derived:
        head = (f"[fields].stat_id is \"\" (records are told apart by [fields].{setting} = "
                f"\"{name}\"), and {where} holds different records at the same time: {shown}")
        fix = ("Set [fields].stat_id to the field that tells them apart (`botstats probe` "
               "finds it)")
    else:
        head = (f"[fields].{setting} = \"{name}\" is not unique in {where}: {shown} each "
                f"name several different records")
        fix = (f"Set [fields].{setting} to the field that tells them apart (`botstats probe` "
               f"finds it)")
    return IdsNotUnique(f"{head}, so they would become one row. Nothing of this run was "
                        f"archived but its rejects and errors. {fix}.")
