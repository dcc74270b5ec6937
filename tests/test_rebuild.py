"""A trends rebuild beside the harvest: `botstats trends --full` reads a snapshot of the
archive and holds the trends lock only, so an hourly `botstats run` that starts meanwhile
archives its records (its own trends wait, give up, and leave them to the rebuild), a second
trends job still waits for the first, and the rebuild builds what was archived meanwhile before
it lets go. Both run at once for real: processes of their own, against the embedded service.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
from conftest import child_env
from test_trends_incremental import assert_same_exports, with_export_dir

from pipeline.analytics.build._build import build_trends
from pipeline.archive._store import open_archive
from pipeline.core._loading import load_settings
from pipeline.core._settings import Settings

# The rebuild, as `botstats trends --full` runs it (pipeline.locked_trends), held just before
# it computes (the plan read, its snapshot taken, the trends lock held) until the test says go.
REBUILD = """
import json, pathlib, sys, time
from pipeline.analytics.build import _slices
from pipeline.core._loading import load_settings
from pipeline.operate import locked_trends

config, started, go = sys.argv[1:4]
compute = _slices.compute_slices

def held(*args, **kwargs):
    pathlib.Path(started).touch()
    while not pathlib.Path(go).exists():
        time.sleep(0.05)
    return compute(*args, **kwargs)

_slices.compute_slices = held
print(json.dumps(locked_trends(load_settings(config), full=True).as_dict()))
"""


def _config(tmp_path: Path, base_url: str) -> Path:
    config = tmp_path / "botstats.toml"
    config.write_text(f'[service]\nbase_url = "{base_url}"\n[store]\ndb = "{tmp_path / "a.ducklake"}"\n'
                      f'[exports]\ndir = "{tmp_path / "exports"}"\n')
    return config


def _botstats(config: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=120, env=child_env(**env))


def _records(settings: Settings) -> int:
    with open_archive(settings.db_path) as con:
        return int(con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0])


def _newest_day(settings: Settings) -> Any:
    return pl.read_parquet(settings.export_dir / "bot_daily" / "**" / "*.parquet")["day"].max()


def test_an_hourly_run_during_a_rebuild_archives_and_the_rebuild_catches_up(
        tmp_path: Path, service_factory: Any) -> None:
    svc = service_factory(bots=20, history_days=12, stats_per_day=1)
    config = _config(tmp_path, svc.base_url)
    settings = load_settings(config)
    first = _botstats(config, "run", "--no-progress")
    assert first.returncode == 0, first.stderr
    built_to = _newest_day(settings)

    started, go = tmp_path / "started", tmp_path / "go"
    rebuild = subprocess.Popen([sys.executable, "-c", REBUILD, str(config), str(started), str(go)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=child_env())
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert rebuild.poll() is None, rebuild.communicate()[1]
            assert time.monotonic() < deadline, "the rebuild never started computing"
            time.sleep(0.05)
        # A new record for every bot, and the hourly run while the rebuild is at work: its
        # harvest archives them at once; its trends wait a second for the rebuild and give up.
        svc.directory.advance(1)
        before = _records(settings)
        hourly = _botstats(config, "run", "--json", "--no-progress", "--lock-timeout", "1")
        assert hourly.returncode == 0, hourly.stderr
        report = json.loads(hourly.stdout)
        assert (report["status"], report["harvest"]["stats_added"]) == ("complete", 20)
        assert _records(settings) == before + 20
        assert report["trends"] is None
        assert "another job kept the lock: another botstats job holds the trends lock" in \
            report["trends_skipped"] and f"pid {rebuild.pid}" in report["trends_skipped"]
        # Two trends builds never run at once: the second waits, then exits 75 naming the first.
        second = _botstats(config, "trends", BOTSTATS_RUN_LOCK_TIMEOUT="0.5")
        assert second.returncode == 75, second.stderr
        assert "holds the trends lock" in second.stderr and "(trends, pid" in second.stderr
        go.touch()
        out, err = rebuild.communicate(timeout=120)
    finally:
        if rebuild.poll() is None:
            rebuild.kill()
            rebuild.communicate()
    assert rebuild.returncode == 0, err
    done = json.loads(out)
    # The rebuild read the archive as it was when it started; what the hourly run archived
    # meanwhile it built right after, incrementally, before it let go of the lock.
    assert (done["mode"], done["then"]["mode"]) == ("full", "incremental")
    assert _newest_day(settings) > built_to
    scratch = with_export_dir(settings, tmp_path / "scratch")
    build_trends(scratch)
    assert_same_exports(settings.export_dir, scratch.export_dir)
    assert build_trends(settings).mode == "unchanged"
