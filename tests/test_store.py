"""The store: the archive as a DuckLake (opened, read-only for readers, backed up and restored),
polars frames read by DuckDB under their names (`sql.run_with_frames`), and the schema's migrations."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from conftest import child_env, insert_bot

from pipeline.archive import _migrations as migrations
from pipeline.archive import _sql as sql
from pipeline.archive import _store as store
from pipeline.archive import _upkeep as upkeep
from pipeline.archive._store import ArchivePaths, open_archive
from pipeline.core._errors import StoreError


def lake(path: Path) -> duckdb.DuckDBPyConnection:
    """The archive at ``path``, read-write, without migrations."""
    return store.connect(ArchivePaths(path))


def test_frames_are_read_under_their_names_and_unregistered_after(tmp_path: Path) -> None:
    con = lake(tmp_path / "a.ducklake")
    con.execute("CREATE TABLE t (k VARCHAR, n BIGINT, seen TIMESTAMPTZ, note VARCHAR)")
    when = datetime(2024, 6, 1, tzinfo=UTC)
    rows = pl.DataFrame({"k": ["a", "b"], "n": [1, None], "seen": [when, when]})
    assert sql.run_with_frames(con, "INSERT INTO t BY NAME SELECT * FROM rows_in", rows_in=rows) == [(2,)]
    both = sql.run_with_frames(con, "SELECT x.k, y.n FROM x JOIN y USING (k) ORDER BY k",
                     x=rows, y=rows.filter(pl.col("k") == "a"))
    assert both == [("a", 1)]
    assert con.execute("SELECT k, n, seen, note FROM t ORDER BY k").fetchall() == [
        ("a", 1, when, None), ("b", None, when, None)]
    try:
        con.execute("SELECT * FROM rows_in")
        raise AssertionError("the frame stayed registered")
    except duckdb.CatalogException:
        pass
    con.close()


def test_a_failing_statement_inside_a_transaction_reports_its_own_error(tmp_path: Path) -> None:
    # The frames are unregistered after a failure too, which an aborted transaction refuses
    # ("Current transaction is aborted"): that must not hide why the statement failed (a full
    # disk, once, showed up as nothing but "please ROLLBACK").
    con = lake(tmp_path / "a.ducklake")
    con.execute("CREATE TABLE t (a INTEGER NOT NULL)")
    con.execute("INSERT INTO t VALUES (1)")
    con.execute("BEGIN TRANSACTION")
    with pytest.raises(duckdb.ConstraintException, match="NOT NULL"):
        sql.run_with_frames(con, "INSERT INTO t SELECT a FROM f", f=pl.DataFrame({"a": [None]}, schema={"a": pl.Int32}))
    sql.rollback(con)
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(1,)]
    con.close()


def test_a_column_of_nothing_but_nulls_is_written_as_null(tmp_path: Path) -> None:
    # polars types an all-None column Null, which DuckDB refuses from an Arrow stream as is.
    con = lake(tmp_path / "a.ducklake")
    con.execute("CREATE TABLE t (k VARCHAR, bot_id VARCHAR, n DOUBLE)")
    errors_in = pl.DataFrame([{"k": "x", "bot_id": None, "n": None}])
    assert errors_in.schema["bot_id"] == pl.Null
    sql.run_with_frames(con, "INSERT INTO t BY NAME SELECT * FROM errors_in", errors_in=errors_in)
    assert con.execute("SELECT * FROM t").fetchall() == [("x", None, None)]
    con.close()


# --- migrations: applied on open, in order, once, each whole or not at all ----------------------
def _sql_dir_with(tmp_path: Path, extra: dict[str, str]) -> Path:
    """A copy of the shipped sql/ folder with ``extra`` migration files added."""
    import shutil

    copy = tmp_path / "sql"
    shutil.copytree(migrations.sql_dir(), copy)
    for name, text in extra.items():
        (copy / "migrations" / name).write_text(text, encoding="utf-8")
    return copy


def _applied(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [name for (name,) in con.execute(
        "SELECT name FROM schema_migrations ORDER BY version").fetchall()]


def test_an_archive_gets_the_new_migrations_on_open_and_keeps_its_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "archive.ducklake"
    with lake(db) as con:
        shipped = store.migrate(con)
        assert shipped and shipped == sorted(shipped)  # every shipped file, in order
        insert_bot(con, "b1", "one", "2026-11-01", "2026-11-01", run_id="r1")
        assert store.migrate(con) == []  # nothing twice
    newer = _sql_dir_with(tmp_path, {
        "901_bot_notes.sql": "CREATE TABLE bot_notes (bot_id VARCHAR, note VARCHAR);",
        "902_note_one.sql": "INSERT INTO bot_notes SELECT bot_id, 'seen' FROM bots;"})
    monkeypatch.setattr(migrations, "sql_dir", lambda: newer)
    with lake(db) as con:
        assert store.migrate(con) == ["901_bot_notes.sql", "902_note_one.sql"]
        assert _applied(con) == [*shipped, "901_bot_notes.sql", "902_note_one.sql"]
        assert con.execute("SELECT * FROM bot_notes").fetchall() == [("b1", "seen")]
        assert con.execute("SELECT bot_id, name FROM bots").fetchall() == [("b1", "one")]
        assert store.migrate(con) == []


def test_an_archive_from_before_bot_latest_stat_gets_it_filled_on_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An archive written when only 001 existed: opening it with today's botstats adds
    # bot_latest_stat and fills it with each bot's newest record, so its next incremental run
    # compares with the right keys.
    old_sql = _sql_dir_with(tmp_path, {})
    for later in (old_sql / "migrations").glob("*.sql"):
        if not later.name.startswith("001_"):
            later.unlink()
    monkeypatch.setattr(migrations, "sql_dir", lambda: old_sql)
    db = tmp_path / "archive.ducklake"
    with lake(db) as con:
        assert store.migrate(con) == ["001_init.sql"]
        con.execute(
            "INSERT INTO bot_stats (stat_id, bot_id, recorded_at, raw, run_id, archived_at) "
            "SELECT 's' || i, 'b' || (i % 3), TIMESTAMPTZ '2026-01-01' + to_days(i), '{}', 'r', "
            "now() FROM range(10) t(i)")
    monkeypatch.undo()
    with lake(db) as con:
        assert store.migrate(con)[0] == "002_bot_latest_stat.sql"
        latest = con.execute("SELECT bot_id, stat_id, day(recorded_at) FROM bot_latest_stat "
                             "ORDER BY bot_id").fetchall()
    assert latest == [("b0", "s9", 10), ("b1", "s7", 8), ("b2", "s8", 9)]


def test_an_archive_from_before_files_by_month_keeps_its_files_and_writes_new_ones_by_month(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An archive of botstats 0.2.0 (migrations up to 005): its records span months in one file.
    old_sql = _sql_dir_with(tmp_path, {})
    (old_sql / "migrations" / "006_partition_by_month.sql").unlink()
    monkeypatch.setattr(migrations, "sql_dir", lambda: old_sql)
    db = tmp_path / "archive.ducklake"
    insert = ("INSERT INTO bot_stats (stat_id, bot_id, recorded_at, raw, run_id, archived_at) "
              "SELECT '{p}' || i, 'b', TIMESTAMPTZ '{start}' + to_days(i), '{{}}', 'r', now() "
              "FROM range(90) t(i)")
    with lake(db) as con:
        assert "006_partition_by_month.sql" not in store.migrate(con)
        con.execute(insert.format(p="old", start="2026-01-01"))
    monkeypatch.undo()
    with lake(db) as con:
        assert store.migrate(con) == ["006_partition_by_month.sql"]
        con.execute(insert.format(p="new", start="2026-05-01"))
        files = con.execute(
            f"SELECT data_file FROM ducklake_list_files('{store.ALIAS}', 'bot_stats')").fetchall()
        counts = con.execute("SELECT left(stat_id, 3), count(*) FROM bot_stats GROUP BY ALL "
                             "ORDER BY 1").fetchall()
    assert counts == [("new", 90), ("old", 90)]  # nothing lost
    # The old rows stay in their one file; the new ones are in a file a month (May-July).
    assert len(files) == 1 + 3, files


def test_an_archive_a_newer_botstats_migrated_is_not_written_by_this_one(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pipeline.cli import cli

    db = tmp_path / "archive.ducklake"
    with lake(db) as con:
        store.migrate(con)
        con.execute("INSERT INTO schema_migrations VALUES (900, '900_from_the_future.sql', now())")
        con.execute("INSERT INTO harvest_runs (run_id, started_at, status, mode) "
                    "VALUES ('r1', now(), 'complete', 'full')")
    (tmp_path / "empty.toml").touch()
    base = ["--config", str(tmp_path / "empty.toml"), "--db", str(db)]

    refused = CliRunner().invoke(cli, [*base, "--base-url", "http://127.0.0.1:9", "harvest"])
    assert refused.exit_code == 1, refused.output
    assert "schema migrations this botstats does not know (900_from_the_future.sql" in refused.output
    assert "Upgrade botstats" in refused.output and "Traceback" not in refused.output
    with open_archive(db) as con:
        assert con.execute("SELECT run_id FROM harvest_runs").fetchall() == [("r1",)]
    read = CliRunner().invoke(cli, [*base, "sql", "SELECT count(*) AS n FROM harvest_runs"])
    assert read.exit_code == 0 and "1" in read.output


def test_a_failing_migration_is_rolled_back_whole_and_says_which(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "archive.ducklake"
    with lake(db) as con:
        shipped = store.migrate(con)
    broken = _sql_dir_with(tmp_path, {
        "901_half.sql": "CREATE TABLE half_done (x INTEGER); SELECT * FROM no_such_table;"})
    monkeypatch.setattr(migrations, "sql_dir", lambda: broken)
    with lake(db) as con:
        with pytest.raises(StoreError, match=r"migration 901_half\.sql failed: .*no_such_table"):
            store.migrate(con)
        assert _applied(con) == shipped
        tables = set(store.table_names(con))
        assert "half_done" not in tables and "bot_stats" in tables


def test_an_archive_whose_directory_cannot_be_made_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(StoreError, match=r"cannot create the archive's data folder .*notes\.txt"):
        lake(tmp_path / "notes.txt" / "sub" / "a.ducklake")
    assert (tmp_path / "notes.txt").read_text() == "keep me"


# --- the archive as readers meet it -------------------------------------------------------------
def _filled(tmp_path: Path) -> Path:
    db = tmp_path / "archive.ducklake"
    with lake(db) as con:
        store.migrate(con)
        for i in range(5):
            insert_bot(con, f"b{i}", "n", "2026-11-01", "2026-11-01", run_id="r1")
    return db


def test_a_reader_keeps_its_snapshot_while_a_writer_commits(tmp_path: Path) -> None:
    db = _filled(tmp_path)
    reader = open_archive(db)
    reader.execute("BEGIN TRANSACTION")
    assert reader.execute("SELECT count(*) FROM bots").fetchall() == [(5,)]
    with lake(db) as writer:
        writer.execute("BEGIN TRANSACTION")
        insert_bot(writer, "b9", "n", "2026-11-01", "2026-11-01", run_id="r2")
        writer.execute("COMMIT")
    assert reader.execute("SELECT count(*) FROM bots").fetchall() == [(5,)]
    reader.execute("COMMIT")
    assert reader.execute("SELECT count(*) FROM bots").fetchall() == [(6,)]
    reader.close()


def test_readers_cannot_write(tmp_path: Path) -> None:
    db = _filled(tmp_path)
    with open_archive(db) as con, pytest.raises(duckdb.Error, match="read-only|read only"):
        con.execute("DELETE FROM bot_listing")
    with open_archive(db) as con:
        assert con.execute("SELECT count(*) FROM bots").fetchall() == [(5,)]


def test_the_attach_statements_open_the_archive_in_a_plain_duckdb_session(tmp_path: Path) -> None:
    # What `botstats sql --attach` prints for the duckdb CLI, run in a session of its own, from
    # another working directory: the archive's data paths do not depend on where it was made.
    import os

    db = _filled(tmp_path)
    statements = store.attach_statements(ArchivePaths(db), read_only=True)
    cwd = os.getcwd()
    os.chdir("/")
    try:
        with duckdb.connect(config={"autoinstall_known_extensions": False}) as con:
            for statement in statements:
                con.execute(statement)
            assert con.execute("SELECT count(*) FROM bots").fetchall() == [(5,)]
    finally:
        os.chdir(cwd)


def test_an_archive_moved_elsewhere_opens_with_its_data(tmp_path: Path) -> None:
    import shutil

    db = _filled(tmp_path / "here")
    with lake(db) as con:  # rows in a data file, not only inlined in the catalog
        con.execute("INSERT INTO bot_stats (stat_id, bot_id, recorded_at, raw, run_id, archived_at) "
                    "SELECT 's' || i, 'b1', now(), '{}', 'r', now() FROM range(5000) t(i)")
    shutil.move(tmp_path / "here", tmp_path / "there")
    with open_archive(tmp_path / "there" / "archive.ducklake") as con:
        assert con.execute("SELECT count(*), count(DISTINCT stat_id) FROM bot_stats").fetchall() \
            == [(5000, 5000)]


def test_a_backup_copies_only_what_is_new_and_restores_exactly(tmp_path: Path) -> None:
    db = _filled(tmp_path / "live")
    paths = ArchivePaths(db)

    def add(n: int, tag: str) -> None:
        with lake(db) as con:
            con.execute("INSERT INTO bot_stats (stat_id, bot_id, recorded_at, raw, run_id, "
                        f"archived_at) SELECT '{tag}' || i, 'b1', now(), '{{}}', 'r', now() "
                        f"FROM range({n}) t(i)")

    add(5000, "a")
    first = upkeep.backup(paths, tmp_path / "bk")
    assert first[0] >= 1
    add(5000, "b")
    second = upkeep.backup(paths, tmp_path / "bk")
    assert second[0] == 1  # the one data file the second insert wrote
    add(5000, "c")  # lost by the restore below
    upkeep.restore(tmp_path / "bk", paths)
    with open_archive(db) as con:
        assert con.execute("SELECT count(*) FROM bot_stats").fetchall() == [(10000,)]
        assert con.execute("SELECT count(*) FROM bot_stats WHERE stat_id LIKE 'c%'").fetchall() \
            == [(0,)]


def test_a_file_that_is_not_an_archive_is_refused_by_name(tmp_path: Path) -> None:
    db = tmp_path / "notes.ducklake"
    db.write_text("my notes")
    settings_db = ArchivePaths(db)
    assert settings_db.kind() == "other"
    with pytest.raises(StoreError, match="not a botstats archive"):
        with store.writer(_settings(tmp_path, db)):
            pass
    assert db.read_text() == "my notes"


def _settings(tmp_path: Path, db: Path):
    from pipeline.core._loading import load_settings

    config = tmp_path / "empty.toml"
    config.touch()
    return load_settings(config, env={}, overrides={"store.db": str(db)})


# --- an archive of botstats 0.1 (one DuckDB 2.0 file) carries on as a DuckLake -------------------
LEGACY = Path(__file__).parent / "data" / "legacy-0.1-archive.duckdb.gz"


@pytest.mark.slow
def test_an_archive_made_by_botstats_0_1_is_converted_and_harvested_on(
        tmp_path: Path, service_factory: Any) -> None:
    import gzip
    import json
    import subprocess
    import sys
    from datetime import datetime

    from conftest import (
        archived_stat_rows,
        assert_archive_has_no_duplicates,
        harvest_settings_for,
        query,
        service_stat_rows,
    )

    from pipeline.harvester._run import harvest

    facts = json.loads(LEGACY.with_name("legacy-0.1-archive.json").read_text())
    db = tmp_path / "archive.duckdb"
    paths = ArchivePaths(db)
    old = gzip.decompress(LEGACY.read_bytes())
    paths.legacy_primary.write_bytes(old)  # as 0.1 left it: the primary and its published copy
    db.write_bytes(old)
    (tmp_path / "empty.toml").touch()
    cli = [sys.executable, "-m", "pipeline", "--config", str(tmp_path / "empty.toml"),
           "--db", str(db)]
    env = child_env()

    refused = subprocess.run([*cli, "status"], capture_output=True, text=True, env=env)
    assert refused.returncode == 1 and "botstats convert-archive" in refused.stderr
    assert "Traceback" not in refused.stderr

    done = subprocess.run([*cli, "convert-archive"], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert "converted 807 records" in done.stdout
    assert paths.kind() == "ducklake" and not paths.legacy_primary.exists()
    assert paths.legacy_backup.read_bytes() == old  # kept until the operator deletes it

    svc = service_factory(bots=40, history_days=20, seed=7, end=datetime(2026, 11, 1, tzinfo=UTC),
                          malformed_rate=0.02)
    settings = harvest_settings_for(svc, db)
    with store.reader(settings) as con:
        counts = store.table_counts(con)
        ((keys,),) = con.execute(
            "SELECT md5(string_agg(bot_id || '/' || stat_id || '/' || raw::VARCHAR, ',' "
            "ORDER BY bot_id, stat_id)) FROM bot_stats").fetchall()
    assert {t: counts[t] for t in facts["counts"]} == facts["counts"]
    assert keys == facts["bot_stats_keys"]
    assert query(settings, "SELECT count(*) FROM bots WHERE removed_at IS NOT NULL") == [(2,)]

    # The service as 0.1 last saw it, then a day more: the next harvest adds exactly that day.
    ((newest,),) = query(settings, "SELECT max(recorded_at) FROM bot_stats")
    svc.directory.advance(2)
    for _ in range(2):
        svc.directory.churn()
    svc.directory.advance(1)
    report = harvest(settings)
    assert report.status == "complete"
    listed = set(svc.directory.bot_ids())
    # 0.1's records are kept as 0.1 archived them (the service's synthetic series have changed
    # since the fixture was made); what the next harvest adds is the service's, exactly.
    rows = [r for r in archived_stat_rows(settings) if r[0] in listed and r[2] > newest]
    assert rows == [r for r in service_stat_rows(svc.directory) if r[2] > newest]
    assert report.stats_added == len(listed) == len(rows)  # one new record per bot
    assert_archive_has_no_duplicates(settings)


def test_the_duckdb_shell_opens_the_archive_with_what_sql_attach_prints(tmp_path: Path) -> None:
    # The README's one line for the duckdb CLI, run as an analyst would (the shell botstats
    # installs, from another directory).
    import shutil
    import subprocess
    import sys

    db = _filled(tmp_path)
    venv_bin = Path(sys.executable).parent
    shell = shutil.which("duckdb", path=str(venv_bin))
    assert shell, "the duckdb shell (package duckdb-cli) is not installed"
    attach = subprocess.run([str(venv_bin / "botstats"), "--db", str(db), "sql", "--attach"],
                            capture_output=True, text=True, check=True).stdout
    out = subprocess.run([shell, "-csv", "-c", attach + " SELECT count(*) AS n FROM bots;"],
                         capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["n", "5"]


def test_reading_the_archive_leaves_no_copy_of_its_files_in_memory(tmp_path: Path) -> None:
    # DuckDB would keep the bytes of every parquet file a session reads (its "external file
    # cache", up to its memory limit): a full trends build of 10M records held 193 MB of it after
    # one scan. The files are local; the OS caches them already.
    db = tmp_path / "a.ducklake"
    with lake(db) as writer:
        writer.execute("CREATE TABLE t AS SELECT range AS n, repeat('x', 100) AS pad "
                       "FROM range(200000)")
    for con in (open_archive(db), lake(db)):
        with con:
            assert con.execute("SELECT count(*), sum(length(pad)) FROM t").fetchall() == [
                (200_000, 20_000_000)]
            assert con.execute("SELECT count(*) FROM ducklake_list_files('archive', 't')"
                               ).fetchall()[0][0] >= 1  # read from parquet, not inlined
            cached = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory() "
                                 "WHERE tag = 'EXTERNAL_FILE_CACHE'").fetchall()[0][0]
            assert cached == 0
