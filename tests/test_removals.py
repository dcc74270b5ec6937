"""A listing that collapses is not believed: an outage answering `GET /bots` with an empty or
cut list ends the run partial (exit 3) with no bot marked removed; a real removal goes through,
and `--accept-removals` (or `[harvest].max_removed_share`) believes a large one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import harvest_settings_for, query

from pipeline.cli import cli
from pipeline.harvester._removals import judge_removals
from pipeline.harvester._run import harvest

# (known live, removing, seen, max share, accept) -> believed
VERDICTS = [
    ((300, 300, 0, 0.5, False), False),  # the outage of the issue: an empty listing
    ((300, 300, 0, 1.0, False), False),  # an empty listing is never taken at its word
    ((300, 300, 0, 0.5, True), True),  # ... unless accepted
    ((300, 200, 100, 0.5, False), False),  # cut to a third
    ((300, 200, 100, 0.7, False), True),  # a share the operator allows
    ((300, 150, 150, 0.5, False), True),  # exactly the share: believed
    ((300, 30, 270, 0.5, False), True),  # a real 10% removal
    ((300, 0, 300, 0.0, False), True),  # nothing to remove
    ((0, 0, 0, 0.5, False), True),  # a first harvest of an empty directory
    ((300, 1, 299, 0.0, False), False),  # max_removed_share = 0: every removal needs accepting
]


@pytest.mark.parametrize(("args", "believed"), VERDICTS)
def test_the_removal_verdict(args: tuple[Any, ...], believed: bool) -> None:
    verdict = judge_removals(*args)
    assert verdict.believed is believed
    if believed:
        assert verdict.message == ""
        return
    known, removing, seen, share, _ = args
    assert f"would mark {removing} of the {known} live bots removed" in verdict.message
    assert f"showed {seen} bot(s)" in verdict.message
    assert "no bot was marked removed" in verdict.message
    assert "--accept-removals" in verdict.message
    # The setting only helps a listing that showed something.
    assert ("[harvest].max_removed_share" in verdict.message) is (seen > 0)


def test_the_advice_names_a_share_that_would_accept_the_listing() -> None:
    verdict = judge_removals(1000, 665, 335, 0.5, False)  # 66.5%
    assert "raise [harvest].max_removed_share to 0.67 or more" in verdict.message
    assert judge_removals(1000, 665, 335, 0.67, False).believed


# --- end to end: the embedded service answers a cut listing --------------------------------------
END = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
DATA = {"bots": 30, "history_days": 3, "stats_per_day": 2, "end": END}


def live_and_removed(settings: Any) -> tuple[int, int]:
    ((live, removed),) = query(settings, "SELECT count(*) FILTER (removed_at IS NULL), "
                                         "count(*) FILTER (removed_at IS NOT NULL) FROM bots")
    return live, removed


def test_a_collapsing_listing_marks_nothing_and_a_real_removal_goes_through(
        service_factory: Any, tmp_path: Path) -> None:
    db = tmp_path / "archive.ducklake"
    healthy = service_factory(**DATA)
    empty = service_factory(**DATA, listing_cut=1.0)
    third = service_factory(**DATA, listing_cut=2 / 3)
    settings = harvest_settings_for(healthy, db)
    assert harvest(settings).status == "complete"
    assert live_and_removed(settings) == (30, 0)

    for outage, seen in ((empty, 0), (third, 10)):
        report = harvest(harvest_settings_for(outage, db))
        assert (report.status, report.exit_code, report.bots_removed) == ("partial", 3, 0)
        assert f"would mark {30 - seen} of the 30 live bots removed" in report.message
        assert f"showed {seen} bot(s)" in report.message and "--accept-removals" in report.message
        assert report.bots_seen == seen
        assert live_and_removed(settings) == (30, 0)
        assert query(settings, "SELECT status, message FROM harvest_runs WHERE run_id = ?",
                     report.run_id) == [("partial", report.message)]

    # The next normal listing proceeds as usual.
    again = harvest(settings)
    assert (again.status, again.bots_removed) == ("complete", 0)
    # A cut listing the operator says is true is believed with a higher share...
    allowed = harvest(harvest_settings_for(third, db, {"harvest.max_removed_share": 0.7}))
    assert (allowed.status, allowed.bots_removed) == ("complete", 20)
    assert live_and_removed(settings) == (10, 20)
    back = harvest(settings)  # ...and its bots come back when they are listed again
    assert (back.status, back.bots_removed, live_and_removed(settings)) == ("complete", 0, (30, 0))

    # A real removal of 10% is believed.
    removed = {healthy.directory.churn()[1] for _ in range(3)}
    real = harvest(settings)
    assert (real.status, real.bots_removed, real.bots_new) == ("complete", 3, 3)
    assert {b for (b,) in query(settings, "SELECT bot_id FROM bots WHERE removed_at IS NOT NULL")
            } == removed

    # An empty listing that is true: `--accept-removals`.
    result = CliRunner().invoke(cli, ["harvest", "--base-url", empty.base_url, "--db", str(db),
                                      "--config", str(tmp_path / "empty-config.toml"),
                                      "--no-progress", "--accept-removals"])
    assert result.exit_code == 0, result.output
    assert live_and_removed(settings) == (0, 33)


@pytest.mark.parametrize(("cap", "said"), [(1, "gave up after"), (10, "ignores `skip`")],
                         ids=["cap 1", "cap 10"])
def test_a_listing_that_never_settles_ends_partial_keeping_what_was_read_whatever_the_cap(
        service_factory: Any, tmp_path: Path, cap: int, said: str) -> None:
    # `skip` ignored: every page is the first. With one bot a page the pager cannot tell that
    # from a listing shifting as fast as it is read and gives up; with ten it sees the first
    # page again. One fault, one verdict: the bots it saw are harvested, the others are not
    # taken for removed, even with every removal believed ([harvest].max_removed_share = 1),
    # and the run is partial with the reason.
    db = tmp_path / "archive.ducklake"
    assert harvest(harvest_settings_for(service_factory(**DATA), db)).status == "complete"
    unstable = service_factory(**DATA, ignore_skip=True, max_page_size=cap)
    unstable.directory.advance(1)  # a new record for every bot: what a read keeps shows
    settings = harvest_settings_for(unstable, db, {"harvest.max_removed_share": 1.0,
                                                   "service.page_size": cap})
    report = harvest(settings)

    assert (report.status, report.exit_code, report.bots_removed) == ("partial", 3, 0)
    assert report.message.startswith("listing stopped early: ") and said in report.message
    assert (report.bots_seen, report.listing_complete) == (cap, False)
    assert report.stats_added == cap  # the new record of each bot it saw, of no other
    assert query(settings, "SELECT status, message FROM harvest_runs WHERE run_id = ?",
                 report.run_id) == [("partial", report.message)]
    assert live_and_removed(settings) == (30, 0)
