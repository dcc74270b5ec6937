"""An alert, and what each kind says.

An :class:`Alert` is one thing to tell: a run that failed, a condition that goes on, its end, an
event of a bot, a milestone. Its ``key`` names the thing, the same on every run that sees it,
so the ledger can tell each thing once; its ``title`` and ``lines`` are the words, in bot names,
that every destination's format lays out its own way. The functions below write those words
from the facts (``_facts`` reads them into the values here: a run's outcome, the lock's holder,
the shard's runs, a bot's anomaly, a milestone and a forecast's pace); they do no I/O and decide
nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any, NamedTuple

from ..core import Shard

# The kinds about the job: they go on until a complete run, remind, and are resolved.
CONDITIONS = ("failed", "partial", "lock", "stale")
REMINDER = "Still: "  # a reminder's title begins so
LINE_MAX = 900  # characters of one line: a long error is cut, never a whole message


@dataclass(frozen=True)
class Alert:
    """One thing to tell. ``incident``: the condition a failed/partial/lock/stale alert belongs
    to (and a resolved alert closes); ``since``: when that began; ``shard``: the runs it is
    about ('' for the whole directory); ``bot_id``/``name``: the bot an event or a milestone
    is about; ``reminder``: told before, and still so."""

    kind: str
    key: str
    title: str
    lines: tuple[str, ...] = ()
    incident: str = ""
    since: datetime | None = None
    shard: str = ""
    bot_id: str = ""
    name: str = ""
    severity: float | None = None
    reminder: bool = False
    facts: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def repeats(self) -> bool:
        """Whether it reminds while it goes on (every [alerts].repeat_interval)."""
        return self.kind in CONDITIONS

    def as_dict(self) -> dict[str, Any]:
        """The alert as JSON-ready data: what the ledger keeps and a webhook receives."""
        out = asdict(self)
        out["lines"] = list(self.lines)
        out["since"] = self.since.isoformat() if self.since else None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Alert:
        values = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        values["lines"] = tuple(values.get("lines") or ())
        if values.get("since"):
            values["since"] = datetime.fromisoformat(values["since"])
        return cls(**values)


@dataclass(frozen=True)
class RunOutcome:
    """How the run the alerts follow ended, as `botstats run` reports it."""

    run_id: str | None
    status: str  # complete | partial | failed | interrupted
    message: str = ""
    started_at: datetime | None = None
    shard: Shard = field(default_factory=Shard)


@dataclass(frozen=True)
class LockHolder:
    """The job holding the archive lock, as its holder file names it."""

    job: str
    run_id: str
    pid: int | None
    host: str
    since: datetime

    def describe(self) -> str:
        return (f"{self.job} {self.run_id or '(no run id yet)'}, pid {self.pid or '?'} on "
                f"{self.host or '?'}")


@dataclass(frozen=True)
class Runs:
    """The shard's runs as far as alerts care: the latest complete one (its id and end), the
    first failed or partial one after it (its id and start), how many failed or partial runs
    there have been since, the first run of all, and the latest run in words."""

    last_complete: tuple[str, datetime] | None = None
    first_failing: tuple[str, datetime] | None = None
    failing_runs: int = 0
    first_run_at: datetime | None = None
    latest: str = ""


class Bot(NamedTuple):
    """A bot as its alerts name it: its id, and its name (the id when it has none)."""

    bot_id: str
    name: str


class Anomaly(NamedTuple):
    """One event of a bot in the anomaly export: its day, kind, summary, severity, and what
    else moved with it (None: nothing)."""

    day: date
    kind: str
    summary: str
    severity: float
    also: str | None


class Milestone(NamedTuple):
    """A size of a metric that a watched bot is told about reaching ([alerts].milestones)."""

    metric: str
    size: int


class Pace(NamedTuple):
    """A forecast that a bot reaches a milestone: the median path's day, the 80% band's first
    and last days (None: beyond the forecast), and the value it goes from, on ``as_of``."""

    day: date
    earliest: date | None
    latest: date | None
    value: float
    as_of: date


def span(delta: timedelta) -> str:
    """'2d 3h', '5h 12m', '40m', '12s': the two largest units."""
    seconds = max(0, int(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    return " ".join(parts[:2]) if parts else f"{secs}s"


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")


def clip(text: str, limit: int = LINE_MAX) -> str:
    """``text`` on one line, cut at ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def scoped(key: str, shard: Shard) -> str:
    """A key of one shard's runs: the shard appended when the runs are sharded."""
    return key if shard.whole else f"{key}@{shard}"


def _shard_note(shard: Shard) -> str:
    return "" if shard.whole else f" (shard {shard})"


def failure(run: RunOutcome, since: datetime, first_run: str, failing_runs: int,
            now: datetime) -> Alert:
    """A run that ended failed or partial: its reason and fix (the run's own message), and
    since when runs fail."""
    what = "failed" if run.status == "failed" else "ended partial"
    title = f"botstats run {what}{_shard_note(run.shard)}"
    lines = [f"why: {clip(run.message)}" if run.message else "why: (the run gave no reason)",
             f"run {run.run_id}: {run.status}",
             f"not complete since {stamp(since)} ({span(now - since)}, "
             f"{failing_runs} run{'s' if failing_runs != 1 else ''})",
             "more: `botstats status` shows the runs and their errors"]
    return Alert(run.status, scoped(f"{run.status}:{first_run}", run.shard), title,
                 tuple(lines), incident=scoped(first_run, run.shard), since=since,
                 shard="" if run.shard.whole else str(run.shard),
                 facts={"run_id": run.run_id, "status": run.status, "failing_runs": failing_runs})


def stale(shard: Shard, runs: Runs, since: datetime, limit: timedelta, now: datetime) -> Alert:
    """No complete harvest of ``shard`` within ``limit`` (``[alerts].stale_after``): none since
    ``since`` (the latest complete run's end, else the first run's start)."""
    last_complete = runs.last_complete
    if last_complete is None:
        ref = "never"
        first = f"no harvest has completed in this archive (runs since {stamp(since)})"
    else:
        ref, first = last_complete[0], (f"the latest complete harvest finished "
                                        f"{stamp(last_complete[1])}, {span(now - since)} ago")
    title = (f"botstats archive stale{_shard_note(shard)}: no complete harvest for "
             f"{span(now - since)}")
    lines = [first, f"limit: [alerts].stale_after = {span(limit)}",
             f"latest run: {runs.latest}" if runs.latest else "",
             "fix: check that cron runs `botstats run`; `botstats status` shows why runs ended"]
    key = scoped(f"stale:{ref}", shard)
    return Alert("stale", key, title, tuple(line for line in lines if line), incident=key,
                 since=since, shard="" if shard.whole else str(shard))


def lock(holder: LockHolder, limit: timedelta, now: datetime) -> Alert:
    """Another job has held the archive lock past ``limit`` (``[alerts].lock_after``)."""
    held = now - holder.since
    key = f"lock:{holder.pid}@{holder.host}:{holder.since.isoformat(timespec='seconds')}"
    title = f"botstats archive lock held for {span(held)} by {holder.job} (pid {holder.pid})"
    lines = [f"holder: {holder.describe()}, since {stamp(holder.since)}",
             f"limit: [alerts].lock_after = {span(limit)}; runs wait, then exit 75",
             f"fix: see whether that job is stuck (`ps {holder.pid}` on {holder.host}); a job "
             f"that is killed releases the lock"]
    return Alert("lock", key, title, tuple(lines), incident=key, since=holder.since,
                 facts={"pid": holder.pid, "host": holder.host})


def resolved(told: Alert, run_id: str | None, now: datetime) -> Alert:
    """The end of the condition ``told`` was about: the run that ended it, and for how long it
    was out."""
    since = told.since or now
    out = span(now - since)
    what = {"failed": "runs complete again", "partial": "runs complete again",
            "stale": "a harvest completed", "lock": "the archive lock was released"}[told.kind]
    shard = f" (shard {told.shard})" if told.shard else ""
    title = f"Resolved{shard}: {what} after {out}"
    was = told.title.removeprefix(REMINDER) if told.reminder else told.title
    lines = [f"was: {was}", f"out {out}, from {stamp(since)} to {stamp(now)}",
             f"resolved by run {run_id}" if run_id else ""]
    return Alert("resolved", f"resolved:{told.incident}", title,
                 tuple(line for line in lines if line), incident=told.incident, since=since,
                 shard=told.shard,
                 facts={"out_seconds": int((now - since).total_seconds()), "run_id": run_id,
                        "was": told.kind})


def event(bot: Bot, anomaly: Anomaly) -> Alert:
    """An anomaly event, in the bot's name: "MegaMusic: users x4.1 for 1 day"."""
    day, kind, summary, severity, also = anomaly
    detail = f"{day}, {kind.replace('_', ' ')}, severity {severity:.1f}"
    if also:
        detail += f"; also {also}"
    return Alert("event", f"event:{bot.bot_id}:{day}", f"{bot.name}: {summary}", (clip(detail),),
                 bot_id=bot.bot_id, name=bot.name, severity=severity,
                 facts={"day": str(day), "event": kind, "summary": summary})


def reached(bot: Bot, mark: Milestone, day: date, value: float) -> Alert:
    """A watched bot crossed a size on ``day``, and is at ``value`` now."""
    metric, size = mark
    return Alert("milestone", f"milestone:{bot.bot_id}:{metric}:{size}:reached",
                 f"{bot.name} reached {size:,} {metric}",
                 (f"on {day}; {value:,.0f} {metric} now",), bot_id=bot.bot_id, name=bot.name,
                 facts={"metric": metric, "size": size, "day": str(day), "value": value})


def on_pace(bot: Bot, mark: Milestone, pace: Pace) -> Alert:
    """A watched bot forecast to cross a size soon (from ``bot_forecast``)."""
    metric, size = mark
    band = f"80%: {pace.earliest or '?'} to {pace.latest or 'later'}"
    return Alert("milestone", f"milestone:{bot.bot_id}:{metric}:{size}:forecast",
                 f"{bot.name} is on pace to reach {size:,} {metric} around {pace.day}",
                 (f"{band}; {pace.value:,.0f} {metric} on {pace.as_of}",), bot_id=bot.bot_id,
                 name=bot.name,
                 facts={"metric": metric, "size": size, "day": str(pace.day),
                        "value": pace.value})


def sample(destination: str, now: datetime) -> Alert:
    """What `botstats alerts test` sends."""
    return Alert("test", f"test:{now.isoformat(timespec='seconds')}",
                 "botstats alerts test: this destination works",
                 (f"sent to destination {destination!r} at {stamp(now)} by `botstats alerts "
                  f"test`",))


def as_reminder(alert: Alert) -> Alert:
    """The alert told again while its condition goes on."""
    return replace(alert, reminder=True, title=f"{REMINDER}{alert.title}")
