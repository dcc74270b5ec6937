"""A PostgreSQL catalog seen from outside DuckDB: advisory locks, whether a lake is there, its
size, and a copy of its tables (backup and restore).

Through psycopg, on a connection of our own: DuckDB's postgres extension pools its connections,
so a session lock taken through it could end up held by no one we know. Ours lives as long as
the job and dies with its process, so a killed job frees its locks at once.

The DuckLake catalog is a set of plain tables named ``ducklake_%`` (primary keys, no defaults,
sequences or foreign keys): a backup is their column types, primary keys and rows (binary COPY),
read in one REPEATABLE READ transaction; a restore replaces them in one transaction. No
``pg_dump`` is needed, whose version must match the server's.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core import StoreError, first_line

# The first key of every botstats advisory lock ('bots' in ASCII), so pg_locks tells ours apart.
LOCK_SPACE = 0x626F7473
ARCHIVE, TRENDS, MIGRATE = 1, 2, 3
_SHARD_KEYS = 1 << 20  # a shard's key: _SHARD_KEYS + n * 1024 + k
TABLES = "ducklake\\_%"
MANIFEST = "manifest.json"


def shard_key(k: int, n: int) -> int:
    return _SHARD_KEYS + n * 1024 + k


def session_name(job: str) -> str:
    """How this process shows in pg_stat_activity (63 characters at most)."""
    return f"botstats {job} pid {os.getpid()}@{socket.gethostname()}"[:63]


def connect(dsn: str, password: str = "", *, name: str = "botstats") -> Any:
    """A connection of our own, in autocommit. Keepalives: a worker whose machine vanishes is
    noticed by the client; the server side is the server's tcp_keepalives_* (docs/operating.md)."""
    import psycopg

    extra: dict[str, Any] = {"password": password} if password else {}
    try:
        return psycopg.connect(dsn, autocommit=True, application_name=name[:63],
                               connect_timeout=10, keepalives=1, keepalives_idle=30,
                               keepalives_interval=10, keepalives_count=3, **extra)
    except psycopg.Error as exc:
        raise StoreError(f"cannot reach the PostgreSQL catalog {dsn}: {first_line(exc)}. Check "
                         f"[store].catalog and that the server is up.") from exc


def try_lock(con: Any, key: int, *, shared: bool = False) -> bool:
    fn = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
    row = con.execute(f"SELECT {fn}(%s, %s)", [LOCK_SPACE, key]).fetchone()
    return bool(row and row[0])


def unlock(con: Any, key: int, *, shared: bool = False) -> None:
    fn = "pg_advisory_unlock_shared" if shared else "pg_advisory_unlock"
    con.execute(f"SELECT {fn}(%s, %s)", [LOCK_SPACE, key])


@contextmanager
def locked(con: Any, key: int, timeout: float) -> Iterator[None]:
    """Hold ``key`` exclusively for a short step (creating the lake, migrating it): waits in the
    server's queue up to ``timeout`` seconds."""
    import psycopg

    try:
        con.execute(f"SET lock_timeout = {int(timeout * 1000)}")
        con.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_SPACE, key])
    except psycopg.errors.LockNotAvailable as exc:
        raise StoreError(f"another botstats job kept the catalog busy for {timeout:g} s while "
                         f"this one waited to open it; raise [store].open_timeout, or try again."
                         ) from exc
    try:
        yield
    finally:
        unlock(con, key)


def holders(con: Any, key: int) -> list[str]:
    """Who else holds ``key``: each session's name, address and since when."""
    return [f"{name or 'a session'} (from {addr}, since {since:%Y-%m-%dT%H:%M:%SZ})"
            for name, addr, since in holder_sessions(con, key)]


def holder_sessions(con: Any, key: int) -> list[tuple[str, str, datetime]]:
    """The other sessions holding ``key``, the oldest first: (name, address, session start in
    UTC; a job opens its session to take its locks)."""
    rows = con.execute(
        "SELECT a.application_name, coalesce(host(a.client_addr), 'local socket'), "
        "a.backend_start AT TIME ZONE 'UTC' "
        "FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' "
        "AND l.granted AND l.classid = %s AND l.objid = %s AND l.objsubid = 2 "
        "AND l.pid <> pg_backend_pid() ORDER BY a.backend_start",
        [LOCK_SPACE, key]).fetchall()
    return [(str(name or ""), str(addr), since) for name, addr, since in rows]


def has_lake(con: Any) -> bool:
    """Whether the database holds an archive yet: a DuckLake catalog whose schema has committed
    (its tables appear in the one transaction of the migrations; a worker killed while creating
    the lake leaves a catalog without them, which readers are told is no archive yet and the
    next writer migrates)."""
    row = con.execute("SELECT to_regclass('ducklake_metadata') IS NOT NULL AND "
                      "to_regclass('ducklake_table') IS NOT NULL").fetchone()
    if not (row and row[0]):
        return False
    row = con.execute("SELECT count(*) FROM ducklake_table WHERE table_name = 'bot_stats' AND "
                      "end_snapshot IS NULL").fetchone()
    return bool(row and row[0])


def catalog_bytes(con: Any) -> int:
    row = con.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                      "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND "
                      "n.nspname = current_schema() AND c.relname LIKE %s", [TABLES]).fetchone()
    return int(row[0]) if row else 0


def last_commit(con: Any) -> datetime | None:
    """When the newest snapshot was committed (the catalog's "modified" time)."""
    row = con.execute("SELECT max(snapshot_time) FROM ducklake_snapshot").fetchone()
    return row[0] if row else None


def _tables(con: Any) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename "
        "LIKE %s ORDER BY tablename", [TABLES]).fetchall()]


def _shape(con: Any, table: str) -> dict[str, Any]:
    columns = con.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull FROM pg_attribute a "
        "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum", [table]).fetchall()
    key = con.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND "
        "a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND i.indisprimary "
        "ORDER BY array_position(i.indkey, a.attnum)", [table]).fetchall()
    return {"columns": [list(c) for c in columns], "primary_key": [k[0] for k in key]}


def dump(dsn: str, password: str, folder: Path) -> int:
    """Write the catalog's tables into ``folder`` (a manifest and one file per table), as of one
    moment; return the bytes written."""
    import psycopg

    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    con = connect(dsn, password, name=session_name("backup"))
    try:
        with con.transaction():
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            shapes = {table: _shape(con, table) for table in _tables(con)}
            for table in shapes:
                with (folder / f"{table}.copy").open("wb") as out, \
                        con.cursor().copy(f'COPY "{table}" TO STDOUT (FORMAT binary)') as copy:
                    for chunk in copy:
                        written += len(chunk)
                        out.write(chunk)
        (folder / MANIFEST).write_text(json.dumps({"tables": shapes}, indent=1), encoding="utf-8")
    except psycopg.Error as exc:
        raise StoreError(f"reading the PostgreSQL catalog for a backup failed: {first_line(exc)}."
                         ) from exc
    finally:
        con.close()
    for stale in folder.glob("*.copy"):
        if stale.stem not in shapes:
            stale.unlink()
    return written


def is_dump(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


def load(dsn: str, password: str, folder: Path) -> None:
    """Replace the catalog's tables by those dumped in ``folder``, in one transaction: a reader
    sees the old catalog or the restored one, never a mix."""
    import psycopg

    shapes = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["tables"]
    con = connect(dsn, password, name=session_name("restore"))
    try:
        with con.transaction():
            for table in _tables(con):
                con.execute(f'DROP TABLE "{table}"')
            for table, shape in shapes.items():
                columns = [f'"{name}" {type_}' + (" NOT NULL" if not_null else "")
                           for name, type_, not_null in shape["columns"]]
                if shape["primary_key"]:
                    columns.append("PRIMARY KEY ({})".format(
                        ", ".join(f'"{c}"' for c in shape["primary_key"])))
                con.execute(f'CREATE TABLE "{table}" ({", ".join(columns)})')
                with (folder / f"{table}.copy").open("rb") as data, \
                        con.cursor().copy(f'COPY "{table}" FROM STDIN (FORMAT binary)') as copy:
                    while chunk := data.read(1 << 20):
                        copy.write(chunk)
    except psycopg.Error as exc:
        raise StoreError(f"restoring the PostgreSQL catalog failed, and nothing of it changed: "
                         f"{first_line(exc)}.") from exc
    finally:
        con.close()


class AdvisoryLocks:
    """One job's advisory locks in the catalog's database, on a connection of its own: they
    are released together when it closes, or when the process dies. Which locks a job takes,
    and how it waits for them, is the run lock's (operate's ``_lock``)."""

    def __init__(self, dsn: str, password: str, name: str) -> None:
        self.con = connect(dsn, password, name=name)
        self.held: list[tuple[int, bool]] = []

    def take(self, wanted: list[tuple[int, bool]]) -> int | None:
        """Take every (key, shared) of ``wanted`` without waiting, or none of them: the key that
        another session holds, else None."""
        taken: list[tuple[int, bool]] = []
        for key, shared in wanted:
            if not try_lock(self.con, key, shared=shared):
                for got, got_shared in reversed(taken):
                    unlock(self.con, got, shared=got_shared)
                return key
            taken.append((key, shared))
        self.held += taken
        return None

    def release(self, wanted: list[tuple[int, bool]]) -> None:
        for key, shared in reversed(wanted):
            if (key, shared) in self.held:
                unlock(self.con, key, shared=shared)
                self.held.remove((key, shared))

    def free(self, key: int) -> bool:
        """Whether no session holds ``key`` (taken and given back at once to find out)."""
        if (key, False) in self.held:
            return True
        if not try_lock(self.con, key):
            return False
        unlock(self.con, key)
        return True

    def holders(self, key: int) -> list[str]:
        return holders(self.con, key)

    def holder_sessions(self, key: int) -> list[tuple[str, str, datetime]]:
        return holder_sessions(self.con, key)

    def rename(self, name: str) -> None:
        self.con.execute("SELECT set_config('application_name', %s, false)", [name[:63]])

    def close(self) -> None:
        self.con.close()
