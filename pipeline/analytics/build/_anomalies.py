"""Anomalies: the events of each bot's daily series, one row per event, said as a person would.

For each bot and metric (users, guilds, commands per day), on y = log(1 + value):

- the **usual level** of day t is the median of y over the ``LEVEL_DAYS`` days before it, plus
  the bot's usual distance from that median (``center``: the median of that distance over the
  ``anomaly_window`` days before). A growing bot is usually above its recent median by its
  growth, so growth, decline and slow drifts are not events;
- the **usual spread** is 1.4826 x the MAD of that distance over ``SPREAD_WINDOWS`` such windows
  (a normal sigma; a MAD of 28 days misjudges a bot's noise by a fifth or more either way, and
  a near-floor event is missed when it is judged too wide), never below one guild of the bot (users and commands come in guild-sized lumps) nor
  half a percent, so every score is finite and a flat series is not "infinitely" surprised;
- a day with fewer than ``anomaly_min_days`` days of that distance (a bot's first weeks, or one
  that reports now and then) is judged on the days it has instead (:func:`_young`: users and
  guilds; a fall from its 4th day on);
- a day **jumps** when it is more than ``anomaly_threshold`` spreads off its usual level and the
  change passes the floors: ``anomaly_min_pct`` up or down, and ``anomaly_min_guilds`` /
  ``anomaly_min_users`` in absolute terms (commands per day, noisier, must double or halve,
  and are not read on a reset day, the day after one or the day after a gap). A day that
  does not jump still **runs** when it and the next day or two are all on one side of its
  usual level, each at least half the relative floor off, and the day after them is back by
  half: a spike or a drop of 2 or 3 days, judged on the mean of its days (its score is the
  mean's, x sqrt of the days; its change, the mean, must pass the floors), so a near-floor
  event is not missed for one day's noise. A day **holds**
  when it and the ``HOLD_DAYS`` days after are all on one side of its usual level (projected),
  each at least half the relative floor off and half the step, with a mean score x 2 above the
  threshold and a median change past the floors: a step too small for one day's noise, but
  lasting. Each test wants the change to happen on its day (``STEP_SHARE`` of it since the
  median of the ``STEP_DAYS`` days before): a turn or a levelling off parts from the usual level
  a little every day;
- an **event** starts on a day that jumps, runs or holds, of any metric, with none in the ``RUN_GAP``
  days before: one row, led by the metric that moved most (the others, the cpu load and a
  restart are in ``also``; what the judgement rests on in ``evidence``). It is a
  ``level_shift`` when it holds, else a ``spike`` or a ``drop`` lasting its consecutive days
  off (at most ``HOLD_DAYS + 1``).

Besides: an ``outage`` is a silence of ``anomaly_outage_days`` to ``anomaly_window`` days by a
bot that had reported the two days before it, dated on the day it reported again (only then is
it known); a ``counter_reset`` is a restart of the command counter that is neither part of
another event nor routine (the bot did not restart in the window before).

The row of an event on day t reads only days t - SPREAD_WINDOWS x window - LEVEL_DAYS -
HOLD_DAYS .. t + HOLD_DAYS: an incremental run recomputes from HOLD_DAYS before its first changed day and looks
back :func:`lookback_days` (see _plan), and its rows equal a full build's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from functools import partial

import numpy as np
import polars as pl

from ...core import TrendSettings
from ._jobs import MAD_SIGMA, MEAN_AD_SIGMA, MEDIAN_SE, bot_day_key

METRICS = ("users", "guilds", "commands_executed")
KINDS = ("spike", "drop", "level_shift", "outage", "counter_reset")
LEVEL_DAYS = 7  # the usual level is the median of this many days before
SPREAD_WINDOWS = 2  # the usual spread is that of this many anomaly windows before
HOLD_DAYS = 3  # days after the first that tell a spike from a level shift
# Commands per day swing with weekdays and bursts of use: only a doubling or a halving is an
# event of their own.
COMMANDS_MIN_RATIO = 2.0
SHIFT_DAYS = 7  # a level shift stays: its severity counts a week of it
MIN_SPREAD = 0.005  # the smallest usual spread, in log units (half a percent)
# A young row's spread: what a few days cannot tell is taken as this much day-to-day noise
# (5%, in log units), as if seen on YOUNG_PRIOR_DAYS more days.
YOUNG_SPREAD = 0.05
YOUNG_PRIOR_DAYS = 3
YOUNG_CLIP = 4.0  # a change counts at most this many sigmas (of the changes' MAD) in its noise
# Its slope: from YOUNG_SLOPE_DAYS days on, when more than YOUNG_SLOPE_SE standard errors.
YOUNG_SLOPE_DAYS = 4
YOUNG_SLOPE_SE = 3.0
YOUNG_LEVEL_DAYS = 7  # its level: the median of its days of the last week
YOUNG_FALL_DAYS = 3  # days before a fall is judged (the first may have been a spike)
STEP_DAYS = 3  # an event jumps from the median of the days just before it...
STEP_SHARE = 0.75  # ... by at least this share of its change
RUN_GAP = 2  # flagged days this close to the one before continue its event
LABELS = {"users": "users", "guilds": "guilds", "commands_executed": "commands"}

ANOMALY_SCHEMA = pl.Schema({
    "bot_id": pl.String, "day": pl.Date, "kind": pl.String, "metric": pl.String,
    "first_day": pl.Date, "last_day": pl.Date, "days": pl.Int64,
    "value": pl.Float64, "baseline_median": pl.Float64, "baseline_mad": pl.Float64,
    "baseline_days": pl.Int64, "score": pl.Float64, "ratio": pl.Float64,
    "severity": pl.Float64, "summary": pl.String, "also": pl.String, "evidence": pl.String,
})


@dataclass(frozen=True, kw_only=True)
class _Event:
    """One row of the anomalies dataset (its columns: ``ANOMALY_SCHEMA``). The size and the
    baseline are the leading metric's; an outage and a counter reset have none."""

    bot_id: str
    day: date
    kind: str
    metric: str | None = None
    first_day: date
    last_day: date | None
    days: int | None
    value: float | None = None
    baseline_median: float | None = None
    baseline_mad: float | None = None
    baseline_days: int | None = None
    score: float | None = None
    ratio: float | None = None
    severity: float
    summary: str
    also: str | None = None
    evidence: str | None = None


def lookback_days(t: TrendSettings) -> int:
    """Days before an event's first day that its row reads."""
    return SPREAD_WINDOWS * t.anomaly_window + LEVEL_DAYS + HOLD_DAYS


def anomalies(daily: pl.LazyFrame, t: TrendSettings, *, since: date | None = None) -> pl.LazyFrame:
    """The events of ``daily`` (``bot_daily`` rows of whole bots, any order): one row each,
    with ``kind``, its size in ``summary`` and ``ratio``, and ``severity``. With ``since``,
    only events dated from then on (earlier rows are baseline only)."""
    columns = ("bot_id", "day", "users", "guilds", "commands_executed", "commands_resets",
               "cpu_load_p95", "records")
    find = partial(_find, t=t, since=since)
    return daily.select(columns).sort("bot_id", "day").map_batches(find, schema=ANOMALY_SCHEMA)


@dataclass(frozen=True)
class _Floors:
    """The smallest change that is an event: log ratios up and down, half of them (each day of
    a hold), and the absolute change in the metric's units."""

    up: float
    down: float
    half_up: float
    half_down: float
    absolute: float

    @classmethod
    def of(cls, name: str, t: TrendSettings) -> _Floors:
        if name == "commands_executed":
            rise, fall = COMMANDS_MIN_RATIO - 1, 1 - 1 / COMMANDS_MIN_RATIO
        else:
            rise = fall = min(t.anomaly_min_pct / 100, 0.99)
        absolute = t.anomaly_min_guilds if name == "guilds" else t.anomaly_min_users
        return cls(math.log1p(rise), -math.log1p(-fall), math.log1p(rise / 2),
                   -math.log1p(-fall / 2), absolute)

    def passed(self, resid: float, change: float) -> bool:
        """Whether a change (``resid`` in log units, ``change`` in the metric's) is an event."""
        relative = resid >= self.up if resid > 0 else -resid >= self.down
        return bool(relative and abs(change) >= self.absolute)

    def half(self, resid: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.where(resid > 0, resid >= self.half_up, -resid >= self.half_down)


@dataclass(frozen=True)
class _Batch:
    """The rows one call of the detector judges (``bot_daily`` of whole bots, sorted by bot and
    day): each row's bot-day key, whether the bot's command counter restarted that day, and
    whether the events shown can depend on its tests (the others, an incremental run's
    lookback, are only the usual of these)."""

    frame: pl.DataFrame
    key: np.ndarray
    resets: np.ndarray
    needed: np.ndarray


@dataclass
class _Metric:
    """One metric of every row: its usual level and the tests' results."""

    value: np.ndarray  # the day's value (NaN: not read)
    y: np.ndarray  # log(1 + value)
    level: np.ndarray  # usual level, log(1 + value)
    slope: np.ndarray  # usual change per day, log units
    resid: np.ndarray  # log(1 + value) - level
    days: np.ndarray  # days of the window with a distance from the median
    distance: np.ndarray  # log(1 + value) - median of the LEVEL_DAYS before
    spread: np.ndarray  # usual spread, where a test was tried (else NaN)
    jump: np.ndarray
    hold: np.ndarray
    score: np.ndarray  # the score that passed (a jump: the day's; a hold: its 4 days')
    off: np.ndarray  # days off after a jump's first (0..HOLD_DAYS)
    later: np.ndarray  # days with a value after the first, within HOLD_DAYS
    size: np.ndarray  # log ratio of the event: a spike's peak, a shift's median
    young: np.ndarray  # a young row's usual spread, from the days it has (NaN: not young)

    def ratio(self, i: int) -> float:
        """Row ``i``'s event as a ratio to its usual level."""
        return math.exp(self.size[i])

    def usual(self, i: int) -> float:
        """Row ``i``'s usual level, in the metric's units."""
        return float(np.expm1(self.level[i]))


@dataclass(frozen=True)
class _Around:
    """The rows of one metric its tests are tried on, and what the tests read around each: its
    next HOLD_DAYS days against its usual level projected (log distance ``later``, their
    ``later_value`` and ``later_usual``), its ``step`` since the days just before, and its
    usual value ``base``."""

    rows: np.ndarray
    later: np.ndarray
    later_value: np.ndarray
    later_usual: np.ndarray
    step: np.ndarray
    base: np.ndarray


def _find(daily: pl.DataFrame, *, t: TrendSettings, since: date | None) -> pl.DataFrame:
    frame = daily.with_columns(_key=bot_day_key())
    key = frame["_key"].to_numpy()
    if len(key) == 0:
        return pl.DataFrame(schema=ANOMALY_SCHEMA)
    before = np.concatenate([[-(1 << 62)], key[:-1]])
    resets = frame["commands_resets"].fill_null(0).to_numpy() > 0
    reset_before = np.concatenate([[False], resets[:-1]]) & (before == key - 1)
    whole = _whole_days(frame, t.anomaly_window)
    # The rows whose tests the events shown can depend on (a start's run, a reset's event):
    # the others (an incremental run's lookback) are only the usual of these.
    needed = np.ones(len(key), bool) if since is None else (
        frame["day"] >= since - timedelta(days=max(RUN_GAP, HOLD_DAYS))).to_numpy()
    batch = _Batch(frame, key, resets, needed)
    metrics: dict[str, _Metric] = {}
    for name in METRICS:
        value = frame[name].cast(pl.Float64).to_numpy().astype(np.float64)
        if name == "commands_executed":
            # A reset day's count misses what ran before the restart, and the next day's may
            # hide a second restart (a counter that had barely started again, restarted above
            # where it was); the day after a gap's covers several days; a day with fewer
            # records than usual (today, still going) misses some: none of them is a day's
            # commands.
            value = np.where((before == key - 1) & ~resets & ~reset_before & whole, value,
                             np.nan)
        metrics[name] = _usual(batch, value, t, young=name != "commands_executed")
    one_guild = 1.0 / (np.expm1(np.nan_to_num(metrics["guilds"].level, nan=0.0)) + 1.0)
    for name, metric in metrics.items():
        _test(metric, batch, one_guild, _Floors.of(name, t), t)
    flagged = np.zeros(len(key), bool)
    for metric in metrics.values():
        flagged |= metric.jump | metric.hold
    outage = _outages(key, before, frame["bot_id"].to_numpy(), t)
    starts = _starts(key, flagged | outage)
    shown = np.ones(len(key), bool) if since is None else (frame["day"] >= since).to_numpy()
    events: list[_Event] = []
    for i in np.flatnonzero(starts & shown).tolist():
        event = _outage_event(batch, i) if outage[i] else _moved_event(batch, i, metrics, t)
        if event is not None:
            events.append(event)
    taken = {(e.bot_id, e.day) for e in events}
    routine = _routine(key, resets, t.anomaly_window)
    for i in np.flatnonzero(resets & ~routine & shown).tolist():
        if (frame["bot_id"][i], frame["day"][i]) not in taken and not _in_event(i, key, starts):
            events.append(_reset_event(batch, i, t.anomaly_window))
    if not events:
        return pl.DataFrame(schema=ANOMALY_SCHEMA)
    return pl.DataFrame([asdict(e) for e in events], schema=ANOMALY_SCHEMA,
                        orient="row").sort("day", "bot_id")


def _whole_days(frame: pl.DataFrame, days: int) -> np.ndarray:
    """Rows with at least the bot's usual number of records a day (the median of the ``days``
    days before; any number when there are none)."""
    usual = frame.select(pl.col("records").cast(pl.Float64).rolling_median_by(
        "_key", f"{days}i", closed="left"))
    return (frame["records"].cast(pl.Float64) >= usual.to_series().fill_null(0)).to_numpy()


def _usual(batch: _Batch, value: np.ndarray, t: TrendSettings, *, young: bool) -> _Metric:
    """The usual level of every row of one metric (see the module docstring): over the window
    of ``anomaly_window`` days, or, with ``young``, for a needed row with fewer than
    ``anomaly_min_days`` days of it, over the days it has (:func:`_young`). The tests' columns
    are left empty."""
    window = f"{t.anomaly_window}i"
    y = pl.col("y")
    key = batch.key
    usual = pl.DataFrame({"key": key, "y": np.log1p(np.clip(value, 0, None))}).with_columns(
        y=pl.col("y").fill_nan(None),
    ).with_columns(
        median=y.rolling_median_by("key", f"{LEVEL_DAYS}i", min_samples=3, closed="left"),
    ).with_columns(distance=y - pl.col("median")).with_columns(
        center=pl.col("distance").rolling_median_by("key", window, closed="left"),
        days=pl.col("distance").is_not_null().cast(pl.Int64)
        .rolling_sum_by("key", window, closed="left"),
    )
    center = usual["center"].fill_null(0.0).to_numpy()
    level = usual["median"].fill_null(np.nan).to_numpy().astype(np.float64) + center
    logs = usual["y"].fill_null(np.nan).to_numpy().astype(np.float64)
    n = len(key)
    m = _Metric(
        value=value, y=logs, level=level,
        # The median of the LEVEL_DAYS before lags the day by half of them: center is the
        # bot's usual growth over that lag.
        slope=center / ((LEVEL_DAYS + 1) / 2),
        resid=logs - level,
        days=usual["days"].to_numpy().copy(),
        distance=usual["distance"].fill_null(np.nan).to_numpy().astype(np.float64),
        spread=np.full(n, np.nan), jump=np.zeros(n, bool), hold=np.zeros(n, bool),
        score=np.full(n, np.nan), off=np.zeros(n, np.int64), later=np.zeros(n, np.int64),
        size=np.full(n, np.nan), young=np.full(n, np.nan),
    )
    if young:
        _young(m, batch, t)
    return m


def _young(m: _Metric, batch: _Batch, t: TrendSettings) -> None:
    """The usual level and spread of the rows with too few days for the window's (a bot's
    first weeks, or one that reports now and then), from the days they have in the window:

    - the **slope** joins the median of the earlier half of those days to the median of the
      later half, when it is more than ``YOUNG_SLOPE_SE`` of its own standard errors, the
      median day-to-day change agrees with it (it is taken, if smaller), and there are
      ``YOUNG_SLOPE_DAYS`` days or more: a new bot's fast growth is its usual, and a noisy
      one's zigzag is not taken for a slope;
    - the **level** is the median of the days of the last ``YOUNG_LEVEL_DAYS`` (all of them
      when none is that recent), each carried to the row's day along the slope;
    - the **spread** of a day is the mean absolute deviation of the day-to-day changes from
      their median, each change at most ``YOUNG_CLIP`` sigmas of their MAD (a routine spike
      among a few days is two outlying changes), scaled to one day's noise, pulled towards ``YOUNG_SPREAD`` as if that had been seen on
      ``YOUNG_PRIOR_DAYS`` more days: a few days say little about a bot's noise. A median of
      k days is itself uncertain, and so is a slope carried over days: the spread of the
      row's distance from the level is sqrt(1 + pi / 2k) wider, plus the slope's.
    """
    key = batch.key
    rows = np.flatnonzero((m.days < t.anomaly_min_days) & ~np.isnan(m.y) & batch.needed)
    window = t.anomaly_window
    # The rows of each one's window before it: a run of rows (keys of a bot are sorted, and
    # other bots' lie further apart), as many columns as the longest run needs.
    reach = rows - np.searchsorted(key, key[rows] - window, side="left")
    rows, reach = rows[reach > 0], reach[reach > 0]
    if len(rows) == 0:
        return
    # (At least two columns: one day-to-day change, if none is there.)
    at = rows[:, None] - np.arange(1, max(2, int(reach.max())) + 1)[None, :]  # most recent first
    inside = np.arange(at.shape[1])[None, :] < reach[:, None]
    safe = np.where(inside, at, 0)
    prior = np.where(inside, m.y[safe], np.nan)
    days = np.where(inside & ~np.isnan(prior), key[safe], -1).astype(np.float64)
    days[days < 0] = np.nan
    seen = np.count_nonzero(~np.isnan(prior), axis=1)
    rows, prior, days, seen = rows[seen > 0], prior[seen > 0], days[seen > 0], seen[seen > 0]
    if len(rows) == 0:
        return
    # One day's noise, from the changes between consecutive days with a value (per day: a
    # gap's change is spread over it): their mean absolute deviation from their median, which
    # a few changes give more steadily than a MAD, scaled to a normal sigma of one day. Each
    # change counts at most YOUNG_CLIP times their MAD's sigma: a routine spike among a few
    # days makes two changes of its size, and would make the noise for weeks.
    if (np.isnan(prior) & (np.arange(prior.shape[1])[None, :] < seen[:, None])).any():
        prior, days = _packed(prior, days)  # a day without a value amid the others
    with np.errstate(invalid="ignore", divide="ignore"):
        changes = (prior[:, :-1] - prior[:, 1:]) / (days[:, :-1] - days[:, 1:])
    count = np.count_nonzero(~np.isnan(changes), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        dev = np.abs(changes - _median(changes, count)[:, None])
        cap = YOUNG_CLIP * MAD_SIGMA * _median(dev, count)
        cap = np.where(cap > 0, cap, np.inf)  # (most changes alike: no cap)
        spread_of = np.nansum(np.minimum(dev, cap[:, None]), axis=1) / count
    noise = np.where(count > 1, MEAN_AD_SIGMA * spread_of / math.sqrt(2), 0.0)
    day_sd = np.sqrt((count * noise**2 + YOUNG_PRIOR_DAYS * YOUNG_SPREAD**2)
                     / (count + YOUNG_PRIOR_DAYS))
    # The slope joins the median of the earlier half of the days to the median of the later
    # half, when it is clear of its own noise: carried over days, a noisy slope would move
    # the level more than the noise does.
    later_half = np.arange(prior.shape[1])[None, :] < ((seen + 1) // 2)[:, None]
    valid = ~np.isnan(prior)
    late, early = valid & later_half, valid & ~later_half
    n_late, n_early = late.sum(axis=1), early.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        distance = _median(np.where(late, days, np.nan), n_late) - _median(
            np.where(early, days, np.nan), n_early)
        middle = (_median(np.where(late, prior, np.nan), n_late)
                  - _median(np.where(early, prior, np.nan), n_early)) / distance
        slope_sd = MEDIAN_SE * day_sd * np.sqrt(1 / n_late + 1 / n_early) / distance
    # ...and when the day-to-day changes agree: a spike among few days moves the median of
    # a half, not the median change.
    with np.errstate(invalid="ignore"):
        steady = _median(changes, count)
        told = ((seen >= YOUNG_SLOPE_DAYS) & (np.abs(middle) > YOUNG_SLOPE_SE * slope_sd)
                & (np.sign(steady) == np.sign(middle)) & (np.abs(steady) >= np.abs(middle) / 2))
    slope = np.where(told, np.sign(middle) * np.minimum(np.abs(middle), np.abs(steady)), 0.0)
    today = key[rows].astype(np.float64)
    recent = ~np.isnan(prior) & (days >= (today - YOUNG_LEVEL_DAYS)[:, None])
    recent = np.where(recent.any(axis=1)[:, None], recent, ~np.isnan(prior))
    carried = np.where(recent, prior + slope[:, None] * (today[:, None] - days), np.nan)
    used = np.count_nonzero(recent, axis=1)
    level = _median(carried, used)
    lag = today - _median(np.where(recent, days, np.nan), used)
    m.level[rows], m.slope[rows] = level, slope
    m.resid[rows] = m.y[rows] - level
    m.days[rows] = seen
    m.young[rows] = np.sqrt(day_sd**2 * (1 + math.pi / (2 * np.minimum(used, LEVEL_DAYS)))
                            + np.where(told, (slope_sd * lag) ** 2, 0.0))


def _packed(values: np.ndarray, days: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's non-NaN entries moved to its front, in order (NaN after them)."""
    order = np.argsort(np.isnan(values), axis=1, kind="stable")
    return np.take_along_axis(values, order, axis=1), np.take_along_axis(days, order, axis=1)


def _test(m: _Metric, batch: _Batch, one_guild: np.ndarray, floors: _Floors,
          t: TrendSettings) -> None:
    """Fill in the jump (or run: :func:`_runs`) and hold tests of one metric's needed rows. The
    spread is computed only for rows at least half a floor off their usual level: no other row
    can pass a test.

    Each test also wants the change to happen on the day: the day is off the median of the
    ``STEP_DAYS`` days before it (carried along the slope) by at least half the change. A
    turn from growth to decline, or a drift, parts from the usual level a little every day,
    never in one step."""
    # (A young row's days are those it has, which may reach anomaly_min_days.)
    mature = np.isnan(m.young) & (m.days >= t.anomaly_min_days)
    # A young row judges a fall only from YOUNG_FALL_DAYS days on: the first day may have been
    # a spike, and a median of fewer days does not put it aside.
    young = ~np.isnan(m.young) & ((m.resid > 0) | (m.days >= YOUNG_FALL_DAYS))
    key = batch.key
    tried = np.flatnonzero((mature | young) & batch.needed & ~np.isnan(m.resid)
                           & floors.half(m.resid))
    spread = np.where(young[tried], m.young[tried], np.nan)
    grown = np.flatnonzero(mature[tried])
    spread[grown] = MAD_SIGMA * _mad(m.distance, key, tried[grown],
                                     SPREAD_WINDOWS * t.anomaly_window)
    m.spread[tried] = np.maximum(np.maximum(spread, one_guild[tried]), MIN_SPREAD)
    around = _Around(tried, *_ahead(key, m, tried), _step(key, m, tried),
                     np.expm1(m.level)[tried])
    later, step, base = around.later, around.step, around.base
    for j, i in enumerate(tried):
        r, s = m.resid[i], m.spread[i]
        sign = 1.0 if r > 0 else -1.0
        m.later[i] = int(np.count_nonzero(~np.isnan(later[j])))
        stepped = np.isnan(step[j]) or sign * step[j] >= STEP_SHARE * abs(r)
        if stepped and abs(r / s) > t.anomaly_threshold and floors.passed(
                r, m.value[i] - base[j]):
            m.jump[i], m.score[i], m.size[i] = True, r / s, r
            for k in range(HOLD_DAYS):
                d = later[j, k]
                if np.isnan(d) or sign * d / s <= t.anomaly_threshold or not floors.passed(
                        d, around.later_value[j, k] - around.later_usual[j, k]):
                    break
                m.size[i] = max(m.size[i], d) if sign > 0 else min(m.size[i], d)
                m.off[i] = k + 1
        four = np.concatenate([[r], later[j]])
        if np.isnan(four).any() or not np.all(np.sign(four) == sign) or not np.all(
                floors.half(four)):
            continue
        z4 = float(np.mean(four / s) * math.sqrt(HOLD_DAYS + 1))
        middle = float(np.median(four))
        # A step happens on its day and stays at its new level: a spike of three days, back
        # on the fourth, is off by less than half the step that day; and on a young row, a
        # ramp (fast growth, of a slope too few days tell) goes on moving after the first day.
        if np.min(np.abs(four)) < abs(middle) / 2 or not (
                np.isnan(step[j]) or sign * step[j] >= STEP_SHARE * abs(middle)) or (
                not mature[i] and abs(np.mean(later[j]) - r) > abs(middle) / 2):
            continue
        if abs(z4) > t.anomaly_threshold and floors.passed(middle, base[j] * math.expm1(middle)):
            m.hold[i], m.score[i], m.size[i] = True, z4, middle
    _runs(m, around, floors, t.anomaly_threshold)


def _runs(m: _Metric, around: _Around, floors: _Floors, threshold: float) -> None:
    """The run test of the tried rows that did not jump: a spike or a drop of 2 to HOLD_DAYS
    days, all on the side of the first, each at least half the relative floor off, back by
    half on the day after, judged on the mean of its days. (A row that also holds keeps the
    hold's score and size.)"""
    tried, later, step, base = around.rows, around.later, around.step, around.base
    r, s = m.resid[tried], m.spread[tried]
    sign = np.sign(r)
    open_ = ~m.jump[tried]  # not decided yet: a longer run may still be one
    found = np.zeros(len(tried), bool)
    mean = np.zeros(len(tried))
    days = np.zeros(len(tried), np.int64)
    with np.errstate(invalid="ignore"):
        for k in range(1, HOLD_DAYS):
            run = np.column_stack([r, later[:, :k]])
            open_ &= ~np.isnan(run).any(axis=1) & (np.sign(run) == sign[:, None]).all(axis=1)
            open_ &= floors.half(run).all(axis=1)
            now = run.mean(axis=1)
            back = open_ & (sign * later[:, k] < np.abs(now) / 2)
            relative = np.where(now > 0, now >= floors.up, -now >= floors.down)
            passed = (back & (np.abs(now / s) * math.sqrt(k + 1) > threshold) & relative
                      & (np.abs(base * np.expm1(now)) >= floors.absolute)
                      & (np.isnan(step) | (sign * step >= STEP_SHARE * np.abs(now))))
            found |= passed
            mean = np.where(passed, now, mean)
            days = np.where(passed, k, days)
            open_ &= ~back
    rows = tried[found]
    m.jump[rows], m.off[rows] = True, days[found]
    # The peak of the run's own days (those after it are back, or not part of it).
    k_cols = np.arange(HOLD_DAYS + 1)[None, :] <= days[:, None]
    whole = np.column_stack([r, later])
    peak = np.where(sign > 0, np.nanmax(np.where(k_cols, whole, -np.inf), axis=1),
                    np.nanmin(np.where(k_cols, whole, np.inf), axis=1))
    score = np.abs(mean / s) * np.sqrt(days + 1) * sign
    keep = found & ~m.hold[tried]
    m.score[tried[keep]], m.size[tried[keep]] = score[keep], peak[keep]


def _step(key: np.ndarray, m: _Metric, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``: its log value less the median of the ``STEP_DAYS`` days before it
    with a value, carried to its day along its slope (NaN when there are none)."""
    if len(rows) == 0:
        return np.empty(0)
    at = rows[:, None] - np.arange(1, STEP_DAYS + 1)[None, :]
    safe = np.maximum(at, 0)
    inside = (at >= 0) & (key[safe] >= (key[rows] - STEP_DAYS)[:, None]) & ~np.isnan(m.y[safe])
    lag = (key[rows][:, None] - key[safe]).astype(np.float64)
    carried = np.where(inside, m.y[safe] + m.slope[rows][:, None] * lag, np.nan)
    step: np.ndarray = m.y[rows] - _median(carried, np.count_nonzero(inside, axis=1))
    return step


def _mad(distance: np.ndarray, key: np.ndarray, rows: np.ndarray, window: int) -> np.ndarray:
    """MAD of ``distance`` over the ``window`` days before each of ``rows`` (one row per bot
    and day, so those days are among the ``window`` rows before)."""
    if len(rows) == 0:
        return np.empty(0)
    at = rows[:, None] - np.arange(1, window + 1)[None, :]
    inside = (at >= 0) & (key[np.maximum(at, 0)] >= (key[rows] - window)[:, None])
    win = np.where(inside, distance[np.maximum(at, 0)], np.nan)
    count = np.count_nonzero(~np.isnan(win), axis=1)
    middle = _median(win, count)
    return _median(np.abs(win - middle[:, None]), count)


def _median(win: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Median of the non-NaN entries of each row (NaN if none)."""
    rows = np.sort(win, axis=1)  # NaNs sort last
    k = np.maximum(count, 1)
    lo = np.take_along_axis(rows, ((k - 1) // 2)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(rows, (k // 2)[:, None], axis=1)[:, 0]
    return np.where(count > 0, (lo + hi) / 2, np.nan)


def _ahead(key: np.ndarray, m: _Metric,
           rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of ``rows``, its HOLD_DAYS next days against its own usual level projected:
    (log distance, value, projected usual value), NaN for a day without a value."""
    steps = np.arange(1, HOLD_DAYS + 1)
    wanted = key[rows][:, None] + steps[None, :]
    at = np.minimum(np.searchsorted(key, wanted), len(key) - 1)
    y = np.where(key[at] == wanted, m.y[at], np.nan)
    projected = m.level[rows][:, None] + steps[None, :] * m.slope[rows][:, None]
    return y - projected, np.expm1(y), np.expm1(projected)


def _outages(key: np.ndarray, before: np.ndarray, ids: np.ndarray,
             t: TrendSettings) -> np.ndarray:
    """Rows that end a silence of anomaly_outage_days..window days of a bot that had reported
    the two days before it."""
    same = np.concatenate([[False], ids[1:] == ids[:-1]])
    silent = np.where(same, key - before - 1, -1)
    two_back = np.concatenate([[-(1 << 62)] * 2, key[:-2]])
    same2 = np.concatenate([[False, False], ids[2:] == ids[:-2]])
    ends: np.ndarray = ((silent >= t.anomaly_outage_days) & (silent <= t.anomaly_window)
                        & same2 & (two_back == before - 1))
    return ends


def _starts(key: np.ndarray, flagged: np.ndarray) -> np.ndarray:
    """Flagged rows that begin a run: the same bot's two days before are not flagged (a spike's
    or a step's later days are part of it; a new jump after a quiet day or two is not)."""
    marks = set(key[flagged].tolist())
    out = flagged.copy()
    for i in np.flatnonzero(flagged):
        if any(key[i] - k in marks for k in range(1, RUN_GAP + 1)):
            out[i] = False
    return out


def _routine(key: np.ndarray, resets: np.ndarray, window: int) -> np.ndarray:
    """Rows with a reset in the ``window`` days before (of the same bot: keys of other bots lie
    further apart)."""
    at = key[resets]
    return np.searchsorted(at, key) > np.searchsorted(at, key - window)


def _in_event(i: int, key: np.ndarray, starts: np.ndarray) -> bool:
    """Whether row i lies within HOLD_DAYS after an event's first day."""
    lo = max(0, i - HOLD_DAYS)
    return bool(np.any(starts[lo:i] & (key[lo:i] >= key[i] - HOLD_DAYS)))


def _outage_event(batch: _Batch, i: int) -> _Event:
    """Row ``i`` ends a silence: the bot is back after the days it said nothing."""
    frame = batch.frame
    day = frame["day"][i]
    gap = int(frame["_key"][i] - frame["_key"][i - 1] - 1)
    first, last = day - timedelta(days=gap), day - timedelta(days=1)
    usual = frame["users"][i - 1]
    return _Event(bot_id=frame["bot_id"][i], day=day, kind="outage", first_day=first,
                  last_day=last, days=gap, ratio=0.0, severity=_severity(usual, 0.0, gap),
                  summary=f"no stats for {gap} days ({first} to {last})",
                  also="counter reset" if batch.resets[i] else None,
                  evidence=f"no record for {gap} days after reporting daily")


def _moved_event(batch: _Batch, i: int, metrics: dict[str, _Metric],
                 t: TrendSettings) -> _Event | None:
    """The event that starts on row ``i``, led by the metric that moved most (None: none
    moved; the row was flagged for an outage only)."""
    frame = batch.frame
    day = frame["day"][i]
    users = metrics["users"]
    moved = [(name, m) for name, m in metrics.items() if m.jump[i] or m.hold[i]]
    if not moved:
        return None
    shifts = [p for p in moved if p[1].hold[i]]
    name, m = max(shifts or moved, key=lambda p: abs(p[1].size[i]))
    # What moved with it: the other metrics off their usual level by more than the threshold
    # of spreads (their own floors aside: a viral day's guilds +15% is part of the story).
    others = [f"{LABELS[o]} {_change(math.exp(om.resid[i]))}" for o, om in metrics.items()
              if o != name and not np.isnan(om.spread[i])
              and abs(om.resid[i] / om.spread[i]) > t.anomaly_threshold]
    ratio = m.ratio(i)
    if m.hold[i]:
        kind, last, days = "level_shift", None, None
        said = f"{LABELS[name]} {_change(ratio)} since {day}"
        lasting = SHIFT_DAYS
    else:
        kind = "spike" if m.size[i] > 0 else "drop"
        days = int(m.off[i]) + 1
        last = day + timedelta(days=days - 1)
        # Off on every day there is so far: it may go on (or turn out a level shift).
        open_ = m.off[i] == m.later[i] < HOLD_DAYS
        said = (f"{LABELS[name]} {_change(ratio)} for {days} day{'s' if days > 1 else ''}"
                + (" so far" if open_ else ""))
        lasting = days
    load = _load_change(frame, i)
    if load:
        others.append(load)
    if batch.resets[i]:
        others.append("counter reset")
    usual_users = users.usual(i) if not np.isnan(users.level[i]) else None
    base = m.usual(i)
    return _Event(bot_id=frame["bot_id"][i], day=day, kind=kind, metric=name, first_day=day,
                  last_day=last, days=days, value=float(m.value[i]), baseline_median=base,
                  baseline_mad=base * math.expm1(float(m.spread[i])),
                  baseline_days=int(m.days[i]), score=float(m.score[i]), ratio=ratio,
                  severity=_severity(usual_users, ratio, lasting), summary=said,
                  also=", ".join(others) or None, evidence=_evidence(batch.key, i, m, t))


def _evidence(key: np.ndarray, i: int, m: _Metric, t: TrendSettings) -> str:
    """What the judgement of row ``i`` rests on: the day of a young bot's history, or the
    usual level and how many usual spreads off it the change was."""
    ratio = m.ratio(i)
    if np.isnan(m.young[i]):
        return (f"{_change(ratio)} against its usual {m.usual(i):,.0f}: {abs(m.score[i]):.1f} "
                f"usual spreads off ({int(m.days[i])} days)")
    first = int(key[np.searchsorted(key, key[i] - t.anomaly_window, side="left")])
    if first > key[i] - t.anomaly_window:
        return f"{_change(ratio)} on day {int(key[i]) - first + 1} of its history"
    return f"{_change(ratio)} against its {int(m.days[i])} reports of the last {t.anomaly_window} days"


def _reset_event(batch: _Batch, i: int, window: int) -> _Event:
    day = batch.frame["day"][i]
    return _Event(bot_id=batch.frame["bot_id"][i], day=day, kind="counter_reset",
                  metric="commands_executed", first_day=day, last_day=day, days=1, ratio=1.0,
                  severity=0.0, summary="commands counter reset (the bot restarted)",
                  evidence=f"no other restart in the {window} days before")


def _severity(usual_users: float | int | None, ratio: float, days: int) -> float:
    """log10 of the user-days an event moved: the bot's usual users x |ratio - 1| x days."""
    users = float(usual_users or 0.0)
    return round(math.log10(1.0 + users * abs(ratio - 1.0) * days), 3)


def _change(ratio: float) -> str:
    """"x3.4" for a doubling or more, else "+45%" / "-18%"."""
    if ratio >= 2:
        return f"x{ratio:.1f}"
    return f"{(ratio - 1) * 100:+.0f}%"


def _load_change(frame: pl.DataFrame, i: int) -> str | None:
    """"cpu +18 points" when the day's p95 cpu load is 10 or more points off the median of the
    LEVEL_DAYS days before."""
    cpu = frame["cpu_load_p95"]
    now = cpu[i]
    if now is None:
        return None
    key = frame["_key"]
    past = [cpu[j] for j in range(max(0, i - LEVEL_DAYS), i)
            if key[j] >= key[i] - LEVEL_DAYS and cpu[j] is not None]
    if len(past) < 3:
        return None
    moved = now - float(np.median(past))
    return f"cpu {moved:+.0f} points" if abs(moved) >= 10 else None
