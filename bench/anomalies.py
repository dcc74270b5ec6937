"""Anomalies: the detector botstats ships against two baselines, on a directory with planted events.

One run starts the embedded service with planted events (``--events``: the share of bots with
one to three spikes, drops, level shifts, outages or counter resets, from a bot's second day
on, a share of them near the detector's floors; as many others drift slowly, which is not an
event; and every bot's own routine spikes and restarts go on beside them), archives it with
``botstats run`` (harvest + trends) into a temp dir, reads the ``anomalies`` and ``bot_daily``
exports back, and the truth the service serves on ``GET /_admin/events``. Three detectors are
judged on the same days:

  shipped    the ``anomalies`` dataset botstats exported (one row per event);
  plain z    each day's change against the mean and sd of the 28 days of changes before;
  robust z   botstats' detector before the events: the robust z of the day's change
             (both baselines: bench/_anomaly_baselines.py; one row per bot, day and metric,
             with the shipped detector's floors and a kind).

A planted event may be named on its days and the day after (a spike, a drop, a reset), its
first 4 days (a level shift: the days that tell it from a spike), or its silent days and the
two after (an outage: known when the bot is back). A row touches the events of its bot whose
days it covers (a shipped row covers its first to last day, or the 3 days that decide a level
shift), and is

  right          when it touches a planted event and names its kind;
  routine        else, when it touches a routine spike or restart of its bot and names it
                 (``spike``, ``counter_reset``): what the data did, but nothing planted (a
                 planted counter reset within 28 days after a routine restart is one more
                 routine restart: nothing in the data tells them apart);
  wrong          otherwise.

Measured:

  precision      right / (right + wrong); for the shipped rows also by the kind each names
  recall         planted events with a right row: overall, per kind, near the floor, and in
                 the first 21 days of a bot's history (its first day with stats)
  false alarms   wrong rows on quiet bots (nothing planted, no drift; their routine days go
                 on) per 1,000 of their bot-days, and on bots that only drift per 1,000 of theirs
  infinite       rows with an infinite score

Targets for the shipped detector: precision >= 0.9, recall >= 0.9 overall and >= 0.8 near the
floor, recall on spikes in the first 21 days of a bot's history >= 0.8, at most 0.5 false
alarms per 1,000 quiet bot-days, no infinite score. Nothing is asserted here: tests/test_bench.py
holds a smaller run to them, on the seed that was never used while tuning the detector.

    python bench/anomalies.py                          # 2,000 bots x 90 days, 10% with events
    python bench/anomalies.py --bots 300 --days 60 --events 0.2 --seed 83 --json out.json
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
# What a row names when it describes a bot's routine day rather than a planted event.
ROUTINE = {"routine_spike": "spike", "routine_restart": "counter_reset"}
TARGETS = {"precision": 0.9, "recall": 0.9, "recall_near_floor": 0.8, "recall_young_spike": 0.8,
           "false_alarms_per_1000": 0.5}
HOLD_DAYS = 3  # a shipped level shift is told from a spike by its first 4 days
YOUNG_DAYS = 21  # "a bot's first weeks": events this many days or fewer after its first day
WINDOW_DAYS = 28  # [trends].anomaly_window: a restart within it makes the next one routine
# The seeds the detector was tuned on (1 and 29; 29 and then 47 were held out first, and
# their figures seen), and the one it never saw while tuning (the smoke test's).
TUNING_SEED = 1
HELD_OUT_SEED = 83


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
    """The planted events, drifts and routine days with the days a detector may name each on
    (``lo``..``hi``)."""
    frame = pl.DataFrame(events, schema={
        "bot_id": pl.String, "kind": pl.String, "first_day": pl.String, "last_day": pl.String,
        "days": pl.Int64, "users_factor": pl.Float64, "guilds_factor": pl.Float64,
        "cpu_points": pl.Float64, "anomaly": pl.Boolean, "near_floor": pl.Boolean})
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
    """The figures of one detector's ``rows`` (bot_id, kind, lo, hi, score)."""
    routine = truth.filter(pl.col("kind").is_in(list(ROUTINE))).with_columns(
        names=pl.col("kind").replace_strict(ROUTINE))
    # A planted restart of a bot that restarted routinely in the window before is one more
    # routine restart: nothing tells it apart, so it is judged as routine.
    restarts = routine.filter(pl.col("kind") == "routine_restart").select(
        "bot_id", restart=pl.col("first_day"))
    usual = truth.filter(pl.col("kind") == "counter_reset").join(
        restarts, on="bot_id").filter(pl.col("restart").is_between(
            pl.col("first_day") - timedelta(days=WINDOW_DAYS), pl.col("first_day"),
            closed="left")).select("event").unique()
    routine = pl.concat([routine, truth.join(usual, on="event").with_columns(
        names=pl.lit("counter_reset"))])
    events = truth.filter(pl.col("anomaly") & ~pl.col("event").is_in(usual["event"].implode())
                          ).join(daily.group_by("bot_id").agg(born=pl.col("day").min()),
                                 on="bot_id", how="left"
    ).with_columns(young=(pl.col("first_day") - pl.col("born")).dt.total_days() <= YOUNG_DAYS)
    drifting = set(truth.filter(pl.col("kind") == "drift")["bot_id"].to_list())
    planted = set(events["bot_id"].to_list())
    quiet = set(listed) - planted - drifting
    drift_only = drifting - planted
    per_bot = daily.group_by("bot_id").len()
    bot_days = {name: int(per_bot.filter(pl.col("bot_id").is_in(list(bots)))["len"].sum())
                for name, bots in (("quiet", quiet), ("drift", drift_only))}
    rows = rows.with_row_index("row")
    touching = rows.join(events, on="bot_id", how="inner", suffix="_event").filter(
        (pl.col("lo") <= pl.col("hi_event")) & (pl.col("hi") >= pl.col("lo_event")))
    matched = touching.filter(pl.col("kind") == pl.col("kind_event"))
    right = set(matched["row"].to_list())
    on_routine = rows.join(routine, on="bot_id", how="inner", suffix="_event").filter(
        (pl.col("lo") <= pl.col("hi_event")) & (pl.col("hi") >= pl.col("lo_event"))
        & (pl.col("kind") == pl.col("names")))
    routine_rows = set(on_routine["row"].to_list()) - right
    wrong = rows.filter(~pl.col("row").is_in(list(right | routine_rows)))
    found = set(matched["event"].to_list())

    def recall(of: pl.DataFrame) -> dict[str, Any]:
        got = of.filter(pl.col("event").is_in(list(found))).height
        return {"found": got, "planted": of.height,
                "recall": got / of.height if of.height else None}

    judged = len(right) + wrong.height
    out: dict[str, Any] = {
        "rows": rows.height, "right": len(right), "routine": len(routine_rows),
        "wrong": wrong.height,
        "precision": len(right) / judged if judged else None,
        "recall_all": recall(events),
        "recall": {kind: recall(events.filter(pl.col("kind") == kind)) for kind in KINDS},
        "recall_near_floor": recall(events.filter(pl.col("near_floor"))),
        "recall_near_floor_by_kind": {
            kind: recall(of) for kind in KINDS
            if (of := events.filter(pl.col("near_floor") & (pl.col("kind") == kind))).height},
        "recall_young": recall(events.filter(pl.col("young"))),
        "recall_young_spike": recall(events.filter(pl.col("young") & (pl.col("kind") == "spike"))),
        "false_alarms_per_1000": 1000 * wrong.filter(pl.col("bot_id").is_in(list(quiet))).height
        / max(1, bot_days["quiet"]),
        "drift_false_alarms_per_1000": 1000 * wrong.filter(
            pl.col("bot_id").is_in(list(drift_only))).height / max(1, bot_days["drift"]),
        "infinite": rows.filter(pl.col("score").is_infinite()).height,
        "quiet_bot_days": bot_days["quiet"], "drift_bot_days": bot_days["drift"],
        "missed": events.filter(~pl.col("event").is_in(list(found))).select(
            "bot_id", "kind", "first_day", "users_factor", "near_floor", "young").to_dicts(),
    }
    out["precision_by_kind"] = {
        kind: {"rows": of_kind.height - of_kind.filter(pl.col("row").is_in(list(routine_rows))).height,
               "right": of_kind.filter(pl.col("row").is_in(list(right))).height}
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
    """A baseline's flagged day covers that day, or a level shift's 3 days after it."""
    last = pl.when(pl.col("kind") == "level_shift").then(
        pl.col("day") + timedelta(days=HOLD_DAYS)).otherwise(pl.col("day"))
    return found.select("bot_id", "kind", "score", lo=pl.col("day"), hi=last)


def targets_met(shipped: dict[str, Any]) -> dict[str, bool]:
    def at_least(figure: dict[str, Any], target: float) -> bool:
        return (figure["recall"] or 0) >= target

    return {
        "precision": (shipped["precision"] or 0) >= TARGETS["precision"],
        "recall": at_least(shipped["recall_all"], TARGETS["recall"]),
        "recall_near_floor": at_least(shipped["recall_near_floor"], TARGETS["recall_near_floor"]),
        "recall_young_spike": at_least(shipped["recall_young_spike"],
                                       TARGETS["recall_young_spike"]),
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
    parser.add_argument("--seed", type=int, default=TUNING_SEED,
                        help=f"the service's seed ({TUNING_SEED}: the one the detector was tuned "
                             f"on; {HELD_OUT_SEED}: the one it was not)")
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
    near = truth.filter(pl.col("anomaly") & pl.col("near_floor")).height
    routine = dict(truth.filter(pl.col("kind").is_in(list(ROUTINE))).group_by("kind").len()
                   .sort("kind").rows())
    figures = {
        "bots": args.bots, "days": args.days, "stats_per_day": args.stats_per_day,
        "events_share": args.events, "seed": args.seed, "bot_days": daily.height,
        "planted": dict(planted), "near_floor": near, "routine": routine,
        "drifts": truth.filter(pl.col("kind") == "drift").height,
        "methods": methods, "targets": TARGETS, "met": met,
        "seconds": {"run (harvest + trends)": round(run_seconds, 1),
                    "plain z": round(t1 - t0, 2), "robust z": round(t2 - t1, 2)},
        "shipped_kinds": dict(found.group_by("kind").len().sort("kind").rows()),
    }

    quiet = methods["shipped"]["quiet_bot_days"]
    print(f"anomalies: {args.bots} bots x {args.days} days, seed {args.seed} ({daily.height:,} "
          f"bot-days, {quiet:,} of quiet bots); planted "
          + ", ".join(f"{k} {n}" for k, n in planted)
          + f" ({near} near the floor), drifts {figures['drifts']}; routine: "
          + ", ".join(f"{k} {n}" for k, n in routine.items()))
    print(f"{'detector':<10} {'rows':>6} {'routine':>7} {'precision':>9} {'FA/1000':>8} "
          f"{'drift':>6} {'inf':>4} {'recall':>6} {'near':>6} {'young':>6} {'young sp':>8}  "
          + "  ".join(f"{k:>13}" for k in KINDS))
    for name, m in methods.items():
        recall = "  ".join(f"{_share(m['recall'][k]['recall']):>13}" for k in KINDS)
        print(f"{name:<10} {m['rows']:>6} {m['routine']:>7} {_share(m['precision']):>9} "
              f"{m['false_alarms_per_1000']:>8.2f} {m['drift_false_alarms_per_1000']:>6.2f} "
              f"{m['infinite']:>4} {_share(m['recall_all']['recall']):>6} "
              f"{_share(m['recall_near_floor']['recall']):>6} "
              f"{_share(m['recall_young']['recall']):>6} "
              f"{_share(m['recall_young_spike']['recall']):>8}  {recall}")
    shipped = methods["shipped"]
    print("(recall: right kind; routine: rows naming a routine spike or restart, not judged)")
    print("shipped precision by the kind a row names: " + ", ".join(
        f"{kind} {_share(p['right'] / p['rows']) if p['rows'] else '-'} ({p['right']}/{p['rows']})"
        for kind, p in shipped["precision_by_kind"].items()))
    print("shipped recall near the floor by kind: " + ", ".join(
        f"{kind} {r['found']}/{r['planted']}"
        for kind, r in shipped["recall_near_floor_by_kind"].items()))
    print("targets: " + "; ".join(f"{k} {'yes' if v else 'NO'}" for k, v in met.items()))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0


def _share(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())
