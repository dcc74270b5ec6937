"""The archive's schema: the numbered sql/migrations applied in order, once each, and where the sql/ folder is."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..core import StoreError
from ._sql import now_utc, rollback


def sql_dir() -> Path:
    """The sql/ folder: inside the package when installed from a wheel, at the repo top otherwise."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "sql", package.parent / "sql"):
        if (candidate / "migrations").is_dir():
            return candidate
    raise StoreError(f"botstats is installed without its sql/ folder (looked in {package}). Reinstall it.")


def migration_files() -> dict[int, Path]:
    return {int(f.name.split("_", 1)[0]): f for f in (sql_dir() / "migrations").glob("*.sql")}


def pending_migrations(con: duckdb.DuckDBPyConnection) -> list[int]:
    """The shipped migrations the archive has not had yet (all of them: a new archive)."""
    try:
        done = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
    except duckdb.CatalogException:
        done = set()
    return sorted(set(migration_files()) - done)


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the numbered files of sql/migrations/ not yet applied, in order. An archive that
    has some already gets each of the others in a transaction of its own, so a failing one
    leaves it as the one before left it; a new archive gets them all in one (a failure leaves
    it empty), which costs its catalog one commit instead of one a file."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER NOT NULL, name VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
    )
    done = dict(con.execute("SELECT version, name FROM schema_migrations").fetchall())
    files = migration_files()
    unknown = sorted(set(done) - set(files))
    if unknown:
        # Written by a newer botstats: an older one writing there would miss what those
        # migrations changed (a column it does not fill, a table it does not know).
        raise StoreError(
            f"the archive has schema migrations this botstats does not know "
            f"({', '.join(done[v] for v in unknown)}; it knows up to {max(files):03d}): a newer "
            f"botstats wrote it. Upgrade botstats to write to it (readers such as `botstats "
            f"sql` still work).")
    pending = [(version, file) for version, file in sorted(files.items()) if version not in done]
    for group in ([pending] if not done else [[one] for one in pending]):
        _apply(con, group)
    return [file.name for _, file in pending]


def _apply(con: duckdb.DuckDBPyConnection, group: list[tuple[int, Path]]) -> None:
    """The migrations of ``group``, and their rows in schema_migrations, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    name = ""
    try:
        for version, file in group:
            name = file.name
            con.execute(file.read_text(encoding="utf-8"))
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, name, now_utc()])
        con.execute("COMMIT")
    except duckdb.Error as exc:
        rollback(con)
        raise StoreError(f"migration {name} failed: {exc}") from exc
