"""What the alerts are decided from: the archive's runs, the lock's holder, and the trend
exports' events and forecasts, each read into plain values (and alerts worded by ``_alert``).

The runs come from ``harvest_runs`` (the shard's own, when runs are sharded) with the run that
just ended taken as it reports itself: a run whose trends failed after a complete harvest is
``failed``, though its harvest's row says ``complete``. The events and milestones come from the
exports the run has just written (``anomalies``, ``bot_daily``, ``bot_forecast``), named by
``bot_names``; an archive with no exports yet has none.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta
from typing import Any

import duckdb
import polars as pl

from .. import analytics
from ..core import AlertSettings, BotstatsError, Settings, Shard
from . import _alert as words
from ._alert import Alert, Anomaly, Bot, Milestone, Pace, RunOutcome, Runs

log = logging.getLogger("botstats.alerts")

# The most events one run tells (the most severe first); the rest are told by the next runs,
# while they stay within [alerts].event_days.
MAX_EVENTS = 50


def read_runs(con: duckdb.DuckDBPyConnection, run: RunOutcome | None, shard: Shard) -> Runs:
    """The runs of ``shard`` from ``harvest_runs``, ``run`` (the one just ended, if any) as it
    reports itself."""
    mine = "coalesce(shard, 0) = ? AND coalesce(shards, 1) = ?"
    this = run.run_id if run and run.run_id else ""
    failed_now = run is not None and run.status in ("failed", "partial")
    rows = con.execute(
        f"SELECT run_id, finished_at FROM harvest_runs WHERE status = 'complete' AND {mine} "
        f"AND run_id != ? ORDER BY finished_at DESC LIMIT 1",
        [shard.k, shard.n, this if failed_now else ""]).fetchall()
    last = (str(rows[0][0]), _utc(rows[0][1])) if rows else None
    after = last[1] if last else datetime(1970, 1, 1, tzinfo=UTC)
    failing = con.execute(
        f"SELECT run_id, started_at FROM harvest_runs WHERE status IN ('failed', 'partial') "
        f"AND {mine} AND started_at > ? AND run_id != ? ORDER BY started_at",
        [shard.k, shard.n, after, this]).fetchall()
    runs = [(str(r), _utc(at)) for r, at in failing]
    if failed_now and run is not None and run.run_id:
        runs.append((run.run_id, _utc(run.started_at or datetime.now(UTC))))
        runs.sort(key=lambda r: r[1])
    ((first,),) = con.execute(f"SELECT min(started_at) FROM harvest_runs WHERE {mine}",
                              [shard.k, shard.n]).fetchall()
    latest = con.execute(
        f"SELECT run_id, status, coalesce(message, '') FROM harvest_runs WHERE {mine} "
        f"ORDER BY started_at DESC LIMIT 1", [shard.k, shard.n]).fetchall()
    said = ""
    if run is not None and run.run_id:
        said = f"{run.run_id} {run.status}" + (f": {run.message}" if run.message else "")
    elif latest:
        said = f"{latest[0][0]} {latest[0][1]}" + (f": {latest[0][2]}" if latest[0][2] else "")
    return Runs(last, runs[0] if runs else None, len(runs),
                _utc(first) if first is not None else None, words.clip(said, 300))


def _utc(value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"not a time: {value!r}")
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def _names(settings: Settings) -> dict[str, str]:
    try:
        frame = analytics.scan_dataset(settings, "bot_names").select("bot_id", "name").collect()
    except (BotstatsError, pl.exceptions.PolarsError, OSError):
        return {}
    return {b: n.strip() for b, n in frame.iter_rows() if isinstance(n, str) and n.strip()}


def read_events(settings: Settings, alerts: AlertSettings, today: date) -> list[Alert]:
    """Events of the anomaly export dated within ``[alerts].event_days`` of ``today``, at or
    above ``[alerts].min_severity``, of every bot or the watched ones, the most severe first
    (at most :data:`MAX_EVENTS`)."""
    try:
        frame = (analytics.scan_dataset(settings, "anomalies")
                 .filter(pl.col("day") > today - timedelta(days=alerts.event_days),
                         pl.col("severity") >= alerts.min_severity)
                 .filter(pl.col("bot_id").is_in(list(alerts.watch_list))
                         if alerts.events == "watched" else pl.lit(True))
                 .sort(["severity", "day", "bot_id"], descending=[True, False, False])
                 .head(MAX_EVENTS)
                 .select("bot_id", "day", "kind", "summary", "severity", "also")
                 .collect())
    except (BotstatsError, pl.exceptions.PolarsError, OSError) as exc:
        log.debug("no events to tell: %s", exc)
        return []
    names = _names(settings)
    return [words.event(Bot(bot, names.get(bot, bot)), Anomaly(*found))
            for bot, *found in frame.iter_rows()]


def read_milestones(settings: Settings, alerts: AlertSettings, today: date) -> list[Alert]:
    """For each watched bot and ``[alerts].milestones`` size: reached within
    ``[alerts].event_days`` (the first day of its latest stretch at or above it, after a day
    below), or forecast to be reached within ``[alerts].forecast_days``."""
    watch, sizes = list(alerts.watch_list), alerts.milestone_list
    if not watch or not sizes:
        return []
    try:
        daily = (analytics.scan_dataset(settings, "bot_daily")
                 .filter(pl.col("bot_id").is_in(watch))
                 .select("bot_id", "day", "guilds", "users").sort("bot_id", "day").collect())
    except (BotstatsError, pl.exceptions.PolarsError, OSError) as exc:
        log.debug("no milestones to tell: %s", exc)
        return []
    names = _names(settings)
    since = today - timedelta(days=alerts.event_days)
    out = []
    for bot_id in watch:
        bot = Bot(bot_id, names.get(bot_id, bot_id))
        mine = daily.filter(pl.col("bot_id") == bot_id)
        for metric, size in sizes:
            mark = Milestone(metric, size)
            series = [(d, v) for d, v in mine.select("day", mark.metric).iter_rows()
                      if v is not None]
            if not series:
                continue
            # At or above the size now: reached (or always was); below it: maybe on pace.
            found = (_reached(bot, mark, series, since) if series[-1][1] >= mark.size
                     else _on_pace(settings, alerts, bot, mark, today))
            if found is not None:
                out.append(found)
    return out


def _reached(bot: Bot, mark: Milestone, series: list[tuple[date, float]],
             since: date) -> Alert | None:
    """``mark`` reached after ``since``: the first day of the series' latest stretch at or
    above it, after a day below."""
    below = [i for i, (_, v) in enumerate(series) if v < mark.size]
    if not below:
        return None  # at or above it all along: not a crossing this archive saw
    day = series[below[-1] + 1][0]
    if day <= since:
        return None
    return words.reached(bot, mark, day, float(series[-1][1]))


def _on_pace(settings: Settings, alerts: AlertSettings, bot: Bot, mark: Milestone,
             today: date) -> Alert | None:
    """``mark`` forecast to be reached within ``[alerts].forecast_days`` of ``today``."""
    if not alerts.forecast_days:
        return None
    try:
        reach = analytics.forecast_reach(settings, bot.bot_id, mark.metric, float(mark.size))
    except (BotstatsError, pl.exceptions.PolarsError, OSError) as exc:
        log.debug("no forecast of bot %s %s: %s", bot.bot_id, mark.metric, exc)
        return None
    if reach.status != "on_pace" or reach.day is None:
        return None
    if reach.day > today + timedelta(days=alerts.forecast_days):
        return None
    return words.on_pace(bot, mark, Pace(reach.day, reach.earliest, reach.latest,
                                         reach.last_value, reach.as_of))
