"""The report's sections: each a function that adds a heading, tables and charts to the page from one dataset."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import polars as pl

from . import _forecast as forecast
from ._charts import _pairs, band_series, bar_chart, line, time_chart
from ._compare import ROWS, format_cell

TOP = 10  # rows of each list (movers, rank changes, hot bots)
ANOMALY_DAYS = 14  # "recent" anomalies: the last two weeks of the export
ANOMALY_ROWS = 25
HEALTH_WEEKS = 4


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
    last = movers["day"].dt.max() if movers.height else date.min
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
        since = pl.col("day").max() - timedelta(days=ANOMALY_DAYS - 1)
        odd = odd.filter(pl.col("day") >= since).sort(["day", "score"], descending=[True, True])
    rows = describe_anomalies(odd.head(ANOMALY_ROWS))
    page.add(f"Anomalies in the last {ANOMALY_DAYS} days",
             table(rows, caption=f"Newest first; {odd.height} in all" if odd.height else "Anomalies"),
             anchor="anomalies",
             link="Anomalies")


def health_section(page: Page, health: pl.DataFrame) -> None:
    if health.height:
        since = pl.col("week").max() - timedelta(weeks=HEALTH_WEEKS - 1)
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
