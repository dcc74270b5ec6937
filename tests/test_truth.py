"""Nothing wrong is ever quiet (issue 22): a run where a whole kind of request or record fails
does not end complete; ids are never merged; the probe decides every setting or says why not;
advice for a wrong field is right or absent, and following it never loses data. Against the
embedded service playing services that spell records otherwise."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _truth_support import (
    archived_rows,
    archived_snapshot,
    last_run,
    served_rows,
    served_snapshot,
    user_with_lists,
)
from conftest import harvest_settings_for, query

from pipeline.harvester import harvest, run_probe
from pipeline.service import RunningService

Factory = Callable[..., RunningService]
# The service of the issue, as far as 22a's part goes: ids of every resource under other keys
# and as JSON integers, names under another key, 24-hex stat ids, epoch-second times, custom
# fields {key, val}, every bot read wanting the token.
ISSUE_SERVICE: dict[str, Any] = {
    "bots": 40, "users": 5, "history_days": 3, "id_type": "integer", "stat_ids": "hex",
    "time_format": "epoch-s", "bot_reads_need_token": True,
    "field_names": {"bot_id": "botId", "bot_name": "displayName", "stat_id": "_id",
                    "stat_time": "createdAt", "custom_name": "key", "custom_value": "val",
                    "user_id": "userId", "server_id": "guildId", "webhook_id": "hookId"}}


def settings_for(svc: RunningService, tmp_path: Path, **more: Any) -> Any:
    return harvest_settings_for(svc, tmp_path / "archive.ducklake", more)


def proposed(report: Any) -> dict[str, Any]:
    return {p.key: p.value for p in report.proposals}


def undecided(report: Any) -> dict[str, str]:
    return {p.key: p.why for p in report.proposals if not p.decided}


# --- finding 1: the user snapshot was silently empty ----------------------------------------
def test_finding_1_the_probe_decides_the_user_id_and_a_refused_user_record_fails_the_run(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=20, users=4, history_days=2,
                          field_names={"user_id": "userId"})
    user_id, token = user_with_lists(svc)
    report = run_probe(settings_for(svc, tmp_path, user_token=token))
    assert proposed(report)["fields.user_id"] == "userId"

    result = harvest(settings_for(svc, tmp_path, user_token=token))
    assert result.status == "failed" and result.exit_code == 1, result.message
    assert "user records" in result.message and "[fields].user_id" in result.message
    assert 'set [fields].user_id = "userId"' in result.message
    fixed = settings_for(svc, tmp_path, user_token=token, **{"fields.user_id": "userId"})
    assert harvest(fixed).status == "complete"
    assert archived_snapshot(fixed, last_run(fixed)) == served_snapshot(svc, user_id)


# --- finding 2: the probe proposed a foreign key as an id ---------------------------------
def test_finding_2_the_probe_never_takes_a_reference_to_another_resource_for_an_id(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=20, users=4, history_days=2,
                          field_names={"webhook_id": "hookId", "server_id": "guildId"})
    _, token = user_with_lists(svc)
    report = run_probe(settings_for(svc, tmp_path, user_token=token))
    assert proposed(report)["fields.webhook_id"] == "hookId"  # never "bot_id"
    assert proposed(report)["fields.server_id"] == "guildId"  # never "owner_id"


# --- finding 3: wrong advice, and following it lost everything quietly --------------------
def advice(message: str) -> dict[str, str]:
    """The settings a message advises, as it words them: set [fields].X = "Y"."""
    return {f"fields.{key}": value
            for key, value in re.findall(r'set \[fields\]\.(\w+) = "([^"]*)"', message)}


def test_finding_3_advice_is_right_or_absent_and_following_it_never_loses_data(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(**ISSUE_SERVICE)
    _, token = user_with_lists(svc)
    settings: dict[str, Any] = {"user_token": token, "service.token_on_bot_reads": True}
    stats, custom = served_rows(svc)
    for _ in range(6):
        result = harvest(settings_for(svc, tmp_path, **settings))
        archived, archived_custom = archived_rows(settings_for(svc, tmp_path, **settings))
        if result.status == "complete":
            assert (archived, archived_custom) == (stats, custom), "complete with less"
            break
        assert result.status == "failed", result.message
        # Nothing of a run that failed for a setting is archived (so nothing merged either).
        assert archived == [] and query(settings_for(svc, tmp_path, **settings),
                                         "SELECT count(*) FROM bots") == [(0,)]
        told = advice(result.message)
        assert told, f"no advice, yet a field is wrong: {result.message}"
        for key, value in told.items():
            assert value not in ("username", "avatar", "bot_id", "owner_id"), result.message
            settings[key] = value
    else:
        pytest.fail(f"the advice never led to a complete run: {settings}")


def test_finding_3_every_stats_read_answered_404_fails_the_run_writing_nothing(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=12, history_days=2)
    settings = settings_for(svc, tmp_path, **{"fields.bot_id": "invite"})
    result = harvest(settings)
    assert result.status == "failed" and result.exit_code == 1
    words = " ".join(result.message.split())
    assert "of 12 GET /bots/:id/stats answered 404" in words, words
    assert "[fields].bot_id" in words and "botstats probe" in words
    assert query(settings, "SELECT count(*) FROM bots") == [(0,)]


def test_finding_3_an_id_field_that_is_not_unique_is_refused_before_anything_is_written(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=60, history_days=2)
    settings = settings_for(svc, tmp_path, **{"fields.bot_id": "library"})
    result = harvest(settings)
    assert result.status == "failed" and result.exit_code == 1
    assert '[fields].bot_id = "library" is not unique in GET /bots' in result.message
    assert "discord.js" in result.message  # a few of the repeated values are named
    assert query(settings, "SELECT count(*) FROM bots") == [(0,)]
    assert query(settings, "SELECT count(*) FROM bot_stats") == [(0,)]
