"""Harvest benchmark: botstats against a bare httpx loop (the ceiling) and dlt's rest_api source.

One run starts the embedded service in its own process (so it has its own core), then measures,
each case in its own subprocess (wall time and that process's peak RSS, from ``os.wait4``):

The service is read once unmeasured first (it caches what it generates), then:

  (a) bare     a bare asyncio + httpx loop: GET /bots?limit&skip until an empty page, then every
               bot's /stats with [service].concurrency requests in flight (one single-connection
               httpx.AsyncClient per worker, client.get), bodies discarded (decoded with orjson
               only to count the records): the ceiling;
  (a') lanes   the same loop sending as botstats does: requests built with httpx.Request and
               handed to one single-connection httpx.AsyncHTTPTransport per worker (no
               AsyncClient.send). Not a target; it shows how much of (b)/(a) is botstats using
               httpx more cheaply than (a) rather than doing less;
  (b) full     ``botstats harvest --full`` into a fresh DuckDB file;
  (c) again    ``botstats harvest`` once more with nothing new: one /stat per bot, no /stats;
  (d) dlt      dlt's rest_api source (offset paginator on /bots, a parallelized dependent
               resource for /bots/{id}/stats) into DuckDB, in a temp pipelines dir.

Stat rows of (b) and (d) are counted in the DuckDB files they wrote. Nothing is asserted: the
figures and the ratios against the targets are printed (and written with --json).

    python bench/harvest.py                      # 2,000 bots x 90 days
    python bench/harvest.py --bots 50 --days 5 --skip-dlt --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import platform
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from _process import run_measured
from _service import Service

REPO = Path(__file__).resolve().parent.parent
SERVICE_END = "2026-11-01T00:00:00Z"  # a fixed clock: every run serves the same data
SERVICE_PAGE_CAP = 100
TARGETS = {"full_vs_bare": 0.8, "full_vs_dlt": 5.0}


@dataclass
class Case:
    key: str
    title: str
    seconds: float = 0.0
    rows: int = 0
    requests: int = 0
    peak_rss_mb: float = 0.0
    cpu_s: float = 0.0  # user + system CPU of the case's process (all its threads)
    service_cpu_s: float | None = None  # the service's CPU while the case ran (Linux only)
    listing_pages: int = 0
    status: str = ""
    note: str = ""

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


# --- running a case in its own process ------------------------------------------------------------
def measure_case(case: Case, svc: Service, cmd: list[str], *, cwd: Path,
                 env: dict[str, str] | None = None, log: Path) -> int:
    """Run one case's process into ``case`` (time, memory, CPU, the service's CPU meanwhile);
    return its exit code."""
    service_before = svc.cpu_seconds()
    m = run_measured(cmd, cwd=cwd, env=env, log=log)
    service_after = svc.cpu_seconds()
    case.seconds, case.peak_rss_mb, case.cpu_s = m.seconds, m.peak_rss_mb, m.cpu_s
    if service_before is not None and service_after is not None:
        case.service_cpu_s = service_after - service_before
    return m.code


def child_cmd(case: str, *args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", case, *args]


# --- (a) the bare loop, run inside the child process -----------------------------------------------
async def bare_loop(base_url: str, concurrency: int, page_size: int,
                    lanes: bool = False) -> dict[str, int]:
    """(a), or with ``lanes`` (a'): the /stats requests go straight to httpx transports."""
    import orjson

    # One single-connection client per worker, the connection layout botstats uses
    # (pipeline.interface._transport.Lanes): a shared pool of eight costs a sixth more CPU per request, and
    # the ceiling should not pay it.
    one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [httpx.AsyncClient(base_url=base_url, limits=one, timeout=30)
               for _ in range(concurrency)]
    ids: list[str] = []
    skip = requests = 0
    while True:
        response = await clients[0].get("/bots", params={"limit": page_size, "skip": skip})
        requests += 1
        page = orjson.loads(response.content)
        if not page:
            break
        ids.extend(bot["id"] for bot in page)
        skip += len(page)
    pages = requests
    queue = iter(ids)
    rows = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal rows, requests
        for bot_id in queue:  # one shared iterator: each bot is taken once
            response = await client.get(f"/bots/{bot_id}/stats")
            response.raise_for_status()
            requests += 1
            rows += len(orjson.loads(response.content))

    headers = dict(clients[0].headers)
    extensions = {"timeout": httpx.Timeout(30).as_dict()}
    base = base_url.rstrip("/")

    async def lane_worker(lane: httpx.AsyncHTTPTransport) -> None:
        nonlocal rows, requests
        for bot_id in queue:
            request = httpx.Request("GET", f"{base}/bots/{bot_id}/stats", headers=headers,
                                    extensions=extensions)
            response = await lane.handle_async_request(request)
            try:
                body = await response.aread()
            finally:
                await response.aclose()
            if response.status_code != 200:
                raise SystemExit(f"GET /bots/{bot_id}/stats answered {response.status_code}")
            requests += 1
            rows += len(orjson.loads(body))

    if lanes:
        transports = [httpx.AsyncHTTPTransport(limits=one) for _ in range(concurrency)]
        await asyncio.gather(*(lane_worker(lane) for lane in transports))
        for lane in transports:
            await lane.aclose()
    else:
        await asyncio.gather(*(worker(client) for client in clients))
    for client in clients:
        await client.aclose()
    return {"rows": rows, "requests": requests, "listing_pages": pages, "bots": len(ids)}


# --- (d) dlt, run inside the child process ---------------------------------------------------------
def dlt_harvest(base_url: str, db: Path, pipelines_dir: Path, page_size: int) -> dict[str, int]:
    import dlt
    import requests.adapters
    from dlt.sources.rest_api import rest_api_source

    # Instrumentation only (not what a dlt user writes): count the HTTP requests dlt sends.
    sent = {"n": 0}
    original_send = requests.adapters.HTTPAdapter.send

    def counting_send(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent["n"] += 1
        return original_send(self, *args, **kwargs)

    requests.adapters.HTTPAdapter.send = counting_send  # type: ignore[method-assign]

    source = rest_api_source({
        "client": {"base_url": base_url},
        "resource_defaults": {"write_disposition": "replace"},
        "resources": [
            {
                "name": "bots",
                "endpoint": {
                    "path": "bots",
                    "data_selector": "$",
                    "paginator": {
                        "type": "offset", "limit": page_size, "offset_param": "skip",
                        "limit_param": "limit", "total_path": None, "stop_after_empty_page": True,
                    },
                },
            },
            {
                "name": "bot_stats",
                "endpoint": {
                    "path": "bots/{bot_id}/stats",
                    "data_selector": "$",
                    "paginator": "single_page",
                    "params": {"bot_id": {"type": "resolve", "resource": "bots", "field": "id"}},
                },
                "parallelized": True,
            },
        ],
    })
    pipeline = dlt.pipeline(
        pipeline_name="botstats_bench", pipelines_dir=str(pipelines_dir),
        destination=dlt.destinations.duckdb(str(db)), dataset_name="directory",
    )
    # Parquet: dlt's default for DuckDB (insert_values) took 4x longer and ~11 GB here.
    pipeline.run(source, loader_file_format="parquet")
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        (rows,) = con.execute("SELECT count(*) FROM directory.bot_stats").fetchone()
    return {"rows": int(rows), "requests": sent["n"]}


def run_child(args: argparse.Namespace) -> None:
    """The body of one measured subprocess; its figures go to --result as JSON."""
    if args.child in ("bare", "lanes"):
        result = asyncio.run(bare_loop(args.base_url, args.concurrency, args.page_size,
                                       lanes=args.child == "lanes"))
    elif args.child == "dlt":
        result = dlt_harvest(args.base_url, Path(args.db), Path(args.pipelines_dir), args.page_size)
    else:
        raise SystemExit(f"unknown child case {args.child!r}")
    Path(args.result).write_text(json.dumps(result))


# --- the service --------------------------------------------------------------------------------
# --- the cases ------------------------------------------------------------------------------------
def case_bare(svc: Service, work: Path, concurrency: int, page_size: int,
              lanes: bool = False) -> Case:
    case = Case("a'", "bare loop, httpx transports") if lanes else \
        Case("a", "bare httpx loop (ceiling)")
    child = "lanes" if lanes else "bare"
    result_file = work / f"{child}.json"
    cmd = child_cmd(child, "--base-url", svc.base_url, "--concurrency", str(concurrency),
                    "--page-size", str(page_size), "--result", str(result_file))
    code = measure_case(case, svc, cmd, cwd=REPO, log=work / f"{child}.log")
    if code == 0:
        result = json.loads(result_file.read_text())
        case.rows, case.requests = result["rows"], result["requests"]
        case.listing_pages = result["listing_pages"]
    case.status = "ok" if code == 0 else f"exit {code}"
    return case


def case_botstats(svc: Service, work: Path, db: Path, full: bool) -> Case:
    case = Case("b", "botstats harvest --full") if full else Case("c", "botstats harvest (again)")
    # Exactly what an operator runs (progress on: log lines, as stderr is not a terminal).
    cmd = [sys.executable, "-m", "pipeline", "harvest", "--base-url", svc.base_url, "--db", str(db),
           *(["--full"] if full else [])]
    pages_before = svc.listing_requests()
    code = measure_case(case, svc, cmd, cwd=REPO, log=work / f"harvest-{case.key}.log")
    case.listing_pages = svc.listing_requests() - pages_before
    from pipeline.archive._store import open_archive

    with open_archive(db) as con:
        status, requests, added = con.execute(
            "SELECT status, requests, stats_added FROM harvest_runs "
            "ORDER BY started_at DESC LIMIT 1").fetchone()
        (total,) = con.execute("SELECT count(*) FROM bot_stats").fetchone()
    # (b) is measured by what the archive holds; (c) by what it added (nothing new: 0).
    case.rows = int(total) if full else int(added)
    case.requests = int(requests)
    case.status = status if code in (0, 3) else f"{status}, exit {code}"
    return case


def case_dlt(svc: Service, work: Path, page_size: int, concurrency: int) -> Case:
    case = Case("d", "dlt rest_api -> duckdb")
    work.mkdir(parents=True, exist_ok=True)
    result_file = work / "dlt.json"
    dlt_home = work / "dlt"
    dlt_home.mkdir()
    env = {
        **os.environ,
        "RUNTIME__DLTHUB_TELEMETRY": "false",
        "DLT_DATA_DIR": str(dlt_home / "data"),
        "DLT_PROJECT_DIR": str(dlt_home),
        # Parallelized transformers run in the extract thread pool: give it the same
        # concurrency as the others.
        "EXTRACT__WORKERS": str(concurrency),
        "EXTRACT__MAX_PARALLEL_ITEMS": str(concurrency * 2),
    }
    cmd = child_cmd("dlt", "--base-url", svc.base_url, "--db", str(dlt_home / "dlt.duckdb"),
                    "--pipelines-dir", str(dlt_home / "pipelines"), "--page-size", str(page_size),
                    "--result", str(result_file))
    pages_before = svc.listing_requests()
    # cwd in the temp dir: dlt looks for .dlt/ there and writes nothing into the repo.
    code = measure_case(case, svc, cmd, cwd=dlt_home, env=env, log=work / "dlt.log")
    case.listing_pages = svc.listing_requests() - pages_before
    if code == 0:
        result = json.loads(result_file.read_text())
        case.rows, case.requests = result["rows"], result["requests"]
    case.status = "ok" if code == 0 else f"exit {code} (see {work / 'dlt.log'})"
    return case


def median_case(runs: list[Case]) -> Case:
    """The run of median time, noting the spread of all of them."""
    ordered = sorted(runs, key=lambda c: c.seconds)
    case = ordered[len(ordered) // 2]
    if len(runs) > 1:
        case.note = f"{len(runs)} runs: {ordered[0].seconds:.2f}-{ordered[-1].seconds:.2f} s"
    return case


# --- report ------------------------------------------------------------------------------------------
def paired(rounds: dict[str, list[Case]], top: str, base: str) -> list[float]:
    """``top``'s throughput over ``base``'s, round by round: two cases run seconds apart see the
    same machine, where the medians of each may come from different minutes."""
    return [b.rows_per_s / a.rows_per_s if a.rows_per_s else 0.0
            for a, b in zip(rounds.get(base, []), rounds.get(top, []), strict=False)]


def ratios(cases: dict[str, Case], bots: int,
           rounds: dict[str, list[Case]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, top, base in (("full_vs_bare", "b", "a"), ("full_vs_lanes", "b", "a'"),
                            ("full_vs_dlt", "b", "d")):
        per_round = paired(rounds or {}, top, base)
        if len(per_round) > 1:
            out[f"{name}_rounds"] = per_round
    a, b, c, d = (cases.get(k) for k in "abcd")
    if a and b and a.rows_per_s:
        out["full_vs_bare"] = b.rows_per_s / a.rows_per_s
    lanes = cases.get("a'")
    if lanes and b and lanes.rows_per_s:
        out["full_vs_lanes"] = b.rows_per_s / lanes.rows_per_s
    if b and d and d.rows_per_s:
        out["full_vs_dlt"] = b.rows_per_s / d.rows_per_s
    if a and b and a.rows_per_s and b.cpu_s:
        # However well (b) overlaps its work, it cannot finish before the CPUs have done it.
        need = b.cpu_s + (b.service_cpu_s or 0.0)
        floor = need / (os.cpu_count() or 1)
        out["full_cpu_needed_s"] = need
        out["full_wall_floor_s"] = floor
        out["full_vs_bare_bound"] = (b.rows / floor) / a.rows_per_s
    if c:
        out["again_requests"] = c.requests
        out["again_budget"] = bots + c.listing_pages
    return out


def render(cases: dict[str, Case], r: dict[str, Any], bots: int, days: int,
           concurrency: int) -> str:
    head = f"{'case':<30} {'seconds':>8} {'stat rows':>10} {'rows/s':>9} {'requests':>9} " \
           f"{'peak RSS MB':>11} {'CPU s':>6} {'svc CPU s':>9}  status"
    load = os.getloadavg()[0]  # other work on the machine skews every figure
    lines = [f"botstats harvest bench: {bots} bots x {days} days, concurrency {concurrency}, "
             f"{os.cpu_count()} CPUs (load {load:.1f} at the end), Python "
             f"{platform.python_version()}", "", head, "-" * len(head)]
    for case in cases.values():
        lines.append(f"({case.key}) {case.title:<26} {case.seconds:>8.2f} {case.rows:>10,} "
                     f"{case.rows_per_s:>9,.0f} {case.requests:>9,} {case.peak_rss_mb:>11.0f} "
                     f"{case.cpu_s:>6.2f} {_cpu(case.service_cpu_s):>9}  {case.status}" + (f"  ({case.note})" if case.note else ""))
    lines.append("")

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    def by_round(name: str) -> str:
        per_round = r.get(f"{name}_rounds")
        if not per_round:
            return ""
        return (f"   (round by round: {', '.join(f'{x:.2f}' for x in per_round)}; median "
                f"{statistics.median(per_round):.2f})")

    if "full_vs_bare" in r:
        v = r["full_vs_bare"]
        lines.append(f"(b)/(a) throughput  {v:5.2f}x   target >= {TARGETS['full_vs_bare']}x   "
                     f"{verdict(v >= TARGETS['full_vs_bare'])}{by_round('full_vs_bare')}")
    if "full_vs_bare_bound" in r:
        lines.append(f"                    (b) needs {r['full_cpu_needed_s']:.2f} CPU-s (harvest + "
                     f"service) = at least {r['full_wall_floor_s']:.2f} s on {os.cpu_count()} "
                     f"CPUs: (b)/(a) <= {r['full_vs_bare_bound']:.2f}x on this machine")
    if "full_vs_lanes" in r:
        lines.append(f"(b)/(a') throughput {r['full_vs_lanes']:5.2f}x   (not a target: (a) "
                     f"sending as botstats does){by_round('full_vs_lanes')}")
    if "full_vs_dlt" in r:
        v = r["full_vs_dlt"]
        lines.append(f"(b)/(d) throughput  {v:5.2f}x   target >= {TARGETS['full_vs_dlt']}x   "
                     f"{verdict(v >= TARGETS['full_vs_dlt'])}{by_round('full_vs_dlt')}")
    if "again_requests" in r:
        n, budget = r["again_requests"], r["again_budget"]
        lines.append(f"(c) requests        {n:,} for {bots:,} bots + {budget - bots} listing "
                     f"pages = {budget:,}   target <= {budget:,}   {verdict(n <= budget)}")
    a, b = cases.get("a"), cases.get("b")
    if a and b and a.rows != b.rows:
        lines.append(f"warning: (a) read {a.rows:,} records but (b) archived {b.rows:,}")
    return "\n".join(lines)


def _cpu(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench/harvest.py",
        description="Measure botstats harvest against a bare httpx loop (the ceiling) and dlt's "
                    "rest_api source, on the embedded service over loopback. Reports seconds, "
                    "stat rows, rows/s, requests and peak RSS per case, and the ratios against "
                    "the targets. Asserts nothing.")
    p.add_argument("--bots", type=int, default=2000, help="bots in the directory (default 2000)")
    p.add_argument("--days", type=int, default=90,
                   help="days of history, one stat per day (default 90)")
    p.add_argument("--skip-dlt", action="store_true", help="leave out case (d), dlt")
    p.add_argument("--repeat", type=int, default=3, metavar="N",
                   help="rounds of every case; each figure is the median run (default 3)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (databases, logs)")
    # The measured subprocesses re-enter this script with these.
    for name in ("--child", "--base-url", "--db", "--pipelines-dir", "--result"):
        p.add_argument(name, help=argparse.SUPPRESS)
    p.add_argument("--concurrency", type=int, help=argparse.SUPPRESS)
    p.add_argument("--page-size", type=int, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        run_child(args)
        return
    sys.path.insert(0, str(REPO))
    from pipeline.core._loading import load_settings
    from pipeline.interface._concurrency import START

    # The same settings `botstats harvest` runs with here (config.toml, BOTSTATS_*).
    service_settings = load_settings().service
    # The bare loops keep a fixed number in flight: "auto" starts at START.
    concurrency = service_settings.concurrency
    concurrency = concurrency if isinstance(concurrency, int) else START
    page_size = min(service_settings.page_size, SERVICE_PAGE_CAP)
    # Bytecode compiled once, as an installed package has it: with PYTHONDONTWRITEBYTECODE set,
    # every run of (b) and (c) would otherwise compile each module changed since the last one.
    compileall.compile_dir(REPO / "pipeline", quiet=1)
    work = Path(tempfile.mkdtemp(prefix="botstats-bench-"))
    cases: dict[str, Case] = {}
    rounds: dict[str, list[Case]] = {}
    svc = Service(["--bots", str(args.bots), "--history-days", str(args.days), "--stats-per-day",
                   "1", "--end", SERVICE_END, "--max-page-size", str(SERVICE_PAGE_CAP)],
                  work / "service.log")
    try:
        print(f"service {svc.base_url}: {args.bots} bots x {args.days} days; work dir {work}",
              file=sys.stderr)
        def steps(n: int) -> list[tuple[str, Any]]:
            db = work / f"archive-{n}.ducklake"  # (b) writes a fresh archive each round
            out = [("a", lambda: case_bare(svc, work, concurrency, page_size)),
                   ("a'", lambda: case_bare(svc, work, concurrency, page_size, lanes=True)),
                   ("b", lambda: case_botstats(svc, work, db, full=True)),
                   ("c", lambda: case_botstats(svc, work, db, full=False))]
            if not args.skip_dlt:
                out.append(("d", lambda: case_dlt(svc, work / f"dlt-{n}", page_size, concurrency)))
            return out

        # Unmeasured: the service builds and caches bot profiles on first use.
        print("warming the service up ...", file=sys.stderr)
        case_bare(svc, work, concurrency, page_size)
        # Rounds interleave the cases, so a machine that slows down mid-run skews them alike.
        for n in range(args.repeat):
            for key, step in steps(n):
                print(f"round {n + 1}/{args.repeat}: running ({key}) ...", file=sys.stderr)
                rounds.setdefault(key, []).append(step())
        cases = {key: median_case(runs) for key, runs in rounds.items()}
    finally:
        svc.close()
    r = ratios(cases, args.bots, rounds)
    print(render(cases, r, args.bots, args.days, concurrency))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": " ".join([Path(sys.argv[0]).as_posix(), *(argv or sys.argv[1:])]),
            "bots": args.bots, "days": args.days, "concurrency": concurrency,
            "cpus": os.cpu_count(), "load_at_end": os.getloadavg()[0],
            "python": platform.python_version(),
            "cases": {k: {**asdict(c), "rows_per_s": c.rows_per_s} for k, c in cases.items()},
            "ratios": r, "targets": TARGETS,
        }, indent=2) + "\n")
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
