"""Whether a run did what it says: the rules, per kind of record and of request, that keep a run
from ending ``complete`` when a whole kind failed, and the message that names what failed, what
came back and the fix (docs/harvest.md, "When a run is not complete").

Pure: the harvest tallies what it meets (:class:`RunTally`), and :func:`judge` reads the tally.
Records (bots and stats of the listing and ``/stats``; the user, their bots, servers and
webhooks of the snapshot):

- bot, stat: at least 90% of at least 5 refused, whatever the reasons: **failed**; every one
  refused but fewer than 5: **partial** (too few to tell a wrong setting from bad records);
- snapshot kinds: the user record refused, or a list refused whole: **failed**; a list with
  some records refused: **partial** (a snapshot is whole or the run is not complete).

Requests (``/stat`` and ``/stats`` of each bot): more than half of at least 5 failed, or every
one of fewer, for any cause, a 404 included: **failed**, unless they are 404s and ``GET
/bots/<id>`` finds the bots (a service that answers 404 for a bot without records). Other
failures are errors the run already counts (``partial``). A ``/stats`` read whole
(``[service].stats_page_size = 0``) that is only the service's first page: **failed** (no
``/stat`` check showed it, so :func:`cut_check` names one read that tells, the caller makes it).

A failure whose cause is a setting (a field name, the ids of bots) is :attr:`Verdict.setting`:
the run writes nothing but its evidence (rejects, errors). The advice for a wrong field names a
field only when botstats' rules for it (:mod:`._shapes`) take it from the refused records of
that kind, and, for the ids of bots and users, the service answers with the record at
``/bots/<it>`` or ``/users/<it>`` (:func:`checks` lists those reads, the caller makes them).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..core import FieldSettings, RunStatus
from ._records import StatPage
from ._shapes import Candidate, custom_keys, decided_id, id_candidates, time_candidates

NEARLY_ALL = 0.9  # share of a kind's records refused that fails the run
MIN_RECORDS = 5  # fewer records (or requests) of a kind than this tell a setting from bad luck
SAMPLES = 20  # records kept per kind and reason to read what they carry instead
MISSING_CHECKS = 3  # bots whose /stats answered 404 looked up with GET /bots/<id>
SNAPSHOT_KINDS = ("user", "user bot", "server", "webhook")
# The [fields] key of each record kind's id, and the kind botstats' id rules read it as.
ID_KEYS = {"bot": "bot_id", "user bot": "bot_id", "stat": "stat_id", "user": "user_id",
           "server": "server_id", "webhook": "webhook_id"}
_RULES_KIND = {"user bot": "bot"}
# The request kinds judged, as messages name them.
STAT_READ, STATS_READ = "GET /bots/:id/stat", "GET /bots/:id/stats"
# Reasons (_records' words) that blame a field, and the [fields] key each names.
_ID_REASON = re.compile(r"^(missing )?(?:\w+ )?id field '([^']+)'")
_TIME_REASON = re.compile(r"^(missing )?timestamp field '([^']+)'")
_CUSTOM_REASON = re.compile(r"^custom field without '([^']+)'")


@dataclass
class KindTally:
    """The records of one kind a run met: kept, refused by reason, a few refused raws."""

    kept: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    samples: dict[str, list[str]] = field(default_factory=dict)
    kept_with_custom: int = 0  # kept records that have custom fields

    @property
    def seen(self) -> int:
        return self.kept + sum(self.refused.values())


@dataclass
class RequestTally:
    """The reads of one kind a run made: how many, and those that failed by cause (the status,
    or the error's class), with the first thing each cause said."""

    tried: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    said: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # bots whose read answered 404


@dataclass
class RunTally:
    """What one run met, for :func:`judge` and for schema drift (``fields``)."""

    records: dict[str, KindTally] = field(default_factory=dict)
    requests: dict[str, RequestTally] = field(default_factory=dict)
    fields: dict[str, set[str]] = field(default_factory=dict)  # "stat" / "bot" -> field names
    # Ids of bots and of users the run met (a few): a field holding them in another kind of
    # record is a reference, not that record's id.
    known: dict[str, set[str]] = field(default_factory=lambda: {"bot": set(), "user": set()})
    bots_found: list[bool] = field(default_factory=list)  # GET /bots/<id> of 404'd bots
    # The longest /stats list read whole with no /stat check to show it was cut: (bot id, its
    # length, its first record); and what reading past its end showed (None: not cut).
    whole: tuple[str, int, Any] | None = None
    cut: str | None = None

    def kind(self, kind: str) -> KindTally:
        return self.records.setdefault(kind, KindTally())

    def keep(self, kind: str, count: int) -> None:
        self.kind(kind).kept += count

    def reject(self, kind: str, reason: str, raw: str) -> None:
        tally = self.kind(kind)
        tally.refused[reason] += 1
        kept = tally.samples.setdefault(reason, [])
        if len(kept) < SAMPLES and raw not in kept:
            kept.append(raw)

    def read(self, page: StatPage) -> None:
        """A bot's /stats as read (before the records already archived are set aside: the
        verdict judges what the service sent, and rejects come again with a bot read whole)."""
        stats = self.kind("stat")
        stats.kept += len(page)
        stats.kept_with_custom += len(set(page.custom_row))

    def read_whole(self, bot_id: str, length: int, first: Any) -> None:
        """A bot's /stats read whole, ``first`` its first record (decoded)."""
        if self.whole is None or length > self.whole[1]:
            self.whole = (bot_id, length, first)

    def unreject(self, kind: str, reason: str) -> None:
        """A refusal that is no news of this run (see ``Batch.settle``)."""
        refused = self.kind(kind).refused
        refused[reason] -= 1
        if refused[reason] <= 0:
            del refused[reason]

    def request(self, kind: str) -> RequestTally:
        return self.requests.setdefault(kind, RequestTally())

    def failed(self, kind: str, cause: str, said: str, bot_id: str | None = None) -> None:
        tally = self.request(kind)
        tally.failed[cause] += 1
        tally.said.setdefault(cause, said)
        if cause == "404" and bot_id is not None and len(tally.missing) < MISSING_CHECKS:
            tally.missing.append(bot_id)

    def saw_fields(self, kind: str, record: Any) -> None:
        """Note the top-level fields of a record (decoded, or its JSON text)."""
        if isinstance(record, str | bytes | bytearray | memoryview):
            try:
                record = orjson.loads(bytes(record) if not isinstance(record, str) else record)
            except orjson.JSONDecodeError:
                return
        if isinstance(record, dict):
            self.fields.setdefault(kind, set()).update(record)


@dataclass(frozen=True)
class Check:
    """A read that tells whether ``value`` (of the records' field ``field``) addresses a bot or a
    user: the service answers ``/bots/<value>`` or ``/users/<value>`` with that record."""

    kind: str  # "bot" | "user"
    field: str
    value: str


@dataclass(frozen=True)
class Verdict:
    status: RunStatus  # PARTIAL or FAILED
    message: str
    setting: bool = False  # failed for a setting: the run writes nothing but its evidence


def judge(tally: RunTally, fields: FieldSettings,
          answers: Mapping[Check, bool] | None = None) -> Verdict | None:
    """The worst of the rules above for this run (None: none fails it); ``answers`` are the
    results of :func:`checks`."""
    verdicts = [v for v in (*(_judge_records(kind, tally, fields, answers or {})
                              for kind in tally.records),
                            *(_judge_reads(kind, tally, fields) for kind in tally.requests))
                if v is not None]
    if tally.cut is not None:
        verdicts.append(Verdict(RunStatus.FAILED, tally.cut, setting=True))
    if not verdicts:
        return None
    failed = RunStatus.FAILED
    worst = failed if any(v.status == failed for v in verdicts) else RunStatus.PARTIAL
    shown = sorted(verdicts, key=lambda v: v.status != failed)
    return Verdict(worst, " ".join(v.message for v in shown),
                   any(v.setting for v in verdicts if v.status == failed))


def checks(tally: RunTally, fields: FieldSettings) -> list[Check]:
    """The reads :func:`judge` wants answered to advise a field for the ids of bots or users."""
    out = []
    for kind in ("bot", "user bot", "user"):
        blamed = _blamed(kind, tally, fields)
        if blamed is None or blamed.key != ID_KEYS[kind]:
            continue
        for found in _id_candidates(kind, tally, blamed.name)[:MISSING_CHECKS]:
            value = _first_value(tally.kind(kind), blamed.name, found.field)
            if value is not None:
                out.append(Check("user" if kind == "user" else "bot", found.field, value))
    return list(dict.fromkeys(out))


def cut_check(tally: RunTally) -> tuple[str, int, Any] | None:
    """The bot whose ``/stats``, read whole, is to be read past its end (``?limit=n&skip=n``,
    n its length) to tell whether the service paged it: when no ``GET /bots/:id/stat`` of this
    run showed a cut list (a first run, ``--full``), once."""
    if tally.request(STAT_READ).tried or tally.whole is None or tally.whole[1] < 2:
        return None
    return tally.whole


def cut_message(bot_id: str, length: int, more: int) -> str:
    """What :func:`cut_check`'s read showed when it found records past the list's end."""
    return (f"GET /bots/{bot_id}/stats answered {length} records, and ?limit={length}&skip="
            f"{length} {more} more: the service pages /stats, and [service].stats_page_size = 0 "
            f"reads only its first page, so this run would archive part of each bot's records. "
            f"Set [service].stats_page_size to the service's page size ({length} if that is "
            f"it; `botstats probe` finds it).")


def _judge_records(kind: str, tally: RunTally, fields: FieldSettings,
                   answers: Mapping[Check, bool]) -> Verdict | None:
    records = tally.records[kind]
    refused, seen = sum(records.refused.values()), records.seen
    if not refused:
        return None
    snapshot = kind in SNAPSHOT_KINDS
    blamed = _blamed(kind, tally, fields)
    if blamed is not None and blamed.custom:
        # Judged among the records that have custom fields: the others say nothing of it.
        seen = refused + records.kept_with_custom
    if snapshot and refused < seen:
        return Verdict(RunStatus.PARTIAL, f"The user snapshot lacks {refused} of the {seen} {kind} "
                                  f"records (\"{records.refused.most_common(1)[0][0]}\"); they "
                                  f"are kept in table rejects.")
    few = not snapshot and seen < MIN_RECORDS
    if not snapshot and refused < (seen if few else NEARLY_ALL * seen):
        return None  # a few bad records among good ones: counted in rejects
    which = " with custom fields" if blamed and blamed.custom else ""
    counted = (f"{refused} of {seen} {kind} records{which} this run were rejected; they are kept "
               f"whole in table rejects, and the next run after the fix archives them.")
    if blamed is None:
        reason, count = records.refused.most_common(1)[0]
        message = (f"{kind} records are not in a shape botstats reads: \"{reason}\" ({count} of "
                   f"them). See them in table rejects; `botstats probe` reports what it cannot "
                   f"read and what to do. {counted}")
    else:
        message = f"{_blamed_message(kind, tally, fields, answers, blamed)} {counted}"
    if few:
        return Verdict(RunStatus.PARTIAL, f"{message} Too few records to tell a wrong setting from bad "
                                  f"records: the run is partial.")
    return Verdict(RunStatus.FAILED, message, setting=True)


@dataclass(frozen=True)
class Blame:
    """The [fields] setting that nearly all refused records of a kind were refused for: its
    ``key``, the field ``name`` it gives, and whether the records lack it (``missing``) or
    hold something else in it."""

    key: str
    name: str
    missing: bool

    @property
    def custom(self) -> bool:
        return self.key.startswith("custom_")


def _blamed_message(kind: str, tally: RunTally, fields: FieldSettings,
                    answers: Mapping[Check, bool], blamed: Blame) -> str:
    """What is wrong with the records of ``kind`` and the setting that reads them right (the
    count of them rejected follows)."""
    key, name, missing = blamed.key, blamed.name, blamed.missing
    what = {"stat_time": "a time", "custom_name": "a custom field's name",
            "custom_value": "a custom field's value"}.get(key, "an id")
    if blamed.custom:
        head = f"the custom fields of {kind} records have no '{name}'"
    elif missing:
        head = f"{kind} records have no '{name}'"
    else:
        head = f"{kind} records' '{name}' is not {what} botstats reads"
    found = _advised(kind, key, name, tally, answers)
    if found is not None:
        also = ""
        if key == "custom_name":  # the value's key is likely apart from the default too
            keys = custom_keys(_samples(tally.kind(kind), name))
            if keys is not None and keys[1] != fields.custom_value:
                also = f" and set [fields].custom_value = \"{keys[1]}\""
        return (f"{head}; they carry '{found.field}' ({found.why}): set [fields].{key} = "
                f"\"{found.field}\"{also} or run `botstats probe`.")
    return (f"{head}, and no field of theirs passes botstats' rules for {what}: run `botstats "
            f"probe`, which asks the service, or set [fields].{key} to the field that holds it "
            f"(see a record in table rejects).")


def _blamed(kind: str, tally: RunTally, fields: FieldSettings) -> Blame | None:
    """([fields] key, its name, whether missing) when nearly all refused records of ``kind`` were
    refused for a configured field; None when they were for something else."""
    blamed: Counter[tuple[str, str, bool]] = Counter()
    for reason, count in tally.kind(kind).refused.items():
        for pattern, key in ((_ID_REASON, ID_KEYS[kind]), (_TIME_REASON, "stat_time"),
                             (_CUSTOM_REASON, "custom_name")):
            match = pattern.match(reason)
            if match is None:
                continue
            missing, name = (bool(match[1]), match[2]) if pattern.groups == 2 else (True, match[1])
            setting = "custom_value" if key == "custom_name" and name == fields.custom_value \
                else key
            if getattr(fields, setting, None) == name:
                blamed[(setting, name, missing)] += count
    if not blamed or blamed.total() < NEARLY_ALL * sum(tally.kind(kind).refused.values()):
        return None
    return Blame(*blamed.most_common(1)[0][0])


def _samples(records: KindTally, name: str) -> list[dict[str, Any]]:
    """The refused records that blame the field ``name``, decoded."""
    out = []
    for reason, raws in records.samples.items():
        if f"'{name}'" not in reason:
            continue
        for raw in raws:
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                out.append(record)
    return out


def _id_candidates(kind: str, tally: RunTally, name: str) -> list[Candidate]:
    samples = _samples(tally.kind(kind), name)
    if len(samples) < 2 and kind != "user":
        return []  # too few to tell an id by (the user is one record: the service is asked)
    rules = _RULES_KIND.get(kind, kind)
    foreign = set().union(*(ids for owner, ids in tally.known.items() if owner != rules))
    return id_candidates(samples, rules, foreign=foreign)


def _first_value(records: KindTally, name: str, candidate: str) -> str | None:
    for record in _samples(records, name):
        if candidate in record:
            return str(record[candidate]).strip()
    return None


def _advised(kind: str, key: str, name: str, tally: RunTally,
             answers: Mapping[Check, bool]) -> Candidate | None:
    samples = _samples(tally.kind(kind), name)
    if key == "stat_time":
        times = time_candidates(samples)
        return times[0] if len(samples) >= 2 and times else None
    if key in ("custom_name", "custom_value"):
        keys = custom_keys(samples)
        if keys is None:
            return None
        return Candidate(keys[0] if key == "custom_name" else keys[1],
                         "the key of every custom field" if key == "custom_name" else
                         "the other key of every custom field")
    found = _id_candidates(kind, tally, name)
    if kind in ("bot", "user bot", "user"):  # only one the service answers for
        target = "user" if kind == "user" else "bot"
        for candidate in found:
            value = _first_value(tally.kind(kind), name, candidate.field)
            if answers.get(Check(target, candidate.field, value or "")):
                return Candidate(candidate.field, f"GET /{target}s/<it> answers with the record")
        return None
    return decided_id(found, _RULES_KIND.get(kind, kind))


def _judge_reads(kind: str, tally: RunTally, fields: FieldSettings) -> Verdict | None:
    reads = tally.requests[kind]
    failed = sum(reads.failed.values())
    if not failed or reads.tried == 0:
        return None
    whole = failed * 2 > reads.tried if reads.tried >= MIN_RECORDS else failed == reads.tried
    if not whole:
        return None
    cause, count = reads.failed.most_common(1)[0]
    said = reads.said[cause]
    if cause == "404":
        if any(tally.bots_found):
            return None  # the bots are there: the service answers 404 for "no records"
        looked = (f"; GET /bots/<id> of {len(tally.bots_found)} of them answered 404 too"
                  if tally.bots_found else "")
        message = (f"{count} of {reads.tried} {kind} answered 404 (e.g. {said}){looked}: the "
                   f"ids taken from [fields].bot_id = \"{fields.bot_id}\" do not address bots. "
                   f"Set [fields].bot_id to the field the service's paths take (`botstats "
                   f"probe` finds it).")
    else:
        message = (f"{count} of {reads.tried} {kind} failed ({said}); the run's other failures "
                   f"are in table harvest_errors.")
    if reads.tried < MIN_RECORDS:
        return Verdict(RunStatus.PARTIAL, message)
    return Verdict(RunStatus.FAILED, message, setting=cause == "404")


__all__ = ["Check", "RunTally", "Verdict", "checks", "cut_check", "cut_message", "judge"]
