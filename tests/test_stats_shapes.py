"""A bot's /stats in every shape a service may choose (paged oldest or newest first, whole in
either order): archived exactly, and an hourly run costs what is new, whatever the history."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
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
