"""Resource health as the report asks it: over the bot's own usual load, and since when."""

from __future__ import annotations

from datetime import date, timedelta

import polars as pl

from pipeline.analytics.report._health import (
    MARGIN,
    RECENT_DAYS,
    USUAL_DAYS,
    TopRows,
    bot_ranges,
    over_usual,
    top_in_passes,
)

LAST = date(2026, 11, 20)


def _daily(loads: dict[str, list[float]]) -> pl.LazyFrame:
    days = [LAST - timedelta(days=i) for i in range(RECENT_DAYS + USUAL_DAYS)][::-1]
    rows = [{"bot_id": bot, "day": day, "cpu_load_p95": load, "memory_load_p95": None}
            for bot, series in loads.items() for day, load in zip(days, series, strict=True)]
    return pl.LazyFrame(rows, schema={"bot_id": pl.String, "day": pl.Date,
                                      "cpu_load_p95": pl.Float64, "memory_load_p95": pl.Float64})


def test_the_bot_over_its_own_usual_is_named_with_its_stretch_and_the_always_busy_one_is_not() -> None:
    # "hot": 40 usual, then 70 for the last week but one day at 45 (the stretch starts after it).
    recent = [70.0] * RECENT_DAYS
    recent[1] = 45.0
    hot = [40.0] * USUAL_DAYS + recent
    busy = [90.0] * (USUAL_DAYS + RECENT_DAYS)  # always high: not news
    slight = [40.0] * USUAL_DAYS + [40.0 + MARGIN - 1] * RECENT_DAYS  # under the margin
    out = over_usual(_daily({"hot": hot, "busy": busy, "slight": slight}), last=LAST, top=10)
    assert out.collect().to_dicts() == [{
        "bot_id": "hot", "resource": "cpu", "now": 70.0, "usual": 40.0, "over": 30.0,
        "since": LAST - timedelta(days=RECENT_DAYS - 3), "hot_days": RECENT_DAYS - 1}]


def test_the_top_over_ranges_of_bots_is_the_top_over_all_of_them() -> None:
    # Six bots over their usual by 15..40 points, the top three spread over three ranges.
    loads = {f"bot{i}": [40.0] * USUAL_DAYS + [55.0 + 5 * (i % 6)] * RECENT_DAYS
             for i in range(6)}
    daily = _daily(loads)
    whole = over_usual(daily, last=LAST, top=3).collect()
    ranges = bot_ranges(pl.LazyFrame({"bot_id": sorted(loads)}), days=50_000)  # 2 bots each
    assert ranges == [(None, "bot2"), ("bot2", "bot4"), ("bot4", None)]
    passes = top_in_passes(lambda d: over_usual(d, last=LAST, top=3), daily, ranges,
                           TopRows(("over", "bot_id"), (True, False), 3))
    assert passes.equals(whole)
    assert passes["bot_id"].to_list() == ["bot5", "bot4", "bot3"]
