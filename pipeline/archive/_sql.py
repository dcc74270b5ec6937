"""Values and frames into SQL: literals for the queries that must not carry parameters, and polars frames handed to DuckDB by name."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    import polars as pl


def literal(value: str | datetime) -> str:
    """``value`` as a SQL literal (a datetime as TIMESTAMPTZ). Bulk reads inline their values:
    DuckDB 1.5 hands a prepared statement's result to Arrow many times slower than a plain
    query's (bench/README.md)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{value!r} has no time zone")
        return f"TIMESTAMPTZ '{value.isoformat()}'"
    return "'" + value.replace("'", "''") + "'"


def arrow_of(frame: pl.DataFrame) -> Any:
    """A polars frame as an Arrow table DuckDB can scan with filters pushed down: DuckDB 1.5
    evaluates a join's pushed-down filter with pyarrow, whose kernels lack polars' default
    ``string_view`` strings, so strings go over as plain (large) strings."""
    import polars as pl  # imported already by whoever built the frame

    return frame.to_arrow(compat_level=pl.CompatLevel.oldest())


def run_with_frames(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None,
                    **frames: pl.DataFrame) -> list[tuple[Any, ...]]:
    """Run ``sql`` with each polars frame readable under its keyword name; return the rows."""
    for name, frame in frames.items():
        con.register(name, arrow_of(_no_null_columns(frame)))
    failed = True
    try:
        rows = con.execute(sql, params).fetchall()
        failed = False
        return rows
    finally:
        for name in frames:
            try:
                con.unregister(name)
            except duckdb.Error:
                # After a failed statement the transaction refuses even this ("Current
                # transaction is aborted"): the statement's own error is the one to report.
                if not failed:
                    raise


def _no_null_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Columns of polars' Null type (every value None) as text: DuckDB refuses them from an
    Arrow stream ("non-zero null count but no validity bitmap"), and NULL fits any column."""
    import polars as pl  # imported already by whoever built the frame

    nulls = [name for name, dtype in frame.schema.items() if dtype == pl.Null]
    return frame.with_columns(pl.col(nulls).cast(pl.String)) if nulls else frame


def now_utc() -> datetime:
    return datetime.now(UTC)


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction, if the connection can still do anything: after a fatal
    error (a write the disk refused) DuckDB may have invalidated the session, and dropping the
    connection discards the transaction."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass
