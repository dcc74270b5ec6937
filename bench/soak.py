"""Soak: `botstats schedule` firing every few seconds against a faulty, growing service.

The embedded service runs in this process with random faults (5xx, latency, malformed records,
bots repeated in the listing, gzip bodies cut short); the scheduler daemon runs in its own
process, harvesting on a 6-field crontab. After each harvest the directory grows and its clock
moves on; the last two runs see no change, so at the end the archive must equal the service's
data: every valid record once, every malformed one in `rejects` once. The daemon's resident
memory and open files are read from /proc after run 5 (or the first measured run) and after
the last one.

    .venv/bin/python bench/soak.py                      # 50 runs, a harvest every 3 s
    .venv/bin/python bench/soak.py --runs 4 --every 2   # a smoke run (the test suite's)
    .venv/bin/python bench/soak.py --json out.json      # also write the figures

Exit status 1 when the archive differs from the service, or (50 runs or more) when the daemon's
RSS or open files after the last run exceed 1.2x those after run 5.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline.archive import _store as store
from pipeline.core._loading import load_settings
from pipeline.service import Faults, ServiceConfig, serve_in_thread

REPO = Path(__file__).resolve().parent.parent
FAULTS = Faults(error_rate=0.03, latency_ms=1, latency_jitter_ms=4, malformed_rate=0.02,
                duplicate_every=11, gzip_cut_rate=0.05, body_fault_times=1)
MAX_GROWTH = 1.2  # of RSS and open files from run 5 to the last


def daemon_figures(pid: int) -> dict[str, float]:
    """Resident memory (MB) and open file descriptors of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    return {"rss_mb": round(rss / 1024, 1), "open_files": len(os.listdir(f"/proc/{pid}/fd"))}


def harvest_results(log_file: Path) -> list[str]:
    """The result line of every harvest the daemon finished, in order."""
    if not log_file.exists():
        return []
    results = []
    for line in log_file.read_text().splitlines():
        event = json.loads(line) if line.strip() else {}
        if event.get("event") == "executed" and event.get("job") == "harvest":
            results.append(str(event.get("result", "")))
    return results


def compare(db: Path, directory: Any) -> dict[str, Any]:
    """The archive against the service's ground truth."""
    expected = {(b, r["id"]) for b in directory.bot_ids() for r in directory.valid_stats(b)}
    malformed = sum(len(directory.malformed_stats(b)) for b in directory.bot_ids())
    settings = load_settings(db.with_name("config.toml"), env={}, overrides={"store.db": str(db)})
    with store.reader(settings) as con:
        archived = con.execute("SELECT bot_id, stat_id FROM bot_stats").fetchall()
        rejects = con.execute("SELECT count(*) FROM rejects WHERE endpoint LIKE '%/stats'"
                              ).fetchall()[0][0]
        bots = con.execute("SELECT count(*) FROM bots WHERE removed_at IS NULL").fetchall()[0][0]
        runs = dict(con.execute("SELECT status, count(*) FROM harvest_runs GROUP BY ALL"
                                ).fetchall())
    return {
        "records_expected": len(expected), "records_archived": len(archived),
        "missing": len(expected - set(archived)), "twice": len(archived) - len(set(archived)),
        "unexpected": len(set(archived) - expected),
        "malformed_expected": malformed, "rejects": rejects,
        "bots_listed": len(directory), "bots_live_archived": bots, "runs_by_status": runs,
        "equal": expected == set(archived) and len(archived) == len(expected)
                 and rejects == malformed and bots == len(directory),
    }


def soak(runs: int, every: int, bots: int, grow: int, workdir: Path) -> dict[str, Any]:
    # An hour per interval, the clock starting far enough back that the runs never move it
    # past now (records ahead of now are refused beyond [fields].max_future_skew).
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=runs + 2)
    config = ServiceConfig(bots=bots, history_days=3, stats_per_day=24, max_page_size=25,
                           end=end, faults=FAULTS)
    db, log_file = workdir / "archive.ducklake", workdir / "schedule.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOTSTATS_")}
    env.update(BOTSTATS_RETRY_ATTEMPTS="10", BOTSTATS_RETRY_BACKOFF_BASE="0.02",
               BOTSTATS_RETRY_BACKOFF_MAX="0.2", BOTSTATS_SERVICE_PAGE_SIZE="25")
    (workdir / "config.toml").write_text("")
    started = time.monotonic()
    measured: dict[int, dict[str, float]] = {}
    first_mark = min(5, max(1, runs // 2))
    with serve_in_thread(config) as svc:
        command = [sys.executable, "-m", "pipeline", "--config", str(workdir / "config.toml"),
                   "--log-format", "json", "--log-file", str(log_file), "--db", str(db),
                   "--base-url", svc.base_url, "schedule", "--harvest-cron",
                   f"*/{every} * * * * *", "--trends-cron", ""]
        # Its stderr goes to a file: a pipe nobody reads fills up and blocks the daemon.
        stderr = (workdir / "stderr.txt").open("w")
        proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                                stderr=stderr)
        try:
            done = 0
            while done < runs:
                if proc.poll() is not None:
                    raise SystemExit(f"the scheduler exited early ({proc.returncode}): "
                                     f"{(workdir / 'stderr.txt').read_text()[-3000:]}")
                finished = len(harvest_results(log_file))
                if finished == done:
                    time.sleep(0.05)
                    continue
                done = finished
                if done in (first_mark, runs):
                    measured[done] = daemon_figures(proc.pid)
                if done <= runs - 2:  # the last two runs see a directory that holds still
                    svc.directory.grow(grow)
                    svc.directory.advance(1)
                print(f"run {done}/{runs}: {harvest_results(log_file)[-1]}", file=sys.stderr)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            stderr.close()
        results = harvest_results(log_file)
        figures = compare(db, svc.directory)
    first, last = measured.get(first_mark, {}), measured.get(runs, {})
    growth = {k: round(last[k] / first[k], 3) for k in first if first[k]} if first and last else {}
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"), "runs": runs, "every_s": every,
        "bots_start": bots, "grow_per_run": grow, "faults": FAULTS.active(),
        "seconds": round(time.monotonic() - started, 1), "last_result": results[-1],
        "results": results,
        "daemon": {f"after_run_{first_mark}": first, f"after_run_{runs}": last,
                   "growth": growth},
        "archive": figures,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--every", type=int, default=3, help="seconds between harvests")
    parser.add_argument("--bots", type=int, default=60, help="bots at start")
    parser.add_argument("--grow", type=int, default=2, help="bots added after each run")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="botstats-soak-") as tmp:
        report = soak(args.runs, args.every, args.bots, args.grow, Path(tmp))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    growth = report["daemon"]["growth"]
    leak = args.runs >= 50 and any(v > MAX_GROWTH for v in growth.values())
    return 0 if report["archive"]["equal"] and not leak else 1


if __name__ == "__main__":
    sys.exit(main())
