"""The embedded service's planted events: what it plants, that its data shows exactly that, and
the truth it serves on `GET /_admin/events` (what bench/anomalies.py and the report tests judge
botstats by); and its hostile names."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

import httpx
import pytest

from pipeline.service import Directory, RunningService, ServiceConfig
from pipeline.service._data import HOSTILE_CUSTOM, HOSTILE_NAMES

END = datetime(2026, 11, 1, 12)
PLANTED = ServiceConfig(bots=120, history_days=70, stats_per_day=2, end=END, events=0.3)
QUIET = ServiceConfig(bots=120, history_days=70, stats_per_day=2, end=END)


@pytest.fixture(scope="module")
def planted() -> Directory:
    return Directory(PLANTED)


@pytest.fixture(scope="module")
def quiet() -> Directory:
    return Directory(QUIET)


def by_day(records: list[dict[str, Any]], field: str) -> dict[str, list[int]]:
    days: dict[str, list[int]] = {}
    for r in records:
        days.setdefault(r["timestamp"][:10], []).append(r[field])
    return days


def first_of(planted: Directory, kind: str) -> dict[str, Any]:
    """The first event of ``kind`` on a bot with no other event (nor drift)."""
    events = planted.events()
    alone = Counter(e["bot_id"] for e in events)
    return next(e for e in events if e["kind"] == kind and alone[e["bot_id"]] == 1)


def test_the_truth_is_served_and_every_kind_is_planted(
        service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(bots=120, history_days=70, stats_per_day=2, end=END, events=0.3)
    body = httpx.get(f"{svc.base_url}/_admin/events").json()
    assert body["share"] == 0.3 and body["events"] == svc.directory.events()
    kinds = Counter(e["kind"] for e in body["events"])
    assert set(kinds) == {"spike", "drop", "level_shift", "outage", "counter_reset", "drift"}
    listed = set(svc.directory.bot_ids())
    last = (END - timedelta(days=4)).date().isoformat()
    for event in body["events"]:
        assert event["bot_id"] in listed and event["first_day"] <= last
        assert event["anomaly"] is (event["kind"] != "drift")
        assert (event["last_day"] is None) is (event["kind"] == "level_shift")
    # A share of the bots, not all of them: most bots are quiet.
    assert len({e["bot_id"] for e in body["events"] if e["anomaly"]}) < 0.5 * 120
    # Without events: nothing planted, and the truth says so.
    plain = service_factory(bots=5, history_days=10)
    assert httpx.get(f"{plain.base_url}/_admin/events").json() == {"share": 0.0, "events": []}


def test_the_truth_is_the_same_for_the_same_seed(planted: Directory) -> None:
    again = Directory(PLANTED)
    assert again.events() == planted.events()
    other = Directory(ServiceConfig(**{**PLANTED.__dict__, "seed": 2}))
    assert other.events() != planted.events()


def test_a_spike_multiplies_users_on_its_days_and_nothing_else(planted: Directory,
                                                               quiet: Directory) -> None:
    spike = first_of(planted, "spike")
    bot = spike["bot_id"]
    mine, plain = by_day(planted.stats(bot), "users"), by_day(quiet.stats(bot), "users")
    first, last = spike["first_day"], spike["last_day"]
    for day, users in mine.items():
        if first <= day <= last:
            # The same noise, times the event's factor (users are rounded from guilds x ...).
            ratios = [a / b for a, b in zip(users, plain[day], strict=True)]
            assert all(r == pytest.approx(spike["users_factor"], rel=0.02) for r in ratios), day
        else:
            assert users == plain[day] or _spiky_day(quiet, bot, day), day


def test_an_outage_leaves_no_records_and_the_bot_restarts_after(planted: Directory) -> None:
    outage = first_of(planted, "outage")
    records = planted.stats(outage["bot_id"])
    days = sorted(by_day(records, "commands_executed"))
    silent = [d for d in days if outage["first_day"] <= d <= outage["last_day"]]
    assert silent == [] and len(records) == 2 * (70 - outage["days"]) - _missing(planted, records)
    back = (date.fromisoformat(outage["last_day"]) + timedelta(days=1)).isoformat()
    before = by_day(records, "commands_executed")[days[days.index(back) - 1]][-1]
    assert by_day(records, "commands_executed")[back][0] < min(50, before)


def test_a_level_shift_stays(planted: Directory, quiet: Directory) -> None:
    shift = first_of(planted, "level_shift")
    bot = shift["bot_id"]
    mine, plain = by_day(planted.stats(bot), "guilds"), by_day(quiet.stats(bot), "guilds")
    after = [d for d in mine if d >= shift["first_day"]]
    assert len(after) >= 4
    for day in after:
        ratio = sum(mine[day]) / sum(plain[day])
        assert ratio == pytest.approx(shift["guilds_factor"], rel=0.02), day


def test_small_bots_keep_small_integer_counts(planted: Directory) -> None:
    smallest = min(planted.bot_ids(), key=lambda b: planted.stats(b)[-1]["guilds"])
    guilds = [r["guilds"] for r in planted.stats(smallest)]
    assert all(isinstance(g, int) for g in guilds) and max(guilds) < 30
    assert len(set(guilds)) > 1  # noisy by whole guilds, not flat


def test_hostile_names_are_served_as_they_are(service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(bots=12, history_days=3, hostile_names=True)
    listing = httpx.get(f"{svc.base_url}/bots", params={"limit": 12}).json()
    names = [b["name"] for b in listing]
    assert names[0] == HOSTILE_NAMES[0] and names[4] == HOSTILE_NAMES[1]
    assert names[8] == HOSTILE_NAMES[2] and names[1] not in HOSTILE_NAMES
    custom = {c["name"] for bot in listing[::4]
              for c in httpx.get(f"{svc.base_url}/bots/{bot['id']}/stat").json()["custom"]}
    assert custom and custom <= set(HOSTILE_CUSTOM.values())


def _spiky_day(quiet: Directory, bot: str, day: str) -> bool:
    """The plain series' own random spike (off while events are planted)."""
    index = quiet.live_index(bot)
    return index is not None and quiet._profile(index).shape == "spiky"


def _missing(planted: Directory, records: list[dict[str, Any]]) -> int:
    """Records the bot lacks for being created during the history."""
    index = planted.live_index(records[0]["bot_id"])
    assert index is not None
    return planted._profile(index).first_slot
