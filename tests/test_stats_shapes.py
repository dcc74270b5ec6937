"""A bot's /stats in every shape a service may choose (paged oldest or newest first, whole in
either order): archived exactly, and an hourly run costs what is new, whatever the history."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from _truth_support import archived_rows, served_rows
from conftest import assert_archive_equals_service, harvest_settings_for, query

from pipeline.harvester._run import harvest

END = datetime(2026, 11, 1, tzinfo=UTC)  # in the past: advancing it stays within the skew
PAGE = 10
BOTS = 8

# (stats_order, stats_page_size) of the service, and what an hourly run may cost a bot with a
# few new records: GET /stat plus the reads below (newest first: one page, the run's first read
# settling the order for the others while they wait).
SHAPES = {
    "paged, oldest first": ("oldest", PAGE),
    "paged, newest first": ("newest", PAGE),
    "whole, oldest first": ("oldest", 0),
    "whole, newest first": ("newest", 0),
}
HOURLY_READS = {"paged, oldest first": 2, "paged, newest first": 1, "whole, oldest first": 1,
                "whole, newest first": 1}


def hourly_requests_per_bot(service_factory: Any, archive: Path, shape: str, days: int,
                            new: int = 2) -> float:
    order, page = SHAPES[shape]
    svc = service_factory(bots=BOTS, history_days=days, end=END, stats_order=order,
                          stats_page_size=page, malformed_rate=0.03)
    settings = harvest_settings_for(svc, archive, {"service.stats_page_size": page})
    first = harvest(settings)
    assert (first.status, first.errors) == ("complete", 0), first.message
    svc.directory.advance(new)
    listing = svc.directory.summary()["listing_requests"]
    again = harvest(settings)
    assert (again.status, again.errors, again.stats_updated) == ("complete", 0, 0)
    assert again.stats_added == BOTS * new - len(
        query(settings, "SELECT 1 FROM rejects WHERE run_id = ?", again.run_id))
    assert_archive_equals_service(settings, svc.directory, bots=True)
    listing = svc.directory.summary()["listing_requests"] - listing
    return (again.requests - listing) / BOTS


@pytest.mark.parametrize("shape", list(SHAPES))
def test_an_hourly_run_costs_what_is_new_whatever_the_history(
        service_factory: Any, tmp_path: Path, shape: str) -> None:
    # 120 records a bot: 12 pages, or one long list; an hourly run reads what is new.
    cost = hourly_requests_per_bot(service_factory, tmp_path / "archive.ducklake", shape, 120)
    settling = 1 / BOTS if shape == "paged, newest first" else 0  # one extra page, once a run
    assert cost <= 1 + HOURLY_READS[shape] + settling, cost


# --- times in every format the service can send them ----------------------------------------------
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# What a served time looks like in each format, and the instant it names.
SERVED_TIMES = {
    "epoch-s": (int, lambda v: datetime.fromtimestamp(v, UTC)),
    "epoch-ms": (int, lambda v: EPOCH + timedelta(milliseconds=v)),
    "epoch-us": (int, lambda v: EPOCH + timedelta(microseconds=v)),
    "epoch-ns": (int, lambda v: EPOCH + timedelta(microseconds=v // 1000)),
    "http-date": (str, email.utils.parsedate_to_datetime),
}


@pytest.mark.parametrize("time_format", list(SERVED_TIMES))
def test_times_in_every_format_a_service_sends_are_archived_as_the_instants_they_name(
        service_factory: Any, tmp_path: Path, time_format: str) -> None:
    svc = service_factory(bots=4, history_days=2, stats_per_day=3, end=END,
                          time_format=time_format)
    kind, instant = SERVED_TIMES[time_format]
    # The service sends each time in that format: in the unit it names (each an instant of the
    # service's two days of history, on the hour of its slots, none elsewhere in time).
    bot = sorted(svc.directory.bot_ids())[0]
    served = httpx.get(f"{svc.base_url}/bots/{bot}/stats", timeout=30).json()
    assert served and all(type(r["timestamp"]) is kind for r in served)
    times = [instant(r["timestamp"]) for r in served]
    assert all(END - timedelta(days=3) <= t <= END and t.minute == t.second == 0 for t in times)
    # The archive holds every record the service serves, at the instant its time names (read
    # back by the tests' own reading of each format, not the harvester's).
    settings = harvest_settings_for(svc, tmp_path / "archive.ducklake")
    assert harvest(settings).status == "complete"
    assert archived_rows(settings) == served_rows(svc)
    # An hourly run finds each bot's newest record the same as the archived one: nothing new.
    again = harvest(settings)
    assert (again.status, again.stats_added, again.stats_updated, again.bots_fetched) == (
        "complete", 0, 0, 0)
