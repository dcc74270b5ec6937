"""`botstats status`: its freshness check for monitors (`--max-age`), on a real archive."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core import RunStatus
from pipeline.harvester._report import EXIT_CODES, HarvestReport
from pipeline.harvester._run import harvest
from pipeline.operate._status import freshness, parse_age


def test_durations_read_as_a_monitor_writes_them() -> None:
    assert parse_age("90m") == timedelta(minutes=90)
    assert parse_age("2h") == parse_age("7200") == parse_age(" 2H ") == timedelta(hours=2)
    assert parse_age("1.5d") == timedelta(hours=36)
    for bad in ("", "2x", "h", "-1h", "1h30m"):
        with pytest.raises(ValueError, match="is not a duration"):
            parse_age(bad)


def test_freshness_says_how_stale_and_what_to_check() -> None:
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    assert freshness(now - timedelta(minutes=59), timedelta(hours=1), now) == ""
    stale = freshness(now - timedelta(hours=3, minutes=5), timedelta(hours=2), now)
    assert stale.startswith("the latest complete harvest finished 3h 5m ago, more than 2h:")
    assert "cron or `botstats schedule`" in stale
    assert freshness(None, timedelta(hours=2), now) == "no harvest has completed in this archive yet"


def test_max_age_exits_1_when_no_harvest_completed_within_it(service_factory: Any,
                                                              harvest_settings: Any) -> None:
    svc = service_factory(bots=5, history_days=2)
    settings = harvest_settings(svc)
    assert harvest(settings).status == "complete"
    db = ["--db", str(settings.db_path)]

    fresh = CliRunner().invoke(cli, ["status", *db, "--max-age", "1h"])
    assert fresh.exit_code == 0 and "stale" not in fresh.output
    assert "recent runs" in fresh.output

    stale = CliRunner().invoke(cli, ["status", *db, "--max-age", "0s"])
    assert stale.exit_code == 1
    assert "recent runs" in stale.output  # the runs are shown as always, then the verdict
    assert "botstats: stale: the latest complete harvest finished" in stale.output

    as_json = CliRunner().invoke(cli, ["status", *db, "--max-age", "0s", "--json"])
    assert as_json.exit_code == 1
    info = json.loads(as_json.output[:as_json.output.rindex("}") + 1])
    assert info["max_age_s"] == 0 and info["stale"].startswith("the latest complete harvest")
    assert datetime.fromisoformat(info["latest_complete_at"]) <= datetime.now(UTC)

    bad = CliRunner().invoke(cli, ["status", *db, "--max-age", "2x"])
    assert bad.exit_code == 2 and "'2x' is not a duration" in bad.output


def test_run_statuses_are_one_enum_whose_words_json_and_the_archive_keep() -> None:
    assert [s.value for s in RunStatus] == ["running", "complete", "partial", "failed",
                                            "interrupted"]
    report = HarvestReport(run_id="r1", mode="incremental", status=RunStatus.PARTIAL)
    text = json.dumps(report.as_dict(), default=str)
    assert '"status": "partial"' in text
    again = HarvestReport.from_dict(json.loads(text))
    assert again.status is RunStatus.PARTIAL and again.status == "partial"
    assert (report.exit_code, again.exit_code) == (3, 3)
    assert {EXIT_CODES[s] for s in ("complete", "failed", "partial", "interrupted")} == {0, 1, 3, 4}
