"""The report's sections: each a function that adds a heading, tables and charts to the page from one dataset."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import polars as pl

from ..build import _forecast as forecast
from ..read._compare import ROWS, format_cell
from . import _health as health
from ._charts import Bars, band_series, bar_chart, line, pairs, time_chart
from ._names import Names

TOP = 10  # rows of each list (movers, rank changes, hot bots)
ANOMALY_DAYS = 14  # "recent" anomalies: the last two weeks of the export
ANOMALY_ROWS = 25
LEADING_EVENTS = 5  # the events of the week the anomaly section leads with
WEEK = 7


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


def table(frame: pl.DataFrame, *, caption: str = "", numbers: dict[str, str] | None = None,
          names: Names | None = None) -> str:
    """An HTML table of ``frame`` (escaped); ``numbers`` formats columns (``{col: ",.0f"}``).
    With ``names``, a ``bot_id`` column is shown as the bot's name (headed "bot"), its id on
    hover and, where the name does not tell the bot apart, beside it."""
    numbers = numbers or {}
    if frame.height == 0:
        return f'<p class="empty">{html.escape(caption or "Nothing")}: none.</p>'
    named = names is not None and "bot_id" in frame.columns
    head = "".join(f"<th>{html.escape('bot' if named and c == 'bot_id' else c)}</th>"
                   for c in frame.columns)
    body = []
    for row in frame.iter_rows():
        cells = []
        for column, value in zip(frame.columns, row, strict=True):
            if named and column == "bot_id":
                assert names is not None
                cells.append(names.cell(value))
                continue
            text = "-" if value is None else (format(value, numbers[column])
                                              if column in numbers else str(value))
            num = ' class="num"' if isinstance(value, int | float) else ""
            cells.append(f"<td{num}>{html.escape(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _hover(names: Names, bot_id: str, *more: str) -> list[str]:
    """A bar's tooltip lines: the bot's name, its id, and what else there is to say."""
    return [names.name(bot_id), bot_id, *more]


def directory_section(page: Page, directory: pl.DataFrame) -> None:
    if not directory.filter(pl.col("bots_reporting") > 0).height:
        # Nothing to draw: say so rather than draw empty axes.
        page.add("The directory", '<p class="empty">No bot has reported stats yet.</p>',
                 anchor="directory", link="Directory")
        return
    page.add(
        "The directory",
        page.chart(time_chart("Bots reporting", [line("bots reporting", pairs(
            directory, "day", "bots_reporting"))])),
        page.chart(time_chart("Total guilds and users", [
            line("guilds", pairs(directory, "day", "guilds")),
            line("users", pairs(directory, "day", "users"), yAxisIndex=1),
        ], y_names=("guilds", "users"))),
        anchor="directory", link="Directory",
    )


def movers_section(page: Page, movers: pl.DataFrame, names: Names) -> None:
    last = movers["day"].dt.max() if movers.height else date.min
    parts = []
    for window in (7, 30):
        rows = movers.filter((pl.col("day") == last) & (pl.col("window_days") == window)
                             & (pl.col("metric") == "guilds") & (pl.col("measure") == "abs"))
        gainers = rows.filter(pl.col("direction") == "gainer").sort("rank").head(TOP)
        losers = rows.filter(pl.col("direction") == "loser").sort("rank").head(TOP)
        if gainers.height:
            bots = gainers["bot_id"].to_list()
            parts.append(page.chart(bar_chart(
                f"Top guild gainers over {window} days (to {last})",
                Bars([names.label(b) for b in bots], gainers["change"].to_list(),
                     hover=[_hover(names, b) for b in bots]), "guilds gained"),
                height=60 + 26 * gainers.height))
        shown = ["rank", "bot_id", "start_value", "end_value", "change", "pct_change"]
        parts.append(table(gainers.select(shown), caption=f"Gainers, {window} days",
                           numbers={"pct_change": "+.1f", "change": "+,d"}, names=names))
        parts.append(table(losers.select(shown), caption=f"Losers, {window} days",
                           numbers={"pct_change": "+.1f", "change": "+,d"}, names=names))
    page.add("Top movers (guilds)", *parts, anchor="movers", link="Movers")


def ranks_section(page: Page, ranks: pl.DataFrame, names: Names) -> None:
    last = ranks.filter(pl.col("day") == pl.col("day").max()).filter(
        pl.col("guilds_rank_change_7d").is_not_null() & (pl.col("guilds_rank_change_7d") != 0))
    shown = ["bot_id", "guilds", "guilds_rank", "guilds_rank_change_7d", "users_rank",
             "users_rank_change_7d"]
    up = last.sort(["guilds_rank_change_7d", "guilds_rank"], descending=[True, False]).head(TOP)
    down = last.sort(["guilds_rank_change_7d", "guilds_rank"]).head(TOP)
    numbers = {"guilds": ",d", "guilds_rank_change_7d": "+d", "users_rank_change_7d": "+d"}
    page.add("Rank changes over 7 days (by guilds)",
             table(up.filter(pl.col("guilds_rank_change_7d") > 0).select(shown), caption="Climbed",
                   numbers=numbers, names=names),
             table(down.filter(pl.col("guilds_rank_change_7d") < 0).select(shown), caption="Fell",
                   numbers=numbers, names=names),
             anchor="ranks", link="Ranks")


def anomalies_section(page: Page, odd: pl.DataFrame, names: Names, last: date | None) -> None:
    """Leads with the events of the last week that matter most (by severity: the user-days
    they moved), then every event of the last two weeks; counter resets are counted, not
    listed (they move no one)."""
    if last is None:  # no day with a bot reporting: the events' own newest day
        newest = odd["day"].dt.max() if odd.height else None
        last = newest if isinstance(newest, date) else date.today()
    recent = odd.filter(pl.col("day") > last - timedelta(days=ANOMALY_DAYS))
    resets = recent.filter(pl.col("kind") == "counter_reset").height
    events = recent.filter(pl.col("kind") != "counter_reset").sort(
        ["severity", "day", "bot_id"], descending=[True, True, False])
    week = events.filter(pl.col("day") > last - timedelta(days=WEEK)).head(LEADING_EVENTS)
    shown = ["bot_id", "summary", "also", "day", "kind", "severity", "evidence"]
    parts = []
    if week.height:
        bots = week["bot_id"].to_list()
        moved = [round(10 ** s - 1) for s in week["severity"].to_list()]
        parts.append(page.chart(bar_chart(
            f"This week's events, by the user-days they moved (to {last})",
            Bars([names.label(b) for b in bots], moved,
                 hover=[_hover(names, b, w) for b, w in zip(bots, week["summary"], strict=True)]),
            "user-days moved", log=True), height=60 + 30 * week.height))
    parts.append(table(week.select(shown), caption="This week: the events that matter most",
                       numbers={"severity": ".1f"}, names=names))
    more = f"{events.height} in all" + (f"; and {resets} counter resets (restarts), not listed"
                                        if resets else "")
    parts.append(table(events.head(ANOMALY_ROWS).select(shown),
                       caption=f"Every event of the last {ANOMALY_DAYS} days, the most severe "
                               f"first ({more})",
                       numbers={"severity": ".1f"}, names=names))
    page.add(f"Anomalies: the events of the last {ANOMALY_DAYS} days", *parts,
             anchor="anomalies", link="Anomalies")


def health_section(page: Page, over: pl.DataFrame, hot: pl.DataFrame, names: Names) -> None:
    """Which bots run the most over their own usual load, and since when; and which ran hot
    (over ``[trends].health_threshold``) on most days of the last week."""
    parts = []
    if over.height:
        bots = over["bot_id"].to_list()
        parts.append(page.chart(bar_chart(
            "Over their own usual load (points of p95 load above their usual)",
            Bars([names.label(b) for b in bots], [round(v, 1) for v in over["over"].to_list()],
                 hover=[_hover(names, b, f"{r} p95 {now:.0f}% (usually {usual:.0f}%)",
                               f"since {since}" if since else "")
                        for b, r, now, usual, since in over.select(
                            "bot_id", "resource", "now", "usual", "since").iter_rows()]),
            "points over usual"), height=60 + 26 * over.height))
    parts.append(table(over, caption=f"Most over their usual load: p95 of the last {WEEK} days "
                                     f"against the {health.USUAL_DAYS} before, at least "
                                     f"{health.MARGIN:.0f} points over",
                       numbers={"now": ".0f", "usual": ".0f", "over": "+.0f"}, names=names))
    parts.append(table(hot, caption="Running hot in the last week (days of p95 load above "
                                    "the threshold)",
                       numbers={"cpu_load_p95": ".0f", "memory_load_p95": ".0f"}, names=names))
    page.add("Resource health", *parts, anchor="health", link="Health")


@dataclass(frozen=True)
class BotRows:
    """One bot's rows for its section: its ``daily`` stats, its forecast ``ahead`` (the
    model's path and band), and its ``custom`` fields."""

    bot_id: str
    daily: pl.DataFrame
    ahead: pl.DataFrame
    custom: pl.DataFrame


def bot_section(page: Page, bot: BotRows, names: Names) -> None:
    bot_id, daily, ahead, custom = bot.bot_id, bot.daily, bot.ahead, bot.custom
    parts = []
    for metric in forecast.METRICS:
        band = ahead.filter(pl.col("metric") == metric).sort("day")
        # The model the bot's own backtest chose, as a word: how the forecast bends.
        model = forecast.MODEL_WORDS.get(band["model"][0], band["model"][0]) if (
            band.height and "model" in band.columns and band["model"][0]) else None
        option = time_chart(f"{metric.capitalize()}, with the forecast's 80% band"
                            + (f" ({model})" if model else ""),
                            band_series(metric, daily, band))
        option["legend"]["data"] = [metric, "forecast", "80% interval"]  # not the band's base
        parts.append(page.chart(option))
    parts.append(page.chart(time_chart("Commands per day", [
        {"name": "commands", "type": "bar", "data": pairs(daily, "day", "commands_executed")}])))
    parts.append(page.chart(time_chart("CPU and memory load (%)", [
        line("cpu mean", pairs(daily, "day", "cpu_load_mean")),
        line("cpu p95", pairs(daily, "day", "cpu_load_p95"), lineStyle={"type": "dotted"}),
        line("memory mean", pairs(daily, "day", "memory_load_mean")),
        line("memory p95", pairs(daily, "day", "memory_load_p95"), lineStyle={"type": "dotted"}),
    ])))
    numeric = custom.filter(pl.col("kind") == "numeric")
    if numeric.height:
        parts.append(page.chart(time_chart("Custom series (daily mean)", [
            line(name, pairs(rows.sort("day"), "day", "value_mean"))
            for (name,), rows in numeric.group_by(["name"], maintain_order=True)
        ])))
    text = (custom.filter(pl.col("kind") == "text").sort("day")
            .group_by("name", maintain_order=True).last()
            .select("name", pl.col("value_text").alias("value"), "changed_at", "day"))
    if text.height:
        parts.append(table(text, caption="Custom text fields: latest value"))
    outlook = (ahead.filter(pl.col("horizon_days").is_in(list(forecast.HORIZONS)))
               .with_columns(model=pl.col("model").replace(forecast.MODEL_WORDS))
               .select("metric", "horizon_days", "day", "forecast", "lo80", "hi80", "model")
               .sort("metric", "horizon_days"))
    name = names.name(bot_id)
    parts.append(table(outlook, caption=f"Forecast for {name}",
                       numbers={"forecast": ",.0f", "lo80": ",.0f", "hi80": ",.0f"}))
    title = name if name == bot_id else f"{name} ({bot_id})"
    page.add(title, *parts, anchor=f"bot-{bot_id}", link=names.label(bot_id))


def compare_section(page: Page, bot_ids: list[str], daily: pl.DataFrame,
                    comparison: pl.DataFrame, names: Names) -> None:
    chart = page.chart(time_chart("Guilds, side by side", [
        line(names.label(b), pairs(daily.filter(pl.col("bot_id") == b), "day", "guilds"))
        for b in bot_ids]))
    rows = comparison.to_dicts()
    head = "".join(f'<th title="{html.escape(r["bot_id"])}">{html.escape(names.label(r["bot_id"]))}'
                   f"</th>" for r in rows)
    body = "".join(
        f"<tr><th>{html.escape(label)}</th>"
        + "".join(f'<td class="num">{html.escape(format_cell(r, column, fmt))}</td>' for r in rows)
        + "</tr>" for label, column, fmt in ROWS)
    page.add("Side by side", chart,
             f"<table class=\"compare\"><thead><tr><th></th>{head}</tr></thead>"
             f"<tbody>{body}</tbody></table>", anchor="compare", link="Side by side")
