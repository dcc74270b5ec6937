"""The trend datasets: what each one holds, and reading an export of one back (scan, load)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import polars as pl

from ...core import ExportError, Settings
from . import _exports as exports


@dataclass(frozen=True)
class Dataset:
    name: str
    time_column: str  # partitions are months of this column
    order: tuple[str, ...]  # row order of the export (stable bytes, so reruns hash the same)
    about: str
    # Computed whole by every run (not from the window's start): it describes the bots now.
    whole: bool = False
    # Rows of these keys are current at the key's newest time; older ones are superseded, kept
    # by the runs that wrote them until `botstats compact` merges their days.
    current_by: tuple[str, ...] = ()


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset("bot_daily", "day", ("bot_id", "day"),
                "per bot and UTC day: last users/guilds/shards, mean and p95 load, commands run"),
        Dataset("bot_growth", "day", ("bot_id", "day"),
                "per bot and day: 1/7/30-day change and percent, 7-day means, 30-day CDGR"),
        Dataset("bot_ranks", "day", ("bot_id", "day"),
                "per bot and day: rank by guilds and users, rank change over 1 and 7 days"),
        Dataset("movers", "day",
                ("day", "window_days", "metric", "measure", "direction", "rank"),
                "per day: top gainers and losers over 7 and 30 days, absolute and percent"),
        Dataset("anomalies", "day", ("day", "bot_id"),
                "per event: a spike, drop, level shift, outage or counter reset, its size and "
                "severity"),
        Dataset("resource_health", "week", ("bot_id", "week"),
                "per bot and ISO week: p95 cpu/memory load and days above the threshold"),
        Dataset("custom_daily", "day", ("bot_id", "name", "day", "kind"),
                "per bot, day and custom field: numeric stats, or text value and changes"),
        Dataset("directory_daily", "day", ("day",),
                "per day: total guilds/users, bots reporting, first seen, first reporting, removed"),
        # bot_forecast: computed by build/_forecast.py from each slice's bot_daily.
        Dataset("bot_forecast", "as_of", ("bot_id", "metric", "horizon_days"),
                "per bot, metric and horizon (7/30/90 days): forecast and 80% interval",
                current_by=("bot_id", "metric")),
        Dataset("bot_names", "first_seen", ("bot_id",),
                "per bot: its name as the listing shows it now, first seen, removed",
                whole=True),
    )
}


def _check_dataset(name: str) -> Dataset:
    if name not in DATASETS:
        close = difflib.get_close_matches(name, list(DATASETS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ExportError(f"unknown dataset {name!r}.{hint} Datasets: {', '.join(DATASETS)}.")
    return DATASETS[name]


def scan_dataset(settings: Settings, name: str) -> pl.LazyFrame:
    """The last export of one dataset, lazily (e.g. ``scan_dataset(s, "bot_growth")``)."""
    _check_dataset(name)
    files = exports.dataset_files(settings.export_dir.resolve(), name)
    return pl.scan_parquet(files, hive_partitioning=False)


def load_dataset(settings: Settings, name: str) -> pl.DataFrame:
    """The last export of one dataset as a DataFrame, for notebooks."""
    return scan_dataset(settings, name).collect()
