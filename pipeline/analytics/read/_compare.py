"""Bots read back from the trend exports: side by side (``botstats compare``) and when one
reaches a target (``botstats forecast``).

Everything here reads the exported datasets (:func:`pipeline.scan_dataset`), never the
archive: what it shows is what the notebooks, the report and SQL see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from ...core import ExportError, Settings
from ..build import _forecast as forecast
from ..exports._datasets import scan_dataset

MAX_BOTS = 4
FORECAST_DAYS = 30  # the horizon compare shows

# (label, column, format) of the comparison table, in the order shown.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("day", "day", "s"),
    ("guilds", "guilds", ",d"),
    ("guilds 7d", "guilds_change_7d", "+,d"),
    ("guilds 7d %", "guilds_pct_7d", "+.2f"),
    ("guilds 30d", "guilds_change_30d", "+,d"),
    ("guilds 30d %", "guilds_pct_30d", "+.2f"),
    ("guilds growth %/day (30d)", "guilds_cdgr_30d", "+.3f"),
    ("guilds rank", "guilds_rank", "d"),
    ("guilds rank change 7d", "guilds_rank_change_7d", "+d"),
    ("guilds in 30d", "guilds_forecast_30d", ",.0f"),
    ("guilds in 30d, 80%", "guilds_range_30d", "s"),
    ("guilds model", "guilds_model", "s"),
    ("users", "users", ",d"),
    ("users 7d", "users_change_7d", "+,d"),
    ("users 7d %", "users_pct_7d", "+.2f"),
    ("users 30d", "users_change_30d", "+,d"),
    ("users 30d %", "users_pct_30d", "+.2f"),
    ("users growth %/day (30d)", "users_cdgr_30d", "+.3f"),
    ("users rank", "users_rank", "d"),
    ("users rank change 7d", "users_rank_change_7d", "+d"),
    ("users in 30d", "users_forecast_30d", ",.0f"),
    ("users in 30d, 80%", "users_range_30d", "s"),
    ("users model", "users_model", "s"),
)


def _latest(frame: pl.LazyFrame, bot_ids: list[str]) -> pl.LazyFrame:
    """Each bot's row of its last day in a per-bot daily dataset."""
    return (frame.filter(pl.col("bot_id").is_in(bot_ids))
            .filter(pl.col("day") == pl.col("day").max().over("bot_id")))


def comparison_frame(growth: pl.LazyFrame, ranks: pl.LazyFrame, outlook: pl.LazyFrame,
                     bot_ids: list[str]) -> pl.DataFrame:
    """One row per bot (in ``bot_ids`` order) from ``bot_growth``, ``bot_ranks`` and
    ``bot_forecast``: its last day's sizes, 7/30-day changes, 30-day compound daily growth,
    ranks and their 7-day change, and the 30-day forecast with its 80% interval."""
    sizes = _latest(growth, bot_ids).select(
        "bot_id", "day", *[f"{m}{s}" for m in forecast.METRICS
                           for s in ("", "_change_7d", "_pct_7d", "_change_30d", "_pct_30d",
                                     "_cdgr_30d")])
    ranked = _latest(ranks, bot_ids).select(
        "bot_id", *[f"{m}_rank{s}" for m in forecast.METRICS for s in ("", "_change_7d")])
    ahead = (
        forecast.latest(outlook.filter(pl.col("bot_id").is_in(bot_ids)))
        .filter(pl.col("bot_id").is_in(bot_ids)
                       & (pl.col("horizon_days") == FORECAST_DAYS))
        .with_columns(model=pl.col("model").replace(forecast.MODEL_WORDS))
        .collect()
        .pivot("metric", index="bot_id", values=["forecast", "lo80", "hi80", "model"])
    )
    names = {"forecast": "{m}_forecast_30d", "lo80": "_{m}_lo80", "hi80": "_{m}_hi80",
             "model": "{m}_model"}
    wide = {f"{v}_{m}": name.format(m=m) for v, name in names.items() for m in forecast.METRICS}
    ahead = ahead.rename({k: v for k, v in wide.items() if k in ahead.columns})
    for name in wide.values():
        if name not in ahead.columns:
            dtype = pl.String if name.endswith("_model") else pl.Float64
            ahead = ahead.with_columns(pl.lit(None, dtype).alias(name))
    order = pl.DataFrame({"bot_id": bot_ids}).with_row_index("_order")
    return (
        order.lazy().join(sizes, on="bot_id", how="left")
        .join(ranked, on="bot_id", how="left")
        .join(ahead.lazy(), on="bot_id", how="left")
        .sort("_order")
        .drop("_order")
        .collect()
    )


@dataclass(frozen=True)
class Comparison:
    """Up to four bots side by side; ``rows`` has one dict per bot (see :data:`ROWS`)."""

    rows: list[dict[str, Any]]

    def table(self, names: Mapping[str, str] | None = None) -> str:
        """Measures down, bots across: a plain aligned table for the terminal. With ``names``
        (bot_id -> name), a line of the bots' names heads it, above their ids."""
        header = ["", *[str(r["bot_id"]) for r in self.rows]]
        named = ["", *[(names or {}).get(str(r["bot_id"])) or "" for r in self.rows]]
        lines = [[label, *[format_cell(r, column, fmt) for r in self.rows]] for label, column, fmt in ROWS]
        heads = [named, header] if names else [header]
        widths = [max(len(line[i]) for line in [*heads, *lines]) for i in range(len(header))]

        def render(cells: list[str]) -> str:
            return "  ".join([cells[0].ljust(widths[0]),
                              *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

        return "\n".join([*map(render, heads), "  ".join("-" * w for w in widths),
                          *map(render, lines)])

    def as_dict(self) -> dict[str, Any]:
        keep = [column for _, column, _ in ROWS if not column.endswith("_range_30d")]
        out = []
        for r in self.rows:
            item = {"bot_id": r["bot_id"], **{c: r.get(c) for c in keep}}
            for m in forecast.METRICS:
                item[f"{m}_lo80_30d"], item[f"{m}_hi80_30d"] = r.get(f"_{m}_lo80"), r.get(f"_{m}_hi80")
            item["day"] = str(r["day"]) if r.get("day") else None
            out.append(item)
        return {"forecast_days": FORECAST_DAYS, "bots": out}


def format_cell(row: dict[str, Any], column: str, fmt: str) -> str:
    if column.endswith("_range_30d"):
        m = column.split("_")[0]
        lo, hi = row.get(f"_{m}_lo80"), row.get(f"_{m}_hi80")
        return "-" if lo is None or hi is None else f"{lo:,.0f}..{hi:,.0f}"
    value = row.get(column)
    if value is None:
        return "-"
    if fmt == "s":
        return str(value)
    return format(int(value) if fmt.endswith("d") else value, fmt)


def check_bots(bot_ids: list[str], known: pl.LazyFrame, where: str = "the exports") -> None:
    """Refuse bot ids with no row in ``known`` (a trend dataset), naming them and the fix."""
    found = set(known.filter(pl.col("bot_id").is_in(bot_ids)).select("bot_id").unique()
                .collect()["bot_id"].to_list())
    missing = [b for b in bot_ids if b not in found]
    if missing:
        raise ExportError(
            f"no trend data for bot {', '.join(missing)} in {where}. Check the id (`botstats "
            f"sql \"SELECT DISTINCT bot_id FROM trend_bot_daily\"` lists them) or run `botstats "
            f"run` to harvest and rebuild the trends.")


def compare(settings: Settings, bot_ids: list[str]) -> Comparison:
    """Two to four bots side by side, from the last export."""
    if not 1 <= len(bot_ids) <= MAX_BOTS:
        raise ExportError(f"compare takes 1 to {MAX_BOTS} bots, got {len(bot_ids)}.")
    growth = scan_dataset(settings, "bot_growth")
    check_bots(bot_ids, growth)
    frame = comparison_frame(growth, scan_dataset(settings, "bot_ranks"),
                             scan_dataset(settings, "bot_forecast"), bot_ids)
    return Comparison(frame.to_dicts())


def forecast_reach(settings: Settings, bot_id: str, metric: str, target: float) -> forecast.Reach:
    """When ``bot_id``'s ``metric`` reaches ``target``, from its model in ``bot_forecast``."""
    if target <= 0:
        raise ExportError(f"the target must be above 0, got {target:g}.")
    outlook = scan_dataset(settings, "bot_forecast")
    mine = outlook.filter((pl.col("bot_id") == bot_id) & (pl.col("metric") == metric))
    model = forecast.latest(mine).head(1).collect()
    if model.height == 0:
        daily = scan_dataset(settings, "bot_daily")
        check_bots([bot_id], daily)
        raise ExportError(
            f"bot {bot_id} has too little {metric} history for a forecast (at least "
            f"{forecast.MIN_DAYS} days with a value are needed).")
    return forecast.reach(forecast.Model.of(model.row(0, named=True)), target)


def forecast_curve(settings: Settings, bot_id: str, metric: str, days: int = 90) -> pl.DataFrame:
    """``bot_id``'s ``metric`` forecast for each of the next ``days`` days from its model in
    ``bot_forecast``: ``day``, ``forecast`` and the 80% interval ``lo80``/``hi80``."""
    outlook = scan_dataset(settings, "bot_forecast")
    mine = outlook.filter((pl.col("bot_id") == bot_id) & (pl.col("metric") == metric))
    model = forecast.latest(mine).head(1).select(forecast.MODEL_COLUMNS).collect()
    if model.height == 0:
        check_bots([bot_id], scan_dataset(settings, "bot_daily"))
        raise ExportError(
            f"bot {bot_id} has too little {metric} history for a forecast (at least "
            f"{forecast.MIN_DAYS} days with a value are needed).")
    return forecast.predict(model.lazy(), tuple(range(1, days + 1))).collect().sort("day")
