"""Trends benchmark: `build_trends` (every dataset, exported) against plain DuckDB SQL.

One run generates an archive of ``--rows`` stat rows with DuckDB's ``range()`` (10,000 bots,
four records a day, counters that reset), then measures, each case in its own subprocess (wall
time, and the peak RSS the process reports itself from /proc ``VmHWM``, which, unlike
``getrusage``, does not count the parent's pages the child had between fork and exec):

  (a) trends   ``pipeline.build_trends``: the eight datasets, exported as zstd parquet
               month partitions with the manifest, the views created;
  (b) sql      the same ``bot_daily`` + ``bot_growth`` as plain DuckDB SQL (a ``lag()`` window
               for the counter deltas, self-joins for exact day-N lookups), written as zstd
               parquet partitioned by month with ``COPY ... PARTITION_BY``.

Then every bot gets one more record (archived now, as an hourly harvest would), and:

  (c) incremental  ``build_trends`` on (a)'s export: only the week of the new records;
  (d) full         ``build_trends(full=True)`` of the same archive into a fresh directory.

It checks that both wrote the same ``bot_daily`` and ``bot_growth`` (row counts and column
sums), that (c)'s export equals (d)'s row for row (floats to 1e-12), and prints the figures and
the ratios against the targets (no slower than SQL, peak memory under 2 GiB, and (c)/(d)).
Nothing is asserted.

    python bench/trends.py                 # 10M rows; the archive is deleted afterwards
    python bench/trends.py --rows 1000000 --per-day 1 --keep --json bench/results/trends.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BOTS = 10_000
PER_DAY = 4
TARGETS = {"time_vs_sql": 1.0, "peak_rss_mb": 2048.0}

# The archive: bot b's record r is at 2025-01-01 + r * 6 h (+ b % 360 minutes), so four a day;
# sizes grow with r at a per-bot pace, loads are pseudo-random, the command counter resets
# every 200 records.
GENERATE_SQL = """
INSERT INTO bot_stats
SELECT 'b' || b || 'r' || r, 'bot' || lpad(b::VARCHAR, 5, '0'),
       TIMESTAMPTZ '2025-01-01 00:00:00+00' + to_minutes(r * (1440 // {per_day}) + b % 360),
       1000 + b * 10 + r * (b % 7), 100 + b + r * (b % 5) // 3, 1 + r // 100,
       (hash(b, r, 1) % 1000) / 10.0, (hash(b, r, 2) % 1000) / 10.0,
       (r % 200) * 37 + b % 11, '{{}}', 'bench', {archived_at}
FROM range({bots}) AS t1(b), range({first}, {last}) AS t2(r)
"""

# (b): bot_daily and bot_growth as an analyst would write them in SQL.
SQL_DAILY = """
CREATE TEMP TABLE bot_daily AS
WITH r AS (
    SELECT bot_id, recorded_at, CAST(recorded_at AS DATE) AS day, users, guilds, shards,
           cpu_load, memory_load, commands_executed AS c,
           lag(commands_executed IGNORE NULLS) OVER (PARTITION BY bot_id ORDER BY recorded_at)
               AS prev
    FROM bot_stats
)
SELECT bot_id, day,
       arg_max(users, recorded_at) FILTER (WHERE users IS NOT NULL) AS users,
       arg_max(guilds, recorded_at) FILTER (WHERE guilds IS NOT NULL) AS guilds,
       arg_max(shards, recorded_at) FILTER (WHERE shards IS NOT NULL) AS shards,
       avg(cpu_load) AS cpu_load_mean, quantile_cont(cpu_load, 0.95) AS cpu_load_p95,
       avg(memory_load) AS memory_load_mean, quantile_cont(memory_load, 0.95) AS memory_load_p95,
       sum(CASE WHEN prev IS NULL THEN NULL WHEN c >= prev THEN c - prev ELSE c END)
           AS commands_executed,
       count(*) FILTER (WHERE c < prev) AS commands_resets,
       count(*) AS records
FROM r GROUP BY bot_id, day
"""
SQL_GROWTH = """
CREATE TEMP TABLE bot_growth AS
SELECT d.bot_id, d.day, d.guilds, d.users,
       {changes},
       avg(d.guilds) OVER w7 AS guilds_mean_7d,
       CASE WHEN g30.guilds > 0 AND d.guilds >= 0
            THEN (pow(d.guilds / g30.guilds, 1 / 30) - 1) * 100 END AS guilds_cdgr_30d,
       avg(d.users) OVER w7 AS users_mean_7d,
       CASE WHEN g30.users > 0 AND d.users >= 0
            THEN (pow(d.users / g30.users, 1 / 30) - 1) * 100 END AS users_cdgr_30d
FROM bot_daily AS d
LEFT JOIN bot_daily AS g1 ON g1.bot_id = d.bot_id AND g1.day = d.day - 1
LEFT JOIN bot_daily AS g7 ON g7.bot_id = d.bot_id AND g7.day = d.day - 7
LEFT JOIN bot_daily AS g30 ON g30.bot_id = d.bot_id AND g30.day = d.day - 30
WINDOW w7 AS (PARTITION BY d.bot_id ORDER BY d.day
              RANGE BETWEEN INTERVAL 6 DAYS PRECEDING AND CURRENT ROW)
"""
SQL_CHANGES = ",\n       ".join(
    f"d.{m} - g{n}.{m} AS {m}_change_{n}d, "
    f"CASE WHEN g{n}.{m} <> 0 THEN (d.{m} - g{n}.{m}) * 100 / g{n}.{m} END AS {m}_pct_{n}d"
    for m in ("guilds", "users") for n in (1, 7, 30)
)
SQL_COPY = ("COPY (SELECT *, strftime(day, '%Y-%m') AS month FROM {table}) TO '{out}' "
            "(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (month), OVERWRITE_OR_IGNORE)")
# What "the same datasets" is checked on: row counts and sums over the computed columns.
CHECK_SQL = """
SELECT count(*), sum(users), sum(guilds), sum(cpu_load_p95), sum(memory_load_mean),
       sum(commands_executed), sum(commands_resets), sum(records)
FROM read_parquet('{dir}/bot_daily/**/*.parquet')
UNION ALL
SELECT count(*), sum(guilds_change_7d), sum(users_change_30d), sum(guilds_pct_7d),
       sum(guilds_mean_7d), sum(users_cdgr_30d), count(guilds_change_1d), count(users_pct_30d)
FROM read_parquet('{dir}/bot_growth/**/*.parquet')
"""


def settings_for(work: Path, exports: str) -> Any:
    from pipeline.core._loading import load_settings

    config = work / "empty-config.toml"
    config.touch()
    return load_settings(config, env={}, overrides={
        "store.db": str(work / "archive.ducklake"), "exports.dir": str(work / exports)})


def generate(work: Path, rows: int, per_day: int) -> tuple[int, float]:
    """The archive (reused when a --keep run left one of the same size)."""
    from pipeline.archive import _store as store
    from pipeline.archive._store import open_archive

    settings = settings_for(work, "exports")
    if store.exists(settings):
        with open_archive(settings.db_path) as con:
            if con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0] == rows:
                return rows, 0.0
        shutil.rmtree(work)
        work.mkdir(parents=True)
        settings = settings_for(work, "exports")
    started = time.perf_counter()
    with store.writer(settings) as con:
        con.execute(GENERATE_SQL.format(bots=BOTS, first=0, last=rows // BOTS, per_day=per_day,
                                        archived_at="TIMESTAMPTZ '2025-01-01 00:00:00+00'"))
        count = con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0]
    return count, time.perf_counter() - started


def archive_mib(work: Path) -> float:
    from pipeline.archive import _store as store
    from pipeline.archive import _upkeep as upkeep

    return sum(upkeep.disk_bytes(store.ArchivePaths(work / "archive.ducklake"))) / 2**20


def advance(work: Path, per_day: int) -> int:
    """One more record per bot, archived now: what an hourly harvest adds."""
    from pipeline.archive import _store as store

    with store.writer(settings_for(work, "exports")) as con:
        (per_bot,) = con.execute(
            "SELECT count(*) // count(DISTINCT bot_id) FROM bot_stats").fetchall()[0]
        con.execute(GENERATE_SQL.format(bots=BOTS, first=per_bot, last=per_bot + 1,
                                        per_day=per_day, archived_at="now()"))
    return BOTS


def child_trends(work: Path, exports: str = "exports_trends", full: bool = False
                 ) -> dict[str, Any]:
    from pipeline.analytics.build._build import build_trends

    report = build_trends(settings_for(work, exports), full=full)
    return {"datasets": {d.name: d.rows for d in report.datasets},
            "partitions": sum(d.partitions for d in report.datasets),
            "written": report.written, "mode": report.mode,
            "since": report.since.isoformat() if report.since else None}


def same_exports(work: Path, ours: str, theirs: str) -> bool:
    """Every partition of every dataset equal, row for row (floats to rounding)."""
    import polars as pl
    from polars.testing import assert_frame_equal

    from pipeline.analytics.build._build import DATASETS
    from pipeline.analytics.exports._exports import read_manifest

    def partitions(name: str) -> dict[tuple[str, str], pl.DataFrame]:
        manifest = read_manifest(work / name)
        return {(d, p["partition"]): pl.read_parquet(work / name / p["path"])
                for d in DATASETS for p in manifest["datasets"][d]["partitions"]}

    mine, other = partitions(ours), partitions(theirs)
    if sorted(mine) != sorted(other):
        print(f"  partitions differ: {sorted(set(mine) ^ set(other))}")
        return False
    for key, frame in other.items():
        try:
            assert_frame_equal(mine[key], frame, rel_tol=1e-12, abs_tol=1e-9)
        except AssertionError as exc:
            print(f"  {key} differs: {exc}")
            return False
    return True


def child_sql(work: Path) -> dict[str, Any]:
    from pipeline.archive._store import open_archive

    out = work / "exports_sql"
    out.mkdir(parents=True, exist_ok=True)
    with open_archive(work / "archive.ducklake") as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(SQL_DAILY)
        con.execute(SQL_GROWTH.format(changes=SQL_CHANGES))
        rows = {}
        for table in ("bot_daily", "bot_growth"):
            con.execute(SQL_COPY.format(table=table, out=out / table))
            rows[table] = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
    return {"datasets": rows}


def peak_rss_mb() -> float:
    """This process's peak resident set since exec (VmHWM), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource  # not Linux: the rusage figure (may include pre-exec pages)

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(case: str, work: Path, *extra: str) -> dict[str, Any]:
    """Run one case in a fresh interpreter: wall time, and the peak RSS it reports."""
    result = work / f"{case}.json"
    result.unlink(missing_ok=True)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", case, "--dir", str(work), *extra],
                          cwd=REPO, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"bench case {case} failed (exit {proc.returncode})")
    return {"case": case, "seconds": round(seconds, 2), **json.loads(result.read_text())}


def same_results(work: Path) -> bool:
    import duckdb

    with duckdb.connect() as con:
        ours = con.execute(CHECK_SQL.format(dir=work / "exports_trends")).fetchall()
        theirs = con.execute(CHECK_SQL.format(dir=work / "exports_sql")).fetchall()
    # Float sums depend on summation order: equal to 1e-9, not to the last digit.
    same = all(a == b or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9))
               for x, y in zip(ours, theirs, strict=True) for a, b in zip(x, y, strict=True))
    if not same:
        print(f"  results differ:\n    trends {ours}\n    sql    {theirs}")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="stat rows to generate")
    parser.add_argument("--dir", type=Path, default=REPO / "bench" / "results" / "trends",
                        help="work directory (archive and exports)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the archive and exports (a later run of the same size reuses it)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--per-day", type=int, default=PER_DAY, choices=[1, 2, 4, 6, 12, 24],
                        help="records per bot and day (days of history = rows / bots / this)")
    parser.add_argument("--child", choices=["generate", "trends", "sql", "advance", "incremental",
                                            "full"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    work: Path = args.dir.resolve()
    if args.child:
        sys.path.insert(0, str(REPO))
        import pipeline

        pipeline.tune_allocators()  # as the `botstats` command does before anything loads polars
        if args.child == "generate":
            count, took = generate(work, args.rows, args.per_day)
            out: dict[str, Any] = {"rows": count, "took": took}
        elif args.child == "advance":
            out = {"rows": advance(work, args.per_day)}
        elif args.child == "sql":
            out = child_sql(work)
        elif args.child == "full":
            out = child_trends(work, "exports_full", full=True)
        else:  # trends, then incremental: the same export directory
            out = child_trends(work)
        out["peak_rss_mb"] = round(peak_rss_mb(), 1)
        (work / f"{args.child}.json").write_text(json.dumps(out))
        return

    sys.path.insert(0, str(REPO))
    work.mkdir(parents=True, exist_ok=True)
    for stale in ("exports_trends", "exports_sql", "exports_full"):
        shutil.rmtree(work / stale, ignore_errors=True)
    per_day = ["--per-day", str(args.per_day)]
    print(f"archive: {args.rows:,} stat rows, {BOTS:,} bots, {args.per_day} a day -> {work}")
    # In its own process too: a big parent would make every later child start big.
    made = measure("generate", work, "--rows", str(args.rows), *per_day)
    count, took = made["rows"], made["took"]
    print(f"  {'reused' if not took else f'generated in {took:.1f} s'}: {count:,} rows, "
          f"{archive_mib(work):,.0f} MiB")
    cases = [measure("trends", work), measure("sql", work)]
    trends, sql = cases
    agree = same_results(work)
    measure("advance", work, *per_day)
    cases += [measure("incremental", work), measure("full", work)]
    incremental, full = cases[2:]
    incremental_equal = same_exports(work, "exports_trends", "exports_full")
    ratios = {"time_vs_sql": round(trends["seconds"] / sql["seconds"], 2),
              "rss_vs_sql": round(trends["peak_rss_mb"] / sql["peak_rss_mb"], 2),
              "incremental_vs_full": round(incremental["seconds"] / full["seconds"], 2),
              "incremental_rss_vs_full": round(incremental["peak_rss_mb"] / full["peak_rss_mb"], 2)}
    print(f"\n{'case':<8} {'seconds':>8} {'peak RSS MiB':>13}  what")
    print(f"{'trends':<8} {trends['seconds']:>8.2f} {trends['peak_rss_mb']:>13.0f}  8 datasets, "
          f"{trends['partitions']} partitions, views")
    print(f"{'sql':<8} {sql['seconds']:>8.2f} {sql['peak_rss_mb']:>13.0f}  bot_daily + bot_growth")
    print(f"{'incr':<8} {incremental['seconds']:>8.2f} {incremental['peak_rss_mb']:>13.0f}  after "
          f"{BOTS:,} new records: {incremental['mode']} from {incremental['since']}, "
          f"{incremental['written']} partitions written")
    print(f"{'full':<8} {full['seconds']:>8.2f} {full['peak_rss_mb']:>13.0f}  the same archive, "
          f"from scratch")
    print(f"\ntrends/sql: time {ratios['time_vs_sql']} (target <= {TARGETS['time_vs_sql']}), "
          f"memory {ratios['rss_vs_sql']}; trends peak {trends['peak_rss_mb']:.0f} MiB "
          f"(target < {TARGETS['peak_rss_mb']:.0f}); same bot_daily/bot_growth: {agree}")
    print(f"incremental/full: time {ratios['incremental_vs_full']}, memory "
          f"{ratios['incremental_rss_vs_full']}; same exports row for row: {incremental_equal}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "rows": count, "bots": BOTS, "cases": cases, "ratios": ratios, "targets": TARGETS,
            "same_results": agree, "incremental_equals_full": incremental_equal,
            "per_day": args.per_day, "cpus": os.cpu_count(),
        }, indent=2))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
