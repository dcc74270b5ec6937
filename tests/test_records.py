"""Record validation: every rule that turns a raw stat or bot record into an archive row or a
reject reason. Pure functions, so each rule is one row of a table: (input, expected row) or
(input, words the reason must contain).
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.core._json import same_record
from pipeline.core._settings import FieldSettings
from pipeline.harvester._records import (
    Invalid,
    parse_bot,
    parse_count,
    parse_percent,
    parse_stat,
    parse_time,
    stat_key,
)

BOT = "1234567890123456789"
DEFAULTS = FieldSettings()
NO_ID = FieldSettings(stat_id="")
JUNE_1 = datetime(2024, 6, 1, tzinfo=UTC)
DROP = object()  # a field to remove from the base record


def stat_record(**changes: Any) -> dict[str, Any]:
    """A valid record as the embedded service sends it, with ``changes`` applied."""
    record: dict[str, Any] = {
        "id": f"{BOT}-7",
        "bot_id": BOT,
        "timestamp": "2024-06-01T00:00:00Z",
        "users": 1200,
        "guilds": 40,
        "shards": 1,
        "memory_load": 55,
        "cpu_load": 12,
        "commands_executed": 9000,
        "custom": [{"name": "region", "value": "eu-west"}],
    }
    for name, value in changes.items():
        if value is DROP:
            del record[name]
        else:
            record[name] = value
    return record


# --- records that are refused, with the reason kept in `rejects` ------------------------------
REFUSED = [
    # (case, record, words the reason contains)
    ("missing id", stat_record(id=DROP), ["missing id field 'id'"]),
    ("empty id", stat_record(id="  "), ["id field 'id'", "empty"]),
    ("bool id", stat_record(id=True), ["id field 'id'", "string or integer"]),
    ("float id", stat_record(id=1.5), ["id field 'id'", "string or integer"]),
    ("object id", stat_record(id={"x": 1}), ["id field 'id'", "string or integer"]),
    ("missing timestamp", stat_record(timestamp=DROP), ["missing timestamp field 'timestamp'"]),
    ("null timestamp", stat_record(timestamp=None), ["timestamp field 'timestamp'", "missing"]),
    ("unparseable timestamp", stat_record(timestamp="yesterday at noon"),
     ["timestamp field 'timestamp'", "not an ISO 8601 time", "yesterday at noon"]),
    ("bool timestamp", stat_record(timestamp=True), ["timestamp field 'timestamp'", "not a time"]),
    ("list timestamp", stat_record(timestamp=[2024]), ["timestamp field 'timestamp'", "not a time"]),
    ("missing users", stat_record(users=DROP), ["missing required field 'users'"]),
    ("null guilds", stat_record(guilds=None), ["missing required field 'guilds'"]),
    ("negative users", stat_record(users=-1), ["users", "must not be negative", "-1"]),
    ("negative commands", stat_record(commands_executed=-3),
     ["commands_executed", "must not be negative"]),
    ("negative numeric string", stat_record(shards="-2"), ["shards", "must not be negative"]),
    ("non-numeric guilds", stat_record(guilds="lots"), ["guilds must be a number", "lots"]),
    ("fractional guilds", stat_record(guilds=1.5), ["guilds must be a whole number", "1.5"]),
    ("bool users", stat_record(users=True), ["users must be a number", "true"]),
    ("bool shards", stat_record(shards=False), ["shards must be a number", "false"]),
    ("list users", stat_record(users=[1]), ["users must be a number"]),
    ("nan users", stat_record(users=float("nan")), ["users must be a finite number"]),
    ("infinite string", stat_record(guilds="1e400"), ["guilds must be a finite number"]),
    ("cpu over 100", stat_record(cpu_load=150), ["cpu_load", "percentage from 0 to 100", "150"]),
    ("cpu just over 100", stat_record(cpu_load=100.5), ["cpu_load", "percentage from 0 to 100"]),
    ("negative memory", stat_record(memory_load=-5), ["memory_load", "percentage from 0 to 100"]),
    ("percent as string over 100", stat_record(memory_load="101"),
     ["memory_load", "percentage from 0 to 100"]),
    ("bool percent", stat_record(cpu_load=True), ["cpu_load must be a number"]),
    ("non-numeric percent", stat_record(cpu_load="high"), ["cpu_load must be a number", "high"]),
    ("custom neither list nor object", stat_record(custom="region=eu"),
     ["custom must be a list or an object"]),
    ("custom item without name", stat_record(custom=[{"value": 1}]),
     ["custom field without 'name'"]),
    ("custom item not an object", stat_record(custom=["region"]), ["custom field without 'name'"]),
    ("record not an object", ["not", "a", "record"], ["must be a JSON object"]),
    ("record is null", None, ["must be a JSON object"]),
]


@pytest.mark.parametrize(("record", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_stat_that_breaks_a_rule_is_refused_with_its_reason(record: Any, words: list[str]) -> None:
    with pytest.raises(Invalid) as caught:
        parse_stat(record, BOT, DEFAULTS)
    for word in words:
        assert word in str(caught.value)


# --- records from the future: [fields].max_future_skew after their receipt -----------------------
RECEIVED = datetime(2024, 6, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(("stamp", "skew", "refused"), [
    ("2024-06-02T12:00:00Z", "1d", False),  # exactly the skew ahead: a clock a day off is kept
    ("2024-06-02T12:00:00.000001Z", "1d", True),
    ("2024-06-01T13:00:00Z", "30m", True),
    ("2025-01-01T00:00:00Z", "1d", True),
    (1717243200 + 86400 * 2, "1d", True),  # epoch seconds two days ahead of receipt
    ("2024-06-01T13:00:00+02:00", "0s", False),  # 11:00 UTC: an offset is not a future
])
def test_a_stat_stamped_beyond_the_future_skew_is_refused(stamp: Any, skew: str,
                                                          refused: bool) -> None:
    from pipeline.harvester._records import latest_allowed, parse_stats

    fields = FieldSettings(max_future_skew=skew)
    page = parse_stats([stat_record(timestamp=stamp)], BOT, fields, received_at=RECEIVED)
    assert (len(page.rejects), len(page)) == ((1, 0) if refused else (0, 1))
    if refused:
        reason = page.rejects[0][0]
        assert "more than [fields].max_future_skew" in reason and f"({skew})" in reason
        with pytest.raises(Invalid):
            parse_stat(stat_record(timestamp=stamp), BOT, fields,
                       latest=latest_allowed(fields, RECEIVED))


# --- records that are accepted, and the row they become ---------------------------------------
ACCEPTED = [
    # (case, changes, {row field: expected value})
    ("as served", {}, {"stat_id": f"{BOT}-7", "recorded_at": JUNE_1, "users": 1200,
                       "guilds": 40, "shards": 1, "memory_load": 55.0, "cpu_load": 12.0,
                       "commands_executed": 9000}),
    ("integer id", {"id": 987}, {"stat_id": "987"}),
    ("numeric strings", {"users": "42", "guilds": " 7 ", "cpu_load": "55.5", "shards": "3"},
     {"users": 42, "guilds": 7, "cpu_load": 55.5, "shards": 3}),
    ("integral floats", {"users": 42.0, "commands_executed": 1e3},
     {"users": 42, "commands_executed": 1000}),
    ("zero counts", {"users": 0, "guilds": 0}, {"users": 0, "guilds": 0}),
    ("percent bounds", {"memory_load": 0, "cpu_load": 100}, {"memory_load": 0.0, "cpu_load": 100.0}),
    ("optional fields null", {"shards": None, "memory_load": None, "cpu_load": None,
                              "commands_executed": None},
     {"shards": None, "memory_load": None, "cpu_load": None, "commands_executed": None}),
    ("optional fields absent", {"shards": DROP, "memory_load": DROP, "cpu_load": DROP,
                                "commands_executed": DROP, "custom": DROP},
     {"shards": None, "memory_load": None, "cpu_load": None, "commands_executed": None,
      "custom": ()}),
    ("epoch seconds", {"timestamp": 1717200000}, {"recorded_at": JUNE_1}),
    ("epoch seconds with fraction", {"timestamp": 1717200000.25},
     {"recorded_at": JUNE_1.replace(microsecond=250000)}),
    ("epoch milliseconds", {"timestamp": 1717200000000}, {"recorded_at": JUNE_1}),
    ("epoch seconds as text", {"timestamp": "1717200000"}, {"recorded_at": JUNE_1}),
    ("an HTTP date", {"timestamp": "Sat, 01 Jun 2024 00:00:00 GMT"}, {"recorded_at": JUNE_1}),
    ("an integer id", {"id": 1234567890123456789}, {"stat_id": "1234567890123456789"}),
    ("custom as one object", {"custom": {"region": "eu", "latency_ms": 12.5}},
     {"custom": (("region", "eu", None), ("latency_ms", "12.5", 12.5))}),
    ("naive ISO is UTC", {"timestamp": "2024-06-01T00:00:00"}, {"recorded_at": JUNE_1}),
    ("ISO with offset", {"timestamp": "2024-06-01T02:00:00+02:00"}, {"recorded_at": JUNE_1}),
    ("ISO with millis", {"timestamp": "2024-06-01T00:00:00.125Z"},
     {"recorded_at": JUNE_1.replace(microsecond=125000)}),
    ("unknown fields kept in raw only", {"flavour": "vanilla"}, {"users": 1200}),
]


@pytest.mark.parametrize(("changes", "expected"), [c[1:] for c in ACCEPTED],
                         ids=[c[0] for c in ACCEPTED])
def test_a_valid_stat_becomes_a_row(changes: dict[str, Any], expected: dict[str, Any]) -> None:
    record = stat_record(**changes)
    row = parse_stat(record, BOT, DEFAULTS)
    for name, value in expected.items():
        assert getattr(row, name) == value, name
    assert row.recorded_at.tzinfo is not None and row.recorded_at.utcoffset().total_seconds() == 0
    assert json.loads(row.raw) == record  # raw keeps the record exactly, unknown fields too


def test_raw_is_one_spelling_per_record_whatever_the_key_order() -> None:
    record = stat_record()
    shuffled = dict(reversed(list(record.items())))
    assert parse_stat(record, BOT, DEFAULTS).raw == parse_stat(shuffled, BOT, DEFAULTS).raw


@pytest.mark.parametrize(("a", "b", "same"), [
    ('{"a":1,"b":[1,2]}', '{"a":1,"b":[1,2]}', True),
    ('{"a":1,"b":[1,2]}', '{ "b" : [1, 2],\n "a": 1 }', True),  # key order and spacing
    ('{"a":1}', '{"a":1.0}', False), ('{"a":1}', '{"a":true}', False),
    ('{"a":[1,2]}', '{"a":[2,1]}', False), ('{"a":1}', '{"a":1,"b":null}', False),
    ('{"a":1}', 'not json', False),
])
def test_same_record_compares_json_not_spelling(a: str, b: str, same: bool) -> None:
    assert same_record(a, b) is same
    assert same_record(b, a) is same


def test_custom_fields_of_mixed_types_keep_text_and_number() -> None:
    record = stat_record(custom=[
        {"name": "region", "value": "eu-west"},
        {"name": "latency_ms", "value": 12.5},
        {"name": "premium_guilds", "value": 3},
        {"name": "voice_enabled", "value": True},
        {"name": "beta", "value": False},
        {"name": "tags", "value": ["a", "b"]},
        {"name": "limits", "value": {"max": 5}},
        {"name": "nothing", "value": None},
        {"name": "no_value"},
        {"name": 42, "value": "numeric name"},
    ])
    assert parse_stat(record, BOT, DEFAULTS).custom == (
        ("region", "eu-west", None),
        ("latency_ms", "12.5", 12.5),
        ("premium_guilds", "3", 3.0),
        ("voice_enabled", "true", 1.0),
        ("beta", "false", 0.0),
        ("tags", '["a","b"]', None),
        ("limits", '{"max":5}', None),
        ("nothing", None, None),
        ("no_value", None, None),
        ("42", "numeric name", None),
    )


def test_a_custom_field_named_twice_keeps_the_last_value() -> None:
    record = stat_record(custom=[{"name": "region", "value": "eu"}, {"name": "region", "value": "us"}])
    assert parse_stat(record, BOT, DEFAULTS).custom == (("region", "us", None),)


# --- keys ----------------------------------------------------------------------------------------
def test_a_stat_is_keyed_by_the_service_id_when_configured() -> None:
    assert stat_key(stat_record(), BOT, DEFAULTS) == f"{BOT}-7"


def test_without_a_service_id_the_key_is_sha1_of_bot_and_instant() -> None:
    expected = hashlib.sha1(f"{BOT}\x1f2024-06-01T00:00:00+00:00".encode()).hexdigest()
    spellings = ["2024-06-01T00:00:00Z", "2024-06-01T00:00:00", "2024-06-01T02:00:00+02:00",
                 1717200000, 1717200000000]
    keys = {stat_key(stat_record(id=DROP, timestamp=t), BOT, NO_ID) for t in spellings}
    assert keys == {expected}  # the same instant, however spelled, is the same record
    row = parse_stat(stat_record(id=DROP), BOT, NO_ID)
    assert row.stat_id == expected


def test_without_a_service_id_keys_differ_by_bot_and_by_instant() -> None:
    keys = {
        stat_key(stat_record(timestamp="2024-06-01T00:00:00Z"), BOT, NO_ID),
        stat_key(stat_record(timestamp="2024-06-01T00:00:01Z"), BOT, NO_ID),
        stat_key(stat_record(timestamp="2024-06-01T00:00:00Z"), "other-bot", NO_ID),
    }
    assert len(keys) == 3


@pytest.mark.parametrize(("record", "words"), [
    (stat_record(timestamp=DROP), ["missing timestamp field 'timestamp'"]),
    (stat_record(timestamp="soon"), ["not an ISO 8601 time"]),
    ("text", ["must be a JSON object"]),
], ids=["missing timestamp", "bad timestamp", "not an object"])
def test_without_a_service_id_a_record_without_a_time_has_no_key(record: Any,
                                                                 words: list[str]) -> None:
    with pytest.raises(Invalid) as caught:
        stat_key(record, BOT, NO_ID)
    for word in words:
        assert word in str(caught.value)


# --- configurable field names -------------------------------------------------------------------
RENAMED = FieldSettings(bot_id="bot_uuid", bot_name="title", stat_id="uuid", stat_time="ts",
                        custom_name="key", custom_value="val")


def test_field_names_come_from_config() -> None:
    record = {"uuid": "s-1", "ts": "2024-06-01T00:00:00Z", "users": 5, "guilds": 2,
              "custom": [{"key": "region", "val": "eu"}]}
    row = parse_stat(record, BOT, RENAMED)
    assert (row.stat_id, row.recorded_at, row.users, row.guilds) == ("s-1", JUNE_1, 5, 2)
    assert row.custom == (("region", "eu", None),)
    bot = parse_bot({"bot_uuid": 77, "title": "Helper"}, RENAMED)
    assert (bot.bot_id, bot.name) == ("77", "Helper")


@pytest.mark.parametrize(("record", "words"), [
    ({"id": "s-1", "ts": "2024-06-01T00:00:00Z", "users": 5, "guilds": 2},
     ["missing id field 'uuid'"]),
    ({"uuid": "s-1", "timestamp": "2024-06-01T00:00:00Z", "users": 5, "guilds": 2},
     ["missing timestamp field 'ts'"]),
    ({"uuid": "s-1", "ts": "2024-06-01T00:00:00Z", "users": 5, "guilds": 2,
      "custom": [{"name": "region", "value": "eu"}]},
     ["custom field without 'key'"]),
], ids=["default id name", "default time name", "default custom name"])
def test_renamed_fields_are_required_under_their_configured_names(record: dict[str, Any],
                                                                  words: list[str]) -> None:
    with pytest.raises(Invalid) as caught:
        parse_stat(record, BOT, RENAMED)
    for word in words:
        assert word in str(caught.value)


# --- bots ------------------------------------------------------------------------------------------
def test_a_bot_record_becomes_a_row_with_its_raw_json() -> None:
    record = {"id": BOT, "name": "Helper", "tags": ["fun"], "server_count": 40}
    row = parse_bot(record, DEFAULTS)
    assert (row.bot_id, row.name) == (BOT, "Helper")
    assert json.loads(row.raw) == record


def test_a_bot_without_a_name_is_kept_with_a_null_name() -> None:
    assert parse_bot({"id": 5}, DEFAULTS).name is None


@pytest.mark.parametrize(("record", "words"), [
    ({"name": "no id"}, ["missing bot id field 'id'"]),
    ({"id": ""}, ["bot id field 'id'", "empty"]),
    ({"id": None}, ["bot id field 'id'", "string or integer"]),
    ({"id": False}, ["bot id field 'id'", "string or integer"]),
    ([BOT], ["a bot record must be a JSON object"]),
], ids=["missing id", "empty id", "null id", "bool id", "not an object"])
def test_a_bot_without_a_usable_id_is_refused(record: Any, words: list[str]) -> None:
    with pytest.raises(Invalid) as caught:
        parse_bot(record, DEFAULTS)
    for word in words:
        assert word in str(caught.value)


# --- the scalar parsers -----------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "expected"), [
    (0, 0), (7, 7), ("7", 7), (" 7 ", 7), (7.0, 7), ("7.0", 7), ("1e3", 1000),
])
def test_parse_count_accepts_whole_non_negative_numbers(value: Any, expected: int) -> None:
    assert parse_count(value, "users") == expected


@pytest.mark.parametrize(("value", "words"), [
    (-1, "must not be negative"), ("-1", "must not be negative"), (1.5, "whole number"),
    (True, "must be a number"), (False, "must be a number"), ("", "must be a number"),
    ("seven", "must be a number"), (None, "must be a number"), ([], "must be a number"),
    (math.inf, "finite"), ("nan", "finite"),
])
def test_parse_count_refuses(value: Any, words: str) -> None:
    with pytest.raises(Invalid, match=words):
        parse_count(value, "users")


@pytest.mark.parametrize(("value", "expected"), [(0, 0.0), (100, 100.0), ("42.5", 42.5), (99.9, 99.9)])
def test_parse_percent_accepts_0_to_100(value: Any, expected: float) -> None:
    assert parse_percent(value, "cpu_load") == expected


@pytest.mark.parametrize(("value", "words"), [
    (-0.1, "percentage from 0 to 100"), (100.01, "percentage from 0 to 100"),
    (150, "percentage from 0 to 100"), (True, "must be a number"), ("busy", "must be a number"),
])
def test_parse_percent_refuses(value: Any, words: str) -> None:
    with pytest.raises(Invalid, match=words):
        parse_percent(value, "cpu_load")


@pytest.mark.parametrize(("value", "expected"), [
    ("2024-06-01T00:00:00Z", JUNE_1),
    ("2024-06-01T00:00:00", JUNE_1),
    ("2024-06-01 00:00:00", JUNE_1),
    ("2024-05-31T20:00:00-04:00", JUNE_1),
    (1717200000, JUNE_1),
    (1717200000.0, JUNE_1),
    (1717200000000, JUNE_1),
    (1717200000000000, JUNE_1),
    (1717200000000000000, JUNE_1),
    (1717200000123456789, JUNE_1.replace(microsecond=123456)),
    ("1717200000", JUNE_1),
    ("1717200000000", JUNE_1),
    (" 1717200000.5 ", JUNE_1.replace(microsecond=500000)),
    ("Sat, 01 Jun 2024 00:00:00 GMT", JUNE_1),
    ("Sat, 01 Jun 2024 02:00:00 +0200", JUNE_1),
    (0, datetime(1970, 1, 1, tzinfo=UTC)),
])
def test_parse_time_reads_iso_and_epoch_as_utc(value: Any, expected: datetime) -> None:
    parsed = parse_time(value)
    assert parsed == expected
    assert parsed.utcoffset().total_seconds() == 0


@pytest.mark.parametrize(("value", "words"), [
    (None, "missing"), (True, "not a time"), ("2024-13-01", "not an ISO 8601 time"),
    ("", "not an ISO 8601 time"), (math.nan, "not a time"), (1e300, "out of range"),
    ({}, "not a time"), ("Someday, 1 Jun", "not an ISO 8601 time"),
])
def test_parse_time_refuses(value: Any, words: str) -> None:
    with pytest.raises(Invalid, match=words):
        parse_time(value)
