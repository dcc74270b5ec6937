"""Archives in the single-DuckDB-file layout of botstats 0.1, and their conversion to DuckLake.

botstats 0.1 kept the archive in one DuckDB 2.0 file (``<db>.primary``, copied to ``<db>`` for
readers). DuckDB 1.5, which the DuckLake archive needs, cannot read a 2.0 file, so the
conversion reads it with DuckDB 2.0 in a child process (installed once, on demand, into this
environment's ``botstats-legacy/`` folder from the package index, or any Python that has it:
``--legacy-python``), which writes each table to parquet; this process loads them into a new
DuckLake beside the archive, checks every table's row count, and only then swaps it in:

1. ``<db>.converting`` (the new catalog) is filled; a crash here leaves the old archive as it
   was, and the next conversion starts over;
2. it is renamed over ``<db>`` in one step (the old published copy, if any, goes);
3. ``<db>.primary`` (the old archive) is renamed to ``<db>.pre-ducklake.duckdb``: the backup,
   for the operator to delete once satisfied. A crash between 2 and 3 is finished by running
   the conversion again.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ..core import Settings, StoreError
from . import _store as store
from ._migrations import migrate

log = logging.getLogger("botstats.legacy")

LEGACY_DUCKDB = "duckdb==2.0.0"
# Largest tables first in the log; bot_stats and its custom fields land in (bot, time) order,
# so the files of the new archive each cover a range of bots and times.
_ORDER = {"bot_stats": "bot_id, recorded_at, stat_id",
          "bot_stat_custom": "bot_id, recorded_at, stat_id, name"}

# Tables this botstats keeps as a view over tables of their own (store.SPLIT_TABLES): each
# part's columns of the old table.
_PARTS = {"bots": {"bot_listing": "bot_id, name, raw, first_seen_at, removed_at, run_id",
                   "bot_last_seen": "bot_id, last_seen_at, run_id"}}

# Runs in the child, which has DuckDB 2.0 and nothing of botstats.
_EXPORT = r"""
import json, sys
import duckdb
source, out = sys.argv[1], sys.argv[2]
con = duckdb.connect(source)  # read-write: folds in a WAL the last writer left
tables = [r[0] for r in con.execute(
    "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
    "AND table_schema = 'main' ORDER BY table_name").fetchall()]
counts = {}
for t in tables:
    path = out + "/" + t + ".parquet"
    con.execute(f"COPY \"{t}\" TO '{path}' (FORMAT parquet)")
    counts[t] = con.execute(f"SELECT count(*) FROM \"{t}\"").fetchall()[0][0]
migrations = []
if "schema_migrations" in tables:
    migrations = [r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()]
con.close()
json.dump({"duckdb": duckdb.__version__, "counts": counts, "migrations": migrations},
          open(out + "/tables.json", "w"))
"""


@dataclass(frozen=True)
class ConvertReport:
    archive: Path
    backup: Path | None
    counts: dict[str, int]
    message: str


def reader_dir() -> Path:
    """Where DuckDB 2.0 is installed for reading old archives (inside this environment)."""
    return Path(sys.prefix) / "botstats-legacy" / "duckdb2"


def _ensure_reader(say: Callable[[str], None]) -> Path:
    target = reader_dir()
    if (target / "duckdb").is_dir():
        return target
    say(f"installing {LEGACY_DUCKDB} into {target} to read the old archive (once)")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--target", str(partial), LEGACY_DUCKDB],
        capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise StoreError(
            f"could not install {LEGACY_DUCKDB} to read the old archive: "
            f"{(done.stderr or done.stdout).strip().splitlines()[-1:] or ['pip failed']}. "
            f"Run where the package index is reachable, or give --legacy-python PYTHON, a "
            f"Python that has duckdb 2.x.")
    os.replace(partial, target)
    return target


def _export(source: Path, out: Path, python: str | None,
            say: Callable[[str], None]) -> dict[str, int]:
    """Write each table of the old archive to ``out`` as parquet; the rows of each table."""
    env = dict(os.environ)
    if python is None:
        env["PYTHONPATH"] = str(_ensure_reader(say))
        python = sys.executable
    env.pop("PYTHONHOME", None)
    done = subprocess.run([python, "-c", _EXPORT, str(source), str(out)], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()
        raise StoreError(f"reading the old archive {source} failed: "
                         f"{tail[-1] if tail else 'no output'}. It is unchanged.")
    exported = json.loads((out / "tables.json").read_text(encoding="utf-8"))
    return {str(table): int(rows) for table, rows in exported["counts"].items()}


def convert(settings: Settings, *, python: str | None = None,
            say: Callable[[str], None] = log.info) -> ConvertReport:
    """Convert the archive at ``[store].db`` from the single-file layout. Callers hold the run
    lock. An archive that is already a DuckLake is left alone (a half-finished swap is
    finished)."""
    paths = store.ArchivePaths.of(settings)
    kind = paths.kind()
    if kind == "ducklake":
        if paths.legacy_primary.exists():
            os.replace(paths.legacy_primary, paths.legacy_backup)
            return ConvertReport(paths.catalog, paths.legacy_backup, {},
                                 "finished an earlier conversion: the old archive is now "
                                 f"{paths.legacy_backup}")
        return ConvertReport(paths.catalog, None, {}, f"{paths.catalog} is already a DuckLake "
                             "archive: nothing to convert")
    if kind == "missing":
        raise StoreError(f"there is no archive at {paths.catalog} to convert. Check --db.")
    if kind == "other":
        raise StoreError(f"{paths.catalog} is neither a botstats archive nor a DuckDB file.")
    if not paths.legacy_primary.exists():
        # Only the published copy (a backup restored by hand, say): it is the archive.
        os.replace(paths.catalog, paths.legacy_primary)
    with tempfile.TemporaryDirectory(dir=paths.catalog.parent, prefix=".convert-") as scratch:
        say(f"reading {paths.legacy_primary} with DuckDB 2")
        exported = _export(paths.legacy_primary, Path(scratch), python, say)
        counts = _load(paths, Path(scratch), exported, say)
    os.replace(paths.converting, paths.catalog)
    os.replace(paths.legacy_primary, paths.legacy_backup)
    for leftover in (Path(f"{paths.legacy_primary}.wal"), Path(f"{paths.catalog}.wal")):
        leftover.unlink(missing_ok=True)
    return ConvertReport(paths.catalog, paths.legacy_backup, counts,
                         f"converted {counts.get('bot_stats', 0):,} records; the old archive is "
                         f"kept as {paths.legacy_backup} (delete it when satisfied)")


def _load(paths: store.ArchivePaths, scratch: Path, counts: dict[str, int],
          say: Callable[[str], None]) -> dict[str, int]:
    """Fill a new DuckLake at ``<db>.converting`` from the exported tables; check the counts."""
    target = store.ArchivePaths(paths.converting, data_dir=paths.data)
    target.catalog.unlink(missing_ok=True)
    shutil.rmtree(paths.data, ignore_errors=True)  # no live archive owns it: <db> is not a lake
    con = store.connect(target)
    try:
        migrate(con)
        known = set(store.table_names(con)) - {"schema_migrations", "bot_latest_stat"}
        unknown = set(counts) - known - {"schema_migrations", "bot_latest_stat"}
        if unknown:
            raise StoreError(f"the old archive has tables this botstats does not know: "
                             f"{', '.join(sorted(unknown))}. It is unchanged.")
        for table in sorted(set(counts) & known, key=lambda t: -counts[t]):
            say(f"loading {table} ({counts[table]:,} rows)")
            order = f" ORDER BY {_ORDER[table]}" if table in _ORDER else ""
            file = (scratch / f"{table}.parquet").as_posix().replace("'", "''")
            for part, columns in _PARTS.get(table, {table: "*"}).items():
                con.execute(f"INSERT INTO {part} BY NAME SELECT {columns} FROM "
                            f"read_parquet('{file}'){order}")
        con.execute("DELETE FROM bot_latest_stat")
        con.execute("INSERT INTO bot_latest_stat BY NAME SELECT bot_id, "
                    "arg_max(stat_id, recorded_at) AS stat_id, max(recorded_at) AS recorded_at "
                    "FROM bot_stats GROUP BY bot_id")
        loaded = store.table_counts(con)
    except duckdb.Error as exc:
        raise StoreError(f"loading the old archive into {paths.converting} failed: {exc}. "
                         f"The old archive is unchanged.") from exc
    finally:
        store.close(con)
    wrong = {t: (n, loaded.get(t)) for t, n in counts.items()
             if t in loaded and t not in ("schema_migrations", "bot_latest_stat")
             and loaded[t] != n}
    if wrong:
        raise StoreError(f"the converted archive's row counts differ from the old one's "
                         f"({wrong}); the old archive is unchanged.")
    return loaded
