"""Alerts, the stage: runs told through the ledger in a real archive, against real receivers on
loopback: each thing once, reminders and "resolved" across runs, events and milestones from real
exports in bot names, a destination down recorded and delivered by the next run, a run kept out
by the lock telling it through the spool, and no secret kept anywhere."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _alerts_support import Answer, Receiver, free_port, receiver

from pipeline.alerts import Clock, LockHolder, RunOutcome, ledger_rows, notify_blocked, notify_run
from pipeline.archive import reader, writer
from pipeline.core import (
    AlertSettings,
    Destination,
    LockTimeout,
    Secret,
    Settings,
    load_settings,
)
from pipeline.operate import _runner as runner
from pipeline.operate._lock import run_lock

__all__ = ["receiver"]  # the fixture

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2025, 2, 4, 12, 0, tzinfo=UTC)  # the day after the trend fixture's last
HOUR = timedelta(hours=1)
TOKEN = "T0KENdoNotShow0123456789abcdef"


def destinations(receiver: Receiver) -> tuple[Destination, ...]:
    return (Destination("ops", "discord", kinds=("failed", "partial", "lock", "stale", "resolved"),
                        url=Secret(receiver.url(f"/ops/{TOKEN}"))),
            Destination("analysts", "slack", kinds=("event", "milestone"),
                        url=Secret(receiver.url(f"/analysts/{TOKEN}"))))


def config(receiver: Receiver, **more: object) -> AlertSettings:
    return AlertSettings(destinations=destinations(receiver), min_severity=3.0, event_days=10,
                         watch="alpha, gamma", milestones="guilds:200, guilds:1000",
                         **more)  # type: ignore[arg-type]


def add_run(settings: Settings, run_id: str, status: str, started: datetime,
            message: str = "") -> RunOutcome:
    with writer(settings) as con:
        con.execute("INSERT INTO harvest_runs (run_id, started_at, finished_at, status, mode, "
                    "message, shard, shards) VALUES (?, ?, ?, ?, 'incremental', ?, 0, 1)",
                    [run_id, started, started + timedelta(minutes=5), status, message or None])
    return RunOutcome(run_id, status, message, started)


@pytest.fixture
def archive(tmp_path: Path) -> Settings:
    """An archive with one complete run an hour before NOW, no exports."""
    (tmp_path / "empty.toml").touch()
    settings = load_settings(tmp_path / "empty.toml", env={}, overrides={
        "store.db": str(tmp_path / "archive.ducklake"), "exports.dir": str(tmp_path / "exports")})
    add_run(settings, "r0", "complete", NOW - 2 * HOUR)
    return settings


def titles(receiver: Receiver, who: str) -> list[str]:
    """The embed titles (Discord) or section titles (Slack) delivered to ``who``."""
    out = []
    for body in receiver.received(f"/{who}/{TOKEN}"):
        if "embeds" in body:
            out += [e["title"].replace("\\", "") for e in body["embeds"]]
        else:
            out += [b["text"]["text"] for b in body["blocks"] if b["type"] == "section"]
    return out


def test_events_and_milestones_of_the_exports_are_told_once_in_bot_names(
        trends_built: Settings, receiver: Receiver) -> None:
    run = add_run(trends_built, "r1", "complete", NOW - HOUR)
    report = notify_run(trends_built, config(receiver), run, clock=Clock(NOW))
    assert report.error == "" and report.undelivered == []
    (body,) = receiver.received(f"/analysts/{TOKEN}")
    assert body["text"] == "botstats: 2 events · 2 milestones"
    assert titles(receiver, "analysts") == [
        "*2 events*\n"
        "beta: no stats for 2 days (2025-01-28 to 2025-01-29) (2025-01-30, outage, severity 3.7)\n"
        "alpha: users +63% for 3 days so far (2025-02-01, spike, severity 3.5; also guilds +63%, "
        "cpu +45 points)",
        "*2 milestones*\n"
        "alpha reached 200 guilds (on 2025-02-01; 280 guilds now)\n"
        "alpha is on pace to reach 1,000 guilds around 2025-02-12 (80%: 2025-02-10 to "
        "2025-02-15; 280 guilds on 2025-02-03)"]
    assert receiver.received(f"/ops/{TOKEN}") == []  # ops takes none of these
    rows = ledger_rows(trends_built)
    assert sorted((r.destination, r.kind, r.alert_key, r.outcome) for r in rows) == [
        ("analysts", "event", "event:alpha:2025-02-01", "delivered"),
        ("analysts", "event", "event:beta:2025-01-30", "delivered"),
        ("analysts", "milestone", "milestone:alpha:guilds:1000:forecast", "delivered"),
        ("analysts", "milestone", "milestone:alpha:guilds:200:reached", "delivered")]
    # The next hourly run finds the same exports: nothing new to tell.
    again = notify_run(trends_built, config(receiver), add_run(trends_built, "r2", "complete", NOW),
                       clock=Clock(NOW + HOUR))
    assert again.entries == [] and len(receiver.received(f"/analysts/{TOKEN}")) == 1


def test_a_failure_is_told_once_reminded_and_resolved_with_how_long_it_was_out(
        archive: Settings, receiver: Receiver) -> None:
    cfg = config(receiver, repeat_interval="2h")
    why = "GET http://svc/bots could not connect; check the service is up and --base-url is right."
    for i, at in enumerate((NOW, NOW + HOUR, NOW + 2 * HOUR, NOW + 3 * HOUR), start=1):
        notify_run(archive, cfg, add_run(archive, f"r{i}", "failed", at, why),
                   clock=Clock(at + HOUR / 6))
    # A trends failure after a complete harvest: its row says complete, the run says failed.
    trends_failed = replace(add_run(archive, "r5", "complete", NOW + 4 * HOUR), status="failed",
                            message="the harvest ended complete, then trends failed: disk full")
    notify_run(archive, cfg, trends_failed, clock=Clock(NOW + 4 * HOUR + HOUR / 6))
    back = add_run(archive, "r6", "complete", NOW + 5 * HOUR)
    notify_run(archive, cfg, back, clock=Clock(NOW + 5 * HOUR + HOUR / 6))
    # Told at r1, reminded every 2 h (r3, and r5 whose trends failed: the same condition), and
    # resolved by r6, 5 h 10 min after r1 began failing.
    assert titles(receiver, "ops") == ["botstats run failed", "Still: botstats run failed",
                                       "Still: botstats run failed",
                                       "Resolved: runs complete again after 5h 10m"]
    first, _, trends, resolved = (body["embeds"][0]["description"].replace("\\", "").splitlines()
                                  for body in receiver.received(f"/ops/{TOKEN}"))
    assert first == [f"why: {why}", "run r1: failed",
                     "not complete since 2025-02-04 12:00 UTC (10m, 1 run)",
                     "more: `botstats status` shows the runs and their errors"]
    assert trends[:3] == ["why: the harvest ended complete, then trends failed: disk full",
                          "run r5: failed",
                          "not complete since 2025-02-04 12:00 UTC (4h 10m, 5 runs)"]
    assert resolved == ["was: botstats run failed",
                        "out 5h 10m, from 2025-02-04 12:00 UTC to 2025-02-04 17:10 UTC",
                        "resolved by run r6"]
    assert [(r.run_id, r.kind) for r in ledger_rows(archive) if r.destination == "ops"] == [
        ("r6", "resolved"), ("r5", "failed"), ("r3", "failed"), ("r1", "failed")]


def test_a_destination_down_does_not_stop_the_others_and_the_next_run_delivers(
        trends_built: Settings, receiver: Receiver) -> None:
    receiver.always(f"/analysts/{TOKEN}", Answer(503))
    cfg = config(receiver, budget=5.0)
    report = notify_run(trends_built, cfg, add_run(trends_built, "r1", "failed", NOW - HOUR,
                                                   "listing refused"),
                        clock=Clock(NOW, lambda _: None))
    assert [(e.destination, e.alert.kind) for e in report.delivered] == [("ops", "failed")]
    assert {(e.destination, e.outcome) for e in report.undelivered} == {("analysts", "failed")}
    assert report.summary() == (
        "alerts: delivered to ops (run failed); NOT delivered to analysts (2 events, 2 milestones) "
        "(analysts: HTTP 503 (5 times) (tried again next run))")
    waiting = ledger_rows(trends_built, undelivered=True)
    assert sorted(r.alert_key for r in waiting) == [
        "event:alpha:2025-02-01", "event:beta:2025-01-30",
        "milestone:alpha:guilds:1000:forecast", "milestone:alpha:guilds:200:reached"]
    with reader(trends_built) as con:  # the ready query says the same
        shown = con.execute((REPO / "sql/queries/undelivered_alerts.sql").read_text()).fetchall()
    assert sorted((r[0], r[2]) for r in shown) == sorted(("analysts", r.alert_key) for r in waiting)
    receiver.always(f"/analysts/{TOKEN}", None)
    later = notify_run(trends_built, cfg, add_run(trends_built, "r2", "complete", NOW),
                       clock=Clock(NOW + HOUR))
    assert sorted((e.destination, e.alert.kind) for e in later.delivered) == [
        ("analysts", "event"), ("analysts", "event"), ("analysts", "milestone"),
        ("analysts", "milestone"), ("ops", "resolved")]
    assert ledger_rows(trends_built, undelivered=True) == []


def test_a_run_kept_out_by_the_lock_tells_it_through_the_spool(archive: Settings,
                                                               receiver: Receiver) -> None:
    cfg = config(receiver)
    holder = LockHolder("run", "r-stuck", 4242, "host1", NOW - 3 * HOUR)
    report = notify_blocked(archive, cfg, holder, clock=Clock(NOW))
    assert [e.alert.title for e in report.delivered] == [
        "botstats archive lock held for 3h by run (pid 4242)"]
    spool = Path(str(archive.lock_path) + ".alerts.jsonl")
    assert spool.exists() and ledger_rows(archive) == []  # it cannot write the archive
    assert notify_blocked(archive, cfg, holder, clock=Clock(NOW + HOUR)).entries == []  # told once
    back = notify_run(archive, cfg, add_run(archive, "r1", "complete", NOW + 2 * HOUR),
                      clock=Clock(NOW + 2 * HOUR))
    assert [e.alert.title for e in back.delivered] == [
        "Resolved: the archive lock was released after 5h"]
    assert not spool.exists()
    assert [(r.kind, r.run_id) for r in ledger_rows(archive)] == [("resolved", "r1"),
                                                                 ("lock", None)]


def test_a_botstats_run_kept_out_by_the_lock_tells_it_and_still_exits_75(
        tmp_path: Path, receiver: Receiver) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\ndb = "{tmp_path / "archive.ducklake"}"\n[alerts]\n'
                      f'lock_after = "0s"\n[alerts.destinations.ops]\ntype = "discord"\n')
    settings = load_settings(config, env={"BOTSTATS_ALERTS_OPS_URL": receiver.url(f"/ops/{TOKEN}")})
    add_run(settings, "r0", "complete", datetime.now(UTC) - HOUR)
    with run_lock(settings, "run", run_id="r-stuck"), pytest.raises(LockTimeout) as info:
        runner.run(settings, runner.RunOptions(lock_timeout=0.1))
    assert info.value.exit_code == 75
    (title,) = titles(receiver, "ops")
    assert title.startswith("botstats archive lock held for ") and title.endswith(
        f"by run (pid {os.getpid()})")
    assert "holder: run r-stuck" in receiver.received(f"/ops/{TOKEN}")[0]["embeds"][0]["description"]
    assert Path(str(settings.lock_path) + ".alerts.jsonl").exists()  # for the next run to record


def test_no_secret_is_kept_in_the_ledger_the_spool_the_logs_or_the_summary(
        archive: Settings, receiver: Receiver, caplog: pytest.LogCaptureFixture) -> None:
    # A webhook that echoes its own URL in its error (some do).
    receiver.always(f"/ops/{TOKEN}", Answer(404, f"no webhook at /ops/{TOKEN}".encode()))
    cfg = config(receiver)
    holder = LockHolder("run", "", 1, "h", NOW - 3 * HOUR)
    with caplog.at_level(logging.INFO, logger="botstats.alerts"):
        blocked = notify_blocked(archive, cfg, holder, clock=Clock(NOW))
        report = notify_run(archive, cfg, add_run(archive, "r1", "failed", NOW, "no"),
                            clock=Clock(NOW + HOUR))
    assert report.undelivered and "***" in report.undelivered[0].answer
    spool = Path(str(archive.lock_path) + ".alerts.jsonl")
    with reader(archive) as con:
        kept = str(con.execute("SELECT * FROM alerts").fetchall())
    shown = kept + caplog.text + report.summary() + blocked.summary() + str(report.as_dict())
    assert TOKEN not in shown and "127.0.0.1" not in kept  # not even the webhook's host
    assert not spool.exists() or TOKEN not in spool.read_text()


def test_telling_never_raises_and_says_why_it_could_not(tmp_path: Path, receiver: Receiver) -> None:
    (tmp_path / "archive.ducklake").write_text("not an archive")
    settings = load_settings(None, env={}, overrides={"store.db": str(tmp_path / "archive.ducklake")})
    report = notify_run(settings, config(receiver), RunOutcome("r1", "failed", "x", NOW),
                        clock=Clock(NOW))
    assert report.entries == [] and "is not a botstats archive" in report.error
    assert report.summary().startswith("alerts: not sent: ")


def test_the_scheduler_s_jobs_tell_as_botstats_run_does(
        tmp_path: Path, receiver: Receiver, service_factory: Callable[..., Any]) -> None:
    # `botstats schedule` runs a harvest job and a trends job apart (as do `botstats harvest`
    # and `botstats trends`): the harvest tells the run's state, the trends what they found.
    config = tmp_path / "config.toml"
    config.write_text(f"""
[store]
db = "{tmp_path / 'archive.ducklake'}"
[exports]
dir = "{tmp_path / 'exports'}"
[retry]
attempts = 1
[alerts]
min_severity = 0.0
event_days = 400
stale_after = "1s"
[alerts.destinations.ops]
type = "discord"
kinds = ["failed", "partial", "lock", "stale", "resolved"]
[alerts.destinations.analysts]
type = "slack"
kinds = ["event"]
""")
    env = {"BOTSTATS_ALERTS_OPS_URL": receiver.url(f"/ops/{TOKEN}"),
           "BOTSTATS_ALERTS_ANALYSTS_URL": receiver.url(f"/analysts/{TOKEN}")}
    stop = threading.Event()
    down = load_settings(config, env=env,
                         overrides={"service.base_url": f"http://127.0.0.1:{free_port()}"})
    result = runner.harvest_job(down, stop)
    assert result.exit_code == 1 and "alerts: delivered to ops (run failed)" in result.line
    assert titles(receiver, "ops") == ["botstats run failed"]
    assert runner.harvest_job(down, stop).exit_code == 1
    assert len(receiver.received(f"/ops/{TOKEN}")) == 1  # still down: nothing new to say

    svc = service_factory(bots=12, history_days=30, stats_per_day=1, events=0.3)
    up = load_settings(config, env=env, overrides={"service.base_url": svc.base_url})
    result = runner.harvest_job(up, stop)
    assert result.exit_code == 0, result.line
    assert titles(receiver, "ops")[1].startswith("Resolved: runs complete again after ")
    assert receiver.received(f"/analysts/{TOKEN}") == []  # no exports yet

    result = runner.trends_job(up, stop)
    assert "alerts: delivered to analysts (" in result.line, result.line
    (message,) = receiver.received(f"/analysts/{TOKEN}")
    assert message["text"].startswith("botstats: ") and " event" in message["text"]
    told = {row.alert_key for row in ledger_rows(up) if row.kind == "event"}
    assert told and all(key.startswith("event:") for key in told)
    # The next build finds the same events: nothing new; and a trends job tells no run's state
    # (the archive is older than stale_after by now, which only a harvest says).
    time.sleep(1.1)
    assert "alerts:" not in runner.trends_job(up, stop).line
    assert len(receiver.received(f"/analysts/{TOKEN}")) == 1
    assert len(receiver.received(f"/ops/{TOKEN}")) == 2
