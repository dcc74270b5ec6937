"""`botstats demo`, the README's main command: serve, run, show what was written, and what next."""


from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import child_env

from pipeline.archive._store import open_archive
from pipeline.operate._demo import DemoOptions, demo

pytestmark = pytest.mark.slow

TABLES = ("bots", "bot_stats", "bot_stat_custom", "harvest_runs", "users", "rejects")
DATASETS = ("bot_daily", "bot_growth", "bot_ranks", "movers", "anomalies", "resource_health",
            "custom_daily", "directory_daily", "bot_forecast", "bot_names")


def _demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = child_env()
    return subprocess.run([sys.executable, "-m", "pipeline", "demo", *args], cwd=cwd,
                          env={**env, "BOTSTATS_CONFIG": ""}, capture_output=True, text=True,
                          timeout=300)


def test_demo_writes_the_archive_and_exports_and_says_what_next(tmp_path: Path) -> None:
    proc = _demo(tmp_path)  # the defaults, as `make demo` runs it
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert ": complete (exit 0)" in out
    for name in (*TABLES, *DATASETS):
        assert f" {name} " in out, f"{name} missing from the summary"
    assert "Three things to try next" in out
    assert " sql \"SELECT " in out and "notebooks/explore.ipynb" in out
    assert " schedule" in out and " cron" in out
    db = tmp_path / "data" / "archive.ducklake"
    with open_archive(db) as con:
        bots = con.execute("SELECT count(*) FROM bots").fetchall()[0][0]
        stats = con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0]
        views = {r[0] for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        growth = con.execute("SELECT count(*) FROM trend_bot_growth").fetchall()[0][0]
    assert bots == 200 and stats > 200 * 60
    assert {f"trend_{d}" for d in DATASETS} <= views and growth > 0
    assert (tmp_path / "data" / "exports" / "manifest.json").exists()
    # The first query it suggests shows the week's top growers by name.
    query = re.search(r' sql "(SELECT [^"]+)"', out)
    assert query, out
    env = {**child_env(), "BOTSTATS_CONFIG": ""}
    shown = subprocess.run([sys.executable, "-m", "pipeline", "sql", query.group(1)], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    header, *rows = [line for line in shown.stdout.splitlines() if line.strip()]
    assert header.split()[:2] == ["name", "bot_id"]
    with open_archive(db) as con:
        names = dict(con.execute("SELECT bot_id, name FROM bots").fetchall())
    growers = [(row, found) for row in rows if (found := re.search(r"\d{17,20}", row))]
    assert len(growers) == 5, shown.stdout
    for row, found in growers:
        assert row.startswith(names[found.group(0)]), row


def test_demo_again_is_incremental_and_json_reports_it(tmp_path: Path) -> None:
    args = ("--dir", "out", "--bots", "30", "--days", "5")
    assert _demo(tmp_path, *args).returncode == 0
    proc = _demo(tmp_path, *args, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "complete" and report["tables"]["harvest_runs"] == 2
    assert report["run"]["harvest"]["stats_added"] == 0
    assert set(report["datasets"]) == set(DATASETS)
    assert report["archive"] == str(Path("out") / "archive.ducklake")
    proc = _demo(tmp_path, *args, "--fresh", "--json")
    assert json.loads(proc.stdout)["tables"]["harvest_runs"] == 1


def test_demo_a_day_later_archives_the_day_under_the_same_ids(tmp_path: Path) -> None:
    # The service's ids come from its clock: a later run starts it from the first run's clock
    # (saved beside the archive) and moves it on, so the same bots get their new records.
    first_at = datetime(2026, 11, 26, 2, 17, tzinfo=UTC)
    kw: dict[str, Any] = {"bots": 30, "days": 5, "events": 0.0, "config": ""}
    first = demo(tmp_path / "out", DemoOptions(now=first_at, **kw))
    assert (first.run.status, first.run.exit_code) == ("complete", 0)
    with open_archive(first.settings.db_path) as con:
        before = con.execute("SELECT bot_id FROM bots ORDER BY 1").fetchall()
    second = demo(tmp_path / "out", DemoOptions(now=first_at + timedelta(days=1, minutes=5), **kw))
    assert (second.run.status, second.run.exit_code) == ("complete", 0), second.run.message
    assert second.run.harvest is not None
    assert second.run.harvest.bots_removed == 0
    assert second.run.harvest.stats_added == 30 * 2  # a day of 2 records a bot, for all 30
    with open_archive(second.settings.db_path) as con:
        assert con.execute("SELECT bot_id FROM bots ORDER BY 1").fetchall() == before
    # --fresh forgets the clock with the archive.
    demo(tmp_path / "out", DemoOptions(now=first_at + timedelta(days=3), fresh=True, **kw))
    saved = json.loads((tmp_path / "out" / "demo-clock.json").read_text())["start"]
    assert datetime.fromisoformat(saved) == datetime(2026, 11, 29, 2, tzinfo=UTC)
