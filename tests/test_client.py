"""The API client: every endpoint, both auth schemes, error mapping, retries, budget.

Two real servers on loopback, no mocks of httpx:
- the embedded bot-listing service (``pipeline.service``) for the endpoints and auth;
- ``Scripted``, a tiny Starlette app answering each request with the next scripted reply, for
  exact control over statuses, Retry-After, bodies and delays.
"""

from __future__ import annotations

import asyncio
import email.utils
import http.server
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import uvicorn
from conftest import answer_json
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pipeline.core._errors import (
    ApiError,
    AuthError,
    BadRequest,
    BadResponse,
    MissingCredential,
    NotFound,
    RateLimited,
    ServerError,
    Unreachable,
)
from pipeline.core._redact import redact_url
from pipeline.core._settings import RetrySettings, Secret, ServiceSettings, Settings
from pipeline.interface._client import (
    Client,
    ClientStats,
    RawArray,
    env_proxy,
)
from pipeline.interface._ratelimit import parse_retry_after
from pipeline.service import Faults, ServiceConfig, serve_in_thread

USER_TOKEN = "user-token-s3cret"
BOT_KEY = "bot-key-s3cret"


# --- helpers ----------------------------------------------------------------------------------
def make_settings(base_url: str, *, attempts: int = 3, backoff_base: float = 0.01,
                  user_token: str = "", bot_key: str = "", **service: Any) -> Settings:
    return Settings(
        service=ServiceSettings(base_url=base_url, **service),
        retry=RetrySettings(attempts=attempts, backoff_base=backoff_base, backoff_max=0.05),
        user_token=Secret(user_token),
        bot_key=Secret(bot_key),
    )


@dataclass
class Outcome:
    value: Any = None
    error: ApiError | None = None
    stats: ClientStats = field(default_factory=ClientStats)
    elapsed: float = 0.0


def call(settings: Settings, fn: Callable[[Client], Awaitable[Any]]) -> Outcome:
    """One client, one call; the value or the ApiError, with the client's stats."""

    async def go() -> Outcome:
        out = Outcome()
        started = time.monotonic()
        async with Client(settings) as client:
            try:
                out.value = await fn(client)
            except ApiError as exc:
                out.error = exc
            out.stats = client.stats
        out.elapsed = time.monotonic() - started
        return out

    return asyncio.run(go())


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-encoded unless str/bytes
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    client_port: int = 0  # one per connection


class Scripted:
    """A loopback HTTP server answering request n with replies[n] (the last one repeats)."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.seen: list[Seen] = []
        app = Starlette(routes=[Route("/{path:path}", self._answer, methods=["GET", "POST"])])
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="error", lifespan="off",
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._sock]}, daemon=True)

    async def _answer(self, request: Request) -> Response:
        raw_path = request.scope["raw_path"].decode()  # as sent, before percent-decoding
        self.seen.append(Seen(request.method, raw_path, request.url.query,
                              dict(request.headers), await request.body(),
                              request.client.port if request.client else 0))
        reply = self.replies[min(len(self.seen), len(self.replies)) - 1]
        if reply.delay:
            await asyncio.sleep(reply.delay)
        body = reply.body
        if not isinstance(body, str | bytes):
            body = json.dumps(body)
        return Response(body, status_code=reply.status, headers=reply.headers,
                        media_type="application/json")

    def count(self, method: str) -> int:
        return sum(1 for s in self.seen if s.method == method)

    def __enter__(self) -> Scripted:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "scripted server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(5)
        self._sock.close()


@pytest.fixture
def scripted() -> Iterator[Callable[..., Scripted]]:
    servers: list[Scripted] = []

    def start(*replies: Reply) -> Scripted:
        server = Scripted(list(replies)).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__()


@pytest.fixture(scope="module")
def listing() -> Iterator[Any]:
    """The embedded service, healthy: 30 bots, 10 days of history."""
    config = ServiceConfig(bots=30, seed=1, history_days=10, stats_per_day=2, max_page_size=100,
                           faults=Faults(rate_limit=0.0, error_rate=0.0, latency_ms=0.0))
    with serve_in_thread(config, host="127.0.0.1", port=0) as svc:
        yield svc


def free_port() -> int:
    """A loopback port nobody listens on: connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_names_request(exc: ApiError, method: str, url: str, *secrets: str) -> None:
    message = str(exc)
    assert f"{method} {url}" in message
    assert exc.method == method
    for secret in secrets:
        assert secret not in message
        assert secret not in (exc.body or "")


# --- endpoints against the embedded service ---------------------------------------------------
def test_list_bots_pages_through_every_bot(listing: Any) -> None:
    settings = make_settings(listing.base_url)
    first = call(settings, lambda c: c.list_bots(limit=10, skip=0)).value
    second = call(settings, lambda c: c.list_bots(limit=10, skip=10)).value
    everything = call(settings, lambda c: c.list_bots(limit=100)).value
    assert len(first) == len(second) == 10
    assert not {b["id"] for b in first} & {b["id"] for b in second}
    assert {str(b["id"]) for b in everything} == {str(i) for i in listing.directory.bot_ids()}


def test_bot_reads_return_the_records_untouched(listing: Any) -> None:
    settings = make_settings(listing.base_url)
    bot_id = sorted(listing.directory.bot_ids())[0]
    bot = call(settings, lambda c: c.bot(bot_id)).value
    stats = call(settings, lambda c: c.bot_stats(bot_id)).value
    last = call(settings, lambda c: c.bot_last_stat(bot_id)).value
    raw = httpx.get(f"{listing.base_url}/bots/{bot_id}").json()
    assert bot == raw  # every field, known or not
    assert str(bot["id"]) == str(bot_id)
    assert stats and all(str(s["bot_id"]) == str(bot_id) for s in stats)
    assert last["timestamp"] == max(s["timestamp"] for s in stats)


def test_user_endpoints_send_the_bearer_token(listing: Any) -> None:
    # A user the service gives bots, servers and webhooks: each list is checked record by record.
    lists = ("user_bots", "user_servers", "user_webhooks")
    directory = listing.directory
    uid, token = next((str(u), t) for u, t in sorted(directory.user_tokens().items())
                      if all(getattr(directory, m)(directory.user_index(str(u))) for m in lists))
    settings = make_settings(listing.base_url, user_token=token)
    me = call(settings, lambda c: c.me()).value
    assert str(me["id"]) == uid
    assert call(settings, lambda c: c.user(uid)).value == me
    for method in lists:
        out = call(settings, lambda c, m=method: getattr(c, m)(uid))
        assert out.error is None, out.error
        assert out.value == getattr(directory, method)(directory.user_index(uid)), method


@pytest.mark.parametrize("method", ["me", "user", "user_bots", "user_servers", "user_webhooks"])
def test_user_endpoints_without_token_fail_before_any_request(listing: Any, method: str) -> None:
    settings = make_settings(listing.base_url)
    args = () if method == "me" else ("1",)
    out = call(settings, lambda c: getattr(c, method)(*args))
    assert isinstance(out.error, MissingCredential) and isinstance(out.error, AuthError)
    assert "BOTSTATS_USER_TOKEN" in str(out.error) and "--user-token" in str(out.error)
    assert out.stats.requests == 0


def test_wrong_user_token_is_an_auth_error_without_the_token(listing: Any) -> None:
    settings = make_settings(listing.base_url, user_token=USER_TOKEN)
    out = call(settings, lambda c: c.me())
    assert isinstance(out.error, AuthError) and out.error.status in (401, 403)
    assert_names_request(out.error, "GET", f"{listing.base_url}/users/@me", USER_TOKEN)
    assert "BOTSTATS_USER_TOKEN" in str(out.error)
    assert out.stats.requests == 1  # auth failures are not retried


def test_post_stat_with_the_bots_key_is_stored(listing: Any) -> None:
    bot_id = sorted(listing.directory.bot_ids())[1]
    settings = make_settings(listing.base_url, bot_key=listing.directory.bot_key(bot_id))
    created = call(settings, lambda c: c.post_stat(bot_id, {"users": 4242, "guilds": 77}))
    assert created.error is None, created.error
    assert isinstance(created.value, dict)
    last = call(settings, lambda c: c.bot_last_stat(bot_id)).value
    assert (last["users"], last["guilds"]) == (4242, 77)


def test_post_stat_key_argument_overrides_settings(listing: Any) -> None:
    bot_id = sorted(listing.directory.bot_ids())[2]
    settings = make_settings(listing.base_url, bot_key=BOT_KEY)
    key = listing.directory.bot_key(bot_id)
    out = call(settings, lambda c: c.post_stat(bot_id, {"users": 1, "guilds": 1}, bot_key=key))
    assert out.error is None, out.error


@pytest.mark.parametrize("whose", ["wrong", "foreign"])
def test_post_stat_with_a_wrong_or_foreign_key_is_refused(listing: Any, whose: str) -> None:
    bot_id, other = sorted(listing.directory.bot_ids())[:2]
    key = BOT_KEY if whose == "wrong" else listing.directory.bot_key(other)
    settings = make_settings(listing.base_url, bot_key=key)
    out = call(settings, lambda c: c.post_stat(bot_id, {"users": 1, "guilds": 1}))
    assert isinstance(out.error, AuthError) and out.error.status in (401, 403)
    assert_names_request(out.error, "POST", f"{listing.base_url}/bots/{bot_id}/stats", key)
    assert "BOTSTATS_BOT_KEY" in str(out.error)
    assert out.stats.requests == 1


def test_post_stat_without_key_fails_before_any_request(listing: Any) -> None:
    out = call(make_settings(listing.base_url), lambda c: c.post_stat("1", {"users": 1}))
    assert isinstance(out.error, MissingCredential)
    assert "BOTSTATS_BOT_KEY" in str(out.error) and "--bot-key" in str(out.error)
    assert out.stats.requests == 0


def test_post_stat_invalid_payload_is_a_bad_request_with_details(listing: Any) -> None:
    bot_id = sorted(listing.directory.bot_ids())[3]
    settings = make_settings(listing.base_url, bot_key=listing.directory.bot_key(bot_id))
    out = call(settings, lambda c: c.post_stat(bot_id, {"users": "lots"}))
    assert isinstance(out.error, BadRequest) and out.error.status == 400
    assert out.error.details is not None
    assert_names_request(out.error, "POST", f"{listing.base_url}/bots/{bot_id}/stats",
                         listing.directory.bot_key(bot_id))


def test_unknown_bot_is_not_found(listing: Any) -> None:
    out = call(make_settings(listing.base_url), lambda c: c.bot("no-such-bot"))
    assert isinstance(out.error, NotFound) and out.error.status == 404
    assert_names_request(out.error, "GET", f"{listing.base_url}/bots/no-such-bot")
    assert out.stats.requests == 1


def test_one_client_serves_many_concurrent_tasks(listing: Any) -> None:
    settings = make_settings(listing.base_url, max_connections=4, max_keepalive=4)
    ids = sorted(listing.directory.bot_ids())

    async def all_stats(c: Client) -> list[Any]:
        return await asyncio.gather(*(c.bot_stats(i) for i in ids))

    out = call(settings, all_stats)
    assert out.error is None, out.error
    assert [str(s[0]["bot_id"]) for s in out.value] == [str(i) for i in ids]
    assert out.stats.requests == len(ids)


def test_concurrent_requests_share_at_most_max_connections(
        scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body=[{"id": 1}], delay=0.02))
    settings = make_settings(server.base_url, max_connections=3, max_keepalive=3)

    async def many(c: Client) -> list[Any]:
        return await asyncio.gather(*(c.bot_stats(i) for i in range(24)))

    out = call(settings, many)
    assert out.error is None and len(out.value) == 24
    ports = {s.client_port for s in server.seen}
    assert len(ports) == 3  # three connections, each reused, never a fourth


def test_faulty_service_is_survived_by_retries() -> None:
    config = ServiceConfig(bots=30, seed=2, history_days=2, stats_per_day=1, max_page_size=100,
                           faults=Faults(rate_limit=0.0, error_rate=0.3, latency_ms=0.0))
    with serve_in_thread(config, host="127.0.0.1", port=0) as svc:
        settings = make_settings(svc.base_url, attempts=12)
        ids = sorted(svc.directory.bot_ids())

        async def all_bots(c: Client) -> list[Any]:
            return await asyncio.gather(*(c.bot(i) for i in ids))

        out = call(settings, all_bots)
    assert out.error is None, out.error
    assert len(out.value) == len(ids)
    assert out.stats.retries > 0
    assert out.stats.requests == len(ids) + out.stats.retries


def _rate_limited_service(rate: float, **faults: Any) -> Any:
    config = ServiceConfig(bots=20, seed=3, history_days=1, stats_per_day=1, max_page_size=100,
                           faults=Faults(rate_limit=rate, **faults))
    return serve_in_thread(config, host="127.0.0.1", port=0)


@pytest.mark.parametrize(("family", "told"), [
    ("ratelimit", 1.0),  # RateLimit-Reset: 1, no Retry-After
    ("ratelimit-policy", 1.0),  # RateLimit: "default";r=0;t=1
    ("x-reset-delta", 1.0),  # X-RateLimit-Reset: 1
])
def test_a_429_without_retry_after_waits_the_reset_its_headers_tell(family: str,
                                                                     told: float) -> None:
    # A bucket of one request refilled at 2 a second: the second request at once is a 429
    # whose headers tell the quota resets in a second (whole seconds, rounded up).
    with _rate_limited_service(2.0, rate_burst=1, rate_limit_headers=family) as svc:
        ids = sorted(svc.directory.bot_ids())[:3]

        async def some_bots(c: Client) -> list[Any]:
            return await asyncio.gather(*(c.bot(i) for i in ids))

        out = call(make_settings(svc.base_url, attempts=10), some_bots)
    assert out.error is None, out.error
    assert out.stats.rate_limited > 0
    # Each refused request waited exactly what it was told: no jittered backoff, no more.
    assert out.stats.waited_seconds == pytest.approx(told * out.stats.rate_limited)


# Each family of rate-limit headers on a 429, made from the time now, and the wait it tells:
# (least, most) seconds. Exact where the headers give seconds; a date or a Unix time names a
# moment, so the wait is what is left of it when the answer is read (the least leaves a second
# for a busy machine). The jittered backoff without them is at most 0.05 s (make_settings).
RATE_LIMIT_FAMILIES: dict[str, tuple[Callable[[float], dict[str, str]], float, float]] = {
    "Retry-After seconds": (lambda now: {"Retry-After": "1"}, 1.0, 1.0),
    "Retry-After HTTP-date": (
        lambda now: {"Retry-After": email.utils.formatdate(now + 2, usegmt=True)}, 0.5, 2.0),
    "X-RateLimit-Reset-After": (
        lambda now: {"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0",
                     "X-RateLimit-Reset-After": "0.25"}, 0.25, 0.25),
    "X-RateLimit-Reset Unix time": (
        lambda now: {"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0",
                     "X-RateLimit-Reset": str(int(now) + 2)}, 0.5, 2.0),
    "X-RateLimit-Reset Unix time in ms": (
        lambda now: {"X-RateLimit-Remaining": "0",
                     "X-RateLimit-Reset": str(int(now * 1000) + 1500)}, 0.5, 1.5),
    "X-RateLimit-Reset HTTP-date": (
        lambda now: {"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0",
                     "X-RateLimit-Reset": email.utils.formatdate(now + 2, usegmt=True)},
        0.5, 2.0),
    "X-RateLimit-Reset seconds": (
        lambda now: {"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0",
                     "X-RateLimit-Reset": "1"}, 1.0, 1.0),
    "RateLimit-Limit/-Remaining/-Reset": (
        lambda now: {"RateLimit-Limit": "5", "RateLimit-Remaining": "0", "RateLimit-Reset": "1"},
        1.0, 1.0),
    "RateLimit-Reset, remaining not told": (lambda now: {"RateLimit-Reset": "1"}, 1.0, 1.0),
    "RateLimit and RateLimit-Policy": (
        lambda now: {"RateLimit": '"default";r=0;t=1',
                     "RateLimit-Policy": '"default";q=5;w=1'}, 1.0, 1.0),
    "RateLimit, the older dictionary": (
        lambda now: {"RateLimit": "limit=5, remaining=0, reset=1"}, 1.0, 1.0),
}


@pytest.mark.parametrize("family", list(RATE_LIMIT_FAMILIES))
def test_a_429_waits_what_each_family_of_rate_limit_headers_tells(
        scripted: Callable[..., Scripted], family: str) -> None:
    headers, least, most = RATE_LIMIT_FAMILIES[family]
    server = scripted(Reply(status=429, body={"error": "slow down"}, headers=headers(time.time())),
                      Reply(body={"id": "b1"}))
    out = call(make_settings(server.base_url), lambda c: c.bot("b1"))
    assert out.error is None and out.value == {"id": "b1"}, out.error
    assert (out.stats.rate_limited, server.count("GET")) == (1, 2)
    # What the client waited is what the headers told, not its jittered backoff.
    assert least - 1e-6 <= out.stats.waited_seconds <= most + 1e-6, out.stats.waited_seconds


def test_a_403_that_says_its_quota_is_spent_is_a_rate_limit_waited_out(
        scripted: Callable[..., Scripted]) -> None:
    # GitHub's primary rate limit: 403, X-RateLimit-Remaining: 0 and the reset as a Unix time.
    spent = Reply(status=403, body={"message": "API rate limit exceeded"},
                  headers={"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0",
                           "X-RateLimit-Reset": str(int(time.time()) + 2)})
    server = scripted(spent, spent, Reply(body={"id": "b1"}))
    out = call(make_settings(server.base_url, attempts=2), lambda c: c.bot("b1"))
    assert out.error is None and out.value == {"id": "b1"}, out.error
    # Counted as rate limited, waited what the reset told, and the told waits spend no attempt.
    assert (out.stats.rate_limited, server.count("GET")) == (2, 3)
    assert 0.5 <= out.stats.waited_seconds <= 4.0 + 1e-6


def test_a_403_that_does_not_say_so_refuses_the_credentials_at_once(
        scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=403, body={"message": "Bad credentials"},
                            headers={"X-RateLimit-Remaining": "4999"}),
                      Reply(body={"id": "b1"}))
    out = call(make_settings(server.base_url), lambda c: c.bot("b1"))
    assert isinstance(out.error, AuthError) and not isinstance(out.error, RateLimited)
    assert (out.stats.rate_limited, server.count("GET")) == (0, 1)


@pytest.mark.clock
@pytest.mark.parametrize("family", ["x-reset-epoch-ms", "http-date", "github-403"])
def test_each_spelling_of_the_service_s_rate_limit_is_waited_out(family: str) -> None:
    # A bucket of one request refilled at 2 a second: requests at once are refused, and each
    # waits until the reset its headers tell (a Unix time in ms, an HTTP-date, GitHub's 403).
    with _rate_limited_service(2.0, rate_burst=1, rate_limit_headers=family) as svc:
        ids = sorted(svc.directory.bot_ids())[:3]

        async def some_bots(c: Client) -> list[Any]:
            return await asyncio.gather(*(c.bot(i) for i in ids))

        out = call(make_settings(svc.base_url, attempts=2), some_bots)
        refused = svc.app.state.faults.rejected
    assert out.error is None, out.error
    assert [b["id"] for b in out.value] == ids
    assert out.stats.rate_limited == refused > 0  # every refusal, 403s too, counted and retried
    assert out.stats.waited_seconds > 0  # waited what it was told, not at once


def test_answers_that_succeed_steer_the_pace_with_their_headers(
        scripted: Callable[..., Scripted]) -> None:
    # A policy of 1 a second is a ceiling from the first answer that states it; a remaining
    # quota down to its last request slows the pace before any 429.
    policy = scripted(Reply(body={"id": "b1"}, headers={"RateLimit-Policy": '"d";q=1;w=1'}))

    async def thrice(c: Client) -> tuple[float | None, float]:
        for _ in range(3):
            await c.bot("b1")
        return c.gate.pace.rate(time.monotonic()), c.stats.throttled_seconds

    out = call(make_settings(policy.base_url), thrice)
    assert out.value[0] == 1.0 and out.value[1] > 0  # the third request waited its turn
    quota = scripted(*(Reply(body={"id": "b1"}, headers={"RateLimit-Limit": "10",
                                                          "RateLimit-Remaining": str(left),
                                                          "RateLimit-Reset": "1"})
                       for left in (9, 8, 1)))

    async def three(c: Client) -> list[bool]:
        paced = []
        for _ in range(3):
            await c.bot("b1")
            paced.append(c.gate.pace.paced)
        return paced

    out = call(make_settings(quota.base_url), three)
    assert out.value == [False, False, True] and out.stats.rate_limited == 0


@pytest.mark.clock
def test_rate_limited_service_is_waited_out_with_retry_after() -> None:
    with _rate_limited_service(10.0) as svc:
        ids = sorted(svc.directory.bot_ids())

        async def all_bots(c: Client) -> list[Any]:
            return await asyncio.gather(*(c.bot(i) for i in ids))

        out = call(make_settings(svc.base_url, attempts=10), all_bots)
    assert out.error is None, out.error
    assert out.stats.rate_limited > 0
    assert out.stats.waited_seconds >= 1.0  # the service says Retry-After: 1 or more


@pytest.mark.clock
def test_a_budget_under_the_service_limit_avoids_429() -> None:
    with _rate_limited_service(10.0) as svc:
        ids = sorted(svc.directory.bot_ids())

        async def all_bots(c: Client) -> list[Any]:
            return await asyncio.gather(*(c.bot(i) for i in ids))

        out = call(make_settings(svc.base_url, request_budget=8.0), all_bots)
    assert out.error is None, out.error
    assert (out.stats.rate_limited, out.stats.retries, out.stats.requests) == (0, 0, len(ids))


# --- requests as sent -------------------------------------------------------------------------
def test_headers_per_endpoint_kind(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body={"id": 1}))
    settings = make_settings(server.base_url, user_token=USER_TOKEN, bot_key=BOT_KEY,
                             user_agent="botstats-test/1")
    call(settings, lambda c: c.me())
    call(settings, lambda c: c.bot(1))
    call(settings, lambda c: c.post_stat(1, {"users": 5, "guilds": 6}))
    me, bot, post = server.seen
    assert me.headers["authorization"] == f"Bearer {USER_TOKEN}"
    assert "authorization" not in bot.headers
    assert post.headers["authorization"] == BOT_KEY  # as-is, no scheme
    assert json.loads(post.body) == {"users": 5, "guilds": 6}
    assert {s.headers["user-agent"] for s in server.seen} == {"botstats-test/1"}


def test_path_parameters_are_one_segment(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body={}))
    call(make_settings(server.base_url), lambda c: c.bot("a/b c"))
    assert server.seen[0].path == "/bots/a%2Fb%20c"
    call(make_settings(server.base_url), lambda c: c.list_bots(limit=7, skip=14))
    assert server.seen[1].query == "limit=7&skip=14"


def test_unknown_fields_and_nesting_are_kept(scripted: Callable[..., Scripted]) -> None:
    records = [{"id": "1", "future_field": {"nested": [1, None, "x"]}, "name": None}]
    server = scripted(Reply(body=records))
    assert call(make_settings(server.base_url), lambda c: c.list_bots()).value == records


# --- error mapping ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "body", "error", "words"),
    [
        (400, {"error": "invalid payload", "details": {"users": "required"}}, BadRequest,
         ["400", "invalid payload", "users"]),
        (401, {"error": "bad token"}, AuthError, ["401", "BOTSTATS_USER_TOKEN"]),
        (403, {"error": "forbidden"}, AuthError, ["403", "--user-token"]),
        (404, {"error": "no such user"}, NotFound, ["404", "no such user"]),
        (429, {"error": "slow down"}, RateLimited, ["429", "request_budget", "3 attempts"]),
        (500, "<html>boom</html>", ServerError, ["500", "boom", "3 attempts"]),
        (502, "", ServerError, ["502", "try again later"]),
        (503, {"error": "maintenance"}, ServerError, ["503", "maintenance"]),
        (504, {"error": "gateway"}, ServerError, ["504"]),
        (418, {"error": "teapot"}, ApiError, ["418", "teapot"]),
        (301, "", ApiError, ["301", "--base-url"]),
    ],
)
def test_status_is_mapped_to_its_error(scripted: Callable[..., Scripted], status: int,
                                       body: Any, error: type[ApiError], words: list[str]) -> None:
    headers = {"Location": "http://elsewhere/?token=abc"} if status == 301 else {}
    server = scripted(Reply(status=status, body=body, headers=headers))
    settings = make_settings(server.base_url, user_token=USER_TOKEN)
    out = call(settings, lambda c: c.user("u1"))
    assert type(out.error) is error
    assert out.error.status == status
    assert_names_request(out.error, "GET", f"{server.base_url}/users/u1", USER_TOKEN)
    for word in words:
        assert word in str(out.error), (word, str(out.error))
    assert "abc" not in str(out.error)
    if error is BadRequest:
        assert out.error.details == {"users": "required"}


def test_secrets_echoed_by_the_service_are_redacted(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=401, body={"error": f"token {USER_TOKEN} revoked"}))
    out = call(make_settings(server.base_url, user_token=USER_TOKEN), lambda c: c.me())
    assert isinstance(out.error, AuthError)
    assert USER_TOKEN not in str(out.error) and USER_TOKEN not in (out.error.body or "")
    assert "***" in str(out.error)


def test_invalid_json_is_retried_then_a_bad_response_with_the_body(
        scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body='[{"id": 1}, {"id": 2'))
    out = call(make_settings(server.base_url, attempts=2), lambda c: c.list_bots())
    assert isinstance(out.error, BadResponse)
    assert out.error.body == '[{"id": 1}, {"id": 2'
    assert out.error.status == 200
    assert_names_request(out.error, "GET", f"{server.base_url}/bots?limit=100&skip=0")
    assert len(server.seen) == 2 and out.stats.bad_responses == 2


def test_truncated_json_then_good_json_succeeds(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body='{"id": '), Reply(body={"id": 3}))
    out = call(make_settings(server.base_url), lambda c: c.bot(3))
    assert out.value == {"id": 3} and out.stats.retries == 1


async def _stats_as_received(c: Client) -> Any:
    return (await c.list_whole("stats", "/bots/7/stats", raw=True)).items


def test_stats_as_received_are_the_records_exactly_as_sent(
        scripted: Callable[..., Scripted]) -> None:
    body = '[ {"id": "a", "v": 1.50},\n  {"id": "b", "nested": {"x": [true, null]}} ]'
    server = scripted(Reply(body=body))
    out = call(make_settings(server.base_url), _stats_as_received)
    assert isinstance(out.value, RawArray)
    assert out.value.body == body.encode()
    assert [bytes(i).decode() for i in out.value.items] == \
        ['{"id": "a", "v": 1.50}', '{"id": "b", "nested": {"x": [true, null]}}']


def test_stats_only_the_lenient_reader_takes_come_decoded(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body='[{"id": "a", "load": NaN}]'))
    out = call(make_settings(server.base_url), _stats_as_received)
    assert isinstance(out.value, list) and out.value[0]["id"] == "a"


def test_stats_as_received_are_retried_when_cut_then_refused(
        scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body='[{"id": "a"}, {"id'), Reply(body='[{"id": "a"}]'))
    out = call(make_settings(server.base_url), _stats_as_received)
    assert isinstance(out.value, RawArray) and out.stats.retries == 1
    server = scripted(Reply(body='{"not": "a list"}'))
    out = call(make_settings(server.base_url), _stats_as_received)
    assert isinstance(out.error, BadResponse) and "where a list was expected" in str(out.error)
    assert "--base-url" in str(out.error)  # no key of it holds a list


def test_a_listing_inside_an_object_names_the_setting_that_reads_it(
        scripted: Callable[..., Scripted]) -> None:
    body = {"results": [{"id": "1"}], "limit": 1, "offset": 0, "count": 1, "total": 7}
    server = scripted(Reply(body=body))
    out = call(make_settings(server.base_url), lambda c: c.list_bots())
    assert isinstance(out.error, BadResponse)
    message = str(out.error)
    assert "[service].bots_list_path = 'results'" in message
    assert "[service].total_path = 'total'" in message
    assert "--base-url" not in message  # the base URL was right


@pytest.mark.parametrize(("method", "body"), [("list_bots", {"bots": 1}), ("bot", [1, 2])])
def test_wrong_top_level_shape_is_a_bad_response(scripted: Callable[..., Scripted], method: str,
                                                 body: Any) -> None:
    server = scripted(Reply(body=body))
    args = () if method == "list_bots" else (1,)
    out = call(make_settings(server.base_url), lambda c: getattr(c, method)(*args))
    assert isinstance(out.error, BadResponse)
    assert "--base-url" in str(out.error)
    assert json.loads(out.error.body or "") == body
    assert len(server.seen) == 1  # a wrong shape is not transient


def test_bad_response_body_is_truncated_to_one_megabyte(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body="x" * 2_500_000))
    out = call(make_settings(server.base_url, attempts=1), lambda c: c.bot(1))
    assert isinstance(out.error, BadResponse)
    assert out.error.body == "x" * 1_000_000
    assert len(str(out.error)) < 1_000


# --- retries ----------------------------------------------------------------------------------
def test_retries_are_bounded_by_attempts(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=503, body={"error": "down"}))
    out = call(make_settings(server.base_url, attempts=3), lambda c: c.bot(1))
    assert isinstance(out.error, ServerError)
    assert len(server.seen) == 3
    assert (out.stats.requests, out.stats.retries, out.stats.server_errors) == (3, 2, 3)


def test_two_server_errors_then_success(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=503), Reply(status=502, body="bad gateway"),
                      Reply(body={"id": 1}))
    out = call(make_settings(server.base_url, attempts=3), lambda c: c.bot(1))
    assert out.value == {"id": 1}
    assert len(server.seen) == 3 and out.stats.retries == 2


@pytest.mark.parametrize("status", [400, 401, 404, 501])
def test_final_answers_are_not_retried(scripted: Callable[..., Scripted], status: int) -> None:
    server = scripted(Reply(status=status, body={"error": "no"}))
    call(make_settings(server.base_url, attempts=5, user_token="t"), lambda c: c.user(1))
    assert len(server.seen) == 1


@pytest.mark.clock
def test_retry_after_is_honoured_exactly(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=429, headers={"Retry-After": "2"}), Reply(body=[]))
    out = call(make_settings(server.base_url, attempts=3, backoff_base=0.01), lambda c: c.list_bots())
    assert out.value == []
    assert out.elapsed >= 2.0  # not shorter
    # ... and no jitter on top (the wait as planned, not as measured: a busy machine is slow).
    assert (out.stats.rate_limited, out.stats.retries, out.stats.waited_seconds) == (1, 1, 2.0)


@pytest.mark.clock
def test_retry_after_on_503_is_honoured(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=503, headers={"Retry-After": "1"}), Reply(body={}))
    out = call(make_settings(server.base_url), lambda c: c.bot(1))
    assert out.value == {} and out.elapsed >= 1.0 and out.stats.waited_seconds == 1.0


def test_retry_after_beyond_the_limit_gives_up_at_once(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=429, headers={"Retry-After": "3600"}))
    settings = make_settings(server.base_url, attempts=5)
    settings = replace(settings, retry=replace(settings.retry, max_retry_after=60))
    out = call(settings, lambda c: c.bot(1))
    assert isinstance(out.error, RateLimited) and out.error.retry_after == 3600
    assert "max_retry_after" in str(out.error) and "3600" in str(out.error)
    assert len(server.seen) == 1 and out.elapsed < 60  # not the hour it asked for


@pytest.mark.clock
def test_told_waits_do_not_spend_attempts_and_are_bounded_in_all(
        scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=429, headers={"Retry-After": "1"}))
    settings = make_settings(server.base_url, attempts=1)
    settings = replace(settings, retry=replace(settings.retry, max_retry_after=1))
    out = call(settings, lambda c: c.bot(1))
    # One try allowed, yet the wait it was told was waited out and the request sent again; the
    # second wait would have made 2 s in all, over the limit.
    assert isinstance(out.error, RateLimited)
    assert "1 s of waits it told already" in str(out.error)
    assert "max_retry_after" in str(out.error)
    assert len(server.seen) == 2 and out.stats.waited_seconds == 1.0


@pytest.mark.clock
def test_rate_limited_after_every_attempt(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=429, headers={"Retry-After": "0"}))
    out = call(make_settings(server.base_url, attempts=4), lambda c: c.bot(1))
    assert isinstance(out.error, RateLimited) and out.error.retry_after == 0
    assert len(server.seen) == 4 and out.stats.rate_limited == 4


def test_connection_refused_is_retried_then_unreachable() -> None:
    base_url = f"http://127.0.0.1:{free_port()}"
    out = call(make_settings(base_url, attempts=3), lambda c: c.list_bots())
    assert isinstance(out.error, Unreachable)
    assert isinstance(out.error.__cause__, httpx.ConnectError)
    assert_names_request(out.error, "GET", f"{base_url}/bots?limit=100&skip=0")
    assert "3 attempts" in str(out.error) and "--base-url" in str(out.error)
    assert (out.stats.requests, out.stats.transport_errors, out.stats.retries) == (3, 3, 2)


def test_read_timeout_is_retried_for_get(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body={}, delay=1.0))
    out = call(make_settings(server.base_url, attempts=2, timeout=0.2), lambda c: c.bot(1))
    assert isinstance(out.error, Unreachable)
    assert isinstance(out.error.__cause__, httpx.ReadTimeout)
    assert "[service].timeout" in str(out.error)
    assert len(server.seen) == 2


# --- fetch (botstats probe): the same retry path, the answer whatever its status ---------------
def test_fetch_retries_a_server_error_through_the_clients_one_retry_path(
        scripted: Callable[..., Scripted], caplog: pytest.LogCaptureFixture) -> None:
    server = scripted(Reply(status=503), Reply(status=502), Reply(body={"id": 1}))
    with caplog.at_level("INFO", logger="botstats.client"):
        out = call(make_settings(server.base_url, attempts=3), lambda c: c.fetch("GET", "/bots/1"))
    assert out.value.status == 200 and out.value.json() == {"id": 1}
    assert (out.stats.requests, out.stats.retries, out.stats.server_errors) == (3, 2, 2)
    # The retries are tenacity's, logged by the hook every read's retries go through...
    assert [r.getMessage().split(": ", 1)[1].split(";")[0] for r in caplog.records] == ["503", "502"]
    # ... and their backoff is jittered: not the fixed 0.02 + 0.04 s a loop of its own waited.
    assert 0 < out.stats.waited_seconds <= 0.02 + 0.04 and out.stats.waited_seconds != 0.06


def test_fetch_waits_what_a_429_tells_exactly_and_notes_it(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=429, headers={"Retry-After": "0", "X-Seen": "1"}),
                      Reply(body=[]))
    out = call(make_settings(server.base_url, attempts=3, backoff_base=1.0),
               lambda c: c.fetch("GET", "/bots"))
    # Retry-After: 0 waited as told, no jittered backoff of [retry] (a second here) on top.
    assert out.value.status == 200 and out.stats.waited_seconds == 0.0
    assert out.stats.rate_limited == 1 and len(server.seen) == 2
    assert [h["x-seen"] for h in out.value.limited] == ["1"]


def test_fetch_answers_the_last_status_when_the_attempts_run_out(
        scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=503, body={"error": "down"}))
    out = call(make_settings(server.base_url, attempts=3), lambda c: c.fetch("GET", "/bots/1"))
    assert out.error is None and out.value.status == 503 and len(server.seen) == 3
    assert out.value.json() == {"error": "down"} and out.value.limited == ()


def test_fetch_answers_a_429_asking_longer_than_the_limit_at_once(
        scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=429, headers={"Retry-After": "3600"}))
    settings = make_settings(server.base_url, attempts=5)
    settings = replace(settings, retry=replace(settings.retry, max_retry_after=60))
    out = call(settings, lambda c: c.fetch("GET", "/bots"))
    assert out.value.status == 429 and len(server.seen) == 1 and out.stats.waited_seconds == 0


@pytest.mark.parametrize(("method", "sent"), [("GET", 1), ("POST", 1)])
def test_fetch_sends_a_post_once_and_never_retries_a_final_status(
        scripted: Callable[..., Scripted], method: str, sent: int) -> None:
    server = scripted(Reply(status=500 if method == "POST" else 404), Reply(body={}))
    out = call(make_settings(server.base_url, attempts=3),
               lambda c: c.fetch(method, "/bots/1/stats", payload={} if method == "POST" else None))
    assert len(server.seen) == sent and out.value.status in (404, 500)


def test_fetch_raises_when_no_attempt_got_an_answer() -> None:
    base_url = f"http://127.0.0.1:{free_port()}"
    out = call(make_settings(base_url, attempts=2), lambda c: c.fetch("GET", "/bots"))
    assert isinstance(out.error, Unreachable) and isinstance(out.error.__cause__, httpx.ConnectError)
    assert "2 attempts" in str(out.error) and out.stats.requests == 2


# --- POST is not resent blindly -----------------------------------------------------------------
def test_post_is_not_resent_on_a_server_error(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=503, body={"error": "oops"}), Reply(status=201, body={}))
    settings = make_settings(server.base_url, attempts=5, bot_key=BOT_KEY)
    out = call(settings, lambda c: c.post_stat(1, {"users": 1, "guilds": 1}))
    assert isinstance(out.error, ServerError)
    assert "not resent" in str(out.error) and "bots stat" in str(out.error)
    assert server.count("POST") == 1


def test_post_is_not_resent_on_a_read_timeout(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=201, body={}, delay=1.0))
    settings = make_settings(server.base_url, attempts=5, timeout=0.2, bot_key=BOT_KEY)
    out = call(settings, lambda c: c.post_stat(1, {"users": 1, "guilds": 1}))
    assert isinstance(out.error, Unreachable) and "not resent" in str(out.error)
    assert server.count("POST") == 1


def test_post_is_retried_after_429(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=429, headers={"Retry-After": "0"}),
                      Reply(status=201, body={"id": "s1", "users": 1}))
    settings = make_settings(server.base_url, bot_key=BOT_KEY)
    out = call(settings, lambda c: c.post_stat(1, {"users": 1, "guilds": 1}))
    assert out.value == {"id": "s1", "users": 1}
    assert server.count("POST") == 2


def test_post_is_retried_when_it_never_connected() -> None:
    base_url = f"http://127.0.0.1:{free_port()}"
    settings = make_settings(base_url, attempts=3, bot_key=BOT_KEY)
    out = call(settings, lambda c: c.post_stat(1, {"users": 1, "guilds": 1}))
    assert isinstance(out.error, Unreachable)
    assert out.stats.requests == 3
    assert BOT_KEY not in str(out.error)


# --- request budget ---------------------------------------------------------------------------
@pytest.mark.clock
def test_request_budget_limits_the_rate_across_tasks(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(body={}))
    settings = make_settings(server.base_url, request_budget=5.0)

    async def ten(c: Client) -> list[Any]:
        return await asyncio.gather(*(c.bot(i) for i in range(10)))

    out = call(settings, ten)
    assert out.error is None and len(server.seen) == 10
    assert out.elapsed >= 1.6
    assert out.stats.throttled_seconds > 0


@pytest.mark.clock
def test_request_budget_applies_to_retries(scripted: Callable[..., Scripted]) -> None:
    server = scripted(Reply(status=500), Reply(status=500), Reply(status=500), Reply(body={}))
    settings = make_settings(server.base_url, attempts=4, request_budget=5.0)
    out = call(settings, lambda c: c.bot(1))
    assert out.value == {} and out.elapsed >= 0.55  # 4 attempts, one per 0.2 s


# --- proxies from the environment ---------------------------------------------------------------
class _ForwardProxy(http.server.BaseHTTPRequestHandler):
    """A forward HTTP proxy on loopback: relays each absolute-form GET and notes its target."""

    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path)
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(self.path) as upstream:
            answer_json(self, upstream.read(), upstream.status)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def forward_proxy() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Proxy", (_ForwardProxy,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_requests_go_through_the_proxy_the_environment_names(
        listing: Any, forward_proxy: tuple[str, list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, seen = forward_proxy
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    bot_id = sorted(listing.directory.bot_ids())[0]
    stats = call(make_settings(listing.base_url), lambda c: c.bot_stats(bot_id)).value
    assert stats == httpx.get(f"{listing.base_url}/bots/{bot_id}/stats", trust_env=False).json()
    assert seen == [f"{listing.base_url}/bots/{bot_id}/stats"]

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # exempt: straight to the service
    again = call(make_settings(listing.base_url), lambda c: c.bot_stats(bot_id)).value
    assert again == stats and len(seen) == 1


@pytest.mark.parametrize(
    ("env", "proxy"),
    [
        ({}, None),
        ({"HTTP_PROXY": "http://p:3128"}, "http://p:3128"),
        ({"https_proxy": "http://s:3128"}, None),  # the service is http://
        ({"ALL_PROXY": "http://a:1"}, "http://a:1"),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "svc.example"}, None),
        ({"HTTP_PROXY": "http://p:3128", "no_proxy": ".example"}, None),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "other.example"}, "http://p:3128"),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "*"}, None),
        ({"HTTP_PROXY": "p:3128"}, "http://p:3128"),
    ],
)
def test_env_proxy(env: dict[str, str], proxy: str | None) -> None:
    assert env_proxy("http://svc.example:8000/api", env) == proxy


# --- pure helpers -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("2", 2.0), (" 120 ", 120.0), ("0", 0.0), ("1.5", 1.5), ("-3", 0.0),
        ("Wed, 21 Oct 2015 07:28:30 GMT", 30.0), ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),
        ("soon", None), ("", None), (None, None),
    ],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    now = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)
    assert parse_retry_after(header, now=now) == seconds


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://h/bots?limit=1&skip=0", "http://h/bots?limit=1&skip=0"),
        ("http://h/x?token=abc&api_key=k&q=1", "http://h/x?token=***&api_key=***&q=1"),
        ("http://user:pw@h:8/x", "http://***@h:8/x"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


# --- compressed bodies: decompressed and checked whole ----------------------------------------------
def _compressed(encoding: str, data: bytes) -> bytes:
    import gzip
    import zlib

    if encoding == "gzip":
        return gzip.compress(data)
    if encoding == "deflate":
        return zlib.compress(data)
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)  # raw deflate, as some servers send it
    return packer.compress(data) + packer.flush()


PAGE = json.dumps([{"id": f"b{i}", "name": "x" * 50} for i in range(40)]).encode()


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw deflate"])
def test_a_compressed_body_is_read_whole(scripted: Any, encoding: str) -> None:
    header = "deflate" if encoding == "raw deflate" else encoding
    server = scripted(Reply(body=_compressed(encoding, PAGE), headers={"Content-Encoding": header}))
    out = call(make_settings(server.base_url), lambda c: c.list_bots(limit=40))
    assert out.error is None and out.value == json.loads(PAGE)


@pytest.mark.parametrize("spoil", ["cut", "corrupt", "empty"])
def test_a_compressed_body_cut_short_or_corrupt_is_retried_then_unreachable(
        scripted: Any, spoil: str) -> None:
    packed = _compressed("gzip", PAGE)
    body = {"cut": packed[: len(packed) // 2], "empty": b"",
            "corrupt": packed[:20] + b"\xff" * 40 + packed[60:]}[spoil]
    whole = Reply(body=packed, headers={"Content-Encoding": "gzip"})
    server = scripted(Reply(body=body, headers={"Content-Encoding": "gzip"}), whole)
    out = call(make_settings(server.base_url), lambda c: c.list_bots(limit=40))
    assert out.error is None and out.value == json.loads(PAGE)  # the retry got it whole
    assert out.stats.retries == 1

    server = scripted(Reply(body=body, headers={"Content-Encoding": "gzip"}))
    out = call(make_settings(server.base_url, attempts=2), lambda c: c.list_bots(limit=40))
    assert isinstance(out.error, Unreachable), out.error
    assert "compressed body that is cut short or corrupt" in str(out.error)
    assert server.count("GET") == 2
