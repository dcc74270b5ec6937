"""Readers and the writer, with real second processes: an analyst's open session (read-only,
or read-write like a `duckdb` shell) never makes a harvest fail and keeps the snapshot it opened,
a query during a harvest sees whole batches only, and two `botstats run` at once leave an exact
archive."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import child_env, read_line, service_stat_rows

from pipeline.archive import _store as store
from pipeline.archive._store import open_archive
from pipeline.core._loading import load_settings
from pipeline.core._settings import Settings
from pipeline.operate import _runner as runner
from pipeline.operate import locked_harvest

pytestmark = [pytest.mark.slow, pytest.mark.clock]

# A second process that opens the archive, starts a transaction (as a notebook's long query
# or an analyst's `BEGIN` does), reports its row count, holds it until told to go on (a line on
# stdin), counts again in the same transaction, then once more after it.
HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from pipeline.archive import _store as store
    con = store.connect(store.ArchivePaths(Path(sys.argv[1])), read_only=sys.argv[2] == "ro")
    con.execute("BEGIN TRANSACTION")
    print(con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0], flush=True)
    sys.stdin.readline()
    print(con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0], flush=True)
    con.execute("COMMIT")
    print(con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0], flush=True)
    con.close()
""")


def _env() -> dict[str, str]:
    env = child_env()
    return {**env, "BOTSTATS_CONFIG": ""}


def _settings(tmp_path: Path, base_url: str) -> Settings:
    return load_settings(None, env={}, overrides={
        "service.base_url": base_url, "store.db": str(tmp_path / "a.ducklake"),
        "exports.dir": str(tmp_path / "exports")})


def _count(db: Path, sql: str = "SELECT count(*) FROM bot_stats") -> int:
    with open_archive(db) as con:
        return int(con.execute(sql).fetchall()[0][0])


def _expected(svc: Any) -> int:
    d = svc.directory
    return sum(len(d.valid_stats(b)) for b in d.bot_ids())


def _run(tmp_path: Path, db: Path, base_url: str, *args: str,
         env: dict[str, str] | None = None, job: str = "run") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline", "--db", str(db), "--base-url", base_url, job,
         "--no-progress", *args],
        cwd=tmp_path, env={**_env(), **(env or {})}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_an_open_reader_never_blocks_a_harvest(tmp_path: Path, service: Any, mode: str) -> None:
    settings = _settings(tmp_path, service.base_url)
    assert runner.run(settings).status == "complete"
    before = _count(settings.db_path)
    service.directory.advance(2)  # new records for the next harvest (a day: none ahead of now)
    reader = subprocess.Popen([sys.executable, "-c", HOLDER, str(settings.db_path), mode],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert reader.stdout is not None and reader.stdin is not None
        assert int(read_line(reader.stdout)) == before  # it holds the file open now
        harvest = _run(tmp_path, settings.db_path, service.base_url)
        out, err = harvest.communicate(timeout=120)
        assert harvest.returncode == 0, err
        reader.stdin.write("go on\n")
        reader.stdin.flush()
        # The open transaction keeps its snapshot; the next one sees the new records.
        assert int(read_line(reader.stdout)) == before
        assert int(read_line(reader.stdout)) == _expected(service)
        assert reader.wait(timeout=30) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
    assert _count(settings.db_path) == _expected(service) > before


def test_an_analyst_query_during_a_harvest_sees_whole_batches_only(tmp_path: Path,
                                                                    service_factory: Any) -> None:
    # Two new records a bot and batches of 10 stat rows: the harvest commits a few bots at a
    # time, several batches in all, four bots at once at 0.3 s a request.
    svc = service_factory(bots=40, history_days=3, stats_per_day=2, latency_ms=300)
    settings = _settings(tmp_path, svc.base_url)
    assert locked_harvest(settings).status == "complete"
    before = _per_bot(settings)
    svc.directory.advance(2)
    after = {b: len(svc.directory.valid_stats(b)) for b in svc.directory.bot_ids()}
    assert {after[b] - before[b] for b in after} == {2}
    harvest = _run(tmp_path, settings.db_path, svc.base_url, job="harvest", env={
        "BOTSTATS_STORE_BATCH_ROWS": "10", "BOTSTATS_SERVICE_CONCURRENCY": "4"})
    try:
        # Wait until the harvester holds the lock (its holder file names the run).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            info = (tmp_path / "a.ducklake.lock.holder.json")
            if info.exists() and '"released_at"' not in info.read_text():
                break
            time.sleep(0.05)
        # Each read sees a committed snapshot: each bot with all its new records or none.
        seen: list[dict[str, int]] = []
        while harvest.poll() is None and len(seen) < 200:
            seen.append(_per_bot(settings))
            time.sleep(0.1)
        _, err = harvest.communicate(timeout=120)
    finally:
        if harvest.poll() is None:
            harvest.kill()
    assert harvest.returncode == 0, err
    assert _per_bot(settings) == after
    for counts in seen:
        assert all(counts[b] in (before[b], after[b]) for b in after), counts
    between = {sum(c.values()) for c in seen} - {sum(before.values()), sum(after.values())}
    assert len(between) >= 2, "no query saw the harvest part-way through several batches"


def _per_bot(settings: Settings) -> dict[str, int]:
    """Each bot's archived record count, in one snapshot (what `botstats sql` and notebooks see)."""
    with store.reader(settings) as con:
        return dict(con.execute("SELECT bot_id, count(*) FROM bot_stats GROUP BY bot_id").fetchall())


def test_two_runs_at_once_both_succeed_and_the_archive_is_exact(tmp_path: Path,
                                                                service_factory: Any) -> None:
    svc = service_factory(bots=60, history_days=5, stats_per_day=2, latency_ms=200)
    db = tmp_path / "a.ducklake"
    first = _run(tmp_path, db, svc.base_url, "--lock-timeout", "120", "--json")
    second = _run(tmp_path, db, svc.base_url, "--lock-timeout", "120", "--json")
    results = [p.communicate(timeout=180) for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], results
    reports = [json.loads(out) for out, _ in results]
    waits = sorted(r["lock_wait_seconds"] for r in reports)
    assert waits[0] < 0.5 < waits[1]  # one ran at once, the other waited for it
    assert sorted(r["harvest"]["stats_added"] for r in reports) == [0, _expected(svc)]
    _assert_exact(db, svc)
    assert _count(db, "SELECT count(*) FROM harvest_runs WHERE status = 'complete'") == 2


def test_two_runs_at_once_with_no_wait_one_exits_75(tmp_path: Path, service_factory: Any) -> None:
    svc = service_factory(bots=60, history_days=5, stats_per_day=2, latency_ms=200)
    db = tmp_path / "a.ducklake"
    first = _run(tmp_path, db, svc.base_url, "--lock-timeout", "0")
    time.sleep(0.05)
    second = _run(tmp_path, db, svc.base_url, "--lock-timeout", "0")
    results = [p.communicate(timeout=180) for p in (first, second)]
    codes = sorted([first.returncode, second.returncode])
    assert codes == [0, 75], results
    loser = results[[first.returncode, second.returncode].index(75)][1]
    assert "holds the archive lock" in loser and "(run, pid" in loser
    _assert_exact(db, svc)
    assert _count(db, "SELECT count(*) FROM harvest_runs") == 1


def _assert_exact(db: Path, svc: Any) -> None:
    """Row for row what the service holds: every record once, every bot once."""
    with open_archive(db) as con:
        rows = sorted(con.execute(
            "SELECT bot_id, stat_id, recorded_at, users, guilds, shards, memory_load, cpu_load, "
            "commands_executed FROM bot_stats").fetchall())
        bots = sorted(r[0] for r in con.execute("SELECT bot_id FROM bots").fetchall())
    assert rows == service_stat_rows(svc.directory)
    assert bots == sorted(svc.directory.bot_ids())
