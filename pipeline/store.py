"""The DuckDB archive: opening, migrations, batch writes, and publishing a reader copy.

Readers and the writer never block each other (DuckDB lets no other process open a file that a
writer holds, not even read-only). So there are two files:

- the **primary** (``<db>.primary``): only the writer (harvest, trends) opens it, under the run
  lock, and only for the length of a job. Every batch is one transaction, so a killed run leaves
  a file that opens (the WAL is replayed) and holds whole batches only.
- the **published archive** (``[store].db``, e.g. ``data/archive.duckdb``): what analysts,
  notebooks, ``botstats sql`` and ``duckdb data/archive.duckdb`` open. After each job the writer
  copies the primary aside and renames it over the published file in one step: a reader that has
  the old file open keeps its snapshot, the next open sees the new one, and nobody's open
  connection makes a harvest fail.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from .config import Settings
from .errors import StoreError
from .files import replacing

log = logging.getLogger("botstats.store")

if TYPE_CHECKING:
    import polars as pl

# DuckDB's lock conflict has no wait setting: we retry the open with backoff for this long.
DEFAULT_OPEN_TIMEOUT = 30.0
_LOCK_WORDS = ("Could not set lock", "Conflicting lock")


def sql_dir() -> Path:
    """The sql/ folder: inside the package when installed from a wheel, at the repo top otherwise."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "sql", here.parent / "sql"):
        if (candidate / "migrations").is_dir():
            return candidate
    raise StoreError(f"botstats is installed without its sql/ folder (looked in {here}). Reinstall it.")


@dataclass(frozen=True)
class ArchivePaths:
    published: Path
    primary: Path

    @classmethod
    def of(cls, settings: Settings) -> ArchivePaths:
        return cls.at(settings.db_path)

    @classmethod
    def at(cls, published: Path) -> ArchivePaths:
        return cls(published=published, primary=published.with_name(published.name + ".primary"))

    @property
    def primary_wal(self) -> Path:
        """DuckDB's WAL of the primary: what a clean close has not yet folded into the file."""
        return self.primary.with_name(self.primary.name + ".wal")


def connect(
    path: Path,
    *,
    read_only: bool = False,
    timeout: float = DEFAULT_OPEN_TIMEOUT,
    memory_limit: str | None = None,
    threads: int = 0,
) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file, waiting with backoff while another process holds a conflicting lock."""
    config: dict[str, Any] = {"autoinstall_known_extensions": False, "autoload_known_extensions": True}
    if memory_limit:
        config["memory_limit"] = memory_limit
    if threads:
        config["threads"] = threads
    if not read_only:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the archive's directory {path.parent}: {exc.strerror or exc}. "
                f"Point [store].db (--db) at a writable place."
            ) from exc
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=config)
            break
        except duckdb.IOException as exc:
            locked = any(w in str(exc) for w in _LOCK_WORDS)
            if locked and time.monotonic() + delay < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if locked:
                raise StoreError(
                    f"{path} is held by another process ({_holder(exc)}) and stayed locked for "
                    f"{timeout:.0f} s. Close it there, or raise [store].open_timeout."
                ) from exc
            raise StoreError(f"cannot open the archive {path}: {exc}") from exc
        except duckdb.Error as exc:
            raise StoreError(
                f"cannot open the archive {path}: {exc}. If the file is not a DuckDB database, "
                f"point [store].db (or --db) at another path."
            ) from exc
    # polars sees Etc/UTC as a different zone from UTC; one name everywhere avoids join errors.
    con.execute("SET TimeZone='UTC'")
    return con


def _holder(exc: Exception) -> str:
    text = str(exc)
    marker = "(PID "
    if marker in text:
        return "PID " + text.split(marker, 1)[1].split(")", 1)[0]
    return "a conflicting lock"


class _ArrowStream:
    """A polars frame as DuckDB reads it: through the Arrow C stream interface."""

    __slots__ = ("frame",)

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.frame.__arrow_c_stream__(requested_schema)


def run_with_frames(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None,
                    **frames: pl.DataFrame) -> list[tuple[Any, ...]]:
    """Run ``sql`` with each polars frame readable under its keyword name; return the rows.

    Handed a polars frame itself, DuckDB converts it through pyarrow under the GIL (and imports
    pyarrow for it), which a harvest waits on. The Arrow C stream is read directly.
    """
    for name, frame in frames.items():
        con.register(name, _ArrowStream(_no_null_columns(frame)))
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


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the numbered files of sql/migrations/ not yet applied, each in one transaction."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
    )
    done = dict(con.execute("SELECT version, name FROM schema_migrations").fetchall())
    files = {int(f.name.split("_", 1)[0]): f for f in (sql_dir() / "migrations").glob("*.sql")}
    unknown = sorted(set(done) - set(files))
    if unknown:
        # Written by a newer botstats: an older one writing there would miss what those
        # migrations changed (a column it does not fill, a key it does not know).
        raise StoreError(
            f"the archive has schema migrations this botstats does not know "
            f"({', '.join(done[v] for v in unknown)}; it knows up to {max(files):03d}): a newer "
            f"botstats wrote it. Upgrade botstats to write to it (readers such as `botstats "
            f"sql` still work).")
    applied = []
    for version, file in sorted(files.items()):
        if version in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(file.read_text(encoding="utf-8"))
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, file.name, now_utc()]
            )
            con.execute("COMMIT")
        except duckdb.Error as exc:
            rollback(con)
            raise StoreError(f"migration {file.name} failed: {exc}") from exc
        applied.append(file.name)
    return applied


def now_utc() -> datetime:
    return datetime.now(UTC)


@contextmanager
def writer(settings: Settings, *, publish_after: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
    """The primary, migrated, for one job; published for readers when the job ends.

    Publishing happens after a failure too: whatever whole batches were committed are worth
    showing. Callers hold the run lock (``pipeline.lock``) around this.
    """
    paths = ArchivePaths.of(settings)
    _adopt_legacy(paths)
    con = connect(
        paths.primary,
        timeout=settings.store.open_timeout,
        memory_limit=settings.store.memory_limit,
        threads=settings.store.threads,
    )
    try:
        migrate(con)
        yield con
    finally:
        closed = close(con)
        if publish_after and closed and not paths.primary_wal.exists():
            publish(paths)
        elif publish_after:
            # The primary's file alone lacks what its WAL holds (a close that could not
            # checkpoint, e.g. a full disk): a copy of it would show readers less than before.
            log.warning("the archive was not published: its last changes are only in %s; "
                        "readers keep the previous copy until a run closes the archive cleanly",
                        paths.primary_wal)


def close(con: duckdb.DuckDBPyConnection) -> bool:
    """Close ``con``, checkpointing its WAL into the file; False when that failed."""
    try:
        con.close()
    except duckdb.Error as exc:
        log.warning("closing the archive failed: %s", exc)
        return False
    return True


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction, if the connection can still do anything: after a fatal
    error (a write the disk refused) DuckDB has invalidated the database, and dropping the
    connection discards the transaction."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass


def _adopt_legacy(paths: ArchivePaths) -> None:
    """A published file with no primary beside it (copied in by hand): make it the primary."""
    if not paths.primary.exists() and paths.published.exists():
        shutil.copyfile(paths.published, paths.primary)


def publish(paths: ArchivePaths) -> None:
    """Copy the closed primary beside the published file and rename it over in one step."""
    if not paths.primary.exists():
        return
    try:
        with replacing(paths.published, durable=True) as tmp:
            shutil.copyfile(paths.primary, tmp)
    except OSError as exc:
        raise StoreError(
            f"cannot publish the archive to {paths.published}: {exc}. What the job wrote is "
            f"safe in {paths.primary}; readers keep the previous copy. Fix that (free space, "
            f"say) and the next job publishes it.") from exc


@contextmanager
def reader(settings: Settings) -> Iterator[duckdb.DuckDBPyConnection]:
    """The published archive, read-only, closed when the block ends (open late, close early)."""
    path = settings.db_path
    if not path.exists():
        raise StoreError(
            f"there is no archive at {path} yet. Run `botstats harvest` (or `botstats demo`) "
            f"first, or point --db at an existing archive."
        )
    con = connect(path, read_only=True, timeout=settings.store.open_timeout)
    try:
        yield con
    finally:
        con.close()


def table_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Row counts of every base table in the archive, for summaries and `botstats status`."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema = 'main' ORDER BY table_name"
        ).fetchall()
    ]
    return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchall()[0][0] for n in names}
