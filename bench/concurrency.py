"""Adaptive concurrency benchmark: `[service].concurrency = "auto"` against fixed values, on the
embedded service in three guises, in one run.

  latency    --latency-ms 50 on every answer: fixed concurrency swept (8, 16, 32) and auto;
             target: auto's throughput at least 0.9x the best fixed one's;
  rate       --rate-limit R (requests/second, botstats not told): auto only; targets: successful
             requests at least 85% of R, and at most 2% of all requests answered 429;
  loopback   no latency, no limit: auto against 8 (the fixed default before "auto");
             target: auto no slower (ratio at least 1.0).

Each case is a full harvest into a fresh DuckDB file, in this process; the service
runs in its own process (so it has its own core), reads its 429 count from /_admin/health. The
latency and loopback cases run interleaved rounds (--repeat, --loopback-repeat) and report medians (one round of a
case moves by 10-20% on a shared 2-core machine); the ratios are taken round by round. Nothing
is asserted: the figures and whether each target is met are printed (and written with --json).

    python bench/concurrency.py          # 1,500 bots x 3 rounds; rate 100/s; loopback 4,000 x 5
    python bench/concurrency.py --bots 200 --rate-bots 200 --rate 50 --loopback-bots 200 \
        --repeat 1 --loopback-repeat 1   # a smoke run, seconds
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _service import Service  # noqa: E402  (bench/_service.py: the service in its own process)

from pipeline.core._loading import load_settings  # noqa: E402
from pipeline.harvester._report import HarvestOptions  # noqa: E402
from pipeline.harvester._run import harvest  # noqa: E402

SWEEP = (8, 16, 32)  # 4 and fewer are far behind with 50 ms of latency
TARGETS = {"latency_vs_best_fixed": 0.9, "rate_share": 0.85, "rate_429_share": 0.02,
           "loopback_vs_8": 1.0}


@dataclass
class Run:
    case: str
    concurrency: int | str
    seconds: float
    requests: int
    rate_limited: int
    status: str

    @property
    def ok_per_second(self) -> float:
        return (self.requests - self.rate_limited) / self.seconds if self.seconds else 0.0


def one_harvest(svc: Service, work: Path, case: str, concurrency: int | str) -> Run:
    db = work / f"{case}-{concurrency}-{time.monotonic_ns()}.duckdb"
    config = work / "empty.toml"
    config.touch()
    settings = load_settings(config, env={}, overrides={
        "service.base_url": svc.base_url, "store.db": str(db),
        "service.concurrency": concurrency, "retry.attempts": 10})
    limited = svc.health()["rate_limited"]
    report = harvest(settings, HarvestOptions(full=True))
    limited = svc.health()["rate_limited"] - limited
    for path in db.parent.glob(db.name + "*"):  # the catalog, its data folder, the lock
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    return Run(case, concurrency, report.seconds, report.requests, limited, report.status)


def rounds(svc: Service, work: Path, case: str, values: list[int | str],
           repeat: int) -> dict[str, list[Run]]:
    one_harvest(svc, work, f"{case}-warm", values[0])  # the service caches what it renders
    out: dict[str, list[Run]] = {str(v): [] for v in values}
    for n in range(repeat):
        for value in values:
            run = one_harvest(svc, work, case, value)
            out[str(value)].append(run)
            print(f"  {case} round {n + 1}: concurrency {value}: {run.ok_per_second:,.0f} ok "
                  f"requests/s ({run.requests} requests, {run.seconds:.2f} s, {run.status})",
                  file=sys.stderr)
    return out


def median_rate(runs: list[Run]) -> float:
    return statistics.median(r.ok_per_second for r in runs)


def paired(a: list[Run], b: list[Run]) -> list[float]:
    """a/b throughput round by round (the two ran seconds apart)."""
    return [x.ok_per_second / y.ok_per_second for x, y in zip(a, b, strict=True)]


def with_service(bots: int, work: Path, *flags: str) -> Callable[[Callable[[Service], Any]], Any]:
    def use(fn: Callable[[Service], Any]) -> Any:
        svc = Service(["--bots", str(bots), "--history-days", "2", "--stats-per-day", "1",
                       "--end", "2026-11-01T00:00:00Z", "--max-page-size", "100", *flags],
                      work / f"service-{time.monotonic_ns()}.log")
        try:
            return fn(svc)
        finally:
            svc.close()
    return use


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bots", type=int, default=1500, help="bots of the latency service "
                   "(default 1500; 2 records each)")
    p.add_argument("--loopback-bots", type=int, default=4000, help="bots of the loopback "
                   "service (default 4000: a run of a few seconds)")
    p.add_argument("--latency-ms", type=float, default=50.0)
    p.add_argument("--rate", type=float, default=100.0, help="the rate limit, requests/s")
    p.add_argument("--rate-bots", type=int, default=1500)
    p.add_argument("--repeat", type=int, default=3, help="rounds of the latency case (default 3)")
    p.add_argument("--loopback-repeat", type=int, default=5, help="rounds of the loopback case "
                   "(default 5: it is the noisiest)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    args = p.parse_args(argv)
    logging.getLogger("botstats").setLevel(logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="botstats-bench-concurrency-"))

    print(f"latency {args.latency_ms:g} ms: fixed {SWEEP} and auto", file=sys.stderr)
    latency = with_service(args.bots, work, "--latency-ms", str(args.latency_ms))(
        lambda svc: rounds(svc, work, "latency", [*SWEEP, "auto"], args.repeat))
    print(f"rate limit {args.rate:g}/s: auto", file=sys.stderr)
    rate = with_service(args.rate_bots, work, "--rate-limit", str(args.rate))(
        lambda svc: one_harvest(svc, work, "rate", "auto"))
    print("loopback: 8 and auto", file=sys.stderr)
    loopback = with_service(args.loopback_bots, work)(
        lambda svc: rounds(svc, work, "loopback", [8, "auto"], args.loopback_repeat))

    best = max(SWEEP, key=lambda c: median_rate(latency[str(c)]))
    vs_best = paired(latency["auto"], latency[str(best)])
    vs_8 = paired(loopback["auto"], loopback["8"])
    figures = {
        "latency": {k: median_rate(v) for k, v in latency.items()},
        "latency_best_fixed": best,
        "latency_vs_best_fixed": statistics.median(vs_best),
        "latency_vs_best_fixed_rounds": vs_best,
        "rate": args.rate,
        "rate_ok_per_second": rate.ok_per_second,
        "rate_share": rate.ok_per_second / args.rate,
        "rate_429": rate.rate_limited,
        "rate_requests": rate.requests,
        "rate_429_share": rate.rate_limited / max(rate.requests, 1),
        "rate_seconds": rate.seconds,
        "loopback": {k: median_rate(v) for k, v in loopback.items()},
        "loopback_vs_8": statistics.median(vs_8),
        "loopback_vs_8_rounds": vs_8,
        "runs": [asdict(r) for runs in (*latency.values(), *loopback.values()) for r in runs]
        + [asdict(rate)],
    }
    met = {
        "latency_vs_best_fixed": figures["latency_vs_best_fixed"] >= TARGETS["latency_vs_best_fixed"],
        "rate_share": figures["rate_share"] >= TARGETS["rate_share"],
        "rate_429_share": figures["rate_429_share"] <= TARGETS["rate_429_share"],
        "loopback_vs_8": figures["loopback_vs_8"] >= TARGETS["loopback_vs_8"],
    }
    figures["met"] = met
    lines = [
        f"concurrency bench: {args.bots} bots x {args.repeat} round(s) with latency, "
        f"{args.rate_bots} rate limited, {args.loopback_bots} x {args.loopback_repeat} round(s) "
        f"on loopback; medians of ok requests/s",
        f"latency {args.latency_ms:g} ms: " + ", ".join(
            f"{k}: {v:,.0f}" for k, v in figures["latency"].items()),
        f"  auto / best fixed ({best}) = {figures['latency_vs_best_fixed']:.2f} (rounds "
        f"{', '.join(f'{x:.2f}' for x in vs_best)}); target >= 0.9: "
        f"{'met' if met['latency_vs_best_fixed'] else 'MISSED'}",
        f"rate limit {args.rate:g}/s: auto {rate.ok_per_second:,.1f} ok/s = "
        f"{figures['rate_share']:.0%} of the limit (target >= 85%: "
        f"{'met' if met['rate_share'] else 'MISSED'}); {rate.rate_limited} of {rate.requests} "
        f"requests answered 429 = {figures['rate_429_share']:.2%} (target <= 2%: "
        f"{'met' if met['rate_429_share'] else 'MISSED'})",
        "loopback: " + ", ".join(f"{k}: {v:,.0f}" for k, v in figures["loopback"].items()),
        f"  auto / 8 = {figures['loopback_vs_8']:.2f} (rounds "
        f"{', '.join(f'{x:.2f}' for x in vs_8)}); target >= 1.0: "
        f"{'met' if met['loopback_vs_8'] else 'MISSED'}",
    ]
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
