"""A whole /stats page is validated exactly like its records one by one.

`parse_stats` checks a usual page column by column for speed; these tests hold it to the
record-by-record rules of `parse_stat` on pages of every shape: clean, with one odd record of
each kind, and randomly mixed.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from pipeline.config import FieldSettings
from pipeline.records import StatPage, _page_by_record, _usual_page, parse_stats

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


# One odd record each: refused ones, and accepted ones the column path does not take.
ODD = [
    {"id": None}, {"id": "  "}, {"id": 7}, {"id": " padded "}, {"timestamp": None},
    {"timestamp": "yesterday"}, {"timestamp": "2024-02-30T25:61:00Z"}, {"timestamp": 1717200000},
    {"timestamp": "2024-06-01T00:00:00"}, {"timestamp": "2024-05-31T20:00:00-04:00"},
    {"timestamp": " 2024-06-01T00:00:00Z "}, {"users": -1}, {"users": None}, {"users": "12"},
    {"users": 12.0}, {"users": True}, {"guilds": "lots"}, {"shards": None}, {"shards": 2**63},
    {"cpu_load": 150}, {"memory_load": -5}, {"memory_load": 42.5}, {"cpu_load": None},
    {"custom": None}, {"custom": []}, {"custom": "x"}, {"custom": [{"value": 1}]},
    {"custom": [{"name": " "}]}, {"custom": [{"name": "a", "value": 1}, {"name": "a", "value": 2}]},
    {"custom": [{"name": "n", "value": [1, {"b": 2}]}]}, {"custom": [{"name": "n"}]},
    {"extra": "unknown fields are kept in raw"}, {"big": 2**70},
]


def test_a_usual_page_takes_the_column_path_and_gives_the_same_rows() -> None:
    page = [record(i) for i in range(30)]
    assert _usual_page(page, DEFAULTS) is not None
    assert columns(parse_stats(page, BOT, DEFAULTS)) == columns(_page_by_record(page, BOT, DEFAULTS))


@pytest.mark.parametrize("changes", ODD, ids=[str(c)[:50] for c in ODD])
def test_a_page_with_one_odd_record_gives_the_same_rows_and_reasons(changes: dict[str, Any]) -> None:
    page = [record(i) for i in range(5)]
    page[2] = record(2, **changes)
    if changes.get("id", "") is None:
        del page[2]["id"]
    assert columns(parse_stats(page, BOT, DEFAULTS)) == columns(_page_by_record(page, BOT, DEFAULTS))


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
        assert columns(parse_stats(page, BOT, DEFAULTS)) == \
            columns(_page_by_record(page, BOT, DEFAULTS))


def test_without_a_service_id_the_page_is_read_record_by_record() -> None:
    no_id = FieldSettings(stat_id="")
    page = [record(i) for i in range(3)]
    assert _usual_page(page, no_id) is None
    assert len(parse_stats(page, BOT, no_id)) == 3
