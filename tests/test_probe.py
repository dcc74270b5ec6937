"""`botstats probe`: against the embedded service playing services that differ from the defaults,
it finds each difference with its evidence, and the settings it writes make the next harvest
archive everything."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import query

from pipeline.cli import cli
from pipeline.core._errors import ConfigError
from pipeline.core._loading import load_settings
from pipeline.harvester._run import harvest
from pipeline.interface._client import Reply
from pipeline.probe._probe import ProbeReport, Proposal, run_probe
from pipeline.probe._reading import listing_order
from pipeline.probe._report import TOPICS, Finding
from pipeline.probe._writing import write_settings
from pipeline.service import RunningService

REPO_CONFIG = Path(__file__).parents[1] / "config.toml"


def probe_settings(svc: RunningService, tmp_path: Path, config: Path | None = None,
                   **more: Any) -> Any:
    if config is None:
        config = tmp_path / "empty.toml"
        config.touch()
    return load_settings(config, env={}, overrides={
        "service.base_url": svc.base_url, "store.db": str(tmp_path / "a.duckdb"),
        "retry.backoff_base": 0.01, "retry.backoff_max": 0.05, **more})


def served_keys(svc: RunningService) -> list[tuple[Any, ...]]:
    """(bot_id, stat id, time) of every valid record served, in the service's field names."""
    cfg = svc.config
    return sorted((bot_id, r[cfg.field_name("stat_id")],
                   datetime.fromisoformat(r[cfg.field_name("stat_time")]).astimezone(UTC))
                  for bot_id in svc.directory.bot_ids()
                  for r in svc.directory.valid_stats(bot_id))


def finding_of(report: ProbeReport, what: str) -> Finding:
    """The finding ``what`` ("order of records"), or ``topic/what`` ("stats/paging")."""
    topic, _, rest = what.partition("/")
    if topic in TOPICS:
        what = rest
    return next(f for f in report.findings if f.what == what and (topic not in TOPICS
                                                                  or f.topic == topic))


def finding(report: ProbeReport, what: str) -> str:
    return finding_of(report, what).result


def proposed(report: ProbeReport) -> dict[str, Any]:
    return {p.key: p.value for p in report.proposals}


def tokens(svc: RunningService) -> str:
    return next(iter(svc.directory.user_tokens().values()))


# (service config, extra settings, {finding: words}, {proposal: value})
SERVICES: list[tuple[dict[str, Any], dict[str, Any], dict[str, str], dict[str, Any]]] = [
    ({"field_names": {"stat_time": "created_at", "stat_id": "_id", "bot_id": "bot_id",
                      "custom_name": "key", "custom_value": "val"}}, {},
     {"stat time": "'created_at' (an ISO 8601 time", "stat id": "'_id'", "bot id": "'bot_id'",
      "custom fields": "'key' (name) and 'val' (value)"},
     {"fields.stat_time": "created_at", "fields.stat_id": "_id", "fields.bot_id": "bot_id",
      "fields.custom_name": "key", "fields.custom_value": "val"}),
    ({"max_page_size": 15}, {},
     {"listing/paging": "offset: `limit` and `skip` are honoured"},
     {"service.page_size": 15, "service.bots_paging": "offset", "service.offset_param": "skip"}),
    ({"stats_page_size": 4}, {},
     {"stats/paging": "offset: `limit` and `skip` are honoured",
      "order of records": "oldest first"},
     {"service.stats_page_size": 4, "service.stats_paging": "offset"}),
    ({"bot_reads_need_token": True, "user_lists_page_size": 2}, {"user_token": "<token>"},
     {"bot reads without a token": "refused; with the user token: 200"},
     {"service.token_on_bot_reads": True, "service.user_lists_page_size": 2}),
    ({"rate_limit": 3.0, "bots": 15}, {},
     {"429 answers": "met", "rate-limit headers": "retry-after: "},
     {"fields.stat_time": "timestamp", "service.stats_page_size": 0}),
]


@pytest.mark.parametrize(("serve", "more", "findings", "proposals"),
                         [*SERVICES[:-1], pytest.param(*SERVICES[-1], marks=pytest.mark.clock)],
                         ids=["field-names", "page-cap", "paged-stats", "token-reads",
                              "rate-limit"])
def test_probe_finds_the_difference_and_its_settings_archive_everything(
        tmp_path: Path, service_factory: Callable[..., RunningService], serve: dict[str, Any],
        more: dict[str, Any], findings: dict[str, str], proposals: dict[str, Any]) -> None:
    svc = service_factory(**{"bots": 40, "history_days": 6, **serve})
    if "user_token" in more:
        more = {**more, "user_token": tokens(svc)}
    report = run_probe(probe_settings(svc, tmp_path, **more))
    assert report.requests <= 60
    if "rate_limit" in serve:
        assert report.rate_limited > 0 and not report.stopped
    for what, words in findings.items():
        result = finding(report, what)
        assert words in result, (what, result)
        evidence = finding_of(report, what).evidence
        if what not in ("order of records", "429 answers", "rate-limit headers", "custom fields"):
            assert evidence and " -> " in evidence[0]  # the request and what came back
    for key, value in proposals.items():
        assert proposed(report)[key] == value, key

    config = tmp_path / "config.toml"
    shutil.copy(REPO_CONFIG, config)
    written = write_settings(report, config)
    assert set(proposals) <= set(written)
    text = config.read_text()
    assert "# botstats configuration." in text  # comments kept
    assert "# the bot-listing service (BOTSTATS_BASE_URL, --base-url)" in text
    settings = probe_settings(svc, tmp_path, config, **more)
    for key, value in proposals.items():
        section, name = key.split(".")
        assert getattr(getattr(settings, section), name) == value
    result = harvest(settings)
    assert result.status == "complete", result.message
    archived = sorted(query(settings, "SELECT bot_id, stat_id, recorded_at FROM bot_stats"))
    assert archived == served_keys(svc)


def test_bot_reads_needing_a_token_without_one_stop_the_probe_saying_so(
        tmp_path: Path, service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(bots=5, history_days=2, bot_reads_need_token=True)
    report = run_probe(probe_settings(svc, tmp_path))
    assert "set BOTSTATS_USER_TOKEN" in report.stopped
    assert proposed(report)["service.token_on_bot_reads"] is True
    assert finding(report, "bot reads without a token") == "refused (401)"


def test_the_request_budget_bounds_the_probe(
        tmp_path: Path, service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(bots=20, history_days=2)
    report = run_probe(probe_settings(svc, tmp_path), max_requests=4)
    assert report.requests == 4
    assert "request budget (4, --max-requests) is spent" in report.stopped
    # What it could not read is undecided, not guessed.
    assert "fields.stat_time" not in {p.key for p in report.proposals if p.decided}


def test_probe_cli_prints_json_and_writes_a_new_config(
        tmp_path: Path, service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(bots=20, history_days=3, field_names={"stat_time": "ts"})
    empty = tmp_path / "empty.toml"
    empty.touch()
    out = tmp_path / "new.toml"
    result = CliRunner().invoke(cli, ["probe", "--config", str(empty), "--base-url", svc.base_url,
                                      "--json", "--write", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert "fields.stat_time" in data["written"]
    assert {"key": "fields.stat_time", "value": "ts"}.items() <= next(
        p for p in data["proposals"] if p["key"] == "fields.stat_time").items()
    assert load_settings(out, env={}).fields.stat_time == "ts"
    text = CliRunner().invoke(cli, ["probe", "--config", str(empty), "--base-url",
                                    svc.base_url]).output
    assert 'stat_time = "ts"' in text and "proposed settings" in text
    assert "GET " in text and " -> 200" in text


def test_writing_refuses_a_config_it_cannot_parse(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[service\n")
    report = ProbeReport("http://x", proposals=[Proposal("fields.stat_time", "ts", "why")])
    with pytest.raises(ConfigError, match="cannot read it to merge"):
        write_settings(report, bad)
    assert bad.read_text() == "[service\n"


def test_an_undecided_setting_is_never_written(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[fields]\nstat_time = "when"  # ours\n')
    report = ProbeReport("http://x", proposals=[
        Proposal("fields.stat_time", None, "no field reads as a time"),
        Proposal("fields.stat_id", "uid", "distinct")])
    assert write_settings(report, config) == ["fields.stat_id"]
    text = config.read_text()
    assert 'stat_time = "when"  # ours' in text and 'stat_id = "uid"' in text


@pytest.mark.parametrize(("records", "order"), [
    ([{"n": 1}, {"n": 2}, {"n": 3}], "by 'n', ascending"),
    ([{"n": 3, "s": "a"}, {"n": 2, "s": "c"}, {"n": 1, "s": "b"}], "by 'n', descending"),
    ([{"n": 3}, {"n": 5}, {"n": 1}], "by no field of the records (the service's own order)"),
    ([{"n": 1}], "cannot tell from fewer than 3 bots"),
])
def test_listing_order(records: list[dict[str, Any]], order: str) -> None:
    assert listing_order(records) == order


def test_a_reply_that_is_not_json_reads_as_none() -> None:
    reply = Reply("GET", "http://x/bots", "read", 502, {}, "<html>bad gateway</html>", 0.1)
    assert reply.json() is None


def test_probe_posts_only_when_asked_with_a_bot_key(
        tmp_path: Path, service_factory: Callable[..., RunningService]) -> None:
    svc = service_factory(bots=6, history_days=2)
    bot_id = svc.directory.bot_ids()[0]
    quiet = run_probe(probe_settings(svc, tmp_path))
    assert svc.directory.summary()["posted"] == 0 and "post" not in {f.topic for f in quiet.findings}
    with pytest.raises(ConfigError, match="--post needs the bot's API key"):
        run_probe(probe_settings(svc, tmp_path), post_bot=bot_id)
    report = run_probe(probe_settings(svc, tmp_path, bot_key=svc.directory.bot_key(bot_id)),
                       post_bot=bot_id)
    assert svc.directory.summary()["posted"] == 1
    assert finding(report, "POST /bots/:id/stats") == "answered 201; /stat now shows the posted record"


@pytest.mark.clock
def test_a_403_of_a_spent_quota_is_waited_out_not_taken_for_a_refused_token(
        tmp_path: Path, service_factory: Callable[..., RunningService]) -> None:
    # GitHub's primary rate limit: a spent quota answered 403 with X-RateLimit-Remaining: 0.
    svc = service_factory(bots=8, history_days=2, rate_limit=20.0, rate_burst=2,
                          rate_limit_headers="github-403")
    report = run_probe(probe_settings(svc, tmp_path))
    assert not report.stopped, report.stopped
    assert report.rate_limited == svc.app.state.faults.rejected > 0
    assert finding(report, "bot reads without a token") == "work"
    assert proposed(report)["service.token_on_bot_reads"] is False
    # a refusal of the rate limit is no error body of the service's
    assert not any("-> 403" in e for e in finding_of(report, "error bodies").evidence)
