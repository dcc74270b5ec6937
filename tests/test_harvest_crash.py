"""Exactly once across crashes: `botstats harvest` killed with SIGKILL at any moment leaves an
archive that opens and holds whole batches only, and the next run completes the work.

The harvest runs in a subprocess (`python -m pipeline harvest`) against a slowed-down service
hosted by the test. Progress is watched on the service side: the test counts the /stats answers
it has served and kills the harvester after a chosen number of them, in the middle of fetching
and of writing batches.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    archived_stat_rows,
    assert_archive_equals_service,
    child_env,
    harvest_settings_for,
    query,
    service_stat_rows,
)

from pipeline.archive import _store as store
from pipeline.core import StoreError
from pipeline.harvester._run import harvest
from pipeline.service import RunningService

pytestmark = pytest.mark.slow

BOTS = 60
# Small batches commit often, so a kill lands between commits as well as inside one.
HARVEST_ENV = {"BOTSTATS_SERVICE_CONCURRENCY": "2", "BOTSTATS_SERVICE_PAGE_SIZE": "10",
               "BOTSTATS_STORE_BATCH_ROWS": "40"}


def count_stats_served(svc: RunningService) -> Callable[[], int]:
    """Count the /stats (and /stat) answers the service builds; returns the counter's reader."""
    directory = svc.directory
    served = directory.served_stats
    count = [0]

    def counting(index: int) -> list[dict[str, Any]]:
        count[0] += 1
        return served(index)

    directory.served_stats = counting  # type: ignore[method-assign]
    return lambda: count[0]


@pytest.fixture
def slow_service(service_factory: Callable[..., RunningService]) -> RunningService:
    """60 bots, 10 days x 2 stats/day, every answer 20 ms late."""
    return service_factory(bots=BOTS, history_days=10, stats_per_day=2, latency_ms=20)


def start_harvest(svc: RunningService, db: Path) -> subprocess.Popen[bytes]:
    env = child_env()
    with (db.parent / "harvest.log").open("ab") as log:  # a file: a full pipe would stall it
        return subprocess.Popen(
            [sys.executable, "-m", "pipeline", "harvest", "--base-url", svc.base_url, "--db",
             str(db), "--no-progress"],
            cwd=db.parent, env={**env, **HARVEST_ENV}, stdout=log, stderr=log)


def kill_after(proc: subprocess.Popen[bytes], svc: RunningService, served: Callable[[], int],
               stats_answers: int) -> None:
    """SIGKILL the harvester once the service has answered ``stats_answers`` /stats requests
    (0: once it has answered the first GET /bots, so the run has begun)."""
    deadline = time.monotonic() + 60
    while served() < stats_answers or svc.directory.summary()["listing_requests"] < 1:
        if proc.poll() is not None:
            pytest.fail("the harvest ended before the kill point (exit "
                        f"{proc.returncode}); see harvest.log in the test's tmp_path")
        assert time.monotonic() < deadline, "the harvest made no progress"
        time.sleep(0.002)
    assert proc.poll() is None, "the harvest finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def assert_exactly_once_after_crashes(svc: RunningService, db: Path, killed: list[str],
                                      finisher: str) -> None:
    settings = harvest_settings_for(svc, db)
    runs = dict(query(settings, "SELECT run_id, status FROM harvest_runs"))
    assert runs == {**{run_id: "interrupted" for run_id in killed}, finisher: "complete"}
    assert_archive_equals_service(settings, svc.directory)
    for table in ("bot_stats", "bot_stat_custom", "bots"):
        run_ids = {r for (r,) in query(settings, f"SELECT DISTINCT run_id FROM {table}")}
        assert run_ids <= {*killed, finisher}, table
    # Counters are committed with the batches they count: a killed run's count is exact.
    counted = dict(query(settings, "SELECT run_id, stats_added FROM harvest_runs"))
    kept = dict(query(settings, "SELECT run_id, count(*) FROM bot_stats GROUP BY 1"))
    assert {r: counted[r] for r in kept} == kept
    assert sum(counted.values()) == len(archived_stat_rows(settings))


def killed_run_ids(db: Path, before: set[str]) -> set[str]:
    """Run ids of harvest_runs rows written since ``before`` (read once the writer is gone)."""
    con = store.connect(store.ArchivePaths.at(db), read_only=True)
    try:
        return {r for (r,) in con.execute("SELECT run_id FROM harvest_runs").fetchall()} - before
    finally:
        con.close()


@pytest.mark.clock
@pytest.mark.parametrize("stats_answers", [0, 3, 20, 45],
                         ids=["after the first page", "first batches", "mid-run", "near the end"])
def test_a_run_killed_at_any_point_is_completed_by_the_next_without_duplicates(
        slow_service: RunningService, tmp_path: Path, stats_answers: int) -> None:
    db = tmp_path / "archive.ducklake"
    served = count_stats_served(slow_service)
    proc = start_harvest(slow_service, db)
    kill_after(proc, slow_service, served, stats_answers)
    killed = killed_run_ids(db, set())
    assert len(killed) == 1  # the killed run had recorded itself as running

    report = harvest(harvest_settings_for(slow_service, db))
    assert report.status == "complete"
    assert_exactly_once_after_crashes(slow_service, db, sorted(killed), report.run_id)
    if stats_answers >= 20:
        # The killed run's whole batches were kept, and the next run did not fetch them again.
        assert report.bots_up_to_date > 0
        assert report.stats_added < len(service_stat_rows(slow_service.directory))


@pytest.mark.clock
def test_runs_killed_one_after_another_leave_nothing_for_the_last_to_duplicate(
        slow_service: RunningService, tmp_path: Path) -> None:
    db = tmp_path / "archive.ducklake"
    served = count_stats_served(slow_service)
    killed: set[str] = set()
    for answers in (8, 25, 35):  # each run starts over, skipping the bots already archived
        proc = start_harvest(slow_service, db)
        kill_after(proc, slow_service, served, served() + answers)
        killed |= killed_run_ids(db, killed)
    assert len(killed) == 3

    report = harvest(harvest_settings_for(slow_service, db))
    assert report.status == "complete"
    assert_exactly_once_after_crashes(slow_service, db, sorted(killed), report.run_id)


def _file_size_limit(limit: int) -> Callable[[], None]:
    """For a child process: files may grow to ``limit`` bytes, and a write past it fails with
    EFBIG instead of killing the process: what a full disk looks like to DuckDB."""
    import resource

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def harvest_limited(svc: RunningService, db: Path, limit: int) -> str:
    """`botstats harvest` in a child whose files cannot grow past ``limit`` bytes; its exit
    code checked (1: failed) and its output returned, whitespace folded."""
    env = child_env()
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "harvest", "--base-url", svc.base_url, "--db", str(db),
         "--no-progress"],
        cwd=db.parent, env=env, capture_output=True, text=True, timeout=120,
        preexec_fn=_file_size_limit(limit))
    out = " ".join((done.stdout + done.stderr).split())  # the summary wraps its lines
    assert done.returncode == 1, out
    assert "Traceback" not in out
    assert "writing a batch of run" in out
    assert "run again, and the next run completes the work" in out
    assert "records 0 new" in out  # the summary counts committed rows only
    return out


def assert_completed_after_a_refused_write(svc: RunningService, settings: Any) -> str:
    """The next run, with room to write, completes the archive; the refused run's status."""
    report = harvest(settings)
    assert report.status == "complete"
    assert_archive_equals_service(settings, svc.directory)
    (status, message), = query(settings, "SELECT status, message FROM harvest_runs WHERE "
                                         "run_id NOT IN (SELECT run_id FROM bot_stats)")
    assert message
    return f"{status}: {message}"


def _largest_file(db: Path) -> int:
    paths = store.ArchivePaths.at(db)
    return max(f.stat().st_size for f in [paths.catalog, *paths.data.rglob("*.parquet")])


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE (POSIX)")
def test_a_commit_the_disk_refuses_fails_the_run_and_readers_keep_what_was_there(
        service_factory: Callable[..., RunningService], tmp_path: Path) -> None:
    # The clock starts 31 days back, so 720 hourly intervals later it is still not ahead of now.
    svc = service_factory(bots=BOTS, history_days=2, stats_per_day=24,
                          end=datetime.now(UTC) - timedelta(days=31))
    db = tmp_path / "archive.ducklake"
    settings = harvest_settings_for(svc, db)
    assert harvest(settings).status == "complete"
    before = archived_stat_rows(settings)
    # 43,200 new records in a month or two (files are written per month): a data file larger
    # than any file so far.
    svc.directory.advance(720)

    harvest_limited(svc, db, 2 * _largest_file(db))
    assert archived_stat_rows(settings) == before  # nothing of the refused batch is visible

    refused = assert_completed_after_a_refused_write(svc, settings)
    assert refused.startswith("failed: writing a batch of run")


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE (POSIX)")
def test_a_first_harvest_the_disk_refuses_leaves_an_archive_the_next_run_completes(
        service_factory: Callable[..., RunningService], tmp_path: Path) -> None:
    svc = service_factory(bots=300, history_days=100, stats_per_day=2)
    db = tmp_path / "archive.ducklake"
    settings = harvest_settings_for(svc, db)

    harvest_limited(svc, db, 256 * 1024)
    assert query(settings, "SELECT count(*) FROM bot_stats") == [(0,)]

    refused = assert_completed_after_a_refused_write(svc, settings)
    assert refused.startswith("failed: writing a batch of run")


# --- the first harvest killed while it creates the archive ---------------------------------------
# A `botstats harvest` that SIGKILLs itself once the archive's creation has reached a step.
KILLED_AT_STEP = """
import os, signal, sys
from pipeline.archive import _store
from pipeline.cli._base import main
step = os.environ.pop("KILL_AT_STEP")
_store._reached = lambda at: at == step and os.kill(os.getpid(), signal.SIGKILL)
sys.argv[0] = "botstats"
main()
"""


@pytest.mark.parametrize("step", store.CREATION_STEPS)
def test_a_first_harvest_killed_while_creating_the_archive_leaves_none_or_a_whole_one(
        service_factory: Callable[..., RunningService], tmp_path: Path, step: str) -> None:
    svc = service_factory(bots=4, history_days=2, stats_per_day=2)
    db = tmp_path / "archive.ducklake"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_STEP, "harvest", "--base-url", svc.base_url, "--db",
         str(db), "--no-progress"],
        cwd=tmp_path, env=child_env(KILL_AT_STEP=step), capture_output=True, text=True,
        timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    settings = harvest_settings_for(svc, db)
    # A reader meets no archive, or the whole of a new one: every table, nothing in them yet.
    if store.CREATION_STEPS.index(step) < store.CREATION_STEPS.index("in place"):
        assert not db.exists()
        with pytest.raises(StoreError, match="there is no archive"):
            store.open_archive(db)
    else:
        con = store.open_archive(db)
        try:
            assert {"bot_stats", "bots", "harvest_runs", "schema_migrations"} <= set(
                store.table_names(con))
            assert con.execute("SELECT count(*) FROM bot_stats").fetchall() == [(0,)]
        finally:
            con.close()
    # The next harvest creates it (or opens it) and completes the work; of the killed creation
    # nothing is left beside the archive.
    assert harvest(settings).status == "complete"
    assert_archive_equals_service(settings, svc.directory)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
