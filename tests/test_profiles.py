"""Any service, told the truth (issue 22), end to end: against the embedded service playing
services that differ from the defaults and from each other, a harvest before any setting is
never `complete`; `botstats probe --write` then decides the settings; the harvest archives
every record and the user snapshot exactly (checked row by row against the service); new and
posted records arrive and the next harvest archives them too. Every exit code is the honest
one. All through the CLI, as a user runs it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _truth_support import (
    PROFILES,
    SMALL,
    archived_rows,
    archived_snapshot,
    last_run,
    served_rows,
    served_snapshot,
    user_with_lists,
)
from click.testing import CliRunner
from conftest import query

from pipeline.cli import cli
from pipeline.core import load_settings
from pipeline.service import RunningService


def botstats(*args: str, token: str = "", bot_key: str = "") -> Any:
    env = {"BOTSTATS_CONFIG": "", "BOTSTATS_USER_TOKEN": token, "BOTSTATS_BOT_KEY": bot_key}
    return CliRunner().invoke(cli, list(args), env=env)


def assert_archive_equals_service(svc: RunningService, config: Path, db: Path,
                                  user_id: str) -> None:
    settings = load_settings(config, env={}, overrides={"store.db": str(db)})
    assert archived_rows(settings) == served_rows(svc)
    bots = {b for (b,) in query(settings, "SELECT bot_id FROM bots")}
    assert bots == set(svc.directory.bot_ids())
    assert archived_snapshot(settings, last_run(settings)) == served_snapshot(svc, user_id)


@pytest.mark.parametrize("profile", list(PROFILES))
def test_probe_then_harvest_archives_a_differing_service_exactly_with_honest_exit_codes(
        tmp_path: Path, service_factory: Callable[..., RunningService], profile: str) -> None:
    svc = service_factory(**SMALL, **PROFILES[profile])
    user_id, token = user_with_lists(svc)
    config, db = tmp_path / "config.toml", tmp_path / "archive.ducklake"
    config.write_text("")
    where = ["--config", str(config), "--base-url", svc.base_url]
    run = ["harvest", *where, "--db", str(db), "--no-progress", "--json"]

    # Before any setting fits: failed, naming the setting to fix, and nothing archived.
    blind = botstats(*run, token=token)
    assert blind.exit_code == 1, blind.output
    report = json.loads(blind.stdout)
    assert report["status"] == "failed", report
    assert re.search(r"\[(fields|service)\]\.\w+", report["message"]), report["message"]
    settings = load_settings(config, env={}, overrides={"store.db": str(db)})
    for table in ("bots", "bot_stats", "users", "user_bots"):
        assert query(settings, f"SELECT count(*) FROM {table}") == [(0,)], table

    probed = botstats("probe", *where, "--json", "--write", str(config), token=token)
    assert probed.exit_code == 0, probed.output
    written = json.loads(probed.stdout)["written"]
    assert {"fields.bot_id", "fields.stat_time", "fields.user_id"} <= set(written)
    for setting in ("stat_id", "stat_time", "custom_name", "custom_value", "bot_id", "user_id",
                    "server_id", "webhook_id"):
        served = svc.config.field_name(setting)
        decided = load_settings(config, env={}).fields
        if setting == "stat_id" and svc.config.stat_ids == "none":
            served = ""
        if setting.startswith("custom_") and svc.config.custom_shape == "object":
            continue  # not used for an object of name -> value
        assert getattr(decided, setting) == served, setting

    first = botstats(*run, token=token)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["status"] == "complete"
    assert_archive_equals_service(svc, config, db, user_id)

    svc.directory.advance(1)
    bot_id = svc.directory.bot_ids()[0]
    posted = botstats("post-stat", bot_id, "--users", "7", "--guilds", "3", *where,
                      bot_key=svc.directory.bot_key(bot_id))
    assert posted.exit_code == 0, posted.output
    again = botstats(*run, token=token)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["stats_added"] == len(svc.directory.bot_ids()) + 1
    assert_archive_equals_service(svc, config, db, user_id)
