"""A wrong `[fields]` name fails the run loudly (exit 1, the field, what records carry instead,
the fix), loses nothing, and the run after the fix archives everything."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import child_env, query

from pipeline.core._loading import load_settings
from pipeline.core._settings import FieldSettings
from pipeline.harvester._verdict import RunTally, judge
from pipeline.service import RunningService


def botstats(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = child_env()
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=cwd, text=True,
                          env={**env, "BOTSTATS_CONFIG": ""}, capture_output=True, timeout=120)


def served_keys(svc: RunningService, id_field: str, time_field: str) -> list[tuple[Any, ...]]:
    """(bot_id, stat_id, recorded_at) of every record the service serves, sorted."""
    rows = []
    for bot_id in svc.directory.bot_ids():
        for r in svc.directory.valid_stats(bot_id):
            rows.append((bot_id, r[id_field],
                         datetime.fromisoformat(r[time_field]).astimezone(UTC)))
    return sorted(rows)


@pytest.mark.slow
@pytest.mark.parametrize(("serve", "fix", "words"), [
    ({"stat_time": "created_at"}, '[fields]\nstat_time = "created_at"\n',
     ["stat records have no 'timestamp'", "they carry 'created_at' (an ISO 8601 time)",
      'set [fields].stat_time = "created_at" or run `botstats probe`']),
    ({"stat_id": "_id"}, '[fields]\nstat_id = "_id"\n',
     ["stat records have no 'id'", "they carry '_id'", 'set [fields].stat_id = "_id"']),
    ({"bot_id": "bot_id"}, '[fields]\nbot_id = "bot_id"\n',
     ["bot records have no 'id'", "they carry 'bot_id'", 'set [fields].bot_id = "bot_id"']),
])
def test_a_wrong_field_fails_loudly_then_the_fixed_run_archives_everything(
        tmp_path: Path, service_factory: Callable[..., RunningService], serve: dict[str, str],
        fix: str, words: list[str]) -> None:
    svc = service_factory(bots=12, history_days=5, field_names=serve)
    config = tmp_path / "config.toml"
    config.write_text("")
    args = ["--config", str(config), "--db", "a.duckdb", "--base-url", svc.base_url]

    wrong = botstats(tmp_path, *args, "harvest", "--no-progress")
    assert wrong.returncode == 1, wrong.stderr
    message = " ".join(wrong.stderr.split())
    for word in words:
        assert word in message, message
    settings = load_settings(config, env={}, overrides={"store.db": str(tmp_path / "a.duckdb")})
    assert query(settings, "SELECT status FROM harvest_runs") == [("failed",)]
    assert query(settings, "SELECT count(*) FROM bot_stats") == [(0,)]
    # Nothing lost: every record the service sent is kept whole in rejects.
    kept = query(settings, "SELECT count(*) FROM rejects WHERE raw IS NOT NULL")[0][0]
    bots = len(svc.directory.bot_ids())
    assert kept == (bots if "bot_id" in serve else len(served_keys(
        svc, svc.directory.config.field_name("stat_id"),
        svc.directory.config.field_name("stat_time"))))

    config.write_text(fix)
    fixed = botstats(tmp_path, *args, "harvest", "--no-progress")
    assert fixed.returncode == 0, fixed.stderr
    archived = sorted(query(settings, "SELECT bot_id, stat_id, recorded_at FROM bot_stats"))
    assert archived == served_keys(svc, svc.directory.config.field_name("stat_id"),
                                   svc.directory.config.field_name("stat_time"))
    assert query(settings, "SELECT count(*) FROM bots")[0][0] == bots


def test_a_few_rejects_among_good_records_are_not_a_field_problem() -> None:
    tally = RunTally()
    tally.keep("stat", 90)
    for n in range(10):
        tally.reject("stat", "missing timestamp field 'timestamp'", f'{{"id": "{n}"}}')
    assert judge(tally, FieldSettings()) is None


def test_no_candidate_is_said_so_not_guessed() -> None:
    tally = RunTally()
    for n in range(10):
        tally.reject("stat", "missing timestamp field 'timestamp'", f'{{"id": "{n}", "users": 1}}')
    verdict = judge(tally, FieldSettings())
    assert verdict is not None and verdict.status == "failed" and verdict.setting
    assert "no field of theirs passes botstats' rules for a time" in verdict.message
    assert "set [fields].stat_time to the field that holds it" in verdict.message


def test_epoch_milliseconds_are_recognised_as_a_time() -> None:
    tally = RunTally()
    for n in range(6):
        tally.reject("stat", "missing timestamp field 'timestamp'",
                     f'{{"id": "{n}", "ts": {1_700_000_000_000 + n}, "users": 5}}')
    verdict = judge(tally, FieldSettings())
    assert verdict is not None and "they carry 'ts' (epoch milliseconds)" in verdict.message
