"""Chart options for the report, as plain JSON that ECharts reads."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import polars as pl


def pairs(frame: pl.DataFrame, x: str, y: str) -> list[list[Any]]:
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


class Bars(NamedTuple):
    """The bars of a bar chart, the first on top: each one's label and value and, shown as
    text by report.js, its tooltip lines (``hover``: a bot's name and id, what happened)."""

    labels: list[str]
    values: list[float]
    hover: list[list[str]] | None = None


def bar_chart(title: str, bars: Bars, name: str, *, log: bool = False) -> dict[str, Any]:
    """A horizontal bar chart of ``bars``, its series called ``name``; ``log`` draws the values
    on a log axis."""
    labels, values, hover = bars
    option: dict[str, Any] = {
        "title": {"text": title, "textStyle": {"fontSize": 14}},
        "tooltip": {"trigger": "axis", "axisPointer": {"type": "shadow"}},
        "grid": {"left": 190, "right": 40, "top": 40, "bottom": 30},
        "xAxis": {"type": "log" if log else "value"},
        "yAxis": {"type": "category", "data": labels[::-1],
                  "axisLabel": {"width": 170, "overflow": "truncate"}},
        "series": [{"name": name, "type": "bar", "data": values[::-1]}],
    }
    if hover is not None:
        option["hover"] = hover[::-1]
    return option


def band_series(metric: str, history: pl.DataFrame, ahead: pl.DataFrame) -> list[dict[str, Any]]:
    """History, the forecast's median path and its 80% band (a stacked area from lo80 to
    hi80, the usual way to draw a band in ECharts). The path starts at the model's level on
    its last day: where the trend says the bot is, which a spike on that day does not move."""
    start = [[str(r["as_of"]), math.expm1(r["level"])] for r in ahead.head(1).iter_rows(named=True)]
    band = ahead.with_columns(width=pl.col("hi80") - pl.col("lo80"))
    return [
        line(metric, pairs(history, "day", metric)),
        line("forecast", start + pairs(ahead, "day", "forecast"),
             lineStyle={"type": "dashed"}),
        line("80% low", pairs(band, "day", "lo80"), stack="band", lineStyle={"opacity": 0},
             tooltip={"show": False}),
        line("80% interval", pairs(band, "day", "width"), stack="band",
             lineStyle={"opacity": 0}, areaStyle={"opacity": 0.25}, tooltip={"show": False}),
    ]
