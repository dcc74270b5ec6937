"""Alerts end to end: `botstats run` as cron calls it, hour after hour, against the embedded
service and real receivers on loopback. A failing service: one alert; the next failing run:
none; after [alerts].repeat_interval: a reminder; the service back: one "resolved"; the planted
events: one alert each, grouped in one message; a destination down: the run still complete,
exit 0, and the alert delivered by the next run. (That a later run repeats nothing is shown in
process by tests/test_alerts.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from _alerts_support import Answer, Receiver, free_port, receiver
from click.testing import CliRunner
from conftest import child_env

from pipeline.archive import writer
from pipeline.cli import cli
from pipeline.core import load_settings
from pipeline.service import RunningService

__all__ = ["receiver"]  # the fixture

TOKEN = "cronT0KENdoNotShow0123456789"
OPS, ANALYSTS = f"/ops/{TOKEN}", f"/analysts/{TOKEN}"


def write_config(tmp_path: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(f"""
[store]
db = "{tmp_path / 'archive.ducklake'}"
threads = 1
[exports]
dir = "{tmp_path / 'exports'}"
[retry]
attempts = 2
backoff_base = 0.01
backoff_max = 0.05
[alerts]
min_severity = 0.0
event_days = 400
budget = 3.0

[alerts.destinations.ops]
type = "discord"
kinds = ["failed", "partial", "lock", "stale", "resolved"]

[alerts.destinations.analysts]
type = "slack"
kinds = ["event"]
""")
    return config


def cron_run(tmp_path: Path, config: Path, base_url: str, receiver: Receiver) -> tuple[int, dict[str, Any]]:
    """One `botstats run --json` as cron starts it; its exit code and report."""
    env = child_env(BOTSTATS_ALERTS_OPS_URL=receiver.url(OPS),
                    BOTSTATS_ALERTS_ANALYSTS_URL=receiver.url(ANALYSTS))
    proc = subprocess.run([sys.executable, "-m", "pipeline", "--config", str(config), "run",
                           "--base-url", base_url, "--no-progress", "--json"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=180)
    assert TOKEN not in proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def ops_titles(receiver: Receiver) -> list[str]:
    return [e["title"].replace("\\", "") for body in receiver.received(OPS) for e in body["embeds"]]


@pytest.mark.slow
def test_cron_runs_tell_each_thing_once(tmp_path: Path, receiver: Receiver,
                                        service_factory: Callable[..., RunningService]) -> None:
    config = write_config(tmp_path)
    settings = load_settings(config, env={})
    down = f"http://127.0.0.1:{free_port()}"

    # The service is down: one alert, with the run's reason and fix.
    code, report = cron_run(tmp_path, config, down, receiver)
    assert (code, report["status"]) == (1, "failed")
    assert ops_titles(receiver) == ["botstats run failed"]
    (first,) = receiver.received(OPS)
    assert "could not connect" in first["embeds"][0]["description"]
    assert [a["kind"] for a in report["alerts"]["delivered"]] == ["failed"]

    # An hour later, still down: nothing new to say.
    code, report = cron_run(tmp_path, config, down, receiver)
    assert code == 1 and report["alerts"]["delivered"] == [] and len(receiver.received(OPS)) == 1

    # A day after the alert ([alerts].repeat_interval): a reminder.
    with writer(settings) as con:
        con.execute("UPDATE alerts SET tried_at = tried_at - INTERVAL 25 HOUR")
    code, report = cron_run(tmp_path, config, down, receiver)
    assert code == 1 and ops_titles(receiver) == ["botstats run failed",
                                                  "Still: botstats run failed"]
    assert receiver.received(OPS)[1]["embeds"][0]["description"].split("\n")[2].endswith(" 3 runs)")

    # The service is back, with planted events; the analysts' webhook is down meanwhile.
    svc = service_factory(bots=16, history_days=40, stats_per_day=2, events=0.3)
    receiver.always(ANALYSTS, Answer(503))
    code, report = cron_run(tmp_path, config, svc.base_url, receiver)
    assert (code, report["status"]) == (0, "complete")  # the destination down changes nothing
    assert report["memory"]["fresh_process"]  # told by the image that built the trends
    assert ops_titles(receiver)[2].startswith("Resolved: runs complete again after ")
    assert len(receiver.received(OPS)) == 3
    assert receiver.received(ANALYSTS) == [] and receiver.tries(ANALYSTS)[0] == 503
    undelivered = report["alerts"]["undelivered"]
    assert undelivered and {a["destination"] for a in undelivered} == {"analysts"}
    status = CliRunner().invoke(cli, ["--config", str(config), "status"])
    assert status.exit_code == 0, status.output
    assert "alerts not yet delivered (the next run tries again" in status.output

    # The next run delivers them: one alert per planted event, in one message.
    receiver.always(ANALYSTS, None)
    code, report = cron_run(tmp_path, config, svc.base_url, receiver)
    assert code == 0 and len(receiver.received(OPS)) == 3
    (message,) = receiver.received(ANALYSTS)
    told = sorted((a["key"].split(":")[1], a["title"]) for a in report["alerts"]["delivered"])
    # The service's world keeps its bots' routine spikes and restarts beside the planted events
    # (the detector names those too), and a planted event near the detector's floor may pass
    # unseen: every planted event clear of the floor is told, each once.
    planted = [e for e in svc.directory.events() if e["anomaly"] and not e.get("near_floor")]
    assert len(told) >= len(planted) > 0
    keys = [a["key"] for a in report["alerts"]["delivered"]]
    assert len(set(keys)) == len(keys) == len(told)  # each thing once
    told_keys = set(keys)
    hits = []
    for event in planted:  # a planted event is told on the day it is known
        day = date.fromisoformat(event["first_day"])
        if event["kind"] == "outage":  # known on the day the bot reports again
            day = date.fromisoformat(event["last_day"]) + timedelta(days=1)
        hits.append(f"event:{event['bot_id']}:{day}" in told_keys)
    # Which planted events the detector finds is the anomalies bench's measure (recall about
    # 0.9 in this world); here: what it found is told, most of the planted ones among it.
    assert sum(hits) >= 0.6 * len(planted), (planted, told)
    section = message["blocks"][1]["text"]["text"]
    assert section.startswith(f"*{len(told)} events*\n")
    assert section.count("\n") == len(told)
    status = CliRunner().invoke(cli, ["--config", str(config), "status"])
    assert "alerts not yet delivered" not in status.output
    listed = CliRunner().invoke(cli, ["--config", str(config), "alerts", "list", "--json",
                                      "--limit", "100"])
    rows = json.loads(listed.output)
    assert {(r["destination"], r["kind"], r["outcome"]) for r in rows} == {
        ("ops", "failed", "delivered"), ("ops", "resolved", "delivered"),
        ("analysts", "event", "failed"), ("analysts", "event", "delivered")}
    assert TOKEN not in listed.output
