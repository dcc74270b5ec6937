"""A real PostgreSQL for the tests of a shared catalog: one throwaway cluster per test session,
and a database per test made from a migrated template (0.1 s instead of creating and migrating
a lake each time).

Debian's server binaries (package postgresql-15, installed by `.ci/test-deps`) are used as they
are. initdb refuses to run as root, so as root the cluster belongs to the ``postgres`` user and
its server commands run through ``runuser``. It trusts loopback connections: it holds nothing
but throwaway archives. ``bench/shards.py`` starts its own cluster with :func:`start_cluster`.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"),)


def server_bin(name: str) -> Path:
    """A PostgreSQL server program, or a RuntimeError that says how to install it."""
    for folder in BIN_DIRS:
        if (folder / name).is_file():
            return folder / name
    found = shutil.which(name)
    if found:
        return Path(found)
    raise RuntimeError(
        f"the PostgreSQL server program {name!r} is not installed: `apt-get install "
        f"postgresql-15` (`.ci/test-deps` does it when run as root).")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    """A running cluster: ``dsn(dbname)`` to connect, ``stop()`` when done."""

    folder: Path
    port: int
    as_postgres: bool

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def admin(self) -> Any:
        return psycopg.connect(self.dsn(), autocommit=True)

    def _run(self, *args: str) -> None:
        cmd = list(args)
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> None:
        try:
            self._run(str(server_bin("pg_ctl")), "-D", str(self.folder / "data"), "-m",
                      "immediate", "-w", "stop")
        except (subprocess.CalledProcessError, RuntimeError):
            pass  # already stopped
        shutil.rmtree(self.folder, ignore_errors=True)


def start_cluster() -> Cluster:
    """initdb and start a cluster on a free loopback port (about a second)."""
    as_postgres = os.geteuid() == 0
    folder = Path(tempfile.mkdtemp(prefix="botstats-pg-"))
    cluster = Cluster(folder, _free_port(), as_postgres)
    if as_postgres:
        shutil.chown(folder, "postgres", "postgres")
    try:
        cluster._run(str(server_bin("initdb")), "-D", str(folder / "data"), "-A", "trust",
                     "-U", "postgres", "--no-sync")
        # No fsync: a crash of this cluster loses only throwaway archives.
        options = (f"-p {cluster.port} -k {folder} -c listen_addresses=127.0.0.1 "
                   f"-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   f"-c max_connections=300")
        cluster._run(str(server_bin("pg_ctl")), "-D", str(folder / "data"), "-o", options,
                     "-l", str(folder / "log"), "-w", "start")
    except BaseException:
        cluster.stop()
        raise
    return cluster


_names = itertools.count()


@functools.cache
def cluster() -> Cluster:
    """The session's cluster, started on first use and stopped when the test process ends."""
    started = start_cluster()
    atexit.register(started.stop)
    return started


def new_database(template: bool = True) -> str:
    """A fresh database of the session's cluster, its DSN; with ``template``, holding a
    migrated botstats archive (without data files: a lake's first data file comes with its
    first batch)."""
    name = f"lake_{os.getpid()}_{next(_names)}"
    with cluster().admin() as con:
        source = f" TEMPLATE {_migrated_template()}" if template else ""
        con.execute(f"CREATE DATABASE {name}{source}")
    return cluster().dsn(name)


@functools.cache
def _migrated_template() -> str:
    from pipeline import archive
    from pipeline.core import load_settings

    name = f"template_{os.getpid()}"
    with cluster().admin() as con:
        con.execute(f"CREATE DATABASE {name}")
    scratch = Path(tempfile.mkdtemp(prefix="botstats-template-"))
    settings = load_settings(os.devnull, env={}, overrides={
        "store.catalog": cluster().dsn(name), "store.data_path": str(scratch)})
    with archive.writer(settings):
        pass
    shutil.rmtree(scratch, ignore_errors=True)
    return name
