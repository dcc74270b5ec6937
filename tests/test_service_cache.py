"""The service's cheap paths: memoised /stats and /stat bodies, orjson encoding, httptools.

The memo must never be seen: every change to a bot's records (the clock, a post, churn, a
fault setting) shows on the very next request, and bodies are the ones the service sent
before it had a memo (Starlette's stdlib-json encoding)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from pipeline.service import Directory, RunningService, ServiceConfig, create_app
from pipeline.service._json import JSONResponse, dumps
from pipeline.service._server import _http_protocol, _uvicorn_config
from pipeline.service.directory import _stats as directory_module
from pipeline.service.directory._stats import _Memo

END = datetime(2024, 6, 1, tzinfo=UTC)


def stdlib_body(content: Any) -> bytes:
    """What Starlette's own JSONResponse sends."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode("utf-8")


def client_for(svc: RunningService) -> httpx.Client:
    return httpx.Client(base_url=svc.base_url, timeout=10)


@pytest.fixture
def http(service: RunningService) -> Iterator[httpx.Client]:
    with client_for(service) as client:
        yield client


def warm(http: httpx.Client, bot_id: str) -> None:
    assert http.get(f"/bots/{bot_id}/stats").status_code == 200
    http.get(f"/bots/{bot_id}/stat")


def assert_served(http: httpx.Client, directory: Directory, bot_id: str) -> list[dict[str, Any]]:
    """/stats and /stat answer exactly the ground truth, byte for byte as before the memo."""
    truth = directory.stats(bot_id)
    response = http.get(f"/bots/{bot_id}/stats")
    assert response.status_code == 200
    assert response.content == stdlib_body(truth)
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.content)
    last = http.get(f"/bots/{bot_id}/stat")
    if truth:
        assert last.status_code == 200 and last.content == stdlib_body(truth[-1])
        assert last.headers["content-type"] == "application/json"
    else:
        assert last.status_code == 404
    return truth


# --- the memo never shows ------------------------------------------------------------------
def test_repeated_requests_serve_the_same_bytes_as_without_a_memo(
        service: RunningService, http: httpx.Client) -> None:
    for bot_id in service.directory.bot_ids()[:10]:
        first = assert_served(http, service.directory, bot_id)
        assert assert_served(http, service.directory, bot_id) == first


def test_advance_shows_on_the_next_request(service: RunningService, http: httpx.Client) -> None:
    directory = service.directory
    bot_id = directory.bot_ids()[0]
    before = assert_served(http, directory, bot_id)
    directory.advance(3)
    after = assert_served(http, directory, bot_id)
    assert len(after) == len(before) + 3 and after[:len(before)] == before
    assert http.post("/_admin/advance", params={"intervals": 2}).status_code == 200
    assert len(assert_served(http, directory, bot_id)) == len(before) + 5


def test_each_post_shows_on_the_next_request(service: RunningService, http: httpx.Client) -> None:
    directory = service.directory
    bot_id = directory.bot_ids()[1]
    headers = {"Authorization": directory.bot_key(bot_id)}
    before = assert_served(http, directory, bot_id)
    for n in range(1, 4):  # several posts in the same interval of the clock
        created = http.post(f"/bots/{bot_id}/stats", headers=headers,
                            json={"users": n, "guilds": n}).json()
        served = assert_served(http, directory, bot_id)
        assert served[-1] == created and len(served) == len(before) + n
        assert http.get(f"/bots/{bot_id}/stat").json() == created


def test_churn_shows_on_the_next_request(service: RunningService, http: httpx.Client) -> None:
    directory = service.directory
    for bot_id in directory.bot_ids():
        warm(http, bot_id)
    changes = http.post("/_admin/churn", params={"times": 3}).json()
    for removed in changes["removed"]:
        if removed in changes["added"]:
            continue
        assert http.get(f"/bots/{removed}/stats").status_code == 404
        assert http.get(f"/bots/{removed}/stat").status_code == 404
    added = [a for a in changes["added"] if a not in changes["removed"]]
    for bot_id in added:
        assert assert_served(http, directory, bot_id) == []  # created after the newest slot
    directory.advance(1)
    for bot_id in added:
        assert len(assert_served(http, directory, bot_id)) == 1
    for bot_id in directory.bot_ids():
        assert_served(http, directory, bot_id)


def test_the_live_clock_shows_on_the_next_request(service_factory: Any) -> None:
    svc = service_factory(bots=3, history_days=1, live_interval=0.2)
    bot_id = svc.directory.bot_ids()[0]
    with client_for(svc) as http:
        first = http.get(f"/bots/{bot_id}/stats").json()
        deadline = time.monotonic() + 10
        latest = first
        while len(latest) == len(first) and time.monotonic() < deadline:
            time.sleep(0.05)
            latest = http.get(f"/bots/{bot_id}/stats").json()
    assert len(latest) > len(first) and latest[:len(first)] == first


def test_faulty_records_are_served_as_before_on_every_request(service_factory: Any) -> None:
    svc = service_factory(bots=20, history_days=5, seed=3, malformed_rate=0.2, bad_json_rate=0.3)
    directory = svc.directory
    bad = directory.bad_json_bots()
    assert bad and any(directory.malformed_stats(b) for b in directory.bot_ids())
    with client_for(svc) as http:
        for _ in range(2):
            for bot_id in directory.bot_ids():
                if bot_id not in bad:
                    assert_served(http, directory, bot_id)
                    continue
                text = json.dumps(directory.stats(bot_id), separators=(",", ":"))
                assert http.get(f"/bots/{bot_id}/stats").text == text[:len(text) // 2]
                assert http.get(f"/bots/{bot_id}/stat").json() == directory.stats(bot_id)[-1]


def test_a_replaced_served_stats_sees_every_answer(service: RunningService,
                                                   http: httpx.Client) -> None:
    """Tests count the answers the service builds by wrapping ``served_stats``: a memo would
    hide the repeats, so a replaced ``served_stats`` is never memoised."""
    directory = service.directory
    served = directory.served_stats
    calls: list[int] = []

    def counting(index: int) -> list[dict[str, Any]]:
        calls.append(index)
        return served(index)

    directory.served_stats = counting  # type: ignore[method-assign]
    bot_id = directory.bot_ids()[0]
    for _ in range(3):
        assert http.get(f"/bots/{bot_id}/stats").json() == served(directory.live_index(bot_id))
        http.get(f"/bots/{bot_id}/stat")
    assert len(calls) == 6


# --- bounded memory ---------------------------------------------------------------------
def test_the_memo_holds_a_bounded_number_of_bots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(directory_module, "RENDERED_STATS_MAX_BOTS", 4)
    app = create_app(ServiceConfig(bots=20, history_days=3, end=END))
    directory: Directory = app.state.directory

    def render(d: Directory, index: int, records: list[dict[str, Any]]) -> tuple[bytes, int]:
        return dumps(records), len(dumps(records))

    for index in range(20):
        assert directory.rendered_stats(index, render) == dumps(directory.served_stats(index))
    assert len(directory._rendered) == 4


def test_memo_evicts_least_recently_used_and_by_bytes() -> None:
    memo = _Memo(max_entries=3, max_bytes=800)
    for key in range(3):
        memo.put(key, "v", f"value {key}", 100)
    assert memo.get(0, "v") == "value 0"  # 0 is now the most recent
    memo.put(3, "v", "value 3", 100)
    assert memo.get(1, "v") is _Memo.MISSING and memo.get(0, "v") == "value 0"
    assert memo.get(0, "other version") is _Memo.MISSING
    memo.put(4, "v", "too big", 101)  # more than an eighth of the byte budget: not kept
    assert memo.get(4, "v") is _Memo.MISSING and len(memo) == 3
    memo.put(0, "v2", "bigger", 100)
    memo.put(5, "v", "x", 100)
    memo.put(6, "v", "y", 100)
    assert len(memo) == 3 and memo.bytes == 300
    big = _Memo(max_entries=100, max_bytes=800)
    for key in range(20):
        big.put(key, "v", key, 100)
    assert len(big) == 8 and big.bytes == 800 and big.get(19, "v") == 19


# --- orjson encodes as the stdlib did ----------------------------------------------------
@pytest.mark.parametrize("content", [
    [], {}, None, True, 0, -1, 2**63 - 1, -(2**63), 1.5, 41.5, 0.1, 1e-7, 1e16, 123456789.123,
    "plain", "naïve ☃ 日本語 🤖", 'quotes " and \\ and \n\t\x00 \x1f \u2028',
    {"error": "unknown bot", "details": {"bot_id": "1"}},
    [{"name": "region", "value": "eu-west"}, {"name": "voice_enabled", "value": False}],
])
def test_dumps_parses_to_what_the_stdlib_wrote(content: Any) -> None:
    assert json.loads(dumps(content)) == json.loads(stdlib_body(content))
    if not isinstance(content, float) or 1e-4 <= abs(content) < 1e16:
        assert dumps(content) == stdlib_body(content)


def test_dumps_falls_back_to_the_stdlib_for_what_orjson_refuses() -> None:
    huge = {"value": 2**70, "negative": -(2**80)}
    assert dumps(huge) == stdlib_body(huge)
    assert dumps({1: "int key"}) == stdlib_body({1: "int key"})
    with pytest.raises(UnicodeEncodeError):
        dumps("\ud800")  # a lone surrogate: the stdlib body cannot be encoded either
    with pytest.raises(TypeError):
        dumps(datetime(2024, 1, 1))  # not JSON for the stdlib: not for us either


def test_json_response_is_starlettes_with_the_same_headers() -> None:
    response = JSONResponse({"a": "é"}, status_code=429, headers={"Retry-After": "1"})
    assert response.body == stdlib_body({"a": "é"})
    assert response.headers["content-type"] == "application/json"
    assert response.headers["content-length"] == str(len(response.body))
    assert response.headers["retry-after"] == "1"


def test_posted_values_orjson_cannot_encode_are_served_as_before(
        service: RunningService, http: httpx.Client) -> None:
    directory = service.directory
    bot_id = directory.bot_ids()[2]
    payload = {"users": 1, "guilds": 1,
               "custom": [{"name": "big", "value": 2**70}, {"name": "ünï", "value": "☃"}]}
    response = http.post(f"/bots/{bot_id}/stats", headers={"Authorization": directory.bot_key(bot_id)},
                         json=payload)
    assert response.status_code == 201
    assert response.content == stdlib_body(directory.stats(bot_id)[-1])
    assert response.json()["custom"] == payload["custom"]
    assert assert_served(http, directory, bot_id)[-1]["custom"] == payload["custom"]


# --- httptools --------------------------------------------------------------------------
def test_uvicorn_parses_http_with_httptools_when_it_is_installed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("httptools")
    assert _http_protocol() == "httptools"
    assert _uvicorn_config(object(), access_log=False, own_logging=False).http == "httptools"
    monkeypatch.setitem(sys.modules, "httptools", None)  # as if it were not installed
    assert _http_protocol() == "h11"
    assert _uvicorn_config(object(), access_log=False, own_logging=False).http == "h11"


# --- the newest records of a bot cost what is new ---------------------------------------------
def assert_pages_served(http: httpx.Client, directory: Directory, bot_id: str,
                        page: int) -> list[dict[str, Any]]:
    """Every page of a paged /stats, from the head, the middle and the end, and /stat, answer
    exactly the ground truth, byte for byte."""
    truth = directory.stats(bot_id)
    n = len(truth)
    for skip in sorted({0, max(0, n // 2), max(0, n - page - 3), max(0, n - 8), max(0, n - 1),
                        n, n + 5}):
        response = http.get(f"/bots/{bot_id}/stats", params={"limit": page, "skip": skip})
        assert response.status_code == 200
        assert response.content == stdlib_body(truth[skip:skip + page]), (bot_id, skip)
    last = http.get(f"/bots/{bot_id}/stat")
    assert (last.status_code, last.content) == ((200, stdlib_body(truth[-1])) if truth
                                                else (404, last.content))
    return truth


def test_pages_near_the_end_and_the_newest_record_follow_every_change(
        service_factory: Any) -> None:
    svc = service_factory(bots=12, history_days=20, stats_per_day=2, stats_page_size=10,
                          malformed_rate=0.2, churn_every=0, field_names={"stat_time": "created_at",
                                                      "custom_name": "key"})
    directory = svc.directory
    assert any(directory.malformed_stats(b) for b in directory.bot_ids())
    with client_for(svc) as http:
        assert http.post("/_admin/warm").json()["warmed"] == 12
        for step in range(3):
            for bot_id in directory.bot_ids():
                assert_pages_served(http, directory, bot_id, 10)
            directory.advance(step * 20 + 1)  # one record, then more than a tail holds
        bot_id = directory.bot_ids()[0]
        created = http.post(f"/bots/{bot_id}/stats", headers={
            "Authorization": directory.bot_key(bot_id)}, json={"users": 5, "guilds": 5}).json()
        assert assert_pages_served(http, directory, bot_id, 10)[-1] == created
        changes = http.post("/_admin/churn", params={"times": 2}).json()
        directory.advance(1)
        for bot_id in directory.bot_ids():
            assert_pages_served(http, directory, bot_id, 10)
        for removed in set(changes["removed"]) - set(changes["added"]):
            assert http.get(f"/bots/{removed}/stat").status_code == 404


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many records each generation of a bot's series makes (appended as it happens)."""
    from pipeline.service import _data

    counts: list[int] = []
    until = _data.Series.until

    def counting(self: _data.Series, last: int) -> list[dict[str, Any]]:
        records = until(self, last)
        counts.append(len(records))
        return records

    monkeypatch.setattr(_data.Series, "until", counting)
    return counts


def test_a_warm_service_makes_only_the_new_records_of_an_hourly_read(
        service_factory: Any, made: list[int]) -> None:
    svc = service_factory(bots=20, history_days=200, stats_page_size=50)
    directory = svc.directory
    total = sum(len(directory.stats(b)) for b in directory.bot_ids())
    made.clear()  # the ground truth above made every history once; the service starts now
    with client_for(svc) as http:
        http.post("/_admin/warm")
        assert sum(made) == total  # the first pass makes every history once
        made.clear()
        directory.advance(1)
        for bot_id in directory.bot_ids():
            n = len(directory.stats(bot_id))  # the ground truth makes the whole list
            made.clear()
            assert http.get(f"/bots/{bot_id}/stat").status_code == 200
            page = http.get(f"/bots/{bot_id}/stats", params={"limit": 50, "skip": n - 8}).json()
            assert len(page) == 8
            assert sum(made) <= 1, made  # the new record only, not the whole history


def test_a_warm_newest_first_service_serves_its_first_page_from_the_tail(
        service_factory: Any, made: list[int]) -> None:
    """Newest first, an hourly read asks the first page (a whole page of the newest records):
    an indexed service answers it without its history, and so does a warm embedded one."""
    svc = service_factory(bots=10, history_days=200, stats_page_size=50, stats_order="newest")
    directory = svc.directory
    with client_for(svc) as http:
        http.post("/_admin/warm")
        directory.advance(1)
        for bot_id in directory.bot_ids():
            newest = directory.stats(bot_id)[::-1][:50]  # the ground truth makes the whole list
            made.clear()
            page = http.get(f"/bots/{bot_id}/stats", params={"limit": 50, "skip": 0}).json()
            assert page == newest
            assert sum(made) <= 1, made  # the new record only, not the whole history


def test_the_tails_hold_a_bounded_number_of_bytes_and_keep_the_bots_that_fit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    budget = 5 * directory_module._Tail.BASE
    monkeypatch.setattr(directory_module, "STATS_TAIL_MAX_BYTES", budget)
    directory: Directory = create_app(ServiceConfig(bots=20, history_days=3, end=END)).state.directory
    assert directory.warm() == 20
    kept = set(directory._tails)
    assert 0 < len(kept) < 20
    assert directory._tail_bytes == sum(t.size for t in directory._tails.values()) <= budget
    for tail in directory._tails.values():  # records kept at their size, not an encoder's buffer
        assert all(sys.getsizeof(item) < len(item) + 64 for item in tail.items)
    directory.advance(1)
    for _ in range(2):  # reads in listing order: the bots that fit keep theirs (no LRU cycling)
        for index in range(20):  # and a bot without a tail is served the same
            page = directory.stats_tail(index, -3, 3)
            assert [json.loads(item) for item in page or []] == directory.served_stats(index)[-3:]
        assert set(directory._tails) == kept
