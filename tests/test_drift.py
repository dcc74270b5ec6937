"""Schema drift: record fields the archive has not seen before are said once, by the run that
first sees them and by `botstats status` (which fields, since which run)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from click.testing import CliRunner
from conftest import harvest_settings_for

from pipeline.archive._drift import describe_fields, new_fields
from pipeline.cli import cli
from pipeline.harvester._run import harvest
from pipeline.service import RunningService


def test_new_fields_are_those_seen_and_not_known() -> None:
    known = {("stat", "id"), ("stat", "users")}
    seen = {"stat": {"id", "users", "uptime"}, "bot": {"id"}}
    assert new_fields(known, seen) == [("bot", "id"), ("stat", "uptime")]
    assert describe_fields([("stat", "uptime"), ("stat", "zone"), ("bot", "tier")]) == \
        "stat records: 'uptime', 'zone'; bot records: 'tier'"


def test_a_renamed_field_is_said_once_by_the_run_and_by_status(
        tmp_path: Any, service_factory: Callable[..., RunningService]) -> None:
    db = tmp_path / "archive.ducklake"
    # Clocks in the past: two advances of a day must not stamp records beyond
    # [fields].max_future_skew.
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=5)
    before = service_factory(bots=8, history_days=3, end=end)
    first = harvest(harvest_settings_for(before, db))
    assert first.status == "complete" and first.new_fields == ""  # the baseline is not drift

    # The service renames its time field; the config follows; new records arrive.
    after = service_factory(bots=8, history_days=3, field_names={"stat_time": "recorded"}, end=end)
    after.directory.advance(1)
    settings = harvest_settings_for(after, db, {"fields.stat_time": "recorded"})
    second = harvest(settings)
    assert second.status == "complete", second.message
    assert second.new_fields == "stat records: 'recorded'"
    after.directory.advance(1)
    third = harvest(settings)
    assert third.stats_added > 0 and third.new_fields == ""  # said once

    result = CliRunner().invoke(cli, ["status", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert f"new stat record fields since run {second.run_id}: 'recorded'" in result.output
    data = json.loads(CliRunner().invoke(cli, ["status", "--db", str(db), "--json"]).output)
    assert [(d["run_id"], d["kind"], d["fields"]) for d in data["new_fields"]] == \
        [(second.run_id, "stat", ["recorded"])]
