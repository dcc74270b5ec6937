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


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the numbered files of sql/migrations/ not yet applied, each in one transaction."""
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
