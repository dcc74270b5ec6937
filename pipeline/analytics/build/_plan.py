"""The plan of a trends run: full, incremental from a Monday, or nothing to do, from the archive's changes since the previous export; and which days of each dataset an incremental run writes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, date, timedelta
from pathlib import Path

import duckdb
import polars as pl

from ... import archive
from ...core import TrendSettings
from ..exports._datasets import DATASETS
from ..exports._exports import Manifest, settle_line
from . import _anomalies as anomalies
from . import _forecast as forecast
from . import _window as trend_window
from ._jobs import GROWTH_DAYS, MOVER_DAYS, RANK_DAYS, listing_days
from ._slices import BOTS_SQL, read_slice
from ._window import FULL, Window

# Part of the fingerprint of an export: a version of the datasets' columns and meaning. A run
# whose fingerprint differs from the previous export's rebuilds everything (a change of what a
# detector or a model finds counts: exports of two detectors would read as one).
TRENDS_FORMAT = 5


def lookback_days(t: TrendSettings) -> int:
    """Days before an incremental run's start that its windows read (growth 30 days, an
    event's usual level and spread, ranks and movers, the forecast's window)."""
    return max(*GROWTH_DAYS, *MOVER_DAYS, *RANK_DAYS, anomalies.lookback_days(t),
               forecast.WINDOW_DAYS)


def fingerprint(t: TrendSettings) -> str:
    """What an export's rows depend on besides the archive: the settings and TRENDS_FORMAT."""
    text = json.dumps({"format": TRENDS_FORMAT, **dataclasses.asdict(t)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Plan:
    """What a run recomputes: a window (FULL = everything), or None when nothing is new."""

    window: Window | None
    watermark: str | None  # the archive's change watermark the export will be up to
    reason: str

    @property
    def mode(self) -> str:
        if self.window is None:
            return "unchanged"
        return "full" if self.window.start is None else "incremental"


def plan_run(con: duckdb.DuckDBPyConnection, t: TrendSettings, export_dir: Path,
             manifest: Manifest, *, full: bool = False) -> Plan:
    """Full, incremental from a Monday, or nothing to do: decided from the archive's changes
    since the watermark in ``manifest`` (the previous export) and from the bots table."""
    def rebuild(reason: str) -> Plan:
        return Plan(_full(con), archive.changes_since(con, None).watermark, reason)

    source = manifest.get("source") or {}
    if full:
        return rebuild("--full")
    if "watermark" not in source:
        return rebuild("no previous incremental export")
    if source.get("trends") != fingerprint(t):
        return rebuild("the [trends] settings or the datasets' columns changed")
    try:
        changes = archive.changes_since(con, source["watermark"])
    except (TypeError, ValueError) as exc:
        return rebuild(f"the export's watermark is unreadable ({exc})")
    missing = [p for d in manifest.get("datasets", {}).values() for p in d.get("partitions", [])
               if not (export_dir / p["path"]).is_file()]
    if set(manifest.get("datasets", {})) != set(DATASETS) or missing:
        return rebuild("files of the previous export are missing")
    bots = read_slice(con, BOTS_SQL, None, None).lazy()
    first_seen, removed = listing_days(bots)
    listed = first_seen.join(removed, on="day", how="full", coalesce=True)
    exported = scan_export(export_dir, manifest, "directory_daily")
    days = [d for d in (changes.first_day, trend_window.directory_change(listed, exported))
            if d is not None]
    if not days:
        return Plan(None, changes.watermark, "nothing new since the last export")
    first = min(days)
    emit = emitted_from(first)
    # Computed from the raw records of the week of the first change (resource_health's weeks
    # are whole); what the datasets need of the days before, bot_daily's rows (anomalies from
    # HOLD_DAYS before the change, the windows of growth, ranks and forecasts), is exported.
    start = trend_window.week_start(first)
    try:
        window = trend_window.open_window(trend_window.PreviousExport(export_dir, manifest),
                                          start, lookback_days(t), emit, max(RANK_DAYS))
    except trend_window.WindowUnavailable as exc:
        return rebuild(f"the previous export cannot be continued: {exc}")
    return Plan(window, changes.watermark, "changes since the last export")


def emitted_from(first: date) -> dict[str, date]:
    """The first day of each dataset that records changed from day ``first`` on can alter.
    A row of a day depends on that day and days before it, so the days before ``first`` stay
    as exported, except: an event's row is settled only HOLD_DAYS after its first day (a spike,
    or a level shift?), and a week of resource_health is one row. The days a run writes are
    what it adds, whatever it computes to get there (docs/trends.md)."""
    emit = {name: first for name, spec in DATASETS.items() if not spec.whole}
    emit["anomalies"] = first - timedelta(days=anomalies.HOLD_DAYS)
    emit["resource_health"] = trend_window.week_start(first)
    return emit


def _full(con: duckdb.DuckDBPyConnection) -> Window:
    """A full build: every day, its settled months written one file each."""
    ((newest,),) = con.execute("SELECT max(recorded_at) FROM bot_stats").fetchall()
    if newest is None:
        return FULL
    return dataclasses.replace(FULL, settled=settle_line(newest.astimezone(UTC).date()))


def scan_export(export_dir: Path, manifest: Manifest, name: str) -> pl.LazyFrame:
    """Every partition of dataset ``name`` as ``manifest`` lists them."""
    files = [export_dir / p["path"] for p in manifest["datasets"][name]["partitions"]]
    return pl.scan_parquet(files, hive_partitioning=False)
