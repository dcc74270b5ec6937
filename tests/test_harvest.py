"""The harvester against a healthy embedded service: after a run the archive equals the
service's data exactly, re-runs are incremental and idempotent, users are snapshotted per run,
and bots that leave keep their history.

Real server on loopback, real DuckDB files; the service's `Directory` is the ground truth.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from conftest import (
    Templates,
    archived_custom_rows,
    archived_stat_rows,
    assert_archive_equals_service,
    assert_archive_has_no_duplicates,
    harvest_settings_for,
    harvested_copy,
    query,
    service_custom_rows,
    service_stat_rows,
    stat_keys,
)

from pipeline.archive import _store as store
from pipeline.archive import _upkeep as upkeep
from pipeline.archive._store import ArchivePaths
from pipeline.core._settings import Secret, Settings
from pipeline.harvester import _batch as batch_module
from pipeline.harvester._report import HarvestOptions
from pipeline.harvester._run import HarvestReport, harvest
from pipeline.interface._client import Client
from pipeline.service import RunningService

BOTS = 30
FIXED_END = datetime(2024, 6, 1, tzinfo=UTC)  # two services with this config hold the same data


@dataclass
class Harvested:
    """A service, the settings that archive it, and the report of the first run."""

    svc: RunningService
    settings: Settings
    first: HarvestReport

    def listing_requests(self) -> int:
        return int(self.svc.directory.summary()["listing_requests"])

    def run(self, **kw: Any) -> tuple[HarvestReport, int]:
        """Harvest again; return the report and how many GET /bots the service answered."""
        before = self.listing_requests()
        report = harvest(self.settings, HarvestOptions(**kw))
        return report, self.listing_requests() - before


def stored_versions(settings: Settings) -> dict[tuple[str, str], tuple[Any, ...]]:
    """What a rewrite would change: run_id, archived_at and raw of every stat row."""
    rows = query(settings, "SELECT bot_id, stat_id, run_id, archived_at, raw::VARCHAR FROM bot_stats")
    return {(b, s): rest for b, s, *rest in rows}


@pytest.fixture
def harvested(service: RunningService, tmp_path: Path, templates: Templates) -> Harvested:
    """The healthy 30-bot service, harvested once (a copy of the archive: see harvested_copy)."""
    settings, first = harvested_copy(templates, service, tmp_path / "archive.ducklake")
    return Harvested(service, settings, first)


# --- one run --------------------------------------------------------------------------------
def test_a_harvest_archives_every_valid_record_of_every_bot(harvested: Harvested) -> None:
    rows = archived_stat_rows(harvested.settings)
    assert rows == service_stat_rows(harvested.svc.directory)
    assert_archive_has_no_duplicates(harvested.settings)
    report = harvested.first
    assert (report.status, report.bots_seen, report.bots_new, report.stats_added) == (
        "complete", BOTS, BOTS, len(rows))
    assert (report.rejects, report.errors, report.stats_updated) == (0, 0, 0)
    assert query(harvested.settings, "SELECT count(*) FROM rejects") == [(0,)]


def test_every_bot_is_archived_with_its_name_and_raw_record(harvested: Harvested) -> None:
    rows = query(harvested.settings, "SELECT bot_id, name, raw::VARCHAR, removed_at, "
                                     "first_seen_at IS NOT NULL, last_seen_at IS NOT NULL FROM bots")
    archived = {bot_id: (name, json.loads(raw), removed, first, last)
                for bot_id, name, raw, removed, first, last in rows}
    expected = {bot["id"]: (bot["name"], bot, None, True, True)
                for bot in harvested.svc.directory.listing()}
    assert archived == expected
    assert len(rows) == BOTS


def test_custom_fields_land_in_bot_stat_custom_with_text_and_number(harvested: Harvested) -> None:
    rows = archived_custom_rows(harvested.settings)
    assert rows == service_custom_rows(harvested.svc.directory)
    # The service sends text, numbers and booleans: each kind is there, kept as it should be.
    assert any(text is not None and num is None for *_, text, num in rows)  # e.g. region
    assert any(num is not None and text != "true" for *_, text, num in rows)  # e.g. latency_ms
    assert {(text, num) for *_, name, text, num in rows if name == "voice_enabled"} <= {
        ("true", 1.0), ("false", 0.0)}


def test_every_row_carries_the_run_that_archived_it(harvested: Harvested) -> None:
    run_id = harvested.first.run_id
    for table in ("bot_stats", "bot_stat_custom", "bots"):
        assert query(harvested.settings, f"SELECT DISTINCT run_id FROM {table}") == [(run_id,)]


def test_the_run_is_recorded_with_its_counters(harvested: Harvested) -> None:
    report = harvested.first
    [row] = query(harvested.settings,
                  "SELECT run_id, status, mode, bots_seen, bots_new, stats_added, stats_updated, "
                  "requests, rejects, errors, started_at IS NOT NULL, finished_at >= started_at "
                  "FROM harvest_runs")
    (stats,) = query(harvested.settings, "SELECT count(*) FROM bot_stats")[0]
    assert row == (report.run_id, "complete", "incremental", BOTS, BOTS, stats, 0,
                   report.requests, 0, 0, True, True)


# --- re-runs ------------------------------------------------------------------------------
def test_a_second_run_adds_nothing_rewrites_nothing_and_asks_one_stat_per_bot(
        harvested: Harvested) -> None:
    before = stored_versions(harvested.settings)
    report, pages = harvested.run()
    assert stored_versions(harvested.settings) == before  # same run_id, archived_at, raw
    assert (report.status, report.stats_added, report.stats_updated) == ("complete", 0, 0)
    assert (report.bots_up_to_date, report.bots_fetched, report.bots_new) == (BOTS, 0, 0)
    # One GET /bots/:id/stat per bot, plus the listing pages: no /stats at all.
    assert report.requests == BOTS + pages
    assert report.retries == 0


def commits(settings: Settings) -> int:
    ((count,),) = query(settings, f"SELECT count(*) FROM ducklake_snapshots('{store.ALIAS}')")
    return int(count)


@pytest.mark.parametrize("advance", [0, 1], ids=["nothing new", "one new record a bot"])
def test_a_run_commits_in_batches_bounded_by_rows_and_its_sightings_once(
        harvested: Harvested, monkeypatch: pytest.MonkeyPatch, advance: int) -> None:
    # An hourly run adds a record a bot or none: a bound on stat rows alone kept every bot's
    # record until the run's end. 30 bots in batches of at most 8 bots with records: 4 commits
    # at least when each has one. Bots listed as they were are only seen: their sightings are
    # written together (one file of ids), and nothing new is one commit of them.
    monkeypatch.setattr(batch_module, "BATCH_BOT_ROWS", 8)
    # Two requests in flight: what may join a batch while it is being written is bounded.
    harvested.settings = replace(harvested.settings,
                                 service=replace(harvested.settings.service, concurrency=2))
    harvested.svc.directory.advance(advance)
    before = commits(harvested.settings)
    report, _ = harvested.run()
    assert (report.status, report.stats_added) == ("complete", advance * BOTS)
    # Besides its batches a run commits its start, the fields it saw and its end (and its
    # removals when a bot left: none here).
    batches = commits(harvested.settings) - before - 3
    ((last,),) = query(harvested.settings,
                       f"SELECT max(snapshot_id) FROM ducklake_snapshots('{store.ALIAS}')")
    bots_per_commit = [n for (n,) in query(
        harvested.settings, "SELECT count(DISTINCT bot_id) FROM ducklake_table_insertions("
        f"'{store.ALIAS}', 'main', 'bot_stats', {before}, {last}) GROUP BY snapshot_id")]
    if advance:
        # The bound is checked as pages come in: the pages the other requests add while a
        # batch is being written go out with it, so a batch may pass 8 bots by what is in
        # flight (two requests here, each page a bot's).
        assert sum(bots_per_commit) == BOTS and len(bots_per_commit) >= 3, bots_per_commit
        assert max(bots_per_commit) <= 8 + 2, bots_per_commit
    else:
        assert (batches, bots_per_commit) == (1, [])  # the sightings alone
    files = query(harvested.settings, "SELECT count(*) FROM ducklake_list_files("
                  f"'{store.ALIAS}', 'bot_last_seen')")
    assert files == [(1,)]
    assert_archive_equals_service(harvested.settings, harvested.svc.directory)
    assert_archive_has_no_duplicates(harvested.settings)
    seen = query(harvested.settings, "SELECT count(*) FROM bots WHERE run_id = ? AND "
                 "last_seen_at >= ? AND removed_at IS NULL", report.run_id, report.started_at)
    assert seen == [(BOTS,)]  # every bot's row written, in whichever batch


def test_full_rereads_everything_and_still_duplicates_nothing(harvested: Harvested) -> None:
    before = stored_versions(harvested.settings)
    report, pages = harvested.run(full=True)
    assert (report.status, report.mode, report.bots_fetched) == ("complete", "full", BOTS)
    assert (report.stats_added, report.stats_updated) == (0, 0)
    # One /stat and one /stats per bot: the newest record among the list read shows it was
    # not cut (the run is complete), so no read past a list is needed.
    assert report.requests == 2 * BOTS + pages
    assert stored_versions(harvested.settings) == before
    assert archived_stat_rows(harvested.settings) == service_stat_rows(harvested.svc.directory)
    assert_archive_has_no_duplicates(harvested.settings)


@contextmanager
def archive_by_hand(settings: Settings) -> Iterator[duckdb.DuckDBPyConnection]:
    """The archive, read-write, as an operator's own duckdb session opens it."""
    con = store.connect(ArchivePaths.of(settings))
    try:
        yield con
    finally:
        con.close()


def test_records_deleted_by_hand_come_back_with_full(harvested: Harvested) -> None:
    # An incremental run compares a bot's newest record only (kept in bot_latest_stat), so it
    # cannot see older records deleted by hand; --full reads every bot again and restores them.
    settings = harvested.settings
    bot_id = query(settings, "SELECT bot_id FROM bot_latest_stat ORDER BY bot_id LIMIT 1")[0][0]
    with archive_by_hand(settings) as con:
        older = ("WHERE bot_id = ? AND stat_id NOT IN "
                 "(SELECT stat_id FROM bot_latest_stat WHERE bot_id = ?)")
        con.execute(f"DELETE FROM bot_stat_custom {older}", [bot_id, bot_id])  # with its records
        (deleted,) = con.execute(f"DELETE FROM bot_stats {older}", [bot_id, bot_id]).fetchone()
    assert deleted > 0
    report, _ = harvested.run(full=True)
    assert report.stats_added == deleted
    assert_archive_equals_service(settings, harvested.svc.directory)


def test_a_record_changed_since_archiving_is_rewritten_with_its_custom_fields(
        harvested: Harvested) -> None:
    # Make the archive disagree with the service about one record that has custom fields, as
    # if the service had corrected it since: the next --full run rewrites that record (and
    # only it) and replaces its custom fields, duplicating nothing.
    settings = harvested.settings
    bot_id, stat_id = query(settings, "SELECT bot_id, stat_id FROM bot_stat_custom "
                                      "ORDER BY bot_id, stat_id LIMIT 1")[0]
    with archive_by_hand(settings) as con:
        con.execute("UPDATE bot_stats SET raw = '{\"stale\":true}', guilds = 0 "
                    "WHERE bot_id = ? AND stat_id = ?", [bot_id, stat_id])
        con.execute("UPDATE bot_stat_custom SET value_text = 'stale', value_num = -1 "
                    "WHERE bot_id = ? AND stat_id = ?", [bot_id, stat_id])
    before = stored_versions(settings)

    report, _ = harvested.run(full=True)

    assert (report.stats_added, report.stats_updated) == (0, 1)
    assert_archive_equals_service(settings, harvested.svc.directory)
    after = stored_versions(settings)
    rewritten = {k for k in after if after[k] != before.get(k)}
    assert rewritten == {(bot_id, stat_id)}
    assert after[(bot_id, stat_id)][0] == report.run_id


def test_a_record_moved_back_in_time_leaves_the_bots_true_newest_for_the_next_run(
        harvested: Harvested) -> None:
    # The service corrected a bot's newest record to an earlier time: after the rewrite, what
    # incremental runs compare with (bot_latest_stat) is the newest record the archive now
    # holds, not the stale time.
    settings = harvested.settings
    bot_id, stat_id = query(settings, "SELECT bot_id, stat_id FROM bot_latest_stat "
                                      "ORDER BY bot_id LIMIT 1")[0]
    with archive_by_hand(settings) as con:  # as archived before the correction
        for table in ("bot_stats", "bot_latest_stat"):
            con.execute(f"UPDATE {table} SET recorded_at = recorded_at + INTERVAL 1 YEAR "
                        "WHERE bot_id = ? AND stat_id = ?", [bot_id, stat_id])
        con.execute("UPDATE bot_stats SET raw = '{\"timestamp\":\"a year later\"}' "
                    "WHERE bot_id = ? AND stat_id = ?", [bot_id, stat_id])

    report, _ = harvested.run(full=True)

    assert report.stats_updated == 1
    assert archived_stat_rows(settings) == service_stat_rows(harvested.svc.directory)
    assert_archive_has_no_duplicates(settings)  # bot_latest_stat included
    again, _ = harvested.run()
    assert (again.stats_added, again.stats_updated, again.bots_fetched) == (0, 0, 0)


def test_a_record_archived_in_another_spelling_is_not_rewritten(harvested: Harvested) -> None:
    # raw keeps each record as the service sent it; an archive written by an older botstats
    # (canonical JSON, sorted keys) or a service that reorders keys spells the same record
    # differently. That is no change: nothing is rewritten.
    settings = harvested.settings
    with archive_by_hand(settings) as con:
        rows = con.execute("SELECT bot_id, stat_id, raw::VARCHAR FROM bot_stats").fetchall()
        respelled = pa.table({  # one UPDATE: a statement per row costs a commit per row
            "bot_id": [b for b, _, _ in rows], "stat_id": [s for _, s, _ in rows],
            "raw": [json.dumps(json.loads(raw), sort_keys=True, indent=1) for *_, raw in rows]})
        con.register("respelled", respelled)
        con.execute("UPDATE bot_stats SET raw = r.raw::JSON FROM respelled r "
                    "WHERE bot_stats.bot_id = r.bot_id AND bot_stats.stat_id = r.stat_id")
        respelled_rows = con.execute("SELECT count(*) FROM bot_stats WHERE raw::VARCHAR "
                                     "LIKE '{\n %'").fetchall()
    assert respelled_rows == [(len(rows),)] and rows  # every record is spelled otherwise now
    before = stored_versions(settings)

    report, _ = harvested.run(full=True)

    assert (report.status, report.stats_added, report.stats_updated) == ("complete", 0, 0)
    assert stored_versions(settings) == before


def test_new_stats_between_runs_are_added_exactly(harvested: Harvested) -> None:
    old = stat_keys(archived_stat_rows(harvested.settings))
    harvested.svc.directory.advance(2)
    report, _ = harvested.run()
    rows = archived_stat_rows(harvested.settings)
    assert rows == service_stat_rows(harvested.svc.directory)
    new = stat_keys(rows) - old
    assert len(new) == 2 * BOTS == report.stats_added
    assert report.stats_updated == 0
    by_run = dict(query(harvested.settings, "SELECT run_id, count(*) FROM bot_stats GROUP BY 1"))
    assert by_run == {harvested.first.run_id: len(old), report.run_id: len(new)}
    assert archived_custom_rows(harvested.settings) == service_custom_rows(harvested.svc.directory)


def test_an_archive_restored_from_a_backup_is_completed_by_the_next_run(
        harvested: Harvested) -> None:
    # The README's backup and restore: `botstats backup DIR` copies the catalog and the data
    # files; restoring is copying them back over [store].db and its data folder.
    settings = harvested.settings
    paths = ArchivePaths.of(settings)
    backup = paths.catalog.parent / "backup"
    upkeep.backup(paths, backup)
    harvested.svc.directory.advance(2)
    lost, _ = harvested.run()
    assert lost.stats_added == 2 * BOTS

    upkeep.restore(backup, paths)
    assert archived_stat_rows(settings) != service_stat_rows(harvested.svc.directory)
    report, _ = harvested.run()
    assert report.status == "complete" and report.stats_added == 2 * BOTS
    assert archived_stat_rows(settings) == service_stat_rows(harvested.svc.directory)
    assert_archive_has_no_duplicates(settings)
    runs = {r for (r,) in query(settings, "SELECT run_id FROM harvest_runs")}
    assert runs == {harvested.first.run_id, report.run_id}  # as the backup had it, plus this


def test_another_service_into_the_same_archive_is_warned_about_and_no_url_secret_is_kept(
        harvested: Harvested, service_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    other = service_factory(bots=3, history_days=2, seed=99)
    host = other.base_url.split("://", 1)[1]
    settings = replace(harvested.settings, service=replace(
        harvested.settings.service, base_url=f"http://ops:hunter22@{host}"))
    with caplog.at_level("WARNING", logger="botstats.harvest"):
        # All of the first service's bots would go: not believed until accepted.
        doubted = harvest(settings)
        assert (doubted.status, doubted.bots_removed) == ("partial", 0)
        assert "--accept-removals" in doubted.message
        report = harvest(settings, HarvestOptions(accept_removals=True))
    assert report.status == "complete"
    warned = [r.getMessage() for r in caplog.records if "last harvested from" in r.getMessage()]
    assert warned == [f"this archive was last harvested from {harvested.svc.base_url} and this "
                      f"run reads http://***@{host}: if that is another service, its bots will "
                      f"be marked removed once this listing is complete (their history is "
                      f"kept); point --db at another archive for it"]
    # The first service's bots are marked, not deleted; the URL's password is nowhere.
    assert query(settings, "SELECT count(*) FROM bots WHERE removed_at IS NOT NULL") == [(BOTS,)]
    assert query(settings, "SELECT base_url FROM harvest_runs WHERE run_id = ?",
                 report.run_id) == [(f"http://***@{host}",)]

    caplog.clear()
    with caplog.at_level("WARNING", logger="botstats.harvest"):
        harvest(settings)
    assert not [r for r in caplog.records if "last harvested from" in r.getMessage()]


def test_a_posted_stat_is_archived_by_the_next_run(harvested: Harvested) -> None:
    directory = harvested.svc.directory
    bot_id = directory.bot_ids()[3]
    payload = {"users": 1234, "guilds": 56, "shards": 2, "cpu_load": 40,
               "custom": [{"name": "region", "value": "eu-north"}, {"name": "queue", "value": 7}]}

    async def post() -> dict[str, Any]:
        async with Client(replace(harvested.settings, bot_key=Secret(directory.bot_key(bot_id)))) as c:
            return await c.post_stat(bot_id, payload)

    posted = asyncio.run(post())
    report, _ = harvested.run()
    assert report.stats_added == 1
    rows = archived_stat_rows(harvested.settings)
    assert rows == service_stat_rows(directory)
    assert (bot_id, posted["id"], datetime.fromisoformat(posted["timestamp"]), 1234, 56, 2, None,
            40.0, None) in rows
    assert query(harvested.settings, "SELECT run_id FROM bot_stats WHERE stat_id = ?",
                 posted["id"]) == [(report.run_id,)]
    assert query(harvested.settings, "SELECT name, value_text, value_num FROM bot_stat_custom "
                                     "WHERE stat_id = ? ORDER BY name", posted["id"]) == [
        ("queue", "7", 7.0), ("region", "eu-north", None)]


# --- users ------------------------------------------------------------------------------------
def test_a_user_token_snapshots_the_user_and_their_bots_servers_webhooks_each_run(
        service: RunningService, harvest_settings: Any) -> None:
    directory = service.directory
    user_id, token = next(iter(directory.user_tokens().items()))
    settings = harvest_settings(service, {"user_token": token})
    runs = [harvest(settings).run_id, harvest(settings).run_id]

    index = directory.user_index(user_id)
    expected = {
        "user_bots": {b["id"] for b in directory.user_bots(index)},
        "user_servers": {s["id"] for s in directory.user_servers(index)},
        "user_webhooks": {w["id"] for w in directory.user_webhooks(index)},
    }
    assert all(expected.values())  # the user has some of each, so the test can fail
    users = query(settings, "SELECT run_id, user_id, is_me, raw::VARCHAR FROM users ORDER BY run_id")
    assert [(r, u, me, json.loads(raw)) for r, u, me, raw in users] == [
        (run_id, user_id, True, directory.user(user_id)) for run_id in sorted(runs)]
    for table, ids in expected.items():
        key = {"user_bots": "bot_id", "user_servers": "server_id", "user_webhooks": "webhook_id"}
        rows = query(settings, f"SELECT run_id, user_id, {key[table]} FROM {table}")
        assert sorted(rows) == sorted((run_id, user_id, i) for run_id in runs for i in ids), table


def test_without_a_user_token_no_user_is_snapshotted(harvested: Harvested) -> None:
    for table in ("users", "user_bots", "user_servers", "user_webhooks"):
        assert query(harvested.settings, f"SELECT count(*) FROM {table}") == [(0,)]


# --- bots that come and go ----------------------------------------------------------------------
def test_a_bot_that_disappears_is_marked_removed_and_keeps_its_stats(harvested: Harvested) -> None:
    directory = harvested.svc.directory
    added, removed = directory.churn()
    directory.advance(1)  # the newcomer's first record
    report, _ = harvested.run()
    assert (report.status, report.bots_removed, report.bots_new) == ("complete", 1, 1)
    marked = query(harvested.settings, "SELECT bot_id FROM bots WHERE removed_at IS NOT NULL")
    assert marked == [(removed,)]
    [(removed_at, started)] = query(
        harvested.settings, "SELECT b.removed_at, r.started_at FROM bots b, harvest_runs r "
                            "WHERE b.bot_id = ? AND r.run_id = ?", removed, report.run_id)
    assert removed_at == started
    # Its history stays; the newcomer's is archived; the rest is unchanged.
    expected = service_stat_rows(directory) + service_stat_rows(directory, [removed],
                                                                include_removed=True)
    assert archived_stat_rows(harvested.settings) == sorted(expected)
    assert any(row[0] == removed for row in expected) and any(row[0] == added for row in expected)


def test_a_bot_that_reappears_is_no_longer_marked_removed(service_factory: Any,
                                                          tmp_path: Any) -> None:
    # Two services with one config hold the same bots and stats; churning one removes a bot
    # that the other still lists, which is how a bot comes back.
    churned = service_factory(bots=20, history_days=5, stats_per_day=2, end=FIXED_END)
    pristine = service_factory(bots=20, history_days=5, stats_per_day=2, end=FIXED_END)
    db = tmp_path / "archive.ducklake"
    harvest(harvest_settings_for(churned, db))
    added, removed = churned.directory.churn()
    harvest(harvest_settings_for(churned, db))
    settings = harvest_settings_for(pristine, db)
    assert query(settings, "SELECT bot_id FROM bots WHERE removed_at IS NOT NULL") == [(removed,)]

    report = harvest(settings)
    assert report.status == "complete"
    assert query(settings, "SELECT bot_id FROM bots WHERE removed_at IS NOT NULL") == [(added,)]
    expected = service_stat_rows(pristine.directory) + service_stat_rows(
        churned.directory, [added])
    assert archived_stat_rows(settings) == sorted(expected)
    assert_archive_has_no_duplicates(settings)


@pytest.mark.parametrize("new_only", [True, False], ids=["fresh archive", "upsert"])
def test_a_key_sent_twice_in_one_batch_is_archived_once_with_its_last_copy(
        tmp_path: Any, new_only: bool) -> None:
    # The service repeats a record in one page, and a bot comes back in the same batch: the
    # batch writer keeps the last copy of each key, with its custom fields once.
    from pipeline.archive import _store as store
    from pipeline.archive._runs import begin_run
    from pipeline.core._settings import StoreSettings
    from pipeline.harvester._batch import Batch, Db
    from pipeline.harvester._records import parse_stats
    from pipeline.harvester._report import HarvestReport

    settings = Settings(store=StoreSettings(db=str(tmp_path / "a.ducklake")))

    def rec(stat_id: str, users: int) -> dict[str, Any]:
        return {"id": stat_id, "timestamp": "2024-06-01T00:00:00Z", "users": users, "guilds": 1,
                "custom": [{"name": "n", "value": users}]}

    async def write(con: Any) -> HarvestReport:
        db = Db(con)
        report = HarvestReport(run_id="r1", mode="full")
        begin_run(con, report)
        batch = Batch(db, report, 1000, new_only=new_only)
        batch.add_page("b1",
                       parse_stats([rec("s1", 1), rec("s2", 7), rec("s1", 2)], "b1", settings.fields))
        batch.add_page("b1", parse_stats([rec("s2", 8)], "b1", settings.fields))
        assert not batch.distinct
        await batch.flush()
        db.shutdown()
        return report

    with store.writer(settings) as con:
        report = asyncio.run(write(con))
        stats = con.execute("SELECT stat_id, users FROM bot_stats ORDER BY stat_id").fetchall()
        custom = con.execute("SELECT stat_id, value_num FROM bot_stat_custom "
                             "ORDER BY stat_id").fetchall()
    assert report.stats_added == 2
    assert stats == [("s1", 2), ("s2", 8)]
    assert custom == [("s1", 2.0), ("s2", 8.0)]
