"""Alerts, the decision: what each destination is told on each run of a cron job, from the
run's facts and the ledger's memory (a pure function: runs and answers are values here)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

from pipeline.alerts._alert import Alert, Anomaly, Bot, LockHolder, RunOutcome, Runs, event
from pipeline.alerts._decide import Facts, Plan, decide
from pipeline.alerts._ledger import Entry, Memory
from pipeline.core import AlertSettings, Destination, Shard

T0 = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)  # a Tuesday, 09:00
HOUR = timedelta(hours=1)
OPS = Destination("ops", "discord", kinds=("failed", "partial", "lock", "stale", "resolved"))
ANALYSTS = Destination("analysts", "slack", kinds=("event", "milestone"))
CONFIG = AlertSettings(destinations=(OPS, ANALYSTS), stale_after="6h", lock_after="2h",
                       repeat_interval="24h", give_up_after="3d")


class Cron:
    """An hourly cron job's runs, each deciding against the ledger the runs before it left."""

    def __init__(self, config: AlertSettings = CONFIG) -> None:
        self.config = config
        self.memory = Memory()
        self.now = T0
        self.n = 0
        self.last_complete: tuple[str, datetime] | None = ("r0", T0 - HOUR)
        self.failing: list[tuple[str, datetime]] = []

    def run(self, status: str, *, events: tuple[Alert, ...] = (), down: tuple[str, ...] = (),
            shard: Shard | None = None) -> Plan:
        """A run ending ``status``; destinations in ``down`` answer nothing."""
        self.n += 1
        run_id = f"r{self.n}"
        run = RunOutcome(run_id, status, "GET /bots could not connect; check --base-url",
                         self.now, shard or Shard())
        if status in ("failed", "partial"):
            self.failing.append((run_id, self.now))
        runs = Runs(self.last_complete, self.failing[0] if self.failing else None,
                    len(self.failing), T0 - 2 * HOUR, f"{run_id} {status}")
        plan = decide(Facts(self.now, run, runs, events=events), self.memory, self.config)
        self._record(plan, run_id, down)
        if status == "complete":
            self.last_complete, self.failing = (run_id, self.now), []
        self.now += HOUR
        return plan

    def blocked(self, holder: LockHolder, down: tuple[str, ...] = ()) -> Plan:
        runs = Runs(self.last_complete, self.failing[0] if self.failing else None,
                    len(self.failing), T0 - 2 * HOUR, "")
        plan = decide(Facts(self.now, None, runs, holder=holder), self.memory, self.config)
        self._record(plan, None, down)
        self.now += HOUR
        return plan

    def _record(self, plan: Plan, run_id: str | None, down: tuple[str, ...]) -> None:
        entries = [Entry(a, name, "failed" if name in down else "delivered", 1,
                         "could not connect" if name in down else "HTTP 204", self.now, run_id)
                   for name, alerts in plan.sends.items() for a in alerts]
        self.memory.add([*entries, *plan.given_up])

    def wait(self, delta: timedelta) -> None:
        self.now += delta


def told(plan: Plan) -> dict[str, list[str]]:
    return {name: [a.title for a in alerts] for name, alerts in plan.sends.items()}


def test_a_failing_job_is_told_once_reminded_after_the_interval_then_resolved() -> None:
    cron = Cron()
    first = cron.run("failed")
    assert told(first) == {"ops": ["botstats run failed"]}
    (alert,) = first.sends["ops"]
    assert alert.key == "failed:r1" and alert.since == T0
    assert "why: GET /bots could not connect; check --base-url" in alert.lines
    for _ in range(23):  # every hour for a day: nothing new to say
        assert told(cron.run("failed")) == {}
    reminder = cron.run("failed")  # 24 h after the first
    assert told(reminder) == {"ops": ["Still: botstats run failed"]}
    assert reminder.sends["ops"][0].lines[2] == \
        "not complete since 2026-11-24 09:00 UTC (1d, 25 runs)"
    assert told(cron.run("failed")) == {}
    back = cron.run("complete")  # 26 h after the first failure
    assert told(back) == {"ops": ["Resolved: runs complete again after 1d 2h"]}
    (resolved,) = back.sends["ops"]
    assert resolved.key == "resolved:r1" and resolved.facts["out_seconds"] == 26 * 3600
    assert "out 1d 2h, from 2026-11-24 09:00 UTC to 2026-11-25 11:00 UTC" in resolved.lines
    assert told(cron.run("complete")) == {}
    # The next failure is a new condition: told at once, since its own first run.
    again = cron.run("failed")
    assert told(again) == {"ops": ["botstats run failed"]}
    assert again.sends["ops"][0].key == "failed:r29"


def test_a_partial_run_then_a_failed_one_is_one_condition_told_as_it_gets_worse() -> None:
    cron = Cron()
    assert told(cron.run("partial")) == {"ops": ["botstats run ended partial"]}
    assert told(cron.run("partial")) == {}
    worse = cron.run("failed")
    assert told(worse) == {"ops": ["botstats run failed"]}
    assert worse.sends["ops"][0].incident == "r1"  # since the first partial run
    assert worse.sends["ops"][0].since == T0
    back = cron.run("complete")
    assert [a.key for a in back.sends["ops"]] == ["resolved:r1"]  # one end for the condition


def test_each_destination_gets_only_the_kinds_it_takes() -> None:
    cron = Cron()
    spike = event(Bot("42", "MegaMusic"),
                  Anomaly(date(2026, 11, 23), "spike", "users x4.1 for 1 day", 4.3, None))
    plan = cron.run("failed", events=(spike,))
    assert told(plan) == {"ops": ["botstats run failed"],
                          "analysts": ["MegaMusic: users x4.1 for 1 day"]}
    # The event is told once; the next run finds it again in the exports.
    assert told(cron.run("complete", events=(spike,))) == {
        "ops": ["Resolved: runs complete again after 1h"]}


def test_events_of_one_run_are_one_alert_each_told_once() -> None:
    cron = Cron()
    events = tuple(event(Bot(str(i), f"Bot{i}"),
                         Anomaly(date(2026, 11, 23), "drop", "guilds -40% for 1 day",
                                 4.0 + i / 10, None))
                   for i in range(5))
    plan = cron.run("complete", events=events)
    assert [a.key for a in plan.sends["analysts"]] == [f"event:{i}:2026-11-23" for i in range(5)]
    assert told(cron.run("complete", events=events)) == {}
    new = event(Bot("9", "Bot9"),
                Anomaly(date(2026, 11, 24), "spike", "users x3.0 for 1 day", 5.0, None))
    assert told(cron.run("complete", events=(*events, new))) == {
        "analysts": ["Bot9: users x3.0 for 1 day"]}


def test_a_destination_down_is_tried_again_by_the_next_runs_then_given_up() -> None:
    cron = Cron()
    spike = event(Bot("42", "MegaMusic"),
                  Anomaly(date(2026, 11, 23), "spike", "users x4.1 for 1 day", 4.3, None))
    plan = cron.run("complete", events=(spike,), down=("analysts",))
    assert told(plan) == {"analysts": ["MegaMusic: users x4.1 for 1 day"]}
    assert told(cron.run("complete", events=(spike,))) == {
        "analysts": ["MegaMusic: users x4.1 for 1 day"]}  # delivered by the next run
    assert told(cron.run("complete", events=(spike,))) == {}
    # Down for longer than [alerts].give_up_after: tried every run, then given up, once.
    other = event(Bot("7", "Other"),
                  Anomaly(date(2026, 11, 24), "drop", "users -50% for 1 day", 4.5, None))
    for _ in range(72):
        assert told(cron.run("complete", events=(other,), down=("analysts",))) == {
            "analysts": ["Other: users -50% for 1 day"]}
    gave_up = cron.run("complete", events=(other,), down=("analysts",))
    assert told(gave_up) == {}
    assert [(e.alert.key, e.outcome) for e in gave_up.given_up] == [
        ("event:7:2026-11-24", "given_up")]
    assert cron.run("complete", events=(other,)).empty


def test_a_condition_given_up_is_tried_again_once_a_repeat_interval() -> None:
    cron = Cron()
    for hour in range(72):  # ops down for three days while runs fail: tried every run
        assert told(cron.run("failed", down=("ops",))) == {"ops": ["botstats run failed"]}, hour
    gave_up = cron.run("failed", down=("ops",))
    assert told(gave_up) == {} and [e.outcome for e in gave_up.given_up] == ["given_up"]
    for _ in range(23):
        assert cron.run("failed", down=("ops",)).empty
    assert told(cron.run("failed")) == {"ops": ["botstats run failed"]}  # a day on: delivered
    assert told(cron.run("complete")) == {"ops": ["Resolved: runs complete again after 4d 1h"]}


def test_resolved_goes_only_where_the_condition_was_told_and_is_retried_as_first_said() -> None:
    mail = Destination("mail", "email", kinds=("failed", "resolved"), host="smtp.example.com",
                       sender="botstats@example.com", to=("ops@example.com",))
    cron = Cron(replace(CONFIG, destinations=(OPS, mail)))
    assert told(cron.run("failed", down=("mail",))) == {
        "ops": ["botstats run failed"], "mail": ["botstats run failed"]}
    # mail never got the failure: the end of it goes to ops only; ops is down for it.
    back = cron.run("complete", down=("ops",))
    assert told(back) == {"ops": ["Resolved: runs complete again after 1h"]}
    cron.wait(5 * HOUR)
    retry = cron.run("failed")  # a new failure meanwhile: the old end is still told, as said
    assert told(retry) == {"ops": ["botstats run failed",
                                   "Resolved: runs complete again after 1h"],
                           "mail": ["botstats run failed"]}
    assert retry.sends["ops"][1] == back.sends["ops"][0]


def test_a_lock_held_too_long_and_a_stale_archive_are_told_by_the_runs_it_keeps_out() -> None:
    cron = Cron()
    holder = LockHolder("run", "r-stuck", 4242, "host1", T0 - 30 * 60 * timedelta(seconds=1))
    assert told(cron.blocked(holder)) == {}  # held 30 min: under [alerts].lock_after
    assert told(cron.blocked(holder)) == {}
    plan = cron.blocked(holder)  # 2 h 30 min
    assert told(plan) == {"ops": ["botstats archive lock held for 2h 30m by run (pid 4242)"]}
    assert "holder: run r-stuck, pid 4242 on host1, since 2026-11-24 08:30 UTC" in plan.sends["ops"][0].lines
    for _ in range(2):
        assert told(cron.blocked(holder)) == {}
    stale = cron.blocked(holder)  # 6 h since the last complete run
    assert told(stale) == {"ops": ["botstats archive stale: no complete harvest for 6h"]}
    back = cron.run("complete")
    assert sorted(told(back)["ops"]) == ["Resolved: a harvest completed after 7h",
                                         "Resolved: the archive lock was released after 6h 30m"]


def test_a_condition_of_one_shard_is_resolved_by_that_shard_only() -> None:
    cron = Cron()
    one = Shard(1, 2)
    plan = cron.run("failed", shard=one)
    assert told(plan) == {"ops": ["botstats run failed (shard 1/2)"]}
    assert plan.sends["ops"][0].key == "failed:r1@1/2"
    assert told(cron.run("complete", shard=Shard(0, 2))) == {}
    assert told(cron.run("complete", shard=one)) == {
        "ops": ["Resolved (shard 1/2): runs complete again after 2h"]}


def test_no_destinations_no_alerts() -> None:
    cron = Cron(AlertSettings())
    assert cron.run("failed").empty
