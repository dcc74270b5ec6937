"""`botstats run`: lock, harvest, then trends; exit codes; the run lock (waits, names its holder,
takes over a stale lock); SIGTERM finishes the batch and records the run interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import child_env, read_line, stderr_of
from filelock import Timeout

from pipeline.archive._store import open_archive
from pipeline.core._errors import ExportError, LockTimeout
from pipeline.core._loading import load_settings
from pipeline.core._run_status import RunStatus
from pipeline.core._settings import Settings
from pipeline.harvester._run import HarvestReport
from pipeline.operate import _lock as lock_module
from pipeline.operate import _runner as runner
from pipeline.operate._lock import ARCHIVE_SCOPE, TRENDS_SCOPE, Holder, Wait, holder, run_lock


def _env(**extra: str) -> dict[str, str]:
    env = child_env()
    return {**env, "BOTSTATS_CONFIG": "", **extra}


def _settings(tmp_path: Path, base_url: str, **more: Any) -> Settings:
    return load_settings(None, env={}, overrides={
        "service.base_url": base_url, "store.db": str(tmp_path / "a.ducklake"),
        "exports.dir": str(tmp_path / "exports"), **more})


def _botstats(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
              **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pipeline", *args], cwd=tmp_path,
                            env=_env(**(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _wait_for(check: Any, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    """Poll ``check`` until true; fail if ``proc`` exits first or ``timeout`` runs out."""
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None:
            raise AssertionError(f"botstats exited early ({proc.returncode}): {stderr_of(proc)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s")
        time.sleep(0.02)


def _statuses(db: Path) -> list[str]:
    with open_archive(db) as con:
        return [r[0] for r in con.execute(
            "SELECT status FROM harvest_runs ORDER BY started_at").fetchall()]


# --- the library: which outcome gives which status -------------------------------------------
@pytest.mark.parametrize(("harvest_status", "trends_fails", "status", "exit_code", "trends_ran"), [
    ("complete", False, "complete", 0, True),
    ("partial", False, "partial", 3, True),  # trends still summarise what was archived
    ("failed", False, "failed", 1, False),
    ("interrupted", False, "interrupted", 4, False),
    ("complete", True, "failed", 1, True),  # a trends failure fails the run
])
def test_run_status_and_when_trends_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        harvest_status: str, trends_fails: bool, status: str,
                                        exit_code: int, trends_ran: bool) -> None:
    calls: list[str] = []

    def fake_harvest(settings: Settings, *args: Any, **kw: Any) -> HarvestReport:
        return HarvestReport(run_id="r1", mode="incremental", status=harvest_status)

    def fake_trends(settings: Settings, run_id: str | None, **kw: Any) -> Any:
        calls.append(str(run_id))
        if trends_fails:
            raise ExportError("disk full")
        return None

    monkeypatch.setattr(runner, "harvest", fake_harvest)
    monkeypatch.setattr(runner, "_build_trends", fake_trends)
    report = runner.run(_settings(tmp_path, "http://127.0.0.1:9"))
    assert (report.status, report.exit_code) == (status, exit_code)
    assert calls == (["r1"] if trends_ran else [])
    if trends_fails:
        assert "disk full" in report.trends_error and "trends failed" in report.message
    if not trends_ran:
        assert report.trends_skipped == f"the harvest ended {harvest_status}"


def test_a_partial_harvest_still_builds_trends(tmp_path: Path, service_factory: Any) -> None:
    # A third of the requests answered 5xx and one attempt each: some bots fail (partial); the
    # trends are built from what was archived. Seed 4: the first GET /bots gets through.
    svc = service_factory(bots=40, history_days=5, stats_per_day=2, error_rate=0.3, seed=4)
    settings = _settings(tmp_path, svc.base_url, **{"retry.attempts": 1})
    report = runner.run(settings)
    assert (report.status, report.exit_code) == ("partial", 3)
    assert report.harvest is not None and report.harvest.errors > 0
    assert report.trends is not None and report.trends.run_id == report.harvest.run_id
    assert report.trends_error == "" and report.trends_skipped == ""
    assert {d.name for d in report.trends.datasets} >= {"bot_daily", "bot_growth"}
    with open_archive(settings.db_path) as con:
        daily = con.execute("SELECT sum(records) FROM trend_bot_daily").fetchall()[0][0]
        archived = con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0]
    assert daily == archived > 0  # trends summarise what was archived


def test_a_trends_failure_fails_the_run(tmp_path: Path, service: Any) -> None:
    # The export directory lies under a file: the harvest completes, trends cannot write.
    (tmp_path / "notes.txt").write_text("not a directory")
    settings = _settings(tmp_path, service.base_url,
                         **{"exports.dir": str(tmp_path / "notes.txt" / "exports")})
    report = runner.run(settings)
    assert report.harvest is not None and report.harvest.status == "complete"
    assert (report.status, report.exit_code, report.trends) == ("failed", 1, None)
    assert "notes.txt" in report.trends_error
    assert report.message.startswith("the harvest ended complete, then trends failed: ")
    assert _statuses(settings.db_path) == ["complete"]  # the harvest itself stays recorded
    assert (tmp_path / "notes.txt").read_text() == "not a directory"


def test_a_complete_run_harvests_then_builds_trends(tmp_path: Path, service: Any) -> None:
    settings = _settings(tmp_path, service.base_url)
    report = runner.run(settings)
    assert report.status == "complete" and report.exit_code == 0
    assert report.harvest is not None and report.trends is not None
    assert report.trends.run_id == report.harvest.run_id
    assert (tmp_path / "exports" / "manifest.json").exists()
    assert _statuses(settings.db_path) == ["complete"]
    info = holder(settings)
    assert info is not None and info.run_id == report.run_id and info.released_at


def test_a_failing_report_is_logged_and_the_run_keeps_its_status(
        tmp_path: Path, service: Any, caplog: pytest.LogCaptureFixture) -> None:
    # [report].file names a folder: the report cannot be written, after harvest and trends did.
    folder = tmp_path / "reports"
    folder.mkdir()
    settings = _settings(tmp_path, service.base_url, **{"report.file": str(folder)})
    report = runner.run(settings)
    assert (report.status, report.exit_code, report.report) == ("complete", 0, None)
    assert report.trends is not None and report.trends_error == ""
    assert f"{folder} is a directory" in report.report_error
    assert f"report {folder} not refreshed: {report.report_error}" in caplog.text
    assert _statuses(settings.db_path) == ["complete"]
    assert list(folder.iterdir()) == []


def test_an_unreachable_service_fails_the_run_and_skips_trends(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "http://127.0.0.1:9")
    settings = replace(settings, retry=replace(settings.retry, attempts=1))
    report = runner.run(settings)
    assert (report.status, report.exit_code, report.trends) == ("failed", 1, None)
    assert _statuses(settings.db_path) == ["failed"]


# --- the CLI ---------------------------------------------------------------------------------
def _run_json(tmp_path: Path, base_url: str, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
    proc = _botstats(tmp_path, "--db", "a.ducklake", "--base-url", base_url, "run", "--json",
                     *args, env=env)
    out, err = proc.communicate(timeout=120)
    assert out.strip(), err
    return proc.returncode, {**json.loads(out), "pid": proc.pid}


@pytest.mark.slow
def test_botstats_run_prints_a_summary_and_builds_its_trends_in_a_fresh_image(
        tmp_path: Path, service: Any) -> None:
    # The harvest's process re-executes itself for the trends and the report (the same PID, a
    # fresh heap): the same summary, the same exports as in one process.
    fresh, one = tmp_path / "fresh", tmp_path / "one"
    fresh.mkdir(), one.mkdir()
    proc = _botstats(fresh, "--db", "a.ducklake", "--base-url", service.base_url, "run",
                     "--no-progress")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "harvest " in out and ": complete" in out
    assert "bot_growth" in out  # the trends summary
    assert " MB for the trends and report (a fresh process)" in out
    assert out.strip().splitlines()[-1].endswith(": complete (exit 0)")
    # The trends' lock was taken by the fresh image: the same PID, the same run.
    info = holder(_settings(fresh, service.base_url), TRENDS_SCOPE)
    assert info is not None and (info.job, info.pid) == ("run", proc.pid)
    assert info.released_at and info.run_id in out

    code, data = _run_json(fresh, service.base_url, "--full-trends")
    assert code == 0 and data["status"] == "complete" and data["exit_code"] == 0, data
    assert data["memory"]["fresh_process"] is True
    assert data["memory"]["harvest"] > 0 and data["memory"]["trends"] > 0
    assert data["trends"]["run_id"] == data["run_id"] == data["harvest"]["run_id"]
    assert (data["trends"]["mode"], data["trends"]["reason"]) == ("full", "--full")
    assert data["harvest"]["bots_seen"] == 30 and data["harvest"]["stats_added"] == 0

    code, same = _run_json(one, service.base_url, BOTSTATS_RUN_FRESH_PROCESS="false")
    assert code == 0 and same["status"] == "complete"
    assert "fresh_process" not in same["memory"] and same["trends"]["mode"] == "full"
    assert same["harvest"]["bots_seen"] == 30 and same["harvest"]["stats_added"] > 0
    from pipeline import DATASETS, load_dataset

    for name in DATASETS:  # both full builds of the same records
        a = load_dataset(_settings(fresh, service.base_url, **{
            "exports.dir": str(fresh / "data" / "exports")}), name)
        b = load_dataset(_settings(one, service.base_url, **{
            "exports.dir": str(one / "data" / "exports")}), name)
        assert a.height > 0 or name in ("anomalies",), name
        assert a.equals(b), name


@pytest.mark.slow
def test_a_run_whose_fresh_image_fails_its_trends_fails(tmp_path: Path, service: Any) -> None:
    # The verdict crosses the exec: a trends failure in the fresh image fails the run, exit 1.
    (tmp_path / "notes.txt").write_text("not a directory")
    code, data = _run_json(tmp_path, service.base_url, BOTSTATS_EXPORTS_DIR="notes.txt/exports")
    assert (code, data["status"], data["exit_code"]) == (1, "failed", 1)
    assert data["memory"]["fresh_process"] is True
    assert data["harvest"]["status"] == "complete" and data["trends"] is None
    assert "notes.txt" in data["trends_error"]
    assert _statuses(tmp_path / "a.ducklake") == ["complete"]


def test_a_hand_off_inherited_from_another_process_is_ignored(tmp_path: Path,
                                                              service: Any) -> None:
    # A run handed off by another process (here this one: its environment leaking into a
    # child it starts) is not the child's: the child runs its own harvest.
    stale = {"pid": os.getpid(), "report": {"status": "complete", "harvest": None}}
    code, data = _run_json(tmp_path, service.base_url,
                           _BOTSTATS_RUN_HANDOFF=json.dumps(stale))
    assert code == 0 and data["harvest"]["bots_seen"] == 30
    assert _statuses(tmp_path / "a.ducklake") == ["complete"]


def test_a_run_handed_off_builds_its_trends_once_the_lock_is_free(tmp_path: Path,
                                                                   service: Any) -> None:
    # hand_off: the harvest ends, lets go of the lock and leaves the trends to finish_run; a
    # trends job that takes the trends lock in between makes them wait (here: give up, the run
    # still complete). A harvest in between does not: it holds the archive's lock.
    settings = _settings(tmp_path, service.base_url)
    report = runner.run(settings, runner.RunOptions(hand_off=True))
    assert report.trends_pending and report.trends is None and report.status == "complete"
    assert not (tmp_path / "exports" / "manifest.json").exists()
    info = holder(settings)
    assert info is not None and info.released_at  # the harvest let go of the lock
    handed = json.loads(json.dumps(report.as_dict(), default=str))
    with run_lock(settings, "trends", scope=TRENDS_SCOPE):
        waited = runner.finish_run(settings, runner.RunReport.resume(handed), lock_timeout=0.3)
    assert (waited.status, waited.exit_code, waited.trends) == ("complete", 0, None)
    assert waited.trends_skipped.startswith("another job kept the lock: ")
    done = runner.finish_run(settings, runner.RunReport.resume(handed))
    assert (done.status, done.exit_code, done.trends_skipped) == ("complete", 0, "")
    assert done.trends is not None and done.trends.run_id == report.run_id
    assert (tmp_path / "exports" / "manifest.json").exists()
    assert _statuses(settings.db_path) == ["complete"]


def test_a_harvest_report_reads_back_from_its_json() -> None:
    report = HarvestReport("20261126T080000Z-abc123", "incremental", status="partial",
                           bots_seen=7, stats_added=3, errors=1, message="listing stopped early")
    report.finished_at = report.started_at
    again = HarvestReport.from_dict(json.loads(json.dumps(report.as_dict(), default=str)))
    assert again == report


# The keys of `botstats run --json` and of a hand-off, in their order: a public interface.
RUN_KEYS = ["status", "exit_code", "run_id", "message", "lock_wait_seconds", "took_over",
            "harvest", "trends", "trends_skipped", "trends_error", "report", "report_error",
            "memory", "alerts"]


def test_a_run_report_reads_back_from_its_json_with_its_keys() -> None:
    harvested = HarvestReport("20261126T080000Z-abc123", "incremental", status="partial",
                              message="listing stopped early")
    harvested.finished_at = harvested.started_at
    report = runner.RunReport(harvested.status, harvest=harvested, message=harvested.message,
                              lock_wait=1.23456, took_over=Holder("run", "doomed", 5, "h", "s"))
    report.memory.harvest, report.memory.fresh_process = 120.5, True
    data = json.loads(json.dumps(report.as_dict(), default=str))
    assert list(data) == RUN_KEYS and data["exit_code"] == 3
    assert data["memory"] == {"harvest": 120.5, "fresh_process": True}
    assert data["took_over"] == {"job": "run", "run_id": "doomed", "pid": 5, "host": "h",
                                 "since": "s"}
    again = runner.RunReport.resume(data)
    assert again.trends_pending and json.loads(json.dumps(again.as_dict(), default=str)) == data
    assert (again.status, again.took_over, again.harvest) == ("partial", report.took_over,
                                                               harvested)
    stopped = runner.RunReport(RunStatus.INTERRUPTED, message="stopped").as_dict()
    assert list(stopped) == RUN_KEYS and stopped["memory"] is None


@pytest.mark.parametrize("job", ["harvest", "trends"])
def test_harvest_and_trends_on_their_own_take_the_lock_and_name_their_run(
        tmp_path: Path, service: Any, job: str) -> None:
    settings = _settings(tmp_path, service.base_url)
    if job == "trends":
        assert runner.run(settings).status == "complete"
    proc = _botstats(tmp_path, "--db", str(settings.db_path), "--base-url", service.base_url,
                     job, "--json", *(["--no-progress"] if job == "harvest" else []))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    info = holder(settings, TRENDS_SCOPE if job == "trends" else ARCHIVE_SCOPE)
    assert info is not None and info.job == job and info.released_at
    assert info.pid == proc.pid
    if job == "harvest":  # a trends build has no run of its own to name
        assert info.run_id == json.loads(out)["run_id"]


@pytest.mark.clock
@pytest.mark.slow
def test_a_second_run_gives_up_with_75_naming_the_holder(tmp_path: Path, service: Any) -> None:
    settings = _settings(tmp_path, service.base_url)
    with run_lock(settings, "run", run_id="20261122T000000Z-holder"):
        proc = _botstats(tmp_path, "--db", str(settings.db_path), "--base-url", service.base_url,
                         "run", "--lock-timeout", "0.5")
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75
    assert "another botstats job holds the archive lock" in err
    assert "run 20261122T000000Z-holder" in err and f"pid {os.getpid()}" in err
    assert "--lock-timeout" in err
    assert not settings.db_path.exists()  # it never touched the archive


@pytest.mark.parametrize("job", [["harvest"], ["trends"], ["run"], ["demo", "--dir", "{db}"]],
                         ids=["harvest", "trends", "run", "demo"])
def test_an_archive_path_under_a_file_is_refused_clearly(tmp_path: Path, job: list[str]) -> None:
    (tmp_path / "notes.txt").write_text("not a directory")
    db = tmp_path / "notes.txt" / "a.ducklake"
    args = [a.format(db=db.parent / "demo") for a in job]
    proc = _botstats(tmp_path, "--db", str(db), "--base-url", "http://127.0.0.1:9", *args)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert "cannot create the archive's lock file" in err
    assert f"{tmp_path / 'notes.txt'} is a file, not a directory" in err
    assert "--db" in err
    assert (tmp_path / "notes.txt").read_text() == "not a directory"


@pytest.mark.parametrize("job", ["harvest", "trends", "run"])
def test_an_archive_path_that_is_a_directory_is_refused_clearly(tmp_path: Path, job: str) -> None:
    # It once went as far as copying the "published archive" (the directory) to a primary.
    folder = tmp_path / "data"
    folder.mkdir()
    proc = _botstats(tmp_path, "--db", str(folder), "--base-url", "http://127.0.0.1:9", job)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert f"the archive ([store].db, --db) {folder} is a directory" in err
    assert f"e.g. {folder / 'archive.ducklake'}" in err
    assert list(tmp_path.iterdir()) == [folder] and not any(folder.iterdir())


def test_a_lock_file_that_cannot_be_opened_is_refused_not_waited_on(tmp_path: Path) -> None:
    # filelock takes a lock file it cannot open for one another process holds: the run would
    # wait out the whole lock timeout (here longer than the test allows) and then blame a holder.
    db = tmp_path / "a.ducklake"
    (tmp_path / "a.ducklake.lock").mkdir()
    proc = _botstats(tmp_path, "--db", str(db), "--base-url", "http://127.0.0.1:9", "run",
                     "--lock-timeout", "600")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "Traceback" not in err and "another botstats job" not in err
    assert f"cannot create the archive's lock file {db}.lock: Is a directory" in err
    assert not db.exists()


WAIT = 30  # seconds any step below may take before the test fails


def _signal_when_waiting(monkeypatch: pytest.MonkeyPatch, tries: int = 1) -> threading.Event:
    """An event set once a job has tried ``tries`` times to take the held lock, and waits on."""
    waiting = threading.Event()
    acquire = lock_module._acquire

    def observed(lock: Any, wait: float, stop: threading.Event | None) -> bool:
        attempt = lock.acquire
        failed = []

        def counted(*args: Any, **kwargs: Any) -> Any:
            try:
                return attempt(*args, **kwargs)
            except Timeout:
                failed.append(1)
                if len(failed) >= tries:
                    waiting.set()
                raise

        lock.acquire = counted
        return acquire(lock, wait, stop)

    monkeypatch.setattr(lock_module, "_acquire", observed)
    return waiting


@pytest.mark.clock
def test_a_waiting_run_takes_the_lock_when_it_is_released(
        tmp_path: Path, service: Any, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    settings = _settings(tmp_path, service.base_url)
    # Released only after the run has failed to take it twice: it keeps trying, not just once.
    waiting = _signal_when_waiting(monkeypatch, tries=2)
    held, released = threading.Event(), threading.Event()

    def hold() -> None:
        with run_lock(settings, "run", run_id="first"):
            held.set()
            assert waiting.wait(WAIT), "the run never started waiting for the lock"
        released.set()

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(WAIT), "the holder never took the lock"
    with caplog.at_level("INFO", logger="botstats.lock"):
        report = runner.run(settings, runner.RunOptions(lock_timeout=WAIT))
    thread.join(WAIT)
    assert released.is_set() and not thread.is_alive()
    assert report.status == "complete" and report.lock_wait > 0
    info = holder(settings)
    assert info is not None and info.run_id == report.run_id  # it ran after "first"
    # Said when the wait began: who holds the lock, since when, for how long this one waits.
    said = next(r.getMessage() for r in caplog.records if "is held by" in r.getMessage())
    assert "is held by run first (run, pid" in said and "since 20" in said
    assert said.endswith(f"waiting up to {WAIT} s (--lock-timeout, [run].lock_timeout)")


@pytest.mark.clock
def test_a_stop_while_waiting_for_the_lock_is_an_interrupted_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(tmp_path, "http://127.0.0.1:9")
    waiting = _signal_when_waiting(monkeypatch)
    stop = threading.Event()

    def stop_once_waiting() -> None:
        if waiting.wait(WAIT):
            stop.set()

    with run_lock(settings, "run"):
        stopper = threading.Thread(target=stop_once_waiting)
        stopper.start()
        report = runner.run(settings, runner.RunOptions(lock_timeout=WAIT), stop=stop)
        stopper.join(WAIT)
    assert waiting.is_set() and stop.is_set()
    assert (report.status, report.exit_code, report.harvest) == ("interrupted", 4, None)
    with pytest.raises(LockTimeout, match="waited 0 s"):
        with run_lock(settings, "run"), run_lock(settings, "again", wait=Wait(0)):
            pass


@pytest.mark.slow
def test_a_stale_lock_of_a_killed_run_is_taken_over(tmp_path: Path, service: Any,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    settings = _settings(tmp_path, service.base_url)
    # Another process takes the lock, says it is a run, and is killed with -9 while holding it.
    script = textwrap.dedent(f"""
        import os, signal
        from pipeline.core._loading import load_settings
        from pipeline.operate._lock import run_lock
        s = load_settings(None, env={{}}, overrides={{"store.db": {str(settings.db_path)!r}}})
        with run_lock(s, "run", run_id="doomed"):
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=_env(), timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert (holder(settings) or Holder()).run_id == "doomed"
    with caplog.at_level("WARNING", logger="botstats.lock"):
        report = runner.run(settings, runner.RunOptions(lock_timeout=5))
    assert report.status == "complete"
    assert report.took_over is not None and report.took_over.run_id == "doomed"
    assert "took over the archive lock" in caplog.text and "doomed" in caplog.text


@pytest.mark.clock
@pytest.mark.slow
def test_a_second_sigterm_aborts_at_once(tmp_path: Path, service_factory: Any) -> None:
    # Each request takes 2 s: stopping gracefully would wait for the requests in flight and
    # write the batch, then record the run interrupted (exit 4). The second signal kills it.
    svc = service_factory(bots=40, history_days=1, stats_per_day=1, latency_ms=2000)
    settings = _settings(tmp_path, svc.base_url)
    proc = _botstats(tmp_path, "--db", str(settings.db_path), "--base-url", svc.base_url, "run",
                     "--no-progress")
    try:
        _wait_for(lambda: bool((holder(settings) or Holder()).run_id), proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.stderr is not None
        said = ""
        while "SIGTERM received" not in said:  # the first signal was handled
            line = read_line(proc.stderr)
            assert line, f"botstats exited ({proc.wait(30)}) before saying it received SIGTERM"
            said += line
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert rc == -signal.SIGTERM, said + stderr_of(proc)
    assert "send it again to abort at once" in said
    assert _statuses(settings.db_path) == ["running"]  # it never got as far as recording one


@pytest.mark.clock
@pytest.mark.slow
def test_sigterm_finishes_the_batch_and_records_the_run_interrupted(tmp_path: Path,
                                                                    service_factory: Any) -> None:
    svc = service_factory(bots=80, history_days=3, stats_per_day=2, latency_ms=300)
    settings = _settings(tmp_path, svc.base_url)
    proc = _botstats(tmp_path, "--db", str(settings.db_path), "--base-url", svc.base_url, "run",
                     "--no-progress")
    # The run notes its run id in the lock holder file after its first bot: inside the harvest,
    # with most of its 80 bots (0.3 s each, 8 at a time) still to go.
    _wait_for(lambda: bool((holder(settings) or Holder()).run_id), proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert "SIGTERM received" in err
    assert "trends: not run (the harvest ended interrupted)" in out
    assert _statuses(settings.db_path) == ["interrupted"]
    # The next run completes the work, exactly.
    report = runner.run(settings)
    assert report.status == "complete"
    with open_archive(settings.db_path) as con:
        stats = con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0]
    assert stats == sum(len(svc.directory.valid_stats(b)) for b in svc.directory.bot_ids())
