"""The trend jobs: each a LazyFrame -> LazyFrame function over raw records or daily rows, testable on a ten-row frame."""

from __future__ import annotations

import polars as pl

GROWTH_DAYS = (1, 7, 30)

# A median absolute deviation times this is the standard deviation of a normal distribution
# (1 / the normal's 75th percentile): the robust spread of the anomalies and the forecasts.
MAD_SIGMA = 1.482602218505602
# A mean absolute deviation times this is a normal's standard deviation (sqrt(pi / 2)); and a
# median of n draws has a standard error of this many standard deviations / sqrt(n).
MEAN_AD_SIGMA = 1.2533141373155
MEDIAN_SE = 1.2533141373155


RANK_DAYS = (1, 7)


MOVER_DAYS = (7, 30)


SIZE_METRICS = ("guilds", "users")


def utc_day(column: str) -> pl.Expr:
    """The UTC calendar day of a timestamp column, whatever zone the connection handed over."""
    return pl.col(column).dt.convert_time_zone("UTC").dt.date()


def bot_daily(stats: pl.LazyFrame, carry: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """One row per bot and UTC day from raw ``bot_stats`` rows (any order, whole bots).

    ``commands_executed`` is the number run during the day: each record adds ``cur - prev`` over
    the bot's previous non-null counter value, or ``cur`` when the counter went down (it was
    reset and counted up from 0 again). A bot's first record adds nothing (what it ran before is
    unknown), so a day whose records add nothing is null, not 0. After a gap, the first record
    carries what ran during the gap. ``commands_counter`` is the counter's last non-null value
    up to the end of the day (carried over days without one): what the next day counts from.

    ``carry`` (bot_id, commands_counter) is each bot's counter before ``stats`` begin, when
    they start in the middle of its history. Records at the same instant are taken in
    ``stat_id`` order (when given), so any slice of the archive orders them alike.
    """
    cmd = pl.col("commands_executed")
    prev = pl.col("_prev")
    rows = stats.with_columns(_seq=pl.lit(1, pl.Int8))
    if carry is not None:
        carried = carry.select("bot_id", "commands_counter", _seq=pl.lit(0, pl.Int8))
        rows = pl.concat([carried.rename({"commands_counter": "commands_executed"}), rows],
                         how="diagonal_relaxed")
    # An integer bot code sorts faster than the string; the carried row comes first.
    bot_code = pl.col("bot_id").cast(pl.Categorical).to_physical().cast(pl.Int64)
    ties = ["stat_id"] if "stat_id" in stats.collect_schema() else []
    return (
        rows.with_columns(_bot=bot_code)
        .sort("_bot", "_seq", "recorded_at", *ties, maintain_order=True)
        .with_columns(
            day=utc_day("recorded_at"),
            _prev=cmd.forward_fill().shift(1).over("bot_id"),
            _counter=cmd.forward_fill().over("bot_id"),
        )
        .with_columns(
            _delta=pl.when(prev.is_null()).then(None).when(cmd >= prev).then(cmd - prev).otherwise(cmd),
            _reset=cmd < prev,
        )
        .filter(pl.col("_seq") == 1)
        .group_by("bot_id", "day")
        .agg(
            pl.col("users").last(ignore_nulls=True),
            pl.col("guilds").last(ignore_nulls=True),
            pl.col("shards").last(ignore_nulls=True),
            cpu_load_mean=pl.col("cpu_load").mean(),
            cpu_load_p95=pl.col("cpu_load").quantile(0.95, "linear"),
            memory_load_mean=pl.col("memory_load").mean(),
            memory_load_p95=pl.col("memory_load").quantile(0.95, "linear"),
            _cmd_sum=pl.col("_delta").sum(),
            _cmd_n=pl.col("_delta").count(),
            commands_resets=pl.col("_reset").sum().cast(pl.Int64),
            records=pl.len().cast(pl.Int64),
            commands_counter=pl.col("_counter").last(),
        )
        .with_columns(commands_executed=pl.when(pl.col("_cmd_n") > 0).then(pl.col("_cmd_sum")))
        .select(
            "bot_id", "day", "users", "guilds", "shards",
            "cpu_load_mean", "cpu_load_p95", "memory_load_mean", "memory_load_p95",
            "commands_executed", "commands_resets", "records", "commands_counter",
        )
    )


def bot_day_key() -> pl.Expr:
    """An Int64 ordered like (bot_id, day) in a frame sorted by them: bot ordinal << 32 | day.

    Day numbers of one bot differ by their distance in days; keys of different bots differ by
    more than 2**31, so "N days back" is a plain ``key - N`` lookup.
    """
    new_bot = (pl.col("bot_id") != pl.col("bot_id").shift(1)).fill_null(True)
    day = pl.col("day").cast(pl.Int32).cast(pl.Int64)
    return new_bot.cum_sum().cast(pl.Int64) * (1 << 32) + day


def with_days_ago(daily: pl.LazyFrame, columns: list[str], days: tuple[int, ...]) -> pl.LazyFrame:
    """Add ``<column>_<N>d_ago``: the bot's value on exactly day-N, for each N in ``days``.

    ``daily`` has one row per (bot_id, day). A bot with no record on day-N gets null: gaps are
    not filled from neighbouring days. The result is sorted by (bot_id, day).
    """
    keyed = daily.sort("bot_id", "day").with_columns(_key=bot_day_key())
    key = pl.col("_key")
    looked_up: list[pl.Expr] = []
    for n in days:
        # A binary search on the sorted key instead of a self-join: same answer, no hash table.
        at = key.search_sorted(key - n).clip(upper_bound=pl.len() - 1)
        found = key.gather(at) == key - n
        looked_up += [pl.when(found).then(pl.col(c).gather(at)).alias(f"{c}_{n}d_ago")
                      for c in columns]
    return keyed.with_columns(looked_up).drop("_key")


def bot_growth(daily: pl.LazyFrame) -> pl.LazyFrame:
    """Per bot and day: change and percent change of guilds and users over 1, 7 and 30 days,
    7-day rolling means and the 30-day compound daily growth rate.

    Changes compare with exactly day-N (null without a record then); percentages are of the
    day-N value (null when it is 0). ``*_mean_7d`` averages the days with a record among the
    seven ending on ``day``. ``*_cdgr_30d`` is ``((v / v_30d_ago) ** (1/30) - 1) * 100``, percent
    per day, null unless both values exist and the old one is above 0.
    """
    base = daily.select("bot_id", "day", "guilds", "users")
    joined = with_days_ago(base, list(SIZE_METRICS), GROWTH_DAYS)
    columns: list[pl.Expr] = []
    for m in SIZE_METRICS:
        value = pl.col(m)
        for n in GROWTH_DAYS:
            ago = pl.col(f"{m}_{n}d_ago")
            columns.append((value - ago).alias(f"{m}_change_{n}d"))
        for n in GROWTH_DAYS:
            ago = pl.col(f"{m}_{n}d_ago")
            columns.append(pl.when(ago != 0).then((value - ago) / ago * 100).alias(f"{m}_pct_{n}d"))
        columns.append(
            value.cast(pl.Float64).rolling_mean_by("day", window_size="7d").over("bot_id")
            .alias(f"{m}_mean_7d")
        )
        ago30 = pl.col(f"{m}_30d_ago")
        columns.append(
            pl.when((ago30 > 0) & (value >= 0))
            .then(((value / ago30) ** (1 / 30) - 1) * 100)
            .alias(f"{m}_cdgr_30d")
        )
    return joined.select("bot_id", "day", "guilds", "users", *columns)


def bot_ranks(daily: pl.LazyFrame) -> pl.LazyFrame:
    """Per bot and day: rank by guilds and by users among the bots reporting that day.

    Rank 1 is the largest; ties share the best rank ("min" ranking). ``*_rank_change_Nd`` is
    the rank on exactly day-N minus today's rank, so climbing is positive; null when the bot
    had no rank that day.
    """
    return rank_changes(ranked_by_day(daily))


def ranked_by_day(daily: pl.LazyFrame) -> pl.LazyFrame:
    """bot_id, day, guilds, users and each bot's rank by guilds and users that day."""
    return daily.select("bot_id", "day", "guilds", "users").with_columns(
        pl.col(m).rank("min", descending=True).over("day").cast(pl.Int64).alias(f"{m}_rank")
        for m in SIZE_METRICS
    )


def rank_changes(ranked: pl.LazyFrame) -> pl.LazyFrame:
    """bot_ranks from :func:`ranked_by_day` rows: the changes need only the bot's own days."""
    rank_cols = [f"{m}_rank" for m in SIZE_METRICS]
    joined = with_days_ago(ranked, rank_cols, RANK_DAYS)
    changes = [
        (pl.col(f"{m}_rank_{n}d_ago") - pl.col(f"{m}_rank")).alias(f"{m}_rank_change_{n}d")
        for m in SIZE_METRICS
        for n in RANK_DAYS
    ]
    return joined.select("bot_id", "day", "guilds", "users", *rank_cols, *changes)


def movers(growth: pl.LazyFrame, *, min_guilds: int, top: int) -> pl.LazyFrame:
    """Per day, window (7, 30), metric (guilds, users), measure (abs, pct) and direction: the
    ``top`` bots by change, ranked from 1.

    Only bots with at least ``min_guilds`` guilds on the window's first day take part, so a
    bot going from 1 to 3 guilds does not top the percent list. Gainers grew (change > 0),
    losers shrank (change < 0); ties go to the smaller bot_id.
    """
    groups = ["day", "window_days", "metric", "measure", "direction"]
    tops = []
    for n in MOVER_DAYS:
        start_guilds = pl.col("guilds") - pl.col(f"guilds_change_{n}d")
        in_window = growth.filter(pl.col(f"guilds_change_{n}d").is_not_null()
                                  & (start_guilds >= min_guilds))
        for m in SIZE_METRICS:
            for measure, value in (("abs", pl.col(f"{m}_change_{n}d").cast(pl.Float64)),
                                   ("pct", pl.col(f"{m}_pct_{n}d"))):
                for direction, sign in (("gainer", 1.0), ("loser", -1.0)):
                    # A partial top-k per day on two narrow columns, instead of sorting every
                    # bot every day; bot_id breaks ties so exactly `top` survive.
                    tops.append(
                        in_window.select("day", "bot_id", _score=value * sign)
                        .filter(pl.col("_score") > 0)
                        .group_by("day")
                        .agg(pl.col("bot_id", "_score").top_k_by(["_score", "bot_id"], k=top,
                                                                 reverse=[False, True]))
                        .explode("bot_id", "_score")
                        .with_columns(window_days=pl.lit(n, pl.Int64), metric=pl.lit(m),
                                      measure=pl.lit(measure), direction=pl.lit(direction))
                    )

    def pick(template: str) -> pl.Expr:
        """The column ``template`` names for each row's window and metric."""
        expr = pl.lit(None)
        for n in MOVER_DAYS:
            for m in SIZE_METRICS:
                expr = pl.when((pl.col("window_days") == n) & (pl.col("metric") == m)).then(
                    pl.col(template.format(n=n, m=m))).otherwise(expr)
        return expr

    change = pick("{m}_change_{n}d")
    end_value = pick("{m}")
    candidates = pl.concat(tops).join(growth, on=["bot_id", "day"], how="left").select(
        *groups, "bot_id",
        (end_value - change).alias("start_value"), end_value.alias("end_value"),
        change.alias("change"), pick("{m}_pct_{n}d").alias("pct_change"),
    )
    return rank_movers(candidates, top=top)


def rank_movers(candidates: pl.LazyFrame, *, top: int) -> pl.LazyFrame:
    """Rank mover rows within each list and keep the ``top``: the last step of :func:`movers`,
    and how the movers of several slices of bots merge (the top of a union of tops)."""
    groups = ["day", "window_days", "metric", "measure", "direction"]
    value = pl.when(pl.col("measure") == "abs").then(pl.col("change").cast(pl.Float64))
    sign = pl.when(pl.col("direction") == "gainer").then(1.0).otherwise(-1.0)
    return (
        candidates.with_columns(_score=value.otherwise(pl.col("pct_change")) * sign)
        .sort([*groups, "_score", "bot_id"], descending=[False] * len(groups) + [True, False])
        .with_columns(rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(groups))
        .filter(pl.col("rank") <= top)
        .select(*groups, "rank", "bot_id", "start_value", "end_value", "change", "pct_change")
    )


def resource_health(stats: pl.LazyFrame, daily: pl.LazyFrame, *, threshold: float) -> pl.LazyFrame:
    """Per bot and ISO week (``week`` is its Monday): p95 cpu and memory load over the week's
    records, days with a record, and days whose p95 load was above ``threshold`` percent
    (``cpu_hot_days``, ``memory_hot_days``, ``hot_days`` for either). Bot-weeks without any
    load figure are left out."""
    week = pl.col("day").dt.truncate("1w")
    load = (
        stats.with_columns(week=utc_day("recorded_at").dt.truncate("1w"))
        .group_by("bot_id", "week")
        .agg(
            cpu_load_p95=pl.col("cpu_load").quantile(0.95, "linear"),
            memory_load_p95=pl.col("memory_load").quantile(0.95, "linear"),
        )
    )
    cpu_hot = pl.col("cpu_load_p95") > threshold
    memory_hot = pl.col("memory_load_p95") > threshold
    days = (
        daily.with_columns(week=week)
        .group_by("bot_id", "week")
        .agg(
            days=pl.len().cast(pl.Int64),
            cpu_hot_days=cpu_hot.sum().cast(pl.Int64),
            memory_hot_days=memory_hot.sum().cast(pl.Int64),
            hot_days=(cpu_hot | memory_hot).sum().cast(pl.Int64),
        )
    )
    return (
        load.join(days, on=["bot_id", "week"], how="inner")
        .filter(pl.col("cpu_load_p95").is_not_null() | pl.col("memory_load_p95").is_not_null())
        .select("bot_id", "week", "cpu_load_p95", "memory_load_p95", "days",
                "cpu_hot_days", "memory_hot_days", "hot_days")
    )


def custom_daily(custom: pl.LazyFrame, carry: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """Per bot, UTC day and custom field name.

    A record whose value is numeric (``value_num``, booleans as 0/1) feeds a ``numeric`` row:
    ``records``, ``value_last``, ``value_min``, ``value_max``, ``value_mean``. Any other value
    feeds a ``text`` row: ``value_text`` (last of the day), ``changed_at`` (when that value first
    appeared after a different one, possibly days earlier) and ``changes`` (how many times the
    value changed that day; the field's first value counts as one). Null values are skipped.

    ``carry`` (bot_id, name, value_text, changed_at) is each text field's value before
    ``custom`` begins, when it starts in the middle of the history. Records at the same
    instant are taken in ``stat_id`` order (when given).
    """
    rows = custom.with_columns(_seq=pl.lit(1, pl.Int8))
    if carry is not None:
        rows = pl.concat([carry.select("bot_id", "name", "value_text", "changed_at",
                                       _seq=pl.lit(0, pl.Int8)), rows], how="diagonal_relaxed")
    ties = ["stat_id"] if "stat_id" in custom.collect_schema() else []
    ordered = rows.with_columns(day=utc_day("recorded_at")).sort(
        "bot_id", "name", "_seq", "recorded_at", *ties, maintain_order=True
    )
    keys = ["bot_id", "day", "name"]
    numeric = (
        ordered.filter(pl.col("value_num").is_not_null())
        .group_by(keys)
        .agg(
            records=pl.len().cast(pl.Int64),
            value_last=pl.col("value_num").last(),
            value_min=pl.col("value_num").min(),
            value_max=pl.col("value_num").max(),
            value_mean=pl.col("value_num").mean(),
        )
        .with_columns(kind=pl.lit("numeric"))
    )
    text = pl.col("value_text")
    changed = (text != text.shift(1)).fill_null(True).over("bot_id", "name")
    since: pl.Expr = pl.when("_changed").then(pl.col("recorded_at"))
    if carry is not None:
        since = pl.when(pl.col("_seq") == 0).then(pl.col("changed_at")).otherwise(since)
    texts = (
        ordered.filter(pl.col("value_num").is_null() & text.is_not_null())
        .with_columns(_changed=changed)
        .with_columns(_since=since.forward_fill().over("bot_id", "name"))
        .filter(pl.col("_seq") == 1)
        .group_by(keys)
        .agg(
            records=pl.len().cast(pl.Int64),
            value_text=text.last(),
            changed_at=pl.col("_since").last(),
            changes=pl.col("_changed").sum().cast(pl.Int64),
        )
        .with_columns(kind=pl.lit("text"))
    )
    return pl.concat([numeric, texts], how="diagonal_relaxed").select(
        "bot_id", "day", "name", "kind", "records", "value_last", "value_min", "value_max",
        "value_mean", "value_text", "changed_at", "changes",
    )


def directory_daily(daily: pl.LazyFrame, bots: pl.LazyFrame,
                    first_days: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """Per day: ``bots_reporting`` (bots with a record), ``guilds`` and ``users`` summed over
    them (null when none reported), ``bots_first_seen`` and ``bots_removed`` (from the ``bots``
    table: when the listing first showed a bot / stopped showing it) and
    ``bots_first_reporting`` (bots whose first stat record is that day). ``first_days``
    (bot_id, day) gives each bot's first day when ``daily`` is not its whole history."""
    reporting = daily.group_by("day").agg(
        bots_reporting=pl.len().cast(pl.Int64), guilds=pl.col("guilds").sum(),
        users=pl.col("users").sum(),
    )
    if first_days is None:
        first_days = daily.group_by("bot_id").agg(pl.col("day").min())
    first_reporting = first_days.group_by("day").agg(
        bots_first_reporting=pl.len().cast(pl.Int64))
    parts = [reporting, first_reporting, *listing_days(bots)]
    days = pl.concat([p.select("day") for p in parts]).unique()
    for part in parts:
        days = days.join(part, on="day", how="left")
    counts = ["bots_reporting", "bots_first_seen", "bots_first_reporting", "bots_removed"]
    return days.with_columns(pl.col(counts).fill_null(0)).select(
        "day", "bots_reporting", "guilds", "users", *counts[1:]
    )


def listing_days(bots: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Per day, from the ``bots`` table: (day, bots_first_seen) and (day, bots_removed)."""
    first_seen = bots.group_by(day=utc_day("first_seen_at")).agg(
        bots_first_seen=pl.len().cast(pl.Int64)
    )
    removed = (
        bots.filter(pl.col("removed_at").is_not_null())
        .group_by(day=utc_day("removed_at"))
        .agg(bots_removed=pl.len().cast(pl.Int64))
    )
    return first_seen, removed


def bot_names(bots: pl.LazyFrame) -> pl.LazyFrame:
    """Per bot, from the ``bots`` table: ``name`` as the listing shows it now (null when the
    service gives none), ``first_seen`` and ``removed`` (UTC days; null while listed). The
    report and notebooks name bots by it; the name is the service's, so it is untrusted text."""
    return bots.select(
        "bot_id", "name", first_seen=utc_day("first_seen_at"), removed=utc_day("removed_at"),
    ).sort("bot_id")
