"""Resource health as the report asks it: which bots run the most over their *own* usual load,
and since when. A bot that always runs at 90% is not news; one that went from 40% to 70% is.

From ``bot_daily``'s daily p95 loads: per bot and resource (cpu, memory), its load **now** is
the median daily p95 of the last ``RECENT_DAYS`` days, its **usual** the median of the
``USUAL_DAYS`` before them; a bot is over its usual by ``now - usual`` points (the larger of the
two resources), and it has been since the first day of its last stretch of days whose p95
stayed more than ``MARGIN`` points above usual (gaps are not a break).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from typing import NamedTuple

import polars as pl

RECENT_DAYS = 7
USUAL_DAYS = 28
MARGIN = 10.0  # points over the usual p95 that count as "over"
RESOURCES = ("cpu", "memory")
# Rows of bot_daily a pass over bots holds (RECENT_DAYS + USUAL_DAYS a bot at most): what the
# report's per-bot lists cost, whatever the directory's size (docs/design.md, "Memory").
PASS_ROWS = 100_000


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


def bot_ranges(ids: pl.LazyFrame, days: int) -> list[tuple[str | None, str | None]]:
    """Half-open ``bot_id`` ranges ``[lo, hi)`` (None = unbounded) of ``ids``' bots, cut so
    that a range's bots hold about ``PASS_ROWS`` rows over ``days`` days."""
    step = max(1, PASS_ROWS // max(days, 1))
    cuts = ids.select(pl.col("bot_id").unique().sort().gather_every(step, offset=step)).collect()
    bounds: list[str | None] = [None, *cuts["bot_id"].to_list(), None]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


class TopRows(NamedTuple):
    """The first ``rows`` rows in the order of the columns ``by``, each ``descending`` or not."""

    by: tuple[str, ...]
    descending: tuple[bool, ...]
    rows: int


def top_in_passes(query: Callable[[pl.LazyFrame], pl.LazyFrame], daily: pl.LazyFrame,
                  ranges: list[tuple[str | None, str | None]], top: TopRows) -> pl.DataFrame:
    """The ``top`` rows of ``query`` (a per-bot list, cut to the same top rows) over ``daily``,
    one range of bots at a time: each bot lies in one range, so the top of every range's top
    is the top of all."""
    best: pl.DataFrame | None = None
    for lo, hi in ranges:
        rows = daily
        if lo is not None:
            rows = rows.filter(pl.col("bot_id") >= lo)
        if hi is not None:
            rows = rows.filter(pl.col("bot_id") < hi)
        found = query(rows).collect()
        best = found if best is None else pl.concat([best, found]).sort(
            top.by, descending=top.descending).head(top.rows)
    assert best is not None  # at least one range
    return best
