"""Nothing wrong is ever quiet (issue 22): a run where a whole kind of request or record fails
does not end complete; ids are never merged; the probe decides every setting or says why not;
advice for a wrong field is right or absent, and following it never loses data. Against the
embedded service playing services that spell records otherwise."""

from __future__ import annotations

import asyncio
import dataclasses
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
    service_shape,
    user_with_lists,
)
from conftest import harvest_settings_for, query

from pipeline.core import FieldSettings
from pipeline.harvester import harvest
from pipeline.harvester._ids import Identities, repeated
from pipeline.harvester._shapes import id_candidates
from pipeline.harvester._verdict import RunTally, judge
from pipeline.interface import Reply
from pipeline.probe import run_probe
from pipeline.probe._paging import probe_paging
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


ADVICE_CASES: dict[str, dict[str, Any]] = {"issue": ISSUE_SERVICE, **{
    name: {**SMALL, **profile} for name, profile in PROFILES.items()}}


@pytest.mark.parametrize("case", list(ADVICE_CASES))
def test_finding_3_advice_is_right_or_absent_and_following_it_never_loses_data(
        tmp_path: Path, service_factory: Factory, case: str) -> None:
    """Every [fields] setting left at its default against a service that spells them all
    otherwise (the issue's mixed case with the token set, and the three profiles): the advice
    is applied literally, run after run. Each run either fails with nothing of it archived
    (every record kept in rejects) or is complete with the archive and the user snapshot equal
    to the service. Where the advice says to run `botstats probe`, its decided settings are
    applied, and the next run must be complete and exact too."""
    svc = service_factory(**ADVICE_CASES[case])
    user_id, token = user_with_lists(svc)
    settings: dict[str, Any] = service_shape(svc, token)
    for _ in range(6):
        result = harvest(settings_for(svc, tmp_path, **settings))
        now = settings_for(svc, tmp_path, **settings)
        if result.status == "complete":
            assert archived_rows(now) == served_rows(svc), "complete with less"
            assert archived_snapshot(now, last_run(now)) == served_snapshot(svc, user_id)
            break
        assert (result.status, result.exit_code) == ("failed", 1), result.message
        # Nothing of a run failed for a setting is archived (so nothing merged), and nothing
        # is lost: what it refused is kept whole for the run after the fix.
        for table in ("bots", "bot_stats", "users", "user_servers"):
            assert query(now, f"SELECT count(*) FROM {table}") == [(0,)], table
        assert query(now, "SELECT count(*) FROM rejects WHERE raw IS NOT NULL")[0][0] > 0
        told = advice(result.message)
        for value in told.values():
            assert value not in ("username", "avatar", "bot_id", "owner_id"), result.message
        if not told:  # advice absent: it must say to ask the service, and that must work
            assert "botstats probe" in result.message, result.message
            report = run_probe(now)
            told = {p.key: p.value for p in report.proposals
                    if p.decided and p.key.startswith("fields.")}
            assert told, report
        settings.update(told)
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


def test_an_id_that_repeats_in_a_user_list_is_refused_before_anything_is_written(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=20, users=4, history_days=2)
    user_id, token = user_with_lists(svc, least=3)
    owners = [s["owner_id"] for s in svc.directory.user_servers(
        svc.directory.users().index(user_id))]
    assert len(set(owners)) < len(owners)  # the user owns several of them
    settings = settings_for(svc, tmp_path, user_token=token, **{"fields.server_id": "owner_id"})
    result = harvest(settings)
    assert (result.status, result.exit_code) == ("failed", 1), result.message
    assert f'[fields].server_id = "owner_id" is not unique in GET /users/{user_id}/servers' \
        in result.message
    for table in ("users", "user_servers", "bots", "bot_stats"):
        assert query(settings, f"SELECT count(*) FROM {table}") == [(0,)], table


def test_a_paged_stats_list_read_as_whole_fails_the_first_run_instead_of_keeping_a_page(
        tmp_path: Path, service_factory: Factory) -> None:
    """GET /stat, asked before each /stats on a first run, shows its /stats answers were pages:
    the run fails naming the setting, rather than archive 4 records a bot as if that were
    all."""
    svc = service_factory(bots=8, history_days=3, stats_per_day=2, stats_page_size=4)
    settings = settings_for(svc, tmp_path)
    result = harvest(settings)
    assert (result.status, result.exit_code) == ("failed", 1), result.message
    assert "the service pages /stats" in result.message
    assert "Set [service].stats_page_size to the service's page size (4" in result.message
    assert query(settings, "SELECT count(*) FROM bot_stats") == [(0,)]
    fixed = settings_for(svc, tmp_path, **{"service.stats_page_size": 4})
    assert harvest(fixed).status == "complete"
    assert archived_rows(fixed) == served_rows(svc)


# --- item 1: the rules per kind -------------------------------------------------------------
def test_every_stat_record_refused_whatever_the_reasons_fails_the_run(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=6, history_days=2, stats_per_day=2, malformed_rate=1.0)
    settings = settings_for(svc, tmp_path)
    result = harvest(settings)
    assert (result.status, result.exit_code) == ("failed", 1), result.message
    assert "stat records are not in a shape botstats reads" in result.message
    assert query(settings, "SELECT count(*) FROM bots") == [(0,)]
    assert query(settings, "SELECT count(*) FROM rejects")[0][0] == 6 * 4


def test_every_one_of_a_few_stat_records_refused_is_partial(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=1, history_days=2, malformed_rate=1.0)
    result = harvest(settings_for(svc, tmp_path))
    assert (result.status, result.exit_code) == ("partial", 3), result.message
    assert "Too few records to tell a wrong setting from bad records" in result.message


def test_a_snapshot_list_refused_whole_fails_the_run_naming_the_field(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=20, users=4, history_days=2, field_names={"webhook_id": "hookId"})
    _, token = user_with_lists(svc)
    settings = settings_for(svc, tmp_path, user_token=token)
    result = harvest(settings)
    assert (result.status, result.exit_code) == ("failed", 1), result.message
    assert "webhook records have no 'id'; they carry 'hookId'" in result.message
    assert 'set [fields].webhook_id = "hookId"' in result.message
    for table in ("users", "user_webhooks", "bot_stats"):
        assert query(settings, f"SELECT count(*) FROM {table}") == [(0,)], table


def test_a_stat_id_field_every_record_of_a_bot_shares_is_refused(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=4, history_days=3)
    settings = settings_for(svc, tmp_path, **{"fields.stat_id": "bot_id"})
    result = harvest(settings)
    assert result.status == "failed"
    assert '[fields].stat_id = "bot_id" is not unique in GET /bots/' in result.message
    assert query(settings, "SELECT count(*) FROM bot_stats") == [(0,)]


def tally_of(**kinds: tuple[int, int, str]) -> RunTally:
    """A tally with (kept, refused, reason) per record kind."""
    tally = RunTally()
    for kind, (kept, refused, reason) in kinds.items():
        tally.keep(kind.replace("_", " "), kept)
        for n in range(refused):
            tally.reject(kind.replace("_", " "), reason, f'{{"n": {n}}}')
    return tally


def reads_of(tried: int, failed: int, cause: str = "404", found: bool | None = None) -> RunTally:
    tally = RunTally()
    tally.request("GET /bots/:id/stats").tried = tried
    for n in range(failed):
        tally.failed("GET /bots/:id/stats", cause, f"GET /bots/{n}/stats answered {cause}", str(n))
    if found is not None:
        tally.bots_found.append(found)
    return tally


@pytest.mark.parametrize(("tally", "status", "words"), [
    (tally_of(stat=(95, 5, "cpu_load must be a percentage")), None, ""),
    (tally_of(stat=(1, 9, "cpu_load must be a percentage")), "failed", "not in a shape"),
    (tally_of(stat=(0, 3, "users must not be negative")), "partial", "Too few records"),
    (tally_of(bot=(0, 5, "missing bot id field 'id'")), "failed", "bot records have no 'id'"),
    (tally_of(user=(0, 1, "missing user id field 'id'")), "failed", "[fields].user_id"),
    (tally_of(server=(2, 1, "missing server id field 'id'")), "partial",
     "The user snapshot lacks 1 of the 3 server records"),
    (tally_of(user_bot=(0, 2, "missing bot id field 'id'")), "failed", "user bot records"),
    (reads_of(10, 4), None, ""),
    (reads_of(10, 6), "failed", "6 of 10 GET /bots/:id/stats answered 404"),
    (reads_of(10, 10, found=True), None, ""),  # the service says 404 for "no records"
    (reads_of(10, 10, found=False), "failed", "answered 404 too"),
    (reads_of(3, 3, "503"), "partial", "3 of 3 GET /bots/:id/stats failed"),
    (reads_of(8, 7, "401"), "failed", "7 of 8 GET /bots/:id/stats failed"),
], ids=["few-bad-stats", "stats-refused", "few-stats-all-refused", "bots-refused",
        "user-refused", "server-some-refused", "user-bots-refused", "some-404",
        "most-404", "404-no-records", "404-no-bots", "few-5xx", "most-401"])
def test_the_rule_for_each_kind(tally: RunTally, status: str | None, words: str) -> None:
    verdict = judge(tally, FieldSettings())
    if status is None:
        assert verdict is None
        return
    assert verdict is not None and verdict.status == status and words in verdict.message


# --- item 2: what the id check tells apart ---------------------------------------------------
def test_repeats_of_one_record_are_one_and_different_records_under_one_id_are_refused() -> None:
    same = '{"id": "1", "name": "a"}'
    assert repeated(["1", "1", "2"], [same, '{"name": "a", "id": "1"}', '{"id": "2"}']) == []
    assert repeated(["x", "y", "x"], ['{"u": "x", "id": 1}', "{}", '{"u": "x", "id": 2}']) == ["x"]
    pages = Identities("username")
    assert pages.clashes([("nova", {"username": "nova", "id": "1", "guilds": 3})]) == []
    # The same bot on a later page, updated between the reads: not a clash.
    assert pages.clashes([("nova", {"username": "nova", "id": "1", "guilds": 4})]) == []
    # Another bot under the same name: its own id differs.
    assert pages.clashes([("nova", {"username": "nova", "id": "2"})]) == ["nova"]


# --- item 3: botstats' rules for an id --------------------------------------------------------
SNOWFLAKES = ["924731813402906345", "1348747531386940048", "1120803206728683032"]


@pytest.mark.parametrize(("records", "kind", "foreign", "found"), [
    ([{"id": s, "username": f"u{n}"} for n, s in enumerate(SNOWFLAKES)], "bot", (), ["id"]),
    ([{"botId": int(s)} for s in SNOWFLAKES], "bot", (), ["botId"]),
    ([{"_id": f"{n:024x}"} for n in range(3)], "stat", (), ["_id"]),
    ([{"avatar": f"https://cdn/{n}.png", "username": f"u{n}"} for n in range(3)], "bot", (), []),
    ([{"hookId": int(s), "bot_id": n} for n, s in enumerate(SNOWFLAKES)], "webhook", (),
     ["hookId"]),  # bot_id names another resource
    ([{"ref": s, "hook": f"h{n}"} for n, s in enumerate(SNOWFLAKES)], "webhook",
     {SNOWFLAKES[0]}, ["hook"]),  # ref holds a bot's id
    ([{"guild_id": s, "owner_id": "7"} for s in SNOWFLAKES], "server", (), ["guild_id"]),
    ([{"id": "a"}, {"id": "a"}], "server", (), []),  # not unique
    ([{"id": "a b"}, {"id": "c d"}], "server", (), []),  # not an id's shape
    ([{"at": "2024-06-01T00:00:00Z"}, {"at": "2024-06-02T00:00:00Z"}], "stat", (), []),
    ([{"n": 1.5}, {"n": 2.5}], "stat", (), []),
])
def test_id_candidates_follow_the_rules(records: list[dict[str, Any]], kind: str,
                                        foreign: Any, found: list[str]) -> None:
    assert [c.field for c in id_candidates(records, kind, foreign=foreign)] == found


def _scripted_get(answers: dict[str, Reply]) -> Any:
    """A probe's GET over canned replies, keyed by the query it asks."""
    async def get(path: str, params: dict[str, Any] | None) -> Reply:
        query = "&".join(f"{k}={v}" for k, v in (params or {}).items())
        return answers.get(query, Reply("GET", f"http://x{path}?{query}", "read", 200, {},
                                        "[]", 0.1))
    return get


def test_a_failed_read_is_unknown_never_evidence() -> None:
    three = json.dumps([{"id": str(i)} for i in range(3)])
    page = Reply("GET", "http://x/bots", "read", 200, {}, three, 0.1)
    busy = Reply("GET", "http://x/bots?limit=2&skip=0", "read", 503, {}, "", 0.1)
    found = asyncio.run(probe_paging(_scripted_get({"limit=2&skip=0": busy}), "bots", "/bots",
                                     page))
    assert found.family is None and "503 after every retry" in found.why
    assert [(p.key, p.decided) for p in found.proposals()] == [
        ("service.bots_list_path", True), ("service.bots_paging", False),
        ("service.page_size", False)]


def test_a_refused_large_page_is_read_for_its_words_never_taken_for_an_empty_list() -> None:
    bots = [{"id": str(i)} for i in range(600)]

    def page(skip: int, limit: int) -> Reply:
        return Reply("GET", "http://x/bots", "read", 200, {},
                     json.dumps({"results": bots[skip:skip + limit], "total": len(bots)}), 0.1)

    answers = {f"limit={n}&skip={s}": page(s, n) for n, s in ((2, 0), (2, 2), (500, 0))}
    answers["limit=1000&skip=0"] = Reply("GET", "http://x/bots?limit=1000", "read", 400, {},
                                         '{"error": "limit must be at most 500"}', 0.1)
    found = asyncio.run(probe_paging(_scripted_get(answers), "bots", "/bots", page(0, 50)))
    assert (found.family, found.cap, found.first.list_path) == ("offset", 500, "results")
    assert len(found.records) == 500  # the largest page read, a sample of the directory
    assert {p.key: p.value for p in found.proposals()}["service.page_size"] == 500


def test_the_probe_retries_transient_failures_and_decides_every_setting_or_says_why(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=20, users=4, history_days=2, error_rate=0.3, seed=3,
                          field_names={"user_id": "userId"})
    _, token = user_with_lists(svc)
    settings = settings_for(svc, tmp_path, user_token=token, **{"retry.attempts": 8})
    report = run_probe(settings)
    assert svc.app.state.faults.injected > 0  # it met 5xx, and read past them
    assert proposed(report)["fields.user_id"] == "userId"
    assert proposed(report)["fields.stat_time"] == "timestamp"
    listed = {p.key for p in report.proposals}
    for section in ("fields", "service"):
        for setting in dataclasses.fields(getattr(settings, section)):
            assert f"{section}.{setting.name}" in listed, setting.name
    assert "a choice of yours" in undecided(report)["service.timeout"]
    accepted = {f.what: f.result for f in report.findings if f.what.endswith("reads them")}
    assert accepted["stat records as a harvest reads them"].startswith("all ")


def test_the_probe_says_which_records_a_harvest_would_refuse(
        tmp_path: Path, service_factory: Factory) -> None:
    svc = service_factory(bots=6, history_days=4, malformed_rate=0.5)
    report = run_probe(settings_for(svc, tmp_path))
    said = next(f.result for f in report.findings
                if f.what == "stat records as a harvest reads them")
    assert " would be refused: " in said and "A harvest keeps them in table rejects" in said
