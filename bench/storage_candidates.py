"""The storage candidates for the archive, measured the same way: append 10,000 records to an
archive of N records and make them visible to readers; time, bytes written, size on disk.

- one DuckDB file plus a published copy for readers (the layout of botstats 0.1);
- DuckLake with a SQLite catalog (what botstats uses);
- Delta Lake through deltalake (needs `pip install deltalake`; skipped without it).

    .venv/bin/python bench/storage_candidates.py [--sizes 1000000,10000000]

The figures are in docs/design.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import polars as pl

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.archive import _store as store  # noqa: E402

NEW = 10_000
CHUNK = 1_000_000


def written_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes"):
            return int(line.split()[1])
    return 0


def records(n: int, start: int) -> pl.DataFrame:
    i = pl.col("i")
    return pl.DataFrame({"i": pl.int_range(start, start + n, eager=True)}).select(
        stat_id=i.cast(pl.String), bot_id=(i % 10_000).cast(pl.String),
        recorded_at=pl.datetime(2020, 1, 1, time_zone="UTC") + pl.duration(minutes=i),
        users=i * 3, guilds=i % 5000, cpu_load=(i % 100).cast(pl.Float64),
        raw=pl.concat_str([pl.lit('{"id":"'), i.cast(pl.String), pl.lit('","users":'),
                           (i * 3).cast(pl.String), pl.lit(',"timestamp":"2020-01-01T00:00Z"}')]))


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def fill(insert: Callable[[pl.DataFrame], None], n: int) -> None:
    for start in range(0, n, CHUNK):
        insert(records(min(CHUNK, n - start), start))


def create_and_fill(con: duckdb.DuckDBPyConnection, n: int) -> None:
    """Table ``t`` in ``con`` with ``n`` records, a million at a time."""
    first = True

    def insert(frame: pl.DataFrame) -> None:
        nonlocal first
        con.execute("CREATE TABLE t AS FROM frame" if first else "INSERT INTO t FROM frame")
        first = False

    fill(insert, n)


def single_file(work: Path, n: int) -> None:
    primary, published = work / "a.duckdb.primary", work / "a.duckdb"
    with duckdb.connect(str(primary)) as con:
        create_and_fill(con, n)
    shutil.copyfile(primary, published)


def single_file_append(work: Path, new: pl.DataFrame) -> None:
    primary, published = work / "a.duckdb.primary", work / "a.duckdb"
    with duckdb.connect(str(primary)) as con:
        con.execute("INSERT INTO t FROM new")
    shutil.copyfile(primary, work / "a.tmp")
    os.replace(work / "a.tmp", published)


def lake(work: Path) -> duckdb.DuckDBPyConnection:
    return store.connect(store.ArchivePaths(work / "a.ducklake"))


def ducklake(work: Path, n: int) -> None:
    with lake(work) as con:
        create_and_fill(con, n)


def ducklake_append(work: Path, new: pl.DataFrame) -> None:
    with lake(work) as con:
        con.execute("INSERT INTO t FROM new")


def delta(work: Path, n: int) -> None:
    fill(lambda frame: frame.write_delta(work / "t", mode="append"), n)


def delta_append(work: Path, new: pl.DataFrame) -> None:
    new.write_delta(work / "t", mode="append")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    args = parser.parse_args()
    candidates = [("one DuckDB file + published copy", single_file, single_file_append),
                  ("DuckLake, SQLite catalog", ducklake, ducklake_append)]
    try:
        import deltalake  # noqa: F401

        candidates.append(("Delta Lake (deltalake)", delta, delta_append))
    except ImportError:
        print("deltalake is not installed: Delta Lake skipped", file=sys.stderr)
    print(f"{'records':>12}  {'candidate':<34} {'append s':>8} {'written MB':>10} {'disk MB':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        for name, build, append in candidates:
            with tempfile.TemporaryDirectory(prefix="botstats-storage-") as tmp:
                work = Path(tmp)
                build(work, n)
                new = records(NEW, n)
                before, started = written_bytes(), time.perf_counter()
                append(work, new)
                took, wrote = time.perf_counter() - started, written_bytes() - before
                print(f"{n:>12,}  {name:<34} {took:>8.3f} {wrote / 1e6:>10.1f} "
                      f"{size_of(work) / 1e6:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
