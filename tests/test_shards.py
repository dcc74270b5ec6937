"""One archive written by many workers: a PostgreSQL catalog ([store].catalog), harvests of
shards (`botstats harvest --shard K/N`) side by side, and every guarantee of one writer kept
with N of them: the archive equals the service row for row, a killed worker's next run
completes its shard, readers keep their snapshot, status shows every shard, compaction, backup
and restore work, and locks keep one job per shard.

Against a real PostgreSQL 15 started for the session (tests/_postgres_support.py) and workers
that are real processes (`python -m pipeline`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import hypothesis
import pytest
from _postgres_support import new_database
from conftest import (
    assert_archive_equals_service,
    child_env,
    harvest_settings_for,
    query,
)
from hypothesis import strategies as st

from pipeline.core import Settings, Shard
from pipeline.harvester import HarvestOptions
from pipeline.operate import RunOptions, archive_status, locked_harvest, run
from pipeline.operate._lock import TRENDS_SCOPE, Scope, run_lock
from pipeline.service import RunningService

# Small batches: several commits a worker, so the workers' commits meet.
WORKER_ENV = {"BOTSTATS_SERVICE_CONCURRENCY": "4", "BOTSTATS_SERVICE_PAGE_SIZE": "10",
              "BOTSTATS_STORE_BATCH_ROWS": "60", "BOTSTATS_RETRY_BACKOFF_BASE": "0.01",
              "BOTSTATS_RETRY_BACKOFF_MAX": "0.05"}


@pytest.mark.parametrize(("text", "words"), [
    ("3/3", "K counts from 0 to N-1"), ("0/0", "N must be from 1"), ("1", "not K/N"),
    ("a/b", "not K/N"), ("0/2000", "N must be from 1 to 1024")])
def test_a_shard_that_is_not_k_of_n_is_refused(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Shard.parse(text)


@pytest.fixture(scope="module")
def sql_con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    yield con
    con.close()


@hypothesis.given(ids=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=30),
                  n=st.integers(1, 9))
def test_each_bot_belongs_to_one_shard_alike_in_python_and_in_sql(
        sql_con: duckdb.DuckDBPyConnection, ids: list[str], n: int) -> None:
    """Removals are judged in SQL, the listing is split in Python: both say the same."""
    ids = [i.replace("\x00", "") or "x" for i in ids]
    shards = [Shard(k, n) for k in range(n)]
    ((*in_sql,),) = sql_con.execute(
        "SELECT " + ", ".join(f"list(i) FILTER (WHERE {s.sql('i')})" for s in shards)
        + " FROM unnest(?) AS t(i)", [ids]).fetchall()
    for shard, owned in zip(shards, in_sql, strict=True):
        assert set(owned or []) == {i for i in ids if shard.owns(i)}
    assert sum(s.owns(ids[0]) for s in shards) == 1


def shared_settings(svc: RunningService, tmp: Path, overrides: dict[str, Any] | None = None,
                    dsn: str | None = None) -> Settings:
    """Settings that harvest ``svc`` into a fresh PostgreSQL catalog, data files in tmp/lake."""
    return harvest_settings_for(svc, tmp / "unused.ducklake", {
        "store.catalog": dsn or new_database(), "store.data_path": str(tmp / "lake"),
        **(overrides or {})})


def worker_env(settings: Settings, **more: str) -> dict[str, str]:
    env = child_env()
    return {**env, **WORKER_ENV, "BOTSTATS_BASE_URL": settings.service.base_url,
            "BOTSTATS_STORE_CATALOG": settings.store.catalog,
            "BOTSTATS_STORE_DATA_PATH": settings.store.data_path,
            "BOTSTATS_CONFIG": os.devnull, **more}


def start_worker(settings: Settings, tmp: Path, *args: str, code: str | None = None,
                 **env: str) -> subprocess.Popen[bytes]:
    """`botstats <args>` in a process of its own; ``code``: a script that sets a seam of the
    worker, then runs the command (one of the scripts below)."""
    how = ["-m", "pipeline"] if code is None else ["-c", code]
    with (tmp / "workers.log").open("ab") as log:  # a file: a full pipe would stall it
        return subprocess.Popen([sys.executable, *how, *args, "--no-progress"],
                                cwd=tmp, env=worker_env(settings, **env), stdout=log,
                                stderr=log)


# A worker whose first batch, written and not yet committed, waits until every worker's first
# batch is there too: N transactions open at once, of which one commits and the others collide
# and are retried (across processes, against what the first committed).
MEET_AT_THE_FIRST_BATCH = """
import os, sys, time
from pathlib import Path
from pipeline.archive import _writes
from pipeline.cli._base import main
meeting, expected = Path(os.environ.pop("MEETING")), int(os.environ.pop("MEETING_SIZE"))
committing, first = _writes.committing, [True]

def meet_first(con, report, work, patience=300.0):
    def work_then_meet(con, retried):
        result = work(con, retried)
        if first[0]:
            first[0] = False
            (meeting / str(os.getpid())).touch()
            deadline = time.monotonic() + 60
            while len(list(meeting.iterdir())) < expected and time.monotonic() < deadline:
                time.sleep(0.01)
        return result
    return committing(con, report, work_then_meet, patience)

_writes.committing = meet_first
sys.argv[0] = "botstats"
main()
"""

# A worker that, once a batch of records has committed, says so (a file) and waits to be
# killed: the kill lands mid-run, whatever the pace of the machine.
STOP_AFTER_A_COMMIT = """
import os, sys, time
from pathlib import Path
from pipeline.archive import _writes
from pipeline.cli._base import main
said = Path(os.environ.pop("COMMITTED"))
committing = _writes.committing

def commit_then_wait(con, report, work, patience=300.0):
    result = committing(con, report, work, patience)
    if report.stats_added > 0:
        said.touch()
        time.sleep(600)
    return result

_writes.committing = commit_then_wait
sys.argv[0] = "botstats"
main()
"""


def run_shards(settings: Settings, tmp: Path, n: int, *, command: str = "harvest",
               rounds: int = 4) -> list[int]:
    """N workers at once, each `botstats <command> --shard k/N`, their first batches committed
    at the same moment (:data:`MEET_AT_THE_FIRST_BATCH`); again for the shards that ended
    partial (a faulty service), up to ``rounds`` times. The last exit codes."""
    pending = list(range(n))
    codes = [0] * n
    meeting = tmp / "meeting"
    meeting.mkdir()
    for again in range(rounds):
        meet = {} if again else {"code": MEET_AT_THE_FIRST_BATCH, "MEETING": str(meeting),
                                 "MEETING_SIZE": str(n)}
        procs = {k: start_worker(settings, tmp, command, "--shard", f"{k}/{n}", **meet)
                 for k in pending}
        for k, proc in procs.items():
            codes[k] = proc.wait(timeout=300)
        pending = [k for k in pending if codes[k] == 3]
        if not pending:
            break
    return codes


def log_of(tmp: Path) -> str:
    return (tmp / "workers.log").read_text(errors="replace")


@pytest.mark.slow
def test_three_workers_against_a_faulty_service_archive_it_row_for_row(
        service_factory: Callable[..., RunningService], tmp_path: Path) -> None:
    svc = service_factory(bots=30, history_days=6, stats_per_day=2, error_rate=0.1,
                          malformed_rate=0.05, duplicate_every=7)
    settings = shared_settings(svc, tmp_path)
    codes = run_shards(settings, tmp_path, 3)
    assert codes == [0, 0, 0], log_of(tmp_path)
    assert_archive_equals_service(settings, svc.directory, bots=True)
    runs = query(settings, "SELECT shard, shards, status FROM harvest_runs ORDER BY started_at")
    assert {(k, n) for k, n, _ in runs} == {(0, 3), (1, 3), (2, 3)}
    assert all(status in ("complete", "partial") for _, _, status in runs)
    # The first three runs overlapped (each began before any ended), and their first batches,
    # open at once, collided: all but one were retried, in their own processes.
    ((last_start, first_end, retried),) = query(
        settings, "SELECT max(started_at), min(finished_at), sum(commit_retries) FROM "
                  "(SELECT * FROM harvest_runs ORDER BY started_at LIMIT 3)")
    assert last_start < first_end
    assert retried >= 2, log_of(tmp_path)
    # Each worker kept only its own bots: every bot was written by one shard's runs.
    owners = query(settings, "SELECT b.bot_id, count(DISTINCT r.shard) FROM bot_stats b JOIN "
                             "harvest_runs r USING (run_id) GROUP BY b.bot_id HAVING "
                             "count(DISTINCT r.shard) > 1")
    assert owners == []


@pytest.mark.slow
@pytest.mark.clock
def test_a_worker_killed_mid_run_is_completed_by_its_next_run_and_the_others_go_on(
        service_factory: Callable[..., RunningService], tmp_path: Path) -> None:
    svc = service_factory(bots=45, history_days=6, stats_per_day=2)
    settings = shared_settings(svc, tmp_path)
    committed = tmp_path / "committed"
    workers = {k: start_worker(settings, tmp_path, "harvest", "--shard", f"{k}/3",
                               **({"code": STOP_AFTER_A_COMMIT, "COMMITTED": str(committed)}
                                  if k == 1 else {}))
               for k in range(3)}
    # Kill shard 1's worker once it has committed a batch (whole batches are what it keeps);
    # it waits for the kill there.
    deadline = time.monotonic() + 120
    while not committed.exists():
        assert workers[1].poll() is None, "shard 1 ended before the kill: " + log_of(tmp_path)
        assert time.monotonic() < deadline, log_of(tmp_path)
        time.sleep(0.05)
    workers[1].send_signal(signal.SIGKILL)
    assert workers[1].wait(timeout=60) == -signal.SIGKILL
    assert query(settings, "SELECT status, stats_added > 0 FROM harvest_runs WHERE shard = 1") \
        == [("running", True)]
    assert [workers[k].wait(timeout=300) for k in (0, 2)] == [0, 0], log_of(tmp_path)
    # The others finished beside it and did not take its run for dead: it held its lock.
    ((killed,),) = query(settings, "SELECT run_id FROM harvest_runs WHERE shard = 1")
    assert query(settings, "SELECT status FROM harvest_runs WHERE run_id = ?", killed) == \
        [("running",)]
    assert start_worker(settings, tmp_path, "harvest", "--shard", "1/3").wait(timeout=300) == 0
    assert query(settings, "SELECT status FROM harvest_runs WHERE run_id = ?", killed) == \
        [("interrupted",)]
    assert_archive_equals_service(settings, svc.directory, bots=True)


def test_status_shows_every_shards_last_run_and_a_shard_left_behind_is_stale(
        service: RunningService, tmp_path: Path) -> None:
    settings = shared_settings(service, tmp_path)
    for k in (0, 1):
        assert locked_harvest(settings, HarvestOptions(shard=Shard(k, 3))).status == "complete"
    info = archive_status(settings, max_age=timedelta(hours=1))
    assert [(s.shard, s.status) for s in info.shards] == [
        ("0/3", "complete"), ("1/3", "complete"), ("2/3", None)]
    assert info.stale and "shard 2/3: no harvest has completed" in info.stale
    assert {r.shard for r in info.runs} == {"0/3", "1/3"}
    assert locked_harvest(settings, HarvestOptions(shard=Shard(2, 3))).status == "complete"
    info = archive_status(settings, max_age=timedelta(hours=1))
    assert [s.status for s in info.shards] == ["complete"] * 3
    assert info.stale == ""
    assert_archive_equals_service(settings, service.directory, bots=True)


def test_removals_are_judged_per_shard(service_factory: Callable[..., RunningService],
                                       tmp_path: Path) -> None:
    svc = service_factory(bots=40, history_days=2, stats_per_day=1)
    settings = shared_settings(svc, tmp_path)
    assert [locked_harvest(settings, HarvestOptions(shard=Shard(k, 2))).status for k in range(2)] == \
        ["complete", "complete"]
    archived = {b for (b,) in query(settings, "SELECT bot_id FROM bots")}
    assert len(archived) == 40
    gone = {svc.directory.churn()[1] for _ in range(4)} & archived  # a churn may drop a new bot
    mine = {b for b in gone if Shard(0, 2).owns(b)}
    assert mine and gone - mine, "the churn must remove bots of both shards"
    report = locked_harvest(settings, HarvestOptions(shard=Shard(0, 2)))
    assert report.status == "complete" and report.bots_removed == len(mine)
    assert {b for (b,) in query(settings, "SELECT bot_id FROM bots WHERE removed_at IS NOT "
                                          "NULL")} == mine
    locked_harvest(settings, HarvestOptions(shard=Shard(1, 2)))
    assert {b for (b,) in query(settings, "SELECT bot_id FROM bots WHERE removed_at IS NOT "
                                          "NULL")} == gone


@pytest.mark.slow
def test_one_worker_per_shard_others_alongside_and_upkeep_waits_for_workers(
        service: RunningService, tmp_path: Path) -> None:
    settings = shared_settings(service, tmp_path)
    locked_harvest(settings)  # the archive exists before the locks are tried
    quick = {"BOTSTATS_RUN_LOCK_TIMEOUT": "0.5"}
    with run_lock(settings, "harvest", scope=Scope.harvest(Shard(0, 2)), run_id="r-held"):
        same = start_worker(settings, tmp_path, "harvest", "--shard", "0/2", **quick)
        other = start_worker(settings, tmp_path, "harvest", "--shard", "1/2", **quick)
        compact = subprocess.run([sys.executable, "-m", "pipeline", "compact"], cwd=tmp_path,
                                 env=worker_env(settings, **quick), capture_output=True,
                                 text=True, timeout=120)
        assert same.wait(timeout=120) == 75
        assert other.wait(timeout=120) == 0
    assert "the lock of shard 0/2" in log_of(tmp_path)
    assert "botstats harvest 0/2 r-held" in log_of(tmp_path), "the holder is named"
    assert compact.returncode == 75 and "the archive lock" in compact.stderr
    compact = subprocess.run([sys.executable, "-m", "pipeline", "compact"], cwd=tmp_path,
                             env=worker_env(settings), capture_output=True, text=True,
                             timeout=120)
    assert compact.returncode == 0, compact.stderr


def test_the_user_snapshot_belongs_to_shard_0(service: RunningService, tmp_path: Path) -> None:
    _, token = next(iter(service.directory.user_tokens().items()))
    settings = shared_settings(service, tmp_path, {"user_token": token})
    reports = [locked_harvest(settings, HarvestOptions(shard=Shard(k, 2))) for k in (1, 0)]
    snapshots = query(settings, "SELECT DISTINCT run_id FROM users")
    assert snapshots == [(reports[1].run_id,)]
    assert query(settings, "SELECT count(*) FROM user_bots WHERE run_id = ?",
                 reports[0].run_id) == [(0,)]


def test_trends_are_built_by_one_job_at_a_time(service: RunningService, tmp_path: Path) -> None:
    """`run --shard` harvests beside a trends build of another job, then finds the trends lock
    held: its harvest counts, and it says why it built no trends. The command does so from the
    fresh image it builds its trends in (the harvest's advisory locks ended with its session)."""
    settings = shared_settings(service, tmp_path, {"run.lock_timeout": 0.5,
                                                    "exports.dir": str(tmp_path / "exports")})

    def run_cli(shard: str) -> tuple[int, dict[str, Any]]:
        proc = subprocess.run(
            [sys.executable, "-m", "pipeline", "run", "--shard", shard, "--json", "--no-progress",
             "--lock-timeout", "0.5"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
            env=worker_env(settings, BOTSTATS_EXPORTS_DIR=settings.exports.dir))
        assert proc.stdout.strip(), proc.stderr
        return proc.returncode, json.loads(proc.stdout)

    with run_lock(settings, "trends", scope=TRENDS_SCOPE):
        report = run(settings, RunOptions(HarvestOptions(shard=Shard(1, 2))))
        code, data = run_cli("0/2")
    assert (report.status, report.exit_code) == ("complete", 0)
    assert report.trends is None and "the trends lock" in report.trends_skipped
    assert (code, data["status"], data["trends"]) == (0, "complete", None)
    assert data["memory"]["fresh_process"] is True and "the trends lock" in data["trends_skipped"]
    code, data = run_cli("0/2")
    assert (code, data["status"]) == (0, "complete") and data["memory"]["fresh_process"] is True
    assert data["trends"]["datasets"] and data["trends"]["run_id"] == data["run_id"]
