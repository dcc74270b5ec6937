"""The embedded service plays the list conventions of issue 32 (docs/service.md, "List
conventions"): each paging family, with and without a list envelope and X-Total-Count, on every
list endpoint that pages; a 400 above the cap; bots that post one record per shard; the new
rate-limit spellings.

Each list is read through the real service on loopback with plain httpx, by a reference walker
that follows only what its family says, and compared with the directory's ground truth."""

from __future__ import annotations

import base64
import email.utils
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.service import Faults, InvalidSetting, RunningService, ServiceConfig

Factory = Callable[..., RunningService]
END = datetime(2024, 6, 1, tzinfo=UTC)
# A small directory whose lists take a few pages each: 20 bots in pages of 5 (the listing ends
# on a full page), 9 days of records in pages of 4 (half the bots post one record per shard: 18
# records; both end on a short page), and a user's lists in pages of 2.
BASE: dict[str, Any] = {"bots": 20, "users": 3, "history_days": 9, "end": END,
                        "max_page_size": 5, "stats_page_size": 4, "user_lists_page_size": 2,
                        "repeated_times": 0.5}
# Each family's own parameters: (page size, where the page starts).
FAMILY_PARAMS = {"skip": ("limit", "skip"), "offset": ("limit", "offset"),
                 "page": ("per_page", "page"), "link": ("per_page", "page"),
                 "next-url": ("limit", "after"), "cursor": ("limit", "cursor")}
TOKEN_FAMILIES = ("next-url", "cursor")
# How a list answer is shaped: (list_envelope, total_header).
SHAPES = {"array": ("", False), "array+total": ("", True), "results+total": ("results", True),
          "data": ("data", False)}
CASES = [(family, shape) for family in FAMILY_PARAMS for shape, (key, _) in SHAPES.items()
         if key or family not in TOKEN_FAMILIES]
ENDPOINTS = ("bots", "stats-oldest", "stats-newest", "user-lists")
# Every family's parameters, for a family to ignore the others'.
FOREIGN = {"limit": "3", "skip": "7", "offset": "7", "page": "3", "per_page": "3",
           "cursor": "not-a-cursor", "after": "not-a-token"}
SPLIT = ("guilds", "users", "commands_executed")


def client_for(svc: RunningService) -> httpx.Client:
    return httpx.Client(base_url=svc.base_url, timeout=10)


def token(position: int) -> str:
    """A cursor or ``after`` as the docs say the service spells it."""
    return base64.urlsafe_b64encode(str(position).encode()).decode().rstrip("=")


def items_of(answer: httpx.Response, key: str) -> list[Any]:
    body = answer.json()
    return body[key] if key else body


# --- the reference walker --------------------------------------------------------------------
def walk(http: httpx.Client, path: str, family: str, key: str, size: int,
         headers: dict[str, str]) -> list[httpx.Response]:
    """Every answer a client of ``family`` reads, in pages of ``size``, to have the whole list
    at ``path``: offsets and page numbers until an empty page (a short page may not be the last
    one), the ``next`` link, the ``next`` URL or the cursor until there is none. The first
    request carries a parameter of no family (``sort``), which links and next URLs keep."""
    size_param, start_param = FAMILY_PARAMS[family]
    url = path
    params: dict[str, Any] | None = {size_param: size, "sort": "name"}
    answers: list[httpx.Response] = []
    while len(answers) < 50:
        answer = http.get(url, params=params, headers=headers)
        assert answer.status_code == 200, answer.text
        answers.append(answer)
        page = items_of(answer, key)
        if family in ("skip", "offset", "page"):
            assert params is not None
            if not page:
                break
            params[start_param] = params.get(start_param, 1 if family == "page" else 0) + (
                1 if family == "page" else len(page))
        elif family == "link":
            if "next" not in answer.links:
                break
            url, params = answer.links["next"]["url"], None
        elif family == "next-url":
            if answer.json()["next"] is None:
                break
            url, params = answer.json()["next"], None
        else:
            assert params is not None
            if not answer.json()["has_more"]:
                break
            params["cursor"] = answer.json()["next_cursor"]
    return answers


def check_walk(answers: list[httpx.Response], truth: list[Any], *, family: str, key: str,
               total_header: bool, size: int, url: str) -> None:
    """What the answers of a walk must say: the whole list, each item once, in order; the right
    number of requests; and on each answer the total, the count and the family's keys, links,
    next URL and cursor."""
    read = [item for answer in answers for item in items_of(answer, key)]
    assert read == truth
    total, pages = len(truth), math.ceil(len(truth) / size)
    # Offsets and page numbers end on an empty page; the others say which page is the last.
    assert len(answers) == (pages + 1 if family in ("skip", "offset", "page") else max(1, pages))
    position = 0
    for n, answer in enumerate(answers):
        count, last = len(items_of(answer, key)), n == len(answers) - 1
        assert answer.headers.get("X-Total-Count") == (str(total) if total_header else None)
        following = None if last else position + count
        if key:
            keys = {"skip": {"limit": size, "offset": position},
                    "offset": {"limit": size, "offset": position},
                    "page": {"page": n + 1, "per_page": size},
                    "link": {"page": n + 1, "per_page": size},
                    "cursor": {"next_cursor": None if last else token(position + count),
                               "has_more": not last}}.get(family, {})
            body = answer.json()
            if family == "next-url":
                keys = {"next": body["next"]}
                assert (body["next"] is None) == last
                if following is not None:
                    check_url(body["next"], url, {"limit": str(size), "sort": "name",
                                                  "after": token(following)})
            assert body == {key: items_of(answer, key), "total": total, "count": count, **keys}
        if family == "link":
            links = answer.links
            assert set(links) == {"last", "first"} | ({"prev"} if n else set()) | (
                set() if last else {"next"})
            pages_named = {"first": 1, "last": max(1, pages), "prev": n, "next": n + 2}
            for rel, link in links.items():
                check_url(link["url"], url, {"per_page": str(size), "sort": "name",
                                             "page": str(pages_named[rel])})
        else:
            assert "Link" not in answer.headers
        position += count


def check_url(given: str, url: str, params: dict[str, str]) -> None:
    """``given`` is an absolute URL of ``url`` with exactly ``params`` (in any order)."""
    parsed = httpx.URL(given)
    assert str(parsed.copy_with(query=None)) == url
    assert dict(parsed.params) == params and len(parsed.params) == len(params)


def lists_of(svc: RunningService, endpoint: str,
             ) -> list[tuple[str, int, list[Any], dict[str, str]]]:
    """The lists ``endpoint`` stands for: (path, page size, the whole list, headers)."""
    d = svc.directory
    if endpoint == "bots":
        return [("/bots", 5, d.listing(), {})]
    if endpoint.startswith("stats"):
        shards = [bot for bot in d.bot_ids() if "shard_id" in d.stats(bot)[0]]
        single = [bot for bot in d.bot_ids() if "shard_id" not in d.stats(bot)[0]]
        newest = d.config.stats_order == "newest"
        return [(f"/bots/{bot}/stats", 4, d.stats(bot)[::-1] if newest else d.stats(bot), {})
                for bot in (shards[0], single[0])]
    user_id, token_ = max(d.user_tokens().items(),
                          key=lambda item: len(d.user_servers(d.user_index(item[0]))))
    user = d.user_index(user_id)
    assert user is not None
    auth = {"Authorization": f"Bearer {token_}"}
    return [(f"/users/@me/{what}", 2, truth, auth) for what, truth in (
        ("bots", d.user_bots(user)), ("servers", d.user_servers(user)),
        ("webhooks", d.user_webhooks(user)))]


# --- every family, every answer shape, every list that pages ---------------------------------
@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize(("family", "shape"), CASES)
def test_each_family_reads_every_item_of_every_list_exactly_once(
        service_factory: Factory, family: str, shape: str, endpoint: str) -> None:
    key, total_header = SHAPES[shape]
    svc = service_factory(**BASE, paging=family, list_envelope=key, total_header=total_header,
                          stats_order="newest" if endpoint == "stats-newest" else "oldest")
    with client_for(svc) as http:
        for path, size, truth, headers in lists_of(svc, endpoint):
            assert len(truth) > size, path  # more than one page
            answers = walk(http, path, family, key, size, headers)
            check_walk(answers, truth, family=family, key=key, total_header=total_header,
                       size=size, url=svc.base_url + path)


@pytest.mark.parametrize(("cut", "every"), [(0.5, 0), (0.0, 4)])
def test_the_total_of_the_listing_is_the_listing_as_served_under_its_faults(
        service_factory: Factory, cut: float, every: int) -> None:
    svc = service_factory(**BASE, paging="cursor", list_envelope="bots", total_header=True,
                          listing_cut=cut, duplicate_every=every)
    served = [bot for skip in range(0, 40, 5) for bot in svc.directory.served_page(skip, 5)]
    assert len(served) == (10 if cut else 25)
    with client_for(svc) as http:
        answers = walk(http, "/bots", "cursor", "bots", 5, {})
    check_walk(answers, served, family="cursor", key="bots", total_header=True, size=5,
               url=svc.base_url + "/bots")


def test_the_families_are_the_services() -> None:
    from pipeline.service._config import PAGINGS

    assert tuple(FAMILY_PARAMS) == PAGINGS


@pytest.mark.parametrize("family", list(FAMILY_PARAMS))
@pytest.mark.parametrize("endpoint", ["bots", "stats-oldest"])
def test_a_family_ignores_the_other_families_parameters(service_factory: Factory, family: str,
                                                        endpoint: str) -> None:
    svc = service_factory(**BASE, paging=family, list_envelope="results")
    path, size, truth, _ = lists_of(svc, endpoint)[0]
    foreign = {name: value for name, value in FOREIGN.items()
               if name not in FAMILY_PARAMS[family]}
    with client_for(svc) as http:
        plain, noisy = http.get(path), http.get(path, params=foreign)
    assert noisy.status_code == 200, noisy.text
    # The first page again, in the default size; only a next URL keeps the parameters it was given.
    assert noisy.json()["results"] == plain.json()["results"] == truth[:size]
    assert {k: v for k, v in noisy.json().items() if k != "next"} == {
        k: v for k, v in plain.json().items() if k != "next"}


def test_the_default_convention_answers_bare_arrays_with_nothing_beside(
        service_factory: Factory) -> None:
    svc = service_factory(**BASE)
    d = svc.directory
    bot = d.bot_ids()[0]
    with client_for(svc) as http:
        answers = [http.get("/bots", params={"limit": 5, "skip": 5}),
                   http.get(f"/bots/{bot}/stats", params={"limit": 4, "skip": 4})]
    assert answers[0].json() == d.listing()[5:10]
    assert answers[1].json() == d.stats(bot)[4:8]
    for answer in answers:
        assert "X-Total-Count" not in answer.headers and "Link" not in answer.headers


# --- whole lists, tokens, bad asks -------------------------------------------------------------
@pytest.mark.parametrize("paging", ["skip", "link", "cursor"])
def test_a_list_that_does_not_page_is_answered_whole_in_the_envelope(
        service_factory: Factory, paging: str) -> None:
    svc = service_factory(**{**BASE, "stats_page_size": 0, "user_lists_page_size": 0},
                          paging=paging, list_envelope="items", total_header=True)
    d = svc.directory
    bot = d.bot_ids()[0]
    user_id, user_token = next(iter(d.user_tokens().items()))
    user = d.user_index(user_id)
    assert user is not None
    auth = {"Authorization": f"Bearer {user_token}"}
    with client_for(svc) as http:
        stats = http.get(f"/bots/{bot}/stats", params={"limit": 2, "per_page": 2})
        bots = http.get("/users/@me/bots", headers=auth)
        newest, one = http.get(f"/bots/{bot}/stat"), http.get(f"/bots/{bot}")
    for answer, truth in ((stats, d.stats(bot)), (bots, d.user_bots(user))):
        assert answer.json() == {"items": truth, "total": len(truth), "count": len(truth)}
        assert answer.headers["X-Total-Count"] == str(len(truth))
        assert "Link" not in answer.headers
    # A record is not a list: neither wrapped nor counted.
    assert newest.json() == d.stats(bot)[-1] and one.json() == d.bot(bot)
    assert "X-Total-Count" not in newest.headers and "X-Total-Count" not in one.headers


def test_a_bad_json_bot_is_cut_in_half_inside_its_envelope_too(service_factory: Factory) -> None:
    svc = service_factory(bots=2, history_days=3, list_envelope="results", total_header=True,
                          bad_json_rate=1.0)
    bot = svc.directory.bot_ids()[0]
    with client_for(svc) as http:
        answer = http.get(f"/bots/{bot}/stats")
    assert answer.status_code == 200 and answer.text.startswith('{"results":[')
    assert answer.headers["X-Total-Count"] == "3"
    with pytest.raises(ValueError):
        answer.json()


@pytest.mark.parametrize(("paging", "params", "words"), [
    ("page", {"page": "0"}, "query parameter 'page' must be at least 1"),
    ("link", {"per_page": "0"}, "query parameter 'per_page' must be at least 1"),
    ("offset", {"offset": "-1"}, "query parameter 'offset' must be a non-negative integer"),
    ("cursor", {"cursor": "not-a-cursor"}, "query parameter 'cursor' is not one this service gave"),
    ("cursor", {"cursor": token(20) + "="}, "query parameter 'cursor' is not one this service gave"),
    ("next-url", {"after": "MQ!"}, "query parameter 'after' is not one this service gave"),
])
def test_a_bad_ask_in_a_family_is_a_400_naming_the_parameter(
        service_factory: Factory, paging: str, params: dict[str, str], words: str) -> None:
    svc = service_factory(**BASE, paging=paging, list_envelope="results")
    with client_for(svc) as http:
        answer = http.get("/bots", params=params)
    assert answer.status_code == 400 and answer.json()["error"] == words


def test_a_cursor_is_the_position_and_one_past_the_end_reads_nothing(
        service_factory: Factory) -> None:
    svc = service_factory(**BASE, paging="cursor", list_envelope="results")
    listing = svc.directory.listing()
    with client_for(svc) as http:
        middle = http.get("/bots", params={"limit": 3, "cursor": token(7)}).json()
        past = http.get("/bots", params={"cursor": token(500)}).json()
    assert middle == {"results": listing[7:10], "total": 20, "count": 3,
                      "next_cursor": token(10), "has_more": True}
    assert past == {"results": [], "total": 20, "count": 0, "next_cursor": None,
                    "has_more": False}


# --- the cap -----------------------------------------------------------------------------------
@pytest.mark.parametrize("over_cap", ["cap", "400"])
@pytest.mark.parametrize("family", list(FAMILY_PARAMS))
@pytest.mark.parametrize("endpoint", ["bots", "stats-oldest", "user-lists"])
def test_a_page_size_above_the_cap_is_capped_or_a_400_naming_the_cap(
        service_factory: Factory, over_cap: str, family: str, endpoint: str) -> None:
    svc = service_factory(**BASE, paging=family, list_envelope="results", over_cap=over_cap)
    path, cap, truth, headers = lists_of(svc, endpoint)[0]
    size = FAMILY_PARAMS[family][0]
    with client_for(svc) as http:
        above = http.get(path, params={size: cap + 1}, headers=headers)
        at = http.get(path, params={size: cap}, headers=headers)
        default = http.get(path, headers=headers)  # GET /bots' default 20 is above its cap 5
    for answer in ((at, default) if over_cap == "400" else (above, at, default)):
        assert answer.status_code == 200 and answer.json()["results"] == truth[:cap]
    if over_cap == "400":
        assert above.status_code == 400
        assert above.json() == {"error": f"{size} must be at most {cap}",
                                "details": {size: cap + 1, "max": cap}}


def test_the_400_above_the_cap_speaks_the_services_error_style(service_factory: Factory) -> None:
    svc = service_factory(bots=8, history_days=1, max_page_size=5, over_cap="400",
                          error_style="problem")
    with client_for(svc) as http:
        answer = http.get("/bots", params={"limit": 500})
    assert answer.status_code == 400
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["detail"] == "limit must be at most 5"


# --- repeated times --------------------------------------------------------------------------
@pytest.mark.parametrize("stat_ids", ["composite", "none"])
def test_a_bot_posting_one_record_per_shard_repeats_each_time(service_factory: Factory,
                                                             stat_ids: str) -> None:
    single = service_factory(bots=10, history_days=4, end=END, seed=3, stat_ids=stat_ids)
    sharded = service_factory(bots=10, history_days=4, end=END, seed=3, stat_ids=stat_ids,
                              repeated_times=0.5)
    twins = 0
    with client_for(single) as one_http, client_for(sharded) as two_http:
        assert one_http.get("/bots").json() == two_http.get("/bots").json()
        for bot in single.directory.bot_ids():
            one = one_http.get(f"/bots/{bot}/stats").json()
            two = two_http.get(f"/bots/{bot}/stats").json()
            assert two_http.get(f"/bots/{bot}/stat").json() == two[-1]
            if len(two) == len(one):
                assert two == one  # a bot that posts one record at a time: unchanged
                continue
            twins += 1
            assert len(two) == 2 * len(one)
            for original, first, second in zip(one, two[::2], two[1::2], strict=True):
                assert first["timestamp"] == second["timestamp"] == original["timestamp"]
                assert (first["shard_id"], second["shard_id"]) == (0, 1)
                for name in SPLIT:  # shard 0 takes the odd one
                    assert first[name] - second[name] in (0, 1)
                    assert first[name] + second[name] == original[name]
                alike = [{k: v for k, v in r.items() if k not in (*SPLIT, "id", "shard_id")}
                         for r in (original, first, second)]
                assert alike[0] == alike[1] == alike[2]
                if stat_ids == "none":
                    assert "id" not in first and "id" not in second and first != second
                else:
                    assert (first["id"], second["id"]) == (original["id"], original["id"] + "-1")
    assert 0 < twins < 10


# --- rate limits -----------------------------------------------------------------------------
# What the new spellings say of a bucket of 4 tokens refilled at 2 a second: with 2.5 tokens
# left after a request (full again at _NOW + 0.75), and on a refusal a quarter of a second
# before the next token (tests/test_service.py has the other families).
_NOW = 1_800_000_000.25
_NEW_SPELLINGS = {
    "x-reset-epoch-ms": ("1800000001000", "1800000000500"),
    "http-date": ("Fri, 15 Jan 2027 08:00:01 GMT", "Fri, 15 Jan 2027 08:00:01 GMT"),
    "github-403": ("1800000001", "1800000001"),
}


@pytest.mark.parametrize("family", list(_NEW_SPELLINGS))
def test_each_new_rate_limit_spelling_tells_the_reset(family: str) -> None:
    from pipeline.service._quota import TokenBucket, quota_headers

    bucket = TokenBucket(2.0, 4.0)
    bucket.tokens = 2.5
    passed, refused = _NEW_SPELLINGS[family]
    assert quota_headers(family, bucket, 0.0, now=_NOW) == {
        "X-RateLimit-Limit": "4", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": passed}
    bucket.tokens = 0.5
    assert quota_headers(family, bucket, 0.25, now=_NOW) == {
        "X-RateLimit-Limit": "4", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": refused}


@pytest.mark.parametrize(("family", "status"), [
    ("x-reset-epoch-ms", 429), ("http-date", 429), ("github-403", 403)])
def test_a_spent_quota_is_refused_in_each_new_spelling(service_factory: Factory, family: str,
                                                       status: int) -> None:
    svc = service_factory(bots=3, history_days=1, rate_limit=0.5, rate_burst=1,
                          rate_limit_headers=family)
    before = time.time()
    with client_for(svc) as http:
        answers = [http.get("/bots") for _ in range(2)]
    assert [a.status_code for a in answers] == [200, status]
    refused = answers[1]
    assert refused.json()["error"] == "rate limited: too many requests"
    assert refused.headers["X-RateLimit-Remaining"] == "0" and "Retry-After" not in refused.headers
    reset = refused.headers["X-RateLimit-Reset"]
    at = {"x-reset-epoch-ms": lambda: int(reset) / 1000, "github-403": lambda: int(reset),
          "http-date": lambda: email.utils.parsedate_to_datetime(reset).timestamp()}[family]()
    # The next token comes two seconds after the first request (0.5 a second), rounded up.
    assert before + 1 < at <= time.time() + 3


# --- settings --------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "field", "words"), [
    ({"paging": "links"}, "paging", "one of skip, offset, page, link, next-url, cursor"),
    ({"paging": "cursor"}, "list_envelope", "paging='cursor' tells the next page"),
    ({"paging": "next-url"}, "list_envelope", "paging='next-url' tells the next page"),
    ({"list_envelope": "total"}, "list_envelope", "other than total, count"),
    ({"list_envelope": "data.items"}, "list_envelope", "without dots"),
    ({"list_envelope": " data"}, "list_envelope", "without dots or spaces at its ends"),
    ({"total_header": 1}, "total_header", "a boolean"),
    ({"over_cap": "401"}, "over_cap", "one of cap, 400"),
    ({"over_cap": 400}, "over_cap", "one of cap, 400"),
    ({"repeated_times": 1.5}, "repeated_times", "a share between 0 and 1"),
    ({"faults": "github-429"}, "rate_limit_headers", "x-reset-epoch-ms, x-reset-delta, http-date"),
])
def test_the_convention_settings_refuse_what_the_service_cannot_play(
        kwargs: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidSetting) as caught:
        if "faults" in kwargs:
            ServiceConfig(faults=Faults(rate_limit_headers=kwargs["faults"]))
        else:
            ServiceConfig(**kwargs)
    assert caught.value.field == field and words in str(caught.value)


@pytest.mark.parametrize(("args", "words"), [
    (["--paging", "cursor"], "--list-envelope"),
    (["--paging", "pages"], "--paging"),
    (["--over-cap", "401"], "--over-cap"),
    (["--repeated-times", "2"], "--repeated-times"),
    (["--list-envelope", "count"], "--list-envelope"),
])
def test_serve_refuses_a_convention_it_cannot_play(args: list[str], words: str) -> None:
    result = CliRunner().invoke(cli, ["serve", *args])
    assert result.exit_code == 2
    assert words in result.output and "Traceback" not in result.output


def test_serve_passes_each_convention_flag_to_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[ServiceConfig] = []
    monkeypatch.setattr("pipeline.service.serve", lambda cfg, *args, **kwargs: served.append(cfg))
    result = CliRunner().invoke(cli, [
        "serve", "--paging", "next-url", "--list-envelope", "data", "--total-header",
        "--over-cap", "400", "--repeated-times", "0.25", "--rate-limit-headers", "github-403"])
    assert result.exit_code == 0, result.output
    cfg = served[0]
    assert (cfg.paging, cfg.list_envelope, cfg.total_header, cfg.over_cap, cfg.repeated_times,
            cfg.faults.rate_limit_headers) == ("next-url", "data", True, "400", 0.25, "github-403")
