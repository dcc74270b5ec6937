"""Forecast backtest: the shipped forecasts against the last value and linear drift, per curve family.

One run starts the embedded service (``--bots`` bots, ``--days`` days of history, one record a
day, a fixed clock so every run sees the same data: flat, declining and spiky bots, and growing
ones of three curve families: a steady pace, a curve that levels off (saturating) and growth
that turns into decline (turning)), archives it with ``botstats run`` (harvest + trends) into a
temp dir and reads ``bot_daily`` back from the exports. For every bot it holds back the last
``--holdout`` days, forecasts each of them from the days before, and scores every (bot,
metric, day) whose actual value is above 0:

  last        the last value before the holdout, flat;
  drift       the last value plus the average daily change over the whole training history
              (the line through its first and last value);
  shipped     ``analytics/build/_forecast.py``: per bot and metric, the model its own backtest chose;
  trend, damped, saturating
              each candidate alone (where a damped trend or a saturating curve does not fit a
              series, the trend stands in): what the choice gains.

MAPE is the mean of |actual - forecast| / actual in percent; coverage is the share of actual
values inside the method's 80% interval. Both are given overall and per curve family (the
service's own profile of each bot). Targets: the shipped MAPE below both baselines, and its
coverage between 75% and 85%. Nothing is asserted.

    python bench/forecast.py                      # 600 bots x 120 days, 30 held back
    python bench/forecast.py --bots 60 --json out.json
    python bench/forecast.py --seed 47            # the same on a directory never used to tune
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.analytics.build import _forecast as forecast  # noqa: E402
from pipeline.analytics.exports._datasets import load_dataset  # noqa: E402
from pipeline.operate._demo import demo_settings  # noqa: E402
from pipeline.operate._runner import run  # noqa: E402
from pipeline.service import ServiceConfig, serve_in_thread  # noqa: E402

END = datetime(2026, 11, 1)
TARGET_COVERAGE = (75.0, 85.0)
FAMILIES = ("growing", "saturating", "turning", "flat", "declining", "spiky")


def archive(directory: Path, bots: int, days: int,
            seed: int = 1) -> tuple[pl.DataFrame, dict[str, str]]:
    """bot_daily of the embedded service's data, and each bot's curve family (its shape)."""
    cfg = ServiceConfig(bots=bots, history_days=days, stats_per_day=1, end=END, seed=seed)
    with serve_in_thread(cfg, host="127.0.0.1", port=0) as svc:
        settings = demo_settings(directory, svc.base_url, "")
        report = run(settings)
        if report.status != "complete":
            raise SystemExit(f"the run ended {report.status}: {report.message}")
        # The service's own profile of each bot: the bench reads the ground truth it generated.
        shapes = {bot_id: svc.directory._make_profile(svc.directory._index_of(bot_id)).shape
                  for bot_id in svc.directory.bot_ids()}
    return load_dataset(settings, "bot_daily"), shapes


def split(daily: pl.DataFrame, holdout: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Training days, and the held-back (bot_id, metric, day, actual) rows."""
    cut = daily["day"].max() - timedelta(days=holdout)
    train = daily.filter(pl.col("day") <= cut)
    test = forecast.metric_series(daily.filter(pl.col("day") > cut).lazy()).rename(
        {"value": "actual"}).filter(pl.col("actual") > 0).collect()
    return train, test


def shipped(train: pl.DataFrame, test: pl.DataFrame,
            models: tuple[str, ...] = forecast.MODELS) -> pl.DataFrame:
    """The held-back days forecast by ``analytics/build/_forecast.py`` (a model chosen among ``models``;
    with one model, the trend where it does not fit), with the model of each row."""
    series = forecast.metric_series(train.lazy())
    model = forecast.fit(series, models=models)
    if "trend" not in models:
        model = model.filter(pl.col("level").is_not_nan())
        trend = forecast.fit(series, models=("trend",))
        model = pl.concat([model, trend.join(model, on=["bot_id", "metric"], how="anti")])
    wanted = test.lazy().join(model.select("bot_id", "metric", "as_of"), on=["bot_id", "metric"])
    wanted = wanted.with_columns(horizon_days=(pl.col("day") - pl.col("as_of")).dt.total_days())
    return forecast.predict(model, wanted.drop("as_of", "day")).select(
        "bot_id", "metric", "horizon_days", "actual", "forecast", "lo80", "hi80",
        "model").collect()


def ets(train: pl.DataFrame, test: pl.DataFrame) -> pl.DataFrame:
    """statsmodels' ETS (additive errors, damped additive trend) fitted to each series' log1p
    values, one model per bot and metric: the well-kept library alternative. Needs statsmodels
    (``pip install statsmodels``); days without a value are skipped, not filled."""
    import warnings

    import numpy as np
    import pandas as pd
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    series = forecast.metric_series(train.lazy()).sort("day").collect()
    wanted = test.partition_by("bot_id", "metric", as_dict=True)
    out = []
    for (bot, metric), rows in series.group_by("bot_id", "metric"):
        held = wanted.get((bot, metric))
        if held is None or rows.height < forecast.MIN_DAYS:
            continue
        as_of = rows["day"].max()
        h = (held["day"] - as_of).dt.total_days().to_numpy()
        y = np.log1p(np.clip(rows["value"].to_numpy(), 0, None))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = ETSModel(pd.Series(y), error="add", trend="add", damped_trend=True).fit(disp=False)
            frame = fit.get_prediction(start=len(y), end=len(y) + int(h.max()) - 1) \
                .summary_frame(alpha=0.2)
        at = h - 1
        out.append(pl.DataFrame({
            "bot_id": bot, "metric": metric, "horizon_days": h, "actual": held["actual"],
            "forecast": np.expm1(frame["mean"].to_numpy()[at]),
            "lo80": np.expm1(frame["pi_lower"].to_numpy()[at]),
            "hi80": np.expm1(frame["pi_upper"].to_numpy()[at]),
        }))
    return pl.concat(out)


def baselines(train: pl.DataFrame, test: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The two baselines, for the bots and metrics the shipped method forecasts too."""
    history = (
        forecast.metric_series(train.lazy()).sort("day")
        .group_by("bot_id", "metric")
        .agg(first=pl.col("value").first(), d0=pl.col("day").first(),
             last=pl.col("value").last(), as_of=pl.col("day").last(), n=pl.len())
        .filter(pl.col("n") >= forecast.MIN_DAYS)
        .collect()
    )
    rows = test.join(history, on=["bot_id", "metric"]).with_columns(
        horizon_days=(pl.col("day") - pl.col("as_of")).dt.total_days(),
        _span=(pl.col("as_of") - pl.col("d0")).dt.total_days(),
    )
    keep = ["bot_id", "metric", "horizon_days", "actual", "forecast"]
    return {
        "last": rows.with_columns(forecast=pl.col("last")).select(keep),
        "drift": rows.with_columns(
            forecast=pl.col("last") + pl.col("horizon_days") * (pl.col("last") - pl.col("first"))
            / pl.col("_span")).select(keep),
    }


def score(rows: pl.DataFrame, shapes: dict[str, str]) -> dict[str, Any]:
    """MAPE (and coverage when there is an interval), overall, per curve family and at +7/+30
    days; for the shipped method, the models chosen per family (series, not days)."""
    ape = ((pl.col("actual") - pl.col("forecast")).abs() / pl.col("actual") * 100).mean()
    measures = [ape.alias("mape"), pl.len().alias("n")]
    if "lo80" in rows.columns:
        inside = (pl.col("actual") >= pl.col("lo80")) & (pl.col("actual") <= pl.col("hi80"))
        measures.append((inside.mean() * 100).alias("coverage"))
    rows = rows.with_columns(shape=pl.col("bot_id").replace_strict(shapes, default="?"))
    out: dict[str, Any] = rows.select(measures).to_dicts()[0]
    out["by_shape"] = {r.pop("shape"): r for r in
                       rows.group_by("shape").agg(measures).sort("shape").to_dicts()}
    out["by_horizon"] = {
        str(h): rows.filter(pl.col("horizon_days") == h).select(measures).to_dicts()[0]
        for h in (7, 30)
    }
    if "model" in rows.columns:
        chosen = rows.unique(["bot_id", "metric"]).group_by("shape", "model").len()
        out["models"] = {shape: dict(chosen.filter(pl.col("shape") == shape)
                                     .select("model", "len").sort("model").rows())
                         for shape in sorted(set(chosen["shape"]))}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=600)
    parser.add_argument("--days", type=int, default=120, help="days of history per bot")
    parser.add_argument("--holdout", type=int, default=30, help="days held back per bot")
    parser.add_argument("--seed", type=int, default=1,
                        help="the service's seed (1: the one the models were tuned on)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--ets", action="store_true",
                        help="also score statsmodels' ETS (slow: one fit per bot and metric)")
    args = parser.parse_args(argv)

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="botstats-bench-forecast-") as tmp:
        daily, shapes = archive(Path(tmp), args.bots, args.days, args.seed)
    train, test = split(daily, args.holdout)
    results: dict[str, Any] = {}
    for name, rows in baselines(train, test).items():
        results[name] = score(rows, shapes)
    seconds: dict[str, float] = {}
    candidates: list[tuple[str, tuple[str, ...]]] = [("shipped", forecast.MODELS)]
    candidates += [(m, (m,)) for m in forecast.MODELS]
    for label, models in candidates:
        t0 = time.monotonic()
        rows = shipped(train, test, models)
        seconds[label] = time.monotonic() - t0
        results[label] = score(rows, shapes)
    if args.ets:
        t0 = time.monotonic()
        rows = ets(train, test)
        seconds["ets"] = time.monotonic() - t0
        results["ets"] = score(rows, shapes)
    best = results["shipped"]
    ok_mape = best["mape"] < min(results["last"]["mape"], results["drift"]["mape"])
    ok_cov = TARGET_COVERAGE[0] <= best["coverage"] <= TARGET_COVERAGE[1]
    families = [f for f in FAMILIES if f in best["by_shape"]]
    figures = {
        "bots": args.bots, "days": args.days, "holdout": args.holdout, "seed": args.seed,
        "window_days": forecast.WINDOW_DAYS, "shapes": pl.Series(list(shapes.values()))
        .value_counts().sort("count", descending=True).rows(), "methods": results,
        "targets": {"beats_baselines": ok_mape, "coverage_in_range": ok_cov},
        "seconds": round(time.monotonic() - started, 1),
        "fit_seconds": {k: round(v, 2) for k, v in seconds.items()},
    }

    print(f"forecast backtest: {args.bots} bots x {args.days} days, seed {args.seed}, last "
          f"{args.holdout} held back; {best['n']} (bot, metric, day) scored; bots per family: "
          + ", ".join(f"{s} {n}" for s, n in figures["shapes"]))
    print(f"{'method':<11} {'MAPE %':>7} {'80% cov':>8} {'+7d':>6} {'+30d':>6}  "
          + "  ".join(f"{f:>13}" for f in families))
    for name, r in results.items():
        cov = f"{r['coverage']:.1f}" if "coverage" in r else "-"
        per = "  ".join(
            f"{r['by_shape'][f]['mape']:>6.2f}" + (f" /{r['by_shape'][f]['coverage']:>4.0f}%"
                                                   if "coverage" in r else "       ")
            for f in families)
        print(f"{name:<11} {r['mape']:>7.2f} {cov:>8} {r['by_horizon']['7']['mape']:>6.2f} "
              f"{r['by_horizon']['30']['mape']:>6.2f}  {per}")
    print("(per family: MAPE % / 80% coverage)")
    print("models chosen (series): " + "; ".join(
        f"{shape} " + ", ".join(f"{m} {n}" for m, n in chosen.items())
        for shape, chosen in best["models"].items()))
    print("fit + forecast seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    print(f"targets: MAPE below both baselines: {'yes' if ok_mape else 'NO'}; "
          f"80% interval coverage within {TARGET_COVERAGE[0]:.0f}-{TARGET_COVERAGE[1]:.0f}%: "
          f"{'yes' if ok_cov else 'NO'} ({best['coverage']:.1f}%)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
