"""Sharded harvests: 1, 2 and 4 workers (processes on this machine) archiving one directory into
one archive with a PostgreSQL catalog, against the embedded service.

For each number of workers N, into a fresh catalog database and data folder:

  first     N `botstats harvest --shard k/N` at once, from an empty archive;
  hourly    the service advances one interval (one new record a bot), the N workers again;
  alone     (N > 1) the service advances again and only shard 0's worker runs: its wall time
            against the hourly one beside the others is the cost the other shards add to it.

Reported per case: wall time (from the first start to the last exit), records archived and
records/s, commit retries (harvest_runs.commit_retries: commits that collided with another
worker's and ran again), requests of all workers (each pages the whole listing, so N workers
read N listings), CPU seconds of all workers, and the slowest worker's wall. The service runs in
its own process; PostgreSQL is a throwaway cluster (tests/_postgres_support.py) unless
``--catalog`` names a server (its maintenance database: the bench creates one database per N).
Nothing is asserted: the figures are printed (and written with --json).

    python bench/shards.py                                  # 2,000 bots x 10 days x 24, N = 1, 2, 4
    python bench/shards.py --bots 30 --days 1 --workers 1,2 # a smoke run, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _service import Service  # noqa: E402  (bench/_service.py: the service in its own process)

CASES = ("first", "hourly", "alone")


@dataclass
class Case:
    workers: int
    case: str
    seconds: float  # the first start to the last exit
    slowest: float  # the slowest worker's own wall time
    records: int
    retries: int
    requests: int
    cpu_s: float  # every worker, user + system
    exits: list[int]

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def _worker(cmd: list[str], env: dict[str, str], log: Path, out: dict[str, Any]) -> None:
    """One worker: its exit, wall time, CPU and JSON report (read from its stdout)."""
    started = time.perf_counter()
    with log.open("ab") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err)
        stdout = proc.stdout.read() if proc.stdout else b""
        _, status, usage = os.wait4(proc.pid, 0)
    out.update(seconds=time.perf_counter() - started, cpu=usage.ru_utime + usage.ru_stime,
               code=os.waitstatus_to_exitcode(status))
    try:
        out["report"] = json.loads(stdout)
    except ValueError:
        out["report"] = {}


def run_workers(shards: list[tuple[int, int]], env: dict[str, str], log: Path) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = [{} for _ in shards]
    threads = [threading.Thread(target=_worker, args=(
        [sys.executable, "-m", "pipeline", "harvest", "--shard", f"{k}/{n}", "--no-progress",
         "--json"], env, log, results[i])) for i, (k, n) in enumerate(shards)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def measure(n: int, case: str, shards: list[tuple[int, int]], env: dict[str, str],
            log: Path) -> Case:
    started = time.perf_counter()
    results = run_workers(shards, env, log)
    seconds = time.perf_counter() - started
    reports = [r["report"] for r in results]
    return Case(n, case, seconds, max(r["seconds"] for r in results),
                sum(r.get("stats_added", 0) for r in reports),
                sum(r.get("commit_retries", 0) for r in reports),
                sum(r.get("requests", 0) for r in reports), sum(r["cpu"] for r in results),
                [r["code"] for r in results])


def bench_n(n: int, admin_dsn: str, svc: Service, work: Path, log: Path) -> list[Case]:
    import psycopg

    name = f"bench_shards_{n}_{os.getpid()}"
    with psycopg.connect(admin_dsn, autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {name}")
        con.execute(f"CREATE DATABASE {name}")
    dsn = admin_dsn.rsplit("/", 1)[0] + "/" + name
    lake = work / f"lake-{n}"
    shutil.rmtree(lake, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOTSTATS_")}
    env |= {"BOTSTATS_BASE_URL": svc.base_url, "BOTSTATS_STORE_CATALOG": dsn,
            "BOTSTATS_STORE_DATA_PATH": str(lake), "BOTSTATS_CONFIG": os.devnull,
            "BOTSTATS_EXPORT_DIR": str(work / f"exports-{n}")}
    everyone = [(k, n) for k in range(n)]
    cases = [measure(n, "first", everyone, env, log)]
    svc.advance()
    cases.append(measure(n, "hourly", everyone, env, log))
    if n > 1:
        svc.advance()
        cases.append(measure(n, "alone", [(0, n)], env, log))
    try:
        with psycopg.connect(admin_dsn, autocommit=True) as con:
            con.execute(f"DROP DATABASE {name}")
    except psycopg.Error:
        pass  # a worker's connection lingering: the throwaway cluster goes anyway
    shutil.rmtree(lake, ignore_errors=True)
    return cases


def render(cases: list[Case]) -> str:
    lines = ["| workers | case | wall s | slowest worker s | records | records/s | commit "
             "retries | requests | worker CPU s | exits |", "|" + "---|" * 10]
    for c in cases:
        lines.append(f"| {c.workers} | {c.case} | {c.seconds:.1f} | {c.slowest:.1f} | "
                     f"{c.records:,} | {c.records_per_s:,.0f} | {c.retries} | {c.requests:,} | "
                     f"{c.cpu_s:.1f} | {' '.join(map(str, c.exits))} |")
    by = {(c.workers, c.case): c for c in cases}
    for n in sorted({c.workers for c in cases if c.workers > 1}):
        alone, beside = by.get((n, "alone")), by.get((n, "hourly"))
        one, first = by.get((1, "first")), by.get((n, "first"))
        if alone and beside:
            lines.append(f"\n{n} workers: shard 0 alone {alone.slowest:.1f} s, the hourly run "
                         f"beside the others {beside.slowest:.1f} s (slowest worker)")
        if one and first:
            lines.append(f"{n} workers: first harvest {one.seconds / first.seconds:.2f}x the "
                         f"speed of 1")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bots", type=int, default=2000)
    parser.add_argument("--days", type=int, default=10)
    # 24 a day: the service's interval is an hour, so an advance is what an hourly run finds.
    parser.add_argument("--stats-per-day", type=int, default=24)
    parser.add_argument("--workers", default="1,2,4", help="numbers of workers, e.g. 1,2,4")
    parser.add_argument("--catalog", help="a PostgreSQL server's maintenance database "
                        "(postgresql://user@host/postgres); default: a throwaway cluster")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="botstats-shards-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "bench.log"
    cluster = None
    if args.catalog is None:
        from _postgres_support import start_cluster

        cluster = start_cluster()
    admin = args.catalog or cluster.dsn()  # type: ignore[union-attr]
    cases: list[Case] = []
    try:
        for n in [int(w) for w in args.workers.split(",")]:
            svc = Service(["--bots", str(args.bots), "--history-days", str(args.days),
                           "--stats-per-day", str(args.stats_per_day)], work / f"service-{n}.log")
            try:
                cases += bench_n(n, admin, svc, work, log)
            finally:
                svc.close()
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"sharded harvest: {args.bots:,} bots x {args.days} days x {args.stats_per_day}/day")
    print(render(cases))
    if args.json:
        args.json.write_text(json.dumps([asdict(c) | {"records_per_s": c.records_per_s}
                                         for c in cases], indent=1))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
