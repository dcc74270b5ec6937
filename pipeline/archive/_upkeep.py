"""Keeping the archive: its size on disk, a consistent copy (backup) and back (restore), and
compaction of small files and of snapshots past their keeping.

A SQLite catalog is copied with SQLite's online backup; a PostgreSQL catalog as a dump of its
tables (``_postgres.dump``). Data files are mirrored from their folder either way; data in
object storage is the store's to keep (versioning, replication): botstats copies no objects.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ..core import StoreError, first_line, replacing
from . import _postgres
from ._sql import literal
from ._store import ALIAS, ArchivePaths, file_kind

# The folder a backup of a PostgreSQL catalog keeps its tables in (its data: <this>.files).
PG_BACKUP = "catalog.pg"


def disk_bytes(paths: ArchivePaths, con: duckdb.DuckDBPyConnection | None = None
               ) -> tuple[int, int]:
    """(catalog bytes, data bytes): on disk, or in the catalog's database; data in object
    storage is counted from the files the catalog names (with ``con``, a session on it)."""
    if paths.shared:
        pg = _postgres.connect(paths.dsn, paths.password, name=_postgres.session_name("status"))
        try:
            catalog = _postgres.catalog_bytes(pg)
        finally:
            pg.close()
    else:
        catalog = paths.catalog.stat().st_size if paths.catalog.exists() else 0
    if paths.data_url:
        return catalog, _listed_bytes(con) if con is not None else 0
    data = sum(f.stat().st_size for f in paths.data.rglob("*") if f.is_file()) \
        if paths.data.is_dir() else 0
    return catalog, data


def _listed_bytes(con: duckdb.DuckDBPyConnection) -> int:
    ((size,),) = con.execute(
        f"SELECT coalesce(sum(file_size_bytes + coalesce(delete_file_size_bytes, 0)), 0) "
        f"FROM ducklake_table_info('{ALIAS}')").fetchall()
    return int(size)


def _no_objects(paths: ArchivePaths, what: str) -> None:
    if paths.data_url:
        raise StoreError(
            f"the data files are in object storage ({paths.data_url}): botstats {what} copies "
            f"data files from a folder only. Keep the bucket with its own versioning or "
            f"replication, and the PostgreSQL catalog with your database backups.")


def backup(paths: ArchivePaths, dest: Path) -> tuple[int, int]:
    """Copy the archive into folder ``dest`` (see :func:`backup_file_catalog`; a PostgreSQL
    catalog is dumped into ``dest/catalog.pg/``, its data mirrored beside it)."""
    _no_objects(paths, "backup")
    if not paths.shared:
        return backup_file_catalog(paths, dest)
    target = ArchivePaths(dest / PG_BACKUP)
    try:
        _postgres.dump(paths.dsn, paths.password, target.catalog)
        return _mirror(paths.data, target.data)
    except OSError as exc:
        raise StoreError(f"cannot back the archive up into {dest}: {exc}. The archive is "
                         f"unchanged; free space or fix permissions and run again.") from exc


def backup_file_catalog(paths: ArchivePaths, dest: Path) -> tuple[int, int]:
    """Copy the archive into folder ``dest``: the catalog as of now (SQLite's online backup),
    and the data files it may name. Data files never change once written, so a backup into the
    same folder copies only the files added since (and drops those compaction removed): it
    costs what is new. Callers hold the run lock, so no job adds or removes files meanwhile.
    Returns (files copied, bytes copied)."""
    import sqlite3

    target = ArchivePaths(dest / paths.catalog.name)
    try:
        dest.mkdir(parents=True, exist_ok=True)
        with replacing(target.catalog) as tmp:
            with sqlite3.connect(paths.catalog) as src, sqlite3.connect(tmp) as out:
                src.backup(out)
            copied = _mirror(paths.data, target.data)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot back the archive up into {dest}: {exc}. The archive is "
                         f"unchanged; free space or fix permissions and run again.") from exc
    return copied


def restore(source: Path, paths: ArchivePaths) -> tuple[int, int]:
    """Put a backup made by :func:`backup` in folder ``source`` in place of the archive."""
    _no_objects(paths, "restore")
    if paths.shared:
        backed = ArchivePaths(source / PG_BACKUP)
        if not _postgres.is_dump(backed.catalog):
            raise StoreError(f"{source} holds no backup of a PostgreSQL catalog (made by "
                             f"`botstats backup` with [store].catalog set).")
        try:
            copied = _mirror(backed.data, paths.data)
        except OSError as exc:
            raise StoreError(f"cannot restore {paths.where} from {source}: {exc}.") from exc
        _postgres.load(paths.dsn, paths.password, backed.catalog)
        return copied
    backed = ArchivePaths(source / paths.catalog.name)
    if file_kind(backed.catalog) != "ducklake":
        raise StoreError(f"{source} holds no backup of {paths.catalog.name} (made by "
                         f"`botstats backup`).")
    try:
        copied = _mirror(backed.data, paths.data)
        with replacing(paths.catalog) as tmp:
            shutil.copyfile(backed.catalog, tmp)
            # SQLite's side files belong to the catalog being replaced: left there, the next
            # open would replay the old catalog's log into the restored one.
            for side in ("-wal", "-shm"):
                paths.catalog.with_name(paths.catalog.name + side).unlink(missing_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot restore {paths.catalog} from {source}: {exc}.") from exc
    return copied


def _mirror(src: Path, dest: Path) -> tuple[int, int]:
    """Make folder ``dest`` hold exactly the files of ``src``, copying only what it lacks
    (files are told apart by path and size: a data file never changes once written)."""
    import shutil

    files = bytes_ = 0
    wanted = set()
    for file in src.rglob("*") if src.is_dir() else []:
        if not file.is_file():
            continue
        rel = file.relative_to(src)
        wanted.add(rel)
        target = dest / rel
        size = file.stat().st_size
        if target.is_file() and target.stat().st_size == size:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
        files, bytes_ = files + 1, bytes_ + size
    for file in list(dest.rglob("*")) if dest.is_dir() else []:
        if file.is_file() and file.relative_to(dest) not in wanted:
            file.unlink()
    return files, bytes_


# Files below this are merged by compaction; a file that reached it is never rewritten again,
# so a compaction rewrites at most about this much per table whatever the archive's size.
COMPACT_TARGET = "64MB"


@dataclass(frozen=True)
class Compaction:
    files_before: int
    files_after: int
    bytes_before: int
    bytes_after: int
    snapshots_expired: int


def compact(con: duckdb.DuckDBPyConnection, paths: ArchivePaths, *, keep_days: float) -> Compaction:
    """Merge small data files (each hourly commit writes a few), forget snapshots older than
    ``keep_days`` and delete the files only they used. Readers keep working throughout; a
    reader holding a snapshot older than ``keep_days`` may lose files under it, so keep it
    longer than any query or notebook session. Callers hold the run lock (with a PostgreSQL
    catalog, exclusively: deleting orphaned files would take files a worker has written and not
    yet committed)."""
    def files() -> tuple[int, int]:
        if paths.data_url:
            ((count, size),) = con.execute(
                f"SELECT count(*), coalesce(sum(size), 0) FROM read_blob("
                f"{literal(paths.data_target + '**/*.parquet')})").fetchall()
            return int(count), int(size)
        found = [f.stat().st_size for f in paths.data.rglob("*.parquet")] if paths.data.is_dir() \
            else []
        return len(found), sum(found)

    before = files()
    try:
        con.execute(f"CALL {ALIAS}.set_option('target_file_size', '{COMPACT_TARGET}')")
        con.execute(f"CALL ducklake_flush_inlined_data('{ALIAS}')").fetchall()
        con.execute(f"CALL ducklake_merge_adjacent_files('{ALIAS}')").fetchall()
        expired = con.execute(
            f"CALL ducklake_expire_snapshots('{ALIAS}', older_than => now() - "
            f"to_seconds({float(keep_days) * 86400}))").fetchall()
        con.execute(f"CALL ducklake_cleanup_old_files('{ALIAS}', cleanup_all => true)").fetchall()
        con.execute(f"CALL ducklake_delete_orphaned_files('{ALIAS}', cleanup_all => true)"
                    ).fetchall()
    except duckdb.Error as exc:
        raise StoreError(f"compacting the archive failed: {first_line(exc)}. Nothing was "
                         f"lost: a compaction commits whole or not at all; run it again.") from exc
    after = files()
    return Compaction(before[0], after[0], before[1], after[1], len(expired))
