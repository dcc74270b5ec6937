"""Pacing against a rate limit, for each family of headers a service tells its limit with.

The embedded service, in its own process, limits every request with a token bucket of a small
burst (``--rate-limit R --rate-burst B``) and tells the limit in one family of headers
(``--rate-limit-headers``: Retry-After seconds or HTTP-date, X-RateLimit-Reset-After,
X-RateLimit-Reset as a Unix time or seconds, RateLimit-Limit/-Remaining/-Reset, RateLimit and
RateLimit-Policy, or a bare 429). For each family, `harvest --full` (`[service].concurrency =
"auto"`, botstats not told the limit) archives the whole directory into a fresh archive in this
process. Measured: answered requests that were not 429 per second, over the allowed rate, and
the share of requests the service answered 429 (its own count, from /_admin/health).
Targets (issue "Any service, told the truth"): at least 85% of the allowed rate, at most 2% of
requests answered 429, in every family.

    python bench/pacing.py                          # 3,000 bots, 100/s, a burst of 5: ~5 minutes
    python bench/pacing.py --bots 200 --rate 50 --families ratelimit,retry-after   # seconds

Figures are dated in bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _service import Service  # noqa: E402  (bench/_service.py: the service in its own process)

from pipeline.core._loading import load_settings  # noqa: E402
from pipeline.harvester._report import HarvestOptions  # noqa: E402
from pipeline.harvester._run import harvest  # noqa: E402

FAMILIES = ("retry-after", "retry-after-date", "x-reset-after", "x-reset-epoch",
            "x-reset-delta", "ratelimit", "ratelimit-policy", "none")
TARGETS = {"rate_share": 0.85, "limited_share": 0.02}


@dataclass
class Run:
    family: str
    status: str
    seconds: float
    requests: int
    rate_limited: int
    rate: float

    @property
    def ok_per_second(self) -> float:
        return (self.requests - self.rate_limited) / self.seconds if self.seconds else 0.0

    @property
    def rate_share(self) -> float:
        return self.ok_per_second / self.rate

    @property
    def limited_share(self) -> float:
        return self.rate_limited / max(self.requests, 1)

    @property
    def met(self) -> bool:
        return (self.status == "complete" and self.rate_share >= TARGETS["rate_share"]
                and self.limited_share <= TARGETS["limited_share"])


def one_family(family: str, args: argparse.Namespace, work: Path) -> Run:
    svc = Service(["--bots", str(args.bots), "--history-days", "2", "--stats-per-day", "1",
                   "--end", "2026-11-01T00:00:00Z", "--max-page-size", "100",
                   "--rate-limit", str(args.rate), "--rate-burst", str(args.burst),
                   "--rate-limit-headers", family], work / f"service-{family}.log")
    try:
        config = work / "empty.toml"
        config.touch()
        db = work / f"{family}.ducklake"
        settings = load_settings(config, env={}, overrides={
            "service.base_url": svc.base_url, "store.db": str(db),
            "service.concurrency": args.concurrency, "retry.attempts": 10})
        limited = svc.health()["rate_limited"]
        report = harvest(settings, HarvestOptions(full=True))
        limited = svc.health()["rate_limited"] - limited
    finally:
        svc.close()
    for path in work.glob(db.name + "*"):  # the catalog, its data folder, the lock
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return Run(family, report.status, report.seconds, report.requests, limited, args.rate)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bots", type=int, default=3000, help="bots (2 records each; default 3000)")
    p.add_argument("--rate", type=float, default=100.0, help="the limit, requests/s (default 100)")
    p.add_argument("--burst", type=float, default=5.0, help="the bucket's burst (default 5)")
    p.add_argument("--families", default=",".join(FAMILIES),
                   help=f"comma-separated, from {', '.join(FAMILIES)}")
    p.add_argument("--concurrency", default="auto", help="[service].concurrency (default auto)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    args = p.parse_args(argv)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise SystemExit(f"unknown famil(ies) {unknown}; choose from {', '.join(FAMILIES)}")
    logging.getLogger("botstats").setLevel(logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="botstats-bench-pacing-"))
    runs: list[Run] = []
    try:
        for family in families:
            runs.append(one_family(family, args, work))
            r = runs[-1]
            print(f"  {family}: {r.ok_per_second:,.1f} ok/s, {r.rate_limited} of {r.requests} "
                  f"429, {r.seconds:.1f} s, {r.status}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [f"pacing bench: {args.bots:,} bots, a token bucket of {args.rate:g}/s with a burst "
             f"of {args.burst:g}, concurrency {args.concurrency}; {time.strftime('%Y-%m-%d')}",
             "", f"{'family':<18} {'ok/s':>7} {'of rate':>8} {'429':>6} {'requests':>9} "
             f"{'429 share':>9} {'seconds':>8}  target (>= 85%, <= 2%)"]
    for r in runs:
        lines.append(f"{r.family:<18} {r.ok_per_second:>7.1f} {r.rate_share:>8.1%} "
                     f"{r.rate_limited:>6} {r.requests:>9,} {r.limited_share:>9.2%} "
                     f"{r.seconds:>8.1f}  {'met' if r.met else 'MISSED'}")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"rate": args.rate, "burst": args.burst, "bots": args.bots, "targets": TARGETS,
             "runs": [{**asdict(r), "ok_per_second": r.ok_per_second, "rate_share": r.rate_share,
                       "limited_share": r.limited_share, "met": r.met} for r in runs]},
            indent=2))


if __name__ == "__main__":
    main()
