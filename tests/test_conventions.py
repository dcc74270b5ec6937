"""Real services, real conventions (issue 32), end to end against the embedded service playing
each: a list inside an object, every paging family on the listing, ``/stats`` and the user lists,
totals in the answer or a header, a 400 above the cap, either order of ``/stats``.

For each: probe -> ``--write`` -> harvest -> the archive equals the service -> one new record a
bot -> the next harvest archives it at the cost docs/probe.md promises -> a run with nothing new
reads nothing new. And as a property over the service's choices: a harvest with settings that
do not fit (the defaults) never ends ``complete`` with a record of the service missing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _truth_support import (
    archived_rows,
    archived_snapshot,
    last_run,
    served_rows,
    served_snapshot,
    user_with_lists,
)
from conftest import query
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core import load_settings
from pipeline.harvester import HarvestReport, harvest
from pipeline.probe import run_probe, write_settings
from pipeline.service import RunningService

SIZE: dict[str, Any] = {"bots": 14, "users": 3, "history_days": 3, "stats_per_day": 4}
FRONT = ("next-url", "cursor")  # families read from the front: an envelope is required


def _settings(svc: RunningService, tmp: Path, token: str, config: Path | None = None) -> Any:
    return load_settings(config, env={"BOTSTATS_USER_TOKEN": token}, overrides={
        "service.base_url": svc.base_url, "store.db": str(tmp / "archive.ducklake"),
    })


def _archive_is_the_service(settings: Any, svc: RunningService, user_id: str) -> bool:
    return (archived_rows(settings) == served_rows(svc)
            and {b for (b,) in query(settings, "SELECT bot_id FROM bots")}
            == set(svc.directory.bot_ids())
            and archived_snapshot(settings, last_run(settings))
            == served_snapshot(svc, user_id))


def _hourly_cost(svc: RunningService, report: HarvestReport, family: str,
                 stats_paged: bool) -> int:
    """The most requests docs/probe.md promises an hourly run with one new record a bot:
    the listing's pages, and per bot GET /stat plus the pages that hold what is new (a list
    read from the front is read whole)."""
    bots = len(svc.directory.bot_ids())
    listing = 2 * (bots // svc.config.max_page_size + 2) + 2  # walk, verify, head
    if not stats_paged:
        per_bot = 2  # /stat, then the whole list
    elif family in FRONT:
        records = max(len(svc.directory.valid_stats(b)) for b in svc.directory.bot_ids()) + 2
        per_bot = 1 + records // svc.config.stats_page_size + 2
    else:
        per_bot = 1 + 4  # /stat, the page before the anchor, its page(s), the end
    snapshot = 1 + 3 * (2 if not svc.config.user_lists_page_size else 8)
    return listing + bots * per_bot + snapshot


CONVENTIONS = [
    pytest.param({"paging": "link", "stats_page_size": 5, "total_header": True}, id="github"),
    pytest.param({"paging": "offset", "list_envelope": "results", "over_cap": "400",
                  "max_page_size": 10}, id="results-object"),
    pytest.param({"paging": "page", "list_envelope": "data", "stats_page_size": 4,
                  "stats_order": "newest", "user_lists_page_size": 2}, id="page-numbers"),
    pytest.param({"paging": "cursor", "list_envelope": "items", "stats_page_size": 6,
                  "user_lists_page_size": 2}, id="cursor"),
    pytest.param({"paging": "next-url", "list_envelope": "results", "total_header": True,
                  "stats_page_size": 5}, id="next-url"),
    # The listing by limit/skip, /stats by page/per_page named in a Link header (which
    # ignores limit/skip): read whole, a first page of 5 would pass for a bot's whole history.
    pytest.param({"paging": "skip", "stats_paging": "link", "stats_page_size": 5},
                 id="stats-in-link-pages-alone"),
    pytest.param({"paging": "skip", "list_envelope": "bots", "stats_page_size": 5,
                  "stats_order": "newest", "over_cap": "400"}, id="skip-in-object"),
]


@pytest.mark.slow
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_probe_then_harvest_archives_each_convention_exactly_and_reads_only_what_is_new(
        tmp_path: Path, service_factory: Callable[..., RunningService],
        convention: dict[str, Any]) -> None:
    svc = service_factory(**SIZE, **convention)
    user_id, token = user_with_lists(svc, least=1)
    config = tmp_path / "config.toml"
    config.write_text("")
    report = run_probe(_settings(svc, tmp_path, token))
    assert not report.stopped, report.stopped
    write_settings(report, config)
    settings = _settings(svc, tmp_path, token, config)
    family = svc.config.paging
    named = {"skip": "offset", "offset": "offset", "page": "page", "link": "link",
             "next-url": "next", "cursor": "cursor"}
    assert settings.service.bots_paging == named[family], "\n".join(report.lines())
    if svc.config.stats_page_size:
        stats_family = svc.config.stats_paging or family
        assert settings.service.stats_paging == named[stats_family], "\n".join(report.lines())
        family = stats_family
    assert settings.service.bots_list_path == svc.config.list_envelope

    first = harvest(settings)
    assert first.status == "complete", first.message
    assert _archive_is_the_service(settings, svc, user_id)

    svc.directory.advance(1)
    again = harvest(settings)
    assert again.status == "complete", again.message
    assert again.stats_added == len(svc.directory.bot_ids())
    assert _archive_is_the_service(settings, svc, user_id)
    assert again.requests <= _hourly_cost(svc, again, family, bool(svc.config.stats_page_size))

    idle = harvest(settings)
    assert (idle.status, idle.stats_added) == ("complete", 0)
    assert idle.bots_up_to_date == len(svc.directory.bot_ids())  # GET /stat, no /stats read


@pytest.mark.slow
@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(paging=st.sampled_from(["skip", "offset", "page", "link", "next-url", "cursor"]),
       stats_paging=st.sampled_from(["", "skip", "page", "link", "cursor"]),
       envelope=st.sampled_from(["", "results", "data"]),
       total_header=st.booleans(),
       stats_page_size=st.sampled_from([0, 3, 5]),
       stats_order=st.sampled_from(["oldest", "newest"]),
       user_lists_page_size=st.sampled_from([0, 1]),
       over_cap=st.sampled_from(["cap", "400"]))
def test_no_harvest_ends_complete_with_a_record_of_the_service_missing(
        tmp_path_factory: pytest.TempPathFactory,
        service_factory: Callable[..., RunningService], paging: str, stats_paging: str,
        envelope: str,
        total_header: bool, stats_page_size: int, stats_order: str, user_lists_page_size: int,
        over_cap: str) -> None:
    if (paging in FRONT or stats_paging in FRONT) and not envelope:
        envelope = "results"  # a next URL or a cursor lives in an object
    svc = service_factory(bots=9, users=2, history_days=2, stats_per_day=4, max_page_size=4,
                          paging=paging, stats_paging=stats_paging, list_envelope=envelope,
                          total_header=total_header,
                          stats_page_size=stats_page_size, stats_order=stats_order,
                          user_lists_page_size=user_lists_page_size, over_cap=over_cap)
    user_id, token = user_with_lists(svc, least=1)
    tmp = tmp_path_factory.mktemp("blind")
    # The defaults: a bare array, limit/skip, whole /stats and user lists.
    blind = _settings(svc, tmp, token)
    for run in range(2):  # the first run, and the next one after a new record a bot
        report = harvest(blind)
        if report.status == "complete":
            assert _archive_is_the_service(blind, svc, user_id), (run, report.as_dict())
        svc.directory.advance(1)
