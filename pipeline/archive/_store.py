"""The archive: a DuckLake (a SQLite catalog file plus parquet data files), opened, migrated and
written in transactions.

Layout, for ``[store].db = data/archive.ducklake``::

    data/archive.ducklake          the catalog (SQLite): tables, snapshots, which files hold what
    data/archive.ducklake.files/   the data: parquet files, only ever added (and compacted)

Why DuckLake (docs/design.md has the measurements): a commit writes only the new rows' files and
a few catalog rows, so a job costs what it adds, not what the archive holds; readers (the
``duckdb`` CLI, notebooks, ``botstats sql``, polars) open the catalog read-only, see the last
committed snapshot and keep it while they read, and never block or fail the writer; a
transaction spans every table, so a batch of rows and the run's counters land together or not
at all, and a killed job leaves at most unreferenced files that compaction removes.

A new archive appears whole or not at all (:func:`create`): its catalog is made and migrated
under a hidden name beside its place and linked into place once closed, so a reader meets no
archive or a migrated one, never a catalog without its tables; a PostgreSQL catalog counts as an
archive once its migrations have committed.

Tables have no primary keys (DuckLake has none): the harvest keeps every key once itself.
Writers are serialised by the run lock (operate's ``_lock``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb

from ..core import TMP_SUFFIX, Settings, StoreError, aside, first_line, fsync_dir
from ._commit import is_conflict
from ._migrations import migrate, pending_migrations
from ._sql import literal, rollback

log = logging.getLogger("botstats.store")

# The catalog's name inside a connection: `archive.bot_stats`, or just `bot_stats` after USE.
ALIAS = "archive"
# SQLite answers "database is locked" while another process commits: wait and try again.
DEFAULT_OPEN_TIMEOUT = 30.0
_BUSY_WORDS = ("database is locked", "SQLITE_BUSY", "Could not set lock", "Conflicting lock")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_DUCKDB_MAGIC = b"DUCK"  # at offset 8 of a DuckDB database file


def extension_file(name: str) -> Path:
    """The DuckDB extension ``name`` as shipped by its package on the index
    (``duckdb-extension-<name>``), so nothing is downloaded at run time."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    roots = list(spec.submodule_search_locations or []) if spec else []
    version = duckdb.__version__
    for root in roots:
        path = Path(root) / "extensions" / f"v{version}" / f"{name}.duckdb_extension"
        if path.is_file():
            return path
    raise StoreError(
        f"the DuckDB extension {name!r} for DuckDB {version} is not installed (package "
        f"duckdb-extension-{name.replace('_', '-')}=={version}). Reinstall botstats: "
        f"`pip install -e .` in its directory.")


@dataclass(frozen=True)
class S3Access:
    """How DuckDB reaches an s3:// data path: the keys (from the environment) and the endpoint."""

    key_id: str = field(default="", repr=False)
    secret: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)
    region: str = ""
    endpoint: str = ""  # http(s)://host:port, "" = AWS
    url_style: str = "vhost"


@dataclass(frozen=True)
class ArchivePaths:
    """Where an archive lives: its catalog, a SQLite file (``catalog``) or a PostgreSQL database
    (``dsn``, without its password), and its data files, a folder or an ``s3://`` URL."""

    catalog: Path
    data_dir: Path | None = None  # the data folder, when not <catalog>.files
    dsn: str = ""  # a PostgreSQL catalog ([store].catalog)
    data_url: str = ""  # an s3:// data path
    password: str = field(default="", repr=False)  # of the PostgreSQL catalog
    s3: S3Access | None = None

    @classmethod
    def of(cls, settings: Settings) -> ArchivePaths:
        store = settings.store
        data_url = store.data_path if store.data_path.startswith("s3://") else ""
        data_dir = Path(store.data_path) if store.data_path and not data_url else None
        s3 = None
        if data_url:
            key_id, secret, token = settings.s3_keys.values()
            s3 = S3Access(key_id, secret, token, store.s3_region, store.s3_endpoint,
                          store.s3_url_style)
        return cls(settings.db_path, data_dir, store.catalog, data_url,
                   settings.catalog_password.get(), s3)

    @classmethod
    def at(cls, catalog: Path) -> ArchivePaths:
        return cls(catalog)

    @property
    def shared(self) -> bool:
        """A PostgreSQL catalog, which many workers on many machines share."""
        return bool(self.dsn)

    @property
    def where(self) -> str:
        """The catalog, for messages."""
        return f"the PostgreSQL catalog {self.dsn}" if self.shared else str(self.catalog)

    def _beside(self, suffix: str) -> Path:
        return self.catalog.with_name(self.catalog.name + suffix)

    @property
    def data(self) -> Path:
        """The folder of the parquet data files (see :attr:`data_target` for s3://)."""
        if self.data_url:
            raise StoreError(f"the data files are in object storage ({self.data_url}), not in a "
                             f"folder.")
        return self.data_dir or self._beside(".files")

    @property
    def data_target(self) -> str:
        """The data path as DuckLake takes it: an absolute folder or the s3:// URL, with a
        trailing slash."""
        if self.data_url:
            return self.data_url.rstrip("/") + "/"
        return self.data.resolve().as_posix() + "/"

    @property
    def legacy_primary(self) -> Path:
        """The writer's file of an archive in the single-DuckDB-file layout (before DuckLake)."""
        return self._beside(".primary")

    @property
    def converting(self) -> Path:
        return self._beside(".converting")

    @property
    def legacy_backup(self) -> Path:
        """Where a converted single-file archive is kept until the operator deletes it."""
        return self._beside(".pre-ducklake.duckdb")

    def kind(self) -> str:
        """``ducklake``, ``legacy`` (the single DuckDB file layout), ``missing`` or ``other``."""
        if self.shared:
            from . import _postgres

            con = _postgres.connect(self.dsn, self.password, name=_postgres.session_name("open"))
            try:
                return "ducklake" if _postgres.has_lake(con) else "missing"
            finally:
                con.close()
        if self.legacy_primary.exists():
            return "legacy" if file_kind(self.catalog) != "ducklake" else "ducklake"
        return file_kind(self.catalog)


def file_kind(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except FileNotFoundError:
        return "missing"
    except IsADirectoryError:
        return "other"
    if head.startswith(_SQLITE_MAGIC):
        return "ducklake"
    if head[8:12] == _DUCKDB_MAGIC:
        return "legacy"
    return "missing" if not head else "other"


def extensions(paths: ArchivePaths) -> tuple[str, ...]:
    """The DuckDB extensions this archive needs, loaded from their packages."""
    catalog = "postgres_scanner" if paths.shared else "sqlite_scanner"
    return ("ducklake", catalog, *(("httpfs",) if paths.data_url else ()))


def attach_statements(paths: ArchivePaths, *, read_only: bool,
                      reveal: bool = True) -> list[str]:
    """The SQL that opens the archive in a DuckDB 1.5 session: extensions from their packages,
    the object storage keys when the data is in s3://, the catalog attached as ``archive`` and
    made the default. `botstats sql --attach` prints it for the ``duckdb`` CLI with
    ``reveal=False``: the keys are then placeholders to fill in."""
    options = [f"DATA_PATH {literal(paths.data_target)}", "OVERRIDE_DATA_PATH true"]
    if read_only:
        options.insert(0, "READ_ONLY")
    if paths.shared:
        target = "ducklake:postgres:" + paths.dsn
    else:
        target = "ducklake:sqlite:" + paths.catalog.resolve().as_posix()
    statements = [f"LOAD {literal(extension_file(name).as_posix())}"
                  for name in extensions(paths)]
    if paths.s3 is not None:
        statements.append(_s3_secret(paths, reveal=reveal))
    statements += [
        f"ATTACH {literal(target)} AS {ALIAS} ({', '.join(options)})",
        f"USE {ALIAS}",
        "SET TimeZone = 'UTC'",
    ]
    return statements


def _s3_secret(paths: ArchivePaths, *, reveal: bool) -> str:
    """A temporary DuckDB secret for the data path's bucket. Never logged: it holds the keys."""
    s3 = paths.s3
    assert s3 is not None
    bucket = "s3://" + paths.data_url[len("s3://"):].split("/", 1)[0]
    words = {"TYPE": "s3", "SCOPE": literal(bucket), "URL_STYLE": literal(s3.url_style)}
    keys = {"KEY_ID": s3.key_id, "SECRET": s3.secret, "SESSION_TOKEN": s3.session_token}
    for word, value in keys.items():
        if value:
            words[word] = literal(value if reveal else f"<{word.lower()}>")
    if s3.region:
        words["REGION"] = literal(s3.region)
    if s3.endpoint:
        endpoint = urlsplit(s3.endpoint)
        words["ENDPOINT"] = literal(endpoint.netloc)
        words["USE_SSL"] = "true" if endpoint.scheme == "https" else "false"
    return ("CREATE OR REPLACE SECRET botstats_data ("
            + ", ".join(f"{k} {v}" for k, v in words.items()) + ")")


PARTITION_FLUSH_ROWS = 30_000


def connect(
    paths: ArchivePaths,
    *,
    read_only: bool = False,
    timeout: float = DEFAULT_OPEN_TIMEOUT,
    memory_limit: str | None = None,
    threads: int = 0,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB session with the archive attached as ``archive`` (the default catalog).

    polars sees Etc/UTC as a zone other than UTC; the session speaks UTC so joins never fail.
    """
    config: dict[str, Any] = {
        "autoinstall_known_extensions": False, "autoload_known_extensions": False,
        # The two extension files come from the packages pip installed with DuckDB itself;
        # checking their signatures again hashes tens of megabytes on every connection, which
        # dominated opening the archive (bench/README.md). Only those files are loaded here.
        "allow_unsigned_extensions": True,
        # A batch spanning many months writes one file per month at once (bot_stats is
        # partitioned by month); each buffers this many rows before it writes them out, instead
        # of DuckDB's 524,288, which kept whole histories in memory (docs/reliability.md).
        "partitioned_write_flush_threshold": PARTITION_FLUSH_ROWS,
        # DuckDB keeps the bytes of the parquet files a session reads (its external file cache)
        # up to its memory limit: a full trends build of 10M records held 193 MB of them after
        # one group of slices, and the cache grows with the archive (docs/design.md, "Memory").
        # Local files are in the OS's page cache already; files in object storage keep it, so
        # that a build's scans do not download them again.
        "enable_external_file_cache": bool(paths.data_url),
    }
    if memory_limit:
        config["memory_limit"] = memory_limit
    if threads:
        config["threads"] = threads
    if not read_only and not paths.data_url:
        _data_folder(paths)
    if not read_only and not paths.shared:
        _wal_mode(paths.catalog)
    if paths.password:
        # libpq reads it there; in the connection string DuckDB would repeat it in its errors.
        os.environ["PGPASSWORD"] = paths.password
    statements = attach_statements(paths, read_only=read_only)
    con = duckdb.connect(config=config)
    deadline = time.monotonic() + timeout
    delay = 0.05
    try:
        for statement in statements:
            while True:
                try:
                    con.execute(statement)
                    break
                except duckdb.Error as exc:
                    if _busy(exc) and time.monotonic() + delay < deadline:
                        time.sleep(delay)
                        delay = min(delay * 2, 1.0)
                        continue
                    raise
    except duckdb.Error as exc:
        con.close()
        if _busy(exc):
            raise StoreError(
                f"the archive {paths.catalog} stayed locked by another process for "
                f"{timeout:.0f} s. Close it there, or raise [store].open_timeout.") from exc
        if paths.shared:
            raise StoreError(
                f"cannot open {paths.where}: {_unattached(exc)}. Check [store].catalog and "
                f"[store].data_path, and that the server is up.") from exc
        raise StoreError(
            f"cannot open the archive {paths.catalog}: {first_line(exc)}. If it is not a "
            f"botstats archive, point [store].db (or --db) at another path.") from exc
    return con


def _unattached(exc: duckdb.Error) -> str:
    """DuckDB's reason a PostgreSQL catalog did not attach, without the connection string it
    repeats (libpq's own words follow the last ': ')."""
    text = " ".join(str(exc).split())
    marker = text.rfind('": ')
    return text[marker + 3:] if marker >= 0 else first_line(exc)


def _data_folder(paths: ArchivePaths) -> None:
    try:
        paths.data.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the archive's data folder {paths.data}: {exc.strerror or exc}. "
            f"Point [store].data_path (or [store].db, --db) at a writable place."
        ) from exc


def cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A second connection to the same session, for another thread (a cursor starts in the
    default catalog, so it is pointed at the archive again)."""
    cur = con.cursor()
    cur.execute(f"USE {ALIAS}")
    cur.execute("SET TimeZone = 'UTC'")
    return cur


def _wal_mode(catalog: Path) -> None:
    """Put the catalog in SQLite's WAL mode (kept in the file): readers then never block a
    commit, and a commit never waits for them. In the default mode a reader in the middle of a
    query makes the writer's commit fail with "database is locked"."""
    import sqlite3

    try:
        with sqlite3.connect(catalog, timeout=DEFAULT_OPEN_TIMEOUT) as db:
            db.execute("PRAGMA journal_mode=WAL").fetchall()
        db.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the archive's catalog {catalog}: {exc}. If it is not a "
                         f"botstats archive, point [store].db (or --db) at another path.") from exc


def _busy(exc: Exception) -> bool:
    return any(w in str(exc) for w in _BUSY_WORDS)


def is_busy(exc: BaseException) -> bool:
    """Whether another process's commit got in the way (the SQLite catalog was locked, or
    DuckLake found the commits conflicting): the same work again may well succeed."""
    return isinstance(exc, Exception) and (_busy(exc) or is_conflict(exc))


def _refuse_legacy(paths: ArchivePaths) -> None:
    if not paths.shared and paths.kind() == "legacy":
        raise StoreError(
            f"{paths.catalog} is a DuckDB database file, not a DuckLake archive. If it is an "
            f"archive of botstats 0.1 (one DuckDB file), convert it once with `botstats "
            f"convert-archive` (it keeps the old file as {paths.legacy_backup.name}); else "
            f"point [store].db (or --db) at another path.")


# Holds a SQLite catalog open from a process of its own (see holding_catalog): it only reads
# stdin until its parent closes it (or dies), then closes the catalog. Terminal signals are
# not its business: its parent decides when it ends.
_HOLDER = ("import signal, sqlite3, sys\n"
           "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
           "db = sqlite3.connect(sys.argv[1])\n"
           "db.execute('SELECT count(*) FROM sqlite_master').fetchall()\n"
           "print('held', flush=True)\n"
           "sys.stdin.read()\n"
           "db.close()\n")


@contextmanager
def holding_catalog(paths: ArchivePaths) -> Iterator[None]:
    """Keep a SQLite catalog open for the length of a job.

    DuckDB's sqlite extension opens the catalog for each query and commit and closes it after.
    When the last connection to a SQLite database in WAL mode closes, SQLite copies the log into
    the database and deletes it, and the next open builds the log's shared-memory index again:
    every query rewrote pages of the catalog and every commit the catalog itself (the kernel
    counts a page written again after it was flushed as a whole page cache folio, so an hourly
    run of 100,000 bots was charged hundreds of MB for a catalog of a few; bench/README.md). A
    connection held open from another process keeps the log and its index between queries:
    commits append to the log, which SQLite folds in every 1,000 pages and when the job ends.
    It must be another process: two copies of SQLite in one process (Python's and DuckDB's) do
    not see each other's locks. A holder that cannot start costs only those writes."""
    if paths.shared or not paths.catalog.is_file():
        yield
        return
    try:
        holder = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _HOLDER, str(paths.catalog)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)
    except OSError as exc:
        log.debug("could not hold the catalog %s open: %s", paths.catalog, exc)
        yield
        return
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != b"held":
            log.debug("the process holding the catalog %s open did not start", paths.catalog)
        yield
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        try:
            holder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()


@contextmanager
def writer(settings: Settings) -> Iterator[duckdb.DuckDBPyConnection]:
    """The archive, migrated, for one job; created first when there is none. Callers hold the
    run lock (operate's ``_lock``)."""
    paths = ArchivePaths.of(settings)
    if paths.shared:
        con = _open_shared(paths, settings)
    else:
        _refuse_legacy(paths)
        kind = paths.kind()
        if kind == "other":
            raise StoreError(
                f"{paths.catalog} exists and is not a botstats archive (a DuckLake catalog). "
                f"Point [store].db (or --db) at another path.")
        _sweep_creations(paths.catalog)
        if kind == "missing":
            create(paths, settings)
        con = connect(paths, timeout=settings.store.open_timeout,
                      memory_limit=settings.store.memory_limit, threads=settings.store.threads)
    try:
        with holding_catalog(paths):
            if not paths.shared:
                migrate(con)
            yield con
    finally:
        close(con)


# The steps of a new archive's creation, in order; :func:`_reached` is told of each once done.
CREATION_STEPS = ("folder", "catalog", "lake", "schema", "closed", "in place")
_CREATING = "creating"


def _reached(step: str) -> None:
    """Where a new archive's creation has got to (one of :data:`CREATION_STEPS`). Nothing
    happens here: the seam where tests kill the process at each step, to show that a reader
    meets the whole archive or none and the next run creates it."""


def create(paths: ArchivePaths, settings: Settings) -> None:
    """A new archive at ``paths`` (a SQLite catalog), whole or not at all: the catalog is
    created and migrated under a hidden name beside its place (its data folder is the final
    one: the new catalog has no data file yet), closed with nothing left in SQLite's
    write-ahead log, then linked into place in one step, which fails rather than replace a
    catalog that appeared meanwhile. Readers attaching a catalog whose creation was cut short
    met "Table with name bot_stats does not exist"; now they meet no archive until it is whole.
    A creation killed half way leaves a hidden file that the next writer removes."""
    staging = replace(paths, catalog=aside(paths.catalog, f"{_CREATING}.{os.getpid()}"),
                      data_dir=None if paths.data_url else paths.data)
    tmp = staging.catalog
    try:
        if not paths.data_url:
            _data_folder(paths)
        _reached("folder")
        _wal_mode(tmp)
        _reached("catalog")
        con = connect(staging, timeout=settings.store.open_timeout, threads=1)
        _reached("lake")
        try:
            migrate(con)
            _reached("schema")
        finally:
            close(con)
        _checkpointed(tmp)
        _reached("closed")
        try:
            os.link(tmp, paths.catalog)
        except FileExistsError:
            log.info("%s appeared while this job created it: the other one is kept",
                     paths.catalog)
        except OSError:  # a file system without hard links: the run lock keeps it ours
            if not paths.catalog.exists():
                os.replace(tmp, paths.catalog)
        fsync_dir(paths.catalog.parent)
        _reached("in place")
    except OSError as exc:
        raise StoreError(
            f"cannot create the archive {paths.catalog}: {exc.strerror or exc}. Point "
            f"[store].db (or --db) at a writable place.") from exc
    finally:
        _remove_catalog_files(tmp)


def _checkpointed(catalog: Path) -> None:
    """Fold SQLite's write-ahead log into the catalog file and flush it to disk: the file is
    then the whole catalog, ready to be linked into place."""
    import sqlite3

    try:
        with sqlite3.connect(catalog, timeout=DEFAULT_OPEN_TIMEOUT) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        db.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot finish the new archive's catalog {catalog}: {exc}") from exc
    with catalog.open("rb") as fh:
        os.fsync(fh.fileno())


def _sweep_creations(catalog: Path) -> None:
    """Remove what creations of this catalog killed half way left (hidden catalogs beside it,
    of processes that are gone)."""
    for tmp in catalog.parent.glob(aside(catalog, f"{_CREATING}.*").name):
        pid = tmp.name.removesuffix(TMP_SUFFIX).rsplit(".", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            _remove_catalog_files(tmp)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _remove_catalog_files(catalog: Path) -> None:
    for path in (catalog, catalog.with_name(catalog.name + "-wal"),
                 catalog.with_name(catalog.name + "-shm")):
        with suppress(OSError):
            path.unlink(missing_ok=True)


def _open_shared(paths: ArchivePaths, settings: Settings) -> duckdb.DuckDBPyConnection:
    """A PostgreSQL catalog, created and migrated by one worker at a time: two creating the
    lake at once would collide in the server's own tables."""
    from . import _postgres

    lock = _postgres.connect(paths.dsn, paths.password, name=_postgres.session_name("open"))
    try:
        with _postgres.locked(lock, _postgres.MIGRATE, settings.store.open_timeout):
            con = connect(paths, timeout=settings.store.open_timeout,
                          memory_limit=settings.store.memory_limit,
                          threads=settings.store.threads)
            try:
                migrate(con)
            except BaseException:
                close(con)
                raise
    finally:
        lock.close()
    return con


def close(con: duckdb.DuckDBPyConnection) -> bool:
    """Close ``con``; False when that failed (logged)."""
    try:
        con.close()
    except duckdb.Error as exc:
        log.warning("closing the archive failed: %s", exc)
        return False
    return True


def exists(settings: Settings) -> bool:
    return ArchivePaths.of(settings).kind() != "missing"


@contextmanager
def snapshot(settings: Settings) -> Iterator[duckdb.DuckDBPyConnection]:
    """The archive read-only as of one commit, for a long job beside the harvest (trends): the
    session is one transaction, so every read, and ``ducklake_current_snapshot``, is of the
    commit it started at, whatever lands meanwhile; it takes no lock a writer waits for. An
    archive that a newer botstats left migrations for is migrated first (a writer, briefly)."""
    paths = ArchivePaths.of(settings)
    if not paths.shared:
        _refuse_legacy(paths)
    con = connect(paths, read_only=True, timeout=settings.store.open_timeout,
                  memory_limit=settings.store.memory_limit, threads=settings.store.threads)
    try:
        if pending_migrations(con):
            close(con)
            with writer(settings):
                pass
            con = connect(paths, read_only=True, timeout=settings.store.open_timeout,
                          memory_limit=settings.store.memory_limit,
                          threads=settings.store.threads)
        with holding_catalog(paths):
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            finally:
                rollback(con)
    finally:
        close(con)


@contextmanager
def reader(settings: Settings) -> Iterator[duckdb.DuckDBPyConnection]:
    """The archive, read-only, as of its last commit; closed when the block ends."""
    paths = ArchivePaths.of(settings)
    kind = paths.kind()
    if kind == "missing":
        where = "in that database" if paths.shared else f"at {paths.catalog}"
        raise StoreError(
            f"there is no archive {where} yet. Run `botstats harvest` (or `botstats demo`) "
            f"first, or point {'[store].catalog' if paths.shared else '--db'} at an existing "
            f"archive.")
    _refuse_legacy(paths)
    con = connect(paths, read_only=True, timeout=settings.store.open_timeout)
    try:
        yield con
    finally:
        con.close()


def open_archive(db: str | os.PathLike[str] = "data/archive.ducklake", *,
                 data_path: str | os.PathLike[str] | None = None) -> duckdb.DuckDBPyConnection:
    """The archive at ``db``, read-only, for Python and notebooks:
    ``pipeline.open_archive().sql("FROM bot_stats").pl()``. Close it when done.

    ``db`` is the catalog file, or a PostgreSQL connection string (``postgresql://...``, the
    password in PGPASSWORD or ~/.pgpass) with ``data_path``, the data files' folder or s3://
    URL (keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; the endpoint from the settings, as
    for the other commands)."""
    from ..core import load_settings

    text = os.fspath(db)
    if text.startswith(("postgresql://", "postgres://")) or (
            "=" in text and "dbname" in text and not Path(text).exists()):
        if data_path is None:
            raise StoreError("a PostgreSQL catalog needs data_path=: the folder (or s3:// URL) "
                             "of its data files.")
        settings = load_settings(overrides={
            "store.catalog": text, "store.data_path": os.fspath(data_path)})
        paths = ArchivePaths.of(settings)
    else:
        paths = ArchivePaths(Path(text), Path(data_path) if data_path else None)
    if paths.kind() == "missing":
        raise StoreError(f"there is no archive at {paths.where}.")
    _refuse_legacy(paths)
    return connect(paths, read_only=True)


# Public tables the archive keeps as views over tables of their own (migration 009): readers
# query the view; its parts are how it is written.
SPLIT_TABLES = {"bots": ("bot_listing", "bot_last_seen")}


def table_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The archive's tables as readers know them: the base tables, with each of
    ``SPLIT_TABLES`` in place of its parts."""
    base = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
        "AND table_catalog = ? AND table_schema = 'main' ORDER BY table_name", [ALIAS]
    ).fetchall()]
    parts = {part for view in SPLIT_TABLES.values() for part in view}
    split = [view for view, of in SPLIT_TABLES.items() if set(of) <= set(base)]
    return sorted([name for name in base if name not in parts] + split)


def table_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Row counts of every base table in the archive, for summaries and `botstats status`."""
    return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchall()[0][0]
            for n in table_names(con)}


