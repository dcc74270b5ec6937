"""Resource health as the report asks it: which bots run the most over their *own* usual load,
and since when. A bot that always runs at 90% is not news; one that went from 40% to 70% is.

From ``bot_daily``'s daily p95 loads: per bot and resource (cpu, memory), its load **now** is
the median daily p95 of the last ``RECENT_DAYS`` days, its **usual** the median of the
``USUAL_DAYS`` before them; a bot is over its usual by ``now - usual`` points (the larger of the
two resources), and it has been since the first day of its last stretch of days whose p95
stayed more than ``MARGIN`` points above usual (gaps are not a break).
"""

from __future__ import annotations

from datetime import date, timedelta

import polars as pl

RECENT_DAYS = 7
USUAL_DAYS = 28
MARGIN = 10.0  # points over the usual p95 that count as "over"
RESOURCES = ("cpu", "memory")


def over_usual(daily: pl.LazyFrame, *, last: date, top: int) -> pl.LazyFrame:
    """The ``top`` bots most over their usual load on ``last`` (at least ``MARGIN`` points):
    bot_id, resource, now, usual, over (points), since (a date), hot_days (days of the last
    RECENT_DAYS with a p95 above the usual plus MARGIN)."""
    first = last - timedelta(days=RECENT_DAYS + USUAL_DAYS - 1)
    recent = last - timedelta(days=RECENT_DAYS - 1)
    window = daily.filter(pl.col("day").is_between(first, last)).select(
        "bot_id", "day", "cpu_load_p95", "memory_load_p95")
    per_resource = []
    for resource in RESOURCES:
        load = pl.col(f"{resource}_load_p95")
        rows = window.filter(load.is_not_null()).select("bot_id", "day", load=load)
        # One pass per bot, no joins: a join of every bot's days with its usual held the whole
        # window several times over (docs/design.md, "Memory").
        day, value = pl.col("day"), pl.col("load")
        usual = value.filter(day < recent).median()
        above = value > usual + MARGIN
        per_resource.append(
            rows.group_by("bot_id").agg(
                now=value.filter(day >= recent).median(),
                usual=usual,
                # The stretch ends with the bot's last day; it began after its last day not above.
                since=day.filter(day > day.filter(~above).max().fill_null(date.min)).min(),
                hot_days=(above & (day >= recent)).sum().cast(pl.Int64),
            )
            .filter(pl.col("now").is_not_null() & pl.col("usual").is_not_null())
            .with_columns(resource=pl.lit(resource), over=pl.col("now") - pl.col("usual")))
    return (
        pl.concat(per_resource)
        .sort("over", descending=True)
        .group_by("bot_id", maintain_order=True).first()
        .filter(pl.col("over") >= MARGIN)
        .sort(["over", "bot_id"], descending=[True, False])
        .head(top)
        .select("bot_id", "resource", "now", "usual", "over", "since", "hot_days")
    )
