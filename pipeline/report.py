"""The report: one self-contained HTML file made from the trend exports (``botstats report``).

It opens offline, from a file or a mail attachment: the charting library (Apache ECharts, the
``common`` build, in ``report_assets/``) and the data are inlined, nothing is fetched. Charts
are drawn as SVG, so they stay sharp when zoomed and a test can count what was drawn.

Sections: the directory over time (bots reporting, total guilds and users), the top movers over
7 and 30 days, rank changes, recent anomalies, resource health (hot cpu/memory days), then, for
each bot asked for, its guilds and users with the forecast band, commands per day, cpu and
memory load and its custom series; with ``compare`` the bots side by side as well.

Python builds every chart's ECharts option (plain JSON); the page's script only hands each one
to ``echarts.init(...).setOption`` and wires the range buttons. The size does not grow with the
directory: lists are cut to their top rows and per-bot charts exist only for the bots asked for.
"""

from __future__ import annotations

import html
import json
import math
import os
import string
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from . import exports, forecast
from .compare import MAX_BOTS, ROWS, check_bots, comparison_frame, format_cell
from .config import Settings
from .errors import ExportError
from .trends import scan_dataset

TOP = 10  # rows of each list (movers, rank changes, hot bots)
ANOMALY_DAYS = 14  # "recent" anomalies: the last two weeks of the export
ANOMALY_ROWS = 25
HEALTH_WEEKS = 4
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


# --- chart options (plain JSON for ECharts) -----------------------------------------------------
def _pairs(frame: pl.DataFrame, x: str, y: str) -> list[list[Any]]:
    return [[str(a), b] for a, b in frame.select(x, y).iter_rows()]


def time_chart(title: str, series: list[dict[str, Any]], *, y_names: tuple[str, ...] = ("",),
               zoom: bool = True) -> dict[str, Any]:
    """A time-axis chart: ``series`` are ECharts series with ``[day, value]`` data."""
    option: dict[str, Any] = {
        "title": {"text": title, "textStyle": {"fontSize": 14}},
        "tooltip": {"trigger": "axis"},
        "legend": {"top": 24, "type": "scroll"},
        "grid": {"left": 70, "right": 70 if len(y_names) > 1 else 30, "top": 64, "bottom": 64},
        "xAxis": {"type": "time"},
        "yAxis": [{"type": "value", "name": n, "scale": True} for n in y_names],
        "series": series,
    }
    if zoom:
        # The slider previews the first series; ECharts draws NaN for one of a single point.
        points = sum(1 for p in series[0]["data"] if p[1] is not None) if series else 0
        option["dataZoom"] = [{"type": "inside"}, {"type": "slider", "height": 18, "bottom": 12,
                                                   "showDataShadow": points >= 2}]
    return option


def line(name: str, data: list[list[Any]], **more: Any) -> dict[str, Any]:
    return {"name": name, "type": "line", "showSymbol": False, "data": data, **more}


def bar_chart(title: str, labels: list[str], values: list[float], name: str) -> dict[str, Any]:
    """A horizontal bar chart (one bar per label, the first on top)."""
    return {
        "title": {"text": title, "textStyle": {"fontSize": 14}},
        "tooltip": {"trigger": "axis", "axisPointer": {"type": "shadow"}},
        "grid": {"left": 170, "right": 30, "top": 40, "bottom": 30},
        "xAxis": {"type": "value"},
        "yAxis": {"type": "category", "data": labels[::-1]},
        "series": [{"name": name, "type": "bar", "data": values[::-1]}],
    }


def band_series(metric: str, history: pl.DataFrame, ahead: pl.DataFrame) -> list[dict[str, Any]]:
    """History, the forecast's median path and its 80% band (a stacked area from lo80 to
    hi80, the usual way to draw a band in ECharts). The path starts at the model's level on
    its last day: where the trend says the bot is, which a spike on that day does not move."""
    start = [[str(r["as_of"]), math.expm1(r["level"])] for r in ahead.head(1).iter_rows(named=True)]
    band = ahead.with_columns(width=pl.col("hi80") - pl.col("lo80"))
    return [
        line(metric, _pairs(history, "day", metric)),
        line("forecast", start + _pairs(ahead, "day", "forecast"),
             lineStyle={"type": "dashed"}),
        line("80% low", _pairs(band, "day", "lo80"), stack="band", lineStyle={"opacity": 0},
             tooltip={"show": False}),
        line("80% interval", _pairs(band, "day", "width"), stack="band",
             lineStyle={"opacity": 0}, areaStyle={"opacity": 0.25}, tooltip={"show": False}),
    ]


# --- sections -------------------------------------------------------------------------------------
@dataclass
class Page:
    """What the template gets: HTML blocks in order, and the chart options by element id."""

    blocks: list[str] = field(default_factory=list)
    charts: dict[str, dict[str, Any]] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)

    def chart(self, option: dict[str, Any], *, height: int = 320) -> str:
        chart_id = f"chart-{len(self.charts) + 1}"
        self.charts[chart_id] = option
        return f'<div class="chart" id="{chart_id}" style="height:{height}px"></div>'

    def add(self, title: str, *parts: str, anchor: str, link: str = "") -> None:
        """A section with its heading; ``link`` (default ``title``) names it in the page's
        table of contents."""
        self.links.append(f'<a href="#{html.escape(anchor)}">{html.escape(link or title)}</a>')
        self.blocks.append(f'<section id="{html.escape(anchor)}"><h2>{html.escape(title)}</h2>'
                           f'{"".join(parts)}</section>')


def table(frame: pl.DataFrame, *, caption: str = "", numbers: dict[str, str] | None = None) -> str:
    """An HTML table of ``frame`` (escaped); ``numbers`` formats columns (``{col: ",.0f"}``)."""
    numbers = numbers or {}
    if frame.height == 0:
        return f'<p class="empty">{html.escape(caption or "Nothing")}: none.</p>'
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    body = []
    for row in frame.iter_rows():
        cells = []
        for column, value in zip(frame.columns, row, strict=True):
            text = "-" if value is None else (format(value, numbers[column])
                                              if column in numbers else str(value))
            num = ' class="num"' if isinstance(value, int | float) else ""
            cells.append(f"<td{num}>{html.escape(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def directory_section(page: Page, directory: pl.DataFrame) -> None:
    page.add(
        "The directory",
        page.chart(time_chart("Bots reporting", [line("bots reporting", _pairs(
            directory, "day", "bots_reporting"))])),
        page.chart(time_chart("Total guilds and users", [
            line("guilds", _pairs(directory, "day", "guilds")),
            line("users", _pairs(directory, "day", "users"), yAxisIndex=1),
        ], y_names=("guilds", "users"))),
        anchor="directory", link="Directory",
    )


def movers_section(page: Page, movers: pl.DataFrame) -> None:
    last = movers["day"].max() if movers.height else date.min
    parts = []
    for window in (7, 30):
        rows = movers.filter((pl.col("day") == last) & (pl.col("window_days") == window)
                             & (pl.col("metric") == "guilds") & (pl.col("measure") == "abs"))
        gainers = rows.filter(pl.col("direction") == "gainer").sort("rank").head(TOP)
        losers = rows.filter(pl.col("direction") == "loser").sort("rank").head(TOP)
        if gainers.height:
            parts.append(page.chart(bar_chart(
                f"Top guild gainers over {window} days (to {last})",
                gainers["bot_id"].to_list(), gainers["change"].to_list(), "guilds gained"),
                height=60 + 26 * gainers.height))
        shown = ["rank", "bot_id", "start_value", "end_value", "change", "pct_change"]
        parts.append(table(gainers.select(shown), caption=f"Gainers, {window} days",
                           numbers={"pct_change": "+.1f", "change": "+,d"}))
        parts.append(table(losers.select(shown), caption=f"Losers, {window} days",
                           numbers={"pct_change": "+.1f", "change": "+,d"}))
    page.add("Top movers (guilds)", *parts, anchor="movers", link="Movers")


def ranks_section(page: Page, ranks: pl.DataFrame) -> None:
    last = ranks.filter(pl.col("day") == pl.col("day").max()).filter(
        pl.col("guilds_rank_change_7d").is_not_null() & (pl.col("guilds_rank_change_7d") != 0))
    shown = ["bot_id", "guilds", "guilds_rank", "guilds_rank_change_7d", "users_rank",
             "users_rank_change_7d"]
    up = last.sort(["guilds_rank_change_7d", "guilds_rank"], descending=[True, False]).head(TOP)
    down = last.sort(["guilds_rank_change_7d", "guilds_rank"]).head(TOP)
    page.add("Rank changes over 7 days (by guilds)",
             table(up.filter(pl.col("guilds_rank_change_7d") > 0).select(shown), caption="Climbed",
                   numbers={"guilds": ",d", "guilds_rank_change_7d": "+d",
                            "users_rank_change_7d": "+d"}),
             table(down.filter(pl.col("guilds_rank_change_7d") < 0).select(shown), caption="Fell",
                   numbers={"guilds": ",d", "guilds_rank_change_7d": "+d",
                            "users_rank_change_7d": "+d"}),
             anchor="ranks", link="Ranks")


def describe_anomalies(odd: pl.DataFrame) -> pl.DataFrame:
    """Recent anomalies with a sentence each: what moved, by how much, against what usual."""
    what = {"guilds": "guilds changed by", "users": "users changed by",
            "commands_executed": "commands run:"}
    return odd.select(
        "day", "bot_id", "metric",
        pl.struct("metric", "value", "baseline_median", "baseline_days").map_elements(
            lambda r: (f"{what.get(r['metric'], r['metric'])} {r['value']:+,.0f} where "
                       f"{r['baseline_median']:+,.0f} a day is usual (median of "
                       f"{r['baseline_days']} days)"), return_dtype=pl.String).alias("what"),
        pl.col("score").round(1),
    )


def anomalies_section(page: Page, odd: pl.DataFrame) -> None:
    if odd.height:
        since = odd["day"].max() - timedelta(days=ANOMALY_DAYS - 1)
        odd = odd.filter(pl.col("day") >= since).sort(["day", "score"], descending=[True, True])
    rows = describe_anomalies(odd.head(ANOMALY_ROWS))
    page.add(f"Anomalies in the last {ANOMALY_DAYS} days",
             table(rows, caption=f"Newest first; {odd.height} in all" if odd.height else "Anomalies"),
             anchor="anomalies",
             link="Anomalies")


def health_section(page: Page, health: pl.DataFrame) -> None:
    if health.height:
        since = health["week"].max() - timedelta(weeks=HEALTH_WEEKS - 1)
        health = health.filter(pl.col("week") >= since)
    hot = (health.group_by("bot_id")
           .agg(pl.col("hot_days", "cpu_hot_days", "memory_hot_days").sum(),
                pl.col("cpu_load_p95", "memory_load_p95").max())
           .filter(pl.col("hot_days") > 0)
           .sort(["hot_days", "bot_id"], descending=[True, False]).head(TOP))
    parts = []
    if hot.height:
        parts.append(page.chart(bar_chart(f"Hot days in the last {HEALTH_WEEKS} weeks",
                                          hot["bot_id"].to_list(), hot["hot_days"].to_list(),
                                          "hot days"), height=60 + 26 * hot.height))
    parts.append(table(hot, caption="Bots with days of p95 cpu or memory load above the "
                                    "threshold", numbers={"cpu_load_p95": ".0f",
                                                          "memory_load_p95": ".0f"}))
    page.add("Resource health", *parts, anchor="health", link="Health")


def bot_section(page: Page, bot_id: str, daily: pl.DataFrame, ahead: pl.DataFrame,
                custom: pl.DataFrame) -> None:
    parts = []
    for metric in forecast.METRICS:
        band = ahead.filter(pl.col("metric") == metric).sort("day")
        option = time_chart(f"{metric.capitalize()}, with the forecast's 80% band",
                            band_series(metric, daily, band))
        option["legend"]["data"] = [metric, "forecast", "80% interval"]  # not the band's base
        parts.append(page.chart(option))
    parts.append(page.chart(time_chart("Commands per day", [
        {"name": "commands", "type": "bar", "data": _pairs(daily, "day", "commands_executed")}])))
    parts.append(page.chart(time_chart("CPU and memory load (%)", [
        line("cpu mean", _pairs(daily, "day", "cpu_load_mean")),
        line("cpu p95", _pairs(daily, "day", "cpu_load_p95"), lineStyle={"type": "dotted"}),
        line("memory mean", _pairs(daily, "day", "memory_load_mean")),
        line("memory p95", _pairs(daily, "day", "memory_load_p95"), lineStyle={"type": "dotted"}),
    ])))
    numeric = custom.filter(pl.col("kind") == "numeric")
    if numeric.height:
        parts.append(page.chart(time_chart("Custom series (daily mean)", [
            line(name, _pairs(rows.sort("day"), "day", "value_mean"))
            for (name,), rows in numeric.group_by(["name"], maintain_order=True)
        ])))
    text = (custom.filter(pl.col("kind") == "text").sort("day")
            .group_by("name", maintain_order=True).last()
            .select("name", pl.col("value_text").alias("value"), "changed_at", "day"))
    if text.height:
        parts.append(table(text, caption="Custom text fields: latest value"))
    outlook = (ahead.filter(pl.col("horizon_days").is_in(list(forecast.HORIZONS)))
               .select("metric", "horizon_days", "day", "forecast", "lo80", "hi80")
               .sort("metric", "horizon_days"))
    parts.append(table(outlook, caption=f"Forecast for {bot_id}",
                       numbers={"forecast": ",.0f", "lo80": ",.0f", "hi80": ",.0f"}))
    page.add(f"Bot {bot_id}", *parts, anchor=f"bot-{bot_id}", link=bot_id)


def compare_section(page: Page, bot_ids: list[str], daily: pl.DataFrame,
                    comparison: pl.DataFrame) -> None:
    chart = page.chart(time_chart("Guilds, side by side", [
        line(b, _pairs(daily.filter(pl.col("bot_id") == b), "day", "guilds")) for b in bot_ids]))
    rows = comparison.to_dicts()
    head = "".join(f"<th>{html.escape(r['bot_id'])}</th>" for r in rows)
    body = "".join(
        f"<tr><th>{html.escape(label)}</th>"
        + "".join(f'<td class="num">{html.escape(format_cell(r, column, fmt))}</td>' for r in rows)
        + "</tr>" for label, column, fmt in ROWS)
    page.add("Side by side", chart,
             f"<table class=\"compare\"><thead><tr><th></th>{head}</tr></thead>"
             f"<tbody>{body}</tbody></table>", anchor="compare", link="Side by side")


# --- the whole report -----------------------------------------------------------------------------
def gather(settings: Settings, bot_ids: list[str], days: int) -> dict[str, pl.DataFrame]:
    """The rows the report shows, read from the exports (the last ``days`` days of them)."""
    scans = {name: scan_dataset(settings, name) for name in (
        "directory_daily", "movers", "bot_ranks", "anomalies", "resource_health", "bot_daily",
        "custom_daily", "bot_forecast", "bot_growth")}
    last = scans["directory_daily"].select(pl.col("day").max()).collect().item()
    since = (last or date.today()) - timedelta(days=days - 1)
    recent = pl.col("day") >= since
    mine = pl.col("bot_id").is_in(bot_ids)
    models = forecast.latest(scans["bot_forecast"].filter(mine)).unique(
        ["bot_id", "metric"]).select(forecast.MODEL_COLUMNS)
    frames = {
        "directory": scans["directory_daily"].filter(recent).sort("day"),
        "movers": scans["movers"].filter(pl.col("day") == pl.col("day").max()),
        "ranks": scans["bot_ranks"].filter(pl.col("day") == pl.col("day").max()),
        "anomalies": scans["anomalies"].filter(recent),
        "health": scans["resource_health"].filter(pl.col("week") >= since - timedelta(days=6)),
        "daily": scans["bot_daily"].filter(mine & recent).sort("bot_id", "day"),
        "custom": scans["custom_daily"].filter(mine & recent),
        "ahead": forecast.predict(models, FORECAST_AHEAD),
    }
    out = dict(zip(frames, pl.collect_all(list(frames.values())), strict=True))
    check_bots(bot_ids, scans["bot_daily"], f"the exports under {settings.export_dir}")
    if bot_ids:
        out["comparison"] = comparison_frame(scans["bot_growth"], scans["bot_ranks"],
                                             scans["bot_forecast"], bot_ids)
    return out


def render(data: dict[str, pl.DataFrame], bot_ids: list[str], *, days: int, compare: bool,
           source: str, generated: datetime) -> tuple[str, int]:
    """The HTML text and the number of charts in it."""
    page = Page()
    directory_section(page, data["directory"])
    movers_section(page, data["movers"])
    ranks_section(page, data["ranks"])
    anomalies_section(page, data["anomalies"])
    health_section(page, data["health"])
    if compare and bot_ids:
        compare_section(page, bot_ids, data["daily"], data["comparison"])
    for bot_id in bot_ids:
        bot_section(page, bot_id, data["daily"].filter(pl.col("bot_id") == bot_id),
                    data["ahead"].filter(pl.col("bot_id") == bot_id),
                    data["custom"].filter(pl.col("bot_id") == bot_id))
    last = data["directory"]["day"].max() if data["directory"].height else None
    assets = resources.files("pipeline") / "report_assets"
    payload = json.dumps(page.charts, separators=(",", ":"), default=str)
    template = string.Template((assets / "report.html").read_text(encoding="utf-8"))
    text = template.substitute(
        title="botstats report",
        subtitle=html.escape(f"Last {days} days to {last or '-'}; made {generated:%Y-%m-%d %H:%M} "
                             f"UTC from {source}"),
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
    text, charts = render(data, bots, days=days, compare=compare,
                          source=str(settings.export_dir), generated=datetime.now(UTC))
    if path.is_dir():
        raise ExportError(f"{path} is a directory: give the report a file name, like "
                          f"{path / 'report.html'}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        exports.write_text(text, path)
    except OSError as exc:
        raise ExportError(f"cannot write the report to {path}: {exc.strerror or exc}.") from exc
    return ReportResult(path, tuple(bots), os.path.getsize(path), charts, time.monotonic() - started)


__all__ = ["ReportResult", "build_report", "gather", "render"]
