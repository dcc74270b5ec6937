"""The report: one self-contained HTML file made from the trend exports (``botstats report``).

It opens offline, from a file or a mail attachment: the charting library (Apache ECharts, the
``common`` build, in ``assets/``) and the data are inlined, nothing is fetched. Charts
are drawn as SVG, so they stay sharp when zoomed and a test can count what was drawn.

Sections: the directory over time (bots reporting, total guilds and users), the top movers over
7 and 30 days, rank changes, the anomalies (led by the week's events that matter most),
resource health (the bots most over their own usual load, and since when), then, for each bot
asked for, its guilds and users with the forecast band, commands per day, cpu and memory load
and its custom series; with ``compare`` the bots side by side as well. Bots are named by the
names the service gives them (``bot_names``), ids on hover.

Python builds every chart's ECharts option (plain JSON); the page's script only hands each one
to ``echarts.init(...).setOption`` and wires the range buttons. The size does not grow with the
directory: lists are cut to their top rows and per-bot charts exist only for the bots asked for.
"""

from __future__ import annotations

import html
import json
import os
import string
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from ...core import ExportError, Settings
from ..build import _forecast as forecast
from ..exports import _exports as exports
from ..exports._datasets import scan_dataset
from ..read._compare import MAX_BOTS, check_bots, comparison_frame
from . import _health as health
from ._names import Names
from ._sections import (
    TOP,
    BotRows,
    Page,
    anomalies_section,
    bot_section,
    compare_section,
    directory_section,
    health_section,
    movers_section,
    ranks_section,
)

FORECAST_AHEAD = tuple(range(1, 91))  # the forecast band reaches 90 days past the last day
LIBRARY = "echarts.common.min.js"


@dataclass(frozen=True)
class ReportResult:
    """The report written: where, how large, how many charts, for which bots, in how long."""

    path: Path
    bots: tuple[str, ...]
    bytes: int
    charts: int
    seconds: float

    def summary(self) -> str:
        return (f"report: {self.path} ({self.bytes / 1024:,.0f} KiB, {self.charts} charts, "
                f"{len(self.bots)} bot sections) in {self.seconds:.1f} s")

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "bytes": self.bytes, "charts": self.charts,
                "bots": list(self.bots), "seconds": round(self.seconds, 3)}


def gather(settings: Settings, bot_ids: list[str], days: int) -> dict[str, pl.DataFrame]:
    """The rows the report shows, read from the exports (the last ``days`` days of them); the
    lists (movers, health) are cut to their top rows in the query."""
    threshold = settings.trends.health_threshold
    scans = {name: scan_dataset(settings, name) for name in (
        "directory_daily", "movers", "bot_ranks", "anomalies", "resource_health", "bot_daily",
        "custom_daily", "bot_forecast", "bot_growth", "bot_names")}
    # Every window ends on the last day with stats: the data's own clock. (directory_daily also
    # has a row for the day the harvester first saw the bots, on the harvester's clock; an
    # archive of old records has its last stats long before that.)
    last = data_day(scans["directory_daily"])
    stats_day = last or date.today()
    since = stats_day - timedelta(days=days - 1)
    week = stats_day - timedelta(days=6)
    recent = pl.col("day").is_between(since, stats_day)
    mine = pl.col("bot_id").is_in(bot_ids)
    models = forecast.latest(scans["bot_forecast"].filter(mine)).unique(
        ["bot_id", "metric"]).select(forecast.MODEL_COLUMNS)
    # The newest day first, then its rows: a filter on the day itself reads only the files and
    # row groups that hold it, where `day == day.max()` read every bot's every day first.
    newest = {name: pl.lit(scans[name].select(pl.col("day").max()).collect().item(), pl.Date)
              for name in ("movers", "bot_ranks")}
    frames = {
        "directory": scans["directory_daily"].filter(recent).sort("day"),
        "movers": scans["movers"].filter(pl.col("day") == newest["movers"]),
        "ranks": scans["bot_ranks"].filter(pl.col("day") == newest["bot_ranks"]),
        "anomalies": scans["anomalies"].filter(recent),
        "names": scans["bot_names"].select("bot_id", "name"),
        "daily": scans["bot_daily"].filter(mine & recent).sort("bot_id", "day"),
        "custom": scans["custom_daily"].filter(mine & recent),
        "ahead": forecast.predict(models, FORECAST_AHEAD),
    }
    # One after the other: collected together, their peaks add up.
    out = {name: frame.collect() for name, frame in frames.items()}
    # The lists over every bot's days, a range of bots at a time (their rows are many).
    ranges = health.bot_ranges(scans["bot_names"],
                               health.RECENT_DAYS + health.USUAL_DAYS)
    out["over"] = health.top_in_passes(
        lambda daily: health.over_usual(daily, last=stats_day, top=TOP), scans["bot_daily"],
        ranges, health.TopRows(("over", "bot_id"), (True, False), TOP))
    out["hot"] = health.top_in_passes(
        lambda daily: _hot(daily, since=week, threshold=threshold), scans["bot_daily"], ranges,
        HOT)
    check_bots(bot_ids, scans["bot_daily"], f"the exports under {settings.export_dir}")
    if bot_ids:
        out["comparison"] = comparison_frame(scans["bot_growth"], scans["bot_ranks"],
                                             scans["bot_forecast"], bot_ids)
    return out


# The bots that ran hot: most days over the threshold first, then the highest cpu load.
HOT = health.TopRows(("hot_days", "cpu_load_p95", "bot_id"), (True, True, False), TOP)
# A report whose last day with stats is more than this many days before it was made says so
# at the top: its windows end then, not now.
STALE_DAYS = 2


def data_day(directory: pl.LazyFrame) -> date | None:
    """The last day any bot reported stats (None when none ever did)."""
    day = directory.filter(pl.col("bots_reporting") > 0).select(pl.col("day").max()).collect().item()
    return day if isinstance(day, date) else None


def clock_note(last: date | None, generated: datetime) -> str:
    """What the top of the report says when its data is not of today (else nothing)."""
    if last is None:
        return "No bot has reported stats yet: there is nothing to chart."
    behind = (generated.date() - last).days
    if behind <= STALE_DAYS:
        return ""
    return (f"Nothing recent: the newest stats are from {last}, {behind:,} days before this "
            f"report was made. Every chart and list below ends on {last}.")


def _hot(daily: pl.LazyFrame, *, since: date, threshold: float) -> pl.LazyFrame:
    """The ``TOP`` bots with the most days over ``threshold`` (cpu or memory p95) since
    ``since``, and their highest loads."""
    return daily.filter(pl.col("day") >= since).group_by("bot_id").agg(
        hot_days=((pl.col("cpu_load_p95") > threshold)
                  | (pl.col("memory_load_p95") > threshold)).sum().cast(pl.Int64),
        cpu_load_p95=pl.col("cpu_load_p95").max(),
        memory_load_p95=pl.col("memory_load_p95").max(),
    ).filter(pl.col("hot_days") > 0).sort(HOT.by, descending=HOT.descending).head(HOT.rows)


@dataclass(frozen=True)
class Asked:
    """What a report is asked for (the arguments, else ``[report]``): the ``bots`` with a
    section of their own, the ``days`` its windows span, and whether to ``compare`` the bots
    side by side."""

    bots: list[str]
    days: int
    compare: bool


def render(data: dict[str, pl.DataFrame], asked: Asked, *, source: str,
           generated: datetime) -> tuple[str, int]:
    """The HTML text and the number of charts in it."""
    bot_ids, days = asked.bots, asked.days
    page = Page()
    names = Names.of(data["names"])
    reporting = data["directory"].filter(pl.col("bots_reporting") > 0)
    newest = reporting["day"].dt.max() if reporting.height else None
    last = newest if isinstance(newest, date) else None
    directory_section(page, data["directory"])
    movers_section(page, data["movers"], names)
    ranks_section(page, data["ranks"], names)
    anomalies_section(page, data["anomalies"], names, last)
    health_section(page, data["over"], data["hot"], names)
    if asked.compare and bot_ids:
        compare_section(page, bot_ids, data["daily"], data["comparison"], names)
    for bot_id in bot_ids:
        mine = pl.col("bot_id") == bot_id
        bot_section(page, BotRows(bot_id, data["daily"].filter(mine), data["ahead"].filter(mine),
                                  data["custom"].filter(mine)), names)
    assets = resources.files("pipeline.analytics.report") / "assets"
    payload = json.dumps(page.charts, separators=(",", ":"), default=str)
    template = string.Template((assets / "report.html").read_text(encoding="utf-8"))
    note = clock_note(last, generated)
    text = template.substitute(
        title="botstats report",
        subtitle=html.escape(f"Last {days} days to {last or '-'}; made {generated:%Y-%m-%d %H:%M} "
                             f"UTC from {source}"),
        note=f'<p class="note">{html.escape(note)}</p>' if note else "",
        nav="\n".join(page.links),
        sections="\n".join(page.blocks),
        # "</script" or "<!--" in a name would end or confuse the script element: no "<" at all
        # (JSON spells it \u003c).
        charts=payload.replace("<", "\\u003c"),
        library=(assets / LIBRARY).read_text(encoding="utf-8"),
        script=(assets / "report.js").read_text(encoding="utf-8"),
    )
    return text, len(page.charts)


def build_report(settings: Settings, *, out: Path | None = None, bot_ids: list[str] | None = None,
                 days: int | None = None, compare: bool | None = None) -> ReportResult:
    """Write the report to ``out`` (default ``[report].file``, else ``report.html`` beside the
    exports); arguments left None come from ``[report]``."""
    started = time.monotonic()
    r = settings.report
    bots = list(dict.fromkeys(bot_ids if bot_ids is not None else r.bot_list))
    days = days if days is not None else r.days
    compare = compare if compare is not None else r.compare
    if compare and not 2 <= len(bots) <= MAX_BOTS:
        raise ExportError(f"--compare needs 2 to {MAX_BOTS} bots (--bot ID ...), got {len(bots)}.")
    path = out or (Path(r.file) if r.file else settings.export_dir / "report.html")
    data = gather(settings, bots, days)
    text, charts = render(data, Asked(bots, days, compare), source=str(settings.export_dir),
                          generated=datetime.now(UTC))
    if path.is_dir():
        raise ExportError(f"{path} is a directory: give the report a file name, like "
                          f"{path / 'report.html'}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        exports.write_text(text, path)
    except OSError as exc:
        raise ExportError(f"cannot write the report to {path}: {exc.strerror or exc}.") from exc
    return ReportResult(path, tuple(bots), os.path.getsize(path), charts, time.monotonic() - started)
