"""The archive with a PostgreSQL catalog ([store].catalog) and its data files in a shared folder
or object storage ([store].data_path): secrets kept out of everything shown, a reader that has
only the connection string and the data path, commits that collide retried with every key kept
once, the trends' change watermark in commit order, and compaction, backup and restore.

Against a real PostgreSQL 15 started for the session (tests/_postgres_support.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from _alerts_support import Receiver, receiver
from _postgres_support import cluster, new_database
from conftest import (
    assert_archive_equals_service,
    child_env,
    harvest_settings_for,
    query,
    read_line,
)

from pipeline import archive
from pipeline.archive._commit import committing
from pipeline.archive._queries import changes_since
from pipeline.archive._store import ArchivePaths, connect
from pipeline.archive._writes import Frames, _write, write_batch
from pipeline.core import ConfigError, LockTimeout, Settings, StoreError, load_settings
from pipeline.harvester import HarvestOptions, HarvestReport, harvest
from pipeline.operate import RunOptions, backup_archive, compact_archive, restore_archive, run
from pipeline.operate._lock import run_lock
from pipeline.service import RunningService

pytestmark = pytest.mark.slow
__all__ = ["receiver"]  # the fixture


def shared(svc: RunningService, tmp: Path, **overrides: Any) -> Settings:
    return harvest_settings_for(svc, tmp / "unused.ducklake", {
        "store.catalog": new_database(), "store.data_path": str(tmp / "lake"), **overrides})


def test_a_password_in_the_connection_string_is_never_shown(tmp_path: Path) -> None:
    """From the environment it is taken out of the string: `botstats config`, the error of a
    catalog that cannot be reached, and the logs never carry it."""
    secret = "pw-Vq83zx0"
    dsn = f"postgresql://botstats:{secret}@127.0.0.1:1/botstats"
    env = child_env()
    env |= {"BOTSTATS_STORE_CATALOG": dsn, "BOTSTATS_STORE_DATA_PATH": str(tmp_path / "lake"),
            "BOTSTATS_CONFIG": os.devnull}
    shown = subprocess.run([sys.executable, "-m", "pipeline", "config"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert '"catalog_password": "set"' in shown.stdout and secret not in shown.stdout
    flag = subprocess.run([sys.executable, "-m", "pipeline", "config", "--catalog", dsn],
                          env={k: v for k, v in env.items() if k != "BOTSTATS_STORE_CATALOG"},
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert flag.returncode == 0, flag.stderr
    assert '"catalog_password": "set"' in flag.stdout and secret not in flag.stdout
    assert '"catalog": "user=botstats dbname=botstats host=127.0.0.1 port=1"' in flag.stdout
    attach = subprocess.run([sys.executable, "-m", "pipeline", "sql", "--attach"], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert attach.returncode == 0, attach.stderr
    assert "postgres_scanner.duckdb_extension" in attach.stdout
    assert "ATTACH 'ducklake:postgres:" in attach.stdout and secret not in attach.stdout
    failed = subprocess.run([sys.executable, "-m", "pipeline", "harvest", "--no-progress"],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert failed.returncode != 0
    assert "cannot reach the PostgreSQL catalog" in failed.stderr, failed.stderr
    assert secret not in failed.stdout + failed.stderr
    settings = load_settings(os.devnull, env={"BOTSTATS_STORE_CATALOG": dsn,
                                             "BOTSTATS_STORE_DATA_PATH": "/x"})
    assert secret not in settings.store.catalog and settings.catalog_password.get() == secret


def test_a_role_with_a_password_opens_the_archive(service: RunningService,
                                                  tmp_path: Path) -> None:
    """The password reaches PostgreSQL (through libpq's PGPASSWORD, not the string DuckDB
    repeats in its errors) for the catalog and for the locks."""
    dsn = new_database(template=False)
    with cluster().admin() as con:
        con.execute("CREATE ROLE lake_user LOGIN PASSWORD 'pw-Kx71'")
        con.execute(f"ALTER DATABASE {dsn.rsplit('/', 1)[1]} OWNER TO lake_user")
    hba = cluster().folder / "data" / "pg_hba.conf"
    rules = hba.read_text()
    if "lake_user" not in rules:
        hba.write_text(f"host all lake_user 127.0.0.1/32 scram-sha-256\n{rules}")
        with cluster().admin() as con:
            con.execute("SELECT pg_reload_conf()")
    with_password = dsn.replace("postgres@", "lake_user:pw-Kx71@")
    settings = harvest_settings_for(service, tmp_path / "unused.ducklake", {
        "store.catalog": with_password, "store.data_path": str(tmp_path / "lake")})
    os.environ.pop("PGPASSWORD", None)
    try:
        from pipeline.operate import locked_harvest

        assert locked_harvest(settings).status == "complete"
        assert_archive_equals_service(settings, service.directory)
    finally:
        os.environ.pop("PGPASSWORD", None)


@pytest.mark.parametrize(("overrides", "words"), [
    ({"store.catalog": "host=db dbname=x"}, "needs [store].data_path"),
    ({"store.catalog": "nonsense", "store.data_path": "/x"}, "neither a URI"),
    ({"store.catalog": "postgresql://u@h/", "store.data_path": "/x"}, "names no database"),
    ({"store.data_path": "s3://"}, "needs a bucket"),
    ({"store.s3_endpoint": "minio:9000"}, "must be an http(s) URL"),
])
def test_a_bad_catalog_setting_is_refused_before_any_io(overrides: dict[str, str],
                                                         words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(os.devnull, env={}, overrides=overrides)
    assert words in str(info.value)


def test_a_reader_with_only_the_connection_string_and_data_path_keeps_its_snapshot(
        service: RunningService, tmp_path: Path) -> None:
    settings = shared(service, tmp_path)
    harvest(settings, HarvestOptions(shard=archive_shard(0, 2)))
    reader = textwrap.dedent("""
        import sys, pipeline
        con = pipeline.open_archive(sys.argv[1], data_path=sys.argv[2])
        count = lambda: con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0]
        con.execute("BEGIN TRANSACTION")
        print(count(), flush=True)
        sys.stdin.readline()
        print(count(), flush=True)
        con.execute("COMMIT")
        print(count(), flush=True)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOTSTATS_", "PG"))}
    proc = subprocess.Popen([sys.executable, "-c", reader, settings.store.catalog,
                             settings.store.data_path], cwd=tmp_path, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    before = int(read_line(proc.stdout))
    assert harvest(settings, HarvestOptions(shard=archive_shard(1, 2))).stats_added > 0  # commits meanwhile
    proc.stdin.write("\n")
    proc.stdin.flush()
    during, after = int(read_line(proc.stdout)), int(read_line(proc.stdout))
    assert proc.wait(timeout=60) == 0
    total = query(settings, "SELECT count(*) FROM bot_stats")[0][0]
    assert (before, during, after) == (before, before, total) and total > before


def archive_shard(k: int, n: int) -> Any:
    from pipeline.core import Shard

    return Shard(k, n)


def _report(run_id: str) -> HarvestReport:
    return HarvestReport(run_id=run_id, mode="incremental")


def _frames(bot: str, stat: str, reject_raw: str) -> Frames:
    stats = pl.DataFrame({
        "stat_id": [stat], "bot_id": [bot], "recorded_at": [datetime(2025, 1, 1, tzinfo=UTC)],
        "users": [1], "guilds": [1], "shards": [None], "memory_load": [None],
        "cpu_load": [None], "commands_executed": [None], "raw": [json.dumps({"id": stat})],
        "_check": [False]}, schema={**archive.STAT_SCHEMA, "_check": pl.Boolean})
    custom = pl.DataFrame(schema=archive.CUSTOM_SCHEMA)
    reject = {"endpoint": "GET /bots?skip=0", "bot_id": None, "reason": "bad bot", "raw": reject_raw}
    return Frames(stats=stats, custom=custom, bots=[], rejects=[reject], errors=[], users=[],
                  snapshots={}, distinct=True)


def test_commits_that_collide_are_retried_and_keys_every_worker_writes_stay_once(
        service: RunningService, tmp_path: Path) -> None:
    """Worker A's batch collides with B's, committed while A's was open: A's is run again
    against what B committed, so the listing reject both saw is kept once, and a record B
    archived in the meantime (a worker of an older shard layout) is not written twice."""
    settings = shared(service, tmp_path)
    paths = ArchivePaths.of(settings)
    with archive.writer(settings) as a:
        b = connect(paths)
        try:
            ra, rb = _report("run-a"), _report("run-b")
            archive.begin_run(a, ra)
            archive.begin_run(b, rb)
            same = _frames("bot-1", "s-1", "{broken")
            calls = []

            def work(con: duckdb.DuckDBPyConnection, retried: bool) -> None:
                calls.append(retried)
                con.execute("SELECT count(*) FROM rejects").fetchall()  # A's snapshot
                if not retried:  # B commits the same batch while A's transaction is open
                    write_batch(b, same, rb)
                _write(con, same, ra, False, retried)

            committing(a, ra, work)
        finally:
            b.close()
    assert calls == [False, True] and ra.commit_retries == 1
    assert query(settings, "SELECT count(*) FROM rejects") == [(1,)]
    assert query(settings, "SELECT count(*) FROM bot_stats") == [(1,)]
    assert (ra.stats_added, rb.stats_added, ra.rejects, rb.rejects) == (0, 1, 0, 1)
    assert query(settings, "SELECT commit_retries FROM harvest_runs WHERE run_id = 'run-a'") \
        == [(1,)]


def test_the_change_watermark_follows_commits_not_the_times_batches_stamp(
        service: RunningService, tmp_path: Path) -> None:
    """A batch stamped before another but committed after the trends read the archive is
    still seen by the next incremental trends."""
    settings = shared(service, tmp_path)
    paths = ArchivePaths.of(settings)
    insert = ("INSERT INTO bot_stats (stat_id, bot_id, recorded_at, raw, run_id, archived_at) "
              "VALUES (?, 'bot', ?, '{}', 'run', ?)")
    with archive.writer(settings) as early:
        late = connect(paths)
        try:
            early.execute("BEGIN TRANSACTION")  # stamped first...
            early.execute(insert, ["s1", datetime(2025, 1, 1, tzinfo=UTC), datetime.now(UTC)])
            late.execute(insert, ["s2", datetime(2025, 3, 1, tzinfo=UTC), datetime.now(UTC)])
            watermark = changes_since(late, None).watermark
            early.execute("COMMIT")  # ...committed after the trends read it
            assert changes_since(late, watermark).first_day == date(2025, 1, 1)
            later = changes_since(late, watermark).watermark
            assert changes_since(late, later).first_day is None
        finally:
            late.close()
    with pytest.raises(ValueError, match="not a snapshot"):
        with archive.reader(settings) as con:
            changes_since(con, "2025-01-01T00:00:00+00:00")


def harvest_shards(settings: Settings, n: int = 2) -> None:
    """Every shard of n harvested, one worker each."""
    assert [harvest(settings, HarvestOptions(shard=archive_shard(k, n))).status for k in range(n)] == \
        ["complete"] * n


def test_compact_backup_and_restore_on_a_postgres_catalog(
        service: RunningService, tmp_path: Path) -> None:
    """On an archive that shard workers write: what they wrote survives each, and their next
    runs go on from it."""
    settings = shared(service, tmp_path, **{"store.batch_rows": 50})
    harvest_shards(settings)
    files = list((tmp_path / "lake").rglob("*.parquet"))
    done = compact_archive(settings, keep_days=0)
    assert done.files_after < done.files_before == len(files)
    assert_archive_equals_service(settings, service.directory, bots=True)
    rows = query(settings, "SELECT count(*) FROM bot_stats")
    copied, _ = backup_archive(settings, tmp_path / "backup")
    assert copied == done.files_after
    assert backup_archive(settings, tmp_path / "backup")[0] == 0, "only what is new is copied"
    service.directory.advance(2)
    harvest_shards(settings)
    assert query(settings, "SELECT count(*) FROM bot_stats") > rows
    restore_archive(settings, tmp_path / "backup")
    assert query(settings, "SELECT count(*) FROM bot_stats") == rows
    harvest_shards(settings)  # the next runs read again what they lack
    assert_archive_equals_service(settings, service.directory, bots=True)
    with pytest.raises(StoreError, match="holds no backup of a PostgreSQL catalog"):
        restore_archive(settings, tmp_path)


@pytest.fixture
def s3_server(tmp_path: Path) -> Any:
    """moto's S3 server on loopback, with a bucket `lake`; stopped after the test."""
    import socket

    import boto3

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = (tmp_path / "moto.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=log, stderr=log)
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="AKIDLAKE", aws_secret_access_key="lake-secret-81")
    for _ in range(100):
        try:
            client.create_bucket(Bucket="lake")
            break
        except Exception:  # not listening yet
            import time

            time.sleep(0.1)
    yield endpoint, client
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


def test_data_files_in_object_storage(service: RunningService, tmp_path: Path,
                                      s3_server: Any) -> None:
    endpoint, client = s3_server
    env = {"AWS_ACCESS_KEY_ID": "AKIDLAKE", "AWS_SECRET_ACCESS_KEY": "lake-secret-81"}
    settings = load_settings(os.devnull, env=env, overrides={
        "service.base_url": service.base_url, "store.catalog": new_database(),
        "store.data_path": "s3://lake/archive/", "store.s3_endpoint": endpoint,
        "store.s3_url_style": "path", "store.s3_region": "us-east-1", "store.batch_rows": 50})
    assert harvest(settings).status == "complete"
    assert_archive_equals_service(settings, service.directory, bots=True)
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="lake")["Contents"]]
    assert keys and all(k.startswith("archive/main/") and k.endswith(".parquet") for k in keys)
    statements = "\n".join(archive.attach_statements(ArchivePaths.of(settings), read_only=True,
                                                     reveal=False))
    assert "lake-secret-81" not in statements and "<secret>" in statements
    done = compact_archive(settings, keep_days=0)
    assert done.files_after < done.files_before == len(keys)
    after = [o["Key"] for o in client.list_objects_v2(Bucket="lake")["Contents"]]
    assert len(after) == done.files_after, "the files compaction dropped are deleted there"
    assert_archive_equals_service(settings, service.directory, bots=True)
    with pytest.raises(StoreError, match="object storage"):
        backup_archive(settings, tmp_path / "backup")


def test_a_catalog_whose_creation_was_cut_short_is_no_archive_until_the_next_writer_migrates(
        service: RunningService, tmp_path: Path) -> None:
    # A worker killed after DuckLake made its tables in the database, before the migrations'
    # one commit: what it leaves is a lake without bot_stats.
    settings = shared(service, tmp_path, **{"store.catalog": new_database(template=False)})
    connect(ArchivePaths.of(settings)).close()
    assert not archive.exists(settings)
    with pytest.raises(StoreError, match="there is no archive"):
        archive.open_archive(settings.store.catalog, data_path=settings.store.data_path)
    # The next writer migrates it, and readers meet the whole archive.
    assert harvest(settings).status == "complete"
    assert_archive_equals_service(settings, service.directory)


def test_a_run_kept_out_by_a_postgres_lock_tells_who_holds_it(tmp_path: Path,
                                                             receiver: Receiver) -> None:
    # The holder is read from the catalog's sessions (each job names itself there), as a
    # SQLite catalog's run reads it from the holder file.
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\ncatalog = "{new_database()}"\ndata_path = "{tmp_path / "lake"}"\n'
                      f'[alerts]\nlock_after = "0s"\n[alerts.destinations.ops]\ntype = "discord"\n')
    settings = load_settings(config, env={"BOTSTATS_ALERTS_OPS_URL": receiver.url("/ops/t0k3n")})
    with archive.writer(settings):
        pass  # the archive exists; no run has completed yet
    with run_lock(settings, "run", run_id="r-stuck"), pytest.raises(LockTimeout):
        run(settings, RunOptions(lock_timeout=0.1))
    ((embed,),) = [body["embeds"] for body in receiver.received("/ops/t0k3n")]
    assert embed["title"].startswith("botstats archive lock held for ")
    assert embed["title"].endswith(f"by run (pid {os.getpid()})")
    assert "holder: run r-stuck" in embed["description"]
