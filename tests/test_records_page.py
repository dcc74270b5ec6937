"""A whole /stats page is validated exactly like its records one by one.

`parse_stats_raw` decodes a usual page straight into typed records (msgspec) for speed; these
tests hold it to the record-by-record rules of `parse_stat` on pages of every shape: clean, with
one odd record of each kind, randomly mixed, and spelled in different ways.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import orjson
import pytest

from pipeline.core._settings import FieldSettings
from pipeline.harvester._records import (
    StatPage,
    _decoders,
    _raw_page_by_record,
    _typed_page,
    parse_stats,
    parse_stats_raw,
)
from pipeline.interface._client import split_array

BOT = "1234567890123456789"
DEFAULTS = FieldSettings()


def record(slot: int, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": f"{BOT}-{slot}", "bot_id": BOT, "timestamp": f"2024-06-{slot % 28 + 1:02d}T00:00:00Z",
        "users": 1200 + slot, "guilds": 40, "shards": 1, "memory_load": 55, "cpu_load": 12,
        "commands_executed": 9000,
        "custom": [{"name": "region", "value": "eu-west"}, {"name": "latency_ms", "value": 67.9},
                   {"name": "voice_enabled", "value": False}, {"name": "premium", "value": 3}],
    }
    base.update(changes)
    return base


def columns(page: StatPage) -> dict[str, Any]:
    return {name: getattr(page, name) for name in StatPage.__slots__}


def body_of(page: list[Any], *, pretty: bool = False) -> bytes:
    if pretty:
        return json.dumps(page, indent=2, ensure_ascii=False).encode()
    return json.dumps(page, separators=(",", ":")).encode()


def both(body: bytes, fields: FieldSettings = DEFAULTS) -> tuple[dict[str, Any], dict[str, Any]]:
    """The page through parse_stats_raw, and through the record-by-record rules."""
    split = split_array(body)
    assert split is not None
    return (columns(parse_stats_raw(split.body, split.items, BOT, fields)),
            columns(_raw_page_by_record(split.items, BOT, fields)))


# One odd record each: refused ones, and accepted ones the typed path does not take.
ODD = [
    {"id": None}, {"id": "  "}, {"id": 7}, {"id": " padded "}, {"timestamp": None},
    {"timestamp": "yesterday"}, {"timestamp": "2024-02-30T25:61:00Z"}, {"timestamp": 1717200000},
    {"timestamp": "2024-06-01T00:00:00"}, {"timestamp": "2024-05-31T20:00:00-04:00"},
    {"timestamp": " 2024-06-01T00:00:00Z "}, {"users": -1}, {"users": None}, {"users": "12"},
    {"users": 12.0}, {"users": True}, {"guilds": "lots"}, {"shards": None}, {"shards": 2**63},
    {"cpu_load": 150}, {"memory_load": -5}, {"memory_load": 42.5}, {"cpu_load": None},
    {"cpu_load": 1e-7}, {"memory_load": True}, {"memory_load": "50"},
    {"custom": None}, {"custom": []}, {"custom": "x"}, {"custom": [{"value": 1}]},
    {"custom": [{"name": " "}]}, {"custom": [{"name": "a", "value": 1}, {"name": "a", "value": 2}]},
    {"custom": [{"name": "n", "value": [1, {"b": 2}]}]}, {"custom": [{"name": "n"}]},
    {"custom": [{"name": 5, "value": 1}]}, {"custom": [{"name": "n", "value": 2**70}]},
    {"custom": [{"name": "n", "value": 1.5e300}]}, {"custom": [{"name": "n", "value": -0.0}]},
    {"custom": ["not an object"]}, {"custom": [{"name": "é ü", "value": "ünï"}]},
    {"extra": "unknown fields are kept in raw"}, {"big": 2**70},
    {"id": 2**63 + 5}, {"id": 2**70}, {"id": 7.0}, {"timestamp": "1717200000"},
    {"timestamp": 1717200000123456}, {"timestamp": "Sat, 01 Jun 2024 00:00:00 GMT"},
    {"custom": {"region": "eu", "n": 2}}, {"custom": {}}, {"custom": {" ": 1}},
    {"custom": {"n": [1, 2]}},
]


def test_a_usual_page_takes_the_typed_path_and_gives_the_same_rows() -> None:
    body = body_of([record(i) for i in range(30)])
    split = split_array(body)
    assert split is not None
    decoders = _decoders(DEFAULTS)
    assert decoders is not None and len(decoders[0].decode(body)) == 30  # the typed path takes it
    fast, slow = both(body)
    assert fast == slow
    assert [json.loads(r) for r in fast["raw"]] == [record(i) for i in range(30)]


@pytest.mark.parametrize("changes", ODD, ids=[str(c)[:50] for c in ODD])
def test_a_page_with_one_odd_record_gives_the_same_rows_and_reasons(changes: dict[str, Any]) -> None:
    page: list[Any] = [record(i) for i in range(5)]
    page[2] = record(2, **changes)
    if changes.get("id", "") is None:
        del page[2]["id"]
    fast, slow = both(body_of(page))
    assert fast == slow


def test_randomly_mixed_pages_give_the_same_rows_and_reasons() -> None:
    rng = random.Random(7)
    for _ in range(300):
        page: list[Any] = [record(i) for i in range(rng.randint(0, 12))]
        for _ in range(rng.randint(0, 2)):
            if page:
                i = rng.randrange(len(page))
                page[i] = record(i, **copy.deepcopy(rng.choice(ODD)))
        if rng.random() < 0.05:
            page.append("not an object")
        fast, slow = both(body_of(page, pretty=rng.random() < 0.3))
        assert fast == slow


def test_raw_is_each_record_exactly_as_sent() -> None:
    page = [record(1), record(2, extra={"nested": [1, 2.50]})]
    body = body_of(page, pretty=True)
    split = split_array(body)
    assert split is not None
    parsed = parse_stats_raw(split.body, split.items, BOT, DEFAULTS)
    assert [r.encode() in body for r in parsed.raw] == [True, True]
    assert [json.loads(r) for r in parsed.raw] == page


def test_the_typed_path_reads_the_same_values_as_the_canonical_reader() -> None:
    """Decoded pages (bodies only the lenient decoder reads) give the same columns, raw aside."""
    page = [record(i) for i in range(6)]
    typed = columns(parse_stats_raw(*_split(page), BOT, DEFAULTS))
    decoded = columns(parse_stats(page, BOT, DEFAULTS))
    assert {k: v for k, v in typed.items() if k != "raw"} == \
        {k: v for k, v in decoded.items() if k != "raw"}
    assert [json.loads(r) for r in typed["raw"]] == [orjson.loads(r) for r in decoded["raw"]]


def _split(page: list[Any]) -> tuple[bytes, Any]:
    split = split_array(body_of(page))
    assert split is not None
    return split.body, split.items


def test_a_record_that_only_looks_like_json_is_rejected_with_its_text() -> None:
    body = b'[{"id":"a","timestamp":"2024-06-01T00:00:00Z","users":1,"guilds":1},"\xff"]'
    assert split_array(body) is None  # not UTF-8: the client reads it the careful way


@pytest.mark.parametrize("when", ["2024-06-01T00:00:00", "2024-05-31T20:00:00-04:00",
                                  " 2024-06-01T00:00:00Z ", 1717200000, 1717200000000, 1717200000.5])
def test_every_time_spelling_parse_time_reads_takes_the_typed_path(when: Any) -> None:
    page = [record(i, timestamp=when) for i in range(4)]
    body, items = _split(page)
    decoders = _decoders(DEFAULTS)
    assert decoders is not None
    # no fallback: it would raise
    typed = columns(_typed_page(decoders[0].decode(body), items, BOT, DEFAULTS))
    assert typed == columns(_raw_page_by_record(items, BOT, DEFAULTS))
    assert typed["recorded_at"] == [1717200000 * 10**6 + (500_000 if when == 1717200000.5 else 0)] * 4


def test_without_a_service_id_the_typed_path_derives_the_keys_the_record_path_does() -> None:
    no_id = FieldSettings(stat_id="")
    decoders = _decoders(no_id)
    assert decoders is not None
    body, items = _split([record(i) for i in range(3)])
    typed = columns(_typed_page(decoders[0].decode(body), items, BOT, no_id))
    assert typed == columns(_raw_page_by_record(items, BOT, no_id))
    assert len(set(typed["stat_id"])) == 3


def test_other_field_names_take_the_typed_path_too() -> None:
    fields = FieldSettings(stat_id="uuid", stat_time="at", custom_name="k", custom_value="v")
    page = [{"uuid": f"u{i}", "at": "2024-06-01T00:00:00+02:00", "users": i, "guilds": 1,
             "custom": [{"k": "a", "v": i}]} for i in range(4)]
    body, items = _split(page)
    decoders = _decoders(fields)
    assert decoders is not None and len(decoders[0].decode(body)) == 4
    fast = columns(parse_stats_raw(body, items, BOT, fields))
    assert fast == columns(_raw_page_by_record(items, BOT, fields))
    assert fast["stat_id"] == ["u0", "u1", "u2", "u3"] and fast["custom_name"] == ["a"] * 4
