"""Anomalies: the detector botstats ships against two baselines, on a directory with planted events.

One run starts the embedded service with planted events (``--events``: the share of bots with
one to three spikes, drops, level shifts, outages or counter resets; as many others drift
slowly, which is not an event), archives it with ``botstats run`` (harvest + trends) into a
temp dir, reads the ``anomalies`` and ``bot_daily`` exports back, and the truth the service
serves on ``GET /_admin/events``. Three detectors are judged on the same days:

  shipped    the ``anomalies`` dataset botstats exported (one row per event);
  plain z    each day's change against the mean and sd of the 28 days of changes before;
  robust z   botstats' detector before the events: the robust z of the day's change
             (both baselines: bench/_anomaly_baselines.py; one row per bot, day and metric).

A planted event may be named on its days and the day after (a spike, a drop, a reset), its
first 4 days (a level shift: the days that tell it from a spike), or its silent days and the
two after (an outage: known when the bot is back). A row matches the events of its bot whose
days it touches (a shipped row covers its first to last day, or the 3 days that decide a
level shift). Measured:

  precision      rows that match an event / rows (and for the baselines, per bot-day); for
                 the shipped rows also by the kind each names
  recall         events matched by a row, per kind
  false alarms   rows on quiet bots (nothing planted, no drift) per 1,000 of their bot-days,
                 and rows on bots that only drift per 1,000 of theirs
  infinite       rows with an infinite score
  kind           shipped rows whose kind is the event's

Targets for the shipped detector: precision >= 0.8, recall >= 0.9 on spikes and on level
shifts, at most 1 false alarm per 1,000 quiet bot-days, no infinite score. Nothing is asserted
here: tests/test_bench.py holds a smaller run to them.

    python bench/anomalies.py                          # 2,000 bots x 90 days, 10% with events
    python bench/anomalies.py --bots 300 --days 60 --events 0.2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import polars as pl

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _anomaly_baselines import plain_z, robust_z  # noqa: E402

from pipeline.analytics.exports._datasets import load_dataset  # noqa: E402
from pipeline.operate._demo import demo_settings  # noqa: E402
from pipeline.operate._runner import run  # noqa: E402
from pipeline.service import ServiceConfig, serve_in_thread  # noqa: E402

END = datetime(2026, 11, 1, 12)
KINDS = ("spike", "drop", "level_shift", "outage", "counter_reset")
TARGETS = {"precision": 0.8, "recall_spike": 0.9, "recall_level_shift": 0.9,
           "false_alarms_per_1000": 1.0}
HOLD_DAYS = 3  # a shipped level shift is told from a spike by its first 4 days


def archive(directory: Path, bots: int, days: int, per_day: int, share: float,
            seed: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, list[str], float]:
    """(anomalies, bot_daily, truth, listed bot ids, seconds of the run) of one directory."""
    cfg = ServiceConfig(bots=bots, history_days=days, stats_per_day=per_day, seed=seed,
                        end=END, events=share)
    with serve_in_thread(cfg, host="127.0.0.1", port=0) as svc:
        settings = demo_settings(directory, svc.base_url, "")
        started = time.monotonic()
        report = run(settings)
        seconds = time.monotonic() - started
        if report.status != "complete":
            raise SystemExit(f"the run ended {report.status}: {report.message}")
        truth = httpx.get(f"{svc.base_url}/_admin/events", timeout=60).json()["events"]
        listed = svc.directory.bot_ids()
    return (load_dataset(settings, "anomalies"), load_dataset(settings, "bot_daily"),
            truth_frame(truth), listed, seconds)


def truth_frame(events: list[dict[str, Any]]) -> pl.DataFrame:
    """The planted events with the days a detector may name each on (``lo``..``hi``)."""
    frame = pl.DataFrame(events, schema={
        "bot_id": pl.String, "kind": pl.String, "first_day": pl.String, "last_day": pl.String,
        "days": pl.Int64, "users_factor": pl.Float64, "guilds_factor": pl.Float64,
        "cpu_points": pl.Float64, "anomaly": pl.Boolean})
    first = pl.col("first_day").str.to_date()
    last = pl.coalesce(pl.col("last_day").str.to_date(), first)
    kind = pl.col("kind")
    return frame.with_columns(
        first_day=first, last_day=last, lo=first,
        hi=pl.when(kind == "level_shift").then(first + timedelta(days=HOLD_DAYS))
        .when(kind == "outage").then(last + timedelta(days=2))
        .otherwise(last + timedelta(days=1)),
    ).with_row_index("event")


def judge(rows: pl.DataFrame, truth: pl.DataFrame, daily: pl.DataFrame,
          listed: list[str]) -> dict[str, Any]:
    """The figures of one detector's ``rows`` (bot_id, lo, hi[, kind, score])."""
    events = truth.filter(pl.col("anomaly"))
    drifting = set(truth.filter(pl.col("kind") == "drift")["bot_id"].to_list())
    planted = set(events["bot_id"].to_list())
    quiet = set(listed) - planted - drifting
    drift_only = drifting - planted
    per_bot = daily.group_by("bot_id").len()
    bot_days = {name: int(per_bot.filter(pl.col("bot_id").is_in(list(bots)))["len"].sum())
                for name, bots in (("quiet", quiet), ("drift", drift_only))}
    rows = rows.with_row_index("row")
    matched = rows.join(events, on="bot_id", how="inner", suffix="_event").filter(
        (pl.col("lo") <= pl.col("hi_event")) & (pl.col("hi") >= pl.col("lo_event")))
    hits = set(matched["row"].to_list())
    found = set(matched["event"].to_list())
    false = rows.filter(~pl.col("row").is_in(list(hits)))
    recall = {}
    for kind in KINDS:
        of_kind = events.filter(pl.col("kind") == kind)
        got = of_kind.filter(pl.col("event").is_in(list(found))).height
        recall[kind] = {"found": got, "planted": of_kind.height,
                        "recall": got / of_kind.height if of_kind.height else None}
    bot_day_rows = rows.select("bot_id", "lo").unique()
    bot_day_hits = matched.select("bot_id", "lo").unique().height
    out: dict[str, Any] = {
        "rows": rows.height,
        "precision": len(hits) / rows.height if rows.height else None,
        "bot_day_precision": bot_day_hits / bot_day_rows.height if bot_day_rows.height else None,
        "recall": recall,
        "false_alarms_per_1000": 1000 * false.filter(pl.col("bot_id").is_in(list(quiet))).height
        / max(1, bot_days["quiet"]),
        "drift_false_alarms_per_1000": 1000 * false.filter(
            pl.col("bot_id").is_in(list(drift_only))).height / max(1, bot_days["drift"]),
        "false_rows": false.height,
        "infinite": rows.filter(pl.col("score").is_infinite()).height,
        "quiet_bot_days": bot_days["quiet"], "drift_bot_days": bot_days["drift"],
    }
    if "kind" in rows.columns:
        pairs = matched.unique("row")
        out["kind_agrees"] = (pairs.filter(pl.col("kind") == pl.col("kind_event")).height
                              / pairs.height if pairs.height else None)
        out["precision_by_kind"] = {
            kind: {"rows": of_kind.height, "right": of_kind.filter(
                pl.col("row").is_in(list(hits))).height}
            for kind in KINDS if (of_kind := rows.filter(pl.col("kind") == kind)).height}
    return out


def shipped_rows(found: pl.DataFrame) -> pl.DataFrame:
    """An event row covers its first to last day (an outage: through the day it is dated),
    a level shift the days that decided it."""
    last = pl.coalesce("last_day", pl.col("day") + timedelta(days=HOLD_DAYS))
    return found.select("bot_id", "kind", "score",
                        lo=pl.min_horizontal("first_day", "day"),
                        hi=pl.max_horizontal(last, "day"))


def baseline_rows(found: pl.DataFrame) -> pl.DataFrame:
    return found.select("bot_id", "score", lo=pl.col("day"), hi=pl.col("day"))


def targets_met(shipped: dict[str, Any]) -> dict[str, bool]:
    recall = shipped["recall"]
    return {
        "precision": (shipped["precision"] or 0) >= TARGETS["precision"],
        "recall_spike": (recall["spike"]["recall"] or 0) >= TARGETS["recall_spike"],
        "recall_level_shift": (recall["level_shift"]["recall"] or 0)
        >= TARGETS["recall_level_shift"],
        "false_alarms": shipped["false_alarms_per_1000"] <= TARGETS["false_alarms_per_1000"],
        "no_infinite_score": shipped["infinite"] == 0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=2000)
    parser.add_argument("--days", type=int, default=90, help="days of history per bot")
    parser.add_argument("--stats-per-day", type=int, default=1)
    parser.add_argument("--events", type=float, default=0.1,
                        help="share of bots with planted events (as many drift)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="botstats-bench-anomalies-") as tmp:
        found, daily, truth, listed, run_seconds = archive(
            Path(tmp), args.bots, args.days, args.stats_per_day, args.events, args.seed)
    t0 = time.monotonic()
    plain = plain_z(daily)
    t1 = time.monotonic()
    robust = robust_z(daily)
    t2 = time.monotonic()
    methods = {
        "shipped": judge(shipped_rows(found), truth, daily, listed),
        "plain z": judge(baseline_rows(plain), truth, daily, listed),
        "robust z": judge(baseline_rows(robust), truth, daily, listed),
    }
    met = targets_met(methods["shipped"])
    planted = truth.filter(pl.col("anomaly")).group_by("kind").len().sort("kind").rows()
    figures = {
        "bots": args.bots, "days": args.days, "stats_per_day": args.stats_per_day,
        "events_share": args.events, "seed": args.seed, "bot_days": daily.height,
        "planted": dict(planted), "drifts": truth.filter(pl.col("kind") == "drift").height,
        "methods": methods, "targets": TARGETS, "met": met,
        "seconds": {"run (harvest + trends)": round(run_seconds, 1),
                    "plain z": round(t1 - t0, 2), "robust z": round(t2 - t1, 2)},
        "shipped_kinds": dict(found.group_by("kind").len().sort("kind").rows()),
    }

    quiet = methods["shipped"]["quiet_bot_days"]
    print(f"anomalies: {args.bots} bots x {args.days} days ({daily.height:,} bot-days, "
          f"{quiet:,} of quiet bots); planted "
          + ", ".join(f"{k} {n}" for k, n in planted) + f", drifts {figures['drifts']}")
    print(f"{'detector':<10} {'rows':>6} {'precision':>9} {'(bot-day)':>9} {'FA/1000':>8} "
          f"{'drift':>6} {'inf':>5}  " + "  ".join(f"{k:>13}" for k in KINDS))
    for name, m in methods.items():
        recall = "  ".join(f"{_share(m['recall'][k]['recall']):>13}" for k in KINDS)
        print(f"{name:<10} {m['rows']:>6} {_share(m['precision']):>9} "
              f"{_share(m['bot_day_precision']):>9} {m['false_alarms_per_1000']:>8.2f} "
              f"{m['drift_false_alarms_per_1000']:>6.2f} {m['infinite']:>5}  {recall}")
    agree = methods["shipped"].get("kind_agrees")
    print(f"(recall columns per kind; shipped rows of the right kind: {_share(agree)})")
    print("shipped precision by the kind a row names: " + ", ".join(
        f"{kind} {_share(p['right'] / p['rows'])} ({p['right']}/{p['rows']})"
        for kind, p in methods["shipped"]["precision_by_kind"].items()))
    print("targets: " + "; ".join(f"{k} {'yes' if v else 'NO'}" for k, v in met.items()))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0


def _share(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())
