"""The harvester against a misbehaving service, one test per misbehaviour of the embedded
service: in each, the archive ends up equal to the service's valid data (nothing missing,
nothing duplicated), and what cannot be archived is kept in `rejects` or reported clearly.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from random import Random
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner
from conftest import (
    answer_json,
    archived_stat_rows,
    assert_archive_equals_service,
    assert_archive_has_no_duplicates,
    child_env,
    harvest_settings_for,
    query,
    service_stat_rows,
)

from pipeline.cli import cli
from pipeline.core._loading import load_settings
from pipeline.core._settings import Settings
from pipeline.harvester._paging import Keying
from pipeline.harvester._report import EXIT_CODES
from pipeline.harvester._run import harvest
from pipeline.harvester._tail import OrderHint, stats_pages
from pipeline.interface._client import Client
from pipeline.service import MALFORMATIONS, Directory

SMALL = {"bots": 30, "history_days": 5, "stats_per_day": 2}


def canonical(record: Any) -> str:
    return json.dumps(record, sort_keys=True)


# --- transient trouble: retried until it passes ----------------------------------------------
@pytest.mark.clock
def test_rate_limiting_is_waited_out(service_factory: Any, harvest_settings: Any) -> None:
    svc = service_factory(bots=20, history_days=5, stats_per_day=2, rate_limit=15)
    settings = harvest_settings(svc, {"retry.attempts": 20})
    report = harvest(settings)
    assert svc.app.state.faults.rejected > 0  # 429s with Retry-After were sent...
    assert report.retries >= svc.app.state.faults.rejected  # ...and each one was retried
    assert (report.status, report.errors) == ("complete", 0)
    assert_archive_equals_service(settings, svc.directory, bots=True)


@pytest.mark.clock
def test_a_request_told_when_to_come_back_never_runs_out_of_attempts(
        service_factory: Any, harvest_settings: Any) -> None:
    # 3 requests a second for 8 in flight: requests told the same 1 s wake together and race
    # for a few tokens, so with 2 attempts some lost twice while the pace was still high.
    svc = service_factory(bots=15, history_days=2, rate_limit=3.0)
    settings = harvest_settings(svc, {"retry.attempts": 2})
    report = harvest(settings)
    assert (report.status, report.errors) == ("complete", 0), report.message
    refused = svc.app.state.faults.rejected
    assert refused > 0  # told to wait (Retry-After), at times more than once a request
    assert report.retries == refused and report.requests > refused  # each one waited, then sent again
    assert_archive_equals_service(settings, svc.directory, bots=True)


@pytest.mark.clock
@pytest.mark.parametrize("family", ["x-reset-epoch-ms", "http-date", "github-403"])
def test_a_rate_limit_in_every_spelling_paces_the_harvest_and_is_waited_out(
        service_factory: Any, harvest_settings: Any, family: str) -> None:
    # Its reset as a Unix time in milliseconds, as an HTTP-date, or GitHub's: a spent quota
    # answered 403 with X-RateLimit-Remaining: 0, which is no refusal of credentials.
    rate, burst = 20.0, 3
    svc = service_factory(bots=6, history_days=2, stats_per_day=2, rate_limit=rate,
                          rate_burst=burst, rate_limit_headers=family)
    settings = harvest_settings(svc, {"retry.attempts": 3})
    report = harvest(settings)
    assert (report.status, report.errors) == ("complete", 0), report.message
    refused = svc.app.state.faults.rejected
    assert refused > 0 and report.retries >= refused  # each refusal waited out, then sent again
    # no faster than the service allows: the pace and the told waits held the answered
    # requests (a refused one takes no token) to its rate
    assert report.seconds >= (report.requests - refused - burst) / rate * 0.9
    assert_archive_equals_service(settings, svc.directory, bots=True)


def injected_error_bodies(seed: int, error_rate: float, count: int) -> Counter[str]:
    """The body styles of the first ``count`` 5xx the service injected: its fault RNG is seeded,
    so replaying its draws (no latency, no rate limit) tells which bodies went out."""
    rng = Random(f"{seed}:faults")
    styles: Counter[str] = Counter()
    while sum(styles.values()) < count:
        if rng.random() < error_rate:
            status = rng.choice([500, 502, 503])
            styles[rng.choice(["json", "html", "empty"])] += 1
            if status == 503:
                rng.random()  # whether it carries a Retry-After
    return styles


def test_server_errors_and_non_json_error_bodies_are_retried(service_factory: Any,
                                                             harvest_settings: Any) -> None:
    svc = service_factory(bots=40, history_days=5, stats_per_day=2, error_rate=0.2)
    settings = harvest_settings(svc, {"retry.attempts": 10})
    report = harvest(settings)
    assert (report.status, report.errors, report.rejects) == ("complete", 0, 0)
    assert_archive_equals_service(settings, svc.directory, bots=True)
    again = harvest(settings)  # incremental, through the same errors
    assert (again.status, again.stats_added, again.stats_updated) == ("complete", 0, 0)
    assert_archive_equals_service(settings, svc.directory, bots=True)

    injected = svc.app.state.faults.injected
    assert report.retries + again.retries >= injected
    bodies = injected_error_bodies(svc.config.seed, 0.2, injected)
    assert bodies["html"] and bodies["empty"], bodies  # not only JSON error bodies went out


def test_bots_that_still_fail_after_retries_make_the_run_partial_and_the_next_run_retries_them(
        service_factory: Any, harvest_settings: Any) -> None:
    # Seed 4: the first GET /bots gets through (a run that cannot list at all fails instead).
    svc = service_factory(bots=40, history_days=5, stats_per_day=2, error_rate=0.3, seed=4)
    impatient = harvest_settings(svc, {"retry.attempts": 1})
    report = harvest(impatient)
    assert report.status == "partial" and report.exit_code == EXIT_CODES["partial"] == 3
    assert report.errors > 0
    failed = query(impatient, "SELECT bot_id, endpoint, error, run_id FROM harvest_errors")
    assert len(failed) == report.errors
    assert all(run_id == report.run_id and "answered 5" in error for *_, error, run_id in failed)
    # What was archived is exact; a bot that failed has nothing half-written.
    rows = archived_stat_rows(impatient)
    archived = sorted({r[0] for r in rows})
    assert rows == service_stat_rows(svc.directory, archived)
    assert not {b for b, *_ in failed} & set(archived)

    patient = harvest_settings(svc, {"retry.attempts": 10})
    again = harvest(patient)
    assert (again.status, again.errors) == ("complete", 0)
    assert_archive_equals_service(patient, svc.directory, bots=True)


def test_a_slow_service_is_harvested_completely(service_factory: Any,
                                                harvest_settings: Any) -> None:
    svc = service_factory(**SMALL, latency_ms=40, latency_jitter_ms=20)
    settings = harvest_settings(svc)
    report = harvest(settings)
    assert (report.status, report.errors) == ("complete", 0)
    assert_archive_equals_service(settings, svc.directory, bots=True)


# --- a listing that does not hold still or pages oddly --------------------------------------------
@pytest.mark.parametrize("churn_every", [2, 3])
def test_a_listing_that_changes_while_paging_loses_no_bot(service_factory: Any,
                                                          harvest_settings: Any,
                                                          churn_every: int) -> None:
    # Every N-th GET /bots, one bot is added at the front and one removed anywhere.
    svc = service_factory(bots=40, history_days=5, stats_per_day=2, churn_every=churn_every,
                          max_page_size=10)
    settings = harvest_settings(svc, {"service.page_size": 10})
    report = harvest(settings)
    directory = svc.directory
    assert directory.added_ids(), "the listing did not change: the test proves nothing"
    assert (report.status, report.errors) == ("complete", 0)

    archived_bots = {b for (b,) in query(settings, "SELECT bot_id FROM bots")}
    listed_now = set(directory.bot_ids())
    # A bot added after the pager's final look at the head is the next run's; no other.
    assert listed_now - archived_bots <= {directory.added_ids()[-1]}
    assert archived_bots <= listed_now | directory.removed_ids()
    assert report.bots_seen == len(archived_bots)

    rows = archived_stat_rows(settings)
    assert_archive_has_no_duplicates(settings)
    still_listed = service_stat_rows(directory, sorted(archived_bots & listed_now))
    assert [r for r in rows if r[0] in listed_now] == still_listed
    # A bot removed mid-run was archived whole before it left, or not at all (its /stats 404s).
    for bot_id in archived_bots - listed_now:
        mine = [r for r in rows if r[0] == bot_id]
        assert mine in ([], service_stat_rows(directory, [bot_id], include_removed=True))


def test_a_page_size_capped_below_the_one_asked_loses_no_bot(service_factory: Any,
                                                             harvest_settings: Any) -> None:
    svc = service_factory(bots=60, history_days=5, stats_per_day=2, max_page_size=7)
    settings = harvest_settings(svc, {"service.page_size": 50})
    listing_before = svc.directory.summary()["listing_requests"]
    report = harvest(settings)
    assert (report.status, report.bots_seen) == ("complete", 60)
    assert_archive_equals_service(settings, svc.directory, bots=True)
    pages = svc.directory.summary()["listing_requests"] - listing_before
    assert pages < 60 // (7 - 3) + 10  # overlapping short pages, not one request per bot


# --- bad data: kept in rejects, the run goes on -------------------------------------------------
def expected_reason(record: dict[str, Any]) -> str:
    """What the reason of a malformed record from the embedded service must say."""
    if "id" not in record:
        return "missing id field 'id'"
    if "timestamp" not in record:
        return "missing timestamp field 'timestamp'"
    if record["users"] < 0:
        return "users must not be negative"
    if record["guilds"] == "lots":
        return "guilds must be a number"
    if record["cpu_load"] == 150:
        return "cpu_load must be a percentage from 0 to 100"
    if record["memory_load"] == -5:
        return "memory_load must be a percentage from 0 to 100"
    return "not an ISO 8601 time"


def test_every_malformed_record_is_kept_in_rejects_and_the_run_completes(
        service_factory: Any, harvest_settings: Any) -> None:
    svc = service_factory(bots=40, history_days=5, stats_per_day=4, malformed_rate=0.05)
    settings = harvest_settings(svc)
    directory = svc.directory
    malformed = {bot_id: directory.malformed_stats(bot_id) for bot_id in directory.bot_ids()}
    total = sum(map(len, malformed.values()))
    # Every kind of malformation shows up at this size, each with its own reason.
    kinds = Counter(expected_reason(r) for records in malformed.values() for r in records)
    assert len(kinds) == len(MALFORMATIONS), kinds

    report = harvest(settings)
    assert (report.status, report.errors, report.rejects) == ("complete", 0, total)
    assert_archive_equals_service(settings, directory, bots=True)
    rejects = query(settings, "SELECT bot_id, endpoint, reason, raw, run_id FROM rejects")
    assert Counter((b, canonical(json.loads(raw))) for b, _, _, raw, _ in rejects) == Counter(
        (b, canonical(r)) for b, records in malformed.items() for r in records)
    for bot_id, endpoint, reason, raw, run_id in rejects:
        assert endpoint == f"GET /bots/{bot_id}/stats"
        assert expected_reason(json.loads(raw)) in reason
        assert run_id == report.run_id

    # The next run meets the same bad records: nothing new kept, nothing duplicated.
    again = harvest(settings)
    assert (again.status, again.stats_added, again.stats_updated) == ("complete", 0, 0)
    assert query(settings, "SELECT count(*) FROM rejects") == [(total,)]
    assert_archive_equals_service(settings, directory, bots=True)


def test_a_stats_page_that_is_not_json_is_rejected_with_its_body(service_factory: Any,
                                                                 harvest_settings: Any) -> None:
    svc = service_factory(**SMALL, bad_json_rate=0.2)
    settings = harvest_settings(svc)
    directory = svc.directory
    bad = directory.bad_json_bots() & set(directory.bot_ids())
    assert bad, "no bot has a broken /stats: the test proves nothing"

    report = harvest(settings)
    assert report.status == "complete"
    rejects = query(settings, "SELECT bot_id, endpoint, reason, raw FROM rejects ORDER BY bot_id")
    bodies = {b: json.dumps(directory.stats(b), separators=(",", ":")) for b in bad}
    assert [(b, e) for b, e, _, _ in rejects] == [(b, f"GET /bots/{b}/stats") for b in sorted(bad)]
    for bot_id, _, reason, raw in rejects:
        assert "not a JSON list of records" in reason
        assert raw == bodies[bot_id][: len(bodies[bot_id]) // 2]  # the cut body as received
    # Every other bot is archived exactly; the broken ones have nothing half-read.
    good = sorted(set(directory.bot_ids()) - bad)
    assert archived_stat_rows(settings) == service_stat_rows(directory, good)
    assert_archive_has_no_duplicates(settings)


def test_new_stats_arriving_between_runs_of_a_faulty_service_are_added_exactly(
        service_factory: Any, harvest_settings: Any) -> None:
    # The clock starts two days back: three intervals on, it is still not ahead of now.
    svc = service_factory(bots=30, history_days=5, stats_per_day=2, error_rate=0.1,
                          malformed_rate=0.05, max_page_size=7, latency_ms=5,
                          end=datetime.now(UTC) - timedelta(days=2))
    settings = harvest_settings(svc, {"retry.attempts": 10})
    first = harvest(settings)
    svc.directory.advance(3)
    second = harvest(settings)
    assert (first.status, second.status) == ("complete", "complete")
    assert second.stats_added == len(archived_stat_rows(settings)) - first.stats_added > 0
    assert second.stats_updated == 0
    assert_archive_equals_service(settings, svc.directory, bots=True)
    malformed = sum(len(svc.directory.malformed_stats(b)) for b in svc.directory.bot_ids())
    assert query(settings, "SELECT count(*) FROM rejects") == [(malformed,)]


# --- a service that pages /stats (the interface leaves it open) ------------------------------------
PAGED_STATS = {"bots": 30, "history_days": 5, "stats_per_day": 4, "stats_page_size": 6}


def records_per_bot(directory: Directory) -> dict[str, int]:
    return {b: len(directory.stats(b)) for b in directory.bot_ids()}


@pytest.mark.parametrize("asked", [6, 4, 50], ids=["the service's size", "smaller", "larger"])
def test_a_paged_stats_list_is_archived_whole_when_stats_page_size_is_set(
        service_factory: Any, harvest_settings: Any, asked: int) -> None:
    svc = service_factory(**PAGED_STATS, malformed_rate=0.05)
    directory = svc.directory
    assert sum(n > 12 for n in records_per_bot(directory).values()) > 20  # three pages or more
    settings = harvest_settings(svc, {"service.stats_page_size": asked})
    report = harvest(settings)
    malformed = sum(len(directory.malformed_stats(b)) for b in directory.bot_ids())
    assert (report.status, report.errors, report.rejects) == ("complete", 0, malformed)
    assert_archive_equals_service(settings, directory, bots=True)
    assert query(settings, "SELECT count(*) FROM rejects") == [(malformed,)]  # each kept once
    directory.advance(3)
    again = harvest(settings)
    assert (again.status, again.errors, again.stats_updated) == ("complete", 0, 0)
    assert again.stats_added == len(archived_stat_rows(settings)) - report.stats_added > 0
    assert_archive_equals_service(settings, directory, bots=True)


def test_an_incremental_run_reads_a_paged_stats_list_on_from_where_the_last_read_ended(
        service_factory: Any, harvest_settings: Any) -> None:
    # 80 records a bot, 6 a page: read from skip=0 that is 14 pages a bot. An hourly run reads
    # the page that holds the newest archived record, the new ones, and the empty page after.
    svc = service_factory(**{**PAGED_STATS, "history_days": 20}, malformed_rate=0.05)
    directory = svc.directory
    settings = harvest_settings(svc, {"service.stats_page_size": 6})
    first = harvest(settings)
    assert first.status == "complete"
    listed = dict(query(settings, "SELECT bot_id, stats_listed FROM bot_latest_stat"))
    assert listed == records_per_bot(directory)  # malformed records count: they are listed
    directory.advance(3)
    again = harvest(settings)
    assert (again.status, again.errors, again.stats_updated) == ("complete", 0, 0)
    assert_archive_equals_service(settings, directory, bots=True)
    bots = len(directory.bot_ids())
    listing = first.requests - bots - sum(-(-n // 6) + 1 for n in listed.values())
    per_bot = (again.requests - listing) / bots
    assert per_bot <= 3, per_bot  # /stat, the page that holds the newest record, an empty page
    assert again.stats_added == sum(len(directory.valid_stats(b)) for b in directory.bot_ids()) \
        - first.stats_added


def test_a_paged_stats_list_read_unpaged_fails_the_first_run_naming_the_setting(
        service_factory: Any, harvest_settings: Any) -> None:
    svc = service_factory(**PAGED_STATS)
    directory = svc.directory
    settings = harvest_settings(svc)  # [service].stats_page_size = 0: whole lists expected
    assert sum(n > 6 for n in records_per_bot(directory).values()) > 20
    first = harvest(settings)
    # GET /stat, asked before each /stats on a first run, is not among the page read.
    assert (first.status, EXIT_CODES[first.status]) == ("failed", 1)
    assert "the service pages /stats" in first.message
    assert "[service].stats_page_size" in first.message
    assert query(settings, "SELECT count(*) FROM bot_stats") == [(0,)]  # no first page as all
    configured = harvest_settings(svc, {"service.stats_page_size": 6})
    fixed = harvest(configured)
    assert (fixed.status, fixed.errors) == ("complete", 0)
    assert_archive_equals_service(configured, directory, bots=True)


# Lists that fit one page of 6 at first (a day of 4 records), and outgrow it after advance(3).
GROWING_STATS = {**PAGED_STATS, "history_days": 1}


def test_a_paged_stats_list_read_unpaged_is_noticed_by_the_next_run_once_it_outgrows_a_page(
        service_factory: Any, harvest_settings: Any) -> None:
    svc = service_factory(**GROWING_STATS)
    directory = svc.directory
    settings = harvest_settings(svc)
    before = records_per_bot(directory)
    assert max(before.values()) <= 6
    first = harvest(settings)
    assert (first.status, first.stats_added) == ("complete", sum(before.values()))
    directory.advance(3)
    counts = records_per_bot(directory)
    cut = sorted(b for b, n in counts.items() if n > 6)
    assert len(cut) > 20
    second = harvest(settings)
    assert (second.status, second.errors) == ("partial", len(cut))
    assert EXIT_CODES[second.status] == 3
    errors = query(settings, "SELECT bot_id, endpoint, error FROM harvest_errors "
                             "WHERE run_id = ?", second.run_id)
    assert sorted(b for b, _, _ in errors) == cut  # a bot whose list fits one page is whole
    for bot_id, endpoint, error in errors:
        assert endpoint == f"GET /bots/{bot_id}/stats"
        assert "lacks the bot's newest record" in error and "[service].stats_page_size" in error
    # What was read is archived once, nothing duplicated: each bot's first page.
    assert second.stats_added == sum(min(n, 6) - before[b] for b, n in counts.items())
    assert_archive_has_no_duplicates(settings)
    configured = harvest_settings(svc, {"service.stats_page_size": 6})
    fixed = harvest(configured)
    assert (fixed.status, fixed.errors) == ("complete", 0)
    assert_archive_equals_service(configured, directory, bots=True)


def test_stats_page_size_against_a_service_sending_whole_lists_says_so(
        service_factory: Any, harvest_settings: Any) -> None:
    svc = service_factory(bots=10, history_days=5, stats_per_day=4)  # /stats ignores limit/skip
    settings = harvest_settings(svc, {"service.stats_page_size": 6})
    report = harvest(settings)
    # Every /stats read failed: a whole kind of request, so the run fails (see _verdict).
    assert (report.status, report.errors) == ("failed", 10)
    assert "10 of 10 GET /bots/:id/stats failed" in report.message
    assert "[service].stats_page_size = 0" in report.message
    for (error,) in query(settings, "SELECT error FROM harvest_errors"):
        assert "ignores `skip`" in error and "[service].stats_page_size = 0" in error
    assert query(settings, "SELECT count(*) FROM bot_stats") == [(0,)]  # nothing half-read
    assert harvest(harvest_settings(svc)).status == "complete"
    assert_archive_equals_service(settings, svc.directory, bots=True)


def test_paged_stats_that_only_the_lenient_decoder_reads_come_back_whole(tmp_path: Path) -> None:
    # NaN and a lone surrogate escape: JSON that orjson refuses and Python's json reads. A
    # plain HTTP server on loopback pages them by limit/skip, three at a time at most.
    texts = [f'{{"id":"r{i}","timestamp":"2026-01-0{i + 1}T00:00:00Z","users":{i},'
             f'"guilds":1,"load":{"NaN" if i % 2 else i},"note":"\\ud800{i}"}}' for i in range(8)]

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            skip, limit = int(query["skip"][0]), min(int(query["limit"][0]), 3)
            answer_json(self, ("[" + ",".join(texts[skip:skip + limit]) + "]").encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = load_settings(None, env={}, overrides={
            "service.base_url": f"http://127.0.0.1:{server.server_address[1]}",
            "service.stats_page_size": 4})

        async def read() -> Any:
            async with Client(settings) as client:
                return (await stats_pages(client, Keying("b1", settings.fields), None, None,
                                          OrderHint())).records

        records = asyncio.run(read())
    finally:
        server.shutdown()
        server.server_close()
    expected = [json.loads(t) for t in texts]
    assert [r["id"] for r in records] == [f"r{i}" for i in range(8)]  # each once, in order
    assert [r["note"] for r in records] == [e["note"] for e in expected]  # surrogates kept
    assert [math.isnan(r["load"]) for r in records] == [bool(i % 2) for i in range(8)]


def test_status_explains_a_partial_run_and_what_it_kept_aside(service_factory: Any,
                                                              harvest_settings: Any) -> None:
    svc = service_factory(**GROWING_STATS, malformed_rate=0.1)
    settings = harvest_settings(svc)
    clean = harvest(settings)
    status = CliRunner().invoke(cli, ["status", "--db", str(settings.db_path), "--json"])
    info = json.loads(status.output)
    assert info["runs"][0]["run_id"] == clean.run_id and info["runs"][0]["status"] == "complete"
    assert info["tables"]["bot_stats"] == clean.stats_added and info["size_mb"] > 0
    reasons = query(settings, "SELECT reason, count(*) FROM rejects GROUP BY reason "
                              "ORDER BY count(*) DESC, reason LIMIT 5")
    assert [(r["reason"], r["records"]) for r in info["latest_run"]["reject_reasons"]] == reasons
    assert info["latest_run"]["errors"] == 0

    svc.directory.advance(3)
    partial = harvest(settings)  # /stats is paged and read unpaged: the cut lists are errors
    assert partial.status == "partial"
    info = json.loads(CliRunner().invoke(
        cli, ["status", "--db", str(settings.db_path), "--json"]).output)
    latest = info["latest_run"]
    assert (latest["run_id"], latest["status"], latest["errors"]) == (
        partial.run_id, "partial", partial.errors)
    assert latest["message"] == partial.message
    assert len(latest["latest_errors"]) == 5
    assert all("lacks the bot's newest record" in e["error"] for e in latest["latest_errors"])
    text = CliRunner().invoke(cli, ["status", "--db", str(settings.db_path)]).output
    assert f"latest run {partial.run_id}: partial: {partial.message}" in text
    assert f"{partial.errors} error(s) in harvest_errors; the latest:" in text
    assert text.count("lacks the bot's newest record") == 5
    assert "recent runs" in text and "bot_stats" in text


def snapshot_ids(settings: Settings, run_id: str) -> dict[str, set[str]]:
    return {table: {i for (i,) in query(settings, f"SELECT {key} FROM {table} WHERE run_id = ?",
                                        run_id)}
            for table, key in (("user_bots", "bot_id"), ("user_servers", "server_id"),
                               ("user_webhooks", "webhook_id"))}


def test_paged_user_lists_are_snapshotted_whole_when_user_lists_page_size_is_set(
        service_factory: Any, harvest_settings: Any, tmp_path: Path) -> None:
    svc = service_factory(bots=60, history_days=2, users=5, user_lists_page_size=2)
    directory = svc.directory

    def whole(user_id: str) -> dict[str, set[str]]:
        index = directory.user_index(user_id)
        return {"user_bots": {b["id"] for b in directory.user_bots(index)},
                "user_servers": {x["id"] for x in directory.user_servers(index)},
                "user_webhooks": {w["id"] for w in directory.user_webhooks(index)}}

    user_id, token = max(directory.user_tokens().items(),
                         key=lambda item: min(map(len, whole(item[0]).values())))
    expected = whole(user_id)
    assert min(len(ids) for ids in expected.values()) > 2  # every list takes two pages or more

    # Read whole, each list is its first page; asked past it, the service sends more: the run
    # is not complete, says which setting reads the lists, and keeps no list half-read.
    unpaged = harvest(harvest_settings(svc, {"user_token": token}))
    assert unpaged.status == "partial"
    errors = [e for (e,) in query(harvest_settings(svc), "SELECT error FROM harvest_errors "
                                  "WHERE run_id = ?", unpaged.run_id)]
    assert any("is not the whole list" in e and "[service].user_lists_page_size" in e
               for e in errors), errors
    cut = snapshot_ids(harvest_settings(svc), unpaged.run_id)
    assert all(not ids for ids in cut.values())

    settings = harvest_settings(svc, {"user_token": token, "service.user_lists_page_size": 2})
    report = harvest(settings)
    assert (report.status, report.errors) == ("complete", 0)
    assert snapshot_ids(settings, report.run_id) == expected

    whole_lists = service_factory(bots=60, history_days=2, users=5)  # pages nothing
    other = harvest_settings_for(whole_lists, tmp_path / "other.duckdb",
                                 {"user_token": token, "service.user_lists_page_size": 2})
    misread = harvest(other)
    assert (misread.status, misread.errors) == ("partial", 1)
    ((error,),) = query(other, "SELECT error FROM harvest_errors")
    assert "ignores `skip`" in error and "[service].user_lists_page_size = 0" in error
    assert snapshot_ids(other, misread.run_id) == {t: set() for t in expected}  # none half-read


# --- a service that wants the user token on the bot reads (the interface leaves it open) -----------
def test_bot_reads_that_need_the_user_token_get_it_when_configured(
        service_factory: Any, harvest_settings: Any) -> None:
    svc = service_factory(**SMALL, bot_reads_need_token=True)
    token = next(iter(svc.directory.user_tokens().values()))
    refused = harvest(harvest_settings(svc, {"user_token": token}))
    assert refused.status == "failed"
    assert "401" in refused.message and "[service].token_on_bot_reads = true" in refused.message
    no_token = harvest(harvest_settings(svc, {"service.token_on_bot_reads": True}))
    assert no_token.status == "failed" and "needs a user token" in no_token.message
    settings = harvest_settings(svc, {"service.token_on_bot_reads": True, "user_token": token})
    report = harvest(settings)
    assert (report.status, report.errors) == ("complete", 0)
    assert_archive_equals_service(settings, svc.directory, bots=True)
    assert token not in refused.message + no_token.message


# --- a service that cannot be harvested: a clear error, nothing lost ---------------------------------
def test_a_service_that_ignores_skip_ends_the_run_partial_with_a_clear_error(
        service_factory: Any, harvest_settings: Any) -> None:
    svc = service_factory(**SMALL, ignore_skip=True, max_page_size=10)
    settings = harvest_settings(svc, {"service.page_size": 10})
    report = harvest(settings)
    # What was read is kept, nothing is taken for removed (tests/test_removals.py: the same
    # verdict whatever the page cap).
    assert (report.status, report.bots_seen) == ("partial", 10)
    assert "ignores `skip`" in report.message
    assert svc.directory.summary()["listing_requests"] < 20  # stopped, not looping
    assert query(settings, "SELECT status, message FROM harvest_runs") == [
        ("partial", report.message)]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = child_env()
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_harvest_command_exits_non_zero_when_skip_is_ignored(service_factory: Any,
                                                                 tmp_path: Path) -> None:
    svc = service_factory(**SMALL, ignore_skip=True, max_page_size=10)
    result = run_cli("harvest", "--base-url", svc.base_url, "--db", str(tmp_path / "a.ducklake"),
                     "--no-progress", cwd=tmp_path)
    assert result.returncode == EXIT_CODES["partial"], result.stderr
    assert "ignores `skip`" in result.stdout + result.stderr


def test_a_service_that_is_down_fails_the_run_and_loses_nothing(service_factory: Any,
                                                                harvest_settings: Any) -> None:
    svc = service_factory(**SMALL)
    settings = harvest_settings(svc)
    assert harvest(settings).status == "complete"
    before = archived_stat_rows(settings)
    svc.close()  # connection refused from now on

    report = harvest(settings)
    assert report.status == "failed"
    assert "could not connect" in report.message and svc.base_url in report.message
    assert report.exit_code != 0
    assert archived_stat_rows(settings) == before == service_stat_rows(svc.directory)
    runs = query(settings, "SELECT status FROM harvest_runs ORDER BY started_at")
    assert runs == [("complete",), ("failed",)]
    # Nothing is marked removed because of a listing that could not be read.
    assert query(settings, "SELECT count(*) FROM bots WHERE removed_at IS NOT NULL") == [(0,)]


# --- a service whose clock runs ahead ---------------------------------------------------------------
def test_records_stamped_beyond_the_future_skew_go_to_rejects_with_the_reason(
        service_factory: Any, harvest_settings: Any) -> None:
    # The service's clock is three days and six hours ahead: its newest records are from then.
    now = datetime.now(UTC)
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(days=3, hours=6)
    svc = service_factory(bots=6, history_days=6, stats_per_day=2, end=end)
    directory = svc.directory
    settings = harvest_settings(svc)  # [fields].max_future_skew = "1d"
    report = harvest(settings)
    rows = service_stat_rows(directory)
    limit = now + timedelta(days=1)
    kept = [r for r in rows if r[2] <= limit]
    ahead = [r for r in rows if r[2] > limit]
    assert kept and ahead and min(r[2] for r in ahead) - limit > timedelta(hours=4)
    assert (report.status, report.rejects) == ("complete", len(ahead))
    assert archived_stat_rows(settings) == kept
    assert_archive_has_no_duplicates(settings)
    rejects = query(settings, "SELECT bot_id, reason, raw FROM rejects")
    assert sorted((b, json.loads(raw)["id"]) for b, _, raw in rejects) == sorted(
        (r[0], r[1]) for r in ahead)
    for _, reason, raw in rejects:
        stamp = datetime.fromisoformat(json.loads(raw)["timestamp"])
        assert f"timestamp field 'timestamp' is {stamp.isoformat()}" in reason
        assert "more than [fields].max_future_skew (1d) after botstats received it" in reason
    # Each run reads those bots again; the same records are the same rejects, kept once.
    again = harvest(settings)
    assert (again.status, again.stats_added, again.rejects) == ("complete", 0, 0)
    assert query(settings, "SELECT count(*) FROM rejects") == [(len(ahead),)]
    # A skew wide enough archives them all.
    wide = harvest_settings(svc, {"fields.max_future_skew": "4d"})
    assert harvest(wide).stats_added == len(ahead)
    assert archived_stat_rows(wide) == rows
