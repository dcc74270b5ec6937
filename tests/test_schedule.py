"""`botstats schedule` and `botstats cron`: crontab parsing and translation, the daemon in a real
subprocess (runs happen, an overlapping run is skipped, SIGTERM stops it cleanly), and the
crontab/systemd output."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import child_env, stderr_of

from pipeline.archive._store import open_archive
from pipeline.cli import cli
from pipeline.core._crontab import cron_trigger, crontab_weekdays, next_fire_times, parse_crontab
from pipeline.core._errors import ConfigError
from pipeline.core._oncalendar import on_calendar


# --- weekday numbering: standard crontab -> APScheduler names -------------------------------
@pytest.mark.parametrize(("field", "names"), [
    ("*", "*"),
    ("0", "sun"),
    ("7", "sun"),
    ("0,7", "sun"),
    ("1", "mon"),
    ("1-5", "mon,tue,wed,thu,fri"),
    ("6", "sat"),
    ("5-7", "fri,sat,sun"),
    ("0-6", "mon,tue,wed,thu,fri,sat,sun"),
    ("*/2", "tue,thu,sat,sun"),
    ("1-5/2", "mon,wed,fri"),
    ("mon-fri", "mon,tue,wed,thu,fri"),
    ("sat,sun", "sat,sun"),
    ("SUN", "sun"),
])
def test_crontab_weekdays_translate_to_names(field: str, names: str) -> None:
    assert crontab_weekdays(field) == names


@pytest.mark.parametrize(("expr", "words"), [
    ("0 * * *", ["expected 5 fields"]),
    ("0 * * * * * *", ["expected 5 fields"]),
    ("61 * * * *", ["minute", "61", "out of range 0-59"]),
    ("0 * * * 8", ["day_of_week", "8", "0-7"]),
    ("0 * * * 5-1", ["runs backwards", "list"]),
    ("*/0 * * * *", ["step", "above 0"]),
    ("0 * * * L", ["not a number"]),
    ("0 * * * mon#2", ["characters crontab does not know"]),
    ("0 * * foo *", ["month value 'foo'", "jan..dec"]),
    ("0 * , * *", ["empty element"]),
])
def test_bad_expressions_are_refused_with_the_reason(expr: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse_crontab(expr, where="[schedule].harvest")
    message = str(info.value)
    assert "[schedule].harvest" in message
    for word in words:
        assert word in message


def _next(expr: str, tz: str, after: datetime, count: int = 5) -> list[str]:
    trigger = cron_trigger(expr, tz)
    return [t.astimezone(UTC).strftime("%a %Y-%m-%d %H:%M") for t in
            next_fire_times(trigger, count, after)]


SATURDAY = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)  # a Saturday


def test_weekdays_1_to_5_are_monday_to_friday() -> None:
    assert _next("0 9 * * 1-5", "UTC", SATURDAY) == [
        "Mon 2026-11-23 09:00", "Tue 2026-11-24 09:00", "Wed 2026-11-25 09:00",
        "Thu 2026-11-26 09:00", "Fri 2026-11-27 09:00"]


@pytest.mark.parametrize("dow", ["0", "7", "sun"])
def test_0_and_7_are_sunday(dow: str) -> None:
    assert _next(f"30 6 * * {dow}", "UTC", SATURDAY, 2) == [
        "Sun 2026-11-22 06:30", "Sun 2026-11-29 06:30"]


def test_the_timezone_is_the_configured_one_not_the_local_one() -> None:
    # 09:00 in Berlin is 08:00 UTC in winter, 07:00 UTC in summer.
    assert _next("0 9 * * *", "Europe/Berlin", SATURDAY, 1) == ["Sun 2026-11-22 08:00"]
    summer = datetime(2026, 7, 1, tzinfo=UTC)
    assert _next("0 9 * * *", "Europe/Berlin", summer, 1) == ["Wed 2026-07-01 07:00"]


def test_day_of_month_or_day_of_week_like_crontab() -> None:
    # Both restricted: crontab runs when EITHER matches (the 1st, and every Sunday).
    assert _next("0 0 1 * 0", "UTC", SATURDAY, 4) == [
        "Sun 2026-11-22 00:00", "Sun 2026-11-29 00:00", "Tue 2026-12-01 00:00",
        "Sun 2026-12-06 00:00"]
    # One of them starts with "*": both must match.
    assert _next("0 0 */2 * 0", "UTC", SATURDAY, 2) == [
        "Sun 2026-11-29 00:00", "Sun 2026-12-13 00:00"]


def test_six_fields_are_seconds_first_and_macros_work() -> None:
    times = next_fire_times(cron_trigger("*/20 * * * * *", "UTC"), 4, SATURDAY)
    assert [t.strftime("%H:%M:%S") for t in times] == ["12:00:00", "12:00:20", "12:00:40",
                                                       "12:01:00"]
    assert _next("@weekly", "UTC", SATURDAY, 1) == ["Sun 2026-11-22 00:00"]


CALENDAR_CASES = ["0 * * * *", "15 * * * *", "*/15 8-18 * * 1-5", "0 9 * * 0", "0 0 * * 5-7",
                  "30 2 1-10/3 * *", "0 0 1 * 0", "0 12 * 1,6 sat,sun", "@daily"]


# `make test` installs it (.ci/test-deps) where it can; elsewhere the skip is in the summary.
@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not "
                    "installed (apt-get install systemd; `make test` does it as root)")
@pytest.mark.parametrize("expr", CALENDAR_CASES)
def test_systemd_on_calendar_agrees_with_the_scheduler(expr: str) -> None:
    tz = "Europe/Berlin"
    calendars = on_calendar(expr, tz)
    # systemd counts from its own clock, strictly after it: both sides count from the moment
    # just before it runs (a fire time at that very minute has passed once its second does),
    # and a minute turning while it runs (21:59 -> 22:00 for an hourly timer) means read again.
    for _ in range(3):
        started = datetime.now(UTC)
        got = _systemd_next(calendars)
        if datetime.now(UTC).replace(second=0, microsecond=0) == started.replace(
                second=0, microsecond=0):
            break
    expected = sorted(_next(expr, tz, started + timedelta(milliseconds=1), 6))[:6]
    assert sorted(got, key=lambda s: s[4:])[:6] == sorted(expected, key=lambda s: s[4:])


def _systemd_next(calendars: list[str]) -> set[str]:
    """The next six elapses of each OnCalendar= expression, by systemd-analyze, in UTC."""
    got: set[str] = set()
    for cal in calendars:
        proc = subprocess.run(["systemd-analyze", "calendar", "--iterations=6", cal],
                              capture_output=True, text=True, env={**os.environ, "TZ": "UTC"},
                              timeout=30)
        assert proc.returncode == 0, proc.stderr
        for line in proc.stdout.splitlines():
            if "Next elapse:" in line or "Iter. #" in line:
                stamp = line.split(": ", 1)[1].strip()
                when = datetime.strptime(stamp, "%a %Y-%m-%d %H:%M:%S UTC")
                got.add(when.strftime("%a %Y-%m-%d %H:%M"))
    return got


# --- botstats cron ---------------------------------------------------------------------------
def test_cron_prints_crontab_and_systemd_with_absolute_paths(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "botstats.toml"
    config.write_text('[schedule]\ntimezone = "Europe/Berlin"\nharvest = "5 */2 * * 1-5"\n'
                      '[store]\ndb = "arch/a.duckdb"\n')
    result = CliRunner().invoke(cli, ["--config", str(config), "cron"])
    assert result.exit_code == 0, result.output
    out = result.output
    botstats = str(Path(sys.executable).with_name("botstats").absolute())
    line = next(x for x in out.splitlines() if x.startswith("5 */2 * * 1-5 "))
    assert f"cd {tmp_path} && {botstats} --config {config} run" in line
    assert "CRON_TZ=Europe/Berlin" in out
    assert f"ExecStart={botstats} --config {config} run" in out
    assert f"WorkingDirectory={tmp_path}" in out
    assert "OnCalendar=Mon..Fri *-*-* 00,02,04,06,08,10,12,14,16,18,20,22:05:00 Europe/Berlin" in out
    assert "SuccessExitStatus=3 75" in out and "WantedBy=timers.target" in out
    # The optional stale-archive alert: weekdays every 2 h, so the longest gap is the weekend
    # (Fri 22:05 to Mon 00:05, 50 h) and the alert waits twice that.
    assert f"# 5 */2 * * 1-5 cd {tmp_path} && {botstats} --config {config} status --max-age " \
           f"100h > /dev/null" in out


@pytest.mark.parametrize(("expr", "age"), [("0 * * * *", "2h"), ("*/5 * * * *", "10m"),
                                           ("30 2 * * *", "2d"), ("0 9 * * 1-5", "6d"),
                                           ("15,45 * * * *", "1h"), ("0 0 1 * *", "62d")])
def test_the_alert_waits_twice_the_longest_gap_between_harvests(expr: str, age: str) -> None:
    from pipeline.operate._deploy import max_age_for
    from pipeline.operate._status import parse_age

    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    assert max_age_for(expr, "UTC", now) == age
    parse_age(age)  # what the line prints, `status --max-age` reads


def test_cron_passes_on_a_db_given_as_a_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["--db", "x/a.duckdb", "cron"], env={"BOTSTATS_CONFIG": ""})
    assert result.exit_code == 0, result.output
    assert f"--db {tmp_path / 'x' / 'a.duckdb'} run" in result.output


def test_cron_for_a_shards_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["cron", "--shard", "2/4"], env={"BOTSTATS_CONFIG": ""})
    assert result.exit_code == 0, result.output
    out = result.output
    line = next(x for x in out.splitlines() if x.startswith("0 * * * * "))
    assert line.endswith(f"run --shard 2/4 >> {tmp_path / 'data' / 'botstats-shard-2.log'} 2>&1")
    assert "ExecStart=" in out and "run --shard 2/4\n" in out
    assert "/etc/systemd/system/botstats-shard-2.service" in out
    assert "Unit=botstats-shard-2.service" in out
    assert "enable --now botstats-shard-2.timer" in out
    bad = CliRunner().invoke(cli, ["cron", "--shard", "4/4"], env={"BOTSTATS_CONFIG": ""})
    assert bad.exit_code == 2 and "K counts from 0 to N-1" in bad.output
    # A catalog given as a flag is passed on, its password not (it belongs in botstats.env).
    shared = CliRunner().invoke(cli, ["cron", "--shard", "0/4", "--catalog",
                                      "postgresql://botstats:pw-Zr41@db:5432/botstats"],
                                env={"BOTSTATS_CONFIG": "", "BOTSTATS_STORE_DATA_PATH": "/lake"})
    assert shared.exit_code == 0, shared.output
    assert "--catalog 'user=botstats dbname=botstats host=db port=5432' run --shard 0/4" \
        in shared.output
    assert "pw-Zr41" not in shared.output


def test_schedule_dry_run_lists_the_next_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["schedule", "--dry-run", "--harvest-cron", "0 9 * * 1-5",
                                      "--trends-cron", ""])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "harvest: 0 9 * * 1-5  (UTC)"
    assert len([x for x in lines if x.startswith("  ")]) == 5
    assert all(x.split()[0] in ("Mon", "Tue", "Wed", "Thu", "Fri") for x in lines[1:6])
    assert "trends: (disabled)" in result.output


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_schedule_refuses_a_bad_override_with_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     dry_run: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["schedule", *dry_run, "--harvest-cron", "0 9 * * 8"])
    assert result.exit_code == 2
    assert "--harvest-cron" in result.output and "out of range" in result.output
    assert "[schedule]" not in result.output  # the flag is to blame, not the config file


def test_schedule_refuses_an_archive_it_could_never_write_before_starting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Otherwise the daemon would start and log a failed job at every fire time, forever.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a directory")
    result = CliRunner().invoke(cli, ["schedule", "--db", str(tmp_path / "notes.txt" / "a.ducklake"),
                                      "--harvest-cron", "* * * * * *"])
    assert result.exit_code == 2
    assert "cannot create the archive's lock file" in result.output
    assert "is a file, not a directory" in result.output
    assert "scheduled" not in result.output  # refused before any job was set up


# --- the daemon, for real --------------------------------------------------------------------
def _env() -> dict[str, str]:
    return child_env()


def _events(log_file: Path) -> list[dict[str, Any]]:
    if not log_file.exists():
        return []
    return [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]


def _wait_for(check: Callable[[], bool], timeout: float, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the scheduler exited early: {proc.returncode}\n"
                                 f"{stderr_of(proc)}")
        time.sleep(0.1)
    raise AssertionError("timed out waiting for the scheduler")


@pytest.mark.clock
@pytest.mark.slow
def test_schedule_runs_skips_overlaps_and_stops_on_sigterm(tmp_path: Path,
                                                           service_factory: Any) -> None:
    # Every bot request takes 0.5 s, so one harvest (about 2.5 s) outlasts the 2 s trigger.
    svc = service_factory(bots=60, history_days=3, stats_per_day=2, latency_ms=500)
    db, log_file = tmp_path / "a.ducklake", tmp_path / "schedule.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "--log-format", "json", "--log-file", str(log_file),
         "--db", str(db), "--base-url", svc.base_url, "schedule",
         "--harvest-cron", "*/2 * * * * *", "--trends-cron", ""],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def seen(event: str) -> int:
            return sum(1 for e in _events(log_file) if e.get("event") == event)

        # Runs happen, and one that comes due while the previous still runs is skipped.
        _wait_for(lambda: seen("executed") >= 2 and seen("max_instances") >= 1, 40, proc)
        # SIGTERM while a harvest is running.
        started = seen("started")
        _wait_for(lambda: seen("started") > started, 10, proc)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert rc == 0, stderr_of(proc)
    events = _events(log_file)
    skipped = [e for e in events if e.get("event") == "max_instances"]
    assert "skipped" in skipped[0]["msg"] and skipped[0]["job"] == "harvest"
    assert events[-1]["event"] == "scheduler_stopped" and "SIGTERM" in events[-1]["msg"]
    with open_archive(db) as con:
        runs = con.execute("SELECT status FROM harvest_runs ORDER BY started_at").fetchall()
        stats = con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0]
    statuses = [r[0] for r in runs]
    assert statuses[-1] == "interrupted"
    assert statuses[:-1].count("complete") >= 2 and "running" not in statuses
    assert stats == sum(len(svc.directory.valid_stats(b)) for b in svc.directory.bot_ids())


def _holder(db: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(Path(f"{db}.lock.holder.json").read_text()))
    except (OSError, ValueError):
        return {}


def _libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.clock
@pytest.mark.slow
def test_each_job_runs_in_a_child_and_one_killed_mid_run_leaves_the_daemon_going(
        tmp_path: Path, service_factory: Any) -> None:
    # Every bot request takes 0.3 s: a harvest lasts seconds, and the trigger fires every 2 s.
    svc = service_factory(bots=60, history_days=3, stats_per_day=2, latency_ms=300)
    db, log_file = tmp_path / "a.ducklake", tmp_path / "schedule.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "--log-format", "json", "--log-file", str(log_file),
         "--db", str(db), "--base-url", svc.base_url, "schedule",
         "--harvest-cron", "*/2 * * * * *", "--trends-cron", ""],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The harvest runs in a child of the daemon, which holds the archive's lock itself.
        def harvesting() -> bool:
            info = _holder(db)
            return (info.get("job") == "harvest" and bool(info.get("run_id"))
                    and not info.get("released_at") and info.get("pid") != proc.pid)

        _wait_for(harvesting, 40, proc)
        victim = _holder(db)
        os.kill(victim["pid"], signal.SIGKILL)

        def failed() -> list[dict[str, Any]]:
            return [e for e in _events(log_file) if e.get("event") == "failed"]

        _wait_for(lambda: bool(failed()), 20, proc)
        # The daemon goes on: APScheduler fires again, and the next harvest takes the dead
        # child's lock over, marks its run interrupted and completes the work.
        _wait_for(lambda: any(e.get("event") == "executed" and "complete (exit 0)" in e["msg"]
                              for e in _events(log_file)), 60, proc)
        daemon = _libraries(proc.pid)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    said = failed()[0]["msg"]
    assert said.startswith("job harvest failed: its process") and "killed by SIGKILL" in said
    assert f"pid {victim['pid']}" in said
    with open_archive(db) as con:
        runs = dict(con.execute("SELECT run_id, status FROM harvest_runs").fetchall())
    assert runs[victim["run_id"]] == "interrupted" and "complete" in runs.values()
    # The daemon itself never loaded what the jobs run on: its memory is its clock's.
    assert "polars" not in daemon and "duckdb" not in daemon


# --- the scheduler's rules firing for real (a job that only notes when it ran) --------------------
class Fired:
    """A scheduler built by `build_scheduler` with one job on a seconds trigger, run in a
    thread; what it did is read from its own events."""

    def __init__(self, tmp_path: Path, expr: str, **schedule: int) -> None:
        from apscheduler.events import EVENT_JOB_EXECUTED, EVENT_JOB_MISSED

        from pipeline.core._loading import load_settings
        from pipeline.operate._schedule import Crons, build_scheduler

        settings = load_settings(None, env={}, overrides={
            "store.db": str(tmp_path / "a.ducklake"),
            **{f"schedule.{key}": value for key, value in schedule.items()}})
        self.ran: list[datetime] = []
        self.events: list[Any] = []
        self.scheduler = build_scheduler(
            settings, threading.Event(), crons=Crons(expr, ""),
            jobs={"harvest": lambda settings, stop: self.ran.append(datetime.now(UTC))})
        self.scheduler.add_listener(self.events.append, EVENT_JOB_EXECUTED | EVENT_JOB_MISSED)
        self.executed, self.missed = EVENT_JOB_EXECUTED, EVENT_JOB_MISSED
        self._thread = threading.Thread(target=self.scheduler.start, kwargs={"paused": True})

    def __enter__(self) -> Fired:
        self._thread.start()
        _until(lambda: self.scheduler.running)
        return self

    def __exit__(self, *exc: object) -> None:
        self.scheduler.shutdown(wait=True)
        self._thread.join(timeout=10)

    @property
    def first(self) -> datetime:
        """The job's first fire time (the scheduler started paused, so it is still ahead)."""
        return self.scheduler.get_job("harvest").next_run_time

    def times(self, code: int) -> list[datetime]:
        return [e.scheduled_run_time for e in self.events if e.code == code]


def _until(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting for the scheduler"
        time.sleep(0.02)


def _sleep_until(when: datetime) -> None:
    time.sleep(max(0.0, (when - datetime.now(UTC)).total_seconds()))


@pytest.mark.clock
def test_runs_missed_while_the_scheduler_was_held_up_become_one_run(tmp_path: Path) -> None:
    # Held (paused) across three fire times, with no lateness limit: one run, for the latest.
    with Fired(tmp_path, "* * * * * *", misfire_grace_time=0) as fired:
        first = fired.first
        _sleep_until(first + timedelta(seconds=2.3))
        resumed = datetime.now(UTC)
        fired.scheduler.resume()
        _until(lambda: len(fired.ran) >= 1)
    due = [t for t in fired.times(fired.executed) + fired.times(fired.missed) if t <= resumed]
    assert len(due) == 1, due  # not one run per fire time it was held across
    assert due[0] >= first + timedelta(seconds=2)


@pytest.mark.clock
def test_a_run_later_than_misfire_grace_time_is_missed_and_the_next_one_runs(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Every 4 s, at most 1 s late: resumed 2.5 s after a fire time, that run is missed.
    with Fired(tmp_path, "*/4 * * * * *", misfire_grace_time=1) as fired:
        first = fired.first
        _sleep_until(first + timedelta(seconds=2.5))
        assert datetime.now(UTC) < first + timedelta(seconds=4), "held past the next fire time"
        fired.scheduler.resume()
        _until(lambda: len(fired.ran) >= 1)
    assert fired.times(fired.missed) == [first]
    assert fired.times(fired.executed)[0] == first + timedelta(seconds=4)
    assert fired.ran[0] >= first + timedelta(seconds=4)
    assert "job harvest missed its run at" in caplog.text
    assert "(more than misfire_grace_time=1 s late)" in caplog.text


@pytest.mark.clock
def test_jitter_moves_each_run_off_its_fire_time(tmp_path: Path) -> None:
    # Every second, up to 1 s later: without jitter every run would be on a whole second.
    with Fired(tmp_path, "* * * * * *", jitter=1) as fired:
        fired.scheduler.resume()
        _until(lambda: len(fired.ran) >= 2)
    scheduled = fired.times(fired.executed)[:2]
    assert all(t.microsecond != 0 for t in scheduled), scheduled
    assert scheduled[0].microsecond != scheduled[1].microsecond  # drawn for each run
    assert all(ran >= at for ran, at in zip(fired.ran, scheduled, strict=False))
