"""The harvester against a hostile transport, each played by the embedded service: a body that
stalls half-way, a gzip body cut short, a listing that repeats bots, a redirect to another host,
and a /stats body of 50 MB. Nothing is lost or duplicated, no credential leaves the service's
origin, and what fails is an error the next run completes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    archived_stat_rows,
    assert_archive_equals_service,
    child_env,
    harvest_settings_for,
    query,
    service_stat_rows,
)

from pipeline.core._errors import ApiError
from pipeline.harvester._run import harvest
from pipeline.interface._client import Client

SMALL = {"bots": 16, "history_days": 3, "stats_per_day": 2}


# --- a body that stalls, a compressed body cut short: retried, then an error, then completed ------
@pytest.mark.parametrize(("fault", "words"), [
    ({"stall_rate": 0.3, "stall_seconds": 3.0}, "got no answer within 0.4 s"),
    ({"gzip_cut_rate": 0.3}, "compressed body that is cut short"),
], ids=["stalling body", "gzip cut short"])
def test_a_spoiled_body_is_retried_then_an_error_and_the_next_run_completes_the_bot(
        service_factory: Any, harvest_settings: Any, fault: dict[str, Any], words: str) -> None:
    # Each spoiled bot's first three /stats answers are spoiled; a run tries each twice.
    svc = service_factory(**SMALL, **fault, body_fault_times=3)
    directory = svc.directory
    kind = "stall" if "stall_rate" in fault else "gzip_cut"
    spoiled = directory.body_fault_bots(kind)
    assert 0 < len(spoiled) < len(directory), "no bot (or every bot) is spoiled: proves nothing"
    settings = harvest_settings(svc, {"service.timeout": 0.4, "retry.attempts": 2})

    first = harvest(settings)
    assert (first.status, first.exit_code, first.errors) == ("partial", 3, len(spoiled))
    assert first.retries >= len(spoiled)  # each spoiled bot was tried again
    errors = query(settings, "SELECT bot_id, error FROM harvest_errors")
    assert {b for b, _ in errors} == spoiled
    assert all(words in error for _, error in errors), errors
    assert query(settings, "SELECT count(*) FROM rejects") == [(0,)]  # a transfer, not a record
    healthy = sorted(set(directory.bot_ids()) - spoiled)
    assert archived_stat_rows(settings) == service_stat_rows(directory, healthy)

    second = harvest(settings)  # third answer spoiled, the retry gets the whole body
    assert (second.status, second.errors) == ("complete", 0)
    assert second.retries >= len(spoiled)
    assert all(directory.spoiled_answers(b) == 3 for b in spoiled)
    assert_archive_equals_service(settings, directory)


# --- the same bot twice in one page and across pages ------------------------------------------------
def test_a_listing_that_repeats_bots_archives_each_once(service_factory: Any,
                                                        harvest_settings: Any) -> None:
    svc = service_factory(bots=40, history_days=3, stats_per_day=2, duplicate_every=4,
                          max_page_size=10)
    directory = svc.directory
    pages = [[b["id"] for b in directory.served_page(skip, 10)] for skip in range(0, 50, 10)]
    assert any(len(set(page)) < len(page) for page in pages), "no page repeats a bot"
    first_seen = {}
    across = False
    for number, page in enumerate(pages):
        for bot_id in set(page):
            across |= first_seen.setdefault(bot_id, number) < number
    assert across, "no bot is repeated on a later page"

    settings = harvest_settings(svc, {"service.page_size": 10})
    report = harvest(settings)
    assert (report.status, report.errors, report.bots_seen) == ("complete", 0, 40)
    assert report.bots_fetched == 40  # each bot's /stats read once
    assert_archive_equals_service(settings, directory)
    assert {b for (b,) in query(settings, "SELECT bot_id FROM bots")} == set(directory.bot_ids())


# --- a redirect to another origin: no credential ever goes there ------------------------------------
class Recorder(BaseHTTPRequestHandler):
    """Another host: records every request it gets, with its headers."""

    seen: list[tuple[str, str, dict[str, str]]] = []

    def _record(self) -> None:
        Recorder.seen.append((self.command, self.path, dict(self.headers)))
        body = b"[]"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _record

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def other_host() -> Any:
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_redirect_to_another_host_never_carries_the_user_token_or_bot_key(
        service_factory: Any, harvest_settings: Any, other_host: str) -> None:
    svc = service_factory(**SMALL, redirect_to=other_host)
    token = next(iter(svc.directory.user_tokens().values()))
    bot_id, key = next(iter(svc.directory.bot_keys().items()))
    settings = harvest_settings(svc, {"user_token": token, "bot_key": key,
                                      "service.token_on_bot_reads": True})
    report = harvest(settings)
    assert report.status == "failed"
    assert "307" in report.message and f"a redirect to {other_host}" in report.message

    async def post() -> None:
        async with Client(settings) as client:
            await client.post_stat(bot_id, {"users": 1, "guilds": 1})

    with pytest.raises(ApiError) as caught:
        asyncio.run(post())
    assert "307" in str(caught.value)
    assert Recorder.seen == []  # the other host was never asked anything
    for text in (report.message, str(caught.value)):
        assert token not in text and key not in text
    for (row,) in query(settings, "SELECT to_json(r)::VARCHAR FROM harvest_runs r"):
        assert token not in row


# --- a 50 MB /stats body: peak memory stays bounded ---------------------------------------------------
# `botstats harvest` in a process of its own, reporting its peak resident memory: VmHWM, the
# high-water mark of its own address space (ru_maxrss would include the parent's at exec).
HARVEST_AND_REPORT_PEAK = """
import sys
import pipeline
from pipeline.cli import cli
pipeline.tune_allocators()  # as `botstats` (its main) does first
try:
    cli(sys.argv[1:], prog_name="botstats")
except SystemExit as exc:
    code = exc.code or 0
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(int(peak.split()[1]) / 1024, file=sys.stderr)
sys.exit(code)
"""


def harvest_peak_rss_mb(base_url: str, db: Path) -> float:
    """`botstats harvest` of ``base_url`` into ``db`` in a process of its own; its peak resident
    memory in MB."""
    db.parent.mkdir(parents=True, exist_ok=True)
    config = db.with_name("empty-config.toml")
    config.touch()
    env = child_env()
    proc = subprocess.run([sys.executable, "-c", HARVEST_AND_REPORT_PEAK, "--config", str(config),
                           "harvest", "--base-url", base_url, "--db", str(db), "--no-progress",
                           "--json"], cwd=db.parent, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"status": "complete"' in proc.stdout, (proc.stdout[-2000:], proc.stderr[-2000:])
    return float(proc.stderr.strip().splitlines()[-1])


BODY_MB = 50
# Peak memory a harvest may grow by per MB of one /stats body (body, columns, frames, DuckDB).
MAX_RSS_PER_BODY_MB = 12


@pytest.mark.slow
def test_a_50_mb_stats_body_is_archived_with_bounded_memory(service_factory: Any,
                                                            tmp_path: Path) -> None:
    # One bot with 1,620 days of records every 15 minutes: a /stats body of about 50 MB.
    big = service_factory(bots=1, history_days=1620, stats_per_day=96)
    (bot_id,) = big.directory.bot_ids()
    records = big.directory.stats(bot_id)
    body_mb = len(json.dumps(records, separators=(",", ":"))) / 2**20
    assert body_mb >= BODY_MB * 0.95
    small = service_factory(bots=1, history_days=3, stats_per_day=2)
    baseline = harvest_peak_rss_mb(small.base_url, tmp_path / "small" / "archive.ducklake")
    peak = harvest_peak_rss_mb(big.base_url, tmp_path / "big" / "archive.ducklake")
    # The figures are in docs/reliability.md; the bound is what a body may cost at most.
    print(f"peak RSS: {peak:.0f} MB for a {body_mb:.0f} MB body, {baseline:.0f} MB for a small one")
    assert peak - baseline < MAX_RSS_PER_BODY_MB * body_mb
    settings = harvest_settings_for(big, tmp_path / "big" / "archive.ducklake")
    assert archived_stat_rows(settings) == service_stat_rows(big.directory)
    custom = sum(len(r["custom"]) for r in records)
    assert query(settings, "SELECT count(*) FROM bot_stat_custom") == [(custom,)]
