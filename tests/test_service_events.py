"""The embedded service's planted events: what it plants, that its data shows exactly that, and
the truth it serves on `GET /_admin/events` (what bench/anomalies.py and the report tests judge
botstats by); and its hostile names."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

import httpx
import pytest

from pipeline.service import Directory, RunningService, ServiceConfig
from pipeline.service._data import HOSTILE_CUSTOM, HOSTILE_NAMES
from pipeline.service._events import NEAR_FLOOR_MAX, floor, moved

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


def first_of(planted: Directory, kind: str, **more: Any) -> dict[str, Any]:
    """The first event of ``kind`` (with ``more`` of its fields) on a bot with no other event
    (nor drift; its routine days aside)."""
    events = [e for e in planted.events() if not e["kind"].startswith("routine_")]
    alone = Counter(e["bot_id"] for e in events)
    return next(e for e in events if e["kind"] == kind and alone[e["bot_id"]] == 1
                and all(e[k] == v for k, v in more.items()))


def test_the_truth_is_served_and_every_kind_is_planted(
        service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(bots=120, history_days=70, stats_per_day=2, end=END, events=0.3)
    body = httpx.get(f"{svc.base_url}/_admin/events").json()
    assert body["share"] == 0.3 and body["events"] == svc.directory.events()
    kinds = Counter(e["kind"] for e in body["events"])
    assert set(kinds) == {"spike", "drop", "level_shift", "outage", "counter_reset", "drift",
                          "routine_spike", "routine_restart"}
    listed = set(svc.directory.bot_ids())
    last = (END - timedelta(days=4)).date().isoformat()
    for event in body["events"]:
        routine = event["kind"].startswith("routine_")
        assert event["bot_id"] in listed and (routine or event["first_day"] <= last)
        assert event["anomaly"] is (event["kind"] != "drift" and not routine)
        assert (event["last_day"] is None) is (event["kind"] == "level_shift")
    # A share of the spikes, drops and level shifts are near the detector's floors.
    near = [e for e in body["events"] if e["near_floor"]]
    assert near and {e["kind"] for e in near} <= {"spike", "drop", "level_shift"}
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
    """A spiky bot's own random spikes (on other days beside planted events)."""
    index = quiet.live_index(bot)
    return index is not None and quiet._profile(index).shape == "spiky"


def _missing(planted: Directory, records: list[dict[str, Any]]) -> int:
    """Records the bot lacks for being created during the history."""
    index = planted.live_index(records[0]["bot_id"])
    assert index is not None
    return planted._profile(index).first_slot


def test_routine_spikes_and_restarts_go_on_beside_planted_events(planted: Directory) -> None:
    routine = [e for e in planted.events() if e["kind"].startswith("routine_")]
    spike = next(e for e in routine if e["kind"] == "routine_spike"
                 and not any(o["bot_id"] == e["bot_id"] and o["anomaly"]
                             for o in planted.events()))
    guilds = by_day(planted.stats(spike["bot_id"]), "guilds")
    day = spike["first_day"]
    others = sorted(v for d, vs in guilds.items() if d != day for v in vs)
    usual = others[len(others) // 2]
    # The day's guilds are its usual times the spike (noise aside).
    assert min(guilds[day]) / usual == pytest.approx(spike["guilds_factor"], rel=0.25)
    # A routine restart: the command counter starts over that day.
    restart = next(e for e in routine if e["kind"] == "routine_restart")
    records = planted.stats(restart["bot_id"])
    counters = [(r["timestamp"][:10], r["commands_executed"]) for r in records]
    at = next(i for i, (d, _) in enumerate(counters) if d == restart["first_day"])
    assert any(counters[i][1] < counters[i - 1][1] for i in range(max(1, at), at + 2))


def test_events_near_the_floor_are_one_to_one_and_a_half_times_it(planted: Directory) -> None:
    day0 = planted.timeline.time(0).date()
    near = [e for e in planted.events() if e["near_floor"]]
    assert near
    for e in near:
        index = planted.live_index(e["bot_id"])
        assert index is not None
        profile = planted._profile(index)
        day = (date.fromisoformat(e["first_day"]) - day0).days
        up = e["users_factor"] > 1
        # The bot as its events before this one left it (a level shift halves its guilds).
        before = tuple(o for o in profile.events or () if o.first_day < day)
        least = floor(e["kind"], up, moved(profile.scale(day, planted.timeline.per_day),
                                           before, day))
        assert least is not None
        size = abs(math.log(e["users_factor"]))
        assert least * 0.999 <= size <= least * NEAR_FLOOR_MAX * 1.001, e


def test_events_come_from_a_bots_second_day_on(planted: Directory) -> None:
    first = {b: min(by_day(planted.stats(b), "guilds")) for b in planted.bot_ids()}
    days = [(date.fromisoformat(e["first_day"]) - date.fromisoformat(first[e["bot_id"]])).days
            for e in planted.events() if e["anomaly"]]
    assert min(days) >= 1 and sum(d <= 21 for d in days) >= 5  # young bots have events too


def test_a_third_of_the_growing_bots_saturate_and_a_third_turn(quiet: Directory) -> None:
    shapes = Counter(quiet._profile(i).shape for i in range(len(quiet.bot_ids())))
    growing = shapes["growing"] + shapes["saturating"] + shapes["turning"]
    assert shapes["saturating"] > growing / 5 and shapes["turning"] > growing / 5
    for shape in ("saturating", "turning"):
        # A bot of some size (its noise aside) whose curve turns, if it does, by day 45 of 70.
        bot = next(b for b in quiet.bot_ids()
                   if (p := quiet._profile(quiet.live_index(b) or 0)).shape == shape
                   and (shape == "saturating" or p.curve[3] < 45)
                   and min(quiet.stats(b)[-1]["guilds"], quiet.stats(b)[0]["guilds"]) > 200)
        guilds = [r["guilds"] for r in quiet.stats(bot)]
        third = len(guilds) // 3
        # Growth over each third of the history, in percent of where it started.
        rises = [math.log(sum(guilds[k + third - 10: k + third]) / sum(guilds[k: k + 10]))
                 for k in (0, third, 2 * third - 1)]
        if shape == "saturating":
            # It keeps growing, slower and slower.
            assert rises[0] > rises[1] > rises[2] > -0.05, rises
        else:
            # It grows, and ends lower than its peak.
            assert max(guilds) > 1.1 * guilds[-1] and max(guilds) > 1.1 * guilds[0], guilds[::10]
