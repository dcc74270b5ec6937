"""The hourly job on archives of 1M, 10M and 100M records, with the same new data.

For each archive size the bench builds an archive, starts a service of the same history, warms
it (``POST /_admin/warm``: its own first pass over every bot's history, which an indexed service
has made before a client asks), brings it one interval forward (every bot gets one new record:
10,000 new records), runs the hourly job (harvest + trends, what `botstats run` does) in a child
process and measures it: wall time, CPU, bytes written, peak RSS, and the archive's size on disk
against its data's own size. Three cases:
``/stats`` paged oldest first (``serve --stats-page-size 100``, ``[service].stats_page_size =
100``), paged newest first (``--stats-order newest`` too; botstats is not told the order) and
unpaged; each runs on a copy of the same archive, against its own service (same seed).

The archives: 1M and 10M are harvested from the embedded service (10,000 bots, 100 and 1,000
days of history, one record a day); 100M is the 10M one's service history plus 90M older
records (ten a day for 900 days before it) written synthetically through the storage layer.
Ratios are against the 1M run of the same case. Targets (issue "An archive that lives for
years"; issue "Any service, told the truth" for newest first): paged either way, 10M within
1.3x of 1M on every measure and 100M within 1.5x; unpaged, bytes written and trends time within
1.3x; size on disk at most 1.15x the data's own size.

    .venv/bin/python bench/scale.py                      # 1m, 10m and 100m: about an hour
    .venv/bin/python bench/scale.py --sizes 1m,10m       # the harvested ones only
    .venv/bin/python bench/scale.py --bots 200 --sizes 1k,10k  # a quick look (the tests)

Figures are dated in bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _process import run_measured
from _service import Service

REPO = Path(__file__).resolve().parent.parent
SERVICE_END = "2026-11-01T00:00:00Z"
PAGE = 100
TARGETS = {"paged_10m": 1.3, "paged_100m": 1.5, "unpaged": 1.3, "disk_vs_data": 1.15}
# Case -> (/stats page size, the order the service lists a bot's records in).
CASES = {"paged": (PAGE, "oldest"), "newest": (PAGE, "newest"), "unpaged": (0, "oldest")}
PAGED = ("paged", "newest")
# Size name -> (days of service history, synthetic records per bot before it).
SIZES: dict[str, tuple[int, int]] = {
    "1k": (10, 0), "10k": (100, 0), "100k": (100, 900),
    "1m": (100, 0), "10m": (1000, 0), "100m": (1000, 9000),
}
MEASURES = ("seconds", "cpu_s", "written_mb", "peak_rss_mb", "trends_s")


@dataclass
class Run:
    size: str
    case: str
    ratios: dict[str, float] = field(default_factory=dict)  # against the first size's run
    records: int = 0
    new_records: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0
    written_mb: float = 0.0
    peak_rss_mb: float = 0.0
    harvest_s: float = 0.0
    trends_s: float = 0.0
    requests: int = 0
    disk_mb: float = 0.0
    data_mb: float = 0.0
    status: str = ""


def service_args(bots: int, days: int, page: int, order: str = "oldest") -> list[str]:
    return ["--bots", str(bots), "--history-days", str(days), "--stats-per-day", "1",
            "--end", SERVICE_END, "--stats-page-size", str(page), "--stats-order", order]


def settings_for(work: Path, base_url: str, page: int) -> Any:
    sys.path.insert(0, str(REPO))
    from pipeline.core._loading import load_settings

    config = work / "empty.toml"
    config.touch()
    return load_settings(config, env={}, overrides={
        "service.base_url": base_url, "store.db": str(work / "archive.ducklake"),
        "exports.dir": str(work / "exports"), "service.stats_page_size": page})


# --- children: each step in a process of its own, measured by the parent -----------------------
def child(args: argparse.Namespace) -> None:
    settings = settings_for(Path(args.work), args.base_url, args.page)
    out: dict[str, Any] = {}
    if args.step == "harvest":
        from pipeline.harvester._run import harvest

        out["status"] = harvest(settings).status
    elif args.step == "trends":
        from pipeline.analytics.build._build import build_trends

        build_trends(settings)
    elif args.step == "synthetic":
        out["records"] = synthetic(settings, args.per_bot, args.days)
    elif args.step == "run":
        from pipeline.operate import _runner as runner

        report = runner.run(settings)
        out = {"status": report.status, "harvest_s": report.harvest.seconds if report.harvest
               else 0.0, "trends_s": report.trends.seconds if report.trends else 0.0,
               "new_records": report.harvest.stats_added if report.harvest else 0,
               "requests": report.harvest.requests if report.harvest else 0}
    Path(args.out).write_text(json.dumps(out))


def synthetic(settings: Any, per_bot: int, days: int) -> int:
    """``per_bot`` older records for each of the service's bots, ten a day, ending the day
    before the service's history starts; written in slices of bots, one transaction each, with
    each bot's newest record in bot_latest_stat as a harvest would leave it."""
    import polars as pl

    from pipeline.archive import _sql as sql
    from pipeline.archive import _store as store

    ids: list[str] = []
    while page := httpx.get(f"{settings.service.base_url}/bots",
                            params={"limit": PAGE, "skip": len(ids)}, timeout=60).json():
        ids += [bot["id"] for bot in page]
    first = f"TIMESTAMPTZ '{SERVICE_END}' - INTERVAL {days} DAY"
    step = 86400 // 10
    with store.writer(settings) as con:
        for lo in range(0, len(ids), 500):
            bots_in = pl.DataFrame({"b": range(lo, min(len(ids), lo + 500)),
                                    "bot_id": ids[lo:lo + 500]})
            con.execute("BEGIN TRANSACTION")
            sql.run_with_frames(con, f"""
                INSERT INTO bot_stats
                SELECT 'old-' || b || '-' || r, bot_id,
                       {first} - to_seconds(({per_bot} - r) * {step}),
                       1000 + r * (b % 7), 100 + r * (b % 5) // 3, 1 + r // 1000,
                       (hash(b, r, 1) % 1000) / 10.0, (hash(b, r, 2) % 1000) / 10.0,
                       (r % 200) * 37 + b % 11,
                       '{{"id":"old-' || b || '-' || r || '","synthetic":true}}', 'synthetic',
                       {first}
                FROM bots_in, range({per_bot}) AS u(r)
                ORDER BY 2, 3""", bots_in=bots_in)
            sql.run_with_frames(con, "INSERT INTO bot_latest_stat BY NAME SELECT bot_id, "
                      "arg_max(stat_id, recorded_at) AS stat_id, max(recorded_at) AS recorded_at "
                      "FROM bot_stats SEMI JOIN bots_in USING (bot_id) GROUP BY bot_id",
                      bots_in=bots_in)
            con.execute("COMMIT")
        ((count,),) = con.execute("SELECT count(*) FROM bot_stats").fetchall()
    return int(count)


def run_child(work: Path, step: str, base_url: str, page: int, log: Path,
              **extra: Any) -> tuple[dict[str, Any], dict[str, float]]:
    """One child step: what it reported, and its wall, CPU, bytes written and peak RSS."""
    out = work / f".{step}.json"
    cmd = [sys.executable, __file__, "--child", step, "--work", str(work), "--base-url", base_url,
           "--page", str(page), "--out", str(out)]
    for key, value in extra.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    m = run_measured(cmd, cwd=REPO, log=log, append=True)
    if m.code != 0:
        raise SystemExit(f"step {step} failed; see {log}")
    measured = {"seconds": m.seconds, "cpu_s": m.cpu_s, "written_mb": m.written_mb,
                "peak_rss_mb": m.peak_rss_mb}
    return json.loads(out.read_text()), measured


def disk(work: Path) -> tuple[float, float, int]:
    """(MB on disk: catalog + data folder; MB of the live data: the files the current snapshot
    reads plus the catalog's own rows; records)."""
    sys.path.insert(0, str(REPO))
    from pipeline.archive import _store as store
    from pipeline.archive import _upkeep as upkeep

    paths = store.ArchivePaths(work / "archive.ducklake")
    catalog, data = upkeep.disk_bytes(paths)
    with store.open_archive(paths.catalog) as con:
        live = 0
        for table in store.table_names(con):
            ((n,),) = con.execute(
                "SELECT coalesce(sum(data_file_size_bytes), 0) + "
                "coalesce(sum(delete_file_size_bytes), 0) FROM "
                f"ducklake_list_files('{store.ALIAS}', '{table}')").fetchall()
            live += n
        ((records,),) = con.execute("SELECT count(*) FROM bot_stats").fetchall()
    return (catalog + data) / 1e6, (live + catalog) / 1e6, int(records)


def build(size: str, bots: int, work: Path, base_url: str, log: Path) -> None:
    days, older = SIZES[size]
    steps: list[tuple[str, dict[str, Any]]] = []
    if older:
        steps.append(("synthetic", {"per_bot": older, "days": days}))
    steps += [("harvest", {}), ("trends", {})]
    for step, extra in steps:
        _, m = run_child(work, step, base_url, 0, log, **extra)
        # Each step's own cost: a build's peak is otherwise only the largest of its children.
        print(f"  {step}: {m['seconds']:.1f} s, {m['cpu_s']:.1f} CPU-s, {m['written_mb']:.1f} MB "
              f"written, {m['peak_rss_mb']:.0f} MB RSS", flush=True)


def measure(size: str, case: str, work: Path, svc: Service, page: int, log: Path) -> Run:
    svc.warm()  # the service's own first pass over every history is not the job's cost
    svc.advance()
    reported, measured = run_child(work, "run", svc.base_url, page, log)
    run = Run(size, case, **measured, status=reported["status"],
              harvest_s=reported["harvest_s"], trends_s=reported["trends_s"],
              new_records=reported["new_records"], requests=reported["requests"])
    run.disk_mb, run.data_mb, run.records = disk(work)
    return run


def ratios(runs: list[Run]) -> None:
    for case in CASES:
        rows = [r for r in runs if r.case == case]
        if not rows:
            continue
        base = rows[0]
        for r in rows:
            r.ratios = {m: round(getattr(r, m) / getattr(base, m), 2) if getattr(base, m) else 0.0
                        for m in MEASURES}
            r.ratios["disk_vs_data"] = round(r.disk_mb / r.data_mb, 3) if r.data_mb else 0.0


def verdicts(runs: list[Run]) -> list[str]:
    out = []
    for case in CASES:
        rows = [r for r in runs if r.case == case]
        for r in rows[1:]:
            if case in PAGED:
                limit = TARGETS["paged_100m"] if r.size in ("100m", "100k") else TARGETS["paged_10m"]
                worst = max(r.ratios[m] for m in ("seconds", "cpu_s", "written_mb", "peak_rss_mb"))
                out.append(f"{case} {r.size}: worst ratio {worst:.2f} (target <= {limit}) "
                           f"{'MET' if worst <= limit else 'MISSED'}")
            else:
                worst = max(r.ratios["written_mb"], r.ratios["trends_s"])
                out.append(f"unpaged {r.size}: bytes written {r.ratios['written_mb']:.2f}, "
                           f"trends {r.ratios['trends_s']:.2f} (target <= {TARGETS['unpaged']}) "
                           f"{'MET' if worst <= TARGETS['unpaged'] else 'MISSED'}")
    for r in runs:
        ok = r.ratios.get("disk_vs_data", 0) <= TARGETS["disk_vs_data"]
        out.append(f"{r.case} {r.size}: disk {r.disk_mb:,.0f} MB vs data {r.data_mb:,.0f} MB = "
                   f"{r.ratios.get('disk_vs_data', 0):.3f} (target <= 1.15) "
                   f"{'MET' if ok else 'MISSED'}")
    return out


def render(runs: list[Run], bots: int) -> str:
    lines = [f"hourly job (harvest + trends) after one new record per bot ({bots:,} bots); "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d')}", "",
             f"{'case':<8} {'size':<5} {'records':>12} {'new':>7} {'wall s':>7} {'cpu s':>7} "
             f"{'written MB':>10} {'RSS MB':>7} {'harvest s':>9} {'trends s':>8} {'reqs':>6} "
             f"{'reqs/bot':>8} "
             f"{'disk MB':>8} {'data MB':>8}  ratios vs first size (wall/cpu/written/rss/trends)"]
    for r in runs:
        ratio = "/".join(f"{r.ratios.get(m, 0):.2f}" for m in MEASURES)
        lines.append(f"{r.case:<8} {r.size:<5} {r.records:>12,} {r.new_records:>7,} "
                     f"{r.seconds:>7.1f} {r.cpu_s:>7.1f} {r.written_mb:>10.1f} "
                     f"{r.peak_rss_mb:>7.0f} {r.harvest_s:>9.1f} {r.trends_s:>8.1f} "
                     f"{r.requests:>6,} {r.requests / bots:>8.2f} {r.disk_mb:>8.0f} "
                     f"{r.data_mb:>8.0f}  {ratio}")
    return "\n".join(lines + [""] + verdicts(runs))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1m,10m,100m",
                   help=f"comma-separated, in order, from {', '.join(SIZES)}")
    p.add_argument("--bots", type=int, default=10_000)
    p.add_argument("--cases", default=",".join(CASES),
                   help=f"comma-separated, from {', '.join(CASES)}")
    p.add_argument("--work", help="work folder (default: a temporary one, removed after)")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--keep", action="store_true",
                   help="keep each built archive in --work and reuse it on the next run")
    # the children's own arguments
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--base-url", help=argparse.SUPPRESS)
    p.add_argument("--page", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--per-bot", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--days", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        args.step = args.child
        child(args)
        return
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        raise SystemExit(f"unknown size(s) {unknown}; choose from {', '.join(SIZES)}")
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if set(cases) - set(CASES):
        raise SystemExit(f"unknown case(s) {sorted(set(cases) - set(CASES))}; choose from "
                         f"{', '.join(CASES)}")
    root = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="botstats-scale-"))
    runs: list[Run] = []
    try:
        for size in sizes:
            days, _ = SIZES[size]
            base = root / size / "built"
            log = root / size / "bench.log"
            if not (args.keep and (base / ".built").exists()):
                shutil.rmtree(root / size, ignore_errors=True)
                base.mkdir(parents=True)
                print(f"{size}: building ({args.bots:,} bots, {days} days of service history)",
                      flush=True)
                build_svc = Service(service_args(args.bots, days, 0), root / size / "service-build.log")
                try:
                    build(size, args.bots, base, build_svc.base_url, log)
                finally:
                    build_svc.close()
                (base / ".built").touch()
            for case in cases:
                page, order = CASES[case]
                work = root / size / case
                shutil.rmtree(work, ignore_errors=True)
                shutil.copytree(base, work)
                svc = Service(service_args(args.bots, days, page, order),
                              root / size / f"service-{case}.log")
                try:
                    print(f"{size}: measuring the hourly job, {case} /stats", flush=True)
                    runs.append(measure(size, case, work, svc, page, log))
                    r = runs[-1]
                    print(f"  {r.status}: {r.new_records:,} new of {r.records:,}, {r.seconds:.1f} s, "
                          f"{r.cpu_s:.1f} CPU-s, {r.written_mb:.1f} MB written, "
                          f"{r.peak_rss_mb:.0f} MB RSS, trends {r.trends_s:.1f} s, "
                          f"{r.requests:,} requests", flush=True)
                finally:
                    svc.close()
                shutil.rmtree(work, ignore_errors=True)
            if not args.keep:
                shutil.rmtree(base, ignore_errors=True)
        runs.sort(key=lambda r: (cases.index(r.case), sizes.index(r.size)))
        ratios(runs)
        print()
        print(render(runs, args.bots))
        if args.json:
            Path(args.json).write_text(json.dumps([asdict(r) for r in runs], indent=1))
    finally:
        if not args.work:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
