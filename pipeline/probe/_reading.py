"""What the probe's replies say (pure): the listing's paging and cap, the shapes of bot and stat records, /stats paging and order, the limits the service announces."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ..core import Settings
from ..harvester import (
    TIME_NAMES,
    Candidate,
    custom_keys,
    decided_id,
    id_candidates,
    name_candidates,
    stat_key_choice,
    time_candidates,
    time_kind,
    value_types,
)
from ..interface import Reply
from ._paging import brief, failed, items
from ._report import COUNTS, RATE_HEADERS, Finding, Proposal


def ids_of(records: Sequence[Any], id_field: str | None) -> list[str]:
    if id_field is None:
        return [repr(r) for r in records]
    return [str(r.get(id_field)) if isinstance(r, dict) else repr(r) for r in records]


def read_head(page: Sequence[Any], again: Reply | None,
              id_field: str | None) -> list[Finding]:
    """GET /bots: whether two reads of the head agree, and the order of the bots."""
    found: list[Finding] = []
    if again is not None and not failed(again):
        same = ids_of(items(again)[:len(page)], id_field) == ids_of(page, id_field)[
            :len(items(again))]
        found.append(Finding("listing", "two reads of the head",
                             "agree" if same else "differ (the listing moves, or its order is "
                             "not stable: botstats pages with an overlap and re-reads the head)",
                             [brief(again)]))
    found.append(Finding("listing", "order", listing_order(page)))
    return found


def listing_order(records: Sequence[Any]) -> str:
    """Which field, if any, the listing is sorted by (ascending or descending)."""
    objects = [r for r in records if isinstance(r, dict)]
    if len(objects) < 3:
        return "cannot tell from fewer than 3 bots"
    for name in objects[0]:
        values: list[Any] = [r.get(name) for r in objects]  # compared only once checked below
        if not all(isinstance(v, int | float | str) and not isinstance(v, bool) for v in values):
            continue
        if len({type(v) for v in values}) > 1 or len(set(values)) < 2:
            continue
        if all(a <= b for a, b in zip(values, values[1:], strict=False)):
            return f"by '{name}', ascending"
        if all(a >= b for a, b in zip(values, values[1:], strict=False)):
            return f"by '{name}', descending"
    return "by no field of the records (the service's own order)"


def read_bot_shape(records: Sequence[Any], candidates: Sequence[Candidate],
                   confirmed: Candidate | None, tried: Sequence[Reply],
                   settings: Settings) -> tuple[list[Finding], list[Proposal]]:
    """Which fields of a bot record are its id (a candidate of the id rules whose value ``GET
    /bots/<it>`` answers with that bot: ``confirmed``, from the reads ``tried``) and its name."""
    fields = settings.fields
    found: list[Finding] = []
    proposals: list[Proposal] = []
    evidence = [brief(r) for r in tried]
    if confirmed is not None:
        found.append(Finding("records", "bot id", f"'{confirmed.field}' ({confirmed.why}, and "
                             f"GET /bots/<it> answers with that bot)", evidence))
        proposals.append(Proposal("fields.bot_id", confirmed.field, confirmed.why,
                                  fields.bot_id))
    else:
        why = ("no bot was read" if not records else
               f"GET /bots/<it> answers with the bot for none of "
               f"{', '.join(repr(c.field) for c in candidates)}" if candidates else
               f"no field of the {len(records)} bot records passes botstats' rules for an id "
               f"(in every record, unique, an id's shape, no reference to another resource)")
        found.append(Finding("records", "bot id", f"unknown: {why}", evidence))
        proposals.append(Proposal("fields.bot_id", None, why, fields.bot_id))
    names = name_candidates(records, exclude=[confirmed.field] if confirmed else [])
    if names:
        found.append(Finding("records", "bot name", f"'{names[0].field}'"))
        proposals.append(Proposal("fields.bot_name", names[0].field, names[0].why,
                                  fields.bot_name))
    else:
        proposals.append(Proposal("fields.bot_name", None, "no text field named like a name",
                                  fields.bot_name))
    return found, proposals


def read_stat_shape(records: Sequence[Any], reply: Reply, settings: Settings,
                    foreign: Collection[str]) -> tuple[list[Finding], list[Proposal], str | None]:
    """Which fields of a bot's stat records are their id and time (``foreign``: ids of bots and
    users, which a stat's own id is not), the custom fields' keys, the types of counts and
    loads; also returns the time field found (for the order of /stats)."""
    fields = settings.fields
    found: list[Finding] = []
    proposals: list[Proposal] = []
    evidence = [brief(reply)]
    times = time_candidates(records)
    time = times[0] if times and (len(times) == 1 or times[0].field in TIME_NAMES) else None
    ids = id_candidates(records, "stat", foreign=foreign) if len(records) >= 2 else []
    chosen = decided_id(ids, "stat")
    if chosen is not None:
        found.append(Finding("records", "stat id", f"'{chosen.field}' ({chosen.why})", evidence))
        proposals.append(Proposal("fields.stat_id", chosen.field, chosen.why, fields.stat_id))
        proposals.append(Proposal("fields.stat_key", "id", f"records are told apart by their "
                                  f"id, '{chosen.field}'", fields.stat_key))
        proposals.append(Proposal("fields.stat_key_fields", [], "read only with stat_key = "
                                  "\"fields\"", fields.stat_key_fields))
    else:
        if len(records) < 2:
            why = "fewer than 2 stat records read: too few to tell an id"
        elif ids:
            why = f"several fields could be the id: {', '.join(repr(c.field) for c in ids)}"
        else:
            why = ""
        if why:
            found.append(Finding("records", "stat id", f"unknown: {why}", evidence))
            for key in ("stat_id", "stat_key", "stat_key_fields"):
                proposals.append(Proposal(f"fields.{key}", None, why, getattr(fields, key)))
        else:
            # What tells the records apart then is read_stat_key's, over more bots' records.
            found.append(Finding("records", "stat id", "none: no field passes botstats' rules "
                                 "for an id (see 'stat key' for what tells records apart)",
                                 evidence))
            proposals.append(Proposal("fields.stat_id", "", "no field is an id",
                                      fields.stat_id))
    if time is not None:
        others = ", ".join(f"'{c.field}'" for c in times if c is not time)
        found.append(Finding("records", "stat time", f"'{time.field}' ({time.why} in "
                             f"all {len(records)} records)" + (f"; also times: {others}" if others
                                                               else ""), evidence))
        proposals.append(Proposal("fields.stat_time", time.field, time.why, fields.stat_time))
    else:
        why = (f"several fields read as times: {', '.join(repr(c.field) for c in times)}"
               if times else "no field reads as a time in every record")
        proposals.append(Proposal("fields.stat_time", None, why, fields.stat_time))
    keys = custom_keys(records)
    if keys:
        found.append(Finding("records", "custom fields", f"items keyed '{keys[0]}' (name) and "
                             f"'{keys[1]}' (value)"))
        proposals.append(Proposal("fields.custom_name", keys[0], "the name key of custom fields",
                                  fields.custom_name))
        proposals.append(Proposal("fields.custom_value", keys[1], "the other key of custom "
                                  "fields", fields.custom_value))
    else:
        objects = any(isinstance(r.get("custom"), dict) and r["custom"] for r in records
                      if isinstance(r, dict))
        if objects:
            found.append(Finding("records", "custom fields", "one object of name -> value (read "
                                 "as it is)"))
        why = ("custom fields come as one object: these keys are not used" if objects else
               "no record read has custom fields")
        for key in ("custom_name", "custom_value"):
            proposals.append(Proposal(f"fields.{key}", None, why, getattr(fields, key)))
    types = "; ".join(f"{name}: " + ", ".join(f"{kind} x{n}" for kind, n in
                                              value_types(records, name).items())
                      for name in COUNTS)
    found.append(Finding("records", "types of counts and loads", types))
    return found, proposals, time.field if time else None


def read_stat_key(groups: Sequence[Sequence[Any]], replies: Sequence[Reply],
                  time_field: str | None, settings: Settings) -> tuple[list[Finding],
                                                                      list[Proposal]]:
    """What tells apart stat records that carry no id (``groups``: the records of each bot
    read, from ``replies``): their time, their time and a field that differs among records at
    one time, or their content (:func:`~pipeline.harvester.stat_key_choice`)."""
    fields = settings.fields
    evidence = [brief(r) for r in replies]
    if time_field is None:
        why = "no stat time was decided, which every key of a record without an id starts from"
        return ([Finding("records", "stat key", f"unknown: {why}", evidence)],
                [Proposal(f"fields.{key}", None, why, getattr(fields, key))
                 for key in ("stat_key", "stat_key_fields")])
    choice = stat_key_choice(groups, time_field)
    said = {"time": f"the time alone ('{time_field}')",
            "fields": " and ".join(f"'{name}'" for name in choice.fields),
            "content": "the whole record (a hash of its canonical JSON)"}[choice.key]
    found = [Finding("records", "stat key", f"{choice.key}: records are told apart by {said}: "
                     f"{choice.why}", evidence)]
    return found, [Proposal("fields.stat_key", choice.key, choice.why, fields.stat_key),
                   Proposal("fields.stat_key_fields", list(choice.fields) if choice.key ==
                            "fields" else [], "the fields of stat_key = \"fields\"" if
                            choice.key == "fields" else "read only with stat_key = \"fields\"",
                            fields.stat_key_fields)]


def read_stats_order(records: list[Any], paged: bool, last: Reply | None,
                     time_field: str | None, id_field: str | None) -> list[Finding]:
    """GET /bots/:id/stats: oldest or newest first, and whether /stat is the newest record of
    the records read (``paged``: the first page of a paged list)."""
    found: list[Finding] = []
    order = None
    if time_field and len(records) >= 2:
        times = [r.get(time_field) for r in records if isinstance(r, dict)]
        sortable = [_sortable(t) for t in times]
        stamps = [t for t in sortable if t is not None]
        if len(stamps) == len(sortable):
            if stamps == sorted(stamps):
                order = "oldest first"
            elif stamps == sorted(stamps, reverse=True):
                order = "newest first"
            else:
                order = "in no time order"
    found.append(Finding("stats", "order of records", order or "cannot tell (no time field, or too few "
                         "records)"))
    if last is not None:
        newest = _newest(records, time_field)
        got = last.json()
        if last.status != 200 or not isinstance(got, dict):
            result = f"GET /stat answered {last.status}"
        elif newest is None:
            result = "cannot tell (no time field to find the newest record by)"
        elif got == newest or (id_field and got.get(id_field) == newest.get(id_field)):
            result = "yes: /stat is the newest record of /stats"
        elif paged:
            result = ("cannot tell: /stats is paged and its first page does not hold /stat's "
                      "record (botstats reads every page)")
        else:
            result = ("no: /stat is not the newest record read from /stats (a paged /stats may "
                      "hold it on a later page)")
        found.append(Finding("stats", "/stat is the newest record", result, [brief(last)]))
    return found


def _sortable(value: Any) -> float | None:
    from ..harvester import Invalid, parse_time

    if time_kind(value) is None:
        return None
    try:
        return parse_time(value).timestamp()
    except Invalid:
        return None


def _newest(records: Sequence[Any], time_field: str | None) -> dict[str, Any] | None:
    if not time_field:
        return None
    dated = [(t, r) for r in records if isinstance(r, dict)
             and (t := _sortable(r.get(time_field))) is not None]
    return max(dated, key=lambda pair: pair[0])[1] if dated else None


def read_limits(replies: Sequence[Reply], rate_limited: int) -> list[Finding]:
    """Rate-limit headers seen, 429s met, and the shape of error bodies."""
    headers: dict[str, str] = {}
    for reply in replies:
        for seen in (*reply.limited, reply.headers):
            for name, value in seen.items():
                if name.lower().startswith(RATE_HEADERS):
                    headers.setdefault(name.lower(), value)
    found = [Finding("limits", "rate-limit headers",
                     ", ".join(f"{k}: {v}" for k, v in headers.items()) or "none seen"),
             Finding("limits", "429 answers", f"{rate_limited} met (each waited out)")]
    errors = [r for r in replies if r.status >= 400 and not r.rate_limited]
    shapes = sorted({_error_shape(r) for r in errors})
    found.append(Finding("limits", "error bodies", "; ".join(shapes) or "no error seen",
                         [brief(r) for r in errors[:3]]))
    return found


def _error_shape(reply: Reply) -> str:
    data = reply.json()
    if isinstance(data, dict):
        return "a JSON object with " + ", ".join(f"'{k}'" for k in data)
    if data is not None:
        return f"JSON {type(data).__name__}"
    return "an empty body" if not reply.body.strip() else reply.headers.get(
        "content-type", "text").split(";")[0] + " text"
