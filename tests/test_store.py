"""The store: polars frames read by DuckDB under their names (`store.run_with_frames`), and the schema's
migrations, applied on open."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipeline import store
from pipeline.errors import StoreError


def test_frames_are_read_under_their_names_and_unregistered_after(tmp_path: Path) -> None:
    con = store.connect(tmp_path / "a.duckdb")
    con.execute("CREATE TABLE t (k VARCHAR, n BIGINT, seen TIMESTAMPTZ, note VARCHAR)")
    when = datetime(2024, 6, 1, tzinfo=UTC)
    rows = pl.DataFrame({"k": ["a", "b"], "n": [1, None], "seen": [when, when]})
    assert store.run_with_frames(con, "INSERT INTO t BY NAME SELECT * FROM rows_in", rows_in=rows) == [(2,)]
    both = store.run_with_frames(con, "SELECT x.k, y.n FROM x JOIN y USING (k) ORDER BY k",
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
    con = store.connect(tmp_path / "a.duckdb")
    con.execute("CREATE TABLE t (a INTEGER PRIMARY KEY)")
    con.execute("INSERT INTO t VALUES (1)")
    con.execute("BEGIN TRANSACTION")
    with pytest.raises(duckdb.ConstraintException, match="Duplicate key"):
        store.run_with_frames(con, "INSERT INTO t SELECT a FROM f", f=pl.DataFrame({"a": [1]}))
    store.rollback(con)
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(1,)]
    con.close()


def test_a_column_of_nothing_but_nulls_is_written_as_null(tmp_path: Path) -> None:
    # polars types an all-None column Null, which DuckDB refuses from an Arrow stream as is.
    con = store.connect(tmp_path / "a.duckdb")
    con.execute("CREATE TABLE t (k VARCHAR, bot_id VARCHAR, n DOUBLE)")
    errors_in = pl.DataFrame([{"k": "x", "bot_id": None, "n": None}])
    assert errors_in.schema["bot_id"] == pl.Null
    store.run_with_frames(con, "INSERT INTO t BY NAME SELECT * FROM errors_in", errors_in=errors_in)
    assert con.execute("SELECT * FROM t").fetchall() == [("x", None, None)]
    con.close()


# --- migrations: applied on open, in order, once, each whole or not at all ----------------------
def _sql_dir_with(tmp_path: Path, extra: dict[str, str]) -> Path:
    """A copy of the shipped sql/ folder with ``extra`` migration files added."""
    import shutil

    copy = tmp_path / "sql"
    shutil.copytree(store.sql_dir(), copy)
    for name, text in extra.items():
        (copy / "migrations" / name).write_text(text, encoding="utf-8")
    return copy


def _applied(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [name for (name,) in con.execute(
        "SELECT name FROM schema_migrations ORDER BY version").fetchall()]


def test_an_archive_gets_the_new_migrations_on_open_and_keeps_its_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "archive.duckdb"
    with duckdb.connect(str(db)) as con:
        shipped = store.migrate(con)
        assert shipped and shipped == sorted(shipped)  # every shipped file, in order
        con.execute("INSERT INTO bots (bot_id, name, raw, first_seen_at, last_seen_at, run_id) "
                    "VALUES ('b1', 'one', '{}', now(), now(), 'r1')")
        assert store.migrate(con) == []  # nothing twice
    newer = _sql_dir_with(tmp_path, {
        "901_bot_notes.sql": "CREATE TABLE bot_notes (bot_id VARCHAR, note VARCHAR);",
        "902_note_one.sql": "INSERT INTO bot_notes SELECT bot_id, 'seen' FROM bots;"})
    monkeypatch.setattr(store, "sql_dir", lambda: newer)
    with duckdb.connect(str(db)) as con:
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
    monkeypatch.setattr(store, "sql_dir", lambda: old_sql)
    db = tmp_path / "archive.duckdb"
    with duckdb.connect(str(db)) as con:
        assert store.migrate(con) == ["001_init.sql"]
        con.execute(
            "INSERT INTO bot_stats (stat_id, bot_id, recorded_at, raw, run_id, archived_at) "
            "SELECT 's' || i, 'b' || (i % 3), TIMESTAMPTZ '2026-01-01' + to_days(i), '{}', 'r', "
            "now() FROM range(10) t(i)")
    monkeypatch.undo()
    with duckdb.connect(str(db)) as con:
        assert store.migrate(con)[0] == "002_bot_latest_stat.sql"
        latest = con.execute("SELECT bot_id, stat_id, day(recorded_at) FROM bot_latest_stat "
                             "ORDER BY bot_id").fetchall()
    assert latest == [("b0", "s9", 10), ("b1", "s7", 8), ("b2", "s8", 9)]


def test_bot_stats_keeps_no_index_but_its_key(tmp_path: Path) -> None:
    # 001 created an index on recorded_at that DuckDB never used and every insert paid for;
    # 003 drops it, on new archives and old ones alike.
    with duckdb.connect(str(tmp_path / "archive.duckdb")) as con:
        store.migrate(con)
        assert con.execute("SELECT index_name FROM duckdb_indexes() "
                           "WHERE table_name = 'bot_stats'").fetchall() == []


def test_an_archive_a_newer_botstats_migrated_is_not_written_by_this_one(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pipeline.cli import cli

    db = tmp_path / "archive.duckdb"
    paths = store.ArchivePaths.at(db)
    with duckdb.connect(str(paths.primary)) as con:
        store.migrate(con)
        con.execute("INSERT INTO schema_migrations VALUES (900, '900_from_the_future.sql', now())")
        con.execute("INSERT INTO harvest_runs (run_id, started_at, status, mode) "
                    "VALUES ('r1', now(), 'complete', 'full')")
    store.publish(paths)
    (tmp_path / "empty.toml").touch()
    base = ["--config", str(tmp_path / "empty.toml"), "--db", str(db)]

    refused = CliRunner().invoke(cli, [*base, "--base-url", "http://127.0.0.1:9", "harvest"])
    assert refused.exit_code == 1, refused.output
    assert "schema migrations this botstats does not know (900_from_the_future.sql" in refused.output
    assert "Upgrade botstats" in refused.output and "Traceback" not in refused.output
    with duckdb.connect(str(paths.primary), read_only=True) as con:
        assert con.execute("SELECT run_id FROM harvest_runs").fetchall() == [("r1",)]
    read = CliRunner().invoke(cli, [*base, "sql", "SELECT count(*) AS n FROM harvest_runs"])
    assert read.exit_code == 0 and "1" in read.output


def test_a_failing_migration_is_rolled_back_whole_and_says_which(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "archive.duckdb"
    with duckdb.connect(str(db)) as con:
        shipped = store.migrate(con)
    broken = _sql_dir_with(tmp_path, {
        "901_half.sql": "CREATE TABLE half_done (x INTEGER); SELECT * FROM no_such_table;"})
    monkeypatch.setattr(store, "sql_dir", lambda: broken)
    with duckdb.connect(str(db)) as con:
        with pytest.raises(StoreError, match=r"migration 901_half\.sql failed: .*no_such_table"):
            store.migrate(con)
        assert _applied(con) == shipped
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert "half_done" not in tables and "bot_stats" in tables


def test_an_archive_whose_directory_cannot_be_made_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(StoreError, match=r"cannot create the archive's directory .*notes\.txt"):
        store.connect(tmp_path / "notes.txt" / "sub" / "a.duckdb")
    assert (tmp_path / "notes.txt").read_text() == "keep me"
