"""Identity without ids (issue 32): stat records that carry no id are told apart by their time,
by their time and the field that differs among records at one time, or by their content
(``[fields].stat_key``). The keys, the fast page path beside the careful one, what the probe
chooses and why, the refusal that advises the key, and probe -> ``--write`` -> harvest ->
the archive equals the service -> one new record a bot -> equal again, against the embedded
service playing bots that post one record per shard."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import query

from pipeline.archive._store import ArchivePaths, connect
from pipeline.core import FieldSettings, canonical_json, decode_json, load_settings
from pipeline.harvester import HarvestOptions, harvest
from pipeline.harvester._ids import stat_keys_not_unique
from pipeline.harvester._records import (
    Invalid,
    parse_stats,
    parse_stats_raw,
    stat_key,
)
from pipeline.harvester._shapes import stat_key_choice
from pipeline.interface import split_array
from pipeline.probe import run_probe, write_settings
from pipeline.service import RunningService

T0 = "2024-06-01T00:00:00Z"
T1 = "2024-06-01T06:00:00Z"
TIME = FieldSettings(stat_id="", stat_key="time")
BY_SHARD = FieldSettings(stat_id="", stat_key="fields", stat_key_fields=("timestamp", "shard_id"))
CONTENT = FieldSettings(stat_id="", stat_key="content")


def sha1(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()


def rec(when: str = T0, **more: Any) -> dict[str, Any]:
    return {"bot_id": "b1", "timestamp": when, "users": 10, "guilds": 2, **more}


# --- the keys ---------------------------------------------------------------------------------
def test_a_record_keyed_by_its_time_keeps_the_key_it_always_had() -> None:
    key = sha1("b1", "2024-06-01T00:00:00+00:00")
    assert stat_key(rec(), "b1", TIME) == key
    # stat_id = "" alone is the older spelling of stat_key = "time"
    assert stat_key(rec(), "b1", FieldSettings(stat_id="")) == key
    # the instant counts, not its spelling
    assert stat_key(rec("2024-06-01T02:00:00+02:00"), "b1", TIME) == key
    assert stat_key(rec(1717200000), "b1", TIME) == key
    assert stat_key(rec(), "b2", TIME) != key


def test_a_record_keyed_by_fields_is_known_by_their_values() -> None:
    zero, one = rec(shard_id=0), rec(shard_id=1, users=5)
    assert stat_key(zero, "b1", BY_SHARD) == sha1("b1", "2024-06-01T00:00:00+00:00", "0")
    assert stat_key(zero, "b1", BY_SHARD) != stat_key(one, "b1", BY_SHARD)
    # the figures are no part of the key: an edited count keeps it
    assert stat_key(zero, "b1", BY_SHARD) == stat_key({**zero, "users": 99}, "b1", BY_SHARD)
    # a field a record lacks counts as null; text and numbers are told apart
    assert stat_key(rec(), "b1", BY_SHARD) == sha1("b1", "2024-06-01T00:00:00+00:00", "null")
    assert stat_key(rec(shard_id="0"), "b1", BY_SHARD) != stat_key(zero, "b1", BY_SHARD)
    # with the time among them, the time field is still required
    with pytest.raises(Invalid, match="missing timestamp field 'timestamp'"):
        stat_key({"shard_id": 0, "users": 1}, "b1", BY_SHARD)


def test_a_record_keyed_by_its_content_is_one_row_however_it_is_spelled() -> None:
    record = rec(shard_id=0, custom=[{"name": "region", "value": "eu"}])
    again = json.loads(json.dumps(dict(reversed(list(record.items()))), indent=2))
    assert stat_key(record, "b1", CONTENT) == stat_key(again, "b1", CONTENT) \
        == sha1("b1", canonical_json(record))
    # any change is another record
    assert stat_key({**record, "users": 11}, "b1", CONTENT) != stat_key(record, "b1", CONTENT)


# The careful path and the typed (msgspec) path give the same rows, for every key: twins at
# one time, times spelled several ways, a key field missing, text, a large integer or an
# object in a key field (the typed path hands those to the careful one), a bad record.
PAGE = [
    rec(T0, shard_id=0), rec(T0, shard_id=1, users=4),
    rec("2024-06-01T08:00:00+02:00", shard_id=0, users=3), rec(T1, shard_id=1),
    rec("2024-06-01T12:00:00", shard_id="2"), rec(1717243200, shard_id=None),
    rec("2024-06-01T18:00:00.250Z"), rec("2024-06-02T00:00:00Z", shard_id=2**70),
    rec("2024-06-02T06:00:00Z", shard_id={"n": 1}, custom={"region": "eu"}),
    rec("2024-06-02T12:00:00Z", users=-1),
]


@pytest.mark.parametrize("fields", [TIME, BY_SHARD, CONTENT,
                                    FieldSettings(stat_key="fields",
                                                  stat_key_fields=("shard_id",))],
                         ids=["time", "fields", "content", "fields-without-time"])
@pytest.mark.parametrize("records", [PAGE, PAGE[:4]], ids=["odd", "usual"])
def test_the_typed_page_path_keys_records_as_the_careful_one_does(
        fields: FieldSettings, records: list[Any]) -> None:
    body = json.dumps(records).encode()
    split = split_array(body)
    assert split is not None
    received = datetime(2024, 6, 3, tzinfo=UTC)
    fast = parse_stats_raw(split.body, split.items, "b1", fields, received_at=received)
    decoded = [decode_json(bytes(item)) for item in split.items]  # as the harvest decodes them
    careful = parse_stats(decoded, "b1", fields, received_at=received)
    assert fast.stat_id == careful.stat_id
    assert fast.recorded_at == careful.recorded_at and fast.users == careful.users
    assert [reason for reason, _ in fast.rejects] == [reason for reason, _ in careful.rejects]
    assert fast.stat_id == [stat_key(r, "b1", fields) for r in decoded if r["users"] >= 0]


@pytest.mark.parametrize("fields", [TIME, BY_SHARD, CONTENT], ids=["time", "fields", "content"])
def test_a_usual_page_without_ids_takes_the_typed_path(fields: FieldSettings,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.harvester import _records

    def careful(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a usual page went record by record")

    monkeypatch.setattr(_records, "_raw_page_by_record", careful)
    split = split_array(json.dumps(PAGE[:4]).encode())
    assert split is not None
    page = parse_stats_raw(split.body, split.items, "b1", fields,
                           received_at=datetime(2024, 6, 3, tzinfo=UTC))
    assert len(page) == 4 and not page.rejects


# --- what tells records apart, decided from records -------------------------------------------
@pytest.mark.parametrize(("groups", "key", "fields", "words"), [
    ([[rec(T0), rec(T1)], [rec(T0)]], "time", ("timestamp",), "no two of the 3 records of 2 bots"),
    # a record read twice is one record
    ([[rec(T0), rec(T0)]], "time", ("timestamp",), "no two"),
    ([[rec(T0, shard_id=0), rec(T0, shard_id=1, users=4)], [rec(T1)]], "fields",
     ("timestamp", "shard_id"), "1 time holds several records of a bot, and 'shard_id' "
                                "differs among the records at each"),
    # a shard is a better name than a region; figures, flags and measures are no key
    ([[rec(T0, region="eu", shard=0, latency=1.5, up=True),
       rec(T0, region="us", shard=1, latency=2.5, up=False, users=4)]], "fields",
     ("timestamp", "shard"), "'region' differs too"),
    ([[rec(T0, latency=1.5), rec(T0, latency=2.5, users=4)]], "content", (),
     "no field but their figures tells them apart"),
    # a field that tells apart some shared times but not all is no key
    ([[rec(T0, part=0), rec(T0, part=1, users=4), rec(T1, part=0), rec(T1, part=0, users=4)]],
     "content", (), "2 times hold"),
])
def test_the_key_of_records_without_an_id_is_what_tells_them_apart(
        groups: list[list[Any]], key: str, fields: tuple[str, ...], words: str) -> None:
    choice = stat_key_choice(groups, "timestamp")
    assert (choice.key, choice.fields) == (key, fields)
    assert words in choice.why


def test_records_keyed_by_time_that_share_one_are_refused_with_the_key_that_fits() -> None:
    records = [rec(T0, shard_id=0), rec(T0, shard_id=1, users=4)]
    raws = [json.dumps(r) for r in records]
    keys = [stat_key(r, "b1", TIME) for r in records]
    message = str(stat_keys_not_unique(TIME, "GET /bots/b1/stats", keys, raws, keys[:1]))
    assert '[fields].stat_key is "time"' in message
    assert f'holds different records at the same time: "{T0}"' in message
    assert 'Set [fields].stat_key = "fields" and [fields].stat_key_fields = ["timestamp", ' \
           '"shard_id"]' in message
    twins = [rec(T0), rec(T0, users=4)]
    message = str(stat_keys_not_unique(FieldSettings(stat_id=""), "GET /bots/b1/stats",
                                       ["k", "k"], [json.dumps(r) for r in twins], ["k"]))
    assert '[fields].stat_id is ""' in message and 'Set [fields].stat_key = "content"' in message


# --- against the embedded service: bots that post one record per shard, no ids ---------------
SHARDED: dict[str, Any] = {"bots": 14, "history_days": 3, "stats_per_day": 4,
                           "stat_ids": "none", "repeated_times": 0.5}


def _settings(svc: RunningService, tmp: Path, config: Path | None = None,
              **more: Any) -> Any:
    return load_settings(config, env={}, overrides={
        "service.base_url": svc.base_url, "store.db": str(tmp / "archive.ducklake"),
        "retry.backoff_base": 0.01, "retry.backoff_max": 0.05, **more})


def _key(bot_id: str, record: dict[str, Any], stat_key_name: str) -> str:
    """The key docs/harvest.md promises, worked out here on its own."""
    when = datetime.fromisoformat(record["timestamp"]).astimezone(UTC).isoformat()
    if stat_key_name == "fields":
        return sha1(bot_id, when, json.dumps(record.get("shard_id")))
    return sha1(bot_id, json.dumps(record, sort_keys=True, separators=(",", ":"),
                                   ensure_ascii=False))


def _served(svc: RunningService, stat_key_name: str) -> list[tuple[Any, ...]]:
    return sorted(
        (bot_id, _key(bot_id, r, stat_key_name),
         datetime.fromisoformat(r["timestamp"]).astimezone(UTC), r["users"], r["guilds"],
         r["commands_executed"])
        for bot_id in svc.directory.bot_ids() for r in svc.directory.valid_stats(bot_id))


def _archived(settings: Any) -> list[tuple[Any, ...]]:
    return sorted(query(settings, "SELECT bot_id, stat_id, recorded_at, users, guilds, "
                                  "commands_executed FROM bot_stats"))


def _per_bot(rows: list[tuple[Any, ...]]) -> Counter[str]:
    return Counter(row[0] for row in rows)


def _custom_count(settings: Any) -> int:
    return query(settings, "SELECT count(*) FROM bot_stat_custom")[0][0]


def _served_custom(svc: RunningService) -> int:
    return sum(len(r.get("custom") or []) for b in svc.directory.bot_ids()
               for r in svc.directory.valid_stats(b))


def _archive_is_the_service(settings: Any, svc: RunningService, stat_key_name: str) -> None:
    archived, served = _archived(settings), _served(svc, stat_key_name)
    assert _per_bot(archived) == _per_bot(served)  # a row per record, twins included
    assert archived == served
    assert _custom_count(settings) == _served_custom(svc)


@pytest.mark.slow
def test_probe_then_harvest_archives_every_record_of_bots_posting_one_per_shard(
        tmp_path: Path, service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(**SHARDED)
    twins = [b for b in svc.directory.bot_ids()
             if len({r["timestamp"] for r in svc.directory.valid_stats(b)})
             < len(svc.directory.valid_stats(b))]
    assert twins, "the service plays no bot posting one record per shard"
    config = tmp_path / "config.toml"
    config.write_text("")
    report = run_probe(_settings(svc, tmp_path))
    assert not report.stopped, report.stopped
    found = next(f for f in report.findings if f.what == "stat key")
    assert found.result.startswith("fields: records are told apart by 'timestamp' and "
                                   "'shard_id'"), found.result
    assert "'shard_id' differs among the records at each" in found.result
    written = write_settings(report, config)
    assert {"fields.stat_id", "fields.stat_key", "fields.stat_key_fields"} <= set(written)
    assert 'stat_key_fields = ["timestamp", "shard_id"]' in config.read_text()
    settings = _settings(svc, tmp_path, config)
    assert (settings.fields.stat_id, settings.fields.stat_key,
            settings.fields.stat_key_fields) == ("", "fields", ("timestamp", "shard_id"))

    first = harvest(settings)
    assert (first.status, first.rejects) == ("complete", 0), first.message
    _archive_is_the_service(settings, svc, "fields")

    svc.directory.advance(1)
    again = harvest(settings)
    assert again.status == "complete", again.message
    bots = len(svc.directory.bot_ids())
    assert again.stats_added == bots + len(twins)
    _archive_is_the_service(settings, svc, "fields")
    listing = 6  # one page of the listing walked, verified and its head read again (x2)
    assert again.requests <= listing + 2 * bots  # GET /stat and the whole /stats a bot

    idle = harvest(settings)
    assert (idle.status, idle.stats_added) == ("complete", 0)
    # GET /stat's record (the last twin) is the newest archived: no /stats read
    assert idle.bots_up_to_date == bots and idle.requests <= listing + bots


def test_records_keyed_by_content_are_archived_once_each_run_after_run(
        tmp_path: Path, service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(**SHARDED)
    settings = _settings(svc, tmp_path, **{"fields.stat_id": "", "fields.stat_key": "content"})
    first = harvest(settings)
    assert first.status == "complete", first.message
    _archive_is_the_service(settings, svc, "content")
    svc.directory.advance(1)
    assert harvest(settings).status == "complete"
    full = harvest(settings, HarvestOptions(full=True))  # every record read again: still one row each
    assert (full.status, full.stats_added, full.stats_updated) == ("complete", 0, 0)
    _archive_is_the_service(settings, svc, "content")


def test_records_sharing_a_time_keyed_by_time_fail_the_run_naming_the_key_that_fits(
        tmp_path: Path, service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(**SHARDED)
    settings = _settings(svc, tmp_path, **{"fields.stat_id": ""})
    report = harvest(settings)
    assert report.status == "failed"
    assert '[fields].stat_id is "" (records are told apart by [fields].stat_time = ' \
           '"timestamp")' in report.message
    assert 'Set [fields].stat_key = "fields" and [fields].stat_key_fields = ["timestamp", ' \
           '"shard_id"]' in report.message
    assert query(settings, "SELECT count(*) FROM bot_stats") == [(0,)]


def _edit_archived(settings: Any, bot_id: str, keyed: FieldSettings) -> tuple[str, str]:
    """Make the archive hold another version of one record of ``bot_id`` (its users + 1), as if
    the service had edited that record since: (its key before, its key now)."""
    paths = ArchivePaths.of(settings)
    con = connect(paths)
    try:
        key, raw = con.execute("SELECT stat_id, raw::VARCHAR FROM bot_stats WHERE bot_id = ? "
                               "ORDER BY recorded_at LIMIT 1", [bot_id]).fetchall()[0]
        record = json.loads(raw)
        record["users"] += 1
        edited = stat_key(record, bot_id, keyed)
        con.execute("UPDATE bot_stats SET stat_id = ?, users = users + 1, raw = ? "
                    "WHERE bot_id = ? AND stat_id = ?", [edited, canonical_json(record),
                                                         bot_id, key])
        con.execute("UPDATE bot_stat_custom SET stat_id = ? WHERE bot_id = ? AND stat_id = ?",
                    [edited, bot_id, key])
    finally:
        con.close()
    return key, edited


@pytest.mark.parametrize(("stat_key_name", "rows", "updated"), [("fields", 0, 1),
                                                                ("content", 1, 0)])
def test_a_record_edited_in_place_is_updated_under_field_keys_and_kept_twice_under_content(
        tmp_path: Path, service_factory: Callable[..., RunningService], stat_key_name: str,
        rows: int, updated: int) -> None:
    # docs/harvest.md#identity: with field keys --full rewrites the record to its new version
    # (one row); with content keys the new version is another record, and the old one stays.
    svc = service_factory(bots=4, history_days=2, stats_per_day=2, stat_ids="none",
                          repeated_times=1.0)
    more = {"fields.stat_id": "", "fields.stat_key": stat_key_name}
    if stat_key_name == "fields":
        more["fields.stat_key_fields"] = ("timestamp", "shard_id")
    settings = _settings(svc, tmp_path, **more)
    assert harvest(settings).status == "complete"
    bot_id = svc.directory.bot_ids()[0]
    before, edited = _edit_archived(settings, bot_id, settings.fields)
    assert (before == edited) is (stat_key_name == "fields")
    hourly = harvest(settings)  # an hourly run reads only what is newer: nothing
    assert (hourly.stats_added, hourly.stats_updated) == (0, 0)
    full = harvest(settings, HarvestOptions(full=True))
    assert (full.status, full.stats_added, full.stats_updated) == ("complete", rows, updated)
    archived = _archived(settings)
    assert len(archived) == len(_served(svc, stat_key_name)) + rows
