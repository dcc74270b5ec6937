"""What the probe says beside its findings: whether a harvest with the proposed settings reads
the records the probe saw, as they are, and every setting a harvest reads that the probe did
not decide, with the reason (pure)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core import FieldSettings, Settings
from ..harvester import Invalid, entity_id, parse_bot, parse_stats
from ._report import Finding, Proposal

# What the service shows and the probe reads; any other [fields] or [service] setting is a
# choice of the operator's.
PROBED = frozenset({
    "fields.bot_id", "fields.bot_name", "fields.stat_id", "fields.stat_key",
    "fields.stat_key_fields", "fields.stat_time",
    "fields.custom_name", "fields.custom_value", "fields.user_id", "fields.server_id",
    "fields.webhook_id", "service.page_size", "service.stats_page_size",
    "service.user_lists_page_size", "service.token_on_bot_reads"})
CHOICE = "a choice of yours, which the service does not show: your setting (or the default) holds"
SHOWN = 3  # reasons named per kind


def proposed_fields(fields: FieldSettings, proposals: Sequence[Proposal]) -> FieldSettings:
    """``fields`` with the decided ``fields.*`` proposals applied."""
    changes: dict[str, Any] = {
        p.key.split(".", 1)[1]: tuple(p.value) if isinstance(p.value, list) else p.value
        for p in proposals if p.decided and p.key.startswith("fields.")}
    return dataclasses.replace(fields, **changes)


def read_acceptance(seen: Mapping[str, list[Any]], fields: FieldSettings,
                    proposals: Sequence[Proposal]) -> list[Finding]:
    """Per kind of record read, how many a harvest with the proposed settings archives as they
    are, and why it would refuse the others (the reasons its rejects would carry)."""
    settings = proposed_fields(fields, proposals)
    readers: dict[str, Callable[[Any], object]] = {
        "bot": lambda r: parse_bot(r, settings),
        "user": lambda r: entity_id(r, settings.user_id, "user"),
        "user bot": lambda r: entity_id(r, settings.bot_id, "bot"),
        "server": lambda r: entity_id(r, settings.server_id, "server"),
        "webhook": lambda r: entity_id(r, settings.webhook_id, "webhook"),
    }
    found = []
    for kind, records in seen.items():
        if not records:
            continue
        refused: Counter[str] = Counter()
        if kind == "stat":
            total = 0
            for bot_id, stats in records:
                page = parse_stats(stats, bot_id, settings)
                total += len(stats)
                refused.update(reason for reason, _ in page.rejects)
        else:
            total = len(records)
            for record in records:
                try:
                    readers[kind](record)
                except Invalid as exc:
                    refused[str(exc)] += 1
        found.append(Finding("records", f"{kind} records as a harvest reads them",
                             _accepted(total, refused)))
    return found


def _accepted(total: int, refused: Counter[str]) -> str:
    if not refused:
        return f"all {total} read as they are"
    count = sum(refused.values())
    reasons = "; ".join(f"\"{reason}\" (x{n})" for reason, n in refused.most_common(SHOWN))
    return (f"{count} of {total} would be refused: {reasons}. A harvest keeps them in table "
            f"rejects, and does not end complete when they are all (or nearly all) of their "
            f"kind: fix the setting a reason names; a reason that names none is a shape "
            f"botstats does not read")


def not_proposed(settings: Settings, proposals: Sequence[Proposal],
                 stopped: str) -> list[Proposal]:
    """Every [fields] and [service] setting a harvest reads that the probe did not propose or
    list, as undecided: one it would read when it stopped early, or one the operator chooses."""
    listed = {p.key for p in proposals}
    out = []
    for section, values in (("fields", settings.fields), ("service", settings.service)):
        for setting in dataclasses.fields(values):
            key = f"{section}.{setting.name}"
            if key in listed:
                continue
            if key in PROBED:
                why = f"not probed: {stopped}" if stopped else "not probed"
            else:
                why = CHOICE
            out.append(Proposal(key, None, why))
    return out


__all__ = ["CHOICE", "not_proposed", "proposed_fields", "read_acceptance"]
