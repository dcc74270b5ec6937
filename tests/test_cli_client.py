"""`botstats users|bots|post-stat`: the interface by hand, against the embedded service.

Exit codes: 0 ok, 1 the service answered with an error or could not be reached, 2 usage or
config error. No traceback and no token/key ever reaches the terminal.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import child_env

from pipeline.cli import cli
from pipeline.service import Faults, ServiceConfig, serve_in_thread

ROOT = Path(__file__).resolve().parent.parent
WRONG_TOKEN = "not-a-real-token-1234"
CLIENT_COMMANDS = [
    ["users", "me"], ["users", "get"], ["users", "bots"], ["users", "servers"],
    ["users", "webhooks"], ["bots", "list"], ["bots", "get"], ["bots", "stats"],
    ["bots", "stat"], ["post-stat"],
]


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No config.toml and no BOTSTATS_* from the developer's shell; quick retries."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("BOTSTATS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("BOTSTATS_RETRY_ATTEMPTS", "2")
    monkeypatch.setenv("BOTSTATS_RETRY_BACKOFF_BASE", "0.01")


@pytest.fixture(scope="module")
def listing() -> Iterator[Any]:
    config = ServiceConfig(bots=30, seed=1, history_days=10, stats_per_day=2, max_page_size=100,
                           faults=Faults(rate_limit=0.0, error_rate=0.0, latency_ms=0.0))
    with serve_in_thread(config, host="127.0.0.1", port=0) as svc:
        yield svc


@pytest.fixture
def user(listing: Any) -> tuple[str, str]:
    uid, token = sorted(listing.directory.user_tokens().items())[0]
    return str(uid), token


@pytest.fixture
def bot_id(listing: Any) -> str:
    return str(sorted(listing.directory.bot_ids())[0])


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def assert_clean_failure(result: Result, code: int, *words: str, secrets: tuple[str, ...] = ()) -> None:
    """The documented exit code, one readable message, no traceback, no secret."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.output, (word, result.output)
    for secret in secrets:
        assert secret not in result.output


@pytest.mark.parametrize("args", [["bots", "get", ""], ["bots", "stats", " "], ["bots", "stat", ""],
                                  ["users", "get", ""], ["users", "webhooks", "  "],
                                  ["post-stat", "", "--users", "1", "--guilds", "1"]])
def test_an_empty_id_is_refused_before_any_request(listing: Any, args: list[str]) -> None:
    # Sent, it would name another endpoint: `bots stats ''` asked GET /bots//stats.
    before = listing.directory.summary()
    result = run(*args[:2], "--base-url", listing.base_url, *args[2:])
    assert_clean_failure(result, 2, "an id cannot be empty")
    assert listing.directory.summary() == before


# --- every command works ------------------------------------------------------------------------
def test_bots_list(listing: Any) -> None:
    result = run("bots", "list", "--base-url", listing.base_url, "--limit", "5", "--skip", "2")
    assert result.exit_code == 0, result.output
    listed = [str(b["id"]) for b in listing.directory.listing()]
    assert [str(b["id"]) for b in json.loads(result.stdout)] == listed[2:7]


def test_bots_list_default_page(listing: Any) -> None:
    result = run("bots", "list", "--base-url", listing.base_url)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 30


@pytest.mark.parametrize(("command", "shape"), [("get", dict), ("stats", list), ("stat", dict)])
def test_bot_reads(listing: Any, bot_id: str, command: str, shape: type) -> None:
    result = run("bots", command, bot_id, "--base-url", listing.base_url)
    assert result.exit_code == 0, result.output
    assert isinstance(json.loads(result.stdout), shape)


def test_bots_stats_pages_by_hand_from_a_service_that_pages_stats(bot_id: str) -> None:
    config = ServiceConfig(bots=30, seed=1, history_days=10, stats_per_day=2, stats_page_size=4,
                           faults=Faults(rate_limit=0.0, error_rate=0.0, latency_ms=0.0))
    with serve_in_thread(config, host="127.0.0.1", port=0) as svc:
        everything = svc.directory.stats(bot_id)
        whole = run("bots", "stats", bot_id, "--base-url", svc.base_url)
        page = run("bots", "stats", bot_id, "--base-url", svc.base_url, "--limit", "3",
                   "--skip", "5")
    assert len(everything) > 8
    assert json.loads(whole.stdout) == everything[:4]  # no limit sent: the service's first page
    assert json.loads(page.stdout) == everything[5:8]


def test_users_lists_page_by_hand_from_a_service_that_pages_them() -> None:
    config = ServiceConfig(bots=30, seed=1, history_days=2, user_lists_page_size=2,
                           faults=Faults(rate_limit=0.0, error_rate=0.0, latency_ms=0.0))
    with serve_in_thread(config, host="127.0.0.1", port=0) as svc:
        d = svc.directory
        uid, token = max(d.user_tokens().items(), key=lambda t: len(d.user_bots(d.user_index(t[0]))))
        everything = d.user_bots(d.user_index(uid))
        first = run("users", "bots", str(uid), "--base-url", svc.base_url, "--user-token", token)
        page = run("users", "bots", str(uid), "--base-url", svc.base_url, "--user-token", token,
                   "--limit", "2", "--skip", "1")
        get = run("users", "get", str(uid), "--base-url", svc.base_url, "--user-token", token,
                  "--limit", "2")
    assert len(everything) > 3
    assert json.loads(first.stdout) == everything[:2]  # no limit sent: the service's first page
    assert json.loads(page.stdout) == everything[1:3]
    assert get.exit_code == 2 and "No such option '--limit'" in get.output  # a user is no list


@pytest.mark.parametrize(("command", "shape"),
                         [("get", dict), ("bots", list), ("servers", list), ("webhooks", list)])
def test_user_reads_with_token_flag(listing: Any, user: tuple[str, str], command: str,
                                    shape: type) -> None:
    uid, token = user
    result = run("users", command, uid, "--base-url", listing.base_url, "--user-token", token)
    assert result.exit_code == 0, result.output
    assert isinstance(json.loads(result.stdout), shape)
    assert token not in result.output


def test_users_me_token_from_environment(listing: Any, user: tuple[str, str]) -> None:
    uid, token = user
    result = run("users", "me", "--base-url", listing.base_url,
                 env={"BOTSTATS_USER_TOKEN": token})
    assert result.exit_code == 0, result.output
    assert str(json.loads(result.stdout)["id"]) == uid


def test_users_me_token_on_the_group(listing: Any, user: tuple[str, str]) -> None:
    uid, token = user
    result = run("--user-token", token, "--base-url", listing.base_url, "users", "me")
    assert result.exit_code == 0, result.output
    assert str(json.loads(result.stdout)["id"]) == uid


def test_post_stat_with_key_flag(listing: Any) -> None:
    target = str(sorted(listing.directory.bot_ids())[5])
    key = listing.directory.bot_key(target)
    result = run("post-stat", target, "--users", "900", "--guilds", "12", "--shards", "2",
                 "--memory-load", "40", "--cpu-load", "7", "--commands-executed", "55",
                 "--custom", "region=eu", "--custom", "latency_ms=12.5",
                 "--custom", "premium_guilds=3", "--custom", "voice_enabled=true",
                 "--base-url", listing.base_url, "--bot-key", key)
    assert result.exit_code == 0, result.output
    assert key not in result.output
    last = json.loads(run("bots", "stat", target, "--base-url", listing.base_url).stdout)
    assert json.loads(result.stdout) == last  # it printed the record the service now holds
    assert (last["users"], last["guilds"], last["shards"]) == (900, 12, 2)
    assert {c["name"]: c["value"] for c in last["custom"]} == {
        "region": "eu", "latency_ms": 12.5, "premium_guilds": 3, "voice_enabled": True,
    }


def test_post_stat_key_from_environment(listing: Any) -> None:
    target = str(sorted(listing.directory.bot_ids())[6])
    key = listing.directory.bot_key(target)
    before = len(listing.directory.stats(target))
    result = run("post-stat", target, "--users", "1", "--guilds", "1",
                 "--base-url", listing.base_url, env={"BOTSTATS_BOT_KEY": key})
    assert result.exit_code == 0, result.output
    assert key not in result.output
    stats = listing.directory.stats(target)
    assert len(stats) == before + 1 and (stats[-1]["users"], stats[-1]["guilds"]) == (1, 1)
    assert json.loads(result.stdout) == stats[-1]


# --- failures: exit codes and messages ----------------------------------------------------------
def test_missing_user_token_is_a_config_error(listing: Any) -> None:
    result = run("users", "me", "--base-url", listing.base_url)
    assert_clean_failure(result, 2, "BOTSTATS_USER_TOKEN", "--user-token")


def test_wrong_user_token_exits_1_without_showing_it(listing: Any, user: tuple[str, str]) -> None:
    result = run("users", "get", user[0], "--base-url", listing.base_url,
                 "--user-token", WRONG_TOKEN)
    assert_clean_failure(result, 1, "GET", "/users/", "BOTSTATS_USER_TOKEN",
                         secrets=(WRONG_TOKEN,))


def test_missing_bot_key_is_a_config_error(listing: Any, bot_id: str) -> None:
    result = run("post-stat", bot_id, "--users", "1", "--guilds", "1",
                 "--base-url", listing.base_url)
    assert_clean_failure(result, 2, "BOTSTATS_BOT_KEY", "--bot-key")


def test_foreign_bot_key_exits_1_without_showing_it(listing: Any, bot_id: str) -> None:
    other = str(sorted(listing.directory.bot_ids())[1])
    key = listing.directory.bot_key(other)
    result = run("post-stat", bot_id, "--users", "1", "--guilds", "1",
                 "--base-url", listing.base_url, "--bot-key", key)
    assert_clean_failure(result, 1, "POST", f"/bots/{bot_id}/stats", secrets=(key,))


def test_unknown_bot_exits_1(listing: Any) -> None:
    result = run("bots", "get", "no-such-bot", "--base-url", listing.base_url)
    assert_clean_failure(result, 1, "404", f"GET {listing.base_url}/bots/no-such-bot")


def test_unreachable_service_exits_1() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run("bots", "list", "--base-url", f"http://127.0.0.1:{port}")
    assert_clean_failure(result, 1, "could not connect", "2 attempts", "--base-url")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["bots", "list", "--limit", "0"], ["--limit"]),
        (["bots", "get"], ["BOT_ID"]),
        (["post-stat", "1", "--users", "1"], ["--guilds"]),
        (["post-stat", "1", "--users", "1", "--guilds", "1", "--cpu-load", "101"], ["--cpu-load"]),
        (["post-stat", "1", "--users", "1", "--guilds", "1", "--custom", "novalue"],
         ["NAME=VALUE"]),
        (["bots", "list", "--base-url", "ftp://nowhere"], ["base_url", "http"]),
    ],
)
def test_usage_and_config_errors_exit_2(args: list[str], words: list[str]) -> None:
    assert_clean_failure(run(*args), 2, *words)


# --- a real process -----------------------------------------------------------------------------
def _botstats(*args: str) -> subprocess.CompletedProcess[str]:
    env = child_env()
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=60)


@pytest.mark.slow
def test_subprocess_bots_list(listing: Any) -> None:
    proc = _botstats("bots", "list", "--base-url", listing.base_url, "--limit", "3")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 3


@pytest.mark.slow
def test_subprocess_failure_has_no_traceback(listing: Any) -> None:
    proc = _botstats("bots", "stat", "no-such-bot", "--base-url", listing.base_url)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("botstats: error: GET ") and "Traceback" not in proc.stderr


# --- docs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", CLIENT_COMMANDS, ids=" ".join)
def test_every_command_has_help_and_is_in_the_readme(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.exit_code == 0
    assert "--base-url" in result.output and "--config" in result.output
    assert f"botstats {' '.join(command)}" in (ROOT / "README.md").read_text()
