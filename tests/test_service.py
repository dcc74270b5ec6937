"""The embedded bot-listing service: every endpoint, auth, errors, each fault, determinism,
scale. A real server on loopback (``serve_in_thread``) and a real HTTP client (httpx)."""

from __future__ import annotations

import ast
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from conftest import read_line

from pipeline.cli import cli
from pipeline.service import (
    MALFORMATIONS,
    Directory,
    Faults,
    RunningService,
    ServiceConfig,
    create_app,
    serve_in_thread,
)

END = datetime(2024, 6, 1, tzinfo=UTC)
Factory = Callable[..., RunningService]
BOT_FIELDS = {"id", "name", "username", "prefix", "short_description", "library", "tags", "owners",
              "created_at", "server_count", "shard_count", "points", "monthly_points", "certified",
              "invite", "website", "avatar"}
STAT_FIELDS = {"id", "bot_id", "timestamp", "users", "guilds", "shards", "memory_load", "cpu_load",
               "commands_executed", "custom"}
USER_FIELDS = {"id", "username", "avatar", "bio", "created_at", "bot_ids"}
SERVER_FIELDS = {"id", "name", "member_count", "owner_id", "tags"}
WEBHOOK_FIELDS = {"id", "bot_id", "url", "events", "created_at"}


@pytest.fixture
def http(service: RunningService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base_url, timeout=10) as client:
        yield client


def client_for(svc: RunningService) -> httpx.Client:
    return httpx.Client(base_url=svc.base_url, timeout=10)


def parse_ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def first_user(svc: RunningService) -> tuple[str, str]:
    return next(iter(svc.directory.user_tokens().items()))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "details"} and body["error"]
    return body


# --- listing ---------------------------------------------------------------------------
def test_list_bots_defaults_to_the_first_20(service: RunningService, http: httpx.Client) -> None:
    response = http.get("/bots")
    assert response.status_code == 200
    assert response.json() == service.directory.listing()[:20]


def test_list_bots_pages_with_limit_and_skip(service: RunningService, http: httpx.Client) -> None:
    listing = service.directory.listing()
    assert http.get("/bots", params={"limit": 10, "skip": 25}).json() == listing[25:30]
    assert http.get("/bots", params={"skip": 30}).json() == []
    assert http.get("/bots", params={"limit": 0}).json() == []
    paged = [bot for skip in range(0, 30, 7)
             for bot in http.get("/bots", params={"limit": 7, "skip": skip}).json()]
    assert paged == listing and len({b["id"] for b in paged}) == 30


def test_limit_above_max_page_size_returns_fewer(service_factory: Factory) -> None:
    svc = service_factory(bots=30, history_days=1, max_page_size=7)
    with client_for(svc) as http:
        page = http.get("/bots", params={"limit": 50, "skip": 3}).json()
    assert page == svc.directory.listing()[3:10]


def test_stats_page_size_pages_stats_like_the_listing(service_factory: Factory) -> None:
    whole = service_factory(bots=3, history_days=20, seed=5)
    paged = service_factory(bots=3, history_days=20, seed=5, stats_page_size=7)
    bot_id = whole.directory.listing()[0]["id"]
    with client_for(whole) as http:
        everything = http.get(f"/bots/{bot_id}/stats").json()
        assert http.get(f"/bots/{bot_id}/stats", params={"limit": 2}).json() == everything
    with client_for(paged) as http:
        stats = f"/bots/{bot_id}/stats"
        assert http.get(stats).json() == everything[:7]  # no limit: the first page
        assert http.get(stats, params={"limit": 50, "skip": 3}).json() == everything[3:10]
        pages = [http.get(stats, params={"limit": 7, "skip": k}).json() for k in range(0, 28, 7)]
        assert [r for page in pages for r in page] == everything and pages[-1] == []
        assert http.get(f"/bots/{bot_id}/stat").json() == everything[-1]
        assert_error(http.get(stats, params={"skip": "-1"}), 400)
    assert len(everything) == 20


def test_stats_order_newest_lists_a_bots_records_newest_first_paged_or_whole(
        service_factory: Factory) -> None:
    oldest = service_factory(bots=3, history_days=40, seed=5)
    whole = service_factory(bots=3, history_days=40, seed=5, stats_order="newest")
    paged = service_factory(bots=3, history_days=40, seed=5, stats_order="newest",
                            stats_page_size=7)
    bot_id = oldest.directory.listing()[0]["id"]
    with client_for(oldest) as http:
        everything = http.get(f"/bots/{bot_id}/stats").json()
    with client_for(whole) as http:
        assert http.get(f"/bots/{bot_id}/stats").json() == everything[::-1]
        assert http.get(f"/bots/{bot_id}/stat").json() == everything[-1]  # the newest either way
    with client_for(paged) as http:
        stats = f"/bots/{bot_id}/stats"
        pages = [http.get(stats, params={"limit": 7, "skip": k}).json() for k in range(0, 49, 7)]
        assert [r for page in pages for r in page] == everything[::-1] and pages[-1] == []
        assert http.get(stats, params={"limit": 5, "skip": 38}).json() == everything[1::-1]
        assert http.get(f"/bots/{bot_id}/stat").json() == everything[-1]
    # Past the service's tail of encoded records, and after a post (pages built another way).
    paged.directory.advance(1)
    key = paged.directory.bot_key(bot_id)
    with client_for(paged) as http:
        posted = http.post(f"/bots/{bot_id}/stats", json={"users": 1, "guilds": 2},
                           headers={"Authorization": key}).json()
        first = http.get(f"/bots/{bot_id}/stats", params={"limit": 3}).json()
        deep = http.get(f"/bots/{bot_id}/stats", params={"limit": 3, "skip": 39}).json()
    assert first[0] == posted and first[2] == everything[-1]
    assert deep == everything[2::-1]  # 42 records now: the posted, the new, then these
    assert len(everything) == 40


def test_user_lists_page_size_pages_a_users_lists(service_factory: Factory) -> None:
    whole = service_factory(bots=60, history_days=1, users=5)
    paged = service_factory(bots=60, history_days=1, users=5, user_lists_page_size=2)
    d = whole.directory
    _, token = max(d.user_tokens().items(),
                   key=lambda item: len(d.user_servers(d.user_index(item[0]))))
    auth = {"Authorization": f"Bearer {token}"}
    for what in ("bots", "servers", "webhooks"):
        with client_for(whole) as http:
            everything = http.get(f"/users/@me/{what}", headers=auth).json()
        assert len(everything) > 2 or what == "webhooks"  # (0-3 webhooks a user)
        with client_for(paged) as http:
            path = f"/users/@me/{what}"
            assert http.get(path, headers=auth).json() == everything[:2]
            pages = [http.get(path, headers=auth, params={"limit": 5, "skip": k}).json()
                     for k in range(0, len(everything) + 2, 2)]  # limit capped at 2
            assert [x for page in pages for x in page] == everything, what
            assert http.get("/users/@me", headers=auth).json()["id"]  # not a list: unchanged


def test_bot_reads_need_token_asks_a_user_token_on_every_bot_read(
        service_factory: Factory) -> None:
    svc = service_factory(bots=3, history_days=2, bot_reads_need_token=True)
    bot_id = svc.directory.bot_ids()[0]
    token = next(iter(svc.directory.user_tokens().values()))
    reads = ["/bots", f"/bots/{bot_id}", f"/bots/{bot_id}/stats", f"/bots/{bot_id}/stat"]
    with client_for(svc) as http:
        for path in reads:
            assert_error(http.get(path), 401)
            assert_error(http.get(path, headers={"Authorization": "Bearer utok_wrong"}), 401)
            assert http.get(path, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    with client_for(service_factory(bots=3, history_days=2)) as http:
        assert http.get("/bots").status_code == 200  # by default the reads are open


def test_the_shape_flags_spell_every_record_otherwise_and_leave_the_data_alone(
        service_factory: Factory) -> None:
    plain = service_factory(bots=4, history_days=2, end=END)
    other = service_factory(
        bots=4, history_days=2, end=END, id_type="integer", stat_ids="integer",
        time_format="epoch-ms", custom_shape="object",
        field_names={"bot_id": "botId", "stat_id": "statId", "stat_time": "ts",
                     "user_id": "userId", "server_id": "guildId", "webhook_id": "hookId"})
    user_id, token = first_user(plain)
    with client_for(plain) as a, client_for(other) as b:
        for bot_id in plain.directory.bot_ids():
            was, now = a.get(f"/bots/{bot_id}").json(), b.get(f"/bots/{bot_id}").json()
            assert now["botId"] == int(bot_id) and now["owners"] == [int(o) for o in was["owners"]]
            records = b.get(f"/bots/{bot_id}/stats").json()
            assert b.get(f"/bots/{bot_id}/stat").json() == records[-1]
            for old, new in zip(a.get(f"/bots/{bot_id}/stats").json(), records, strict=True):
                assert new["statId"] == other.directory.shapes.stat_id(old["id"])
                assert isinstance(new["statId"], int) and new["statId"] >= 2**53
                assert new["ts"] == parse_ts(old["timestamp"]).timestamp() * 1000
                assert new["custom"] == {c["name"]: c["value"] for c in old["custom"]}
                assert new["guilds"] == old["guilds"] and new["bot_id"] == int(bot_id)
        me = b.get("/users/@me", headers=bearer(token)).json()
        assert me["userId"] == int(user_id) and "id" not in me
        hooks = b.get(f"/users/{user_id}/webhooks", headers=bearer(token)).json()
        assert all(isinstance(h["hookId"], int) and isinstance(h["bot_id"], int) for h in hooks)
        servers = b.get(f"/users/{user_id}/servers", headers=bearer(token)).json()
        assert all(isinstance(s["guildId"], int) for s in servers)
    bare = service_factory(bots=2, history_days=2, stat_ids="hex", end=END)
    hexed = bare.directory.stats(bare.directory.bot_ids()[0])
    assert all(len(r["id"]) == 24 and int(r["id"], 16) >= 0 for r in hexed)
    none = service_factory(bots=2, history_days=2, stat_ids="none", end=END)
    assert all("id" not in r for r in none.directory.stats(none.directory.bot_ids()[0]))


@pytest.mark.parametrize(("style", "status", "content_type", "body"), [
    ("json", 404, "application/json", {"error": "unknown bot", "details": {"bot_id": "123"}}),
    ("problem", 410, "application/problem+json",
     {"type": "about:blank", "title": "Gone", "status": 410, "detail": "unknown bot"}),
    ("text", 400, "text/plain", "unknown bot"),
    ("empty", 422, None, ""),
])
def test_error_style_and_statuses_play_other_error_answers(
        service_factory: Factory, style: str, status: int, content_type: str | None,
        body: Any) -> None:
    svc = service_factory(bots=2, history_days=2, error_style=style, not_found_status=status,
                          auth_status=403, bot_reads_need_token=True)
    token = next(iter(svc.directory.user_tokens().values()))
    with client_for(svc) as http:
        answer = http.get("/bots/123/stats", headers=bearer(token))
        assert answer.status_code == status
        if content_type is None:
            assert answer.content == b""
        else:
            assert answer.headers["content-type"].startswith(content_type)
            assert (answer.json() if "json" in content_type else answer.text) == body
        refused = http.get("/bots")
        assert refused.status_code == 403 and refused.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("param", "value"), [
    ("limit", "abc"), ("limit", "-1"), ("limit", "1.5"), ("limit", "1e3"), ("skip", ""),
    ("skip", "-5"), ("skip", " 3"),
])
def test_bad_limit_or_skip_is_a_400(http: httpx.Client, param: str, value: str) -> None:
    body = assert_error(http.get("/bots", params={param: value}), 400)
    assert param in body["error"] and body["details"] == {param: value}


def test_bot_records_have_every_field(service: RunningService, http: httpx.Client) -> None:
    user_ids = set(service.directory.users())
    for bot in http.get("/bots", params={"limit": 30}).json():
        assert set(bot) == BOT_FIELDS
        assert bot["id"].isdigit() and 17 <= len(bot["id"]) <= 19
        assert set(bot["owners"]) <= user_ids and bot["owners"]
        assert isinstance(bot["tags"], list) and bot["tags"]
        assert isinstance(bot["certified"], bool)
        assert parse_ts(bot["created_at"]).tzinfo is not None
        assert bot["shard_count"] == bot["server_count"] // 1000 + 1


# --- one bot and its stats ---------------------------------------------------------------
def test_get_bot(service: RunningService, http: httpx.Client) -> None:
    bot_id = service.directory.bot_ids()[4]
    assert http.get(f"/bots/{bot_id}").json() == service.directory.bot(bot_id)


@pytest.mark.parametrize("path", ["/bots/{x}", "/bots/{x}/stats", "/bots/{x}/stat"])
@pytest.mark.parametrize("unknown", ["123456789012345678", "abc", "user"])
def test_unknown_bot_is_a_404(service: RunningService, http: httpx.Client, path: str,
                              unknown: str) -> None:
    bot_id = first_user(service)[0] if unknown == "user" else unknown
    body = assert_error(http.get(path.format(x=bot_id)), 404)
    assert body["details"] == {"bot_id": bot_id}


def test_unknown_endpoint_and_method_answer_json(http: httpx.Client) -> None:
    assert_error(http.get("/nope"), 404)
    assert_error(http.delete("/bots"), 405)


def test_stats_are_all_records_oldest_first(service: RunningService, http: httpx.Client) -> None:
    directory = service.directory
    full = 0
    for bot_id in directory.bot_ids():
        records = http.get(f"/bots/{bot_id}/stats").json()
        assert records == directory.stats(bot_id)
        assert all(set(r) == STAT_FIELDS and r["bot_id"] == bot_id for r in records)
        assert len({r["id"] for r in records}) == len(records)
        times = [parse_ts(r["timestamp"]) for r in records]
        assert all(b - a == timedelta(hours=12) for a, b in zip(times, times[1:], strict=False))
        assert times[-1] == directory.clock()
        full += len(records) == 10 * 2
    assert full >= 20  # most bots existed before the window; some were created during it


def test_last_stat_is_the_newest_record(service: RunningService, http: httpx.Client) -> None:
    bot_id = service.directory.bot_ids()[0]
    assert http.get(f"/bots/{bot_id}/stat").json() == service.directory.stats(bot_id)[-1]


def test_last_stat_of_a_bot_without_records_is_a_404(service: RunningService,
                                                     http: httpx.Client) -> None:
    added, _ = service.directory.churn()  # a new bot: its first record comes with the clock
    assert http.get(f"/bots/{added}/stats").json() == []
    body = assert_error(http.get(f"/bots/{added}/stat"), 404)
    assert "no stats" in body["error"]
    service.directory.advance()
    assert http.get(f"/bots/{added}/stat").json()["timestamp"] == service.directory.stats(added)[0]["timestamp"]


def test_series_look_like_real_bots() -> None:
    directory = Directory(ServiceConfig(bots=300, history_days=30, end=END))
    series = {bot_id: directory.stats(bot_id) for bot_id in directory.bot_ids()}
    last = [s[-1] for s in series.values()]
    guilds = sorted(r["guilds"] for r in last)
    assert guilds[0] < 30 and 20_000 < guilds[-1] <= 2_000_000  # heavy-tailed
    assert guilds[len(guilds) // 2] < 2_000  # ... and most bots are small
    big = [r for r in last if r["guilds"] >= 100]
    assert all(15 <= r["users"] / r["guilds"] <= 250 for r in big)
    assert all(r["shards"] == r["guilds"] // 1000 + 1 for r in last)
    assert all(0 <= r["cpu_load"] <= 100 and 0 <= r["memory_load"] <= 100 for r in last)
    assert sum(r["cpu_load"] > 80 for r in last) >= 5  # some bots run hot
    restarts = sum(b["commands_executed"] < a["commands_executed"]
                   for s in series.values() for a, b in zip(s, s[1:], strict=False))
    assert restarts > 0  # the counter is cumulative but resets on restart
    values = {c["name"]: type(c["value"]) for r in last for c in r["custom"]}
    assert values == {"region": str, "latency_ms": float, "premium_guilds": int, "voice_enabled": bool}
    assert any(not r["custom"] for r in last)
    growth = [s[-1]["guilds"] / max(1, s[0]["guilds"]) for s in series.values() if len(s) == 30]
    assert max(growth) > 1.2 and min(growth) < 0.9


# --- users -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/users/@me", "/users/{me}", "/users/{me}/bots",
                                  "/users/{me}/servers", "/users/{me}/webhooks"])
@pytest.mark.parametrize("header", [None, "Bearer utok_wrong", "Bearer", "Token {token}", "{token}"])
def test_user_endpoints_need_a_bearer_user_token(service: RunningService, http: httpx.Client,
                                                 path: str, header: str | None) -> None:
    me, token = first_user(service)
    headers = {} if header is None else {"Authorization": header.format(token=token)}
    response = http.get(path.format(me=me), headers=headers)
    assert_error(response, 401)
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_a_bot_key_is_not_a_user_token(service: RunningService, http: httpx.Client) -> None:
    key = service.directory.bot_key(service.directory.bot_ids()[0])
    assert_error(http.get("/users/@me", headers=bearer(key)), 401)


def test_me_is_the_tokens_user(service: RunningService, http: httpx.Client) -> None:
    for user_id, token in list(service.directory.user_tokens().items())[:3]:
        me = http.get("/users/@me", headers=bearer(token)).json()
        assert me == service.directory.user(user_id)
        assert set(me) == USER_FIELDS and me["id"] == user_id


def test_user_bots_servers_and_webhooks(service: RunningService, http: httpx.Client) -> None:
    directory = service.directory
    tokens = directory.user_tokens()
    _, token = first_user(service)  # any user may read any other
    listing = directory.listing()
    servers_seen = webhooks_seen = 0
    for user_id in tokens:
        user = http.get(f"/users/{user_id}", headers=bearer(token)).json()
        bots = http.get(f"/users/{user_id}/bots", headers=bearer(token)).json()
        assert bots == [directory.bot(b) for b in user["bot_ids"]]
        assert set(user["bot_ids"]) == {b["id"] for b in listing if user_id in b["owners"]}
        servers = http.get(f"/users/{user_id}/servers", headers=bearer(token)).json()
        hooks = http.get(f"/users/{user_id}/webhooks", headers=bearer(token)).json()
        assert len(servers) <= 8 and all(set(s) == SERVER_FIELDS for s in servers)
        assert len(hooks) <= 3 and all(set(h) == WEBHOOK_FIELDS for h in hooks)
        assert all(h["bot_id"] in user["bot_ids"] for h in hooks)
        servers_seen += len(servers)
        webhooks_seen += len(hooks)
    assert servers_seen and webhooks_seen


@pytest.mark.parametrize("suffix", ["", "/bots", "/servers", "/webhooks"])
def test_unknown_user_is_a_404(service: RunningService, http: httpx.Client, suffix: str) -> None:
    _, token = first_user(service)
    bot_id = service.directory.bot_ids()[0]  # a bot id is not a user id
    for user_id in ("123456789012345678", "nobody", bot_id):
        body = assert_error(http.get(f"/users/{user_id}{suffix}", headers=bearer(token)), 404)
        assert body["details"] == {"user_id": user_id}


# --- posting stats ---------------------------------------------------------------------
FULL_PAYLOAD = {"users": 123456, "guilds": 789, "shards": 1, "memory_load": 41, "cpu_load": 12,
                "commands_executed": 99, "custom": [{"name": "region", "value": "eu-west"},
                                                    {"name": "latency_ms", "value": 41.5},
                                                    {"name": "voice_enabled", "value": True}]}


@pytest.mark.parametrize("scheme", ["{key}", "Bot {key}"])
def test_posted_stat_is_the_new_last_record(service: RunningService, http: httpx.Client,
                                            scheme: str) -> None:
    bot_id = service.directory.bot_ids()[3]
    before = http.get(f"/bots/{bot_id}/stats").json()
    headers = {"Authorization": scheme.format(key=service.directory.bot_key(bot_id))}
    response = http.post(f"/bots/{bot_id}/stats", headers=headers, json=FULL_PAYLOAD)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created == {**FULL_PAYLOAD, "id": created["id"], "bot_id": bot_id,
                       "timestamp": created["timestamp"]}
    assert parse_ts(created["timestamp"]) > parse_ts(before[-1]["timestamp"])
    assert http.get(f"/bots/{bot_id}/stat").json() == created
    assert http.get(f"/bots/{bot_id}/stats").json() == [*before, created]
    assert service.directory.stats(bot_id)[-1] == created
    assert http.get(f"/bots/{bot_id}").json()["server_count"] == 789


def test_optional_fields_not_posted_are_null(service: RunningService, http: httpx.Client) -> None:
    bot_id = service.directory.bot_ids()[0]
    headers = {"Authorization": service.directory.bot_key(bot_id)}
    created = http.post(f"/bots/{bot_id}/stats", headers=headers,
                        json={"users": 5, "guilds": 1, "cpu_load": None}).json()
    assert {k: created[k] for k in STAT_FIELDS - {"id", "bot_id", "timestamp"}} == {
        "users": 5, "guilds": 1, "shards": None, "memory_load": None, "cpu_load": None,
        "commands_executed": None, "custom": []}


def test_posts_after_advance_keep_stats_in_time_order(service: RunningService,
                                                      http: httpx.Client) -> None:
    bot_id = service.directory.bot_ids()[0]
    headers = {"Authorization": service.directory.bot_key(bot_id)}
    for _ in range(2):
        http.post(f"/bots/{bot_id}/stats", headers=headers, json={"users": 1, "guilds": 1})
        service.directory.advance(2)
    http.post(f"/bots/{bot_id}/stats", headers=headers, json={"users": 2, "guilds": 2})
    records = http.get(f"/bots/{bot_id}/stats").json()
    times = [parse_ts(r["timestamp"]) for r in records]
    assert times == sorted(times) and len(set(times)) == len(times)
    # Each post lands after the record that was newest when it was made.
    assert [r["id"].removeprefix(f"{bot_id}-") for r in records[-8:]] == [
        "19", "post-1", "20", "21", "post-2", "22", "23", "post-3"]
    assert records[-1]["users"] == 2


@pytest.mark.parametrize(("header", "target", "status"), [
    (None, "own", 401),
    ("", "own", 401),
    ("bkey_0000000000000000000000000000000000000000", "own", 401),
    ("Bearer {key}", "own", 401),
    ("{user_token}", "own", 401),
    ("{other_key}", "own", 403),
    ("{key}", "unknown", 404),
])
def test_post_auth_errors(service: RunningService, http: httpx.Client, header: str | None,
                          target: str, status: int) -> None:
    directory = service.directory
    bot_id, other = directory.bot_ids()[:2]
    values = {"key": directory.bot_key(bot_id), "other_key": directory.bot_key(other),
              "user_token": first_user(service)[1]}
    headers = {} if header is None else {"Authorization": header.format(**values)}
    path_bot = bot_id if target == "own" else "123456789012345678"
    assert_error(http.post(f"/bots/{path_bot}/stats", headers=headers, json=FULL_PAYLOAD), status)
    assert directory.stats(bot_id) == http.get(f"/bots/{bot_id}/stats").json()
    assert all("post" not in r["id"] for r in directory.stats(bot_id))


BAD_PAYLOADS: list[tuple[Any, set[str]]] = [
    ({}, {"users", "guilds"}),
    ({"users": -1, "guilds": "lots"}, {"users", "guilds"}),
    ({"users": True, "guilds": 1}, {"users"}),
    ({"users": 1, "guilds": 1.0}, {"guilds"}),
    ({"users": 1, "guilds": 1, "cpu_load": 150, "memory_load": -5}, {"cpu_load", "memory_load"}),
    ({"users": 1, "guilds": 1, "shards": 1.5, "commands_executed": -3}, {"shards", "commands_executed"}),
    ({"users": 2**63, "guilds": 1}, {"users"}),
    ({"users": 1, "guilds": 1, "custom": {"region": "eu"}}, {"custom"}),
    ({"users": 1, "guilds": 1, "custom": [{"name": "x"}, {"name": 1, "value": 2},
                                           {"name": "y", "value": None}, "z",
                                           {"name": "w", "value": [1]}, {"name": "w", "value": 1}]},
     {"custom[0].value", "custom[1].name", "custom[2].value", "custom[3]", "custom[4].value",
      "custom[5].name"}),
    ({"users": 1, "guilds": 1, "server_count": 3, "id": "x"}, {"server_count", "id"}),
    ([{"users": 1, "guilds": 1}], {"body"}),
]


@pytest.mark.parametrize(("payload", "fields"), BAD_PAYLOADS)
def test_bad_payload_is_a_400_naming_each_bad_field(service: RunningService, http: httpx.Client,
                                                    payload: Any, fields: set[str]) -> None:
    bot_id = service.directory.bot_ids()[0]
    response = http.post(f"/bots/{bot_id}/stats", json=payload,
                         headers={"Authorization": service.directory.bot_key(bot_id)})
    body = assert_error(response, 400)
    assert set(body["details"]) == fields
    assert all(field in body["error"] for field in fields)


@pytest.mark.parametrize("content", [b"users=1&guilds=2", b"{\"users\": 1,", b"",
                                     b"{\"users\": NaN, \"guilds\": 1}"])
def test_non_json_body_is_a_400(service: RunningService, http: httpx.Client, content: bytes) -> None:
    bot_id = service.directory.bot_ids()[0]
    response = http.post(f"/bots/{bot_id}/stats", content=content,
                         headers={"Authorization": service.directory.bot_key(bot_id)})
    assert "JSON" in assert_error(response, 400)["error"]


# --- admin -----------------------------------------------------------------------------
def test_admin_health_and_advance(service: RunningService, http: httpx.Client) -> None:
    health = http.get("/_admin/health").json()
    assert health["status"] == "ok" and health["bots"] == 30
    bot_id = service.directory.bot_ids()[0]
    before = http.get(f"/bots/{bot_id}/stats").json()
    advanced = http.post("/_admin/advance", params={"intervals": 3}).json()
    assert advanced["advanced"] == 3
    after = http.get(f"/bots/{bot_id}/stats").json()
    assert after[: len(before)] == before and len(after) == len(before) + 3  # only appends
    assert parse_ts(after[-1]["timestamp"]) == parse_ts(before[-1]["timestamp"]) + timedelta(hours=36)
    assert advanced["clock"] == after[-1]["timestamp"]
    assert_error(http.post("/_admin/advance", params={"intervals": "x"}), 400)


def test_directory_advance_adds_records_for_every_bot(service: RunningService) -> None:
    directory = service.directory
    before = {b: len(directory.stats(b)) for b in directory.bot_ids()}
    directory.advance(2)
    assert {b: len(directory.stats(b)) for b in directory.bot_ids()} == {b: n + 2 for b, n in before.items()}
    with pytest.raises(ValueError, match="intervals"):
        directory.advance(-1)


# --- faults ----------------------------------------------------------------------------
@pytest.mark.clock
def test_rate_limit_answers_429_with_retry_after(service_factory: Factory) -> None:
    svc = service_factory(bots=5, history_days=1, rate_limit=2.0)
    with client_for(svc) as http:
        statuses = [http.get("/bots").status_code for _ in range(6)]
        limited = http.get("/bots")
        assert http.get("/_admin/health").status_code == 200  # admin is never limited
    assert statuses[:2] == [200, 200] and 429 in statuses
    assert limited.status_code == 429
    assert int(limited.headers["Retry-After"]) >= 1
    assert assert_error(limited, 429)["details"]["retry_after"] == int(limited.headers["Retry-After"])


# What each family says of a bucket of 4 tokens refilled at 2 a second: with 2.5 tokens left
# after a request, and on a 429 a quarter of a second before the next token.
_NOW = 1_800_000_000.25
_QUOTA_HEADERS = {
    "retry-after": ({}, {"Retry-After": "1"}),
    "retry-after-date": ({}, {"Retry-After": "Fri, 15 Jan 2027 08:00:01 GMT"}),
    "x-reset-after": (
        {"X-RateLimit-Limit": "4", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset-After": "0.750"},
        {"X-RateLimit-Limit": "4", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "0.250"}),
    "x-reset-epoch": (
        {"X-RateLimit-Limit": "4", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "1800000001"},
        {"X-RateLimit-Limit": "4", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1800000001"}),
    "x-reset-delta": (
        {"X-RateLimit-Limit": "4", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "1"},
        {"X-RateLimit-Limit": "4", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"}),
    "ratelimit": (
        {"RateLimit-Limit": "4", "RateLimit-Remaining": "2", "RateLimit-Reset": "1"},
        {"RateLimit-Limit": "4", "RateLimit-Remaining": "0", "RateLimit-Reset": "1"}),
    "ratelimit-policy": (
        {"RateLimit-Policy": '"default";q=2;w=1', "RateLimit": '"default";r=2;t=1'},
        {"RateLimit-Policy": '"default";q=2;w=1', "RateLimit": '"default";r=0;t=1'}),
    "none": ({}, {}),
}


@pytest.mark.parametrize("family", list(_QUOTA_HEADERS))
def test_each_family_of_rate_limit_headers_tells_the_buckets_state(family: str) -> None:
    from pipeline.service._quota import TokenBucket, quota_headers

    bucket = TokenBucket(2.0, 4.0)
    bucket.tokens = 2.5
    passed, limited = _QUOTA_HEADERS[family]
    assert quota_headers(family, bucket, 0.0, now=_NOW) == passed
    bucket.tokens = 0.5
    assert quota_headers(family, bucket, 0.25, now=_NOW) == limited


def test_a_rate_limited_service_sends_its_family_of_headers_on_every_answer(
        service_factory: Factory) -> None:
    svc = service_factory(bots=5, history_days=1, rate_limit=0.5, rate_burst=2,
                          rate_limit_headers="ratelimit")
    with client_for(svc) as http:
        answers = [http.get("/bots") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert [a.headers["RateLimit-Remaining"] for a in answers] == ["1", "0", "0"]
    assert {a.headers["RateLimit-Limit"] for a in answers} == {"2"}
    assert int(answers[2].headers["RateLimit-Reset"]) >= 1 and "Retry-After" not in answers[2].headers
    with pytest.raises(ValueError, match="rate_limit_headers"):
        Faults(rate_limit_headers="x-ratelimit")


def test_error_rate_answers_5xx_with_json_html_or_empty_bodies(service_factory: Factory) -> None:
    svc = service_factory(bots=5, history_days=1, error_rate=1.0)
    with client_for(svc) as http:
        responses = [http.get("/bots") for _ in range(40)]
        assert http.get("/_admin/health").status_code == 200
    assert {r.status_code for r in responses} == {500, 502, 503}
    kinds = Counter("json" if r.headers.get("content-type") == "application/json"
                    else "html" if r.text.startswith("<html>") else "empty" if not r.content
                    else "other" for r in responses)
    assert set(kinds) == {"json", "html", "empty"}
    assert any(r.text == "<html><body>502 Bad Gateway</body></html>" for r in responses)


def test_partial_error_rate_lets_some_requests_through(service_factory: Factory) -> None:
    svc = service_factory(bots=5, history_days=1, error_rate=0.5)
    with client_for(svc) as http:
        statuses = Counter(http.get("/bots").status_code for _ in range(40))
    assert statuses[200] > 5 and sum(statuses.values()) - statuses[200] > 5


def test_latency_delays_each_response(service_factory: Factory) -> None:
    svc = service_factory(bots=5, history_days=1, latency_ms=150, latency_jitter_ms=50)
    with client_for(svc) as http:
        started = time.perf_counter()
        assert http.get("/bots").status_code == 200
        assert time.perf_counter() - started >= 0.14  # a lower bound only


def test_latency_applies_to_concurrent_requests(service_factory: Factory) -> None:
    # The delay is an asyncio.sleep: eight slow requests at once all get through.
    svc = service_factory(bots=5, history_days=1, latency_ms=300)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: httpx.get(svc.base_url + "/bots").status_code, range(8)))
    assert statuses == [200] * 8


def test_churn_inserts_at_the_front_and_removes_one(service_factory: Factory) -> None:
    svc = service_factory(bots=30, history_days=2, churn_every=2)
    directory = svc.directory
    with client_for(svc) as http:
        first = http.get("/bots", params={"limit": 100}).json()
        assert http.get("/bots", params={"limit": 100}).json() == first  # 2nd request churns after
        third = http.get("/bots", params={"limit": 100}).json()
        (added,) = directory.added_ids()
        (removed,) = directory.removed_ids()
        assert third[0]["id"] == added and added not in {b["id"] for b in first}
        assert [b["id"] for b in third[1:]] == [b["id"] for b in first if b["id"] != removed]
        assert_error(http.get(f"/bots/{removed}"), 404)
        assert_error(http.get(f"/bots/{removed}/stats"), 404)
    assert directory.bot(removed) is None and directory.stats(removed) == []
    assert directory.stats(removed, include_removed=True)  # what it had when it was removed


def test_paging_under_churn_sees_duplicates_and_misses_new_bots(service_factory: Factory) -> None:
    svc = service_factory(bots=40, history_days=1, churn_every=1)
    with client_for(svc) as http:
        seen = [b["id"] for skip in range(0, 40, 5)
                for b in http.get("/bots", params={"limit": 5, "skip": skip}).json()]
    final = svc.directory.bot_ids()
    assert len(seen) > len(set(seen))  # the insertions shift pages forward: repeats
    assert set(svc.directory.added_ids()) & set(final) - set(seen)  # new bots land behind us
    assert len(final) == 40


def test_malformed_records_are_where_ground_truth_says(service_factory: Factory) -> None:
    svc = service_factory(bots=30, history_days=10, stats_per_day=2, malformed_rate=0.3, end=END)
    directory = svc.directory
    kinds: Counter[str] = Counter()
    with client_for(svc) as http:
        for bot_id in directory.bot_ids():
            served = http.get(f"/bots/{bot_id}/stats").json()
            assert served == directory.stats(bot_id)
            bad = directory.malformed_stats(bot_id)
            assert [r for r in served if r in bad] == bad
            assert [r for r in served if r not in bad] == directory.valid_stats(bot_id)
            assert all(is_valid(r) for r in directory.valid_stats(bot_id))
            for record in bad:
                kinds[malformation_kind(record)] += 1
    assert set(kinds) == set(MALFORMATIONS)
    total = sum(len(directory.stats(b)) for b in directory.bot_ids())
    assert 0.2 < sum(kinds.values()) / total < 0.4


def is_valid(record: dict[str, Any]) -> bool:
    try:
        parse_ts(record["timestamp"])
    except (KeyError, ValueError):
        return False
    return ("id" in record and isinstance(record["guilds"], int) and record["users"] >= 0
            and 0 <= record["cpu_load"] <= 100 and 0 <= record["memory_load"] <= 100)


def malformation_kind(record: dict[str, Any]) -> str:
    if "id" not in record:
        return "missing_id"
    if "timestamp" not in record:
        return "missing_timestamp"
    if record["users"] < 0:
        return "negative_users"
    if record["guilds"] == "lots":
        return "non_numeric_guilds"
    if record["cpu_load"] == 150:
        return "cpu_load_150"
    if record["memory_load"] == -5:
        return "memory_load_negative"
    assert not is_valid(record), record
    return "unparseable_timestamp"


def test_malformed_records_do_not_change_the_valid_data() -> None:
    clean = Directory(ServiceConfig(bots=10, history_days=5, end=END))
    faulty = Directory(ServiceConfig(bots=10, history_days=5, end=END,
                                     faults=Faults(malformed_rate=0.5)))
    for bot_id in clean.bot_ids():
        ids = {r.get("id") for r in faulty.valid_stats(bot_id)}
        assert faulty.valid_stats(bot_id) == [r for r in clean.stats(bot_id) if r["id"] in ids]


def test_bad_json_bots_always_get_a_truncated_body(service_factory: Factory) -> None:
    svc = service_factory(bots=30, history_days=3, bad_json_rate=0.3)
    directory = svc.directory
    bad = directory.bad_json_bots()
    assert 0 < len(bad) < 30
    with client_for(svc) as http:
        for bot_id in directory.bot_ids():
            for _ in range(2 if bot_id in bad else 1):
                response = http.get(f"/bots/{bot_id}/stats")
                assert response.status_code == 200
                if bot_id in bad:
                    with pytest.raises(json.JSONDecodeError):
                        json.loads(response.text)
                    assert http.get(f"/bots/{bot_id}/stat").json() == directory.stats(bot_id)[-1]
                else:
                    assert response.json() == directory.stats(bot_id)


def test_ignore_skip_always_returns_the_first_page(service_factory: Factory) -> None:
    svc = service_factory(bots=30, history_days=1, ignore_skip=True)
    with client_for(svc) as http:
        first = http.get("/bots", params={"limit": 10}).json()
        assert http.get("/bots", params={"limit": 10, "skip": 10}).json() == first
        assert http.get("/bots", params={"limit": 10, "skip": 1000}).json() == first


def test_live_interval_makes_new_records_arrive(service_factory: Factory) -> None:
    svc = service_factory(bots=5, history_days=1, live_interval=0.2)
    bot_id = svc.directory.bot_ids()[0]
    with client_for(svc) as http:
        first = http.get(f"/bots/{bot_id}/stat").json()
        deadline = time.monotonic() + 10
        latest = first
        while latest["id"] == first["id"] and time.monotonic() < deadline:
            time.sleep(0.05)
            latest = http.get(f"/bots/{bot_id}/stat").json()
    assert parse_ts(latest["timestamp"]) > parse_ts(first["timestamp"])


def test_faults_validate_their_values() -> None:
    for bad in ({"error_rate": 1.5}, {"rate_limit": -1}, {"churn_every": 1.5},
                {"ignore_skip": "yes"}, {"latency_ms": float("nan")}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Faults(**bad)
    for bad_cfg in ({"bots": 0}, {"stats_per_day": 7}, {"history_days": 0}, {"max_page_size": 0}):
        with pytest.raises(ValueError, match=next(iter(bad_cfg))):
            ServiceConfig(**bad_cfg)


# --- determinism and scale -------------------------------------------------------------
def snapshot(directory: Directory) -> Any:
    ids = directory.bot_ids()
    return (directory.listing(), [directory.stats(b) for b in ids[:10]], directory.user_tokens(),
            [directory.bot_key(b) for b in ids], [directory.user(u) for u in directory.users()])


def test_same_seed_same_data_other_seed_other_data() -> None:
    cfg = ServiceConfig(bots=50, history_days=7, stats_per_day=4, end=END,
                        faults=Faults(malformed_rate=0.1))
    assert snapshot(Directory(cfg)) == snapshot(Directory(cfg))
    other = snapshot(Directory(ServiceConfig(bots=50, history_days=7, stats_per_day=4, end=END, seed=2)))
    assert other[0] != snapshot(Directory(cfg))[0]


def test_ids_are_unique_snowflakes() -> None:
    directory = Directory(ServiceConfig(bots=2000, end=END))
    bot_ids = directory.bot_ids()
    user_ids = directory.users()
    assert len(set(bot_ids)) == 2000 and len(set(user_ids)) == 400
    assert not set(bot_ids) & set(user_ids)
    assert all(i.isdigit() and 17 <= len(i) <= 19 for i in bot_ids + user_ids)


def test_a_100k_bot_service_starts_fast_and_serves_deep_pages() -> None:
    # No O(n) work per request or at start: this is instant, not a minute of generation.
    with serve_in_thread(ServiceConfig(bots=100_000), port=0) as svc, client_for(svc) as http:
        page = http.get("/bots", params={"limit": 100, "skip": 999 * 100}).json()
        assert len(page) == 100
        assert http.get("/bots", params={"skip": 100_000}).json() == []
        last = page[-1]["id"]
        assert http.get(f"/bots/{last}").json() == page[-1]
        assert len(http.get(f"/bots/{last}/stats").json()) >= 1
        added, removed = svc.directory.churn()
        assert http.get("/bots", params={"limit": 1}).json()[0]["id"] == added
        assert http.get("/_admin/health").json()["bots"] == 100_000


def test_create_app_exposes_the_directory() -> None:
    app = create_app(ServiceConfig(bots=3))
    assert isinstance(app.state.directory, Directory) and len(app.state.directory) == 3


def test_the_service_imports_nothing_else_of_pipeline() -> None:
    package = Path(__file__).parents[1] / "pipeline" / "service"
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level <= 1, f"{path.name} imports {'.' * node.level}{node.module}"
                assert not (node.module or "").startswith("pipeline"), path.name
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("pipeline") for a in node.names), path.name


# --- botstats serve --------------------------------------------------------------------
SERVE_FLAGS = ["--host", "--port", "--bots", "--users", "--seed", "--history-days", "--stats-per-day",
               "--max-page-size", "--stats-page-size", "--user-lists-page-size",
               "--bot-reads-need-token",
               "--credentials-file", "--rate-limit", "--error-rate", "--latency-ms",
               "--latency-jitter-ms", "--churn-every", "--malformed-rate", "--bad-json-rate",
               "--ignore-skip", "--live-interval", "--listing-cut", "--duplicate-every",
               "--redirect-to", "--stall-rate", "--stall-seconds", "--gzip-cut-rate",
               "--body-fault-times"]


def test_serve_help_and_its_reference_page_cover_every_flag() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    reference = (Path(__file__).parents[1] / "docs" / "service.md").read_text()
    documented = {p.opts[0] for p in cli.commands["serve"].params if p.opts[0].startswith("--")}
    assert set(SERVE_FLAGS) <= documented
    for flag in documented:
        assert flag in result.output and f"`{flag}`" in reference, flag


@pytest.mark.parametrize(("args", "words"), [
    (["--bots", "0"], "--bots"),
    (["--error-rate", "1.5"], "--error-rate"),
    (["--stats-per-day", "7"], "86400"),
    (["--churn-every", "x"], "--churn-every"),
    (["--port", "70000"], "--port"),
    (["--listing-cut", "1.5"], "--listing-cut"),
    (["--redirect-to", "ftp://elsewhere"], "--redirect-to"),
    (["--body-fault-times", "-1"], "--body-fault-times"),
])
def test_serve_refuses_bad_flags_with_a_usage_error(args: list[str], words: str) -> None:
    result = CliRunner().invoke(cli, ["serve", *args])
    assert result.exit_code == 2
    assert words in result.output and "Traceback" not in result.output


def test_serve_on_a_port_in_use_or_a_foreign_host_says_which_to_change() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = CliRunner().invoke(cli, ["serve", "--host", "127.0.0.1", "--port", str(port),
                                        "--bots", "3", "--history-days", "1"])
    assert busy.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in busy.output
    assert "choose another --port (0 = any free port)" in busy.output
    foreign = CliRunner().invoke(cli, ["serve", "--host", "999.1.1.1", "--port", "0", "--bots", "3",
                                       "--history-days", "1"])
    assert foreign.exit_code == 2
    assert "cannot listen on 999.1.1.1:0" in foreign.output and "check --host" in foreign.output
    assert "Traceback" not in busy.output + foreign.output


@pytest.mark.slow
def test_botstats_serve_runs_and_writes_credentials(tmp_path: Path) -> None:
    creds = tmp_path / "creds.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "serve", "--port", "0", "--bots", "12", "--history-days",
         "3", "--credentials-file", str(creds), "--error-rate", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=Path(__file__).parents[1])
    try:
        assert proc.stdout is not None
        banner = read_line(proc.stdout)
        assert "listening on http://127.0.0.1:" in banner, banner
        base_url = banner.split()[-1]
        data = json.loads(creds.read_text())
        assert data["base_url"] == base_url and len(data["bot_keys"]) == 12
        user_id, token = next(iter(data["user_tokens"].items()))
        with httpx.Client(base_url=base_url, timeout=10) as http:
            assert http.get("/users/@me", headers=bearer(token)).json()["id"] == user_id
            bot_id, key = next(iter(data["bot_keys"].items()))
            posted = http.post(f"/bots/{bot_id}/stats", headers={"Authorization": key},
                               json={"users": 1, "guilds": 1})
            assert posted.status_code == 201
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize(("cut", "every", "expected"), [
    (1.0, 0, 0), (2 / 3, 0, 10), (0.0, 4, 37), (0.5, 4, 19)])
def test_the_listing_faults_cut_and_repeat_the_served_listing(cut: float, every: int,
                                                              expected: int) -> None:
    directory = Directory(ServiceConfig(bots=30, history_days=1,
                                        faults=Faults(listing_cut=cut, duplicate_every=every)))
    served = [b["id"] for skip in range(0, 60, 7) for b in directory.served_page(skip, 7)]
    assert len(served) == expected
    assert set(served) <= set(directory.bot_ids())
    if every and not cut:
        assert set(served) == set(directory.bot_ids())  # repeats hide nothing
