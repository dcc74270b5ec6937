"""`store.run`: polars frames read by DuckDB under their names, through the Arrow C stream."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from pipeline import store


def test_frames_are_read_under_their_names_and_unregistered_after(tmp_path: Path) -> None:
    con = store.connect(tmp_path / "a.duckdb")
    con.execute("CREATE TABLE t (k VARCHAR, n BIGINT, seen TIMESTAMPTZ, note VARCHAR)")
    when = datetime(2024, 6, 1, tzinfo=UTC)
    rows = pl.DataFrame({"k": ["a", "b"], "n": [1, None], "seen": [when, when]})
    assert store.run(con, "INSERT INTO t BY NAME SELECT * FROM rows_in", rows_in=rows) == [(2,)]
    both = store.run(con, "SELECT x.k, y.n FROM x JOIN y USING (k) ORDER BY k",
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


def test_a_column_of_nothing_but_nulls_is_written_as_null(tmp_path: Path) -> None:
    # polars types an all-None column Null, which DuckDB refuses from an Arrow stream as is.
    con = store.connect(tmp_path / "a.duckdb")
    con.execute("CREATE TABLE t (k VARCHAR, bot_id VARCHAR, n DOUBLE)")
    errors_in = pl.DataFrame([{"k": "x", "bot_id": None, "n": None}])
    assert errors_in.schema["bot_id"] == pl.Null
    store.run(con, "INSERT INTO t BY NAME SELECT * FROM errors_in", errors_in=errors_in)
    assert con.execute("SELECT * FROM t").fetchall() == [("x", None, None)]
    con.close()
